"""Deterministic full-batch L-BFGS on an exact objective.

A plain quasi-Newton method (scipy's L-BFGS-B without bounds) driven by an
objective object that returns its exact value and gradient over the whole
training set in one pass (e.g.
:class:`skrank.partial_auc_objective.PartialAUCObjective`).  For tables that
fit in memory it needs far fewer passes than the stochastic methods of the
papers, whose strength is data too large for a full pass.

The objectives it serves are piecewise smooth (a loss evaluated on ranked
scores): the gradient jumps where two scores swap ranks.  L-BFGS copes with
such mild kinks in practice; when its line search cannot progress any more
it stops, and the stopping criterion then says how stationary the last
point is.
"""

import time

import numpy as np
from scipy.optimize import minimize

from ._progress import Progress
from ._result import SolverResult


def lbfgs(objective, *, coef_init, max_iter=500, tol=1e-6, memory=10, verbose=0):
    """Minimise ``objective`` by L-BFGS from ``coef_init``.

    Parameters
    ----------
    objective : object
        With ``value_and_grad(w) -> (float, ndarray)`` and ``value(w)``.
    coef_init : ndarray of shape (d,)
        Starting point.
    max_iter : int, default=500
        Maximum number of L-BFGS iterations.
    tol : float, default=1e-6
        Stop when the largest gradient entry is at most
        ``tol * max(1, |F(w_0)|)``, or when one iteration lowers ``F`` by at
        most ``tol * 1e-3`` relative (scipy's ``ftol``).
    memory : int, default=10
        Number of correction pairs kept.
    verbose : int, default=0
        Print ``F`` and the gradient size after each iteration when positive.

    Returns
    -------
    SolverResult
        ``objective_history`` holds ``F`` after each iteration (its last
        entry is ``F`` at the returned coefficients); ``stop_criterion`` is
        the largest gradient entry at the returned point divided by
        ``max(1, |F(w_0)|)``; ``converged`` is True when scipy reports
        convergence or that criterion is at most ``tol``.  ``info`` has
        ``passes`` (value-and-gradient evaluations), ``time`` and scipy's
        ``message``.
    """
    start = time.perf_counter()
    w0 = np.array(coef_init, dtype=np.float64)
    F0, g0 = objective.value_and_grad(w0)
    scale = max(1.0, abs(F0))
    evaluations = [1]
    last = {"w": w0.copy(), "F": F0, "g": g0}
    history = []

    def fun(w):
        # scipy asks for the start again and often ends on the last point it evaluated
        if np.array_equal(w, last["w"]):
            return last["F"], last["g"].copy()
        F, g = objective.value_and_grad(w)
        evaluations[0] += 1
        last["w"], last["F"], last["g"] = np.array(w, dtype=np.float64), F, g
        return F, g

    progress = Progress("lbfgs", verbose, max_iter, criterion="|g|_inf")

    def callback(intermediate_result):
        history.append(float(intermediate_result.fun))
        progress(len(history), history[-1], float(np.max(np.abs(last["g"]))))

    res = minimize(
        fun, w0, jac=True, method="L-BFGS-B", callback=callback,
        options=dict(maxiter=max_iter, gtol=tol * scale, ftol=tol * 1e-3, maxcor=memory),
    )
    w = np.asarray(res.x, dtype=np.float64)
    F, g = fun(w)
    if not history or history[-1] != F:
        history.append(float(F))
    crit = float(np.max(np.abs(g))) / scale if g.size else 0.0
    return SolverResult(
        coef=w,
        intercept=0.0,
        n_iter=int(res.nit),
        objective_history=np.asarray(history),
        stop_criterion=crit,
        converged=bool(res.success) or crit <= tol,
        info={"passes": evaluations[0], "time": time.perf_counter() - start,
              "message": str(res.message)},
    )
