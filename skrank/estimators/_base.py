"""Plumbing shared by every skrank estimator, written once.

``fit`` and ``partial_fit`` are one template (:class:`_RankLinearModel`); a
concrete estimator declares its solvers, its ``_parameter_constraints`` and
implements ``_solve(X, y, coef_init, intercept_init, sample_weight)``
returning a :class:`skrank.solvers.SolverResult` (developer guide,
``doc/architecture.rst``).
"""

import time
import warnings
from numbers import Integral

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin
from sklearn.exceptions import ConvergenceWarning
from sklearn.metrics import roc_auc_score
from sklearn.utils._array_api import check_same_namespace
from sklearn.utils._available_if import _AvailableIfDescriptor
from sklearn.utils._param_validation import StrOptions
from sklearn.utils.class_weight import compute_sample_weight
from sklearn.utils.metaestimators import available_if
from sklearn.utils.multiclass import check_classification_targets, type_of_target
from sklearn.utils.validation import _check_sample_weight, check_is_fitted, column_or_1d, validate_data

from ..backends import arrays
from ..backends.array_api_design import (
    array_api_namespace,
    device_of,
    to_namespace,
    to_numpy,
)
from ..backends.dask_design import is_dask_array
from ..backends.dispatch import external_kind
from ..datafits.rank_risk import RankRisk
from ..exceptions import ConstantOptimumWarning
from ..losses import get_loss
from ..metrics import _check_label_types, _dense
from ..penalties import get_penalty
from ..risks import _RISKS, BaseRisk, check_risk
from ..solvers.registry import choose_solver


def _check_class_weight_values(class_weight):
    """Raise a ValueError naming ``class_weight`` when a class's weight is negative, NaN or infinite."""
    for label, value in class_weight.items():
        try:
            number = float(value)
        except (TypeError, ValueError):
            number = np.nan
        if not (np.isfinite(number) and number >= 0.0):
            kind = "negative" if number < 0.0 else "not a finite number"
            raise ValueError(
                f"class_weight gives class {label!r} the weight {value!r}, which is {kind}: class "
                "weights multiply the samples' weights and must be finite and nonnegative (0 drops "
                f"the class's samples). Pass a nonnegative weight for class {label!r}."
            )


class _StreamingMethod(_AvailableIfDescriptor):
    """``partial_fit``: there with a solver that runs on batches, else an AttributeError naming those.

    Like :func:`sklearn.utils.metaestimators.available_if` (``hasattr`` is
    False with a full-batch solver), with the error of scikit-learn's
    ``MLPClassifier.partial_fit``: it says which solvers have the method.
    """

    def __init__(self, fn):
        super().__init__(fn, check=lambda estimator: estimator._streaming(), attribute_name=fn.__name__)

    def _check(self, obj, owner):
        if not obj._streaming():
            raise AttributeError(obj._no_partial_fit_message())


def _same_random_state(old, new):
    """Whether ``new`` is the ``random_state`` a stream was seeded with (the same object or integer)."""
    if old is new:
        return True
    integers = isinstance(old, Integral) and isinstance(new, Integral)
    return integers and int(old) == int(new)


_SAMPLES_METHOD_DOC = """{summary}

        Parameters
        ----------
        X : {{array-like, sparse matrix}} of shape (n_samples, n_features)
            Samples.

        Returns
        -------
        {returns}
            {description}
        """


def samples_method_doc(summary, returns, description):
    """A decorator that gives a method of the samples ``X`` alone its numpydoc docstring."""
    def decorate(method):
        method.__doc__ = _SAMPLES_METHOD_DOC.format(summary=summary, returns=returns,
                                                    description=description.replace("\n", "\n" + " " * 12))
        return method

    return decorate


def _scores_constant(X, coef):
    """Whether ``X @ coef`` is constant: ``coef`` zero, or the scores of an in-memory ``X`` within 1e-6."""
    coef = np.asarray(to_numpy(coef), dtype=np.float64).ravel()
    if not np.any(coef):
        return True
    if np.max(np.abs(coef)) > 1e-6 or external_kind(X) is not None:
        return False
    scores = np.asarray(X @ coef).ravel()
    return bool(np.ptp(scores) <= 1e-6)


def _problem_labels(classes):
    """The positive class of each binary problem: one for two classes, one per class beyond (one-vs-rest).

    ``classes`` None (a regression) is one problem, of the targets as given.
    """
    if classes is None:
        return [None]
    return [classes[1]] if classes.shape[0] == 2 else list(classes)


def _labels_of(y):
    """The distinct labels of ``y``, sorted; of a Dask ``y`` by a reduction on its chunks."""
    if not is_dask_array(y):
        return np.unique(y)
    import dask.array as da

    return np.asarray(da.unique(y).compute())


def _lazy_targets(y, n, task):
    """A Dask vector of targets checked where its chunks live: its length ``n``, a regression's finite values.

    Nothing of length ``n`` is gathered: the check of finite values is
    one reduction; a classifier's labels are checked from their distinct
    values (:func:`_labels_of`).
    """
    if np.isnan(y.shape[0]):
        raise ValueError("y has unknown chunk sizes (NaN); call y.compute_chunk_sizes() first.")
    if y.shape[0] != n:
        raise ValueError(f"y must be a vector of length {n} (the rows of X), got shape {y.shape}.")
    if task == "regression":
        y = y.astype(np.float64)
        if not bool(y.map_blocks(np.isfinite, dtype=bool).all().compute()):
            raise ValueError("Input y contains NaN or infinity.")
    return y


def _problem_target(y, positive):
    """The targets of one problem: ``y`` for a regression, else +1 for class ``positive``, -1 for the rest."""
    return y if positive is None else np.where(y == positive, 1.0, -1.0)


class _RankLinearModel(BaseEstimator):
    """Base of all linear rank-risk estimators (not public): the fit template.

    ``fit`` and ``partial_fit`` are written here once.  The classifier and
    regressor mixins supply what differs: the checks of the targets
    (:meth:`_check_targets`), their classes (:meth:`_fit_classes`,
    :meth:`_stream_classes`; None for a regression) and the shape of the
    fitted coefficients (:meth:`_set_coefficients`).  An estimator
    declares its solvers (``_solvers``, ``_AUTO``, ``_STREAMING_SOLVERS``)
    and implements ``_check_before_solve`` and ``_solve``.
    """

    _task = None  # "classification" or "regression"
    _accept_sparse = "csr"
    #: whether ``fit`` takes a multi-label indicator ``y`` (one ranking per label)
    _multilabel = False
    #: whether the targets of a Dask ``X`` may stay a Dask array on the workers (the solvers that
    #: do not take them so get them gathered, :meth:`_RegisteredSolverModel._solve`)
    _keeps_dask_targets = False

    # --- pieces the subclasses may use -------------------------------------------------
    def _get_risk(self):
        return check_risk(self.risk)

    def _get_loss(self):
        loss = get_loss(self.loss, epsilon=getattr(self, "epsilon", 1.0))
        if loss.task != self._task:
            kind = "classifier" if self._task == "classification" else "regressor"
            raise ValueError(
                f"loss={self.loss!r} is a {loss.task} loss and cannot be used by a {kind}."
            )
        return loss

    def _get_penalty(self):
        return get_penalty(
            getattr(self, "penalty", "l2"), self.alpha, getattr(self, "l1_ratio", 0.5)
        )

    def _check_before_solve(self, X, sample_weight=None):
        """Hook: resolve and check the risk, loss and solver before fitting."""

    #: The estimator's solvers by name: its rows of the table of :mod:`skrank.solvers.registry`.
    _solvers = {}
    #: The order in which ``solver="auto"`` tries them (:func:`skrank.solvers.registry.auto_preference`).
    _AUTO = ()

    def _choose(self, requested, costly=False):
        """The row of the solver to run for the problem ``self._problem`` (its keywords of ``choose_solver``).

        ``requested`` is a solver's name or ``"auto"``; ``costly``: one
        exact pass of the objective would be too costly
        (:func:`skrank.solvers.registry.choose_solver`).
        """
        return choose_solver(requested, self._AUTO, solvers=self._solvers, costly=costly, **self._problem)

    def _takes_external(self):
        """Whether the configured solver fits an external ``X`` (Dask, array API).

        ``"auto"`` does, and so do the full-batch solvers of the estimator's
        rows of the solver table.
        """
        entry = self._solvers.get(self.solver)
        return self.solver == "auto" or (entry is not None and entry.external)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        tags.array_api_support = self._takes_external()
        return tags

    # --- the hooks of the classifier and the regressor ----------------------------------
    def _check_targets(self, y, classes=None):  # pragma: no cover - abstract
        """Hook: ``y`` checked and converted; with ``classes`` (a stream's), also checked against them."""
        raise NotImplementedError

    def _fit_classes(self, y, sample_weight):  # pragma: no cover - abstract
        """Hook: the classes of ``fit``'s samples of positive weight (None for a regression)."""
        raise NotImplementedError

    def _stream_classes(self, classes, reset):  # pragma: no cover - abstract
        """Hook: the classes of a stream, from ``partial_fit``'s ``classes`` (None for a regression)."""
        raise NotImplementedError

    def _set_coefficients(self, coefs, intercepts):  # pragma: no cover - abstract
        """Hook: ``coef_`` and ``intercept_`` from each problem's coefficients and intercept."""
        raise NotImplementedError

    # --- fit ------------------------------------------------------------------------------
    def fit(self, X, y, sample_weight=None):
        """Fit the model.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Training data.
        y : array-like of shape (n_samples,) or (n_samples, n_labels)
            Targets of a regressor; class labels of a classifier, where two
            classes give one binary problem and more give one-vs-rest
            problems.  PartialAUCClassifier and AveragePrecisionClassifier
            also take a multi-label indicator matrix, dense or SciPy sparse,
            of 0 and 1 (or of two other values, such as -1 and 1, the larger
            meaning the label is on): one ranking per label (``classes_``
            then holds the labels' indices, and ``predict`` returns a matrix
            of the same two values).  Labels must be all strings or all
            numbers.
        sample_weight : array-like of shape (n_samples,), default=None
            Nonnegative weights of the samples: the risk becomes that of the
            weighted empirical distribution (integer weights fit as repeated
            rows, zero weights as dropped rows; :mod:`skrank.risks`).
            Multiplied by ``class_weight``'s weights where the estimator has
            that parameter.

        Returns
        -------
        self : object
            The fitted estimator.
        """
        self._validate_params()
        self.__dict__.pop("_streams", None)
        X, y = self._validate_fit_data(X, y)
        weighted = sample_weight is not None or getattr(self, "class_weight", None) is not None
        if is_dask_array(y) and weighted:
            y = arrays.to_host(y)  # the weights are checked against the targets in memory
        y = self._check_targets(y)
        sample_weight = self._fit_sample_weight(X, y, sample_weight)
        X, y, sample_weight = self._drop_weightless(X, y, sample_weight)
        classes = self._fit_classes(y, sample_weight)
        self._check_before_solve(X, sample_weight)
        problems = self._problem_targets(y, classes)
        starts = self._warm_starts(len(problems), X.shape[1], warm=getattr(self, "warm_start", False))
        results = [self._run_solver(X, target, coef_init, intercept_init, sample_weight)
                   for target, (coef_init, intercept_init) in zip(problems, starts)]
        if classes is not None:
            self.classes_ = classes
        self._set_coefficients([result.coef for result in results], [result.intercept for result in results])
        self._warn_if_constant(X, results, classes)
        self._set_solver_summary(results)
        self._store_results(results)
        self._place_fitted(X)
        return self

    @staticmethod
    def _problem_targets(y, classes):
        """The targets of each problem (:func:`_problem_target`); a classifier's ``classes`` name them."""
        return [_problem_target(y, positive) for positive in _problem_labels(classes)]

    def _warm_starts(self, n_problems, n_features, warm=True):
        """Each problem's start ``(coef_init, intercept_init)``: the fitted ones, or ``(None, None)``.

        The fitted coefficients are a start when ``warm`` and they are of
        the same problems and features.
        """
        coef = self._warm_start_coef() if warm else None
        coef = None if coef is None else np.atleast_2d(to_numpy(coef))
        if coef is None or coef.shape != (n_problems, n_features):
            return [(None, None)] * n_problems
        return [(coef[j].copy(), self._warm_start_intercept(j)) for j in range(n_problems)]

    def _warm_start_coef(self):
        """Hook: the fitted coefficients a warm start (or ``partial_fit``) goes on from; None before a fit."""
        return getattr(self, "coef_", None)

    def _warm_start_intercept(self, j):
        """Hook: the solver's starting intercept of problem ``j`` on a warm start (or ``partial_fit``)."""
        return float(np.atleast_1d(to_numpy(self.intercept_))[j])

    def _set_solver_summary(self, results):
        """``n_iter_``, ``objective_`` and ``objective_history_``: numbers for one problem, else arrays."""
        histories = [np.asarray(result.objective_history) for result in results]
        if len(results) == 1:
            self.n_iter_ = int(results[0].n_iter)
            self.objective_ = float(results[0].objective)
            self.objective_history_ = histories[0]
        else:
            self.n_iter_ = np.asarray([result.n_iter for result in results])
            self.objective_ = np.asarray([result.objective for result in results])
            self.objective_history_ = histories

    def _store_results(self, results):
        """Hook: keep solver extras of each binary problem (``results[j].info``)."""

    # --- partial_fit ----------------------------------------------------------------------
    #: The solvers that run on batches of data, with ``partial_fit`` (each estimator names its own).
    _STREAMING_SOLVERS = ()
    #: The parameters a stream's state belongs to: ``partial_fit`` refuses a change between calls.
    _STREAM_FIXED = ("solver",)

    def _streaming(self):
        """Whether the solver runs on batches of data (``partial_fit`` is then available)."""
        return self.solver in self._STREAMING_SOLVERS

    def _no_partial_fit_message(self):
        """The AttributeError of ``partial_fit`` with a full-batch solver: it names the streaming ones."""
        name = type(self).__name__
        solvers = " or ".join(repr(solver) for solver in self._STREAMING_SOLVERS)
        return (f"{name} has no attribute 'partial_fit' with solver={self.solver!r}: partial_fit is only "
                f"available with the solvers that run on batches of data, solver={solvers}. Set "
                f"{name}(solver=...) to one of them to fit a stream of batches, or call fit, which "
                "takes the whole data at once.")

    def _partial_fit(self, X, y, classes=None, sample_weight=None):
        """One pass of each problem's stream over a batch: the body of ``partial_fit``.

        The first call starts the streams, from the fitted coefficients
        when there are some (a ``fit`` before); later calls go on with
        them.  ``classes``: a classifier's argument (None for a regression).
        """
        reset = not hasattr(self, "_streams")
        self._validate_params()
        classes = self._stream_classes(classes, reset)
        X, y = self._validate_fit_data(X, y, reset=reset and not hasattr(self, "coef_"))
        y = self._check_targets(y, classes)
        if reset and classes is not None:
            self.classes_ = classes
        targets = _problem_labels(classes)
        X, y, sample_weight = self._pass_streams(X, y, targets, sample_weight, reset)
        self._set_coefficients([stream.coef for stream in self._streams],
                               [stream.intercept for stream in self._streams])
        self._after_partial_fit(X, y, sample_weight)
        if classes is not None:
            self._warn_if_ranked_backwards(X, y, targets, sample_weight)
        return self

    def _pass_streams(self, X, y, targets, sample_weight, reset):
        """One pass of the streaming solver over a batch, for each binary problem in ``targets``.

        ``reset``: the first call, which starts the streams.  Returns the
        batch's samples of positive weight and their weights (times
        ``class_weight``'s; None for equal weights).
        """
        self._check_streamable(X)
        sample_weight = self._fit_sample_weight(X, y, sample_weight)
        X, y, sample_weight = self._drop_weightless(X, y, sample_weight)
        if reset:
            self._start_streams(X, len(targets), sample_weight)
        else:
            self._refresh_streams(X, sample_weight)
        self._stream_random_state = self.random_state
        for stream, positive in zip(self._streams, targets):
            stream.partial(X, _problem_target(y, positive), sample_weight)
        self.n_iter_ = self._streams[0].passes
        return X, y, sample_weight

    def _check_streamable(self, X):
        """Raise a ValueError for what ``partial_fit`` cannot take: balanced class weights, external ``X``."""
        if getattr(self, "class_weight", None) == "balanced":
            raise ValueError("class_weight='balanced' needs the whole data and is not available in "
                             "partial_fit; pass a dict or sample_weight.")
        kind = external_kind(X)
        if kind is not None:
            raise ValueError(f"partial_fit takes X in memory (a NumPy array or a SciPy sparse matrix), "
                             f"not {kind}: its solver draws rows. Use fit, whose full-batch solvers take it.")

    def _start_streams(self, X, n_problems, sample_weight):
        """A stream per problem, from the fitted coefficients when there are some (a ``fit`` before)."""
        self._check_before_solve(X, sample_weight)
        self._streams = [self._new_stream(X.shape[1], coef_init, intercept_init)
                         for coef_init, intercept_init in self._warm_starts(n_problems, X.shape[1])]
        self._stream_fixed = {name: getattr(self, name) for name in self._STREAM_FIXED}

    def _refresh_streams(self, X, sample_weight):
        """Give the streams the current parameters; a new ``random_state`` reseeds them.

        Every call reads the current parameters, as scikit-learn's SGD
        estimators do, and refuses a change of those in :attr:`_STREAM_FIXED`.
        """
        self._check_stream_unchanged()
        self._check_before_solve(X, sample_weight)
        reseed = not _same_random_state(getattr(self, "_stream_random_state", self.random_state),
                                        self.random_state)
        for stream in self._streams:
            if reseed:
                stream.reseed(self.random_state)
            self._update_stream(stream)

    def _check_stream_unchanged(self):
        """Raise a ValueError when a parameter of :attr:`_STREAM_FIXED` changed since the stream began."""
        fixed = getattr(self, "_stream_fixed", {})
        for name, old in fixed.items():
            new = getattr(self, name)
            if not (new is old or new == old):
                raise ValueError(
                    f"{name}={new!r} differs from {name}={old!r} of the first call to partial_fit: the "
                    f"state that a stream carries between calls belongs to its {name}, which cannot "
                    f"change between calls. Set {name}={old!r} back to go on with this stream, or call "
                    "fit (or partial_fit on a clone) to start a new one."
                )

    def _new_stream(self, n_features, coef_init=None, intercept_init=None):  # pragma: no cover
        """Hook: the solver's state for ``partial_fit`` (``partial``, ``coef``, ``intercept``, ``passes``)."""
        raise NotImplementedError

    def _update_stream(self, stream):
        """Hook: give a stream the current parameters (every ``partial_fit`` call after the first)."""

    def _after_partial_fit(self, X, y, sample_weight):
        """Hook: refresh what the streams' coefficients do not give, on the batch just passed.

        ``X``, ``y`` and ``sample_weight`` are the batch's samples of positive
        weight and their weights (times ``class_weight``'s; None for equal
        weights).
        """

    def _solve(self, X, y, coef_init, intercept_init, sample_weight=None):  # pragma: no cover - abstract
        raise NotImplementedError

    def _fit_sample_weight(self, X, y, sample_weight):
        """The validated weights (times ``class_weight``), or None for equal weights.

        Weights of one everywhere are None: the fit is then exactly the
        unweighted one, with any solver.  Weights whose values or sum
        overflow are refused (ValueError naming ``sample_weight``); others
        are kept as given, at any scale.  The objectives compute with the
        weights' ratios (the weighted empirical distribution, rescaled
        internally so that tiny or huge weights neither underflow nor
        overflow); the total weight ``W`` matters only where repeated rows
        need it (``alpha=None`` is ``1 / W``, the integer counts of ``TopK`` and
        ``RankedRange`` and Platt's smoothed targets are in units of weight;
        doc/sample_weights.rst).
        """
        class_weight = getattr(self, "class_weight", None)
        if sample_weight is None and class_weight is None:
            return None
        if sample_weight is not None and not np.isscalar(sample_weight):
            sample_weight = arrays.to_host(sample_weight)  # n values, on the host for an external X
        weights = _check_sample_weight(sample_weight, np.asarray(y), dtype=np.float64,
                                       ensure_non_negative=True)
        if class_weight is not None:
            if isinstance(class_weight, dict):
                unknown = [c for c in class_weight if c not in set(np.unique(y).tolist())]
                if unknown:
                    raise ValueError(f"class_weight names classes not in y: {unknown}.")
                _check_class_weight_values(class_weight)
            with np.errstate(over="ignore"):
                weights = weights * compute_sample_weight(class_weight, y)
        with np.errstate(over="ignore"):
            total = float(np.sum(weights))
        if not (np.all(np.isfinite(weights)) and np.isfinite(total)):
            raise ValueError(
                "sample_weight overflows: " + ("its values times class_weight's" if class_weight is not None
                                               else "its values") +
                f" or their sum exceed the largest float ({np.finfo(np.float64).max:.3g}); rescale "
                "sample_weight (e.g. divide it by its largest value).")
        if not total > 0.0:
            raise ValueError("sample_weight sums to zero: at least one sample needs a positive weight.")
        if np.all(weights == 1.0):
            return None
        return weights

    @staticmethod
    def _drop_weightless(X, y, sample_weight):
        """Remove the samples of weight zero (a weighted risk ignores them, :mod:`skrank.risks`)."""
        if sample_weight is None or np.all(sample_weight > 0.0):
            return X, y, sample_weight
        keep = sample_weight > 0.0
        xp = array_api_namespace(X)
        if xp is not None:
            rows = to_namespace(np.flatnonzero(keep), xp, device_of(X))
            return xp.take(X, rows, axis=0), y[keep], sample_weight[keep]
        return X[keep], y[keep], sample_weight[keep]

    def _validate_fit_data(self, X, y, reset=True):
        if external_kind(X) is not None:
            return self._validate_external_data(X, y, reset)
        X, y = validate_data(
            self,
            X,
            y,
            reset=reset,
            accept_sparse=self._accept_sparse,
            dtype=[np.float64, np.float32],
            y_numeric=self._task == "regression",
            ensure_min_samples=2 if reset else 1,
            multi_output=self._multilabel,
        )
        if X.dtype != np.float64:
            X = X.astype(np.float64)
        return X, y

    def _validate_external_data(self, X, y, reset):
        """An external ``X`` checked where it lives, without gathering it; ``y`` in memory (``n`` values).

        A Dask ``X`` is checked finite in one pass over its chunks; an
        array-API ``X`` (CuPy...) on its device, with scikit-learn's array
        API dispatch on.
        """
        X = arrays.check_where_it_lives(X)
        n, d = X.shape
        if reset:
            self.n_features_in_ = d
            self.__dict__.pop("feature_names_in_", None)
        elif d != self.n_features_in_:
            raise ValueError(f"X has {d} features, but {type(self).__name__} is expecting "
                             f"{self.n_features_in_} features as input.")
        if n < (2 if reset else 1):
            raise ValueError(f"Found array with {n} sample(s) while a minimum of 2 is required.")
        if is_dask_array(X) and not bool(
                X.map_blocks(lambda block: np.all(np.isfinite(block)).reshape(1, 1), chunks=(1, 1),
                             dtype=bool).all().compute()):
            raise ValueError("Input X contains NaN or infinity.")
        if self._keeps_dask_targets and is_dask_array(X) and is_dask_array(y) and y.ndim == 1:
            return X, _lazy_targets(y, n, self._task)
        y = arrays.to_host(y)
        if y.ndim == 2 and self._multilabel and y.shape[0] == n:
            return X, y  # a multi-label indicator (or a column), checked by _check_targets
        if y.ndim != 1 or y.shape[0] != n:
            shapes = (f"a vector of length {n} or, multi-label, a matrix of {n} rows" if self._multilabel
                      else f"a vector of length {n}")
            raise ValueError(f"y must be {shapes} (the rows of X), got shape {y.shape}.")
        if self._task == "regression":
            y = y.astype(np.float64)
            if not np.all(np.isfinite(y)):
                raise ValueError("Input y contains NaN or infinity.")
        return X, y

    def _constant_optimum_advice(self):
        """Hook: what to change when a fit's optimum is the constant classifier, or None (no warning)."""
        return None

    def _warn_if_constant(self, X, results, classes):
        """A ConstantOptimumWarning when a converged problem's optimum is the constant classifier.

        A problem's coefficients are constant when they are zero, or, for
        the solvers that stop near a zero optimum without reaching it
        (the ADMM), when its scores ``X coef`` on an in-memory ``X`` differ
        by at most ``1e-6`` (a margin no loss tells apart).  Unconverged
        problems already have their ConvergenceWarning.
        """
        advice = self._constant_optimum_advice()
        if advice is None or classes is None:
            return
        labels = classes if len(results) == len(classes) else classes[1:]
        constant = [np.asarray(label).tolist() for result, label in zip(results, labels)
                    if result.converged and _scores_constant(X, result.coef)]
        if not constant:
            return
        if len(results) == 1:
            what = "coef_ is zero, so every sample gets the same score and predict returns one class"
        else:
            which = f"class {constant[0]!r}" if len(constant) == 1 else f"the classes {constant}"
            what = (f"coef_ is zero for {which} (one-vs-rest), so every sample gets the same score for "
                    f"{'it' if len(constant) == 1 else 'them'}")
        risk = self._risk
        params = ", ".join(f"{name}={value!r}" for name, value in risk.get_params().items())
        warnings.warn(
            f"{type(self).__name__}: the optimum of the objective is the constant classifier on this data: "
            f"{what}; nothing is ranked. The fit is exact (more iterations do not change it): the risk "
            f"{type(risk).__name__}({params}) of the {self.loss} losses is smallest without a ranking here, "
            f"as a tail risk at a high level is where the classes overlap. {advice}",
            ConstantOptimumWarning,
        )

    def _warn_if_not_converged(self, result):
        if not result.converged:
            # a solver that could not move from its start says so: its coefficients are the start's
            at_start = " (it stopped at its starting point)" if result.n_iter == 0 else ""
            if result.info.get("kept_start"):
                at_start = (" (every iterate ended above its starting point, or above w = 0 where that is "
                            "lower, which it returned)")
            warnings.warn(
                f"{type(self).__name__} did not converge after {result.n_iter} iterations{at_start} "
                f"(stopping criterion {result.stop_criterion:.3g} > tol={self.tol}); "
                "increase max_iter or tol.",
                ConvergenceWarning,
            )

    def _run_solver(self, X, y, coef_init, intercept_init, sample_weight=None):
        start = time.perf_counter()
        result = self._solve(X, y, coef_init, intercept_init, sample_weight)
        if self.verbose:
            solver = getattr(self, "_solver", getattr(self, "solver", ""))
            state = "converged" if result.converged else "did not converge"
            print(f"[{type(self).__name__}] solver={solver!r} {state} after {result.n_iter} iterations "
                  f"in {time.perf_counter() - start:.2f} s: F={result.objective:.10g}, "
                  f"criterion={result.stop_criterion:.3g}", flush=True)
        self._warn_if_not_converged(result)
        self._last_result_info = result.info  # for the benchmarks (passes, times)
        return result

    def _linear_predict(self, X, method):
        """``X @ coef_.T + intercept_`` with one column per problem, where ``X`` lives (lazy for Dask).

        Under array API dispatch, ``X`` must be of the namespace and device
        of the fit (``method`` names the caller in the error), as in
        scikit-learn.
        """
        self._check_fitted_namespace(X, method)
        coef = np.atleast_2d(to_numpy(self.coef_)).T
        intercept = np.atleast_1d(to_numpy(self.intercept_))
        if external_kind(X) is not None:
            X = arrays.check_where_it_lives(X)
            if X.shape[1] != self.n_features_in_:
                raise ValueError(f"X has {X.shape[1]} features, but {type(self).__name__} is expecting "
                                 f"{self.n_features_in_} features as input.")
        else:
            X = validate_data(
                self, X, accept_sparse=self._accept_sparse, dtype=[np.float64, np.float32], reset=False
            )
        return arrays.linear_scores(X, coef, intercept)

    def _check_fitted_namespace(self, X, method):
        """Fitted, and under array API dispatch on ``X``'s namespace and device (as in scikit-learn)."""
        check_is_fitted(self)
        check_same_namespace(X, self, attribute="coef_", method=method)

    def _place_fitted(self, X):
        """Move the fitted arrays (``coef_``...) to the namespace and device of an array-API ``X``.

        As scikit-learn's estimators do under array API dispatch; labels
        that are not numbers (strings) stay NumPy arrays.
        """
        xp = array_api_namespace(X)
        if xp is None:
            return
        device = device_of(X)
        for name, value in list(vars(self).items()):
            fitted = name.endswith("_") and not name.startswith("_")
            if fitted and isinstance(value, np.ndarray) and value.dtype.kind in "biuf":
                setattr(self, name, to_namespace(value, xp, device))


    def _warn_if_ranked_backwards(self, X, y, targets, sample_weight):
        """Warn when ``X coef_`` ranks the classes of a ``partial_fit`` batch worse than chance.

        A stochastic stream can, before its steps settle, hold coefficients
        that rank its own training batch backwards; ``predict`` then falls
        back on the majority class (Platt fits) or mislabels most samples.
        One ConvergenceWarning names the problems (classes) concerned and
        their area under the ROC curve on the batch.
        """
        coef = np.atleast_2d(to_numpy(self.coef_))
        worse = []
        for j, positive in enumerate(targets):
            target = y == positive
            if target.all() or not target.any():
                continue
            scores = np.asarray(X @ coef[j], dtype=np.float64).ravel()
            if np.ptp(scores) == 0.0:
                continue  # no ranking yet (no step taken)
            auc = roc_auc_score(target, scores, sample_weight=sample_weight)
            if auc < 0.5:
                worse.append(f"{auc:.3f} for class {np.asarray(positive).tolist()!r}")
        if worse:
            warnings.warn(
                f"{type(self).__name__}.partial_fit: the coefficients rank the classes of this batch "
                f"worse than chance (area under the ROC curve {', '.join(worse)}): the stochastic steps "
                f"have not settled. Pass more batches (or the same ones again), standardise the "
                f"features, or fit the whole data with fit.",
                ConvergenceWarning,
            )


class _RegisteredSolverModel(_RankLinearModel):
    """A rank-risk model whose solvers come from the table of :mod:`skrank.solvers.registry`.

    Subclasses declare their solvers (``_solvers``, ``_AUTO``,
    ``_STREAMING_SOLVERS``) and define ``_solver_options`` (each solver's
    keyword arguments beyond the shared ones).
    """

    _parameter_constraints = {
        "risk": [StrOptions(set(_RISKS)), BaseRisk],  # the names skrank.risks.check_risk accepts
    }
    # the stream's intercept is fitted or not from its first step
    _STREAM_FIXED = ("solver", "fit_intercept")
    _keeps_dask_targets = True

    def _new_stream(self, n_features, coef_init=None, intercept_init=None):
        from ..solvers.stochastic.sgd import SGDStream

        options = self._solver_options().get("sgd", {})
        return SGDStream(self._risk, self._loss_obj, self._penalty_obj, fit_intercept=self.fit_intercept,
                         batch_size=options.get("batch_size", 64),
                         learning_rate=options.get("learning_rate", "auto"),
                         random_state=options.get("random_state"), coef_init=coef_init,
                         intercept_init=intercept_init, n_features=n_features)

    def _update_stream(self, stream):
        options = self._solver_options().get("sgd", {})
        stream.update(self._risk, self._loss_obj, self._penalty_obj, batch_size=options.get("batch_size", 64),
                      learning_rate=options.get("learning_rate", "auto"))

    def _choose_solver(self, risk, X, sample_weight=None):
        """Resolve the loss, the penalty and the solver for ``risk`` (a clear error if it does not fit).

        Only some solvers take sample weights, and only the full-batch ones
        an ``X`` that is not in memory (a Dask or array-API array,
        :func:`skrank.backends.dispatch.external_kind`).
        """
        self._risk = risk
        self._loss_obj = self._get_loss()
        self._penalty_obj = self._get_penalty()
        self._problem = dict(risk=risk, loss=self._loss_obj, penalty=self._penalty_obj,
                             weighted=sample_weight is not None, external=external_kind(X))
        self._solver_info = self._choose(self.solver)
        self._solver = self._solver_info.name

    def _solve(self, X, y, coef_init, intercept_init, sample_weight=None):
        """Run ``self._solver_info`` (a :class:`skrank.solvers.registry.SolverInfo`).

        With the shared keyword arguments, the estimator's own options for
        that solver (``_solver_options``) and the entry's fixed options.
        """
        info = self._solver_info
        options = dict(max_iter=self.max_iter, tol=self.tol, coef_init=coef_init,
                       intercept_init=intercept_init, verbose=self.verbose)
        options.update(self._solver_options().get(info.name, {}))
        options.update(info.options)
        if is_dask_array(y) and not info.dask_targets:
            y = arrays.to_host(y)
        datafit = RankRisk(X, y, self._risk, self._loss_obj, fit_intercept=self.fit_intercept,
                           sample_weight=sample_weight)
        return info.load()(datafit, self._penalty_obj, **options)


class RankLinearClassifierMixin(ClassifierMixin):
    """The classifiers' part of the fit template: class labels, one-vs-rest problems, prediction."""

    _task = "classification"

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        if self._multilabel:
            tags.classifier_tags.multi_label = True
            tags.target_tags.multi_output = True
        return tags

    def _validate_fit_data(self, X, y, reset=True):
        _check_label_types(y, "y")  # before NumPy turns numbers mixed with strings into strings
        if self._multilabel:
            y = _dense(y)  # a sparse multi-label indicator: n_samples x n_labels numbers
        return super()._validate_fit_data(X, y, reset)

    def _check_targets(self, y, classes=None):
        """Class labels; with a stream's ``classes``, all among them.

        A multi-label indicator ``y`` may hold any two values, 0 and 1 or
        -1 and 1, the larger one meaning the label is on.
        """
        if np.ndim(y) == 2 and np.shape(y)[1] == 1:
            y = column_or_1d(y, warn=True)
        if np.ndim(y) == 2:
            if classes is not None:
                raise ValueError(f"{type(self).__name__}.partial_fit takes class labels of shape "
                                 "(n_samples,); fit a multi-label y with fit.")
            if type_of_target(y, input_name="y") != "multilabel-indicator":
                raise ValueError("A 2-D y must be a multi-label indicator matrix of two values (0 and 1, or "
                                 "-1 and 1) with at least two columns; got "
                                 f"{type_of_target(y, input_name='y')!r} targets.")
            if getattr(self, "class_weight", None) is not None:
                raise ValueError("class_weight is not supported with a multi-label y; pass per-sample "
                                 "weights as sample_weight.")
            return np.asarray(y)
        check_classification_targets(_labels_of(y) if is_dask_array(y) else y)
        if classes is not None:
            unknown = np.setdiff1d(_labels_of(y), classes)
            if unknown.size:
                raise ValueError(f"y holds labels {unknown.tolist()} that are not in classes.")
        return y

    def _fit_classes(self, y, sample_weight):
        """The classes of ``y``, at least two (``y`` holds the samples of positive weight).

        A multi-label ``y`` gives the labels' indices, as in scikit-learn's
        ``OneVsRestClassifier``; ``multilabel_`` records which, and
        ``_label_values`` the two values of ``y``, which ``predict`` returns.
        """
        self.multilabel_ = y.ndim == 2
        if self.multilabel_:
            for j in range(y.shape[1]):
                if np.unique(y[:, j]).shape[0] < 2:
                    raise ValueError(f"{type(self).__name__} needs both values of every label; label {j} "
                                     f"holds only {y[0, j]!r}"
                                     + (" among the samples of positive weight." if sample_weight is not None
                                        else "."))
            self._label_values = np.unique(y)
            return np.arange(y.shape[1])
        classes = _labels_of(y)
        if classes.shape[0] < 2:
            raise ValueError(
                f"{type(self).__name__} needs samples of at least two classes in y; "
                f"got only class {classes[0]!r}"
                + (" among the samples of positive weight." if sample_weight is not None else ".")
            )
        return classes

    def _stream_classes(self, classes, reset):
        """The classes of a stream: those given to its first call (or fitted), the same on later calls."""
        if getattr(self, "multilabel_", False):
            raise ValueError(f"{type(self).__name__}.partial_fit cannot go on from a multi-label fit; "
                             "fit the labels again with fit.")
        if reset and classes is None:
            if not hasattr(self, "classes_"):
                raise ValueError("classes must be passed on the first call to partial_fit.")
            classes = self.classes_
        if classes is not None:
            _check_label_types(classes, "classes")
        classes_given = None if classes is None else np.unique(np.asarray(classes))
        if not reset:
            if classes_given is not None and not np.array_equal(classes_given, self.classes_):
                raise ValueError(f"classes={classes_given.tolist()} differs from the classes of the first "
                                 f"call to partial_fit, {self.classes_.tolist()}.")
            return self.classes_
        if classes_given.shape[0] < 2:
            raise ValueError(f"{type(self).__name__} needs at least two classes; got classes="
                             f"{classes_given.tolist()}.")
        if hasattr(self, "classes_") and not np.array_equal(classes_given, self.classes_):
            raise ValueError(f"classes={classes_given.tolist()} differs from the fitted classes "
                             f"{self.classes_.tolist()}.")
        return classes_given

    @staticmethod
    def _problem_targets(y, classes):
        """One binary problem per class beyond two (one-vs-rest), or per label of a multi-label ``y``."""
        if y.ndim == 2:
            on = np.max(y)  # the larger of the indicator's two values marks a label that is on
            return [np.where(y[:, j] == on, 1.0, -1.0) for j in range(y.shape[1])]
        return [_problem_target(y, positive) for positive in _problem_labels(classes)]

    def _is_multilabel_fit(self):
        return getattr(self, "multilabel_", False)

    def _set_coefficients(self, coefs, intercepts):
        """``coef_`` of shape ``(n_problems, n_features)`` and ``intercept_`` of shape ``(n_problems,)``."""
        self.coef_ = np.vstack(coefs)
        self.intercept_ = np.asarray(intercepts, dtype=np.float64)

    @_StreamingMethod
    def partial_fit(self, X, y, classes=None, sample_weight=None):
        """One pass of the stochastic solver over a batch of samples.

        Available when the solver runs on batches (``solver="sgd"``;
        ``"soap"`` for AveragePrecisionClassifier, ``"ppd-sg"`` and
        ``"ppd-adagrad"`` for PartialAUCClassifier; with another solver the
        attribute is missing and its AttributeError names these): the
        solver's state (coefficients, step, generator and whatever else its
        steps carry, see the estimator's Notes) is kept between calls, and
        each call runs one epoch over the samples it is given, as
        scikit-learn's ``SGDClassifier.partial_fit`` does.  After a ``fit``,
        the passes start from its coefficients.  Where the decision function
        is a Platt fit on the scores (PartialAUCClassifier,
        AveragePrecisionClassifier), that fit is redone after each call on
        the call's batch, the only data at hand.

        Every call reads the estimator's current parameters, as
        scikit-learn's SGD estimators do: a ``set_params`` between calls
        (``alpha``, the risk, the loss, the step settings, ``batch_size``,
        ``class_weight``...) takes effect at the next call, and a new
        ``random_state`` reseeds the stream's generator.  The parameters
        the stream's state belongs to cannot change between calls: the
        ``solver`` (and ``fit_intercept`` for ``"sgd"``, ``optimizer`` for
        ``"soap"``); a change raises a ValueError, and ``fit``, or
        ``partial_fit`` on a clone, starts a new stream.  A
        ConvergenceWarning says when the coefficients rank the classes of
        the call's batch worse than chance (area under the ROC curve below
        one half): the steps have not settled yet.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            A batch of training data.
        y : array-like of shape (n_samples,)
            Its class labels, all among ``classes``.
        classes : array-like of shape (n_classes,), default=None
            Every class of the stream; required on the first call (unless
            the estimator was fitted), and equal to it on later calls.
        sample_weight : array-like of shape (n_samples,), default=None
            Nonnegative weights of the batch's samples (see ``fit``); the
            stochastic solvers draw the samples of a pass with probabilities
            proportional to them.

        Returns
        -------
        self : object
            The estimator.
        """
        return self._partial_fit(X, y, classes, sample_weight)

    @samples_method_doc("Signed scores: positive means ``classes_[1]`` (binary).",
                        "ndarray of shape (n_samples,) or (n_samples, n_classes)",
                        "``X @ coef_.T + intercept_``: one column for two classes, one\n"
                        "per class (one-vs-rest) for more.")
    def decision_function(self, X):
        return arrays.one_column_flat(self._linear_predict(X, "decision_function"))

    @samples_method_doc("Predicted class labels.",
                        "ndarray of shape (n_samples,)",
                        "The class of each sample among ``classes_``: ``classes_[1]`` where\n"
                        "the decision function is positive (two classes), the class of\n"
                        "the largest score otherwise.")
    def predict(self, X):
        self._check_fitted_namespace(X, "predict")
        if self._is_multilabel_fit():
            values = getattr(self, "_label_values", np.arange(2))
            if values.tolist() == [0, 1]:
                return arrays.indicator(self.decision_function(X))
            return arrays.two_valued(self.decision_function(X), values)
        return arrays.labels(self.decision_function(X), to_numpy(self.classes_))

    def _has_proba(self):
        return self.loss == "logistic"

    def _proba_available(self):
        # looked up on the instance, so that subclasses may override _has_proba
        return self._has_proba()

    @available_if(_proba_available)
    def predict_proba(self, X):
        """Class probabilities: the sigmoid of the decision function.

        With more than two classes the one-vs-rest sigmoids are normalised
        to sum to one.  Rank-risk estimators offer it for the logistic loss
        only; a rank-based risk reweights samples, so these are scores on a
        probability scale rather than calibrated probabilities.
        PartialAUCClassifier's and AveragePrecisionClassifier's decision
        functions are Platt fits, so their probabilities are calibrated on
        the training scores (on the latest batch after ``partial_fit``).

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Samples.

        Returns
        -------
        ndarray of shape (n_samples, n_classes)
            The probability of each class, in the order of ``classes_``.
        """
        self._check_fitted_namespace(X, "predict_proba")
        if self._is_multilabel_fit():
            return arrays.sigmoid(self.decision_function(X))  # each label's probability of a 1
        return arrays.probabilities(self.decision_function(X))

    @available_if(_proba_available)
    @samples_method_doc("Logarithm of :meth:`predict_proba`.",
                        "ndarray of shape (n_samples, n_classes)",
                        "The log-probability of each class, in the order of ``classes_``.")
    def predict_log_proba(self, X):
        self._check_fitted_namespace(X, "predict_log_proba")
        return arrays.log(self.predict_proba(X))



class RankLinearRegressorMixin(RegressorMixin):
    """The regressors' part of the fit template: real targets, one problem, prediction."""

    _task = "regression"

    def _check_targets(self, y, classes=None):
        """The targets as floats."""
        return y if is_dask_array(y) else np.asarray(y, dtype=np.float64)

    def _fit_classes(self, y, sample_weight):
        """None: a regression has no classes."""
        return None

    def _stream_classes(self, classes, reset):
        """None: a regression has no classes."""
        return None

    def _set_coefficients(self, coefs, intercepts):
        """``coef_`` of shape ``(n_features,)`` and the number ``intercept_`` of the one problem."""
        (coef,), (intercept,) = coefs, intercepts
        self.coef_ = np.asarray(coef, dtype=np.float64)
        self.intercept_ = float(intercept)

    @_StreamingMethod
    def partial_fit(self, X, y, sample_weight=None):
        """One pass of the stochastic solver over a batch of samples.

        Available when the solver runs on batches (``solver="sgd"``; with
        another solver the attribute is missing and its AttributeError
        says so): the solver's state (coefficients, step, generator) is
        kept between calls, and each call runs one epoch over the samples
        it is given, as scikit-learn's ``SGDRegressor.partial_fit`` does.
        After a ``fit``, the passes start from its coefficients.

        Every call reads the estimator's current parameters, as
        scikit-learn's SGD estimators do: a ``set_params`` between calls
        (``alpha``, the risk, the loss, ``learning_rate``, ``batch_size``...)
        takes effect at the next call, and a new ``random_state`` reseeds
        the stream's generator.  ``solver`` and ``fit_intercept``, which
        the stream's state belongs to, cannot change between calls: a
        change raises a ValueError, and ``fit``, or ``partial_fit`` on a
        clone, starts a new stream.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            A batch of training data.
        y : array-like of shape (n_samples,)
            Its targets.
        sample_weight : array-like of shape (n_samples,), default=None
            Nonnegative weights of the batch's samples (see ``fit``).

        Returns
        -------
        self : object
            The estimator.
        """
        return self._partial_fit(X, y, None, sample_weight)


    @samples_method_doc("Predicted targets ``X @ coef_ + intercept_``.",
                        "ndarray of shape (n_samples,)",
                        "The predictions.")
    def predict(self, X):
        return arrays.one_column_flat(self._linear_predict(X, "predict"))
