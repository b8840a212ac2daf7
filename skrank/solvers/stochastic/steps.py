"""Step sizes and the proximal step of the stochastic spectral-risk solvers.

* :func:`sample_smoothness`: the Lipschitz constants ``L_i`` of the per-sample
  gradients, from which every automatic step size is derived;
* :func:`svrg_step_size`: the automatic step of the variance-reduced loops;
* :func:`check_learning_rate`: ``"auto"`` or a positive float;
* :func:`prox_factors`, :func:`prox_step`: the closed-form proximal step
  shared by every kernel.
"""

import numpy as np

from ..._jit import njit


def sample_smoothness(loss, sqnorms):
    """Lipschitz constants ``L_i = L_loss ||(x_i, 1)||^2`` of the per-sample gradients."""
    if not np.isfinite(loss.smoothness):
        # Non-smooth loss (hinge, absolute): there is no Lipschitz gradient;
        # step sizes then use the scale of a unit-smooth loss (a heuristic).
        return sqnorms.copy()
    return loss.smoothness * sqnorms


def svrg_step_size(smoothness, sigma, batch_size, sampling="uniform"):
    """Automatic step of a variance-reduced loop on ``sum_i lam_i l_i``.

    ``smoothness`` holds the per-sample constants ``L_i`` and ``sigma`` the
    rank weights; ``sampling`` is ``"uniform"``, ``"importance"`` or
    ``"nonuniform"``.  The step is ``1 / (3 (L_term / B + Lbar))``, with the
    bounds derived in the user guide, :ref:`methods-sorel`.
    """
    sigma = np.abs(np.asarray(sigma, dtype=np.float64))
    l_bar = float(np.sort(sigma) @ np.sort(smoothness))
    l_max = float(smoothness.max())
    if sampling == "importance":
        l_term = l_bar
    elif sampling == "nonuniform":
        l_term = l_max
    else:
        l_term = smoothness.shape[0] * float(sigma.max()) * l_max
    return 1.0 / (3.0 * (l_term / batch_size + l_bar))


def check_learning_rate(learning_rate):
    """``"auto"`` or a positive float."""
    if isinstance(learning_rate, str):
        if learning_rate != "auto":
            raise ValueError(f"learning_rate must be 'auto' or a positive float, got {learning_rate!r}.")
        return None
    lr = float(learning_rate)
    if not (np.isfinite(lr) and lr > 0):
        raise ValueError(f"learning_rate must be 'auto' or a positive float, got {learning_rate!r}.")
    return lr


@njit(cache=True, inline="always")
def soft_scalar(v, t):
    """The soft-threshold of the scalar ``v`` at ``t >= 0``: ``sign(v) max(|v| - t, 0)``."""
    if v > t:
        return v - t
    if v < -t:
        return v + t
    return 0.0


@njit(cache=True)
def prox_factors(lr, l1, l2, inv_tau):
    """``(thr, inv)`` of :func:`prox_step`: ``lr l1_j`` and ``1 / (1 + lr l2_j + lr inv_tau)``."""
    d = l1.shape[0]
    thr, inv = np.empty(d), np.empty(d)
    for j in range(d):
        thr[j] = lr * l1[j]
        inv[j] = 1.0 / (1.0 + lr * l2[j] + lr * inv_tau)
    return thr, inv


@njit(cache=True, inline="always")
def prox_step(w, b, grad, grad_b, lr, thr, inv, inv_tau, w_anchor, b_anchor, fit_intercept):
    """``(w, b) <- prox(w - lr grad, b - lr grad_b)`` in place.

    The prox is the closed form of ``lr * (sum_j l1_j |.| + l2_j/2 (.)^2 +
    inv_tau/2 ||. - w_anchor||^2)`` (Ge and Jiang 2024, Algorithm 1 line 14) with
    per-coefficient strengths ``l1``, ``l2`` (:meth:`FeatureUnits.penalty`),
    through ``(thr, inv) = prox_factors(lr, l1, l2, inv_tau)``; the intercept
    gets only the anchor term.  ``inv_tau = 0`` gives the plain proximal
    gradient step on the penalty.
    """
    for j in range(w.shape[0]):
        z = w[j] - lr * grad[j] + lr * inv_tau * w_anchor[j]
        w[j] = soft_scalar(z, thr[j]) * inv[j]
    if fit_intercept:
        b[0] = (b[0] - lr * grad_b + lr * inv_tau * b_anchor) / (1.0 + lr * inv_tau)
