"""Numba kernel of the hinge polisher's active-set walk (:meth:`Polisher._walk`).

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
from ._tolerances import AT_KINK, FLAT, MULTIPLIER, RANK, STATIONARY, TINY

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
    """The walk of :meth:`Polisher._walk` from ``(inW0, y0)``.

    ``R`` (P x k) rows of the pieces, ``r0`` their values at ``y = 0``,
    ``[lo, hi]`` their slopes, ``q + H y`` the gradient of the smooth part
    (``quad`` False: ``H = 0``).  The rows of ``inW0`` must be linearly
    independent.  Returns ``(code, y, inW, up, r, steps)``.
    """
    P, k = R.shape
    y = y0.copy()
    inW = inW0.copy()
    r = r0 + R @ y
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
    g_pc = R.T @ slope
    Qw = np.eye(k)
    Rw = np.zeros((k, k))
    wl = np.empty(k, dtype=np.int64)  # the rows of W, in the order of Qw's columns
    m = 0
    for j in range(P):
        if inW[j]:
            if m >= k:
                return WALK_DEPENDENT, y, inW, up, r, 0
            wl[m] = j
            if _qr_append(Qw, Rw, m, R[j].copy()) <= RANK:
                return WALK_DEPENDENT, y, inW, up, r, 0
            m += 1
    zero = np.zeros(P, dtype=np.bool_)
    up0 = np.zeros(P, dtype=np.bool_)
    ad = np.zeros(P)
    steps = 0
    for step in range(walk_max):
        steps += 1
        for j in range(P):
            new = 0.0 if inW[j] else (hi[j] if up[j] else lo[j])
            if new != slope[j]:
                # scalar loop: an array expression here slows the whole loop down
                dl = new - slope[j]
                for l in range(k):
                    g_pc[l] += dl * R[j, l]
                slope[j] = new
        g_s = q + H @ y if quad else q.copy()
        g = g_s + g_pc
        nz = k - m
        amax = 1.0
        dvec = np.zeros(k)
        if nz > 0:
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
            dvec = Z @ dv
        ad_all = R @ dvec
        mx = 0.0
        for j in range(P):
            ad[j] = 0.0 if inW[j] else ad_all[j]
            if abs(ad[j]) > mx:
                mx = abs(ad[j])
        if mx <= AT_KINK and abs(dvec @ g_s) <= STATIONARY * max(1.0, abs(q @ y)):
            # stationary on W: multipliers mu of g + R_W^T mu = 0 must lie in [lo, hi]
            if m == 0:
                return WALK_OK, y, inW, up, r, steps
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
                return WALK_OK, y, inW, up, r, steps
            piece = wl[jb]
            inW[piece] = False
            up[piece] = mu[jb] > hi[piece]
            _qr_delete(Qw, Rw, m, jb)
            for i in range(jb, m - 1):
                wl[i] = wl[i + 1]
            m -= 1
            continue
        D0 = dvec @ g_s
        for j in range(P):
            if inW[j]:
                zero[j] = False
                up0[j] = up[j]
                continue
            zero[j] = r[j] == 0.0
            up0[j] = (ad[j] > 0.0) if zero[j] else up[j]
            D0 += (hi[j] if up0[j] else lo[j]) * ad[j]
        c2 = dvec @ (H @ dvec) if quad else 0.0
        n_cross = 0
        idx = np.empty(P, dtype=np.int64)
        alph = np.empty(P)
        for j in range(P):
            if inW[j] or zero[j] or ad[j] == 0.0:
                continue
            if (ad[j] > 0.0) == (r[j] > 0.0):
                continue
            a = -r[j] / ad[j]
            if a <= amax:
                idx[n_cross] = j
                alph[n_cross] = a
                n_cross += 1
        if D0 >= 0.0:
            # not a descent direction for the true pieces: a piece at its
            # kink moves to the side of the larger slope; hold it there
            jb, best = -1, -1.0
            for j in range(P):
                if zero[j] and up0[j] != up[j] and ad[j] != 0.0:
                    v = (hi[j] - lo[j]) * abs(ad[j])
                    if v > best:
                        best, jb = v, j
            if jb < 0:
                return WALK_OK, y, inW, up, r, steps
            if m >= k:
                return WALK_DEPENDENT, y, inW, up, r, steps
            dg = _hold(jb, inW, r, wl, m, Qw, Rw, R)
            m += 1
            if dg <= RANK:
                return WALK_DEPENDENT, y, inW, up, r, steps
            continue
        # exact line search: phi'(a) = D0 + c2 a + (jumps of the breakpoints passed),
        # the breakpoints taken in increasing order (ties: the lower row first);
        # the first few by selection (the search usually ends there), the rest sorted
        J = 0.0
        ka = n_cross
        J_ka = 0.0
        a_ka = 0.0
        i_ka = -1
        n_sel = min(n_cross, 8)
        for t_ in range(n_sel):
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
                ka, J_ka, a_ka, i_ka = t_, J_prev, amin, idx[pos]
                break
        if ka == n_cross and n_cross > n_sel:
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
                    ka, J_ka, a_ka, i_ka = n_sel + t_, J_prev, rest[o[t_]], jj
                    break
        if ka == n_cross:
            J_ka = J
        a_star, stop = amax, -1
        if ka < n_cross and D0 + c2 * a_ka + J_ka <= 0.0:
            a_star, stop = a_ka, i_ka
        elif c2 > 0.0 and (ka < n_cross or D0 + c2 * amax + J_ka > 0.0):
            a_star = -(D0 + J_ka) / c2
        if not np.isfinite(a_star):
            return WALK_FAILED, y, inW, up, r, steps
        y += a_star * dvec
        if step % 50 == 49:
            r = r0 + R @ y
        else:
            r += a_star * ad
        for j in range(P):
            if inW[j]:
                r[j] = 0.0
                continue
            if zero[j]:
                if a_star > 0.0:
                    up[j] = up0[j]
            elif r[j] != 0.0:
                up[j] = r[j] > 0.0
        if stop >= 0:
            if m >= k:
                return WALK_DEPENDENT, y, inW, up, r, steps
            dg = _hold(stop, inW, r, wl, m, Qw, Rw, R)
            m += 1
            if dg <= RANK:
                return WALK_DEPENDENT, y, inW, up, r, steps
    return WALK_OUT_OF_STEPS, y, inW, up, r, steps
