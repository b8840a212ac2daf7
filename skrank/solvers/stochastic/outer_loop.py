"""Bookkeeping of the stochastic solvers' outer loops: exact objective, best iterate, stopping."""

import numpy as np

from ..progress import Progress
from ..result import SolverResult


class OuterLoop:
    """History of the exact ``F`` over outer iterations, and the iterate of lowest ``F``.

    The stochastic solvers (AGD-SBCD, DCA, PPD, SoRR-AGD) evaluate the exact
    objective after every outer iteration, stop when it changes by at most
    ``tol * max(1, |F|)`` and return the iterate of lowest ``F``.

    Parameters
    ----------
    w : ndarray
        Start.
    F : float
        Objective at the start.
    tol : float
    verbose : int
    name : str
        Prefix of the progress lines.
    """

    def __init__(self, w, F, tol, verbose, name):
        self.history = [float(F)]
        self.best_w, self.best_F = np.array(w, dtype=np.float64), float(F)
        self.F = float(F)
        self.crit = np.inf
        self.converged = False
        self.tol, self.verbose, self.name = tol, verbose, name
        self.n_iter = 0
        self.progress = Progress(name, verbose, unit="outer iteration", criterion="change")

    def step(self, w, F, work=""):
        """Record outer iteration ``w, F``; True when the loop should stop."""
        self.n_iter += 1
        self.crit = abs(self.F - F) / max(1.0, abs(F))
        self.F = float(F)
        self.history.append(self.F)
        if F < self.best_F:
            self.best_w, self.best_F = np.array(w, dtype=np.float64), float(F)
        self.progress(self.n_iter, F, self.crit, work)
        if not np.isfinite(F):
            return True
        self.converged = self.crit <= self.tol
        return self.converged

    def restart_from_best(self):
        """Continue from the best point (after a step that raised ``F``); returns it."""
        self.F = self.best_F
        self.crit = np.inf
        return self.best_w.copy()

    def result(self, info):
        """The :class:`SolverResult`: the best iterate, ``F`` at it last in the history."""
        return SolverResult(
            coef=self.best_w,
            intercept=0.0,
            n_iter=self.n_iter,
            objective_history=np.asarray(self.history + [self.best_F]),
            stop_criterion=float(self.crit),
            converged=self.converged,
            info=info,
        )
