"""LSVRG for rank-weighted risks: SVRG whose checkpoints re-rank the losses.

Mehta, Roulet, Pillutla, Liu and Harchaoui, "Stochastic Optimization for
Spectral Risk Measures" (2023), with no smoothing; a baseline of Ge and
Jiang (2024) and Xiao et al. (2023).  The epoch and the choice of step are
described in the user guide, :ref:`methods-baselines`.
"""

import time

import numpy as np

from .docs import fill_doc
from .epochs import EpochLog, StandardisedStart, run_epochs
from .sampling import WeightedSampler, draw_uniform, make_rng, seed_numba
from .steps import sample_smoothness, svrg_step_size
from .svrg import loss_arguments_dense, scalar_gradients, svrg_epoch
from .weights import rank_weights

_SAMPLINGS = ("uniform", "nonuniform")


@fill_doc
def lsvrg(datafit, penalty, *, sampling="uniform", learning_rate="auto",
          max_iter=100, epoch_length=None, batch_size=1, tol=1e-6, random_state=None, coef_init=None,
          intercept_init=None, verbose=0):
    """Minimise ``sum_i sigma_i l_(i) + penalty`` with LSVRG.

    The epoch is described in the user guide, :ref:`methods-baselines`.

    Parameters
    ----------
    {datafit}
        Its risk: any risk; value-dependent weights (human-aligned) are recomputed
        from the losses at every checkpoint.
        Its loss: smooth losses carry the guarantees of SVRG; non-smooth ones run with
        a subgradient (a heuristic).
    penalty : skrank.penalties.Penalty
        The l1, l2 or elastic-net penalty, applied by its prox after every step.
    sampling : {"uniform", "nonuniform"}, default="uniform"
        ``"uniform"``: draw ``i`` uniformly and scale its correction by
        ``n q_i`` (Mehta et al. 2023).  ``"nonuniform"``: draw the rank
        ``j`` with probability ``sigma_j`` and take the sample of that rank,
        whose correction then has weight 1 (LSVRG(NU) of Xiao et al. 2023,
        section 5).
    learning_rate : "auto" or float, default="auto"
        Step size; "auto" is :func:`skrank.solvers.stochastic.steps.svrg_step_size`
        for uniform sampling, with the weights at the starting point, for
        both samplings (user guide), {scale_free}
    max_iter : int, default=100
        Number of checkpoints (epochs).
    epoch_length : int or None, default=None
        Steps per epoch; ``None`` means ``ceil(n / batch_size)`` (Ge and Jiang
        2024: epoch length ``n``).
    batch_size : int, default=1
        Samples per step (their corrections are averaged).
    {epoch_tol}
    {seed_start_verbose}

    Returns
    -------
    {epoch_result} (cumulative solver seconds, objective evaluation
        excluded), ``passes`` (one full pass plus ``B * steps / n`` per epoch,
        our convention), ``learning_rate`` (in the standardised units for
        "auto") and ``weights`` (the last checkpoint's ``q``).
    """
    X, y, risk, loss, fit_intercept = datafit.unweighted("lsvrg")
    if sampling not in _SAMPLINGS:
        raise ValueError(f"sampling must be one of {_SAMPLINGS}, got {sampling!r}.")
    seed_numba(make_rng(random_state))
    run = StandardisedStart(X, y, loss, fit_intercept, learning_rate, batch_size, coef_init, intercept_init)
    X, s, c, w, b, batch, steps = run.X, run.s, run.c, run.w, run.b, run.batch, run.epoch_steps(epoch_length)
    n, d = X.shape
    t = loss_arguments_dense(X, s, c, w, b[0], np.empty(n))
    losses = loss.value(t)
    q = rank_weights(risk, losses)
    lr, fraction = run.step(lambda sq: svrg_step_size(sample_smoothness(loss, sq), q, batch, "uniform"))
    l1, l2 = run.units.penalty(penalty)
    gref, idx, work = np.empty(n), np.empty(steps * batch, dtype=np.int64), np.empty(d)
    sampler = WeightedSampler(n) if sampling == "nonuniform" else None

    def epoch(k):
        nonlocal losses
        start = time.perf_counter()
        if k > 0:
            rank_weights(risk, losses, out=q)
        scalar_gradients(loss.code, loss.param, s, t, gref)
        qg = q * gref
        gbar_b = float(qg.sum()) if fit_intercept else 0.0
        mult = _draw_epoch(sampler, q, idx)
        svrg_epoch(X, s, c, loss.code, loss.param, w, b, gref, mult, X.T @ qg, gbar_b, idx, batch, lr,
                   l1, l2, 0.0, w, 0.0, fit_intercept, work)
        loss_arguments_dense(X, s, c, w, b[0], t)
        losses = loss.value(t)
        seconds = time.perf_counter() - start
        return risk.value(losses) + penalty.value(run.original()[0]), seconds, 1.0 + steps * batch / n

    log = EpochLog(risk.value(losses) + penalty.value(run.w0), "LSVRG", verbose, max_iter, fraction)
    crit, converged = run_epochs(log, epoch, max_iter, tol)
    return log.result(*run.original(), fit_intercept, crit, converged, learning_rate=lr, weights=q)


def _draw_epoch(sampler, q, idx):
    """Fill ``idx`` with an epoch's draws; returns the multipliers ``q_i / p_i`` of the corrections.

    Without ``sampler`` the draws are uniform (``p_i = 1/n``); with one (a
    :class:`WeightedSampler`) they follow ``p_i = |q_i|``.
    """
    n = q.shape[0]
    if sampler is None:
        draw_uniform(n, idx)
        return n * q
    p = np.abs(q)
    sampler.draw(p, idx)
    return np.divide(q, p, out=np.zeros(n), where=p > 0)
