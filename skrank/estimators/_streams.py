"""``partial_fit``, written once: a stream per binary problem, carried between calls, and its checks."""

import warnings
from numbers import Integral

import numpy as np
from sklearn.exceptions import ConvergenceWarning
from sklearn.metrics import roc_auc_score
from sklearn.utils._available_if import _AvailableIfDescriptor

from ..backends.array_api_design import to_numpy
from ..backends.dispatch import external_kind
from ._fit_template import problem_labels, problem_target


class StreamingMethod(_AvailableIfDescriptor):
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


def _ranked_backwards(X, coefs, y, targets, sample_weight):
    """``(class, area under the ROC curve)`` of each problem whose ``X coef`` ranks a batch backwards.

    Backwards is an area below one half on the batch ``(X, y,
    sample_weight)``; a problem whose batch holds one class, or whose
    scores are all equal (no step taken yet), ranks nothing.
    """
    worse = []
    for coef, positive in zip(coefs, targets):
        target = y == positive
        if target.all() or not target.any():
            continue
        scores = np.asarray(X @ coef, dtype=np.float64).ravel()
        if np.ptp(scores) == 0.0:
            continue
        auc = roc_auc_score(target, scores, sample_weight=sample_weight)
        if auc < 0.5:
            worse.append((positive, auc))
    return worse


class Streams:
    """``partial_fit``'s body: the streams' start, their passes over a batch and the checks between calls."""

    #: The solvers that run on batches of data, with ``partial_fit`` (each estimator names its own).
    _STREAMING_SOLVERS = ()
    #: The parameters a stream's state belongs to: ``partial_fit`` refuses a change between calls.
    _STREAM_FIXED = ("solver",)

    def _stream_classes(self, classes, reset):  # pragma: no cover - abstract
        """Hook: the classes of a stream, from ``partial_fit``'s ``classes`` (None for a regression)."""
        raise NotImplementedError

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
        targets = problem_labels(classes)
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
            stream.partial(X, problem_target(y, positive), sample_weight)
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

    def _warn_if_ranked_backwards(self, X, y, targets, sample_weight):
        """Warn when ``X coef_`` ranks the classes of a ``partial_fit`` batch worse than chance.

        A stochastic stream can, before its steps settle, hold coefficients
        that rank its own training batch backwards; ``predict`` then falls
        back on the majority class (Platt fits) or mislabels most samples.
        One ConvergenceWarning names the problems (classes) concerned and
        their area under the ROC curve on the batch (:func:`_ranked_backwards`).
        """
        worse = _ranked_backwards(X, np.atleast_2d(to_numpy(self.coef_)), y, targets, sample_weight)
        if worse:
            areas = ", ".join(f"{auc:.3f} for class {np.asarray(positive).tolist()!r}"
                              for positive, auc in worse)
            self._warn_unsettled(f"the coefficients rank the classes of this batch worse than chance (area "
                                 f"under the ROC curve {areas}): the stochastic steps have not settled")

    def _warn_unsettled(self, finding):
        """The ConvergenceWarning of a stream whose steps have not settled: ``finding`` and what to do."""
        warnings.warn(f"{type(self).__name__}.partial_fit: {finding}. Pass more batches (or the same ones "
                      "again), standardise the features, or fit the whole data with fit.", ConvergenceWarning)
