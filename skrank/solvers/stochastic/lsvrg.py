"""LSVRG for rank-weighted risks (Mehta et al. 2023, with no smoothing).

A baseline of Ge and Jiang 2024 (section 5) and Xiao et al. 2023 (section 5): SVRG whose
checkpoint also re-ranks the losses.  At every checkpoint ``w_ckpt`` the
weights are frozen to ``q = sigma`` ranked by ``l(w_ckpt)``; the epoch then
runs variance-reduced steps on ``sum_i q_i l_i + penalty``.  This is SOREL
with an infinite dual step and no primal proximal term: the weights jump
between permutations, so the method may stall above the optimum of a
spectral risk when losses cross.
"""

import time

import numpy as np

from .steps import (
    EpochLog,
    FeatureUnits,
    WeightedSampler,
    check_learning_rate,
    dense_design,
    draw_uniform,
    initial_point,
    loss_arguments_dense,
    make_rng,
    prepare_data,
    rank_weights,
    sample_smoothness,
    scalar_gradients,
    seed_numba,
    svrg_epoch,
    svrg_step_size,
    user_step_fraction,
)

_SAMPLINGS = ("uniform", "nonuniform")


def lsvrg(
    X,
    y,
    risk,
    loss,
    penalty,
    *,
    fit_intercept=True,
    sampling="uniform",
    learning_rate="auto",
    max_iter=100,
    epoch_length=None,
    batch_size=1,
    tol=1e-6,
    random_state=None,
    coef_init=None,
    intercept_init=None,
    verbose=0,
):
    """Minimise ``sum_i sigma_i l_(i) + penalty`` with LSVRG.

    Parameters
    ----------
    X : {ndarray, sparse matrix} of shape (n, d)
        Design; sparse input is densified.
    y : ndarray of shape (n,)
        Labels in {-1, +1} (classification losses) or targets (regression).
    risk : skrank.risks.BaseRisk
        Any risk; value-dependent weights (human-aligned) are recomputed
        from the losses at every checkpoint.
    loss : skrank.losses.Loss
        Smooth losses carry the guarantees of SVRG; non-smooth ones run with
        a subgradient (a heuristic).
    penalty : skrank.penalties.Penalty
        The l1, l2 or elastic-net penalty, applied by its prox after every step.
    fit_intercept : bool, default=True
        Fit an unpenalised intercept.
    sampling : {"uniform", "nonuniform"}, default="uniform"
        ``"uniform"``: draw ``i`` uniformly and scale its correction by
        ``n q_i`` (Mehta et al. 2023).  ``"nonuniform"``: draw the rank
        ``j`` with probability ``sigma_j`` and take the sample of that rank,
        whose correction then has weight 1 (LSVRG(NU) of Xiao et al. 2023,
        section 5).
    learning_rate : "auto" or float, default="auto"
        Step size; "auto" is :func:`skrank.solvers.stochastic.steps.svrg_step_size`
        for uniform sampling, with the weights at the starting point, for
        both samplings, in the standardised units of
        :class:`skrank.solvers.stochastic.steps.FeatureUnits` (so that ``X * s``
        with the penalty rescaled gives ``coef / s`` and the same
        iterates); a float is a step in the units of ``X``.  Non-uniform
        sampling would allow a step larger by
        up to ``n max(sigma)``, but the frozen ranking is only right near
        the checkpoint: with the larger step the iterate crosses many rank
        changes within an epoch and the method oscillates far from the
        optimum of a superquantile.
    max_iter : int, default=100
        Number of checkpoints (epochs).
    epoch_length : int or None, default=None
        Steps per epoch; ``None`` means ``ceil(n / batch_size)`` (Ge and Jiang
        2024: epoch length ``n``).
    batch_size : int, default=1
        Samples per step (their corrections are averaged).
    tol : float, default=1e-6
        Stop when the relative change of the objective over each of the
        last five epochs is at most ``tol`` (one epoch's change is at most
        ``tol`` by chance when the noisy objective crosses its previous
        value; :class:`skrank.solvers.stochastic.steps.EpochLog`).  A given
        ``learning_rate`` smaller than the automatic step divides the
        changes by their ratio (the smallest over the coefficients).
    random_state : int, RandomState, Generator or None
        Seed of the sampling.
    coef_init, intercept_init : ndarray, float or None
        Starting point (zeros by default).
    verbose : int, default=0
        Print one line per epoch when positive.

    Returns
    -------
    SolverResult
        ``objective_history`` holds ``F`` at the start and after every
        epoch; ``info`` holds ``times`` (cumulative solver seconds,
        objective evaluation excluded), ``passes`` (one full pass plus
        ``B * steps / n`` per epoch, our convention),
        ``learning_rate`` (in the standardised units for "auto") and
        ``weights`` (the last checkpoint's ``q``).

    Notes
    -----
    Epoch (Mehta et al. 2023, with ``nu = 0`` as in Ge and Jiang 2024)::

        q    = sigma ranked by l(w_ckpt)
        gbar = sum_i q_i grad l_i(w_ckpt)
        repeat epoch_length times:
            draw i (uniform: p_i = 1/n; nonuniform: p_i = q_i)
            v = (q_i / p_i) (grad l_i(w) - grad l_i(w_ckpt)) + gbar
            w = prox_{lr R}(w - lr v)

    For a linear model ``grad l_i(w_ckpt)`` is one cached scalar times
    ``(x_i, 1)``.
    """
    if sampling not in _SAMPLINGS:
        raise ValueError(f"sampling must be one of {_SAMPLINGS}, got {sampling!r}.")
    rng = make_rng(random_state)
    seed_numba(rng)
    lr = check_learning_rate(learning_rate)
    X_orig = X = dense_design(X)
    units = FeatureUnits(X, fit_intercept, identity=lr is not None)
    X, s, c, sqnorms = prepare_data(units.transform(X), y, loss, fit_intercept)
    n, d = X.shape
    batch = int(min(max(batch_size, 1), n))
    steps = -(-n // batch) if epoch_length is None else int(epoch_length)

    w0, b0 = initial_point(d, coef_init, intercept_init, fit_intercept)
    w, b_t = units.to_internal(w0, b0[0])
    b = np.array([b_t])
    t = loss_arguments_dense(X, s, c, w, b[0], np.empty(n))
    losses = loss.value(t)
    q = rank_weights(risk, losses)

    def auto_step(sq):
        return svrg_step_size(sample_smoothness(loss, sq), q, batch, "uniform")

    fraction = 1.0
    if lr is None:
        lr = auto_step(sqnorms)
    else:
        fraction = user_step_fraction(X_orig, fit_intercept, lr, auto_step)
    l1, l2 = units.penalty(penalty)

    log = EpochLog(risk.value(losses) + penalty.value(w0), "LSVRG", verbose, max_iter, fraction)
    gref, idx, work = np.empty(n), np.empty(steps * batch, dtype=np.int64), np.empty(d)
    sampler = WeightedSampler(n) if sampling == "nonuniform" else None
    crit, converged = np.inf, False
    for epoch in range(max_iter):
        start = time.perf_counter()
        if epoch > 0:
            rank_weights(risk, losses, out=q)
        scalar_gradients(loss.code, loss.param, s, t, gref)
        qg = q * gref
        gbar = X.T @ qg
        gbar_b = float(qg.sum()) if fit_intercept else 0.0
        if sampling == "uniform":
            draw_uniform(n, idx)
            mult = n * q
        else:
            p = np.abs(q)
            sampler.draw(p, idx)
            mult = np.divide(q, p, out=np.zeros(n), where=p > 0)
        svrg_epoch(
            X, s, c, loss.code, loss.param, w, b, gref, mult, gbar, gbar_b, idx, batch, lr,
            l1, l2, 0.0, w, 0.0, fit_intercept, work,
        )
        loss_arguments_dense(X, s, c, w, b[0], t)
        losses = loss.value(t)
        seconds = time.perf_counter() - start
        obj = risk.value(losses) + penalty.value(units.to_original(w, b[0])[0])
        crit = log.record(obj, seconds, 1.0 + steps * batch / n)
        if not np.isfinite(obj):
            break
        if crit <= tol:
            converged = True
            break
    coef, intercept = units.to_original(w, b[0])
    return log.result(coef, np.array([intercept]), fit_intercept, crit, converged, learning_rate=lr,
                      weights=q)
