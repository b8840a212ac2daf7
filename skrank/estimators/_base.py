"""Plumbing shared by every skrank estimator, written once.

A concrete estimator sets ``_task``, its ``_parameter_constraints`` and
implements ``_solve(X, y, coef_init, intercept_init)`` returning a
:class:`skrank.solvers.SolverResult`; ``y`` is in {-1, +1} for classifiers
(one binary problem at a time, one-vs-rest beyond two classes) and real for
regressors.  Everything else (validation, label encoding, warm starts,
fitted attributes, convergence warnings, prediction) lives here.
"""

import time
import warnings
from numbers import Integral

import numpy as np
from scipy.special import expit
from sklearn import get_config
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin
from sklearn.exceptions import ConvergenceWarning
from sklearn.metrics import roc_auc_score
from sklearn.utils._array_api import check_same_namespace
from sklearn.utils._available_if import _AvailableIfDescriptor
from sklearn.utils.class_weight import compute_sample_weight
from sklearn.utils.metaestimators import available_if
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import _check_sample_weight, check_is_fitted, validate_data

from ..backends.array_api_design import (
    array_api_namespace,
    check_array_api_array,
    device_of,
    to_namespace,
    to_numpy,
)
from ..backends.dask_design import check_dask_array, finite_lazily, is_dask_array
from ..backends.dispatch import external_kind
from ..losses import get_loss
from ..penalties import get_penalty
from ..risks import check_risk
from ..solvers.registry import SOLVERS, choose_solver, streaming_solvers


def _check_external(X):
    """An external ``X`` checked where it lives: Dask or array API on its device."""
    if is_dask_array(X):
        return check_dask_array(X)
    if not get_config()["array_api_dispatch"]:
        raise ValueError(
            f"X is {external_kind(X)}: fitting or predicting where it lives needs scikit-learn's array API "
            "dispatch, sklearn.set_config(array_api_dispatch=True), with SCIPY_ARRAY_API=1 set in the "
            "environment before SciPy is imported. Or pass a NumPy array."
        )
    return check_array_api_array(X, array_api_namespace(X))


def _in_memory(v):
    """``y`` or ``sample_weight`` in NumPy: a Dask array computed, an array-API array copied to the host."""
    if is_dask_array(v):
        return np.asarray(v.compute())
    if array_api_namespace(v) is not None:
        return to_numpy(v)
    return np.asarray(v)


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


def _one_column_flat(scores):
    """``scores`` of shape ``(n, 1)`` as a vector (NumPy, Dask or array API); wider ones as given."""
    if scores.shape[1] != 1:
        return scores
    xp = array_api_namespace(scores)
    return scores.ravel() if xp is None else xp.reshape(scores, (-1,))


class _RankLinearModel(BaseEstimator):
    """Base of all linear rank-risk estimators (not public)."""

    _task = None  # "classification" or "regression"
    _accept_sparse = "csr"

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

    def _update_stream(self, stream):
        """Hook: give a stream the current parameters (every ``partial_fit`` call after the first)."""

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

    def _warm_start_intercept(self, j):
        """Hook: the solver's starting intercept of problem ``j`` on a warm start (or ``partial_fit``)."""
        return float(np.atleast_1d(to_numpy(self.intercept_))[j])

    def _after_partial_fit(self, X, y, sample_weight):
        """Hook: refresh what the streams' coefficients do not give, on the batch just passed.

        ``X``, ``y`` and ``sample_weight`` are the batch's samples of positive
        weight and their weights (times ``class_weight``'s; None for equal
        weights).
        """

    def _partial_fit_problems(self, X, y, targets, sample_weight, reset):
        """One pass of the streaming solver over a batch, for each binary problem in ``targets``.

        ``targets``: None for a regression, else the positive class of each
        problem.  ``reset``: the first call, whose streams start from the
        fitted coefficients when there are some (a ``fit`` before).  Later
        calls read the current parameters (:meth:`_update_stream`; a new
        ``random_state`` reseeds the streams) and refuse a change of those
        in :attr:`_STREAM_FIXED`.  Returns the batch's samples of positive
        weight and their weights (None for equal weights).
        """
        if getattr(self, "class_weight", None) == "balanced":
            raise ValueError("class_weight='balanced' needs the whole data and is not available in "
                             "partial_fit; pass a dict or sample_weight.")
        kind = external_kind(X)
        if kind is not None:
            raise ValueError(f"partial_fit takes X in memory (a NumPy array or a SciPy sparse matrix), "
                             f"not {kind}: its solver draws rows. Use fit, whose full-batch solvers take it.")
        sample_weight = self._fit_sample_weight(X, y, sample_weight)
        X, y, sample_weight = self._drop_weightless(X, y, sample_weight)
        problems = [None] if targets is None else list(targets)
        if reset:
            self._check_before_solve(X, sample_weight)
            coef = np.atleast_2d(to_numpy(self.coef_)) if hasattr(self, "coef_") else None
            fitted = coef is not None and coef.shape == (len(problems), X.shape[1])
            self._streams = [
                self._new_stream(X.shape[1], coef[j] if fitted else None,
                                 self._warm_start_intercept(j) if fitted else None)
                for j in range(len(problems))
            ]
            self._stream_fixed = {name: getattr(self, name) for name in self._STREAM_FIXED}
        else:
            # every call reads the current parameters, as scikit-learn's SGD estimators do
            self._check_stream_unchanged()
            self._check_before_solve(X, sample_weight)
            reseed = not _same_random_state(getattr(self, "_stream_random_state", self.random_state),
                                            self.random_state)
            for stream in self._streams:
                if reseed:
                    stream.reseed(self.random_state)
                self._update_stream(stream)
        self._stream_random_state = self.random_state
        for stream, positive in zip(self._streams, problems):
            target = y if positive is None else np.where(y == positive, 1.0, -1.0)
            stream.partial(X, target, sample_weight)
        self.n_iter_ = self._streams[0].passes
        return X, y, sample_weight

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
            sample_weight = _in_memory(sample_weight)  # n values, on the host for an external X
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
        X = _check_external(X)
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
        y = _in_memory(y)
        if y.ndim != 1 or y.shape[0] != n:
            raise ValueError(f"y must be a vector of length {n} (the rows of X), got shape {y.shape}.")
        if self._task == "regression":
            y = y.astype(np.float64)
            if not np.all(np.isfinite(y)):
                raise ValueError("Input y contains NaN or infinity.")
        return X, y

    def _warn_if_not_converged(self, result):
        if not result.converged:
            # a solver that could not move from its start says so: its coefficients are the start's
            at_start = " (it stopped at its starting point)" if result.n_iter == 0 else ""
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
            X = _check_external(X)
            if X.shape[1] != self.n_features_in_:
                raise ValueError(f"X has {X.shape[1]} features, but {type(self).__name__} is expecting "
                                 f"{self.n_features_in_} features as input.")
            xp = array_api_namespace(X)
            if xp is None:
                # lazy: computing the scores raises the ValueError of NaN or infinity in X
                return finite_lazily(X) @ coef + intercept
            device = device_of(X)
            return X @ to_namespace(coef, xp, device) + to_namespace(intercept, xp, device)
        X = validate_data(
            self, X, accept_sparse=self._accept_sparse, dtype=[np.float64, np.float32], reset=False
        )
        return np.asarray(X @ coef + intercept)

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


class _RegisteredSolverModel(_RankLinearModel):
    """A rank-risk model whose solvers come from the table of :mod:`skrank.solvers.registry`.

    Subclasses set ``_AUTO`` (the order of preference of ``solver="auto"``)
    and define ``_solver_options`` (each solver's keyword arguments beyond
    the shared ones).
    """

    _solvers = SOLVERS
    _STREAMING_SOLVERS = streaming_solvers(SOLVERS)
    # the stream's intercept is fitted or not from its first step
    _STREAM_FIXED = ("solver", "fit_intercept")

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

    def _choose_solver(self, risk, weighted=False, external=None):
        """Resolve the loss, the penalty and the solver for ``risk`` (a clear error if it does not fit).

        ``weighted``: the fit has sample weights, which only some solvers take;
        ``external``: what ``X`` is when it is not in memory (``"a Dask array"``,
        ``"a cupy array"``: :func:`skrank.backends.dispatch.external_kind`),
        which only the full-batch solvers take.
        """
        self._risk = risk
        self._loss_obj = self._get_loss()
        self._penalty_obj = self._get_penalty()
        self._solver_info = choose_solver(self.solver, self._AUTO, risk, self._loss_obj, self._penalty_obj,
                                          weighted=weighted, external=external)
        self._solver = self._solver_info.name

    def _solve(self, X, y, coef_init, intercept_init, sample_weight=None):
        """Run ``self._solver_info`` (a :class:`skrank.solvers.registry.SolverInfo`).

        With the shared keyword arguments, the estimator's own options for
        that solver (``_solver_options``) and the entry's fixed options.
        """
        info = self._solver_info
        options = dict(max_iter=self.max_iter, tol=self.tol, fit_intercept=self.fit_intercept,
                       coef_init=coef_init, intercept_init=intercept_init, verbose=self.verbose)
        options.update(self._solver_options().get(info.name, {}))
        options.update(info.options)
        if sample_weight is not None:
            options["sample_weight"] = sample_weight
        return info.load()(X, y, self._risk, self._loss_obj, self._penalty_obj, **options)


class RankLinearClassifierMixin(ClassifierMixin):
    """Fitting and prediction for binary and one-vs-rest classifiers."""

    _task = "classification"

    def fit(self, X, y, sample_weight=None):
        """Fit the model.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Training data.
        y : array-like of shape (n_samples,)
            Class labels; two classes give one binary problem, more give
            one-vs-rest problems.
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
        check_classification_targets(y)
        sample_weight = self._fit_sample_weight(X, y, sample_weight)
        X, y, sample_weight = self._drop_weightless(X, y, sample_weight)
        classes = np.unique(y)
        if classes.shape[0] < 2:
            raise ValueError(
                f"{type(self).__name__} needs samples of at least two classes in y; "
                f"got only class {classes[0]!r}"
                + (" among the samples of positive weight." if sample_weight is not None else ".")
            )
        self._check_before_solve(X, sample_weight)
        binary = classes.shape[0] == 2
        targets = [classes[1]] if binary else list(classes)
        warm = (
            getattr(self, "warm_start", False)
            and hasattr(self, "coef_")
            and self.coef_.shape == (len(targets), X.shape[1])
        )
        fitted_coef = to_numpy(self.coef_) if warm else None
        coefs, intercepts, n_iters, objectives, histories, results = [], [], [], [], [], []
        for j, positive in enumerate(targets):
            y_pm = np.where(y == positive, 1.0, -1.0)
            coef0 = fitted_coef[j].copy() if warm else None
            b0 = self._warm_start_intercept(j) if warm else None
            result = self._run_solver(X, y_pm, coef0, b0, sample_weight)
            coefs.append(result.coef)
            intercepts.append(result.intercept)
            n_iters.append(result.n_iter)
            objectives.append(result.objective)
            histories.append(np.asarray(result.objective_history))
            results.append(result)
        self.classes_ = classes
        self.coef_ = np.vstack(coefs)
        self.intercept_ = np.asarray(intercepts, dtype=np.float64)
        if binary:
            self.n_iter_ = int(n_iters[0])
            self.objective_ = float(objectives[0])
            self.objective_history_ = histories[0]
        else:
            self.n_iter_ = np.asarray(n_iters)
            self.objective_ = np.asarray(objectives)
            self.objective_history_ = histories
        self._store_results(results)
        self._place_fitted(X)
        return self

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
        reset = not hasattr(self, "_streams")
        self._validate_params()
        if reset:
            if classes is None:
                if not hasattr(self, "classes_"):
                    raise ValueError("classes must be passed on the first call to partial_fit.")
                classes = self.classes_
        classes_given = None if classes is None else np.unique(np.asarray(classes))
        if not reset and classes_given is not None and not np.array_equal(classes_given, self.classes_):
            raise ValueError(f"classes={classes_given.tolist()} differs from the classes of the first "
                             f"call to partial_fit, {self.classes_.tolist()}.")
        if reset:
            if classes_given.shape[0] < 2:
                raise ValueError(f"{type(self).__name__} needs at least two classes; got classes="
                                 f"{classes_given.tolist()}.")
            if hasattr(self, "classes_") and not np.array_equal(classes_given, self.classes_):
                raise ValueError(f"classes={classes_given.tolist()} differs from the fitted classes "
                                 f"{self.classes_.tolist()}.")
        first_call = reset and not hasattr(self, "coef_")
        X, y = self._validate_fit_data(X, y, reset=first_call)
        check_classification_targets(y)
        unknown = np.setdiff1d(np.unique(y), classes_given if reset else self.classes_)
        if unknown.size:
            raise ValueError(f"y holds labels {unknown.tolist()} that are not in classes.")
        if reset:
            self.classes_ = classes_given
        targets = [self.classes_[1]] if self.classes_.shape[0] == 2 else list(self.classes_)
        X, y, sample_weight = self._partial_fit_problems(X, y, targets, sample_weight, reset)
        self.coef_ = np.vstack([stream.coef for stream in self._streams])
        self.intercept_ = np.asarray([stream.intercept for stream in self._streams], dtype=np.float64)
        self._after_partial_fit(X, y, sample_weight)
        self._warn_if_ranked_backwards(X, y, targets, sample_weight)
        return self

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

    def _store_results(self, results):
        """Hook: keep solver extras of each binary problem (``results[j].info``)."""

    def decision_function(self, X):
        """Signed scores: positive means ``classes_[1]`` (binary).

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Samples.

        Returns
        -------
        ndarray of shape (n_samples,) or (n_samples, n_classes)
            ``X @ coef_.T + intercept_``: one column for two classes, one
            per class (one-vs-rest) for more.
        """
        return _one_column_flat(self._linear_predict(X, "decision_function"))

    def predict(self, X):
        """Predicted class labels.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Samples.

        Returns
        -------
        ndarray of shape (n_samples,)
            The class of each sample among ``classes_``: ``classes_[1]`` where
            the decision function is positive (two classes), the class of
            the largest score otherwise.
        """
        self._check_fitted_namespace(X, "predict")
        scores = self.decision_function(X)
        classes = to_numpy(self.classes_)
        xp = array_api_namespace(scores)
        if xp is not None:
            index = xp.astype(scores > 0, xp.int64) if scores.ndim == 1 else xp.argmax(scores, axis=1)
            if classes.dtype.kind not in "biuf":
                return classes[to_numpy(index)]  # labels an array library cannot hold: NumPy
            return xp.take(to_namespace(classes, xp, device_of(scores)), index, axis=0)
        if is_dask_array(scores):
            if scores.ndim == 1:
                return scores.map_blocks(lambda s: classes[(s > 0).astype(int)], dtype=classes.dtype)
            return scores.map_blocks(lambda s: classes[np.argmax(s, axis=1)], drop_axis=1,
                                     dtype=classes.dtype)
        if scores.ndim == 1:
            return classes[(scores > 0).astype(int)]
        return classes[np.argmax(scores, axis=1)]

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
        scores = self.decision_function(X)
        xp = array_api_namespace(scores)
        if xp is not None:
            p = 1.0 / (1.0 + xp.exp(-scores))
            if p.ndim == 1:
                return xp.stack([1.0 - p, p], axis=1)
            return p / xp.sum(p, axis=1, keepdims=True)
        if scores.ndim == 1:
            p = expit(scores)
            if is_dask_array(p):
                return p.map_blocks(lambda b: np.column_stack([1.0 - b, b]), new_axis=1,
                                    chunks=(p.chunks[0], (2,)), dtype=np.float64)  # lazy
            return np.column_stack([1.0 - p, p])
        p = expit(scores)
        return p / p.sum(axis=1, keepdims=True)

    @available_if(_proba_available)
    def predict_log_proba(self, X):
        """Logarithm of :meth:`predict_proba`.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Samples.

        Returns
        -------
        ndarray of shape (n_samples, n_classes)
            The log-probability of each class, in the order of ``classes_``.
        """
        self._check_fitted_namespace(X, "predict_log_proba")
        proba = self.predict_proba(X)
        xp = array_api_namespace(proba)
        return np.log(proba) if xp is None else xp.log(proba)


class RankLinearRegressorMixin(RegressorMixin):
    """Fitting and prediction for regressors."""

    _task = "regression"

    def fit(self, X, y, sample_weight=None):
        """Fit the model.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Training data.
        y : array-like of shape (n_samples,)
            Targets.
        sample_weight : array-like of shape (n_samples,), default=None
            Nonnegative weights of the samples: the risk becomes that of the
            weighted empirical distribution (integer weights fit as repeated
            rows, zero weights as dropped rows; :mod:`skrank.risks`).

        Returns
        -------
        self : object
            The fitted estimator.
        """
        self._validate_params()
        self.__dict__.pop("_streams", None)
        X, y = self._validate_fit_data(X, y)
        y = np.asarray(y, dtype=np.float64)
        sample_weight = self._fit_sample_weight(X, y, sample_weight)
        X, y, sample_weight = self._drop_weightless(X, y, sample_weight)
        self._check_before_solve(X, sample_weight)
        warm = (
            getattr(self, "warm_start", False)
            and hasattr(self, "coef_")
            and self.coef_.shape == (X.shape[1],)
        )
        coef0 = to_numpy(self.coef_).copy() if warm else None
        b0 = float(to_numpy(self.intercept_)) if warm else None
        result = self._run_solver(X, y, coef0, b0, sample_weight)
        self.coef_ = np.asarray(result.coef, dtype=np.float64)
        self.intercept_ = float(result.intercept)
        self.n_iter_ = int(result.n_iter)
        self.objective_ = float(result.objective)
        self.objective_history_ = np.asarray(result.objective_history)
        self._place_fitted(X)
        return self

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
        reset = not hasattr(self, "_streams")
        self._validate_params()
        X, y = self._validate_fit_data(X, y, reset=reset and not hasattr(self, "coef_"))
        y = np.asarray(y, dtype=np.float64)
        self._partial_fit_problems(X, y, None, sample_weight, reset)
        self.coef_ = self._streams[0].coef
        self.intercept_ = self._streams[0].intercept
        return self

    def predict(self, X):
        """Predicted targets ``X @ coef_ + intercept_``.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Samples.

        Returns
        -------
        ndarray of shape (n_samples,)
            The predictions.
        """
        return _one_column_flat(self._linear_predict(X, "predict"))
