"""AGD for the sum of a ranked range of losses (SoRR; seed 000, Algorithm 3).

Yao, Lin and Yang (NeurIPS 2022) minimise ``phi_k(L(w)) - phi_m(L(w))``, the
sum of the individual losses ranked ``m+1 .. k`` from the top, by the AGD of
Algorithm 2 with Algorithm 3 as inner loop: the partial-AUC machinery with
one "positive" and the samples as "negatives", so one scalar threshold per
level.  Here the objective is that of :class:`skrank.risks.RankedRange`
(the mean of the ranked range, i.e. SoRR divided by ``k - m``) plus the
estimator's penalty:

    F(w, b) = (T_k(L) - T_m(L)) / (k - m) + R(w)
            = (phi^k - phi^m) / width + R(w),    phi^l = T_l / N,  width = (k - m) / N.

Outer iterations reuse :func:`skrank.solvers.sbcd.agd_loop` (prox-SBCD
estimates of ``prox_{mu phi^l}`` for ``l = m, k``, then a proximal step on
the penalty, which also serves l1 and the elastic net; the intercept is not
penalised) and the compiled step :func:`skrank.solvers._sbcd_kernel.sorr_steps`.
As in the paper, ``eta = theta = c / (k+1)`` (here ``eta`` in units of the
mean smoothness ``L = l'' mean ||(x, 1)||^2`` so that defaults do not depend
on the feature scale; non-smooth losses use ``l''`` = 1), ``T_k = T0
(k+1)^2``, the thresholds start at the ``l``-th largest loss at the start
(spec 000 pitfall 5) and stay nonnegative (the losses are), and the
paper's ``mu > 1/rho`` is read as ``mu < 1/rho`` (a typo) but not enforced.
The point returned is the outer iterate of lowest exact ``F``.
"""

import time

import numpy as np
import scipy.sparse as sp

from ..objective import affine_map, rank_objective
from ._sampling import state_from_random_state
from ._sbcd_kernel import sorr_steps
from .sbcd import agd_loop


def sorr_agd(
    X,
    y,
    risk,
    loss,
    penalty,
    *,
    fit_intercept=True,
    max_iter=12,
    tol=1e-5,
    batch_size=100,
    mu=30.0,
    gamma=60.0,
    step=1.0,
    inner_iter0=50,
    random_state=None,
    coef_init=None,
    intercept_init=None,
    verbose=0,
):
    """Minimise a ranked-range risk by AGD with SGD inner loops (Algorithm 3).

    Parameters
    ----------
    X : {ndarray, sparse matrix} of shape (n, d)
        Sparse input is densified.
    y : ndarray of shape (n,)
        Labels in {-1, +1} (classification loss) or targets (regression).
    risk : skrank.risks.RankedRange
    loss : skrank.losses.Loss
    penalty : skrank.penalties.Penalty
    fit_intercept : bool, default=True
    max_iter : int, default=12
        Outer iterations; iteration ``k`` runs ``inner_iter0 (k+1)^2`` steps
        per level.
    tol : float, default=1e-5
        Stop when the exact ``F`` changes by at most ``tol * max(1, |F|)``
        over an outer iteration.
    batch_size : int, default=100
        ``J`` (the paper's value).
    mu, gamma, step : float, default=30, 60, 1
        ``mu~``, ``gamma~`` and ``c`` in units of ``1 / L`` (see the module
        docstring); the paper's grids are ``mu~`` in {200, 1000},
        ``gamma~`` 200 to 20000 and ``c`` 0.1 to 10 for unit-norm features.
    inner_iter0 : int, default=50
        ``C`` of ``T_k = C (k+1)^2``.
    random_state : int, RandomState, Generator or None
    coef_init, intercept_init : ndarray, float, default=None
        Start (zero by default).
    verbose : int, default=0

    Returns
    -------
    SolverResult
    """
    start = time.perf_counter()
    X = np.ascontiguousarray(X.toarray() if sp.issparse(X) else X, dtype=np.float64)
    n, d = X.shape
    m, k = risk.counts(n)
    s, c = affine_map(y, loss.task)
    s = np.ascontiguousarray(s)
    c = np.ascontiguousarray(c)
    u = np.zeros(d + 1)
    if coef_init is not None:
        u[:d] = coef_init
    if fit_intercept and intercept_init is not None:
        u[d] = float(intercept_init)
    state = state_from_random_state(random_state)
    perm = np.arange(n, dtype=np.int64)
    curvature = loss.smoothness if np.isfinite(loss.smoothness) else 1.0
    L = max(curvature * (float(np.einsum("ij,ij->", X, X)) / n + fit_intercept), 1e-12)

    def losses(u_):
        return loss.value(s * (X @ u_[:d] + u_[d]) + c)

    def start_threshold(level):
        values = np.sort(losses(u))[::-1]
        return np.array([max(values[max(level, 1) - 1], 0.0)])

    lam = {k / n: start_threshold(k)}
    if m > 0:
        lam[m / n] = start_threshold(m)
    touched = [0]

    def prox_point(u_, level_frac, T, eta, theta, prox):
        v, lam[level_frac] = sorr_steps(
            X, s, c, u_.copy(), u_, lam[level_frac], level_frac, T, eta, theta, prox,
            batch_size, loss.code, loss.param, state, perm, True, 0.0, fit_intercept,
        )
        touched[0] += T * min(batch_size, n)
        return v

    width = (k - m) / n

    def penalty_prox(v, t):
        out = v.copy()
        out[:d] = penalty.prox(v[:d], t / width * width)  # phi units: width R / width
        return out

    def value(u_):
        return rank_objective(X, y, u_[:d], u_[d], risk, loss, penalty)

    result = agd_loop(prox_point, value, penalty_prox, u, m / n, k / n, L, max_iter=max_iter,
                      tol=tol, mu=mu, gamma=gamma, step=step, inner_iter0=inner_iter0,
                      verbose=verbose, name="sorr-agd")
    best = result.coef
    result.coef, result.intercept = best[:d].copy(), float(best[d])
    result.info = {"passes": touched[0] / n + len(result.objective_history),
                   "time": time.perf_counter() - start}
    return result
