"""The pool-adjacent-violators (PAVA) family, compiled with Numba.

Each routine solves a chain-constrained separable problem
``min sum_i theta_i(z_i)  s.t.  z_1 <= ... <= z_n`` by pooling adjacent
blocks whose values are out of order.

``isotonic_regression``
    weighted least-squares isotonic regression (``theta_i(z) = w_i (z - y_i)^2``);
``zstep_sorted`` / ``zstep`` / ``zstep_even``
    the ADMM z-step of Xiao et al. 2023 (problem (10)): ``theta_i(z) = sigma_i l(z) +
    rho/2 (z - m_i)^2`` for a rank weight ``sigma_i``, including the two-piece
    (CPT) weights of their eq. (4) (Appendix B.3);
``project_permutahedron``
    Euclidean projection onto the permutahedron of ``sigma`` (SOREL's dual
    step, Ge and Jiang 2024, Algorithm 1 line 4), reusing the isotonic kernel;
``sorted_weighted_sum``
    ``sum_i sigma_i x_(i)`` with ascending order statistics;
``losses_and_keys``
    the losses, their slopes and the keys ``mu center + l`` that a smoothed projection pools.

The z-steps are described in the user guide (:ref:`rank-admm-algorithm`,
:ref:`rank-admm-even-zstep`), the kernels' conventions and their cache in
:ref:`architecture-kernels`.
"""

import numpy as np

from .._jit import njit
from ..losses import (
    CLASSIFICATION_CODES,
    REGRESSION_CODES,
    check_param,
    loss_derivatives_upto2,
    loss_prox,
    loss_value,
)
from .sorting import resort

__all__ = [
    "losses_and_keys",
    "isotonic_regression",
    "zstep_sorted",
    "zstep",
    "zstep_even",
    "project_permutahedron",
    "sorted_weighted_sum",
]

_MONOTONE_CODES = CLASSIFICATION_CODES
_EVEN_CODES = REGRESSION_CODES
_METHODS = ("stack", "sweep")


# --------------------------------------------------------------------------------------
# Numba kernels
# --------------------------------------------------------------------------------------
@njit(cache=True, inline="always")
def pool_adjacent_violators(keys, order, m, sigma, mu, starts, sums, masses):
    """The stack of pooled blocks of ``m_j keys_j - mu sigma_i`` over ``j = order[i]``, ascending.

    ``m`` has one entry per row of ``keys``, or one for every row.  Fills
    ``starts[:n_blocks + 1]`` (first positions in the sorted order, then
    ``n``), the blocks' ``sums`` and ``masses``; returns ``n_blocks``.
    Adjacent blocks have increasing means ``sums / masses``.
    """
    n = order.shape[0]
    stride = 1 if m.shape[0] == keys.shape[0] else 0
    top = -1
    for i in range(n):
        j = order[i]
        top += 1
        sums[top] = m[j * stride] * keys[j] - mu * sigma[i]
        masses[top] = m[j * stride]
        starts[top] = i
        # pool while the block below has a mean >= this block's mean
        while top > 0 and sums[top - 1] * masses[top] >= sums[top] * masses[top - 1]:
            sums[top - 1] += sums[top]
            masses[top - 1] += masses[top]
            top -= 1
    starts[top + 1] = n
    return top + 1


@njit(cache=True, inline="always")
def block_moments(keys, order, m, sigma, lo, hi):
    """``(sum m_j keys_j, sum sigma_i, sum m_j)`` over sorted positions ``lo <= i < hi``, ``j = order[i]``."""
    stride = 1 if m.shape[0] == keys.shape[0] else 0
    su = 0.0
    ss = 0.0
    mass = 0.0
    for i in range(lo, hi):
        j = order[i]
        su += m[j * stride] * keys[j]
        ss += sigma[i]
        mass += m[j * stride]
    return su, ss, mass


@njit(cache=True)
def isotonic_kernel(y, w, out):
    """Weighted isotonic regression of ``y`` (nondecreasing) into ``out``.

    Allocates the block stacks and calls :func:`_isotonic_into`.  An empty
    ``w`` means unit weights.  Returns ``out``.
    """
    n = y.shape[0]
    return _isotonic_into(y, w, out, np.empty(n), np.empty(n), np.empty(n, dtype=np.int64))


@njit(cache=True)
def _isotonic_into(y, w, out, b_w, b_wy, b_end):
    """:func:`isotonic_kernel` with caller-owned block stacks (no allocation).

    Stack-based PAV: blocks are kept as (weight sum, weighted sum, value,
    end index) in ``b_w``, ``b_wy``, ``out``, ``b_end`` (each of length at
    least ``n``); a new point is pushed and merged backwards while the block
    below has a value >= its own.  An empty ``w`` means unit weights.  A
    block of total weight zero keeps the value of its right part (any value
    is optimal for it; this choice keeps the stack sorted).  ``out`` doubles
    as the stack of block values.  Returns ``out``.
    """
    n = y.shape[0]
    unit = w.shape[0] == 0
    b_val = out  # the stack never gets ahead of the input position
    top = -1
    for i in range(n):
        wi = 1.0 if unit else w[i]
        yi = y[i]
        top += 1
        b_w[top] = wi
        b_wy[top] = wi * yi
        b_val[top] = yi
        b_end[top] = i + 1
        while top > 0 and b_val[top - 1] >= b_val[top]:
            sw = b_w[top - 1] + b_w[top]
            swy = b_wy[top - 1] + b_wy[top]
            val = swy / sw if sw > 0.0 else b_val[top]
            top -= 1
            b_w[top] = sw
            b_wy[top] = swy
            b_val[top] = val
            b_end[top] = b_end[top + 1]
    # Expand from the last block down: block b covers positions >= b, so the
    # values of blocks < b, stored at out[:b], are read before being overwritten.
    for b in range(top, -1, -1):
        val = b_val[b]
        start = b_end[b - 1] if b > 0 else 0
        for j in range(start, b_end[b]):
            out[j] = val
    return out


@njit(cache=True)
def _piece_value(code, param, rho, s_bar, m_bar):
    # argmin_z s_bar l(z) + rho/2 (z - m_bar)^2 = prox_{(s_bar/rho) l}(m_bar)   (Xiao et al. 2023, 3.2)
    if s_bar <= 0.0:
        return m_bar
    return loss_prox(code, m_bar, s_bar / rho, param)


@njit(cache=True)
def _piece_objective(code, param, rho, s_bar, m_bar, v):
    d = v - m_bar
    f = 0.5 * rho * d * d
    if s_bar > 0.0:
        f += s_bar * loss_value(code, v, param)
    return f


@njit(cache=True)
def _block_value(code, param, rho, cnt, s_a, s_b, s_m, two_piece, threshold):
    """Minimiser of ``sum_{i in block} theta_i(z)`` from the block's sums.

    ``cnt`` is the block size, ``s_a``/``s_b`` the sums of ``sigma^a``/``sigma^b``
    and ``s_m`` the sum of ``m`` over the block.  With ``two_piece`` the CPT
    rule of Xiao et al. 2023, Appendix B.3 is applied: clip each piece's minimiser to
    its half-line (``z <= threshold`` for ``a``, ``z >= threshold`` for ``b``) and
    keep the one with the smaller block objective.
    """
    m_bar = s_m / cnt
    sa_bar = s_a / cnt
    va = _piece_value(code, param, rho, sa_bar, m_bar)
    if not two_piece:
        return va
    sb_bar = s_b / cnt
    vb = _piece_value(code, param, rho, sb_bar, m_bar)
    if va > threshold:
        va = threshold
    if vb < threshold:
        vb = threshold
    fa = _piece_objective(code, param, rho, sa_bar, m_bar, va)
    fb = _piece_objective(code, param, rho, sb_bar, m_bar, vb)
    if fa <= fb:
        return va
    return vb


@njit(cache=True)
def _zstep_stack_kernel(m, sig_a, sig_b, two_piece, threshold, code, param, rho, out, ends):
    """Classic stack PAVA (Best et al. 2000) for problem (10) of Xiao et al. 2023.

    ``m`` sorted ascending; ``sig_b`` is read only when ``two_piece``.
    Fills ``out`` with the solution and ``ends[:k]`` with the (exclusive) end
    index of each of the ``k`` final blocks; returns ``k``.  Blocks merge on
    a strict ``>`` only, so tied neighbours stay separate.
    """
    n = m.shape[0]
    b_end = np.empty(n, dtype=np.int64)
    b_sa = np.empty(n)
    b_sb = np.empty(n)
    b_sm = np.empty(n)
    b_val = np.empty(n)
    top = -1
    for i in range(n):
        top += 1
        b_end[top] = i + 1
        b_sa[top] = sig_a[i]
        sbi = sig_b[i] if two_piece else 0.0
        b_sb[top] = sbi
        b_sm[top] = m[i]
        b_val[top] = _block_value(code, param, rho, 1.0, sig_a[i], sbi, m[i], two_piece, threshold)
        while top > 0 and b_val[top - 1] > b_val[top]:
            top -= 1
            b_end[top] = b_end[top + 1]
            b_sa[top] += b_sa[top + 1]
            b_sb[top] += b_sb[top + 1]
            b_sm[top] += b_sm[top + 1]
            start = b_end[top - 1] if top > 0 else 0
            cnt = float(b_end[top] - start)
            b_val[top] = _block_value(
                code, param, rho, cnt, b_sa[top], b_sb[top], b_sm[top], two_piece, threshold
            )
    start = 0
    for b in range(top + 1):
        val = b_val[b]
        for j in range(start, b_end[b]):
            out[j] = val
        start = b_end[b]
        ends[b] = b_end[b]
    return top + 1


@njit(cache=True)
def _zstep_sweep_kernel(m, sig_a, sig_b, two_piece, threshold, code, param, rho, out, ends):
    """Run-merging PAVA of Xiao et al. 2023, Algorithm 2, as in their released code ("sweep").

    Each sweep finds every maximal strictly decreasing run of block values,
    merges each run into one block, and only then recomputes the merged
    blocks' values; sweeps repeat until no block is out of order.  This is
    the paper's semantics exactly, made O(n) overall: blocks form a doubly
    linked list (indexed by their first position) and a sweep only visits
    the blocks merged by the previous sweep, since two untouched neighbours
    were already in order and their values did not change.  Same outputs and
    return value as :func:`_zstep_stack_kernel`.
    """
    n = m.shape[0]
    nxt = np.empty(n, dtype=np.int64)  # first position of the next block (n: none)
    prv = np.empty(n, dtype=np.int64)  # first position of the previous block (-1: none)
    b_sa = np.empty(n)
    b_sb = np.empty(n)
    b_sm = np.empty(n)
    b_val = np.empty(n)
    dirty = np.empty(n, dtype=np.int64)  # blocks whose value changed in the last sweep
    run_s = np.empty(n, dtype=np.int64)
    run_e = np.empty(n, dtype=np.int64)
    for i in range(n):
        nxt[i] = i + 1
        prv[i] = i - 1
        b_sa[i] = sig_a[i]
        sbi = sig_b[i] if two_piece else 0.0
        b_sb[i] = sbi
        b_sm[i] = m[i]
        b_val[i] = _block_value(code, param, rho, 1.0, sig_a[i], sbi, m[i], two_piece, threshold)
        dirty[i] = i
    n_dirty = n
    while n_dirty > 0:
        # Phase 1: locate the maximal strictly decreasing runs, on the values
        # as they were at the start of the sweep (nothing is modified here).
        n_runs = 0
        covered = -1
        for k in range(n_dirty):
            d = dirty[k]
            if d <= covered:
                continue
            s = d
            while prv[s] >= 0 and b_val[prv[s]] > b_val[s]:
                s = prv[s]
            e = s
            while nxt[e] < n and b_val[e] > b_val[nxt[e]]:
                e = nxt[e]
            if e != s:
                run_s[n_runs] = s
                run_e[n_runs] = e
                n_runs += 1
                covered = e
        # Phase 2: merge every run into its first block and solve it once.
        for r in range(n_runs):
            s = run_s[r]
            e = run_e[r]
            b = nxt[s]
            last = nxt[e]
            while b < last:
                b_sa[s] += b_sa[b]
                b_sb[s] += b_sb[b]
                b_sm[s] += b_sm[b]
                b = nxt[b]
            nxt[s] = last
            if last < n:
                prv[last] = s
            cnt = float(last - s)
            b_val[s] = _block_value(
                code, param, rho, cnt, b_sa[s], b_sb[s], b_sm[s], two_piece, threshold
            )
            dirty[r] = s
        n_dirty = n_runs
    return _write_blocks(b_val, nxt, out, ends)


@njit(cache=True)
def _write_blocks(b_val, nxt, out, ends):
    """Spread each block's value over its positions and list the blocks' (exclusive) ends.

    Blocks are indexed by their first position, ``nxt`` the first position
    of the next one; returns the number of blocks.
    """
    n = out.shape[0]
    s = 0
    k = 0
    while s < n:
        val = b_val[s]
        for j in range(s, nxt[s]):
            out[j] = val
        s = nxt[s]
        ends[k] = s
        k += 1
    return k


@njit(cache=True)
def _zstep_sorted_kernel(m, sig_a, sig_b, two_piece, threshold, code, param, rho, sweep, out, ends):
    """Dispatch to the stack (``sweep=False``) or sweep kernel; returns the block count."""
    if sweep:
        return _zstep_sweep_kernel(
            m, sig_a, sig_b, two_piece, threshold, code, param, rho, out, ends
        )
    return _zstep_stack_kernel(m, sig_a, sig_b, two_piece, threshold, code, param, rho, out, ends)


# --------------------------------------------------------------------------------------
# Validation helpers
# --------------------------------------------------------------------------------------
def _as_vector(x, name):
    a = np.asarray(x)
    if a.ndim != 1:
        raise ValueError(f"{name} must be a 1-D array, got an array of shape {a.shape}.")
    try:
        a = np.ascontiguousarray(a, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name} must be an array of real numbers.") from exc
    # Summing first is a cheap test; only a non-finite sum needs the full scan.
    if not np.isfinite(a.sum()) and not np.isfinite(a).all():
        raise ValueError(f"{name} contains NaN or infinite values.")
    return a


def _as_weights(x, name, n):
    a = _as_vector(x, name)
    if a.shape[0] != n:
        raise ValueError(f"{name} has length {a.shape[0]}, expected {n} (the length of the data).")
    if n and a.min() < 0.0:
        raise ValueError(f"{name} must be nonnegative.")
    return a


def _check_scalar(value, name, *, positive=False):
    try:
        value = float(value)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name} must be a real number, got {value!r}.") from exc
    if not np.isfinite(value):
        raise ValueError(f"{name} must be finite, got {value!r}.")
    if positive and value <= 0.0:
        raise ValueError(f"{name} must be positive, got {value!r}.")
    return value


def _check_loss(loss_code, loss_param, allowed, hint):
    if isinstance(loss_code, (bool, np.bool_)) or not isinstance(loss_code, (int, np.integer)):
        raise ValueError(f"loss_code must be an integer loss code, got {loss_code!r}.")
    loss_code = int(loss_code)
    if loss_code not in allowed:
        raise ValueError(f"loss_code={loss_code} is not allowed here; {hint}")
    loss_param = _check_scalar(loss_param, "loss_param")
    check_param(loss_code, loss_param)
    return loss_code, loss_param


def _check_method(method):
    if method not in _METHODS:
        raise ValueError(f"method must be one of {_METHODS}, got {method!r}.")
    return method == "sweep"


def _zstep_sorted_impl(m, sigma, loss_code, loss_param, rho, sigma_b, threshold, method):
    """Validated sorted z-step; returns ``(z, ends)`` with the final block ends."""
    n = m.shape[0]
    sigma = _as_weights(sigma, "sigma", n)
    rho = _check_scalar(rho, "rho", positive=True)
    sweep = _check_method(method)
    try:
        threshold = float(threshold)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"threshold must be a real number, got {threshold!r}.") from exc
    if np.isnan(threshold):
        raise ValueError("threshold must not be NaN.")
    if sigma_b is None:
        two_piece = False
        sigma_b = sigma
    else:
        sigma_b = _as_weights(sigma_b, "sigma_b", n)
        two_piece = True
        if threshold == np.inf:  # piece b is empty
            two_piece, sigma_b = False, sigma
        elif threshold == -np.inf:  # piece a is empty
            two_piece, sigma = False, sigma_b
    out = np.empty(n)
    ends = np.empty(n, dtype=np.int64)
    k = _zstep_sorted_kernel(
        m, sigma, sigma_b, two_piece, threshold, loss_code, loss_param, rho, sweep, out, ends
    )
    return out, ends[:k]


def _scatter_sorted(m, solve, order=None):
    """Solve on ``m`` sorted ascending and scatter the result back.

    ``order``, when given, is a permutation that nearly sorts ``m`` (the
    previous call's, in an iterative solver); it is updated in place to one
    that sorts ``m``, stably with respect to itself, by
    :func:`skrank.kernels.sorting.resort` (insertion or radix sort, ``O(n)`` on such
    nearly sorted data).
    """
    if order is None:
        perm = np.argsort(m, kind="stable")
        m_sorted = m[perm]
    else:
        if order.shape != m.shape:
            raise ValueError(f"order has shape {order.shape}, expected {m.shape}.")
        m_sorted = resort(m, order)
        perm = order
    z_sorted = solve(m_sorted)
    z = np.empty_like(z_sorted)
    z[perm] = z_sorted
    return z


# --------------------------------------------------------------------------------------
# Public API
# --------------------------------------------------------------------------------------
def isotonic_regression(y, sample_weight=None, increasing=True):
    """Weighted least-squares isotonic regression.

    Solves ``min_u sum_i w_i (u_i - y_i)**2`` subject to ``u_1 <= ... <= u_n``
    (or ``u_1 >= ... >= u_n`` when ``increasing=False``) with the stack-based
    pool-adjacent-violators algorithm, in O(n).

    Parameters
    ----------
    y : array-like of shape (n,)
        Values to fit; must be finite.
    sample_weight : array-like of shape (n,), default=None
        Nonnegative weights ``w``; ``None`` means all ones.  Points of zero
        weight take the value of an adjacent block.
    increasing : bool, default=True
        Fit a nondecreasing (True) or nonincreasing (False) sequence.

    Returns
    -------
    u : ndarray of shape (n,), dtype float64
        The isotonic fit; the same as
        :func:`sklearn.isotonic.isotonic_regression` with positive weights.
    """
    y = _as_vector(y, "y")
    n = y.shape[0]
    if sample_weight is None:
        w = np.empty(0)  # unit weights
    else:
        w = _as_weights(sample_weight, "sample_weight", n)
    if increasing:
        return isotonic_kernel(y, w, np.empty(n))
    y_rev = np.ascontiguousarray(y[::-1])
    w_rev = np.ascontiguousarray(w[::-1]) if w.shape[0] else w
    return isotonic_kernel(y_rev, w_rev, np.empty(n))[::-1].copy()


def zstep_sorted(
    m, sigma, loss_code, loss_param, rho, sigma_b=None, threshold=np.inf, method="stack"
):
    """ADMM z-step on sorted input: PAVA for a chain-constrained prox.

    Solves problem (10) of Xiao et al. 2023,
    ``min_z sum_i sigma_i l(z_i) + rho/2 (z_i - m_i)**2`` subject to
    ``z_1 <= ... <= z_n``: exactly for fixed nonnegative weights, to a
    stationary point for the two-piece (CPT) weights of ``sigma_b``
    (user guide, :ref:`rank-admm-algorithm`).

    Parameters
    ----------
    m : array-like of shape (n,)
        Points to project, sorted ascending.
    sigma : array-like of shape (n,)
        Nonnegative rank weights: ``sigma[i]`` multiplies the loss of the
        ``i``-th smallest entry (``sigma^a`` in the CPT case).
    loss_code : int
        A code of :mod:`skrank.losses`; any convex loss is accepted here.
    loss_param : float
        The loss's parameter (Huber's epsilon; ignored by the others).
    rho : float
        ADMM penalty, positive.
    sigma_b : array-like of shape (n,), default=None
        CPT weights used above ``threshold``; ``None`` for fixed weights.
    threshold : float, default=inf
        The CPT reference point ``B_z`` in z-space; ignored without ``sigma_b``.
    method : {"stack", "sweep"}, default="stack"
        ``"stack"``: classic stack PAVA (Best et al. 2000).
        ``"sweep"``: the paper's Algorithm 2, which merges whole strictly
        decreasing runs per sweep.  Both give the unique solution for fixed
        weights; with CPT weights they may return different stationary points.

    Returns
    -------
    z : ndarray of shape (n,)
        The solution, nondecreasing.
    """
    m = _as_vector(m, "m")
    if m.shape[0] > 1 and np.any(m[1:] < m[:-1]):
        raise ValueError("m must be sorted in ascending order; use zstep for unsorted input.")
    loss_code, loss_param = _check_loss(
        loss_code, loss_param, _MONOTONE_CODES + _EVEN_CODES, "expected a code of skrank.losses."
    )
    return _zstep_sorted_impl(m, sigma, loss_code, loss_param, rho, sigma_b, threshold, method)[0]


def zstep(m, sigma, loss_code, loss_param, rho, sigma_b=None, threshold=np.inf, method="stack",
          order=None):
    """ADMM z-step for a rank-weighted, nondecreasing loss.

    Solves ``min_z sum_i sigma_i l(z)_[i] + rho/2 ||z - m||**2`` (``l(z)_[i]``
    the ``i``-th smallest loss) for a classification loss: an optimal ``z``
    is co-sorted with ``m``, so :func:`zstep_sorted` is solved on the sorted
    ``m`` and scattered back (:ref:`rank-admm-algorithm`).

    Parameters
    ----------
    m : array-like of shape (n,)
        The points to project, in any order.
    sigma : array-like of shape (n,)
        Nonnegative rank weights of the ascending losses, as for :func:`zstep_sorted`.
    loss_code : int
        ``LOGISTIC``, ``HINGE`` or ``SQUARED_HINGE`` from :mod:`skrank.losses`;
        use :func:`zstep_even` for regression losses.
    loss_param : float
        The loss's parameter (unused by these losses).
    rho : float
        ADMM penalty, positive.
    sigma_b : array-like of shape (n,), default=None
        CPT weights used above ``threshold`` (see :func:`zstep_sorted`).
    threshold : float, default=inf
        The CPT reference point in z-space.
    method : {"stack", "sweep"}, default="stack"
        PAVA variant, see :func:`zstep_sorted`.
    order : ndarray of int64, shape (n,), default=None
        A permutation that nearly sorts ``m`` (e.g. the previous iteration's),
        used to start the sort and updated in place; ties of ``m`` are then
        ordered as in ``order`` instead of by index.

    Returns
    -------
    z : ndarray of shape (n,)
        The minimiser, in the order of ``m``.
    """
    m = _as_vector(m, "m")
    loss_code, loss_param = _check_loss(
        loss_code,
        loss_param,
        _MONOTONE_CODES,
        "zstep needs a loss that is nondecreasing in z (logistic, hinge, squared hinge); "
        "use zstep_even for even (regression) losses.",
    )
    return _scatter_sorted(
        m,
        lambda ms: _zstep_sorted_impl(
            ms, sigma, loss_code, loss_param, rho, sigma_b, threshold, method
        )[0],
        order,
    )


def zstep_even(m, sigma, loss_code, loss_param, rho, method="stack", order=None):
    """ADMM z-step for a rank-weighted even loss (regression residuals).

    Solves ``min_z sum_i sigma_i l(z)_[i] + rho/2 ||z - m||**2`` exactly for
    an even convex loss (squared, absolute, Huber): :func:`zstep_sorted` on
    the sorted magnitudes ``|m|``, scattered back with the signs of ``m``
    (``+`` where ``m_i = 0``).  Why this is exact is shown in the user
    guide, :ref:`rank-admm-even-zstep`.

    Parameters
    ----------
    m : array-like of shape (n,)
        Signed points (residual targets), any order.
    sigma : array-like of shape (n,)
        Nonnegative rank weights: ``sigma[i]`` is the weight of the
        ``i``-th smallest loss.
    loss_code : int
        ``SQUARED``, ``ABSOLUTE`` or ``HUBER`` from :mod:`skrank.losses`.
    loss_param : float
        Huber's epsilon (positive); ignored by the other losses.
    rho : float
        ADMM penalty, positive.
    method : {"stack", "sweep"}, default="stack"
        PAVA variant, see :func:`zstep_sorted`.
    order : ndarray of int64, shape (n,), default=None
        A permutation that nearly sorts ``|m|``, updated in place (see
        :func:`zstep`).

    Returns
    -------
    z : ndarray of shape (n,)
        The minimiser, in the order of ``m``; ``z_i`` has the sign of ``m_i``.
    """
    m = _as_vector(m, "m")
    loss_code, loss_param = _check_loss(
        loss_code,
        loss_param,
        _EVEN_CODES,
        "zstep_even needs an even loss (squared, absolute, huber); "
        "use zstep for classification losses.",
    )
    u = _scatter_sorted(
        np.abs(m),
        lambda a: _zstep_sorted_impl(
            a, sigma, loss_code, loss_param, rho, None, np.inf, method
        )[0],
        order,
    )
    return np.where(m < 0.0, -u, u)


def project_permutahedron(v, sigma):
    """Euclidean projection onto the permutahedron of ``sigma``.

    The permutahedron is the convex hull of all permutations of ``sigma``.
    (Ge and Jiang 2024, Algorithm 1 line 4; the reduction to isotonic
    regression is ours): with ``s`` the ascending sort of ``v``
    and ``sigma`` sorted ascending, the projection restricted to that order is
    ``s - iso(s - sigma)``, where ``iso`` is nondecreasing isotonic
    regression (the same PAV kernel as :func:`isotonic_regression`); the
    result is scattered back to the order of ``v``.  O(n log n).

    Parameters
    ----------
    v : array-like of shape (n,)
        Point to project.
    sigma : array-like of shape (n,)
        Generator of the permutahedron, any order (it is sorted).

    Returns
    -------
    lam : ndarray of shape (n,)
        The projection: ``sum(lam) == sum(sigma)``, ``min(sigma) <= lam <=
        max(sigma)`` and the sorted ``lam`` is majorised by ``sigma``.
    """
    v = _as_vector(v, "v")
    n = v.shape[0]
    sigma = _as_vector(sigma, "sigma")
    if sigma.shape[0] != n:
        raise ValueError(f"sigma has length {sigma.shape[0]}, expected {n} (the length of v).")
    sigma = np.sort(sigma)
    unit = np.empty(0)

    def solve(s):
        return s - isotonic_kernel(s - sigma, unit, np.empty(n))

    return _scatter_sorted(v, solve)


def sorted_weighted_sum(values, sigma):
    """Rank-weighted sum ``sum_i sigma_i * values_(i)``.

    Parameters
    ----------
    values : array-like of shape (n,)
        Values (e.g. individual losses), any order.
    sigma : array-like of shape (n,)
        Weights; ``sigma[i]`` multiplies the ``i``-th smallest value.

    Returns
    -------
    total : float
        ``sum_i sigma[i] * sort(values)[i]``.
    """
    values = _as_vector(values, "values")
    sigma = _as_vector(sigma, "sigma")
    if sigma.shape[0] != values.shape[0]:
        raise ValueError(
            f"sigma has length {sigma.shape[0]}, expected {values.shape[0]} "
            "(the length of values)."
        )
    return float(np.dot(np.sort(values), sigma))


def losses_and_keys(t, code, param, mu, center, value, d1, keys):
    """Fill ``value`` and ``d1`` with ``l`` and ``l'`` at ``t``, and ``keys = mu center + l``.

    Parameters
    ----------
    t : ndarray of shape (n,)
        The loss arguments.
    code : int
        The loss's code (:attr:`skrank.losses.Loss.code`).
    param : float
        The loss's parameter.
    mu : float
        The smoothing.
    center : ndarray of shape (n,)
        The centre of the smoothing.
    value, d1, keys : ndarray of shape (n,)
        Filled with ``l(t)``, ``l'(t)`` and ``mu center + l(t)``.
    """
    loss_derivatives_upto2(code, t, param, value, d1, np.empty(0))  # no l''
    np.multiply(center, mu, out=keys)
    keys += value
