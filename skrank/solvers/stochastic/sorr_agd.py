"""AGD with SGD inner loops for ranked-range risks.

Yao, Lin and Yang, "Large-scale Optimization of Partial AUC in a Range of
False Positive Rates" (NeurIPS 2022), Algorithms 2 and 3: gradient descent
on the Moreau-smoothed difference of two top-``l`` sums, whose proximal
points are estimated by stochastic steps.  The method, its units and the
decisions the paper leaves open are described in the user guide,
:ref:`methods-sorr-agd`.
"""

import time

import numpy as np

from ..._jit import njit
from ...datafits.rank_risk import rank_objective
from ...losses import loss_value_and_derivative
from ..progress import Progress
from ..result import SolverResult
from .docs import fill_doc
from .epochs import internal_start
from .sampling import make_rng, sample_block, seed_state
from .steps import soft_scalar
from .units import FeatureUnits, dense_design, prepare_data

#: Consecutive outer iterations whose relative decrease must be at most ``tol``.
PATIENCE = 3
#: The stopping rule is applied from this outer iteration on.
MIN_ITER = 10
#: Power iterations for ``lambda_max`` in :func:`minibatch_smoothness`.
_POWER_ITERATIONS = 20


@njit(cache=True, inline="always")
def _active_gradient(X, s, c, code, param, v, b, perm, batch, lam, grad):
    """Sum of ``s_i l'(t_i) (x_i, 1)`` over the batch ``perm[:batch]`` where ``L_i > lam``.

    Writes the ``x`` part into ``grad``; returns the intercept part and the
    number of active samples.
    """
    d = X.shape[1]
    for j in range(d):
        grad[j] = 0.0
    gb = 0.0
    active = 0
    for r in range(batch):
        i = perm[r]
        f = b
        for j in range(d):
            f += X[i, j] * v[j]
        value, deriv = loss_value_and_derivative(code, s[i] * f + c[i], param)
        if value > lam:
            active += 1
            g = s[i] * deriv
            if g != 0.0:
                for j in range(d):
                    grad[j] += g * X[i, j]
                gb += g
    return gb, active


@njit(cache=True)
def sorr_sgd(
    X, s, c, code, param, w, wb, lam0, n_steps, batch, level, mu, eta, theta, l1, l2,
    fit_intercept, perm, state, v, vbar, grad,
):
    """Algorithm 3 of Yao, Lin and Yang (2022) for one level, in normalised units.

    Approximately solves the proximal subproblem (13) of the level
    ``level = l / n`` by ``n_steps`` stochastic steps from ``((w, wb), lam0)``,
    each on ``batch`` distinct samples; the subproblem and the step are
    described in the user guide, :ref:`methods-sorr-agd`.

    Parameters
    ----------
    X : ndarray of shape (n, d), C-contiguous
    s, c : ndarray of shape (n,)
        The loss arguments are ``t_i = s_i (x_i.v + b) + c_i``.
    code, param : int, float
        Loss code and parameter (:mod:`skrank.losses`).
    w : ndarray of shape (d,)
    wb : float
        The prox centre ``(w, wb)``, also the start.
    lam0 : float
        Start of ``lambda``.
    n_steps, batch : int
        ``T >= 1`` and ``J <= n``.
    level, mu, eta, theta : float
        ``l / n``, ``mu~``, ``eta~_t`` and ``theta~_t``, in normalised units.
    l1, l2 : ndarray of shape (d,)
        The penalty strengths of each coefficient, in normalised units.
    fit_intercept : bool
        When False the intercept stays at ``wb``.
    perm : ndarray of int64, shape (n,)
        A permutation of ``range(n)``, reshuffled in place.
    state : ndarray of uint64, shape (1,)
        Generator state, advanced in place.
    v, vbar, grad : ndarray of shape (d,)
        Outputs ``v = v_T`` (the last iterate) and
        ``vbar = mean_{t < T} v_t`` (``v_0 = w`` included, ``v_T`` not, as in
        the paper); ``grad`` is scratch.  Nothing else is allocated.

    Returns
    -------
    vbar_b, b_last, lambar : float
        The averaged and the last intercept, and the averaged ``lambda``
        (the warm start of the next call at this level).
    """
    d = X.shape[1]
    for j in range(d):
        v[j] = w[j]
        vbar[j] = 0.0
    b, bsum, lam, lam_sum = wb, 0.0, lam0, 0.0
    inv_b = 1.0 / batch
    # (14) in closed form: u_{t+1} = prox_{a R}(cw w + cv u_t - a G), a = mu eta / (mu + eta)
    a, cw, cv = mu * eta / (mu + eta), eta / (mu + eta), mu / (mu + eta)
    for _ in range(n_steps):
        for j in range(d):
            vbar[j] += v[j]
        bsum += b
        lam_sum += lam
        sample_block(perm, batch, state)
        gb, active = _active_gradient(X, s, c, code, param, v, b, perm, batch, lam, grad)
        for j in range(d):
            v[j] = soft_scalar(cw * w[j] + cv * v[j] - a * inv_b * grad[j], a * l1[j]) / (1.0 + a * l2[j])
        if fit_intercept:
            b = cw * wb + cv * b - a * inv_b * gb
        lam -= theta * (level - active * inv_b)
        if lam < 0.0:
            lam = 0.0
    scale = 1.0 / n_steps
    for j in range(d):
        vbar[j] *= scale
    return bsum * scale, b, lam_sum * scale


def minibatch_smoothness(X, loss, fit_intercept, batch, n_power=20):
    """Smoothness ``L_J`` of a mean of ``J`` distinct per-sample losses, and ``L_full``.

    ``J``-nice sampling (Gower et al. 2019, "SGD: general analysis and
    improved rates", Proposition 3.8); the formula is in the user guide,
    :ref:`methods-sorr-agd`.

    Parameters
    ----------
    X : ndarray of shape (n, d)
    loss : skrank.losses.Loss
    fit_intercept : bool
    batch : int
    n_power : int, default=20

    Returns
    -------
    L_J, L_full : float
    """
    n, d = X.shape
    curvature = loss.smoothness if np.isfinite(loss.smoothness) else 1.0
    u = np.random.default_rng(0).standard_normal(d + 1)
    if not fit_intercept:
        u[d] = 0.0
    top = 0.0
    for _ in range(n_power):
        norm = np.linalg.norm(u)
        if norm == 0.0:
            break
        u /= norm
        f = X @ u[:d] + u[d]
        g = np.empty(d + 1)
        g[:d] = X.T @ f / n
        g[d] = f.sum() / n if fit_intercept else 0.0
        top = float(u @ g)
        u = g
    sq_max = float(np.max(np.einsum("ij,ij->i", X, X))) + (1.0 if fit_intercept else 0.0)
    L_full, L_max = curvature * top, curvature * sq_max
    if n == 1:
        return max(L_max, 1e-12), max(L_full, 1e-12)
    L_J = (n * (batch - 1) * L_full + (n - batch) * L_max) / (batch * (n - 1))
    return max(L_J, 1e-12), max(L_full, 1e-12)


def _proximal_gradient_polish(X, s, c, m, k, loss, l1, l2, objective, F, w, b, fit_intercept,
                              tau):
    """One proximal-gradient step on ``F`` from ``(w, b)``, kept only if it lowers ``F``.

    The gradient of the ranked range at ``(w, b)`` is exact (the losses
    ranked ``m+1 .. k``, weight ``1 / (k - m)``); the step ``tau`` is
    ``1 / L`` for ``L = L_full n / (k - m)``, a bound on the smoothness of the
    ranked range on a piece where the ranking is fixed, then ``tau / 4`` and
    ``tau / 16``; ``l1`` and ``l2`` are the penalty strengths of each
    coefficient.  Returns the point kept, its ``F`` and the number of
    evaluations.
    """
    t = s * (X @ w + b) + c
    top = np.argsort(loss.value(t), kind="stable")[::-1][m:k]
    coeff = s[top] * loss.derivative(t[top]) / (k - m)
    g = X[top].T @ coeff
    gb = float(coeff.sum()) if fit_intercept else 0.0
    tried = 0
    for step in (tau, tau / 4.0, tau / 16.0):
        z = w - step * g
        u = np.sign(z) * np.maximum(np.abs(z) - step * l1, 0.0) / (1.0 + step * l2)
        ub = b - step * gb
        Fu = objective(u, ub)
        tried += 1
        if Fu <= F:
            return Fu, u, ub, tried
    return F, w, b, tried


def _dual_start(losses_desc, level):
    """Midpoint of ``[L_[l+1], L_[l]]``, the optimal set of ``lambda`` in (12) at the start."""
    n = losses_desc.shape[0]
    upper = losses_desc[level - 1]
    lower = losses_desc[level] if level < n else 0.0
    return 0.5 * (upper + lower)


@fill_doc
def sorr_agd(datafit, penalty, *, max_iter=30, tol=1e-5, batch_size=100,
             mu=20.0, gamma=40.0, step=1.0, inner_iter0=10, random_state=None, coef_init=None,
             intercept_init=None, verbose=0):
    """Minimise a ranked-range risk by AGD with SGD inner loops (Yao, Lin and Yang 2022).

    The outer iteration and the decisions the paper leaves open (or gets
    wrong) are described in the user guide, :ref:`methods-sorr-agd`.

    Parameters
    ----------
    {datafit}
        Its risk: a ranked range (:class:`skrank.risks.RankedRange`; ``risk.counts(n)``
        gives the integer ranks ``m < k``).
        Its loss: any loss; the hinge and absolute losses use a subgradient.
    penalty : skrank.penalties.Penalty
        The l1, l2 or elastic-net penalty, applied by its proximal map inside
        the inner steps of the k-call (user guide).
    max_iter : int, default=30
        Outer iterations ``K``.  Iteration ``k`` costs
        ``2 inner_iter0 (k+1)^2`` steps, so the work grows like ``K^3``.
    tol : float, default=1e-5
        Stop when the best objective found has decreased by at most
        ``tol |F|`` in each of the last 3 outer iterations (checked from the
        10th outer iteration on).
    batch_size : int, default=100
        ``J`` (the paper's value), capped at ``n``.
    mu, gamma : float, default=20, 40
        ``mu~ L_J`` and ``gamma~ L_J``: the smoothing parameter and the outer
        step in units of ``1 / L_J`` (:func:`minibatch_smoothness`); the
        outer step multiplies ``vbar_m - vbar_k`` by ``gamma / mu``.
    step : float, default=1
        ``c L_J`` of the inner steps ``eta~ = c / (k+1)``; the dual step
        ``theta~`` is the same number, as in the paper's SoRR runs
        (Appendix E.1: ``eta_t = theta_t = c / ((k+1) N)``).
    inner_iter0 : int, default=10
        ``C`` of ``T_k = C (k+1)^2``.
    random_state : int, RandomState, Generator or None, default=None
        Seed of the in-kernel generator (the batches).
    coef_init, intercept_init : ndarray, float or None, default=None
        Starting point ``w^(0)`` (zeros by default).
    verbose : int, default=0
        Print one line per outer iteration when positive.

    Returns
    -------
    SolverResult
        ``coef``/``intercept``: the point of lowest exact ``F`` found
        (user guide); ``objective_history[j]``: the exact ``F``
        (:func:`skrank.datafits.rank_risk.rank_objective`) of the best point after
        outer iteration ``j + 1``, nonincreasing (the last entry after the
        final proximal-gradient step); ``stop_criterion``: the largest
        relative decrease of the last 3 outer iterations; ``info``:
        ``passes`` (samples touched / n: the inner batches, plus one pass
        per full evaluation of the losses or their gradient and two per
        power iteration of :func:`minibatch_smoothness`), ``inner_passes``
        (the batches alone), ``time`` (seconds, everything included),
        ``objective_raw`` (``F`` at ``vbar_k`` after each outer iteration),
        ``objective_start``, ``lambda`` (the final ``(lambda_m,
        lambda_k)``) and ``smoothness`` (``L_J``).
    """
    X, y, risk, loss, fit_intercept = datafit.unweighted("agd")
    start = time.perf_counter()
    state = seed_state(make_rng(random_state))
    data = _RankedRangeData(X, y, risk, loss, penalty, fit_intercept, batch_size)
    run = _AgdRun(data, mu, gamma, step, inner_iter0, state, coef_init, intercept_init)
    criterion, converged = run.iterate(max_iter, tol, verbose)
    run.polish()
    return run.result(criterion, converged, time.perf_counter() - start)


class _RankedRangeData:
    """The data of :func:`sorr_agd` in the units of :class:`FeatureUnits`, its ranks and smoothness."""

    def __init__(self, X, y, risk, loss, penalty, fit_intercept, batch_size):
        self.X_orig, self.y = dense_design(X), y
        self.risk, self.loss, self.penalty, self.fit_intercept = risk, loss, penalty, fit_intercept
        self.units = FeatureUnits(self.X_orig, fit_intercept)
        self.X, self.s, self.c, _ = prepare_data(self.units.transform(self.X_orig), y, loss, fit_intercept)
        self.n = self.X.shape[0]
        self.m, self.k = risk.counts(self.n)
        self.batch = int(min(max(int(batch_size), 1), self.n))
        self.L_J, self.L_full = minibatch_smoothness(self.X, loss, fit_intercept, self.batch,
                                                     _POWER_ITERATIONS)

    def objective(self, coef, b):
        """Exact ``F`` at the internal point ``(coef, b)``."""
        coef, b = self.units.to_original(coef, b)
        return rank_objective(self.X_orig, self.y, coef, b, self.risk, self.loss, self.penalty)

    def sorted_losses(self, w, b):
        """The losses at the internal point ``(w, b)``, largest first."""
        return np.sort(self.loss.value(self.s * (self.X @ w + b) + self.c))[::-1]


class _AgdRun:
    """The state of :func:`sorr_agd`: the outer point, the dual variables, the best point and the counts.

    ``mu``, ``gamma``, ``step`` and ``inner_iter0`` are those of
    :func:`sorr_agd`; ``state`` is the kernel generator's state.
    """

    def __init__(self, data, mu, gamma, step, inner_iter0, state, coef_init, intercept_init):
        n, d = data.X.shape
        self.data, self.state, self.inner_iter0 = data, state, int(inner_iter0)
        self.mu, self.c_step = float(mu) / data.L_J, float(step) / data.L_J
        self.ratio = float(gamma) / float(mu)
        # the penalty of each coefficient in the standardised units, then scaled like the normalised risk
        self.l1_units, self.l2_units = data.units.penalty(data.penalty)
        scale = (data.k - data.m) / n
        self.l1, self.l2, self.zeros = self.l1_units * scale, self.l2_units * scale, np.zeros(d)
        _, self.w, b = internal_start(data.units, coef_init, intercept_init, data.fit_intercept)
        self.wb = float(b[0])
        losses = data.sorted_losses(self.w, self.wb)
        self.lam_m = _dual_start(losses, data.m) if data.m > 0 else 0.0
        self.lam_k = _dual_start(losses, data.k)
        self.F_start = self.best_F = data.objective(self.w, self.wb)
        self.best_w, self.best_b = self.w.copy(), self.wb
        self.history, self.raw, self.decreases = [], [], []
        self.perm = np.arange(n, dtype=np.int64)
        self.v, self.grad, self.vbar_m, self.vbar_k = np.empty(d), np.empty(d), np.empty(d), np.empty(d)
        self.inner, self.evaluations = 0, 2 + 2 * _POWER_ITERATIONS

    def _prox_point(self, level, lam, l1, l2, vbar, T, eta):
        """:func:`sorr_sgd` at the rank ``level`` from the outer point into ``vbar``; ``(vbar_b, lambar)``."""
        data = self.data
        vbar_b, _, lam = sorr_sgd(
            data.X, data.s, data.c, data.loss.code, data.loss.param, self.w, self.wb, lam, T, data.batch,
            level / data.n, self.mu, eta, eta, l1, l2, data.fit_intercept, self.perm, self.state, self.v,
            vbar, self.grad,
        )
        self.inner += T * data.batch
        return vbar_b, lam

    def outer_iteration(self, it):
        """Outer iteration ``it`` (user guide); returns ``T`` and ``F(vbar_k)``."""
        data = self.data
        T = self.inner_iter0 * (it + 1) ** 2
        eta = self.c_step / (it + 1)
        if data.m > 0:
            vbar_m_b, self.lam_m = self._prox_point(data.m, self.lam_m, self.zeros, self.zeros, self.vbar_m,
                                                    T, eta)
        else:
            self.vbar_m[:] = self.w
            vbar_m_b = self.wb
        vbar_k_b, self.lam_k = self._prox_point(data.k, self.lam_k, self.l1, self.l2, self.vbar_k, T, eta)
        previous = self.best_F
        F_bar = data.objective(self.vbar_k, vbar_k_b)
        self.evaluations += 1
        self.raw.append(F_bar)
        if F_bar < self.best_F:
            self.best_F, self.best_w, self.best_b = F_bar, self.vbar_k.copy(), vbar_k_b
        self.w -= self.ratio * (self.vbar_m - self.vbar_k)
        if data.fit_intercept:
            self.wb -= self.ratio * (vbar_m_b - vbar_k_b)
        self.history.append(self.best_F)
        self.decreases.append((previous - self.best_F) / max(abs(self.best_F), 1e-300))
        return T, F_bar

    def iterate(self, max_iter, tol, verbose):
        """The outer iterations until the stopping rule; returns ``(criterion, converged)``."""
        progress = Progress("agd", verbose, max_iter, unit="outer iteration", criterion="decrease")
        criterion = np.inf
        for it in range(max_iter):
            T, F_bar = self.outer_iteration(it)
            criterion = max(self.decreases[-PATIENCE:])
            progress(it + 1, self.best_F, criterion, f"inner steps={T} F(vbar_k)={F_bar:.10g}")
            if not np.isfinite(F_bar):
                break
            if it + 1 >= MIN_ITER and criterion <= tol:
                return criterion, True
        return criterion, False

    def polish(self):
        """The final proximal-gradient step of the user guide (after at least one outer iteration)."""
        if not self.history:
            return
        data = self.data
        self.best_F, self.best_w, self.best_b, tried = _proximal_gradient_polish(
            data.X, data.s, data.c, data.m, data.k, data.loss, self.l1_units, self.l2_units, data.objective,
            self.best_F, self.best_w, self.best_b, data.fit_intercept,
            (data.k - data.m) / (data.n * data.L_full),
        )
        self.evaluations += 1 + tried
        self.history[-1] = self.best_F

    def result(self, criterion, converged, seconds):
        """The :class:`SolverResult` (see :func:`sorr_agd`)."""
        data = self.data
        coef, intercept = data.units.to_original(self.best_w, self.best_b)
        info = {"passes": (self.inner + self.evaluations * data.n) / data.n,
                "inner_passes": self.inner / data.n, "time": seconds, "objective_raw": np.asarray(self.raw),
                "objective_start": self.F_start, "lambda": (self.lam_m, self.lam_k), "smoothness": data.L_J}
        return SolverResult(coef=coef, intercept=intercept if data.fit_intercept else 0.0,
                            n_iter=len(self.history), objective_history=np.asarray(self.history),
                            stop_criterion=float(criterion), converged=converged, info=info)
