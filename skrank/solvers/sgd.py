"""Biased mini-batch stochastic subgradient method for rank-weighted risks.

A baseline of Ge and Jiang 2024 and Xiao et al. 2023 (section 5 of both) (Levy et
al. 2020; Mehta et al. 2023): each step sorts the losses of a mini-batch
drawn without replacement and weighs them with the risk's weights at the
batch size.  The estimate is biased unless the weights are uniform, so with
a constant step the iterates do not converge to the minimiser of the
full-sample objective; the method is kept as a reference point.
"""

import time

import numpy as np
from numba import njit

from ..losses import loss_derivative, loss_value
from ..objective import rank_objective
from ._stepsize import (
    EpochLog,
    check_learning_rate,
    initial_point,
    make_rng,
    prepare_data,
    prox_step,
    sample_smoothness,
    seed_numba,
    weight_pieces,
)


@njit(cache=True)
def sgd_epoch(
    X, s, c, code, param, w, b, perm, pos, batch, n_steps, sig_a, sig_b, threshold,
    lr, l1, l2, fit_intercept, t_buf, l_buf, work,
):
    """``n_steps`` biased subgradient steps on mini-batches of size ``batch``.

    Batches are consecutive slices of ``perm``, reshuffled whenever fewer
    than ``batch`` entries remain (so each batch is drawn without
    replacement).  ``pos`` (a length-1 integer array) is the position in
    ``perm``, carried over between epochs.  The ``r``-th smallest batch
    loss gets ``sig_a[r]`` if it is at most ``threshold``, else
    ``sig_b[r]``; the step is ``prox(w - lr * g)`` with
    ``g = sum_r weight_r s_i l'(t_i) (x_i, 1)``.
    """
    n, d = X.shape
    empty = np.zeros(d)
    for _ in range(n_steps):
        if pos[0] + batch > n:
            np.random.shuffle(perm)
            pos[0] = 0
        for m in range(batch):
            i = perm[pos[0] + m]
            f = b[0]
            for j in range(d):
                f += X[i, j] * w[j]
            t = s[i] * f + c[i]
            t_buf[m] = t
            l_buf[m] = loss_value(code, t, param)
        order = np.argsort(l_buf, kind="mergesort")
        below = 0
        for m in range(batch):
            if l_buf[m] <= threshold:
                below += 1
        for j in range(d):
            work[j] = 0.0
        gb = 0.0
        for r in range(batch):
            m = order[r]
            i = perm[pos[0] + m]
            weight = sig_a[r] if r < below else sig_b[r]
            delta = weight * s[i] * loss_derivative(code, t_buf[m], param)
            if delta != 0.0:
                for j in range(d):
                    work[j] += delta * X[i, j]
                gb += delta
        prox_step(w, b, work, gb, lr, l1, l2, 0.0, empty, 0.0, fit_intercept)
        pos[0] += batch


def sgd_step_size(smoothness, sig_a, sig_b):
    """Automatic constant step ``1 / (2 L_B)`` of :func:`sgd`.

    ``L_B = max(sum |sigma_a|, sum |sigma_b|) * max_i L_i`` bounds the
    smoothness of the rank-weighted batch loss (the weights sum to one for a
    spectral risk).  The penalty is handled by its prox and needs no room.
    """
    total = max(float(np.abs(sig_a).sum()), float(np.abs(sig_b).sum()), 1e-12)
    return 1.0 / (2.0 * total * float(smoothness.max()))


def sgd(
    X,
    y,
    risk,
    loss,
    penalty,
    *,
    fit_intercept=True,
    batch_size=64,
    learning_rate="auto",
    max_iter=100,
    epoch_length=None,
    tol=1e-6,
    random_state=None,
    coef_init=None,
    intercept_init=None,
    verbose=0,
):
    """Minimise ``sum_i sigma_i l_(i) + penalty`` by biased mini-batch subgradient steps.

    Parameters
    ----------
    X : {ndarray, sparse matrix} of shape (n, d)
        Design; sparse input is densified.
    y : ndarray of shape (n,)
        Labels in {-1, +1} (classification losses) or targets (regression).
    risk : skrank.risks.BaseRisk
        Any risk; value-dependent weights (human-aligned) are applied to the
        batch losses, ``risk.weights(B, batch_losses)``.
    loss : skrank.losses.Loss
        Any loss (non-smooth ones use a subgradient).
    penalty : skrank.penalties.Penalty
        The l1, l2 or elastic-net penalty, applied by its prox after every step.
    fit_intercept : bool, default=True
        Fit an unpenalised intercept.
    batch_size : int, default=64
        Samples per step, drawn without replacement (capped at ``n``).
    learning_rate : "auto" or float, default="auto"
        Constant step; "auto" is :func:`sgd_step_size`.
    max_iter : int, default=100
        Number of epochs.
    epoch_length : int or None, default=None
        Steps per epoch; ``None`` means ``n // batch_size`` (one pass).
    tol : float, default=1e-6
        Stop when the relative change of the objective over one epoch is at
        most ``tol``.
    random_state : int, RandomState, Generator or None
        Seed of the batches.
    coef_init, intercept_init : ndarray, float or None
        Starting point (zeros by default).
    verbose : int, default=0
        Print one line per epoch when positive.

    Returns
    -------
    SolverResult
        ``objective_history`` holds ``F`` at the start and after every
        epoch; ``info`` holds ``times`` (cumulative solver seconds,
        objective evaluation excluded), ``passes`` (``B * steps / n`` per
        epoch, our convention) and ``learning_rate``.

    Notes
    -----
    Step (as in Ge and Jiang 2024, Appendix B): draw a batch ``I``, sort its losses, give
    the ``r``-th smallest the weight ``sigma^(B)_r`` of the same risk at
    size ``B``, and set ``w <- prox_{lr R}(w - lr sum_r sigma^(B)_r grad
    l_(r)(w))``.  The expected direction is not a subgradient of ``F``
    (the ranks inside a batch differ from the ranks in the full sample), so
    the method stalls at a biased point; the stopping rule only measures
    stagnation.
    """
    rng = make_rng(random_state)
    seed_numba(rng)
    X, s, c, sqnorms = prepare_data(X, y, loss, fit_intercept)
    n, d = X.shape
    batch = int(min(max(batch_size, 1), n))
    steps = max(n // batch, 1) if epoch_length is None else int(epoch_length)
    sig_a, sig_b, threshold = weight_pieces(risk, batch)
    lr = check_learning_rate(learning_rate)
    if lr is None:
        lr = sgd_step_size(sample_smoothness(loss, sqnorms), sig_a, sig_b)

    w, b = initial_point(d, coef_init, intercept_init, fit_intercept)
    log = EpochLog(rank_objective(X, y, w, b[0], risk, loss, penalty), "SGD", verbose, max_iter)
    perm = rng.permutation(n)
    pos = np.zeros(1, dtype=np.int64)
    t_buf, l_buf, work = np.empty(batch), np.empty(batch), np.empty(d)
    crit, converged = np.inf, False
    for _ in range(max_iter):
        start = time.perf_counter()
        sgd_epoch(
            X, s, c, loss.code, loss.param, w, b, perm, pos, batch, steps, sig_a, sig_b,
            threshold, lr, penalty.l1, penalty.l2, fit_intercept, t_buf, l_buf, work,
        )
        seconds = time.perf_counter() - start
        obj = rank_objective(X, y, w, b[0], risk, loss, penalty)
        crit = log.record(obj, seconds, steps * batch / n)
        if not np.isfinite(obj):
            break
        if crit <= tol:
            converged = True
            break
    return log.result(w, b, fit_intercept, crit, converged, learning_rate=lr)
