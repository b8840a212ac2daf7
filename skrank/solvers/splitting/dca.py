"""Difference-of-convex algorithm (DCA) for ranked-range risks.

Hu, Ying, Wang and Lyu, "Learning by Minimizing the Sum of Ranked Range"
(NeurIPS 2020); each convex subproblem is solved by the rank ADMM.  The
method and its differences from the baseline of Xiao et al. (2023) are
described in the user guide, :ref:`methods-dca`.
"""

import time

import numpy as np

from ...backends.threads import blas_threads
from ...datafits.rank_risk import affine_map, rank_objective
from ...risks import TopK
from ..progress import Progress
from ..result import SolverResult
from ..stochastic.docs import fill_doc
from .admm import RhoSchedule, admm_loop, make_zstep, rank_subgradient
from .admm_wstep import WStep


@fill_doc
def dca(datafit, penalty, *, max_iter=50, tol=1e-7, inner_max_iter=2000,
        zstep_method="stack", l1_solver="cd", coef_init=None, intercept_init=None, verbose=0):
    """Minimise a ranked-range risk by DCA with exact convex subproblems.

    Parameters
    ----------
    {datafit}
        Its risk: a ranked range (:class:`skrank.risks.RankedRange`; ``risk.counts(n)``
        gives the integer ranks ``m < k``).
        Its loss: a convex loss (DCA needs the two parts to be convex).
    penalty : skrank.penalties.Penalty
        The l1, l2 or elastic-net penalty, handled by the inner ADMM's w-step.
    max_iter : int, default=50
        Maximum number of DCA (outer) iterations.
    tol : float, default=1e-7
        Stop when the objective decreases by at most ``tol |F|`` over one
        outer iteration (a step that raises ``F``, from a subproblem solved
        to ``tol`` only, is rejected and decreases it by 0) and the inner
        ADMM met its KKT tolerance, also ``tol`` (with ``m = 0`` the
        problem is convex: the inner ADMM's test alone).
    inner_max_iter : int, default=2000
        ADMM iterations per subproblem.
    zstep_method, l1_solver : str
        Passed to the inner ADMM (see :func:`skrank.solvers.splitting.admm.admm`).
    coef_init, intercept_init : ndarray, float, default=None
        Starting point (zero by default).
    verbose : int, default=0
        Print one line per outer iteration when positive.

    Returns
    -------
    SolverResult
        ``objective_history`` has ``F`` after each outer iteration;
        ``stop_criterion`` is the larger of the last relative decrease
        and the last inner ADMM's KKT residual.
    """
    X, y, risk, loss, fit_intercept = datafit.unweighted("dca")
    with blas_threads(X):
        return _dca(
            X, y, risk, loss, penalty, fit_intercept=fit_intercept, max_iter=max_iter,
            tol=tol, inner_max_iter=inner_max_iter, zstep_method=zstep_method,
            l1_solver=l1_solver, coef_init=coef_init, intercept_init=intercept_init,
            verbose=verbose,
        )


def _dca(
    X, y, risk, loss, penalty, *, fit_intercept, max_iter, tol, inner_max_iter,
    zstep_method, l1_solver, coef_init, intercept_init, verbose,
):
    n, d = X.shape
    m, k = risk.counts(n)
    scale = 1.0 / (k - m)
    s, c = affine_map(y, loss.task)
    top_k = TopK(k)
    sigma = top_k.weights(n) * (k * scale)  # 1/(k-m) on the k largest
    zfun = make_zstep(loss, sigma, None, np.inf, zstep_method)
    wstep = WStep(X, penalty, fit_intercept, l1_solver)
    w = np.zeros(d) if coef_init is None else np.array(coef_init, dtype=np.float64)
    b = 0.0 if (intercept_init is None or not fit_intercept) else float(intercept_init)

    def objective(w_, b_):
        return rank_objective(X, y, w_, b_, risk, loss, penalty)

    def lam0(t):
        return -(k * scale) * rank_subgradient(top_k, loss, t)

    F = objective(w, b)
    history = []
    crit = np.inf
    converged = False
    inner_total = 0
    start = time.perf_counter()
    progress = Progress("dca", verbose, max_iter, criterion="decrease")
    it = 0
    for it in range(max_iter):
        t = s * (np.asarray(X @ w).ravel() + b) + c
        # subgradient of T_m(L) / (k - m): the m largest losses
        linear = np.zeros(d + 1)
        if m > 0:
            top = np.argsort(loss.value(t), kind="stable")[n - m :]
            coeff = scale * s[top] * loss.derivative(t[top])
            linear[:d] = np.asarray(X[top].T @ coeff).ravel()
            linear[d] = coeff.sum()
        inner = admm_loop(
            X, s, c, wstep, zfun, lam0, objective, RhoSchedule("adaptive", top_k, n, d + 1),
            linear=linear, max_iter=inner_max_iter, tol=tol, coef_init=w,
            intercept_init=b, verbose=0,
        )
        inner_total += inner.n_iter
        F_new = objective(inner.coef, inner.intercept)
        # a step that raises F (the subproblem solved to tol, not exactly) is rejected: no decrease
        decrease = max(F - F_new, 0.0) / max(abs(F), 1e-300)
        # a small decrease means nothing when the subproblem was not solved
        crit = max(decrease, float(inner.stop_criterion)) if m > 0 else float(inner.stop_criterion)
        if F_new <= F or it == 0:
            w, b = inner.coef, inner.intercept
            F = min(F, F_new) if it > 0 else F_new
        history.append(F)
        progress(it + 1, F, crit, f"inner={inner.n_iter}")
        if crit <= tol:
            converged = True
            break
    return SolverResult(
        coef=w,
        intercept=float(b),
        n_iter=it + 1,
        objective_history=np.asarray(history),
        stop_criterion=float(crit),
        converged=converged,
        info={"inner_iterations": inner_total, "time": time.perf_counter() - start},
    )
