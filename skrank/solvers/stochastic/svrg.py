"""Compiled per-sample pieces and the variance-reduced epoch shared by SOREL and LSVRG.

For a linear model every per-sample gradient is ``g_i(w) = s_i l'(t_i) x_i``
(and ``s_i l'(t_i)`` for the intercept), so one scalar per sample is enough
to store a gradient: :func:`scalar_gradients` computes them,
:func:`vr_batch_direction` the variance-reduced correction of a batch and
:func:`svrg_epoch` the inner loop of proximal steps.
"""

from ..._jit import njit
from ...losses import loss_derivative
from .steps import prox_factors, prox_step


@njit(cache=True)
def loss_arguments_dense(X, s, c, w, b, out):
    """``out_i = s_i (x_i . w + b) + c_i``."""
    n, d = X.shape
    for i in range(n):
        f = b
        for j in range(d):
            f += X[i, j] * w[j]
        out[i] = s[i] * f + c[i]
    return out


@njit(cache=True)
def scalar_gradients(code, param, s, t, out):
    """``out_i = s_i l'(t_i)``: the per-sample gradient is ``out_i (x_i, 1)``."""
    for i in range(t.shape[0]):
        out[i] = s[i] * loss_derivative(code, t[i], param)
    return out


@njit(cache=True, inline="always")
def vr_batch_direction(X, w, b0, idx, start, stop, s, c, code, param, gref, mult, inv_b, out, db):
    """Add the batch's variance-reduced correction to ``out``; return ``db`` plus its intercept part.

    For ``i = idx[start:stop]``: ``inv_b * mult_i * (s_i l'(t_i(w)) - gref_i) * (x_i, 1)``
    (Ge and Jiang 2024, Algorithm 1 line 13, averaged over the batch), with ``b0`` the current
    intercept.  Shared by :func:`svrg_epoch` and SOREL's epoch kernel.
    """
    d = X.shape[1]
    for m in range(start, stop):
        i = idx[m]
        f = b0
        for j in range(d):
            f += X[i, j] * w[j]
        t = s[i] * f + c[i]
        delta = inv_b * mult[i] * (s[i] * loss_derivative(code, t, param) - gref[i])
        if delta != 0.0:
            for j in range(d):
                out[j] += delta * X[i, j]
            db += delta
    return db


@njit(cache=True)
def svrg_epoch(
    X, s, c, code, param, w, b, gref, mult, gbar, gbar_b, idx, batch, lr, l1, l2,
    inv_tau, w_anchor, b_anchor, fit_intercept, work,
):
    """Variance-reduced proximal steps on ``sum_i lam_i l_i + penalty + prox term``.

    Each step draws the batch ``idx[k*batch:(k+1)*batch]`` and moves along

        d = gbar + (1/B) sum_{i in batch} mult_i (s_i l'(t_i(w)) - gref_i) (x_i, 1)

    (Ge and Jiang 2024, Algorithm 1 line 13, batch-averaged, with ``mult_i = lam_i / p_i``
    for sampling probabilities ``p_i``), then takes the closed-form prox of
    ``lr * (l1 ||.||_1 + l2/2 ||.||^2 + inv_tau/2 ||. - w_anchor||^2)``
    (their line 14; the intercept gets only the anchor term), with the
    per-coefficient strengths ``l1``, ``l2`` of :func:`prox_step`.

    ``w`` and ``b`` (a length-1 array) are updated in place; ``work`` is a
    length-d scratch array.  Returns the number of steps.
    """
    d = X.shape[1]
    n_steps = idx.shape[0] // batch
    inv_b = 1.0 / batch
    thr, inv = prox_factors(lr, l1, l2, inv_tau)
    for k in range(n_steps):
        for j in range(d):
            work[j] = gbar[j]
        db = vr_batch_direction(
            X, w, b[0], idx, k * batch, (k + 1) * batch, s, c, code, param, gref, mult, inv_b,
            work, gbar_b,
        )
        prox_step(w, b, work, db, lr, thr, inv, inv_tau, w_anchor, b_anchor, fit_intercept)
    return n_steps
