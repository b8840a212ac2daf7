"""Bookkeeping of the epoch-based stochastic solvers (SGD, LSVRG, Prospect).

* :class:`EpochLog`: objective, time and passes per epoch, and the stopping criterion;
* :func:`initial_point`, :func:`internal_start`: the start ``(w, b)``;
* :func:`run_epochs`: the loop of epochs with the exact objective between them.
"""

import numpy as np

from ..progress import Progress
from ..result import SolverResult

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
        """The :class:`SolverResult` of the run."""
        return SolverResult(
            coef=w,
            intercept=float(b[0]) if fit_intercept else 0.0,
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
