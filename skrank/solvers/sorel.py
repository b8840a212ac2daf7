"""SOREL: stochastic optimisation of spectral risks (Ge and Jiang 2024), spec 003.

Practical version of Algorithm 1 (spec 003 section 2.3): one dual step per
pass, a proximal-point SVRG inner loop of ``ceil(n / batch_size)`` steps,
the last iterate as both the reference point and the next outer iterate.

The whole epoch (loss evaluation, adaptive re-sorting, the permutahedron
projection by PAV, the SVRG inner loop, the reference gradient, the
objective and the stopping criterion) runs inside one Numba kernel,
:func:`_sorel_epochs`, which also runs several epochs per call: Python's
overhead is ``O(1)`` per call, not per epoch.
"""

import time

import numpy as np
from numba import njit

from .._pava import _isotonic_kernel
from ..losses import HUBER, LOGISTIC, SQUARED, SQUARED_HINGE, loss_derivative, loss_value
from ._polish import Polisher
from ._result import SolverResult
from ._stepsize import (
    check_learning_rate,
    loss_arguments_dense,
    make_rng,
    prepare_data,
    rank_weights,
    sample_smoothness,
    svrg_step_size,
    vr_batch_direction,
)

_H_PERIOD = 16  # the primal curvature used by the dual step cap is refreshed at k = 2^j - 1 and every 16 epochs
_CHUNK_SECONDS = 2e-3  # target length of one kernel call (several epochs)
# Multiple of svrg_step_size's 1 / (3 (Lbar / B + Lbar)) for the automatic
# importance-sampled primal step (still below SVRG's 1 / (4 Lbar / 3) bound
# for B = 1).  Against the paper's C x lr grid (benchmarks/spectral_risk.py
# --paper-grid) 1.75 reaches 1e-8 within 100 passes on the same 11 of the 15
# Figure 2 settings as the tuned grid, for seeds 0, 1 and 2; 1.0 leaves energy
# ESRM/extremile at ~150 passes, 2.0 loses power CVaR.
_LR_IMPORTANCE_FACTOR = 1.75
# The face cap dual_safety / L_F assumes an exact primal step.  When the dual
# step at the cap overshoots (the objective went up and the dual move reversed
# the previous one), the cap shrinks by _CAP_SHRINK; it grows back by
# _CAP_SHRINK ** -_CAP_RECOVER per epoch whose objective went down (kin8nm
# ESRM/extremile: the step sat at the cap and oscillated).
_CAP_SHRINK = 0.8
_CAP_RECOVER = 0.1
# A face solution (polishing, see sorel's Notes) counts as optimal when its KKT
# certificate (Polisher._certificate) is below _POLISH_TOL.
_POLISH_FIRST = 16  # also tried after 16 epochs, then every _POLISH_GROWTH-fold epochs
_POLISH_GROWTH = 2.0
_POLISH_COST = 1  # the least budget of an attempt, in passes per coefficient
_POLISH_TOL = 1e-8


def _project(v, sigma):
    """Euclidean projection onto the permutahedron of ``sigma`` (spec 003 section 2.4)."""
    from .. import _pava

    return _pava.project_permutahedron(v, sigma)


def dual_smoothness(X, s, t, lam, loss, curvature, fit_intercept):
    """Lipschitz constant of the dual function's gradient at the current point (all samples).

    With the primal step solved exactly, the dual step is a gradient step on
    ``phi(lam) = min_w lam^T l(w) + g(w) + ||w - w_k||^2 / (2 tau)``, whose
    gradient ``l(w(lam))`` has Lipschitz constant ``||J H^{-1} J^T||`` with
    ``J = diag(s l'(t)) [X 1]`` and ``H = [X 1]^T diag(lam l''(t)) [X 1] + curvature I``
    (intercept: no ``curvature``).  Returned as the largest generalised
    eigenvalue of ``(J^T J, H)``, a ``(d+1) x (d+1)`` problem.  The solver
    uses the cheaper restriction of this constant to the current face of the
    permutahedron (:func:`_face_smoothness`); this global one is an upper
    bound kept for diagnostics.
    """
    from scipy.linalg import eigh

    h = 1e-6 * (1.0 + np.abs(t))
    d2 = (loss.derivative(t + h) - loss.derivative(t - h)) / (2.0 * h)
    d1 = s * loss.derivative(t)
    Xt = np.hstack([X, np.ones((X.shape[0], 1))]) if fit_intercept else X
    p = Xt.shape[1]
    H = Xt.T @ ((np.maximum(lam, 0.0) * d2)[:, None] * Xt)
    reg = np.full(p, curvature)
    if fit_intercept:
        reg[-1] = 1e-12 * max(1.0, float(np.trace(H)))
    H[np.diag_indices(p)] += reg
    A = Xt.T @ ((d1 * d1)[:, None] * Xt)
    top = eigh(A, H, eigvals_only=True, subset_by_index=[p - 1, p - 1])
    return max(float(top[0]), 1e-300)


def sorel_dual_scale(losses, sigma):
    """Automatic dual scale ``C`` of SOREL: the first dual step is ``eta_0 = C mu``.

    ``C`` plays the role of ``1/(8 G^2)`` in the theory (spec 003 section 3)
    and must scale like the inverse of the losses for the dual step
    ``lam + eta v`` to be invariant to the scale of the targets.  We use the
    gap between the risk and the smallest loss at the starting point,
    ``C = 0.4 / (R_sigma(l) - min_i l_i)``: about 0.4 to 0.5 on standardised
    targets, the upper end of the paper's stable grid values.
    """
    spread = float(np.sort(losses) @ sigma - losses.min())
    return 0.4 / max(spread, 1e-12)


# ---------------------------------------------------------------------------------
# The compiled epoch loop
# ---------------------------------------------------------------------------------
_U11 = np.uint64(11)
_U12 = np.uint64(12)
_U25 = np.uint64(25)
_U27 = np.uint64(27)
_MULT = np.uint64(2685821657736338717)
_INV53 = 1.0 / 9007199254740992.0  # 2**-53


@njit(cache=True, inline="always")
def _uniform(state):
    """xorshift64* step: a float in [0, 1) (53 bits); ``state`` is a uint64 array."""
    x = state[0]
    x ^= x >> _U12
    x ^= x << _U25
    x ^= x >> _U27
    state[0] = x
    return float((x * _MULT) >> _U11) * _INV53


@njit(cache=True)
def _build_alias(p, prob, alias, small, large):
    """Walker/Vose alias table of ``p`` (nonnegative, positive sum) in place."""
    n = p.shape[0]
    total = 0.0
    for i in range(n):
        total += p[i]
    ns, nl = 0, 0
    for i in range(n):
        q = p[i] * n / total
        prob[i] = q
        alias[i] = i
        # branch-free: i goes on both stacks, only one of them grows
        is_small = q < 1.0
        small[ns] = i
        large[nl] = i
        ns += is_small
        nl += 1 - is_small
    # Vose's pairing; the current large entry's probability is kept in a register
    if nl > 0:
        g = large[nl - 1]
        pg = prob[g]
    while ns > 0 and nl > 0:
        ns -= 1
        sm = small[ns]
        alias[sm] = g
        pg = pg + prob[sm] - 1.0
        if pg < 1.0:
            prob[g] = pg
            nl -= 1
            small[ns] = g
            ns += 1
            if nl > 0:
                g = large[nl - 1]
                pg = prob[g]
    if nl > 0:
        prob[g] = pg
    for k in range(nl):
        prob[large[k]] = 1.0
    for k in range(ns):
        prob[small[k]] = 1.0
    return total


_U5 = np.uint64(5)
_LOW32 = np.uint64(0xFFFFFFFF)


@njit(cache=True, inline="always")
def _pack_alias(i, alias_i):
    """Entry ``i`` of the packed alias table: ``i`` in the low, ``alias_i`` in the high 32 bits."""
    return np.int64(i) | (np.int64(alias_i) << np.int64(32))


@njit(cache=True)
def _build_alias_packed(p, total, prob, packed, small, large):
    """:func:`_build_alias` with the table packed as ``packed[i] = i | alias[i] << 32``.

    ``total`` is ``sum(p)`` (the caller's, summed in the same order); the
    scale ``n / total`` is applied as one product.  Vose's pairing with the
    current large entry's probability in a register; on the way ``packed``
    holds each entry's alias in its high half (:func:`_pack_alias`).

    The pairing is that of :func:`_build_alias` (the same table): a large
    entry that turns small goes on top of the small stack and is the next one
    paired, so it is paired at once, in registers, and the small stack is
    only read.
    """
    n = p.shape[0]
    scale = n / total
    ns, nl = 0, 0
    for i in range(n):
        q = p[i] * scale
        prob[i] = q
        packed[i] = _pack_alias(i, i)
        is_small = q < 1.0
        small[ns] = i
        large[nl] = i
        ns += is_small
        nl += 1 - is_small
    if nl == 0:
        for k in range(ns):
            prob[small[k]] = 1.0
        return
    g = large[nl - 1]
    pg = prob[g]
    while ns > 0:
        ns -= 1
        sm = small[ns]
        packed[sm] = _pack_alias(sm, g)
        pg = pg + prob[sm] - 1.0
        while pg < 1.0:  # g turns small: paired with the next large entry
            prob[g] = pg
            nl -= 1
            if nl == 0:
                break
            old = g
            p_old = pg
            g = large[nl - 1]
            pg = prob[g]
            packed[old] = _pack_alias(old, g)
            pg = pg + p_old - 1.0
        if nl == 0:
            prob[g] = 1.0  # left on the small stack
            break
    for k in range(nl):
        prob[large[k]] = 1.0
    for k in range(ns):
        prob[small[k]] = 1.0


_RADIX_BITS = 11  # two LSD passes on the top 22 bits of a float32 key
_RADIX_BUCKETS = 1 << _RADIX_BITS


@njit(cache=True)
def _sort_scratch(n):
    """Work arrays of :func:`_resort`: float32 keys, keys, positions, digit counts."""
    return (np.empty(n, dtype=np.float32), np.empty(n, dtype=np.uint32),
            np.empty(n, dtype=np.int64), np.empty((2, _RADIX_BUCKETS), dtype=np.int64))


@njit(cache=True)
def _insertion_resort(vals, perm, budget):
    """Insertion sort of ``perm`` by ``vals`` from its order.

    Returns False (``perm`` still a permutation, partly sorted) once more
    than ``budget`` moves were needed; ``budget < 0``: no limit.
    """
    n = perm.shape[0]
    work = 0
    for i in range(1, n):
        p = perm[i]
        v = vals[p]
        j = i - 1
        while j >= 0 and vals[perm[j]] > v:
            perm[j + 1] = perm[j]
            j -= 1
        work += i - 1 - j
        perm[j + 1] = p
        if budget >= 0 and work > budget:
            return False
    return True


@njit(cache=True)
def _radix_presort(vals, perm, f32, keys2, perm2, counts):
    """Stable LSD radix sort of ``perm`` by a monotone 22-bit key of ``vals``.

    The key is the top 22 bits of the order-preserving integer image of
    ``float32(vals)`` (rounding to float32 is monotone), so the result is
    sorted up to values closer than about ``1e-4`` relative, which keep
    ``perm``'s previous order: an insertion pass finishes the job in
    ``O(n)`` work.  Two passes of 11 bits, a pass whose digit is the same for
    all keys is skipped.
    """
    n = perm.shape[0]
    keys = f32.view(np.uint32)
    nb = counts.shape[1]
    mask = np.uint32(nb - 1)
    sh0 = np.uint32(32 - 2 * _RADIX_BITS)
    sh1 = np.uint32(32 - _RADIX_BITS)
    sign = np.uint32(0x80000000)
    for j in range(n):
        f32[j] = vals[perm[j]]
    for m in range(nb):
        counts[0, m] = 0
        counts[1, m] = 0
    for j in range(n):
        x = keys[j]
        x = ~x if (x & sign) else (x | sign)
        keys[j] = x
        counts[0, (x >> sh0) & mask] += 1
        counts[1, x >> sh1] += 1
    src_k, dst_k, src_p, dst_p = keys, keys2, perm, perm2
    swapped = False
    for q in range(2):
        sh = sh0 if q == 0 else sh1
        tot = 0
        constant = False
        for m in range(nb):
            cnt = counts[q, m]
            constant = constant or cnt == n
            counts[q, m] = tot
            tot += cnt
        if constant:
            continue
        for j in range(n):
            x = src_k[j]
            dgt = (x >> sh) & mask
            pos = counts[q, dgt]
            counts[q, dgt] = pos + 1
            dst_k[pos] = x
            dst_p[pos] = src_p[j]
        src_k, dst_k = dst_k, src_k
        src_p, dst_p = dst_p, src_p
        swapped = not swapped
    if swapped:
        for j in range(n):
            perm[j] = src_p[j]


@njit(cache=True)
def _resort(vals, perm, f32, keys2, perm2, counts):
    """Sort ``perm`` so that ``vals[perm]`` is nondecreasing, starting from its order.

    Nearly sorted (few descents; the order settles after some epochs):
    insertion sort from the previous order, ``O(n + inversions)``.
    Otherwise, or once the insertion sort has done ``2 n`` moves, a radix
    sort on a 22-bit key followed by an insertion pass: ``O(n)`` in all
    cases (a comparison sort of ``n = 7000`` values costs ten times more).
    The order of tied values is irrelevant to the solver (tied values get
    equal weights from the projection).
    """
    n = perm.shape[0]
    if n < 256:
        _insertion_resort(vals, perm, -1)
        return
    descents = 0
    prev = vals[perm[0]]
    for j in range(1, n):
        v = vals[perm[j]]
        descents += v < prev
        prev = v
    if descents == 0:
        return  # already sorted (the order has settled)
    if descents * 16 < n and _insertion_resort(vals, perm, 2 * n + 64):
        return
    _radix_presort(vals, perm, f32, keys2, perm2, counts)
    if not _insertion_resort(vals, perm, 8 * n + 64):
        # many values closer than the key's resolution, far from their previous order
        order = np.argsort(vals, kind="mergesort")
        for m in range(n):
            perm[m] = order[m]


# Sorting a gathered copy: the epoch kernel sorts ``keys = vals[perm]`` (contiguous)
# carrying ``perm`` along, so that the sorted values come out with the order
# (the projection and the objective read them in sorted order).
_FAR = 8  # a "far" descent: keys[j] < keys[j - _FAR] (a sample moved by _FAR places or more)
_U32 = np.uint64(32)


@njit(cache=True)
def _keyed_scratch(n):
    """Work arrays of :func:`_sort_keyed`: two packed-key buffers, keys, positions, counts."""
    return (np.empty(n, dtype=np.uint64), np.empty(n, dtype=np.uint64), np.empty(n),
            np.empty(n, dtype=np.int64), np.empty((2, _RADIX_BUCKETS), dtype=np.int64),
            np.empty((4, _RADIX_BUCKETS), dtype=np.int32))


@njit(cache=True)
def _insertion_keyed(keys, perm, budget):
    """Insertion sort of ``keys`` (ascending), ``perm`` carried along.

    The largest key so far stays in a register: a key in order costs one
    comparison.  Returns False (both still permuted alike, partly sorted)
    once more than ``budget`` moves were needed; ``budget < 0``: no limit.
    """
    n = keys.shape[0]
    if n == 0:
        return True
    work = 0
    top = keys[0]
    for i in range(1, n):
        v = keys[i]
        if v >= top:
            top = v
            continue
        p = perm[i]
        j = i - 1
        while j >= 0 and keys[j] > v:
            keys[j + 1] = keys[j]
            perm[j + 1] = perm[j]
            j -= 1
        keys[j + 1] = v
        perm[j + 1] = p
        work += i - 1 - j
        if budget >= 0 and work > budget:
            return False
        top = keys[i]
    return True


@njit(cache=True)
def _radix_keyed(keys, perm, pk, pk2, kbuf, pbuf, counts, hist):
    """Stable LSD radix sort of ``keys`` (``perm`` carried), 22-bit key of :func:`_radix_presort`.

    The key and the position travel packed in one 64-bit word (key in the
    high half) through the two 11-bit passes; the last pass moves the keys
    and ``perm`` themselves.  Histograms are counted in two interleaved
    copies (``hist``), so that runs of equal digits (nearly sorted input) do
    not serialise the increments.  Sorted up to the key's resolution: an
    insertion pass finishes the job.
    """
    n = keys.shape[0]
    nb = counts.shape[1]
    mask = np.uint64(nb - 1)
    sh0 = np.uint64(64 - 2 * _RADIX_BITS)
    sh1 = np.uint64(64 - _RADIX_BITS)
    sign = np.uint32(0x80000000)
    for q in range(4):
        for m in range(nb):
            hist[q, m] = 0
    for j in range(n):
        x = np.float32(keys[j]).view(np.uint32)
        x = ~x if (x & sign) else (x | sign)
        y = (np.uint64(x) << _U32) | np.uint64(j)
        pk[j] = y
        h = j & 1
        hist[h, (y >> sh0) & mask] += 1
        hist[2 + h, y >> sh1] += 1
    const0 = False
    const1 = False
    tot0 = 0
    tot1 = 0
    for m in range(nb):
        c0 = np.int64(hist[0, m]) + np.int64(hist[1, m])
        c1 = np.int64(hist[2, m]) + np.int64(hist[3, m])
        const0 = const0 or c0 == n
        const1 = const1 or c1 == n
        counts[0, m] = tot0
        counts[1, m] = tot1
        tot0 += c0
        tot1 += c1
    src = pk
    if not const0:
        for j in range(n):
            y = pk[j]
            dg = (y >> sh0) & mask
            pos = counts[0, dg]
            counts[0, dg] = pos + 1
            pk2[pos] = y
        src = pk2
    for m in range(n):
        kbuf[m] = keys[m]
        pbuf[m] = perm[m]
    if const1:
        for m in range(n):
            j = src[m] & _LOW32
            keys[m] = kbuf[j]
            perm[m] = pbuf[j]
    else:
        for m in range(n):
            y = src[m]
            j = y & _LOW32
            dg = y >> sh1
            pos = counts[1, dg]
            counts[1, dg] = pos + 1
            keys[pos] = kbuf[j]
            perm[pos] = pbuf[j]


@njit(cache=True)
def _sort_keyed(keys, perm, descents, far, pk, pk2, kbuf, pbuf, counts, hist):
    """Sort ``keys`` (a gathered copy ``vals[perm]``) ascending, ``perm`` carried along.

    ``descents`` and ``far`` count ``keys[j] < keys[j - 1]`` and
    ``keys[j] < keys[j - _FAR]`` (the caller counts them while gathering).
    Sorted: nothing to do.  Few far descents (the samples moved by a few
    places, the usual case once the order settles): insertion sort, whose
    cost is about one branch miss per descent.  Otherwise, or once the
    insertion sort has done ``4 n`` moves: radix sort on a 22-bit key and an
    insertion pass, ``O(n)``.  The order of tied keys is irrelevant to the
    solver (tied values get equal weights from the projection).
    """
    n = keys.shape[0]
    if descents == 0:
        return
    if n < 256:
        _insertion_keyed(keys, perm, -1)
        return
    if far * 128 < n and _insertion_keyed(keys, perm, 4 * n + 64):
        return
    _radix_keyed(keys, perm, pk, pk2, kbuf, pbuf, counts, hist)
    if not _insertion_keyed(keys, perm, 8 * n + 64):
        # many values closer than the key's resolution, far from their previous order
        order = np.argsort(keys, kind="mergesort")
        for m in range(n):
            kbuf[m] = keys[order[m]]
            pbuf[m] = perm[order[m]]
        for m in range(n):
            keys[m] = kbuf[m]
            perm[m] = pbuf[m]


@njit(cache=True)
def _gather_z(lam, v, eta, perm, z):
    """``z[j] = lam[i] + eta v[i]`` for ``i = perm[j]``; returns the descents and far descents."""
    n = z.shape[0]
    descents = 0
    far = 0
    prev = 0.0
    for j in range(n):
        i = perm[j]
        zj = lam[i] + eta * v[i]
        z[j] = zj
        if j > 0:
            descents += zj < prev
        if j >= _FAR:
            far += zj < z[j - _FAR]
        prev = zj
    return descents, far


@njit(cache=True)
def _gather_sorted(vals, perm, out):
    """``out[j] = vals[perm[j]]``; returns the descents and far descents of ``out``."""
    n = out.shape[0]
    descents = 0
    far = 0
    prev = 0.0
    for j in range(n):
        x = vals[perm[j]]
        out[j] = x
        if j > 0:
            descents += x < prev
        if j >= _FAR:
            far += x < out[j - _FAR]
        prev = x
    return descents, far


@njit(cache=True)
def _project_sorted(z, sigma, perm, lam, dlam, losses, b_wy, b_start, multi):
    """The dual step's projection from sorted ``z``, fused with the update of ``lam``.

    ``u = PAV(z - sigma)`` with unit weights and the arithmetic of
    :func:`skrank._pava._isotonic_into`: a block's weight is its number of
    samples, its value ``wy / w``, and the top block stays in registers, so
    a point that opens a new block (most of them) costs two stores.  The
    blocks of two samples or more (few: the free samples of the face) are
    listed in ``multi`` as (start, end) pairs; elsewhere ``u_j = z_j -
    sigma_j``.  Then ``lam[perm[j]] = z[j] - u[j]``, ``dlam`` the step, and
    the sums ``dual_turn = sum step * dlam_old`` and ``lam_l = sum lam *
    losses`` in sorted order.  Returns ``(number of multi-sample blocks,
    dual_turn, lam_l)``.
    """
    n = z.shape[0]
    top = 0  # closed blocks on the stack: weighted sums and first positions
    cv = z[0] - sigma[0]  # the open block: value, weight, weighted sum, first position
    cw = 1.0
    cwy = cv
    cs = 0
    for j in range(1, n):
        yj = z[j] - sigma[j]
        if not cv >= yj:
            b_wy[top] = cwy
            b_start[top] = cs
            top += 1
            cw = 1.0
            cwy = yj
            cv = yj
            cs = j
        else:
            cw = cw + 1.0
            cwy = cwy + yj
            cv = cwy / cw
            while top > 0:
                pw = float(cs - b_start[top - 1])
                pwy = b_wy[top - 1]
                if not pwy / pw >= cv:
                    break
                top -= 1
                cw = pw + cw
                cwy = pwy + cwy
                cv = cwy / cw
                cs = b_start[top]
    b_wy[top] = cwy
    b_start[top] = cs
    nb = top + 1
    # the multi-sample blocks, and their values in b_wy[:nm] (entries already read)
    nm = 0
    for blk in range(nb):
        start = b_start[blk]
        end = b_start[blk + 1] if blk + 1 < nb else n
        if end - start >= 2:
            b_wy[nm] = b_wy[blk] / float(end - start)
            multi[2 * nm] = start
            multi[2 * nm + 1] = end
            nm += 1
    dual_turn = 0.0
    lam_l = 0.0
    pos = 0
    for blk in range(nm + 1):
        stop = multi[2 * blk] if blk < nm else n
        for j in range(pos, stop):  # single-sample blocks: u_j = z_j - sigma_j
            i = perm[j]
            zj = z[j]
            new = zj - (zj - sigma[j])
            step_i = new - lam[i]
            dual_turn += step_i * dlam[i]
            dlam[i] = step_i
            lam[i] = new
            lam_l += new * losses[i]
        if blk == nm:
            break
        val = b_wy[blk]
        end = multi[2 * blk + 1]
        for j in range(stop, end):
            i = perm[j]
            new = z[j] - val
            step_i = new - lam[i]
            dual_turn += step_i * dlam[i]
            dlam[i] = step_i
            lam[i] = new
            lam_l += new * losses[i]
        pos = end
    return nm, dual_turn, lam_l


@njit(cache=True, inline="always")
def _second_derivative(code, t, param):
    if code == SQUARED:
        return 1.0
    if code == HUBER:
        return 1.0 if abs(t) <= param else 0.0
    if code == LOGISTIC:
        e = 1.0 / (1.0 + np.exp(-abs(t)))
        return e * (1.0 - e)
    if code == SQUARED_HINGE:
        return 2.0 if t > -1.0 else 0.0
    return 0.0


@njit(cache=True)
def _gram(rows, m, out):
    """``out = rows[:m].T @ rows[:m]`` (BLAS; ``out`` zero for ``m = 0``)."""
    if m == 0:
        out[:, :] = 0.0
    else:
        out[:, :] = np.dot(rows[:m].T, rows[:m])


@njit(cache=True)
def _primal_curvature(X, t, lam, code, param, fit_intercept, H, rows):
    """``H = [X 1]^T diag(lam l''(t)) [X 1]`` (the data part of the primal Hessian).

    Only positive weights ``h_i = lam_i l''(t_i)`` enter: ``H`` is the Gram
    matrix of the rows ``sqrt(h_i) (x_i, 1)``, gathered in ``rows``.
    """
    n, d = X.shape
    m = 0
    for i in range(n):
        h = lam[i] * _second_derivative(code, t[i], param)
        if h <= 0.0:
            continue
        r = np.sqrt(h)
        for a in range(d):
            rows[m, a] = r * X[i, a]
        if fit_intercept:
            rows[m, d] = r
        m += 1
    _gram(rows, m, H)


@njit(cache=True)
def _face_smoothness(X, s, t, code, param, perm, multi, n_multi, H, mu, inv_tau, fit_intercept, rows,
                     M, A, msum):
    """Smoothness ``L_F`` of the dual function on the current face of the permutahedron.

    The projection's Jacobian is the within-block centring of the PAV
    blocks; with the primal step exact the dual gradient ``l(w(lam))`` then
    moves with ``P J (H + curvature I)^-1 J^T P``, ``J = diag(s l'(t)) [X 1]``
    (the intercept's curvature is ``inv_tau`` only, as in the primal step).
    Only multi-sample blocks (the samples whose weights are free on the
    face) enter, listed by :func:`_project_sorted` as (start, end) pairs of
    sorted positions in ``multi[:2 n_multi]``: ``M = (P J)^T (P J)`` is the
    Gram matrix of their rows ``g_i (x_i, 1)`` centred within each block
    (gathered in ``rows``; ``msum`` a length-``p`` scratch), so the cost is
    ``O(m d^2 + d^3)`` for ``m`` free samples.  Returns ``(L_F, m)``,
    ``L_F = 0`` at a vertex.
    """
    n, d = X.shape
    p = M.shape[0]
    free = 0
    for blk in range(n_multi):
        start = multi[2 * blk]
        end = multi[2 * blk + 1]
        m = end - start
        for a in range(p):
            msum[a] = 0.0
        for r in range(start, end):
            i = perm[r]
            g = s[i] * loss_derivative(code, t[i], param)
            row = free + r - start
            for a in range(d):
                x = g * X[i, a]
                rows[row, a] = x
                msum[a] += x
            if fit_intercept:
                rows[row, d] = g
                msum[d] += g
        for a in range(p):
            msum[a] /= m
        for r in range(free, free + m):
            for a in range(p):
                rows[r, a] -= msum[a]
        free += m
    if free == 0:
        return 0.0, 0
    _gram(rows, free, M)
    return _top_generalised_eigenvalue(M, H, mu, inv_tau, fit_intercept, A), free


@njit(cache=True)
def _forward_solve(L, B):
    """``B <- L^-1 B`` in place, ``L`` lower triangular (its upper part is ignored)."""
    p = L.shape[0]
    for col in range(B.shape[1]):
        for r in range(p):
            v = B[r, col]
            for k in range(r):
                v -= L[r, k] * B[k, col]
            B[r, col] = v / L[r, r]


@njit(cache=True)
def _top_generalised_eigenvalue(M, H, mu, inv_tau, fit_intercept, A):
    """Largest eigenvalue of ``(H + diag(mu + inv_tau, ..., inv_tau))^-1 M`` (``M`` symmetric, overwritten).

    With the Cholesky factor ``L`` of the positive definite left matrix, the
    eigenvalue of the symmetric ``L^-1 M L^-T``.  The factorisation and the
    triangular solves are written out: for the small ``p`` of these solvers,
    LAPACK's fixed cost per call exceeds the whole computation.
    """
    p = M.shape[0]
    d = p - 1 if fit_intercept else p
    trace = 0.0
    for a in range(p):
        trace += H[a, a]
    for a in range(p):
        for c in range(p):
            A[a, c] = H[a, c]
    for a in range(d):
        A[a, a] += mu + inv_tau
    if fit_intercept:
        A[d, d] += inv_tau + 1e-12 * max(1.0, trace)
    # Cholesky A = L L^T in place (lower triangle)
    for j in range(p):
        v = A[j, j]
        for k in range(j):
            v -= A[j, k] * A[j, k]
        if not v > 0.0:
            raise np.linalg.LinAlgError("Matrix is not positive definite.")
        ljj = np.sqrt(v)
        A[j, j] = ljj
        for r in range(j + 1, p):
            v = A[r, j]
            for k in range(j):
                v -= A[r, k] * A[j, k]
            A[r, j] = v / ljj
    _forward_solve(A, M)  # L^-1 M
    for a in range(p):  # (L^-1 M)^T = M L^-T
        for c in range(a + 1, p):
            M[a, c], M[c, a] = M[c, a], M[a, c]
    _forward_solve(A, M)  # L^-1 M L^-T
    for a in range(p):
        for c in range(a + 1, p):
            v = 0.5 * (M[a, c] + M[c, a])
            M[a, c] = v
            M[c, a] = v
    return max(np.linalg.eigvalsh(M)[p - 1], 0.0)


@njit(cache=True)
def _draw(rng, n, prob, alias, use_alias):
    """One index: uniform, or from the alias table (``prob``, ``alias``) when ``use_alias``."""
    r = _uniform(rng) * n
    i = int(r)
    if i >= n:
        i = n - 1
    if use_alias and (r - i) >= prob[i]:
        i = alias[i]
    return i


@njit(cache=True)
def _single_steps(X, s, c, code, param, w, b, gref, mult, prob, alias, rng, steps, use_alias, unit_s,
                  fit_intercept, l1, lr, cst, cst_b, inv_denom, inv_denom_b):
    """``steps`` variance-reduced proximal steps of one sample each (SOREL's inner loop).

    Step: draw ``i``, ``delta = mult_i (s_i l'(t_i(w)) - gref_i)``, then
    ``w <- prox((w + cst - lr delta x_i))`` with the closed form of the
    penalty and anchor terms (``cst`` holds ``-lr gbar + lr w_k / tau``).
    The loop is bound by the latency of one step's chain of dependent
    operations (dot product, derivative, update), so the variants are
    written out: ``unit_s`` (regression, ``s = 1``: ``s_i f`` is ``f``
    exactly) saves two multiplications on that chain.
    """
    n, d = X.shape
    b0 = b[0]
    thr = lr * l1
    for _ in range(steps):
        # _draw written out: as a call (even inlined) it makes this loop 50 % slower
        r = _uniform(rng) * n
        i = int(r)
        if i >= n:
            i = n - 1
        if use_alias and (r - i) >= prob[i]:
            i = alias[i]
        f = b0
        for a in range(d):
            f += X[i, a] * w[a]
        if unit_s:
            delta = mult[i] * (loss_derivative(code, f + c[i], param) - gref[i])
        else:
            delta = mult[i] * (s[i] * loss_derivative(code, s[i] * f + c[i], param) - gref[i])
        ld = lr * delta
        if l1 > 0.0:
            for a in range(d):
                z = w[a] + cst[a] - ld * X[i, a]
                if z > thr:
                    z -= thr
                elif z < -thr:
                    z += thr
                else:
                    z = 0.0
                w[a] = z * inv_denom
        else:
            for a in range(d):
                w[a] = (w[a] + cst[a] - ld * X[i, a]) * inv_denom
        if fit_intercept:
            b0 = (b0 + cst_b - ld) * inv_denom_b
    b[0] = b0


@njit(cache=True, fastmath={"contract"})
def _single_steps_l2(X, s, c, code, param, w, b, gref, mult, prob, packed, rng, steps, use_alias,
                     fit_intercept, lr, cst, cst_b, inv_denom, inv_denom_b, icst, smooth, pw, tot):
    """:func:`_single_steps` without l1 (a lookahead of two samples), the same draws.

    The step ``w' = inv_denom (w + cst) - inv_denom ld x_i`` is linear in
    ``ld``, so the argument of the sample two steps ahead, ``k``, splits into
    products that do not depend on the current ``ld``: with
    ``base = inv_denom w + inv_denom cst``, ``x_k . w' = x_k . base - inv_denom
    ld x_k . x_i``, and one step later ``x_k . w'' = inv_denom x_k . w' +
    x_k . (inv_denom cst) - inv_denom ld' x_k . x_j``.  The chain of dependent
    operations from one step's ``ld`` to the next is then one multiply-add,
    the loss derivative and two operations; the dot products of the
    coordinates run alongside (the loop is bound by the number of
    operations, not their latency).  The same iterates up to rounding.

    Draws: the uniform number and the alias test are those of
    :func:`_draw`, with the random state in a register and the alias table
    packed (``packed[i] = i | alias[i] << 32``, :func:`_pack_alias`) so that
    the choice between ``i`` and ``alias[i]`` is a shift, not an
    unpredictable branch.  With the alias table, ``mult`` is not read:
    ``mult_i = tot / smooth_i`` (0 where ``pw_i = 0``) is computed for the
    drawn samples only.  ``icst`` is a length-``d`` scratch.
    """
    n, d = X.shape
    for a in range(d):
        icst[a] = inv_denom * cst[a]
    cb = inv_denom_b * cst_b if fit_intercept else 0.0
    ib = inv_denom_b if fit_intercept else 0.0
    b0 = b[0]
    x = rng[0]
    nm1 = np.uint64(n - 1)
    fn = float(n)
    lr_tot = lr * tot
    # the first two samples: i (its argument directly) and j
    x ^= x >> _U12
    x ^= x << _U25
    x ^= x >> _U27
    r = float((x * _MULT) >> _U11) * _INV53 * fn
    i = min(np.uint64(r), nm1)
    if use_alias:
        i = (np.uint64(packed[i]) >> (np.uint64((r - float(i)) >= prob[i]) << _U5)) & _LOW32
    f = b0
    for a in range(d):
        f += X[i, a] * w[a]
    j = i
    if steps > 1:
        x ^= x >> _U12
        x ^= x << _U25
        x ^= x >> _U27
        r = float((x * _MULT) >> _U11) * _INV53 * fn
        j = min(np.uint64(r), nm1)
        if use_alias:
            j = (np.uint64(packed[j]) >> (np.uint64((r - float(j)) >= prob[j]) << _U5)) & _LOW32
    dot_w = 0.0
    dot_c = 0.0
    dot_x = 0.0
    for a in range(d):
        xj = X[j, a]
        dot_w += xj * w[a]
        dot_c += xj * icst[a]
        dot_x += xj * X[i, a]
    # the next sample's argument is f_next - ld * g_next
    f_next = inv_denom * dot_w + dot_c + (inv_denom_b * b0 + cb if fit_intercept else b0)
    g_next = inv_denom * dot_x + ib
    for t in range(steps):
        k = j  # the sample two steps ahead (a dummy at the end: no draw)
        if t + 2 < steps:
            x ^= x >> _U12
            x ^= x << _U25
            x ^= x >> _U27
            r = float((x * _MULT) >> _U11) * _INV53 * fn
            k = min(np.uint64(r), nm1)
            if use_alias:
                k = (np.uint64(packed[k]) >> (np.uint64((r - float(k)) >= prob[k]) << _U5)) & _LOW32
        if use_alias:
            lm = lr_tot / smooth[i]
            lm = lm if pw[i] > 0.0 else 0.0
        else:
            lm = lr * mult[i]
        si = s[i]
        ld = lm * (si * loss_derivative(code, si * f + c[i], param) - gref[i])
        ild = inv_denom * ld
        dot_w = 0.0  # x_k . base
        dot_i = 0.0  # x_k . x_i
        dot_x = 0.0  # x_k . x_j
        dot_c = 0.0  # x_k . icst
        for a in range(d):
            base = inv_denom * w[a] + icst[a]
            xk = X[k, a]
            xi = X[i, a]
            dot_w += xk * base
            dot_i += xk * xi
            dot_x += xk * X[j, a]
            dot_c += xk * icst[a]
            w[a] = base - ild * xi
        if fit_intercept:
            b0 = inv_denom_b * b0 + cb - inv_denom_b * ld
        f = f_next - ld * g_next
        f_next = (inv_denom * (dot_w - ild * dot_i) + dot_c
                  + (inv_denom_b * b0 + cb if fit_intercept else b0))
        g_next = inv_denom * dot_x + ib
        i = j
        j = k
    b[0] = b0
    rng[0] = x


@njit(cache=True)
def _sorel_epochs(
    X, s, c, sigma, smooth, code, param, w, b, t, losses, losses_prev, lam, perm_z, perm_l,
    ipar, fpar, state, rng, hist, crits, etas, H, work_n, work_n2, u, gref, mult,
    prob, alias, small, large, idx, gbar, cst, anchor, y_work, M, A, dlam, sort_f32, sort_keys,
    sort_perm, sort_counts, z_sorted, pav_w, pav_wy, pav_end, rows,
):
    """Run SOREL epochs ``state[0] .. `` until ``ipar`` says stop; returns the epochs run.

    ``ipar``: epochs to run in this call, batch size, fit_intercept, importance
    sampling, automatic dual step, H refresh period, all ``s_i = 1``.
    ``fpar``: lr, l1, l2 (mu), tau_scale, tol, dual scale C, growth, face
    safety factor.
    ``state``: epoch counter, eta, cap, grad0, last objective, status
    (0 running, 1 converged, 2 diverged), unused, free samples of the last
    face, cap shrink count.
    Per epoch ``k`` the histories get ``hist[k + 1]`` (objective),
    ``crits[k]`` (criterion), ``etas[k]`` (dual step).

    Both sorts work on gathered copies (:func:`_sort_keyed`, scratch
    allocated once per call); the projection is fused with lam's update
    (:func:`_project_sorted`).  ``u``, ``pav_w`` and the ``sort_*`` arrays
    are not used any more (the driver still passes them).
    """
    n, d = X.shape
    n_ep, batch, fit_intercept, importance, auto_dual, h_period, unit_s = (
        ipar[0], ipar[1], ipar[2] != 0, ipar[3] != 0, ipar[4] != 0, ipar[5], ipar[6] != 0)
    lr, l1, mu, tau_scale, tol, C, growth, safety = (
        fpar[0], fpar[1], fpar[2], fpar[3], fpar[4], fpar[5], fpar[6], fpar[7])
    steps = (n + batch - 1) // batch
    inv_b = 1.0 / batch
    p = M.shape[0]
    pk, pk2, kbuf, pbuf, counts, rhist = _keyed_scratch(n)
    l_sorted = np.empty(n)  # the losses in sorted order (the objective)
    multi = np.empty(n, dtype=np.int64)  # the multi-sample PAV blocks: (start, end) pairs
    msum = np.empty(p)
    ran = 0
    # v = (1 + theta_k) l(w_k) - theta_k l(w_{k-1}) in work_n; later epochs of this
    # call get it from the loop over the losses of the previous epoch
    k = int(state[0])
    theta = k / (k + 1.0)
    vmax = 0.0
    for i in range(n):
        v = (1.0 + theta) * losses[i] - theta * losses_prev[i]
        work_n[i] = v
        vmax = max(vmax, abs(v))
    for _ in range(n_ep):
        k = int(state[0])
        theta = k / (k + 1.0)
        inv_tau = mu * (k + 1.0) / tau_scale
        # ---- dual step: eta_k, z = lam + eta v, projection onto the permutahedron
        if not auto_dual:
            eta = min(C * mu * (k + 1.0), state[2])  # the paper's schedule, capped
        elif k == 0:
            eta = C * mu
        else:
            # geometric growth, capped by the dual smoothness on the current face
            eta = min(growth * state[1], state[2])
        # beyond this the projection is a hard re-ranking anyway, and lam + eta v
        # would lose lam's digits to cancellation (vmax: the largest |v_i|)
        if vmax > 0.0:
            eta = min(eta, 1e4 * sigma[n - 1] / vmax)
        state[1] = eta
        etas[k] = eta
        # z = lam + eta v gathered in the previous order of z, then sorted
        descents, far = _gather_z(lam, work_n, eta, perm_z, z_sorted)
        _sort_keyed(z_sorted, perm_z, descents, far, pk, pk2, kbuf, pbuf, counts, rhist)
        # the projection and lam's update; dual_turn < 0: this dual move
        # reverses the previous one, the sign of an overshoot
        n_multi, dual_turn, lam_l = _project_sorted(z_sorted, sigma, perm_z, lam, dlam, losses,
                                                    pav_wy, pav_end, multi)
        # ---- dual optimality of the new weights at w_k: the gap
        # max_{lam' in Pi_sigma} lam'^T l(w_k) - lam^T l(w_k) = R_sigma(l(w_k)) - lam^T l(w_k) >= 0,
        # relative to F(w_k).  Unlike ||lam_{k+1} - lam_k||, it does not vanish
        # when the dual step is small: it is zero only when lam ranks l(w_k)
        risk_k = state[4]  # F(w_k) minus the penalty
        for a in range(d):
            risk_k -= l1 * abs(w[a]) + 0.5 * mu * w[a] * w[a]
        dual_gap = max(risk_k - lam_l, 0.0) / max(abs(state[4]), 1e-300)
        # ---- reference gradient at w_k with the new weights
        for a in range(d):
            gbar[a] = 0.0
        gbar_b = 0.0
        tot = 0.0
        for i in range(n):
            g = s[i] * loss_derivative(code, t[i], param)
            gref[i] = g
            li = lam[i]
            lg = li * g
            # no branch on lg == 0 (unpredictable, e.g. half the weights of a
            # superquantile): adding 0 * x leaves the sums unchanged
            for a in range(d):
                gbar[a] += lg * X[i, a]
            gbar_b += lg
            # the importance sampling weights lam_i L_i (used with importance only)
            pi = max(li, 0.0) * smooth[i]
            work_n2[i] = pi
            tot += pi
        gn = 0.0
        for a in range(d):
            gn += (gbar[a] + mu * w[a]) ** 2
        if fit_intercept:
            gn += gbar_b * gbar_b
        gn = np.sqrt(gn)
        if k == 0 or state[3] <= 0.0:
            state[3] = max(gn, 1e-300)
        # ---- sampling weights
        if importance:
            use_alias = tot > 0.0
            if use_alias and batch == 1 and l1 == 0.0:
                # packed table; _single_steps_l2 computes mult for the drawn samples
                _build_alias_packed(work_n2, tot, prob, alias, small, large)
            elif use_alias:
                _build_alias(work_n2, prob, alias, small, large)
                for i in range(n):
                    q = tot / smooth[i]  # computed unconditionally: a select, not a branch
                    mult[i] = q if work_n2[i] > 0.0 else 0.0
            else:
                for i in range(n):
                    mult[i] = n * lam[i]
        else:
            use_alias = False
            tot = 0.0
            for i in range(n):
                mult[i] = n * lam[i]
        # ---- primal step: variance-reduced proximal steps on P_k
        b_anchor = b[0]
        denom = 1.0 + lr * mu + lr * inv_tau
        inv_denom = 1.0 / denom
        thr = lr * l1
        for a in range(d):
            anchor[a] = w[a]
            cst[a] = -lr * gbar[a] + lr * inv_tau * w[a]
        cst_b = -lr * gbar_b + lr * inv_tau * b_anchor
        inv_denom_b = 1.0 / (1.0 + lr * inv_tau)
        if batch == 1 and l1 == 0.0:
            _single_steps_l2(X, s, c, code, param, w, b, gref, mult, prob, alias, rng, steps, use_alias,
                             fit_intercept, lr, cst, cst_b, inv_denom, inv_denom_b, y_work, smooth,
                             work_n2, tot if use_alias else 0.0)
        elif batch == 1:
            _single_steps(X, s, c, code, param, w, b, gref, mult, prob, alias, rng, steps, use_alias,
                          unit_s, fit_intercept, l1, lr, cst, cst_b, inv_denom, inv_denom_b)
        else:
            for step in range(steps):
                for m in range(batch):
                    idx[m] = _draw(rng, n, prob, alias, use_alias)
                for a in range(d):
                    y_work[a] = 0.0
                db = vr_batch_direction(
                    X, w, b[0], idx, 0, batch, s, c, code, param, gref, mult, inv_b, y_work, 0.0
                )
                for a in range(d):
                    z = w[a] + cst[a] - lr * y_work[a]
                    if l1 > 0.0:
                        if z > thr:
                            z -= thr
                        elif z < -thr:
                            z += thr
                        else:
                            z = 0.0
                    w[a] = z * inv_denom
                if fit_intercept:
                    b[0] = (b[0] + cst_b - lr * db) * inv_denom_b
        # ---- losses at w_{k+1}: the next dual step's input and the objective;
        # the next epoch's v (theta_{k+1}) and its largest |v_i| on the way
        k1 = k + 1
        theta_next = k1 / (k1 + 1.0)
        vmax = 0.0
        for i in range(n):
            lp = losses[i]
            losses_prev[i] = lp
            f = b[0]
            for a in range(d):
                f += X[i, a] * w[a]
            tt = s[i] * f + c[i]
            t[i] = tt
            li = loss_value(code, tt, param)
            losses[i] = li
            v = (1.0 + theta_next) * li - theta_next * lp
            work_n[i] = v
            vmax = max(vmax, abs(v))
        descents, far = _gather_sorted(losses, perm_l, l_sorted)
        _sort_keyed(l_sorted, perm_l, descents, far, pk, pk2, kbuf, pbuf, counts, rhist)
        obj = 0.0
        for j in range(n):
            obj += sigma[j] * l_sorted[j]
        pen = 0.0
        for a in range(d):
            pen += l1 * abs(w[a]) + 0.5 * mu * w[a] * w[a]
        obj += pen
        hist[k + 1] = obj
        state[0] = k + 1
        ran += 1
        if not np.isfinite(obj):
            crits[k] = np.inf
            state[5] = 2.0
            break
        rel = abs(state[4] - obj) / max(abs(obj), 1e-300)
        if auto_dual and obj > state[4] + 1e-13 * abs(obj):
            # safeguard: the objective went up, so the dual step overshot (the
            # weights jumped across a face); halve it instead of growing it
            state[1] = max(eta / 2.0, min(C * mu * (k + 2.0), state[2])) / growth
            # and lower the face cap when the step at the cap overshot: the dual
            # move reversed the previous one.  (A rise without a reversal is the
            # primal drifting under stale weights: shrinking then would freeze
            # the dual for good.)
            if eta >= 0.999 * state[2] and dual_turn < 0.0:
                state[8] += 1.0
                state[2] *= _CAP_SHRINK
        elif state[8] > 0.0:
            # the cap recovers slowly after epochs that went down
            state[8] = max(state[8] - _CAP_RECOVER, 0.0)
        state[4] = obj
        crit = max(rel, max(gn / state[3], dual_gap))
        crits[k] = crit
        if crit <= tol:
            state[5] = 1.0
            break
        # ---- cap of the next dual step: the dual smoothness on the current face
        if h_period > 0 and ((k & (k + 1)) == 0 or (k + 1) % h_period == 0):
            _primal_curvature(X, t, lam, code, param, fit_intercept, H, rows)
        lf, free = _face_smoothness(X, s, t, code, param, perm_z, multi, n_multi, H, mu,
                                    mu * (k + 2.0) / tau_scale, fit_intercept, rows, M, A, msum)
        state[7] = free
        state[2] = safety * _CAP_SHRINK ** state[8] / lf if lf > 0.0 else np.inf
    return ran


def _seed_state(rng):
    return np.array([int(rng.integers(1, 2**63 - 1))], dtype=np.uint64)


def sorel(
    X,
    y,
    risk,
    loss,
    penalty,
    *,
    fit_intercept=True,
    max_epochs=200,
    tol=1e-9,
    batch_size=1,
    learning_rate="auto",
    dual_scale="auto",
    tau_scale=20.0,
    dual_growth=2.0,
    dual_safety=0.5,
    random_state=None,
    coef_init=None,
    intercept_init=None,
    verbose=0,
    sampling="importance",
    polish=True,
):
    """Minimise ``sum_i sigma_i l_(i) + penalty`` for a spectral risk with SOREL.

    Parameters
    ----------
    X : {ndarray, sparse matrix} of shape (n, d)
        Design; sparse input is densified.
    y : ndarray of shape (n,)
        Labels in {-1, +1} (classification losses) or targets (regression).
    risk : skrank.risks.BaseRisk
        A spectral risk (nondecreasing weights).
    loss : skrank.losses.Loss
        A smooth loss (SOREL's theory needs Lipschitz gradients).
    penalty : skrank.penalties.Penalty
        Must have ``l2 > 0`` (the strong convexity ``mu``); an l1 part is
        handled by its prox.
    fit_intercept : bool, default=True
        Fit an unpenalised intercept.
    max_epochs : int, default=200
        Outer iterations (one dual update and about one pass each).
    tol : float, default=1e-9
        Stop when the stopping criterion (see Notes) falls below ``tol``.
    batch_size : int, default=1
        Samples per stochastic step; ``ceil(n / batch_size)`` steps per epoch.
    learning_rate : "auto" or float, default="auto"
        Primal step; "auto" is :func:`skrank.solvers._stepsize.svrg_step_size`.
    dual_scale : "auto" or float, default="auto"
        ``C`` of the dual step.  "auto": ``C`` from :func:`sorel_dual_scale`
        sets the first step ``eta_0 = C mu``, which then grows by
        ``dual_growth`` per epoch up to the face cap (see Notes).  A float
        gives the paper's schedule ``eta_k = C mu (k + 1)``, also capped.
    tau_scale : float, default=20.0
        Primal proximal parameter ``tau_k = tau_scale / (mu (k + 1))``
        (the paper's ``20 n / (k + 1)`` for ``mu = 1/n``).
    dual_growth : float, default=2.0
        Growth factor of the automatic dual step per epoch.
    dual_safety : float, default=0.5
        The dual step is at most ``dual_safety / L_F`` (see Notes).
    random_state : int, RandomState or None
        Seed of the sampled indices.
    coef_init, intercept_init : ndarray, float or None
        Starting point (zeros by default).
    verbose : int
        Print one line per epoch when positive.
    sampling : {"importance", "uniform"}, default="importance"
        How the inner loop draws samples: with probability proportional to
        ``lam_i L_i`` (the dual weight times the sample's smoothness, the
        unbiased importance-sampled SVRG estimator ``(lam_i / p_i)``) or
        uniformly as in the paper.  Importance sampling allows a step up to
        ``n sigma_n max L_i / Lbar`` times larger (see
        :func:`skrank.solvers._stepsize.svrg_step_size`; the automatic step
        is 1.75 times that rule's) and never touches samples of zero weight.
    polish : bool, default=True
        Try the exact face solve of :meth:`skrank.solvers._polish.Polisher.from_dual`
        (convex risks, squared / Huber / logistic loss, at most
        ``Polisher.max_features`` coefficients; see Notes).

    Returns
    -------
    SolverResult
        ``info`` holds ``lambda`` (final dual weights), ``times`` (cumulative
        seconds after each epoch: kernel calls of several epochs are timed
        and their time split evenly over their epochs), ``passes``
        (cumulative sample evaluations / n, spec 003 section 2.6),
        ``learning_rate``, ``dual_scale``, ``dual_steps`` (``eta_k``) and
        ``criterion_history``.

    Notes
    -----
    Epoch ``k`` (spec 003 section 2.3, with ``mu`` the l2 strength)::

        v       = (1 + theta_k) l(w_k) - theta_k l(w_{k-1}),  theta_k = k / (k + 1)
        lam     = Proj_{Pi_sigma}(lam + eta_k v)
        w_{k+1} = SVRG on sum_i lam_i l_i(w) + penalty(w) + ||w - w_k||^2 / (2 tau_k)

    Automatic parameters (the paper tuned ``lr`` and ``C`` over grids):

    * the primal step ``lr`` is :func:`skrank.solvers._stepsize.svrg_step_size`, from the
      per-sample smoothness ``L_i = L_loss (||x_i||^2 + 1)`` and sigma;
    * the primal step is multiplied by 1.75 with importance sampling;
    * the dual step is ``eta_k = min(dual_growth * eta_{k-1}, dual_safety / L_F)``,
      ``eta_0 = C mu``.  ``L_F`` is the smoothness of the dual function
      ``phi(lam) = min_w L(w, lam) + ||w - w_k||^2 / (2 tau)`` restricted to the
      face of the permutahedron where the last projection landed: the
      samples of the multi-sample PAV blocks (those whose weights are free,
      e.g. the samples tied at the quantile of a superquantile), centred
      within their block, through the inverse primal Hessian.  Samples whose
      weights sit at a vertex value do not limit the step, so the cap is
      far larger than the global ``1 / ||J H^-1 J^T||`` (which grows like
      ``n``) and the dual converges in a number of epochs that does not grow
      with ``n``.  Growing geometrically from a small ``eta_0`` keeps the
      early epochs stable (spec 003 section 6, pitfall 6).

    When the objective goes up, the next dual step is halved; when it went
    up at the cap and the dual move reversed the previous one (an
    overshoot), the cap itself shrinks by 0.8, and recovers by ``0.8^-0.1``
    per epoch whose objective went down.

    The stopping criterion is the largest of (a) the relative change of the
    objective over the epoch, (b) the norm of the Lagrangian's gradient
    ``X^T (lam * s l'(t)) + mu w`` at ``(w_k, lam_{k+1})``, relative to its
    value at the start, and (c) the dual gap
    ``(R_sigma(l(w_k)) - lam_{k+1}^T l(w_k)) / F(w_k)`` (the maximum of
    ``lam^T l(w_k)`` over the permutahedron is ``R_sigma(l(w_k))``).  (b) and
    (c) vanish together only at a saddle point; unlike the dual residual
    ``||lam_{k+1} - lam_k||``, (c) does not vanish when the dual step is
    small.  Without intercept and l1, ``F(w_k) - F* <= F(w_k) (c) +
    ||grad||^2 / (2 mu)``.

    Polishing (skrank's addition, not in the paper).  SOREL converges
    linearly but slowly when many samples are tied at a jump of ``sigma``
    (a superquantile or top-k with few samples in the tail): the dual must
    then find the tied samples' fractional weights.  From SOREL's iterate
    a primal active-set walk over groups of tied samples
    (:func:`skrank.solvers._tie_walk.tie_walk`) finds the face of the
    optimum, on which ``F`` is smooth; the result is kept only with a KKT
    certificate.  For
    risks whose ``sigma`` is flat next to a jump (superquantile, top-k) it
    is tried after 16 epochs and at every doubling of the epoch count; for
    every risk at the end.  All attempts together may spend half of the
    passes SOREL has made: an attempt gets what is left (at least ``p``
    passes, else it waits) and gives up when it is spent.  A certified point
    that does not raise ``F`` ends the run (``converged``).  Its cost is
    counted in ``passes``:
    its multiply-adds divided by the ``2 n p`` of one pass (``n`` sample
    gradients, as one ``X @ w`` plus ``X.T @ r``).
    """
    rng = make_rng(random_state)
    X, s, c, sqnorms = prepare_data(X, y, loss, fit_intercept)
    n, d = X.shape
    mu = float(penalty.l2)
    sigma = np.ascontiguousarray(risk.weights(n), dtype=np.float64)
    batch_size = int(min(max(batch_size, 1), n))
    steps = -(-n // batch_size)
    lr = check_learning_rate(learning_rate)
    smooth = np.ascontiguousarray(sample_smoothness(loss, sqnorms))
    if lr is None:
        lr = svrg_step_size(smooth, sigma, batch_size, sampling)
        if sampling == "importance":
            lr *= _LR_IMPORTANCE_FACTOR
    if sampling not in ("importance", "uniform"):
        raise ValueError(f"sampling must be 'importance' or 'uniform', got {sampling!r}.")

    w = np.zeros(d) if coef_init is None else np.array(coef_init, dtype=np.float64).ravel().copy()
    b = np.array([0.0 if (intercept_init is None or not fit_intercept) else float(intercept_init)])
    t = loss_arguments_dense(X, s, c, w, b[0], np.empty(n))
    losses = loss.value(t)
    losses_prev = losses.copy()
    lam = rank_weights(risk, losses)
    auto_dual = isinstance(dual_scale, str)
    C = sorel_dual_scale(losses, sigma) if auto_dual else float(dual_scale)
    obj0 = risk.value(losses) + penalty.value(w)

    p = d + int(bool(fit_intercept))
    perm_l = np.argsort(losses, kind="stable")
    perm_z = perm_l.copy()
    ipar = np.array([1, batch_size, int(bool(fit_intercept)), int(sampling == "importance"),
                     int(auto_dual), _H_PERIOD, int(bool(np.all(s == 1.0)))], dtype=np.int64)
    fpar = np.array([lr, float(penalty.l1), mu, float(tau_scale), float(tol), C,
                     float(dual_growth), float(dual_safety)])
    state = np.array([0.0, C * mu, np.inf, 0.0, obj0, 0.0, np.inf, -1.0, 0.0])
    rng_state = _seed_state(rng)
    hist = np.full(max_epochs + 1, np.nan)
    hist[0] = obj0
    crits = np.full(max_epochs, np.nan)
    etas = np.full(max_epochs, np.nan)
    scratch = dict(
        H=np.zeros((p, p)), work_n=np.empty(n), work_n2=np.empty(n), u=np.empty(n),
        gref=np.empty(n), mult=np.empty(n), prob=np.empty(n), alias=np.empty(n, dtype=np.int64),
        small=np.empty(n, dtype=np.int64), large=np.empty(n, dtype=np.int64),
        idx=np.empty(batch_size, dtype=np.int64), gbar=np.empty(d), cst=np.empty(d),
        anchor=np.empty(d), y_work=np.empty(p), M=np.empty((p, p)), A=np.empty((p, p)),
        dlam=np.zeros(n),
    )
    scratch.update(zip(("sort_f32", "sort_keys", "sort_perm", "sort_counts"), _sort_scratch(n)))
    scratch.update(z_sorted=np.empty(n), pav_w=np.empty(n), pav_wy=np.empty(n),
                   pav_end=np.empty(n, dtype=np.int64), rows=np.empty((n, p)))
    times = np.zeros(max_epochs + 1)
    polisher = None
    if polish and p <= Polisher.max_features and Polisher.applies(risk, loss, "srm"):
        polisher = Polisher(X, s, c, sigma, loss, penalty, fit_intercept)
    polished, next_polish = False, _POLISH_FIRST
    per_epoch_passes = 1.0 + steps * batch_size / n  # one full pass + one per sample drawn
    # Ties hold at the optimum where sigma is flat next to a jump (CVaR, top-k):
    # there the dual is slow and the face solve pays off before the end.
    steps_sigma = np.diff(sigma)
    early_polish = bool(np.any(steps_sigma <= 1e-12 * sigma[-1]) and np.any(steps_sigma > 0))
    elapsed = 0.0
    done = 0
    chunk = 1
    while done < max_epochs and state[5] == 0.0:
        ipar[0] = min(chunk, max_epochs - done)
        if polisher is not None and early_polish and next_polish > done:
            ipar[0] = min(ipar[0], next_polish - done)  # stop at the next attempt
        start = time.perf_counter()
        ran = _sorel_epochs(
            X, s, c, sigma, smooth, loss.code, loss.param, w, b, t, losses, losses_prev, lam,
            perm_z, perm_l, ipar, fpar, state, rng_state, hist, crits, etas, **scratch,
        )
        seconds = time.perf_counter() - start
        times[done + 1: done + ran + 1] = elapsed + seconds * np.arange(1, ran + 1) / ran
        elapsed += seconds
        if verbose:
            for k in range(done, done + ran):
                print(f"SOREL epoch {k + 1}: objective {hist[k + 1]:.10g}, "
                      f"criterion {crits[k]:.3g}, dual step {etas[k]:.3g}")
        done += ran
        # aim at ~2 ms per call: Python's overhead stays negligible, times stay fine-grained
        per_epoch = seconds / max(ran, 1)
        chunk = int(min(max(1, _CHUNK_SECONDS / max(per_epoch, 1e-9)), 2 * chunk, 1024))
        if verbose:
            chunk = 1
        if polisher is None or state[5] != 0.0:
            continue
        # attempts: at the end, and after 16 epochs and every doubling (see Notes)
        # its work stays below half of SOREL's own: an attempt may spend what is
        # left of that budget, and starts only when it is at least _POLISH_COST p passes
        budget = 0.5 * per_epoch_passes * done - polisher.work / (2 * n * p)
        affordable = budget >= _POLISH_COST * p
        if affordable and (done >= max_epochs or (early_polish and done >= next_polish)):
            next_polish = max(int(np.ceil(_POLISH_GROWTH * done)), done + 1, _POLISH_FIRST)
            start = time.perf_counter()
            kept, polished = _try_polish(polisher, X, s, c, w, b, lam, hist[done], done >= max_epochs,
                                         max_work=budget * 2 * n * p)
            elapsed += time.perf_counter() - start
            times[done] = elapsed
            if kept:
                hist[done] = polisher.objective(w, b[0])
            if polished:
                state[5] = 1.0
                crits[done - 1] = 0.0
    k = done
    passes = per_epoch_passes * np.arange(k + 1, dtype=np.float64)
    if polisher is not None and k > 0:
        passes[k] += polisher.work / (2 * n * p)  # one pass: n sample gradients, 2 n p multiply-adds
    crit = float(crits[k - 1]) if k > 0 else np.inf
    return SolverResult(
        coef=w,
        intercept=float(b[0]) if fit_intercept else 0.0,
        n_iter=k,
        objective_history=hist[: k + 1].copy(),
        stop_criterion=crit,
        converged=bool(state[5] == 1.0),
        info={
            "lambda": lam,
            "times": times[: k + 1].copy(),
            "passes": passes,
            "polished": polished,
            "learning_rate": lr,
            "dual_scale": C,
            "dual_steps": etas[:k].copy(),
            "criterion_history": crits[:k].copy(),
        },
    )


def _try_polish(polisher, X, s, c, w, b, lam, objective, last, max_work=None):
    """Run ``polisher.from_dual`` at ``(w, b, lam)``; on success overwrite ``w``, ``b``.

    A certified point is kept when it does not raise ``F``; at the last
    epoch (``last``) an uncertified one is kept when it lowers ``F``.
    ``max_work`` caps the attempt's multiply-adds.  Returns ``(kept, certified)``.
    """
    t = s * (np.asarray(X @ w).ravel() + b[0]) + c
    out = polisher.from_dual(t, lam, w, b[0], _POLISH_TOL, max_work=max_work)
    if out is None:
        return False, False
    w_p, b_p, certified = out[0], out[1], bool(out[2])
    F = polisher.objective(w_p, b_p)
    slack = 1e-12 * max(1.0, abs(objective))
    if (certified and F <= objective + slack) or (last and F < objective):
        w[:] = w_p
        b[0] = b_p
        return True, certified
    return False, False


# ---------------------------------------------------------------------------------
# The paper's practical SOREL, verbatim (spec 003 section 2.3): a reference
# implementation for the benchmark's ``--paper-grid`` mode and for tests.
# ---------------------------------------------------------------------------------
@njit(cache=True)
def _sorel_paper_epochs(X, s, c, sigma, code, param, w, b, t, losses, losses_prev, lam, perm,
                        ipar, fpar, rng, hist, work_n, work_n2, u, gref, gbar, anchor, idx, grad):
    """Epochs ``k0 .. k0 + n_ep - 1`` of spec 003 section 2.3; returns the epochs run.

    ``ipar`` = (k0, n_ep, batch, fit_intercept); ``fpar`` = (lr, C, mu,
    tau_scale, divergence threshold).  Uniform sampling with replacement,
    ``eta_k = C mu (k + 1)`` (``C (k + 1) / n`` for ``mu = 1/n``), ``tau_k =
    tau_scale / (mu (k + 1))``, ``theta_k = k / (k + 1)``, the primal step
    in gradient form (no prox), the last iterate.  Stops (returns early)
    when the objective is not finite or exceeds the threshold.
    """
    n, d = X.shape
    k0, n_ep, batch, fit_intercept = ipar[0], ipar[1], ipar[2], ipar[3] != 0
    lr, C, mu, tau_scale, blowup = fpar[0], fpar[1], fpar[2], fpar[3], fpar[4]
    steps = (n + batch - 1) // batch
    scale = n / batch
    f32, keys2, perm2, counts = _sort_scratch(n)
    ran = 0
    for k in range(k0, k0 + n_ep):
        theta = k / (k + 1.0)
        eta = C * mu * (k + 1.0)
        inv_tau = mu * (k + 1.0) / tau_scale
        # line 3-4: lam = Proj(lam + eta v)
        for i in range(n):
            work_n[i] = lam[i] + eta * ((1.0 + theta) * losses[i] - theta * losses_prev[i])
        _resort(work_n, perm, f32, keys2, perm2, counts)
        for j in range(n):
            work_n2[j] = work_n[perm[j]] - sigma[j]
        _isotonic_kernel(work_n2, np.empty(0), u)
        for j in range(n):
            lam[perm[j]] = work_n[perm[j]] - u[j]
        # line 6: reference gradient at w_k (no regulariser)
        for a in range(d):
            gbar[a] = 0.0
            anchor[a] = w[a]
        gbar_b = 0.0
        b_anchor = b[0]
        for i in range(n):
            g = s[i] * loss_derivative(code, t[i], param)
            gref[i] = g
            lg = lam[i] * g
            for a in range(d):
                gbar[a] += lg * X[i, a]
            gbar_b += lg
        # lines 7-15: n / batch SVRG steps, gradient form
        for step in range(steps):
            for m in range(batch):
                i = int(_uniform(rng) * n)
                if i >= n:
                    i = n - 1
                idx[m] = i
            for a in range(d):
                grad[a] = gbar[a] + inv_tau * (w[a] - anchor[a]) + mu * w[a]
            gb = gbar_b + inv_tau * (b[0] - b_anchor)
            for m in range(batch):
                i = idx[m]
                f = b[0]
                for a in range(d):
                    f += X[i, a] * w[a]
                delta = scale * lam[i] * (s[i] * loss_derivative(code, s[i] * f + c[i], param) - gref[i])
                for a in range(d):
                    grad[a] += delta * X[i, a]
                gb += delta
            for a in range(d):
                w[a] -= lr * grad[a]
            if fit_intercept:
                b[0] -= lr * gb
        # losses at w_{k+1}
        for i in range(n):
            losses_prev[i] = losses[i]
            f = b[0]
            for a in range(d):
                f += X[i, a] * w[a]
            t[i] = s[i] * f + c[i]
            losses[i] = loss_value(code, t[i], param)
            work_n[i] = losses[i]
        work_n.sort()
        obj = 0.0
        for j in range(n):
            obj += sigma[j] * work_n[j]
        for a in range(d):
            obj += 0.5 * mu * w[a] * w[a]
        hist[k + 1] = obj
        ran += 1
        if not np.isfinite(obj) or obj > blowup:
            break
    return ran


def sorel_paper(X, y, risk, loss, penalty, *, learning_rate, dual_scale, max_epochs=50,
                batch_size=1, tau_scale=20.0, fit_intercept=False, random_state=None,
                divergence=1.5):
    """The paper's practical SOREL with given ``lr`` and ``C`` (spec 003 section 2.3).

    No automatic rule: uniform sampling, ``eta_k = C mu (k + 1)`` (the paper's
    ``C (k + 1) / n`` with ``mu = 1/n``), ``tau_k = tau_scale / (mu (k + 1))``,
    ``theta_k = k / (k + 1)``, the primal step in gradient form, the last
    iterate; mini-batches as in spec 003 section 2.5.  A run whose objective
    exceeds ``divergence`` times the initial one stops and is reported as
    diverged (``info["diverged"]``, its later history ``inf``), as in the
    grid searches of spec 003 section 5.3.  Used as the reference by the
    benchmark's ``--paper-grid`` mode; :func:`sorel` is the solver.
    """
    rng = make_rng(random_state)
    X, s, c, _ = prepare_data(X, y, loss, fit_intercept)
    n, d = X.shape
    mu = float(penalty.l2)
    if penalty.l1 != 0.0:
        raise ValueError("sorel_paper handles the l2 penalty only.")
    sigma = np.ascontiguousarray(risk.weights(n), dtype=np.float64)
    batch = int(min(max(batch_size, 1), n))
    w = np.zeros(d)
    b = np.zeros(1)
    t = loss_arguments_dense(X, s, c, w, 0.0, np.empty(n))
    losses = loss.value(t)
    losses_prev = losses.copy()
    lam = rank_weights(risk, losses)
    obj0 = risk.value(losses)
    hist = np.full(max_epochs + 1, np.inf)
    hist[0] = obj0
    perm = np.argsort(losses, kind="stable")
    fpar = np.array([float(learning_rate), float(dual_scale), mu, float(tau_scale), divergence * obj0])
    rng_state = _seed_state(rng)
    scratch = (np.empty(n), np.empty(n), np.empty(n), np.empty(n), np.empty(d), np.empty(d),
               np.empty(batch, dtype=np.int64), np.empty(d))
    times = np.full(max_epochs + 1, np.nan)
    times[0] = 0.0
    done = 0
    elapsed = 0.0
    while done < max_epochs:
        ran_now = min(max_epochs - done, max(1, 200000 // (n * 2)))
        ipar = np.array([done, ran_now, batch, int(bool(fit_intercept))], dtype=np.int64)
        start = time.perf_counter()
        ran = _sorel_paper_epochs(X, s, c, sigma, loss.code, loss.param, w, b, t, losses, losses_prev,
                                  lam, perm, ipar, fpar, rng_state, hist, *scratch)
        seconds = time.perf_counter() - start
        times[done + 1: done + ran + 1] = elapsed + seconds * np.arange(1, ran + 1) / ran
        elapsed += seconds
        done += ran
        if ran < ran_now:
            break
    diverged = not (np.isfinite(hist[done]) and hist[done] <= divergence * obj0)
    if diverged:
        hist[done:] = np.inf
    steps = -(-n // batch)
    per_epoch_passes = 1.0 + steps * batch / n
    return SolverResult(
        coef=w, intercept=float(b[0]) if fit_intercept else 0.0, n_iter=done,
        objective_history=hist[: done + 1].copy(), stop_criterion=np.nan, converged=False,
        info={"lambda": lam, "times": times[: done + 1].copy(),
              "passes": per_epoch_passes * np.arange(done + 1, dtype=np.float64),
              "learning_rate": float(learning_rate), "dual_scale": float(dual_scale),
              "diverged": diverged},
    )
