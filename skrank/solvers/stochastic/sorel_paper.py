"""The paper's practical SOREL, verbatim (Ge and Jiang 2024, section 3.2 and Appendix B).

A reference implementation for the benchmark's ``--paper-grid`` mode and
for tests: given ``lr`` and ``C``, uniform sampling, the paper's schedules,
the primal step in gradient form.  :func:`skrank.solvers.stochastic.sorel.sorel` is
the solver.
"""

import time

import numpy as np

from ..._jit import njit
from ...kernels.pava import isotonic_kernel
from ...kernels.sorting import gather_keys, keyed_scratch, sort_keyed
from ...losses import loss_derivative, loss_value
from ..result import SolverResult
from .sampling import make_rng, seed_state, xorshift_uniform
from .svrg import loss_arguments_dense
from .units import prepare_data
from .weights import rank_weights


@njit(cache=True, inline="always")
def _dual_step(lam, losses, losses_prev, sigma, perm, theta, eta, work_n, work_n2, u, scratch):
    """``lam <- Proj(lam + eta v)``, ``v = (1 + theta) l(w_k) - theta l(w_{k-1})`` (Algorithm 1 lines 3-4)."""
    pk, pk2, kbuf, pbuf, counts, rhist = scratch
    n = lam.shape[0]
    for i in range(n):
        work_n[i] = lam[i] + eta * ((1.0 + theta) * losses[i] - theta * losses_prev[i])
    descents, far = gather_keys(work_n, perm, work_n2)  # z in its previous order, then sorted
    sort_keyed(work_n2, perm, descents, far, pk, pk2, kbuf, pbuf, counts, rhist)
    for j in range(n):
        work_n[j] = work_n2[j] - sigma[j]
    isotonic_kernel(work_n, np.empty(0), u)
    for j in range(n):
        lam[perm[j]] = work_n2[j] - u[j]


@njit(cache=True, inline="always")
def _new_losses_objective(X, s, c, sigma, code, param, w, b, mu, t, losses, losses_prev, work_n):
    """The losses at the new iterate (the old ones into ``losses_prev``) and its objective."""
    n, d = X.shape
    for i in range(n):
        losses_prev[i] = losses[i]
        f = b
        for a in range(d):
            f += X[i, a] * w[a]
        t[i] = s[i] * f + c[i]
        losses[i] = loss_value(code, t[i], param)
        work_n[i] = losses[i]
    work_n.sort()
    obj = 0.0
    for j in range(n):
        obj += sigma[j] * work_n[j]
    for a in range(d):
        obj += 0.5 * mu * w[a] * w[a]
    return obj


@njit(cache=True)
def _sorel_paper_epochs(X, s, c, sigma, code, param, w, b, t, losses, losses_prev, lam, perm,
                        ipar, fpar, rng, hist, work_n, work_n2, u, gref, gbar, anchor, idx, grad):
    """Epochs ``k0 .. k0 + n_ep - 1`` of the practical SOREL; returns the epochs run.

    ``ipar`` = (k0, n_ep, batch, fit_intercept); ``fpar`` = (lr, C, mu,
    tau_scale, divergence threshold).  Uniform sampling with replacement,
    ``eta_k = C mu (k + 1)`` (``C (k + 1) / n`` for ``mu = 1/n``), ``tau_k =
    tau_scale / (mu (k + 1))``, ``theta_k = k / (k + 1)``, the primal step
    in gradient form (no prox), the last iterate.  Stops (returns early)
    when the objective is not finite or exceeds the threshold.
    """
    n, d = X.shape
    k0, n_ep, batch, fit_intercept = ipar[0], ipar[1], ipar[2], ipar[3] != 0
    lr, C, mu, tau_scale, blowup = fpar[0], fpar[1], fpar[2], fpar[3], fpar[4]
    steps = (n + batch - 1) // batch
    scale = n / batch
    scratch = keyed_scratch(n)
    ran = 0
    for k in range(k0, k0 + n_ep):
        theta = k / (k + 1.0)
        eta = C * mu * (k + 1.0)
        inv_tau = mu * (k + 1.0) / tau_scale
        _dual_step(lam, losses, losses_prev, sigma, perm, theta, eta, work_n, work_n2, u, scratch)
        # line 6: reference gradient at w_k (no regulariser)
        for a in range(d):
            gbar[a] = 0.0
            anchor[a] = w[a]
        gbar_b = 0.0
        b_anchor = b[0]
        for i in range(n):
            g = s[i] * loss_derivative(code, t[i], param)
            gref[i] = g
            lg = lam[i] * g
            for a in range(d):
                gbar[a] += lg * X[i, a]
            gbar_b += lg
        # lines 7-15: n / batch SVRG steps, gradient form
        for step in range(steps):
            for m in range(batch):
                i = int(xorshift_uniform(rng) * n)
                if i >= n:
                    i = n - 1
                idx[m] = i
            for a in range(d):
                grad[a] = gbar[a] + inv_tau * (w[a] - anchor[a]) + mu * w[a]
            gb = gbar_b + inv_tau * (b[0] - b_anchor)
            for m in range(batch):
                i = idx[m]
                f = b[0]
                for a in range(d):
                    f += X[i, a] * w[a]
                delta = scale * lam[i] * (s[i] * loss_derivative(code, s[i] * f + c[i], param) - gref[i])
                for a in range(d):
                    grad[a] += delta * X[i, a]
                gb += delta
            for a in range(d):
                w[a] -= lr * grad[a]
            if fit_intercept:
                b[0] -= lr * gb
        obj = _new_losses_objective(X, s, c, sigma, code, param, w, b[0], mu, t, losses, losses_prev, work_n)
        hist[k + 1] = obj
        ran += 1
        if not np.isfinite(obj) or obj > blowup:
            break
    return ran


def sorel_paper(X, y, risk, loss, penalty, *, learning_rate, dual_scale, max_iter=50,
                batch_size=1, tau_scale=20.0, fit_intercept=False, random_state=None,
                divergence=1.5):
    """The paper's practical SOREL with given ``lr`` and ``C`` (Ge and Jiang 2024, Appendix B).

    No automatic rule: uniform sampling, ``eta_k = C mu (k + 1)`` (the paper's
    ``C (k + 1) / n`` with ``mu = 1/n``), ``tau_k = tau_scale / (mu (k + 1))``,
    ``theta_k = k / (k + 1)``, the primal step in gradient form, the last
    iterate; mini-batches average the variance-reduced correction over the
    batch (the paper only gives the batch size, 64).  A run whose objective
    exceeds ``divergence`` times the initial one stops and is reported as
    diverged (``info["diverged"]``, its later history ``inf``), as in the
    grid searches of Mehta et al. that the paper follows (Appendix B).  Used as the reference by the
    benchmark's ``--paper-grid`` mode; :func:`sorel` is the solver.
    """
    rng = make_rng(random_state)
    X, s, c, _ = prepare_data(X, y, loss, fit_intercept)
    n, d = X.shape
    mu = float(penalty.l2)
    if penalty.l1 != 0.0:
        raise ValueError("sorel_paper handles the l2 penalty only.")
    sigma = np.ascontiguousarray(risk.weights(n), dtype=np.float64)
    batch = int(min(max(batch_size, 1), n))
    w = np.zeros(d)
    b = np.zeros(1)
    t = loss_arguments_dense(X, s, c, w, 0.0, np.empty(n))
    losses = loss.value(t)
    losses_prev = losses.copy()
    lam = rank_weights(risk, losses)
    obj0 = risk.value(losses)
    hist = np.full(max_iter + 1, np.inf)
    hist[0] = obj0
    perm = np.argsort(losses, kind="stable")
    fpar = np.array([float(learning_rate), float(dual_scale), mu, float(tau_scale), divergence * obj0])
    rng_state = seed_state(rng)
    scratch = (np.empty(n), np.empty(n), np.empty(n), np.empty(n), np.empty(d), np.empty(d),
               np.empty(batch, dtype=np.int64), np.empty(d))
    times = np.full(max_iter + 1, np.nan)
    times[0] = 0.0
    done = 0
    elapsed = 0.0
    while done < max_iter:
        ran_now = min(max_iter - done, max(1, 200000 // (n * 2)))
        ipar = np.array([done, ran_now, batch, int(bool(fit_intercept))], dtype=np.int64)
        start = time.perf_counter()
        ran = _sorel_paper_epochs(X, s, c, sigma, loss.code, loss.param, w, b, t, losses, losses_prev,
                                  lam, perm, ipar, fpar, rng_state, hist, *scratch)
        seconds = time.perf_counter() - start
        times[done + 1: done + ran + 1] = elapsed + seconds * np.arange(1, ran + 1) / ran
        elapsed += seconds
        done += ran
        if ran < ran_now:
            break
    diverged = not (np.isfinite(hist[done]) and hist[done] <= divergence * obj0)
    if diverged:
        hist[done:] = np.inf
    steps = -(-n // batch)
    per_epoch_passes = 1.0 + steps * batch / n
    return SolverResult(
        coef=w, intercept=float(b[0]) if fit_intercept else 0.0, n_iter=done,
        objective_history=hist[: done + 1].copy(), stop_criterion=np.nan, converged=False,
        info={"lambda": lam, "times": times[: done + 1].copy(),
              "passes": per_epoch_passes * np.arange(done + 1, dtype=np.float64),
              "learning_rate": float(learning_rate), "dual_scale": float(dual_scale),
              "diverged": diverged},
    )
