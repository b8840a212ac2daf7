"""Bookkeeping of the epoch-based stochastic solvers (SGD, LSVRG, Prospect).

* :class:`EpochLog`: objective, time and passes per epoch, and the stopping criterion;
* :func:`initial_point`, :func:`internal_start`: the start ``(w, b)``;
* :class:`StandardisedStart`: the data, start, batch and step of a solver
  that steps in the units of :class:`~skrank.solvers.stochastic.units.FeatureUnits`;
* :func:`run_epochs`: the loop of epochs with the exact objective between them;
* :class:`EpochStream`: what the streams (``partial_fit``) share.
"""

import hashlib

import numpy as np

from ..progress import Progress
from ..result import SolverResult
from .sampling import make_rng
from .steps import check_learning_rate
from .units import resolve_step, standardised_data

#: Epochs over which the stochastic solvers' objective must stay within ``tol`` (relative) to stop,
#: as scikit-learn's SGD estimators' ``n_iter_no_change``.
N_ITER_NO_CHANGE = 5


class EpochLog:
    """Objective, time and pass counts per epoch, and the relative-change criterion.

    The criterion is the largest relative change of ``F`` over the last
    :data:`N_ITER_NO_CHANGE` epochs (over the epochs so far before that):
    the objective of a stochastic method fluctuates from epoch to epoch, and
    a single epoch's change falls below ``tol`` by chance when ``F``
    crosses its previous value, far from where the method stalls.

    ``step_fraction`` (at most 1) is the ratio of the step taken to the
    automatic one (:meth:`FeatureUnits.step_fraction`; 1 for the automatic
    step).  Below 1 the criterion is the change plus the rounding of ``F``
    (``eps``) divided by it: with small steps ``F`` changes in proportion to
    the step, and a step too small to move the iterate (whose ``F`` then
    does not change at all) must not pass for a method that has stalled.

    ``passes`` follows our convention (the paper's count is samples used / n): every per-sample loss or
    gradient evaluation at a new point counts ``1/n``.
    """

    def __init__(self, objective0, name, verbose, max_iter=None, step_fraction=1.0):
        self.history = [float(objective0)]
        self.times = [0.0]
        self.passes = [0.0]
        self.changes = []
        self.name = name
        self.verbose = verbose
        self.step_fraction = min(float(step_fraction), 1.0)
        self.progress = Progress(name.lower(), verbose, max_iter, unit="epoch",
                                 criterion=f"relative change over {N_ITER_NO_CHANGE} epochs")

    def record(self, objective, seconds, passes):
        """Log one epoch; returns the criterion (``inf`` if ``F`` is not finite).

        The criterion is the largest relative objective change over the
        last :data:`N_ITER_NO_CHANGE` epochs, divided by the step fraction
        (class docstring).
        """
        prev = self.history[-1]
        self.history.append(float(objective))
        self.times.append(self.times[-1] + seconds)
        self.passes.append(self.passes[-1] + passes)
        if not np.isfinite(objective):
            return np.inf
        self.changes.append(abs(prev - objective) / max(abs(objective), 1e-300))
        criterion = max(self.changes[-N_ITER_NO_CHANGE:])
        if self.step_fraction < 1.0:
            # a change below the rounding of F (even none at all) is no smaller than eps
            criterion = ((criterion + np.finfo(np.float64).eps) / self.step_fraction
                         if self.step_fraction > 0 else np.inf)
        self.progress(len(self.history) - 1, objective, criterion)
        return criterion

    def result(self, w, b, fit_intercept, criterion, converged, **info):
        """The :class:`SolverResult` of the run at ``(w, b)`` (``b`` a float)."""
        return SolverResult(
            coef=w,
            intercept=float(b) if fit_intercept else 0.0,
            n_iter=len(self.history) - 1,
            objective_history=np.asarray(self.history),
            stop_criterion=float(criterion),
            converged=bool(converged),
            info={"times": np.asarray(self.times), "passes": np.asarray(self.passes), **info},
        )


def initial_point(d, coef_init, intercept_init, fit_intercept):
    """``w`` (length d) and ``b`` (a length-1 array) from the optional starting point."""
    w = np.zeros(d) if coef_init is None else np.array(coef_init, dtype=np.float64).ravel().copy()
    b0 = 0.0 if (intercept_init is None or not fit_intercept) else float(intercept_init)
    return w, np.array([b0])


def internal_start(units, coef_init, intercept_init, fit_intercept):
    """The start in the units of ``units``: ``(w0, w, b)``.

    ``w0`` is the start in the units of ``X`` (length ``d``, zeros by
    default), ``w`` the internal coefficients and ``b`` the internal
    intercept as a length-1 array.
    """
    w0, b0 = initial_point(units.unit.shape[0], coef_init, intercept_init, fit_intercept)
    w, b = units.to_internal(w0, b0[0])
    return w0, w, np.array([b])


class StandardisedStart:
    """The data, start, batch and step of LSVRG, Prospect and SOREL, in the units of their steps.

    ``X_orig, units, X, s, c, sqnorms`` are those of
    :func:`skrank.solvers.stochastic.units.standardised_data` (``per_feature``
    as there), ``w0, w, b`` those of :func:`internal_start`, ``lr`` the
    given ``learning_rate`` (None for ``"auto"``) and ``batch`` the
    ``batch_size`` capped to ``[1, n]``.
    """

    def __init__(self, X, y, loss, fit_intercept, learning_rate, batch_size, coef_init, intercept_init,
                 per_feature=True):
        self.fit_intercept, self.per_feature = fit_intercept, per_feature
        self.lr = check_learning_rate(learning_rate)
        (self.X_orig, self.units, self.X, self.s, self.c,
         self.sqnorms) = standardised_data(X, y, loss, fit_intercept, self.lr, per_feature)
        self.batch = int(min(max(batch_size, 1), self.X.shape[0]))
        self.w0, self.w, self.b = internal_start(self.units, coef_init, intercept_init, fit_intercept)

    def epoch_steps(self, epoch_length):
        """Steps of an epoch: ``epoch_length``, by default ``ceil(n / batch)`` (one pass)."""
        return -(-self.X.shape[0] // self.batch) if epoch_length is None else int(epoch_length)

    def step(self, auto_step):
        """``(lr, fraction)`` of :func:`skrank.solvers.stochastic.units.resolve_step`.

        Parameters
        ----------
        auto_step : callable
            The automatic step from the squared row norms.
        """
        return resolve_step(self.lr, auto_step, self.sqnorms, self.X_orig, self.fit_intercept,
                            self.per_feature)

    def original(self):
        """The internal ``(w, b)`` in the units of ``X``: ``(coef, intercept)``."""
        return self.units.to_original(self.w, self.b[0])


def run_epochs(log, epoch, max_iter, tol):
    """Run up to ``max_iter`` epochs, logged in ``log``, until the criterion is at most ``tol``.

    Parameters
    ----------
    log : EpochLog
        Records each epoch and returns the criterion.
    epoch : callable
        ``epoch(k)`` runs epoch ``k`` and returns ``(objective, seconds, passes)``:
        the exact objective after it, the solver seconds it took and the
        passes it made.
    max_iter : int
        Most epochs.
    tol : float
        Stopping tolerance on the criterion of :meth:`EpochLog.record`.

    Returns
    -------
    criterion : float
        The last criterion (``inf`` before the first epoch).
    converged : bool
        Whether the criterion reached ``tol``.
    """
    criterion = np.inf
    for k in range(max_iter):
        objective, seconds, passes = epoch(k)
        criterion = log.record(objective, seconds, passes)
        if not np.isfinite(objective):
            break
        if criterion <= tol:
            return criterion, True
    return criterion, False


class EpochStream:
    """The generator of a stream and its epoch on each batch of data (``partial_fit``).

    A subclass defines ``prepare(X, y, sample_weight)`` (the data of an
    epoch), ``epoch(data)`` and ``_seed_kernel(rng)`` (the compiled
    kernel's generator, seeded from ``rng``).
    """

    def reseed(self, random_state):
        """Seed the generator ``rng`` and the kernel's from ``random_state``.

        Parameters
        ----------
        random_state : int, RandomState, Generator or None
        """
        self.rng = make_rng(random_state)
        self._seed_kernel(self.rng)

    def partial(self, X, y, sample_weight=None):
        """One epoch on a batch of data (``partial_fit``).

        Parameters
        ----------
        X, y, sample_weight
            As in :meth:`prepare`.
        """
        self.epoch(self.prepare(X, y, sample_weight))

    def _row_slots(self, rows):
        """The entries of ``rows`` in ``self._index``, a dict from a row's content (new rows: next ones)."""
        rows = rows + 0.0  # -0.0 and 0.0 are one value
        return np.array([self._index.setdefault(hashlib.blake2b(row.tobytes(), digest_size=16).digest(),
                                                len(self._index)) for row in rows], dtype=np.int64)
