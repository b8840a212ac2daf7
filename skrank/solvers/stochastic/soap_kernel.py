"""Compiled SOAP steps for the score ``h = sigmoid(X w + b)``.

Qi, Luo, Xu, Ji and Yang, "Stochastic Optimization of Areas Under
Precision-Recall Curves with Provable Convergence" (NeurIPS 2021),
Algorithms 1-3.  One step is described in the user guide,
:ref:`methods-soap`.
"""

import numpy as np

from ..._jit import njit
from ...losses import stable_sigmoid
from ...pairwise_losses import pair_value_and_derivative
from .sampling import sample_block

SGD, MOMENTUM, ADAM = 0, 1, 2
#: the codes of the ``optimizer`` options
OPTIMIZERS = {"sgd": SGD, "momentum": MOMENTUM, "adam": ADAM}
#: lower clip ``u0`` of the second moving average (Algorithm 2); the
#: anchor's own pair keeps it above ``l(0) w_+ / B`` anyway
U_FLOOR = 1e-12


@njit(cache=True, inline="always")
def _next_index(perm, cursor, k, state):
    """Entry ``cursor[k]`` of ``perm``, reshuffling ``perm`` when it is used up."""
    if cursor[k] >= perm.shape[0]:
        sample_block(perm, perm.shape[0], state)
        cursor[k] = 0
    i = perm[cursor[k]]
    cursor[k] += 1
    return i


@njit(cache=True, inline="always")
def _chain_rule(X, rows, w, h, coef, alpha, G):
    """``G = sum_j coef_j grad h_j + (alpha * w, 0)``, ``grad h_j = h_j (1 - h_j) (x_j, 1)``."""
    d = X.shape[1]
    for k in range(d):
        G[k] = alpha[k] * w[k]
    G[d] = 0.0
    for j in range(rows.shape[0]):
        c = coef[j] * h[j] * (1.0 - h[j])
        G[d] += c
        if c != 0.0:
            xj = X[rows[j]]
            for k in range(d):
                G[k] += c * xj[k]


@njit(cache=True, inline="always")
def _optimizer_step(w, G, m1, m2, optimizer, lr, beta1, beta2, eps):
    """Algorithm 3: SGD, momentum or the paper's Adam-style step, in place."""
    if optimizer == SGD:
        for k in range(G.shape[0]):
            w[k] -= lr * G[k]
    elif optimizer == MOMENTUM:
        for k in range(G.shape[0]):
            m1[k] = beta1 * m1[k] + (1.0 - beta1) * G[k]
            w[k] -= lr * m1[k]
    else:
        for k in range(G.shape[0]):
            m1[k] = beta1 * m1[k] + (1.0 - beta1) * G[k]
            m2[k] = beta2 * m2[k] + (1.0 - beta2) * G[k] * G[k]
            w[k] -= lr * m1[k] / np.sqrt(eps + m2[k])


@njit(cache=True)
def soap_steps(X, pos_idx, neg_idx, slot, w, u, seen, stamp, m1, m2, n_steps, t0, n_anchor, batch,
               gamma, lr, alpha, optimizer, beta1, beta2, eps, weight_pos, weight_neg,
               code, shift, scale, state, perm_pos, perm_neg, cursor):
    """Run ``n_steps`` SOAP iterations in place (user guide).

    Parameters
    ----------
    X : ndarray of shape (n, d), C-contiguous float64
    pos_idx, neg_idx : int64 arrays
        Rows of the positives and of the negatives.
    slot : int64 array of the length of ``pos_idx``
        The entry of ``u``, ``seen`` and ``stamp`` of each positive (the
        same for identical rows, whose averages are equal).
    w : ndarray of shape (d + 1,)
        Coefficients and the intercept last, updated.
    u, seen, stamp : ndarrays of shape (n_slots, 2), (n_slots,), (n_slots,)
        Moving averages (Algorithm 2's ``u^1``, ``u^2``), whether each entry
        has been initialised, and the last step that updated it; updated.
    m1, m2 : ndarray of shape (d + 1,)
        First and second moments of the optimizer, updated.
    n_steps, t0, n_anchor, batch : int
        Number of steps, the index of the first one (for ``stamp``), positives
        per batch and batch size (``n_anchor < batch``).
    gamma, lr : float
        Moving-average weight of the new estimate, and step size.
    alpha : ndarray of shape (d,)
        l2 strength of each coefficient.
    optimizer, beta1, beta2, eps : int, float, float, float
        ``SGD``, ``MOMENTUM`` or ``ADAM``, and its parameters.
    weight_pos, weight_neg : float
        Weights of a batch positive and negative:
        ``(N+/n) / (n_anchor/B)`` and ``(N-/n) / ((B - n_anchor)/B)``.
    code, shift, scale : int, float, float
        The pairwise surrogate (:mod:`skrank.pairwise_losses`).
    state, perm_pos, perm_neg, cursor : uint64 array of length 1, int64 arrays
        Generator state, the permutations of ``arange(n_pos)`` and
        ``arange(n_neg)`` (cycled), and the positions in them.
    """
    d = X.shape[1]
    rows, h, coef = np.empty(batch, dtype=np.int64), np.empty(batch), np.empty(batch)
    anchor, dl, G = np.empty(n_anchor, dtype=np.int64), np.empty((n_anchor, batch)), np.empty(d + 1)
    for step in range(n_steps):
        t = t0 + step
        for a in range(n_anchor):
            r = _next_index(perm_pos, cursor, 0, state)
            anchor[a] = slot[r]
            rows[a] = pos_idx[r]
        for j in range(n_anchor, batch):
            rows[j] = neg_idx[_next_index(perm_neg, cursor, 1, state)]
        for j in range(batch):
            s = w[d]
            xj = X[rows[j]]
            for k in range(d):
                s += xj[k] * w[k]
            h[j] = stable_sigmoid(s)
        # Algorithm 2: moving averages of the anchors' (numerator, denominator)
        for a in range(n_anchor):
            g1 = 0.0
            g2 = 0.0
            for j in range(batch):
                v, dv = pair_value_and_derivative(code, shift, scale, h[a] - h[j])
                dl[a, j] = dv
                if j < n_anchor:
                    g1 += weight_pos * v
                    g2 += weight_pos * v
                else:
                    g2 += weight_neg * v
            g1 /= batch
            g2 /= batch
            r = anchor[a]
            if stamp[r] == t:
                continue
            stamp[r] = t
            if seen[r]:
                u[r, 0] = (1.0 - gamma) * u[r, 0] + gamma * g1
                u[r, 1] = max((1.0 - gamma) * u[r, 1] + gamma * g2, U_FLOOR)
            else:
                seen[r] = True
                u[r, 0] = g1
                u[r, 1] = max(g2, U_FLOOR)
        # eq. (9): score coefficients of the gradient estimate
        coef[:] = 0.0
        for a in range(n_anchor):
            r = anchor[a]
            inv = 1.0 / (n_anchor * batch * u[r, 1] * u[r, 1])
            cpos = weight_pos * (u[r, 0] - u[r, 1]) * inv
            cneg = weight_neg * u[r, 0] * inv
            for j in range(batch):
                c = (cpos if j < n_anchor else cneg) * dl[a, j]
                coef[a] += c
                coef[j] -= c
        _chain_rule(X, rows, w, h, coef, alpha, G)
        _optimizer_step(w, G, m1, m2, optimizer, lr, beta1, beta2, eps)
