"""Pieces shared by the stochastic spectral-risk solvers (SOREL, LSVRG, SGD, Prospect).

* :func:`prepare_data`: the dense float64 design, the affine map of the loss
  arguments (``t_i = s_i f_i + c_i``, see :func:`skrank.objective.affine_map`)
  and the squared row norms (``+ 1`` for the intercept column);
* :func:`sample_smoothness`: the Lipschitz constants ``L_i`` of the per-sample
  gradients, from which every automatic step size is derived;
* :func:`svrg_epoch`: the Numba inner loop of variance-reduced proximal steps
  with one cached scalar per sample, shared by SOREL and LSVRG;
* :func:`rank_weights`: the weights of a loss vector's ranks (``lam[argsort(l)] =
  sigma``), for any risk, value-dependent ones included.

For a linear model every per-sample gradient is ``g_i(w) = s_i l'(t_i) x_i``
(and ``s_i l'(t_i)`` for the intercept), so one scalar per sample is enough
to store a gradient.
"""

import numpy as np
import scipy.sparse as sp
from numba import njit

from ..losses import loss_derivative
from ..objective import affine_map


def prepare_data(X, y, loss, fit_intercept):
    """Dense design and affine map of the loss arguments.

    Sparse input is densified: the stochastic kernels update a dense ``w``
    at every step, so a sparse layout would save nothing at the sizes these
    solvers target.

    Returns
    -------
    X : ndarray of shape (n, d), C-contiguous float64
    s, c : ndarray of shape (n,)
        ``t_i = s_i (x_i . w + b) + c_i``.
    sqnorms : ndarray of shape (n,)
        ``||x_i||^2 + fit_intercept``.
    """
    if sp.issparse(X):
        X = X.toarray()
    X = np.ascontiguousarray(X, dtype=np.float64)
    s, c = affine_map(y, loss.task)
    sqnorms = np.einsum("ij,ij->i", X, X) + (1.0 if fit_intercept else 0.0)
    return X, np.ascontiguousarray(s), np.ascontiguousarray(c), sqnorms


def sample_smoothness(loss, sqnorms):
    """Lipschitz constants ``L_i = L_loss ||(x_i, 1)||^2`` of the per-sample gradients."""
    if not np.isfinite(loss.smoothness):
        # Non-smooth loss (hinge, absolute): there is no Lipschitz gradient;
        # step sizes then use the scale of a unit-smooth loss (a heuristic).
        return sqnorms.copy()
    return loss.smoothness * sqnorms


def rank_weights(risk, losses, out=None):
    """Weights by rank: ``lam[argsort(losses)] = sigma`` (ties broken stably)."""
    n = losses.shape[0]
    order = np.argsort(losses, kind="stable")
    if risk.depends_on_values:
        sigma = risk.weights(n, losses)
    else:
        sigma = risk.weights(n)
    lam = np.empty(n) if out is None else out
    lam[order] = sigma
    return lam


def make_rng(random_state):
    """A NumPy ``Generator`` from None, an int, a ``RandomState`` or a ``Generator``."""
    if isinstance(random_state, np.random.Generator):
        return random_state
    if isinstance(random_state, np.random.RandomState):
        return np.random.default_rng(random_state.randint(np.iinfo(np.int32).max))
    return np.random.default_rng(random_state)


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
def _soft(v, t):
    if v > t:
        return v - t
    if v < -t:
        return v + t
    return 0.0


@njit(cache=True)
def svrg_epoch(
    X, s, c, code, param, w, b, gref, mult, gbar, gbar_b, idx, batch, lr, l1, l2,
    inv_tau, w_anchor, b_anchor, fit_intercept, work,
):
    """Variance-reduced proximal steps on ``sum_i lam_i l_i + penalty + prox term``.

    Each step draws the batch ``idx[k*batch:(k+1)*batch]`` and moves along

        d = gbar + (1/B) sum_{i in batch} mult_i (s_i l'(t_i(w)) - gref_i) (x_i, 1)

    (spec 003 Algorithm 1 line 13 and section 2.5, with ``mult_i = lam_i / p_i``
    for sampling probabilities ``p_i``), then takes the closed-form prox of
    ``lr * (l1 ||.||_1 + l2/2 ||.||^2 + inv_tau/2 ||. - w_anchor||^2)``
    (spec 003 section 2.2; the intercept gets only the anchor term).

    ``w`` and ``b`` (a length-1 array) are updated in place; ``work`` is a
    length-d scratch array.  Returns the number of steps.
    """
    d = X.shape[1]
    n_steps = idx.shape[0] // batch
    denom = 1.0 + lr * l2 + lr * inv_tau
    denom_b = 1.0 + lr * inv_tau
    inv_b = 1.0 / batch
    for k in range(n_steps):
        for j in range(d):
            work[j] = gbar[j]
        db = gbar_b
        for m in range(k * batch, (k + 1) * batch):
            i = idx[m]
            f = b[0]
            for j in range(d):
                f += X[i, j] * w[j]
            t = s[i] * f + c[i]
            delta = inv_b * mult[i] * (s[i] * loss_derivative(code, t, param) - gref[i])
            if delta != 0.0:
                for j in range(d):
                    work[j] += delta * X[i, j]
                db += delta
        for j in range(d):
            z = w[j] - lr * work[j] + lr * inv_tau * w_anchor[j]
            w[j] = _soft(z, lr * l1) / denom
        if fit_intercept:
            b[0] = (b[0] - lr * db + lr * inv_tau * b_anchor) / denom_b
    return n_steps
