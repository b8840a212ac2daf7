"""DCA and proximal DCA for the partial AUC.

The baselines of Yao, Lin and Yang, "Large-scale Optimization of Partial
AUC in a Range of False Positive Rates" (NeurIPS 2022), Appendices
E.4-E.5, run with the SBCD step of AGD-SBCD.  They are described in the
user guide, :ref:`methods-agd-sbcd`.
"""

import time

import numpy as np

from ..stochastic.outer_loop import OuterLoop
from ..stochastic.sbcd import PairSampler, inner_schedule

_DOC = """Minimise the partial-AUC objective by {what} with SBCD subproblem steps.

    Parameters
    ----------
    datafit : skrank.datafits.partial_auc.PartialAUCObjective
        As :func:`skrank.solvers.stochastic.sbcd.agd_sbcd`.
    penalty : skrank.penalties.Penalty
        The l2 penalty that ``datafit`` holds: ``penalty.l2`` is its ``alpha``.
    coef_init : ndarray of shape (d,), default=None
        As :func:`skrank.solvers.stochastic.sbcd.agd_sbcd` (None: the
        class-mean difference).
    max_iter : int, default=10
        Outer (DCA) iterations.
    tol : float, default=1e-4
        Stop when the exact ``F`` changes by at most ``tol * max(1, |F|)``
        over an outer iteration.
    batch_size : int, default=64
        Positives and negatives per SBCD block.
    step : float, default=1.0
        ``c`` of the step sizes.
    inner_iter0 : int, default=100
        ``C`` of ``T_k = C (k+1)^2``.{prox}
    random_state : int, RandomState, Generator or None, default=None
        Seed of the in-kernel generator (the blocks and permutations).
    verbose : int, default=0
        Print one line per outer iteration when positive.

    Returns
    -------
    SolverResult
        As :func:`skrank.solvers.stochastic.sbcd.agd_sbcd` (no safeguard, no
        ``info["gamma"]``); ``info["passes"]`` also counts one pass per
        full subgradient of ``f^m``.
    """


def dca_partial_auc(datafit, penalty, *, coef_init=None, max_iter=10, tol=1e-4, batch_size=64, step=1.0,
                    inner_iter0=100, random_state=None, verbose=0):
    return _dca(datafit, penalty, coef_init, max_iter, tol, batch_size, step, inner_iter0,
                random_state, verbose, prox=0.0, name="dca")


def prox_dca_partial_auc(datafit, penalty, *, coef_init=None, max_iter=10, tol=1e-4, batch_size=64,
                         step=1.0, inner_iter0=100, prox=0.01, random_state=None, verbose=0):
    return _dca(datafit, penalty, coef_init, max_iter, tol, batch_size, step, inner_iter0,
                random_state, verbose, prox=prox, name="prox-dca")


dca_partial_auc.__doc__ = _DOC.format(what="DCA", prox="")
prox_dca_partial_auc.__doc__ = _DOC.format(what="proximal DCA", prox="""
    prox : float, default=0.01
        Weight ``L`` of ``L/2 ||w - w^(k)||^2``, in units of the pair
        smoothness.""")


def _dca(objective, penalty, coef_init, max_iter, tol, batch_size, step, inner_iter0, random_state,
         verbose, prox, name):
    objective.check_unweighted(name)
    start = time.perf_counter()
    sampler = PairSampler(objective, batch_size, random_state)
    L = sampler.smoothness
    alpha_fpr, beta_fpr = objective.fpr_range
    width = beta_fpr - alpha_fpr
    w = sampler.default_start() if coef_init is None else np.array(coef_init, dtype=np.float64)
    lam = sampler.initial_thresholds(w, objective.n)
    loop = OuterLoop(w, sampler.value(w), tol, verbose, name)
    for k in range(max_iter):
        # grad of phi^m = f^m / (N+ N-): the objective's subgradient is per N+ (n - m)
        if objective.m > 0:
            xi = objective.top_subgradient(w, objective.m)[1] * width
            sampler.full_passes += 1
        else:
            xi = np.zeros_like(w)
        T, eta, theta = inner_schedule(k, inner_iter0, step, L)
        w, lam, _ = sampler.run(w.copy(), w.copy(), xi, lam, beta_fpr, T, eta, theta, prox * L,
                                width * penalty.l2, False)
        if loop.step(w, sampler.value(w), f"inner {T:6d}"):
            break
    return loop.result({"passes": sampler.passes, "time": time.perf_counter() - start})
