"""Numba kernel of the active-set walk of the piecewise-linear finish (:mod:`.walk`).

The loop of the walk, compiled: the working set ``W`` (rows of ``R`` held at
their kink) is kept as a full QR factorisation ``R_W^T = Qw [Rw; 0]``
updated by Givens rotations when a row enters or leaves (``O(k^2)`` per
change instead of a fresh pivoted QR), so that the null-space basis of the
working set is ``Qw[:, m:]``.  Each step costs ``O(P k + k^2)`` (one product
``R d`` for the breakpoints) plus, with a quadratic term, an eigensolve of
the reduced Hessian.
"""

import numpy as np

from ..._jit import njit
from ._constants import AT_KINK, FLAT, LINE_SEARCH_SELECT, MULTIPLIER, RANK, STATIONARY, TINY, WALK_REFRESH

#: Return codes of :func:`walk_loop`.
WALK_OK, WALK_FAILED, WALK_OUT_OF_STEPS, WALK_DEPENDENT = 0, 1, 2, 3


@njit(cache=True)
def _rotate(a, b):
    r = np.hypot(a, b)
    if r == 0.0:
        return 1.0, 0.0, 0.0
    return a / r, b / r, r


@njit(cache=True)
def _qr_append(Qw, Rw, m, a):
    """Append column ``a`` to ``R_W^T`` (``m`` columns so far); returns the new diagonal."""
    k = Qw.shape[0]
    v = Qw.T @ a
    for i in range(k - 1, m, -1):
        c, s, r = _rotate(v[i - 1], v[i])
        v[i - 1] = r
        v[i] = 0.0
        for l in range(k):
            qa = Qw[l, i - 1]
            qb = Qw[l, i]
            Qw[l, i - 1] = c * qa + s * qb
            Qw[l, i] = -s * qa + c * qb
    for i in range(m + 1):
        Rw[i, m] = v[i]
    for i in range(m + 1, k):
        Rw[i, m] = 0.0
    return abs(v[m]) / max(np.sqrt(a @ a), TINY)


@njit(cache=True)
def _qr_delete(Qw, Rw, m, j):
    """Remove column ``j`` of ``R_W^T`` (``m`` columns)."""
    k = Qw.shape[0]
    for col in range(j, m - 1):
        for i in range(k):
            Rw[i, col] = Rw[i, col + 1]
    for i in range(k):
        Rw[i, m - 1] = 0.0
    for l in range(j, m - 1):
        c, s, r = _rotate(Rw[l, l], Rw[l + 1, l])
        Rw[l, l] = r
        Rw[l + 1, l] = 0.0
        for col in range(l + 1, m - 1):
            ra = Rw[l, col]
            rb = Rw[l + 1, col]
            Rw[l, col] = c * ra + s * rb
            Rw[l + 1, col] = -s * ra + c * rb
        for i in range(k):
            qa = Qw[i, l]
            qb = Qw[i, l + 1]
            Qw[i, l] = c * qa + s * qb
            Qw[i, l + 1] = -s * qa + c * qb


@njit(cache=True, inline="always")
def _hold(j, inW, r, wl, m, Qw, Rw, R):
    """Piece ``j`` joins the held set as its ``m``-th member; returns the new diagonal of ``Rw``."""
    inW[j] = True
    r[j] = 0.0
    wl[m] = j
    return _qr_append(Qw, Rw, m, R[j].copy())


@njit(cache=True)
def walk_loop(R, r0, lo, hi, q, H, inW0, y0, walk_max, quad):
    """The walk of :func:`.walk.walk_face` from ``(inW0, y0)``.

    Parameters
    ----------
    R : ndarray of shape (P, k)
        The rows of the pieces.
    r0 : ndarray of shape (P,)
        Their values at ``y = 0``.
    lo, hi : ndarray of shape (P,)
        Their slopes below and above the kink.
    q : ndarray of shape (k,)
        The gradient of the smooth part at ``y = 0``.
    H : ndarray of shape (k, k)
        Its Hessian (not used when ``quad`` is False: ``H = 0``).
    inW0 : ndarray of shape (P,)
        The starting working set; its rows must be linearly independent.
    y0 : ndarray of shape (k,)
        The starting point.
    walk_max : int
        Most steps.
    quad : bool
        Whether the smooth part has a quadratic term.

    Returns
    -------
    code : int
        :data:`WALK_OK`, :data:`WALK_FAILED`, :data:`WALK_OUT_OF_STEPS` or
        :data:`WALK_DEPENDENT`.
    y, inW, up, r : ndarray
        The point, the working set (the pieces held at their kink), and per
        piece its side (True: the upper slope) and its value.
    """
    P, k = R.shape
    y, inW, r, up, slope, g_pc, scale = _walk_start(R, r0, lo, hi, inW0, y0)
    Qw = np.eye(k)
    Rw = np.zeros((k, k))
    wl = np.empty(k, dtype=np.int64)  # the rows of W, in the order of Qw's columns
    m = _factor_start(R, inW, Qw, Rw, wl)
    if m < 0:
        return WALK_DEPENDENT, y, inW, up, r
    zero = np.zeros(P, dtype=np.bool_)
    up0 = np.zeros(P, dtype=np.bool_)
    ad = np.zeros(P)
    for step in range(walk_max):
        _update_slopes(R, inW, up, lo, hi, slope, g_pc)
        g_s = q + H @ y if quad else q.copy()
        g = g_s + g_pc
        dvec, amax = _direction(Qw, m, g, H, quad)
        mx = _piece_moves(R, dvec, inW, ad)
        if mx <= AT_KINK and abs(dvec @ g_s) <= STATIONARY * max(1.0, abs(q @ y)):
            # stationary on W: multipliers mu of g + R_W^T mu = 0 must lie in [lo, hi]
            if m == 0 or not _release_worst(Qw, Rw, wl, m, g, lo, hi, scale, inW, up):
                return WALK_OK, y, inW, up, r
            m -= 1
            continue
        D0 = _slope_along(dvec, g_s, inW, r, ad, up, lo, hi, zero, up0)
        c2 = dvec @ (H @ dvec) if quad else 0.0
        idx, alph, n_cross = _breakpoints(inW, zero, r, ad, amax)
        if D0 >= 0.0:
            # not a descent direction for the true pieces: a piece at its
            # kink moves to the side of the larger slope; hold it there
            jb = _steepest_kink(zero, up0, up, ad, lo, hi)
            if jb < 0:
                return WALK_OK, y, inW, up, r
            m = _hold_new(jb, inW, r, wl, m, Qw, Rw, R)
            if m < 0:
                return WALK_DEPENDENT, y, inW, up, r
            continue
        a_star, stop = _line_search(D0, c2, amax, idx, alph, n_cross, ad, lo, hi)
        if not np.isfinite(a_star):
            return WALK_FAILED, y, inW, up, r
        _take_step(y, r, r0, R, dvec, ad, a_star, step % WALK_REFRESH == WALK_REFRESH - 1)
        _settle_sides(inW, zero, up0, a_star, r, up)
        if stop >= 0:
            m = _hold_new(stop, inW, r, wl, m, Qw, Rw, R)
            if m < 0:
                return WALK_DEPENDENT, y, inW, up, r
    return WALK_OUT_OF_STEPS, y, inW, up, r


@njit(cache=True)
def _walk_start(R, r0, lo, hi, inW0, y0):
    """The walk's state at ``(inW0, y0)``: ``y, inW, r, up``, the slopes, their gradient, the widest range."""
    y = y0.copy()
    inW = inW0.copy()
    r = r0 + R @ y
    P = R.shape[0]
    for j in range(P):
        if inW[j]:
            r[j] = 0.0
    up = r > 0.0
    scale = TINY
    for j in range(P):
        if hi[j] - lo[j] > scale:
            scale = hi[j] - lo[j]
    slope = np.empty(P)
    for j in range(P):
        slope[j] = 0.0 if inW[j] else (hi[j] if up[j] else lo[j])
    return y, inW, r, up, slope, R.T @ slope, scale


@njit(cache=True)
def _hold_new(j, inW, r, wl, m, Qw, Rw, R):
    """Hold piece ``j`` at its kink: the new size of the working set, or -1 when it turns dependent."""
    if m >= Qw.shape[0]:
        return -1
    if _hold(j, inW, r, wl, m, Qw, Rw, R) <= RANK:
        return -1
    return m + 1


@njit(cache=True)
def _factor_start(R, inW, Qw, Rw, wl):
    """Factor the starting working set into ``Qw``, ``Rw``, ``wl``; its size, or -1 when dependent."""
    k = Qw.shape[0]
    m = 0
    for j in range(R.shape[0]):
        if inW[j]:
            if m >= k:
                return -1
            wl[m] = j
            if _qr_append(Qw, Rw, m, R[j].copy()) <= RANK:
                return -1
            m += 1
    return m


@njit(cache=True)
def _update_slopes(R, inW, up, lo, hi, slope, g_pc):
    """Bring ``slope`` (per piece) and its gradient ``g_pc = R^T slope`` up to date."""
    k = R.shape[1]
    for j in range(R.shape[0]):
        new = 0.0 if inW[j] else (hi[j] if up[j] else lo[j])
        if new != slope[j]:
            # scalar loop: an array expression here slows the whole loop down
            dl = new - slope[j]
            for l in range(k):
                g_pc[l] += dl * R[j, l]
            slope[j] = new


@njit(cache=True)
def _direction(Qw, m, g, H, quad):
    """The step direction on the null space of the working set, and its longest step ``amax``.

    With a quadratic term: the Newton direction where the reduced Hessian
    is positive definite, else a descent direction along its flat
    directions (``amax`` infinite); without: the steepest descent direction
    (``amax`` infinite), or none when the gradient vanishes.
    """
    k = Qw.shape[0]
    nz = k - m
    amax = 1.0
    if nz == 0:
        return np.zeros(k), amax
    Z = np.ascontiguousarray(Qw[:, m:])
    gr = Z.T @ g
    if quad:
        Hr = Z.T @ (H @ Z)
        ev, U = np.linalg.eigh(Hr)
        top = max(ev[-1], 0.0) * FLAT + TINY
        gu = U.T @ gr
        flat_norm = 0.0
        for i in range(nz):
            if not ev[i] > top:
                flat_norm += gu[i] * gu[i]
        dv = np.zeros(nz)
        if np.sqrt(flat_norm) > FLAT * max(1.0, np.sqrt(gr @ gr)):
            for i in range(nz):
                if not ev[i] > top:
                    dv -= U[:, i] * gu[i]
            amax = np.inf
        else:
            for i in range(nz):
                if ev[i] > top:
                    dv -= U[:, i] * (gu[i] / ev[i])
    else:
        # no quadratic term: every direction is flat
        dv = -gr
        if np.sqrt(gr @ gr) > FLAT * max(1.0, np.sqrt(gr @ gr)):
            amax = np.inf
        else:
            dv = np.zeros(nz)
    return Z @ dv, amax


@njit(cache=True)
def _piece_moves(R, dvec, inW, ad):
    """Fill ``ad`` with the moves ``R d`` of the free pieces (0 for held ones); the largest."""
    ad_all = R @ dvec
    mx = 0.0
    for j in range(R.shape[0]):
        ad[j] = 0.0 if inW[j] else ad_all[j]
        if abs(ad[j]) > mx:
            mx = abs(ad[j])
    return mx


@njit(cache=True)
def _release_worst(Qw, Rw, wl, m, g, lo, hi, scale, inW, up):
    """At a stationary point: release the held piece whose multiplier lies farthest outside its range.

    Returns False (nothing released) when every multiplier of ``g + R_W^T
    mu = 0`` lies in its ``[lo, hi]``: the walk is done.
    """
    rhs = -(np.ascontiguousarray(Qw[:, :m]).T @ g)
    mu = np.zeros(m)
    for i in range(m - 1, -1, -1):
        acc = rhs[i]
        for l in range(i + 1, m):
            acc -= Rw[i, l] * mu[l]
        mu[i] = acc / Rw[i, i]
    best, jb = -np.inf, -1
    for i in range(m):
        piece = wl[i]
        v = max(lo[piece] - mu[i], mu[i] - hi[piece]) / scale
        # ties broken by the smaller row index
        if v > best or (v == best and piece < wl[jb]):
            best, jb = v, i
    if best <= MULTIPLIER:
        return False
    piece = wl[jb]
    inW[piece] = False
    up[piece] = mu[jb] > hi[piece]
    _qr_delete(Qw, Rw, m, jb)
    for i in range(jb, m - 1):
        wl[i] = wl[i + 1]
    return True


@njit(cache=True)
def _slope_along(dvec, g_s, inW, r, ad, up, lo, hi, zero, up0):
    """The model's slope along ``dvec`` at step 0+, with the pieces at their kink (``zero``)
    taking the side the step moves them to (``up0``)."""
    D0 = dvec @ g_s
    for j in range(r.shape[0]):
        if inW[j]:
            zero[j] = False
            up0[j] = up[j]
            continue
        zero[j] = r[j] == 0.0
        up0[j] = (ad[j] > 0.0) if zero[j] else up[j]
        D0 += (hi[j] if up0[j] else lo[j]) * ad[j]
    return D0


@njit(cache=True)
def _breakpoints(inW, zero, r, ad, amax):
    """The free pieces whose kink the step crosses within ``amax``, the steps there, and their number."""
    idx = np.empty(r.shape[0], dtype=np.int64)
    alph = np.empty(r.shape[0])
    n_cross = 0
    for j in range(r.shape[0]):
        if inW[j] or zero[j] or ad[j] == 0.0:
            continue
        if (ad[j] > 0.0) == (r[j] > 0.0):
            continue
        a = -r[j] / ad[j]
        if a <= amax:
            idx[n_cross] = j
            alph[n_cross] = a
            n_cross += 1
    return idx, alph, n_cross


@njit(cache=True)
def _steepest_kink(zero, up0, up, ad, lo, hi):
    """The piece at its kink that the step would move to its larger slope the most; -1 if none."""
    jb, best = -1, -1.0
    for j in range(zero.shape[0]):
        if zero[j] and up0[j] != up[j] and ad[j] != 0.0:
            v = (hi[j] - lo[j]) * abs(ad[j])
            if v > best:
                best, jb = v, j
    return jb


@njit(cache=True)
def _line_search(D0, c2, amax, idx, alph, n_cross, ad, lo, hi):
    """Exact line search: the step ``a_star`` and the piece it stops at (-1: none).

    ``phi'(a) = D0 + c2 a + J(a)``, ``J`` the jumps of the breakpoints passed,
    taken in increasing order (ties: the lower row first); the first few by
    selection (the search usually ends there), the rest sorted.
    """
    J = 0.0
    found = False
    J_ka = 0.0
    a_ka = 0.0
    i_ka = -1
    n_sel = min(n_cross, LINE_SEARCH_SELECT)
    for _ in range(n_sel):
        pos = 0
        amin = np.inf
        for i in range(n_cross):
            if alph[i] < amin:
                amin = alph[i]
                pos = i
        J_prev = J
        J += (hi[idx[pos]] - lo[idx[pos]]) * abs(ad[idx[pos]])
        alph[pos] = np.inf
        if D0 + c2 * amin + J >= 0.0:
            found, J_ka, a_ka, i_ka = True, J_prev, amin, idx[pos]
            break
    if not found and n_cross > n_sel:
        rest = np.empty(n_cross - n_sel)
        ridx = np.empty(n_cross - n_sel, dtype=np.int64)
        c_ = 0
        for i in range(n_cross):
            if alph[i] != np.inf:
                rest[c_] = alph[i]
                ridx[c_] = idx[i]
                c_ += 1
        o = np.argsort(rest[:c_], kind="mergesort")
        for t_ in range(c_):
            J_prev = J
            jj = ridx[o[t_]]
            J += (hi[jj] - lo[jj]) * abs(ad[jj])
            if D0 + c2 * rest[o[t_]] + J >= 0.0:
                found, J_ka, a_ka, i_ka = True, J_prev, rest[o[t_]], jj
                break
    if not found:
        J_ka = J
    if found and D0 + c2 * a_ka + J_ka <= 0.0:
        return a_ka, i_ka
    if c2 > 0.0 and (found or D0 + c2 * amax + J_ka > 0.0):
        return -(D0 + J_ka) / c2, -1
    return amax, -1


@njit(cache=True)
def _take_step(y, r, r0, R, dvec, ad, a_star, refresh):
    """Move ``y`` by ``a_star dvec`` and the pieces' values ``r`` with it (recomputed when ``refresh``)."""
    y += a_star * dvec
    if refresh:
        np.dot(R, y, r)  # into r: no array assignment, whose shape check Numba compiles with its message
        r += r0
    else:
        r += a_star * ad


@njit(cache=True)
def _settle_sides(inW, zero, up0, a_star, r, up):
    """After a step: the sides of the free pieces (those that were at their kink take ``up0``)."""
    for j in range(r.shape[0]):
        if inW[j]:
            r[j] = 0.0
            continue
        if zero[j]:
            if a_star > 0.0:
                up[j] = up0[j]
        elif r[j] != 0.0:
            up[j] = r[j] > 0.0
