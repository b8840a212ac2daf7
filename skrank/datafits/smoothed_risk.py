"""The Moreau-smoothed spectral risk and its gradient weights, by one PAVA.

The smoothing of Nesterov (2005, "Smooth minimization of non-smooth
functions") of the support function of the permutahedron, and its gradient,
a projection computed by isotonic regression (Blondel, Teboul, Berthet and
Djolonga 2020, "Fast differentiable sorting and ranking"), with and without
sample weights.  The formulas are in the user guide, :ref:`methods-newton`.
"""

import numpy as np

from .._jit import njit
from ..kernels.pava import block_moments, pool_adjacent_violators


def relative_weights(sample_weight):
    """The sample weights times the power of two that brings the largest into ``[1/2, 1)``.

    The product is exact, so that ratios of the weights are unchanged,
    their sum cannot overflow and ``n / sum`` cannot either, whatever the
    caller's units (1e300 and 1e-200 together).  A weight below ``2^-1074``
    times the largest becomes 0: its share of the total is below every
    double, too small to change the weighted risk.

    Parameters
    ----------
    sample_weight : array-like of shape (n,)
        Nonnegative, finite weights, not all zero.

    Returns
    -------
    ndarray of shape (n,)
        The rescaled weights.
    """
    v = np.asarray(sample_weight, dtype=np.float64)
    _, exponent = np.frexp(v.max())
    return np.ldexp(v, -exponent)


def pooled_projection(keys, order, sigma, mu, block_start, m):
    """``q = proj_P(keys / mu)``, written over ``keys``, and the pooled blocks.

    ``P`` is the permutahedron of the nondecreasing ``sigma`` (with masses
    ``m``, the base polytope of :ref:`methods-newton`, in its metric).  With
    ``u = keys[order]`` sorted ascending, the projection is
    ``u / mu - iso(u / mu - sigma)``; computed as
    ``(u_i - mean_B(u)) / mu + mean_B(sigma)`` on each block ``B`` of the
    isotonic regression of ``u - mu sigma``, so that ``mu`` may be tiny
    (means weighted by ``m``, and ``q_i`` scaled by ``m_i``).  ``u`` is
    read through ``order``, not copied: each block reads its keys before it
    writes its weights over them.

    Parameters
    ----------
    keys : ndarray of shape (n,)
        The point times ``mu``; overwritten by the projection ``q`` (in the
        same order).
    order : ndarray of shape (n,), int64
        The permutation that sorts ``keys`` ascending.
    sigma : ndarray of shape (n,)
        The rank weights of this order (nondecreasing per unit of mass).
    mu : float
        ``mu > 0``.
    block_start : ndarray of shape (n + 1,), int64
        Output: the first positions (in the sorted order) of the blocks,
        then ``n``.
    m : ndarray of shape (n,) or (1,)
        Positive masses of the samples, in the order of ``keys``, or a
        single mass of every sample (``np.ones(1)`` without sample weights:
        no vector of ones).

    Returns
    -------
    n_blocks : int
        Number of blocks (``block_start[:n_blocks + 1]`` is filled).
    """
    n = keys.shape[0]
    return _pooled_projection(keys, order, sigma, mu, block_start, m, np.empty(n), np.empty(n))


@njit(cache=True)
def _pooled_projection(keys, order, sigma, mu, block_start, m, sums, masses):
    """:func:`pooled_projection` with the PAVA's scratch ``sums`` and ``masses`` (n each) given."""
    stride = 1 if m.shape[0] == keys.shape[0] else 0  # m[j * stride]: the mass of sample j
    n_blocks = pool_adjacent_violators(keys, order, m, sigma, mu, block_start, sums, masses)
    for b in range(n_blocks):
        lo, hi = block_start[b], block_start[b + 1]
        if hi - lo == 1:
            keys[order[lo]] = sigma[lo]
            continue
        mean_u, mean_s, mass = block_moments(keys, order, m, sigma, lo, hi)
        mean_u /= mass
        mean_s /= mass
        for i in range(lo, hi):
            j = order[i]
            keys[j] = m[j * stride] * (mean_s + (keys[j] - mean_u) / mu)
    return n_blocks


@njit(cache=True)
def l1_newton_direction(K, g, w, l1, n_penalised, sweeps, tol):
    """``argmin_d g.d + d^T K d / 2 + l1 ||w + d||_1`` by cyclic coordinate descent.

    Only the first ``n_penalised`` coordinates carry the l1 term (the
    intercept does not).  Stops after ``sweeps`` sweeps or when no
    coordinate moved by more than ``tol`` times the largest entry of ``d``.
    Returns ``d`` and the model's value at ``d`` (at most 0, the value at
    ``d = 0``), ``-inf`` when the model is unbounded below (a coordinate
    without curvature whose slope the l1 term does not hold).
    """
    p = g.shape[0]
    d = np.zeros(p)
    Kd = np.zeros(p)
    flat = 0.0
    for j in range(p):
        flat = max(flat, K[j, j])
    flat *= 1e-13  # a coordinate without curvature
    for _ in range(sweeps):
        largest = 0.0
        moved = 0.0
        for j in range(p):
            kjj = K[j, j]
            r = g[j] + Kd[j] - kjj * d[j]
            if kjj <= flat:
                # the model is linear in d_j: bounded only inside the l1 kink
                if j >= n_penalised or abs(r) > l1:
                    if abs(r) > 1e-12 * (1.0 + abs(g[j])):
                        return d, -np.inf
                    continue
                new = -w[j]
            elif j < n_penalised:
                z = w[j] - r / kjj
                z = np.sign(z) * max(abs(z) - l1 / kjj, 0.0)
                new = z - w[j]
            else:
                new = -r / kjj
            delta = new - d[j]
            if delta != 0.0:
                d[j] = new
                for k in range(p):
                    Kd[k] += K[k, j] * delta
            moved = max(moved, abs(delta))
            largest = max(largest, abs(new))
        if moved <= tol * largest:
            break
    model = 0.0
    for j in range(p):
        model += g[j] * d[j] + 0.5 * d[j] * Kd[j]
    for j in range(n_penalised):
        model += l1 * (abs(w[j] + d[j]) - abs(w[j]))
    return d, model
