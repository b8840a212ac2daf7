"""Prospect with no smoothing, for risks with fixed rank weights.

Mehta, Roulet, Pillutla and Harchaoui, "Distributionally Robust
Optimization with Bias and Variance Reduction" (2024): SAGA-style tables of
losses, gradients and weights, the ranking updated after every step.  The
method is described in the user guide, :ref:`methods-baselines`.
"""

import time

import numpy as np

from ..._jit import njit
from ...datafits.rank_risk import rank_objective
from ...losses import loss_derivative, loss_value
from .docs import fill_doc
from .epochs import EpochLog, StandardisedStart, run_epochs
from .sampling import make_rng, seed_numba
from .steps import prox_factors, prox_step, sample_smoothness, svrg_step_size
from .svrg import loss_arguments_dense, scalar_gradients


@njit(cache=True)
def rerank(table, perm, rank, i, value):
    """Set ``table[i] = value`` and restore ``table[perm[0]] <= table[perm[1]] <= ...``.

    ``perm[r]`` is the sample of rank ``r`` and ``rank`` its inverse; the
    entry of ``i`` slides left or right past the entries it overtakes.
    """
    n = table.shape[0]
    r = rank[i]
    table[i] = value
    while r > 0 and table[perm[r - 1]] > value:
        perm[r] = perm[r - 1]
        rank[perm[r]] = r
        r -= 1
    while r < n - 1 and table[perm[r + 1]] < value:
        perm[r] = perm[r + 1]
        rank[perm[r]] = r
        r += 1
    perm[r] = i
    rank[i] = r


@njit(cache=True)
def prospect_epoch(
    X, s, c, code, param, w, b, n_steps, batch, sigma, lr, l1, l2, fit_intercept,
    ltab, gtab, rho, perm, rank, gagg, gagg_b, work, idx, g_new, l_new, q_used,
):
    """``n_steps`` Prospect steps (Mehta et al. 2024, ``nu = 0`` as in Ge and Jiang 2024).

    Tables: ``ltab`` (losses), ``gtab`` (scalar gradients ``s_i l'(t_i)``),
    ``rho`` (the weight each stored gradient entered the aggregate with),
    the ranking ``perm``/``rank`` of ``ltab`` and the aggregate
    ``gagg = sum_i rho_i gtab_i x_i`` (``gagg_b[0]`` its intercept part).
    Per step, with ``q_i = sigma[rank[i]]`` and ``B`` uniform draws::

        v = gagg + (n / B) sum_{i in batch} (q_i g_i - rho_i gtab_i) (x_i, 1)
        w = prox_{lr R}(w - lr v)

    then every drawn sample enters the tables with its gradient, its weight
    ``q_i`` and its loss at the point where they were evaluated, and is
    moved to its new rank.  ``l1`` and ``l2`` are per-coefficient
    strengths (arrays).
    """
    n, d = X.shape
    empty = np.zeros(d)
    scale = n / batch
    thr, inv = prox_factors(lr, l1, l2, 0.0)
    for _ in range(n_steps):
        for j in range(d):
            work[j] = gagg[j]
        db = gagg_b[0]
        for m in range(batch):
            i = np.random.randint(0, n)
            idx[m] = i
            f = b[0]
            for j in range(d):
                f += X[i, j] * w[j]
            t = s[i] * f + c[i]
            g = s[i] * loss_derivative(code, t, param)
            g_new[m] = g
            l_new[m] = loss_value(code, t, param)
            q_used[m] = sigma[rank[i]]
            delta = scale * (q_used[m] * g - rho[i] * gtab[i])
            if delta != 0.0:
                for j in range(d):
                    work[j] += delta * X[i, j]
                db += delta
        prox_step(w, b, work, db, lr, thr, inv, 0.0, empty, 0.0, fit_intercept)
        for m in range(batch):
            i = idx[m]
            delta = q_used[m] * g_new[m] - rho[i] * gtab[i]
            if delta != 0.0:
                for j in range(d):
                    gagg[j] += delta * X[i, j]
                gagg_b[0] += delta
            gtab[i] = g_new[m]
            rho[i] = q_used[m]
            rerank(ltab, perm, rank, i, l_new[m])


@fill_doc
def prospect(datafit, penalty, *, batch_size=1, learning_rate="auto",
             max_iter=100, epoch_length=None, tol=1e-6, random_state=None, coef_init=None,
             intercept_init=None, verbose=0):
    """Minimise ``sum_i sigma_i l_(i) + penalty`` with Prospect (no smoothing).

    Parameters
    ----------
    {datafit}
        Its risk: a risk whose weights depend on ``n`` only (spectral, ranked range).
        Its loss: a smooth loss (SAGA's guarantees need Lipschitz gradients).
    penalty : skrank.penalties.Penalty
        The l2 (the paper's setting), l1 or elastic-net penalty, applied by
        its prox.
    batch_size : int, default=1
        Samples per step, drawn uniformly with replacement.
    learning_rate : "auto" or float, default="auto"
        Step size; "auto" is
        :func:`skrank.solvers.stochastic.steps.svrg_step_size` with uniform
        sampling, ``1 / (3 (n max(sigma) max_i L_i / B + Lbar))``, the
        SAGA step for the scaled terms ``n q_i l_i``, {scale_free}
    max_iter : int, default=100
        Number of epochs.
    epoch_length : int or None, default=None
        Steps per epoch; ``None`` means ``ceil(n / batch_size)``.
    {epoch_tol}
    {seed_start_verbose}

    Returns
    -------
    {epoch_result}, ``passes`` (one pass to fill the
        tables, then ``B * steps / n`` per epoch, our convention) and
        ``learning_rate``.
    """
    X, y, risk, loss, fit_intercept = datafit.unweighted("prospect")
    if risk.depends_on_values:
        raise ValueError(
            f"prospect needs rank weights that depend on n only; {type(risk).__name__}'s "
            "depend on the loss values. Use sgd, lsvrg or the RankADMM solver."
        )
    seed_numba(make_rng(random_state))
    run = StandardisedStart(X, y, loss, fit_intercept, learning_rate, batch_size, coef_init, intercept_init)
    X, s, c, w, b, batch, steps = run.X, run.s, run.c, run.w, run.b, run.batch, run.epoch_steps(epoch_length)
    n, d = X.shape
    sigma = np.ascontiguousarray(risk.weights(n), dtype=np.float64)
    lr, fraction = run.step(lambda sq: svrg_step_size(sample_smoothness(loss, sq), sigma, batch, "uniform"))
    l1, l2 = run.units.penalty(penalty)
    start = time.perf_counter()
    tables = _initial_tables(X, s, c, loss, w, b, sigma, fit_intercept)
    work, idx = np.empty(d), np.empty(batch, dtype=np.int64)
    g_new, l_new, q_used = np.empty(batch), np.empty(batch), np.empty(batch)
    setup = time.perf_counter() - start

    def epoch(_):
        start = time.perf_counter()
        prospect_epoch(
            X, s, c, loss.code, loss.param, w, b, steps, batch, sigma, lr, l1, l2,
            fit_intercept, *tables, work, idx, g_new, l_new, q_used,
        )
        seconds = time.perf_counter() - start
        return rank_objective(run.X_orig, y, *run.original(), risk, loss, penalty), seconds, steps * batch / n

    log = EpochLog(risk.value(tables[0]) + penalty.value(run.w0), "Prospect", verbose, max_iter, fraction)
    log.times[0], log.passes[0] = setup, 1.0
    crit, converged = run_epochs(log, epoch, max_iter, tol)
    return log.result(*run.original(), fit_intercept, crit, converged, learning_rate=lr)


def _initial_tables(X, s, c, loss, w, b, sigma, fit_intercept):
    """Prospect's tables at ``(w, b)``: ``(ltab, gtab, rho, perm, rank, gagg, gagg_b)``.

    As :func:`prospect_epoch` reads them: the losses, the scalar gradients,
    their weights, the ranking of the losses and its inverse, and the
    weighted aggregate of the gradients with its intercept part.
    """
    n = X.shape[0]
    t = loss_arguments_dense(X, s, c, w, b[0], np.empty(n))
    ltab = loss.value(t)
    gtab = scalar_gradients(loss.code, loss.param, s, t, np.empty(n))
    perm = np.argsort(ltab, kind="stable")
    rank = np.empty(n, dtype=np.int64)
    rank[perm] = np.arange(n)
    rho = sigma[rank]
    gagg = X.T @ (rho * gtab)
    gagg_b = np.array([float(rho @ gtab) if fit_intercept else 0.0])
    return ltab, gtab, rho, perm, rank, gagg, gagg_b
