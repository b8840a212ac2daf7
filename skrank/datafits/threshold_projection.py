"""The superquantile's smoothed rank step by its threshold form, on NumPy or Dask keys.

For the superquantile at level ``q`` without sample weights the rank
weights, sorted descending, are ``(c, ..., c, a, 0, ..., 0)`` with
``c = 1 / ((1 - q) n)``, ``K = floor((1 - q) n)`` entries ``c`` and
``a = 1 - K c`` in ``[0, c)`` (``a = 0`` when ``(1 - q) n`` is an
integer: two levels).  The partial sums of the ``j`` largest are
``min(j c, 1)``, so the majorisation inequalities that define the
permutahedron ``P(sigma)`` reduce to ``q_i <= c`` (``j = 1``) and
``q_i >= 0`` (``j = n - 1``): with or without the fractional ``a``,
``P(sigma)`` is the capped simplex ``{0 <= q_i <= c, sum q = 1}``.  Its
Euclidean projection of ``keys / mu`` is, by the KKT conditions,

    ``q_i = clip((keys_i - tau) / mu, 0, c)``,

with the one ``tau`` where ``f(tau) = sum_i q_i(tau)`` equals the total
(Wang and Lu 2015, "Projection onto the capped simplex"; Kiwiel 2008,
"Breakpoint searching algorithms for the continuous quadratic knapsack
problem").  This is the projection that
:func:`skrank.datafits.smoothed_risk.pooled_projection` computes by PAVA;
its free set ``{0 < q < c}`` is PAVA's pooled block (with, when ``a > 0``,
possibly the singleton at the fractional position, whose ``q = a`` is free).

``f`` is nonincreasing and piecewise linear with breakpoints ``keys_i``
(below it ``q_i > 0``) and ``keys_i - mu c`` (below it ``q_i = c``).
:func:`capped_threshold` finds the two breakpoints around the root and
solves the linear equation between them; :func:`capped_threshold_dask`
narrows a bracket by counting reductions over the chunks, each of which
evaluates ``f`` at many candidates at once, and gathers only the distinct
breakpoints left in the bracket.  ``tau`` is returned as ``ref + offset``
with ``ref`` a free key and ``offset`` about ``-mu q_ref``, so
that ``(keys - ref) - offset`` keeps the accuracy of ``q`` when ``mu`` is
far below the keys' magnitude (the ``keys - ref`` of the free keys are
exact differences of nearby doubles).
"""

from fractions import Fraction
from typing import NamedTuple

import numpy as np


class Threshold(NamedTuple):
    """``tau = ref + offset`` of :func:`capped_threshold`, and the cost of finding it.

    Parameters
    ----------
    ref : float
        A free key (else a breakpoint of ``f`` next to the root; ``-inf``
        when every ``q`` is at the cap).
    offset : float
        ``tau - ref``.
    rounds : int
        The number of ``compute`` calls (0 for NumPy keys).
    gathered : int
        The number of distinct key values brought to the driver in the last
        round (all of them for NumPy keys).
    """

    ref: float
    offset: float
    rounds: int = 0
    gathered: int = 0

    @property
    def value(self):
        """``ref + offset`` rounded to one double."""
        return self.ref + self.offset


def _remaining(total, cap, n_cap):
    """``total - cap * n_cap`` rounded once (the mass the free keys must carry)."""
    return float(Fraction(total) - Fraction(cap) * int(n_cap))


def _check(n, mu, cap, total):
    if not (mu > 0.0 and np.isfinite(mu)):
        raise ValueError(f"mu must be positive and finite, got {mu}")
    if not (cap > 0.0 and total > 0.0):
        raise ValueError(f"cap and total must be positive, got {cap} and {total}")
    # the capped simplex is empty when n caps are less than the total
    if Fraction(total) > Fraction(cap) * n * (1 + Fraction(1, 2**40)):
        raise ValueError(f"total {total} exceeds n * cap = {n} * {cap}: the capped simplex is empty")


def _all_capped(n, cap, total):
    """Whether the total is ``n`` caps (within rounding): every ``q_i = cap``, ``tau = -inf``."""
    return _remaining(total, cap, n) >= -1e-12 * total


def _solve_gathered(v, w, n_cap0, n_fixed, s_fixed, lo, hi, mu, cap, total):
    """The root of ``f`` in ``[lo, hi]`` from the distinct keys ``v`` whose status changes there.

    ``f(lo) >= total >= f(hi)`` is assumed.  The other keys enter as
    counts: ``n_cap0`` are capped on the whole bracket, ``n_fixed`` free
    on it with ``sum (keys - lo) = s_fixed``; the rest are 0.

    Parameters
    ----------
    v : ndarray of shape (g,)
        Distinct keys, ascending.
    w : ndarray of shape (g,)
        Their multiplicities.
    n_cap0, n_fixed : int
        Counts of the keys capped, free on the whole bracket.
    s_fixed : float
        ``sum (keys - lo)`` over the keys free on the whole bracket.
    lo, hi : float
        The bracket.
    mu, cap, total : float
        As in :func:`capped_threshold`.

    Returns
    -------
    ref, offset : float
        ``tau = ref + offset``.
    """
    h = mu * cap
    tail = np.concatenate((np.cumsum(w[::-1])[::-1], [0]))  # tail[i]: the keys v[i:]
    cand = np.concatenate(([lo, hi], v, v - h))
    cand = np.unique(cand[(cand >= lo) & (cand <= hi)])

    def sets(a):
        # free: a <= key < a + h, capped: key >= a + h (either side at a tie gives the same q)
        i0, i1 = np.searchsorted(v, [a, a + h], side="left")
        return i0, i1, n_cap0 + int(tail[i1])

    def at_least(a):
        """Whether ``f(a) >= total``."""
        i0, i1, n_cap = sets(a)
        free = float(w[i0:i1] @ (v[i0:i1] - a)) + s_fixed + n_fixed * (lo - a)
        return free / mu >= _remaining(total, cap, n_cap)

    i, j = 0, cand.size - 1
    while j - i > 1:
        mid = (i + j) // 2
        if at_least(cand[mid]):
            i = mid
        else:
            j = mid
    t0, t1 = float(cand[i]), float(cand[j])
    # no breakpoint strictly between t0 and t1: the sets of the open interval, read at its middle
    i0, i1, n_cap = sets(t0 + 0.5 * (t1 - t0))
    n_free = int(tail[i0] - tail[i1]) + n_fixed
    if n_free == 0:  # f is flat here: every q is 0 or cap, any tau between does
        return t0, 0.5 * (t1 - t0)
    # tau - ref is about -mu q_ref for a free key ref: rounded relative to q, not to the cap
    ref = float(v[(i0 + i1) // 2]) if i1 > i0 else t0
    s_rel = float(w[i0:i1] @ (v[i0:i1] - ref)) + s_fixed + n_fixed * (lo - ref)
    # not clipped to [0, t1 - t0]: the breakpoints keys - mu cap are rounded to doubles, the offset
    # is not, and may fall an ulp of the keys outside (a tie of k keys whose k caps exceed the total)
    return ref, (s_rel - mu * _remaining(total, cap, n_cap)) / n_free


def capped_threshold(keys, mu, cap, total):
    """The ``tau`` of the projection of ``keys / mu`` onto ``{0 <= q <= cap, sum q = total}``.

    ``q_i = clip((keys_i - tau) / mu, 0, cap)`` sums to ``total``.  The
    breakpoints around the root are found by a binary search over the
    sorted distinct keys (``O(n log n)``, one sort), then ``tau`` solves the
    linear equation between them: exact up to rounding, no tolerance.

    Parameters
    ----------
    keys : array-like of shape (n,)
        The point times ``mu`` (``mu * center + losses`` in the Newton
        solver).
    mu : float
        The smoothing, ``mu > 0``.
    cap : float
        The upper bound ``c`` of every ``q_i``: ``1 / ((1 - q) n)`` for the
        superquantile at ``q``.
    total : float
        ``sum q``: 1 for a spectral risk, ``0 < total <= n cap``.

    Returns
    -------
    Threshold
        ``tau = ref + offset`` (``ref = -inf`` when ``total = n cap``: every
        ``q_i = cap``).
    """
    u = np.asarray(keys, dtype=np.float64).ravel()
    n = u.size
    _check(n, mu, cap, total)
    v, w = np.unique(u, return_counts=True)
    if _all_capped(n, cap, total):
        return Threshold(-np.inf, 0.0, 0, v.size)
    lo = np.nextafter(v[0] - mu * cap, -np.inf)
    ref, offset = _solve_gathered(v, w, 0, 0, 0.0, lo, float(v[-1]), mu, cap, total)
    return Threshold(ref, offset, 0, v.size)


def _bin_stats(u, edges):
    """Per bin ``[edges[i-1], edges[i])`` of one chunk: the count and ``sum (u - edges[i-1])``."""
    u = np.asarray(u, dtype=np.float64).ravel()
    idx = np.searchsorted(edges, u, side="right")
    left = edges[np.maximum(idx - 1, 0)]
    m = edges.size + 1
    return np.stack((np.bincount(idx, minlength=m).astype(np.float64),
                     np.bincount(idx, weights=u - left, minlength=m)))


def _bracket_stats(u, lo, hi, h):
    """One chunk's share of the last round: distinct keys whose status changes in ``[lo, hi]``, and counts.

    Returns ``(values, counts, n_capped, n_fixed_free, sum (keys - lo) of the fixed free)``.
    """
    u = np.asarray(u, dtype=np.float64).ravel()
    b_lo, b_hi = lo + h, hi + h
    moving = ((u >= lo) & (u <= hi)) | ((u >= b_lo) & (u <= b_hi))
    v, w = np.unique(u[moving], return_counts=True)
    fixed = (u > hi) & (u < b_lo) & ~moving
    return v, w, int(np.count_nonzero(u > b_hi)), int(np.count_nonzero(fixed)), float(np.sum(u[fixed] - lo))


def _sketch(u, size):
    """One chunk's sketch: about ``size`` of its keys (its extremes among them), ascending, and their buckets.

    ``counts[j]``: the keys in ``[v[j], v[j + 1])`` (the last: those equal
    to the largest), counted exactly (one ``searchsorted`` per key);
    ``equal[j]``: those equal to ``v[j]``.
    """
    u = np.asarray(u, dtype=np.float64).ravel()
    if u.size == 0:
        return np.empty(0), np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64)
    step = max(1, -(-u.size // max(size, 1)))  # at most size keys, and the two extremes
    v = np.unique(np.concatenate((u[::step], [u.min(), u.max()])))
    bucket = np.searchsorted(v, u, side="right") - 1
    return v, np.bincount(bucket, minlength=v.size), np.bincount(bucket[u == v[bucket]], minlength=v.size)


def _distinct(u):
    """One chunk's distinct keys and their counts."""
    return np.unique(np.asarray(u, dtype=np.float64).ravel(), return_counts=True)


def _sketch_weights(sketches):
    """The sketches' keys, and each key's multiplicity in a lower and in an upper bound of ``f``.

    A bucket's keys lie between its first key and the next bucket's: counted
    at the former, ``f`` (nondecreasing in each key) is bounded below; at
    the latter, above.
    """
    values, below, above = [], [], []
    for v, counts, _ in sketches:
        if v.size == 0:
            continue
        up = np.concatenate(([0], counts[:-1]))
        up[-1] += counts[-1]
        values.append(v)
        below.append(counts.astype(np.float64))
        above.append(up.astype(np.float64))
    return np.concatenate(values), np.concatenate(below), np.concatenate(above)


def _f(t, v, weight, mu, cap):
    """``sum weight clip((v - t) / mu, 0, cap)``."""
    return float(weight @ np.clip((v - t) / mu, 0.0, cap))


def _last_at_least(v, weight, lo, hi, mu, cap, level):
    """The largest ``t`` in ``[lo, hi]`` (about) with ``_f(t) >= level``, and the next one tried above it."""
    for _ in range(200):
        mid = lo + 0.5 * (hi - lo)
        if not lo < mid < hi:
            break
        if _f(mid, v, weight, mu, cap) >= level:
            lo = mid
        else:
            hi = mid
    return lo, hi


def _window(sketches, mu, cap, total, low, high):
    """A bracket ``[a, b]`` of the root from the chunks' sketches, and a bound on the breakpoints inside.

    ``a``: where the lower bound of ``f`` still reaches the total (with a
    relative margin for its rounding), so ``f(a) >= total``; ``b``: where
    the upper bound falls below it, so ``f(b) < total``.
    """
    h = mu * cap
    v, below, above = _sketch_weights(sketches)
    a = _last_at_least(v, below, low, high, mu, cap, total * (1.0 + 1e-9))[0]
    b = _last_at_least(v, above, low, high, mu, cap, total * (1.0 - 1e-9))[1]
    # the distinct keys in [a, b] or [a + h, b + h]: at most those of the buckets that meet them (a
    # bucket's keys equal to its first one count once)
    inside = 0
    for u, counts, equal in sketches:
        if u.size == 0:
            continue
        distinct = np.minimum(counts, counts - equal + 1)
        for x, y in ((a, b), (a + h, b + h)):
            i, j = np.searchsorted(u, [x, y], side="right") - 1
            inside += int(distinct[max(i, 0):max(j, -1) + 1].sum())
    return a, b, inside


def _gathered(parts):
    """The distinct keys and counts of the chunks' bracket statistics, merged, and the other counts."""
    v, inverse = np.unique(np.concatenate([p[0] for p in parts]), return_inverse=True)
    w = np.bincount(inverse, weights=np.concatenate([p[1] for p in parts]).astype(np.float64),
                    minlength=v.size)
    rest = [sum(p[k] for p in parts) for k in (2, 3)] + [float(sum(p[4] for p in parts))]
    return v, w, rest


def _brackets_root(v, w, n_cap0, n_fixed, s_fixed, lo, hi, mu, cap, total):
    """Whether ``f(lo) >= total > f(hi)``, from the keys gathered for the bracket ``[lo, hi]``."""
    h = mu * cap
    tail = np.concatenate((np.cumsum(w[::-1])[::-1], [0]))

    def at_least(a):
        i0, i1 = np.searchsorted(v, [a, a + h], side="left")
        free = float(w[i0:i1] @ (v[i0:i1] - a)) + s_fixed + n_fixed * (lo - a)
        return free / mu >= _remaining(total, cap, n_cap0 + int(tail[i1]))

    return at_least(lo) and not at_least(hi)


def _root_interval(a, b, edges, count, rel, mu, cap, total):
    """The candidates ``a[j] <= tau < a[j + 1]`` around the root, from the chunks' summed bins.

    Returns ``j`` and the number of breakpoints (keys ``a`` or ``a + mu cap``
    apart) inside that interval.
    """
    ia = np.searchsorted(edges, a)  # edges[ia[j]] == a[j]
    ib = np.searchsorted(edges, b)
    suffix = np.concatenate((np.cumsum(count[::-1])[::-1], [0.0]))
    # bin i holds [edges[i-1], edges[i]): the free bins of a_j are ia[j]+1 .. ib[j]
    j = 0
    for t in range(1, a.size - 1):
        bins = np.arange(ia[t] + 1, ib[t] + 1)
        free = float(np.sum(rel[bins] + count[bins] * (edges[bins - 1] - a[t])))
        if free / mu >= _remaining(total, cap, suffix[ib[t] + 1]):
            j = t
        else:
            break
    inside = (suffix[ia[j] + 1] - suffix[ia[j + 1] + 1]) + (suffix[ib[j] + 1] - suffix[ib[j + 1] + 1])
    return j, inside


def capped_threshold_dask(keys, mu, cap, total, bracket=100_000, candidates=64, max_rounds=60):
    """:func:`capped_threshold` for a Dask array of keys, by counting reductions over its chunks.

    With at most ``bracket / 2`` keys, one round gathers their distinct
    values.  Else round 0 brings a sketch of each chunk: some of its keys
    (its extremes, and about ``64 n / bracket`` more, at most ``bracket``
    in all) with the count of its keys between each two, from which the
    driver bounds ``f`` below and above and so brackets the root; when the
    sketch bounds the distinct keys inside by ``bracket``, the next round
    gathers them (two rounds in all).  Otherwise each following round
    evaluates ``f`` at ``candidates`` points spread evenly over the
    bracket (the first: over the sketch's bracket), in one ``compute`` call: per chunk, the keys are binned
    between the candidates ``a_j`` and the ``a_j + mu cap`` (one
    ``searchsorted`` and two ``bincount``), and the driver sums the bins'
    counts and sums of ``keys - left edge`` (no cancellation: every term of
    a free sum is nonnegative).  The bracket becomes the two candidates
    around the root.  Once at most ``bracket`` breakpoints remain inside
    (or the bracket is two adjacent doubles), the last round gathers the
    distinct keys whose status changes in the bracket, with counts, and
    :func:`capped_threshold`'s exact solve finishes on the driver.  The
    driver holds ``O(chunks x candidates)`` values per round and at most
    about ``bracket`` at the end, never ``n``.

    Parameters
    ----------
    keys : dask.array.Array of shape (n,)
        The keys, chunked by rows.
    mu, cap, total : float
        As in :func:`capped_threshold`.
    bracket : int, default=100_000
        Gather once at most this many breakpoints lie inside the bracket.
    candidates : int, default=64
        Candidates of ``tau`` per round.
    max_rounds : int, default=60
        Most narrowing rounds (a float's range is exhausted in fewer for
        ``candidates >= 3``).

    Returns
    -------
    Threshold
        ``tau = ref + offset``, with the number of ``compute`` calls in
        ``rounds`` and the distinct keys gathered at the end.
    """
    import dask
    from dask import delayed

    n = int(keys.shape[0])
    _check(n, mu, cap, total)
    if _all_capped(n, cap, total):
        return Threshold(-np.inf, 0.0, 0, 0)
    h = mu * cap
    blocks = list(keys.to_delayed().ravel())
    if 2 * n <= bracket:  # every key: one round
        v, w = _gathered([(*p, 0, 0, 0.0)
                          for p in dask.compute(*[delayed(_distinct)(blk) for blk in blocks])])[:2]
        lo, hi = float(np.nextafter(v[0] - h, -np.inf)), float(v[-1])
        ref, offset = _solve_gathered(v, w, 0, 0, 0.0, lo, hi, mu, cap, total)
        return Threshold(ref, offset, 1, v.size)
    size = max(1, min(-(-64 * n // bracket), bracket // max(len(blocks), 1) - 2))
    sketches = dask.compute(*[delayed(_sketch)(blk, size) for blk in blocks])
    rounds = 1
    low = min(float(v[0]) for v, _, _ in sketches if v.size)
    high = max(float(v[-1]) for v, _, _ in sketches if v.size)
    lo, hi = float(np.nextafter(low - h, -np.inf)), high
    window = _window(sketches, mu, cap, total, lo, hi)
    if window[2] <= bracket:  # the sketch's bracket holds few breakpoints: gather them
        wa, wb = window[:2]
        v, w, (n_cap0, n_fixed, s_fixed) = _gathered(
            dask.compute(*[delayed(_bracket_stats)(blk, wa, wb, h) for blk in blocks]))
        rounds += 1
        if _brackets_root(v, w, n_cap0, n_fixed, s_fixed, wa, wb, mu, cap, total):
            ref, offset = _solve_gathered(v, w, n_cap0, n_fixed, s_fixed, wa, wb, mu, cap, total)
            return Threshold(ref, offset, rounds, v.size)
    for _ in range(max_rounds):
        if window is not None:  # the first candidates spread over the sketch's bracket
            inner, window = np.linspace(window[0], window[1], candidates), None
            a = np.unique(np.clip(np.concatenate(([lo], inner, [hi])), lo, hi))
        else:
            a = np.unique(np.clip(lo + (hi - lo) * np.linspace(0.0, 1.0, candidates + 2), lo, hi))
        a[0], a[-1] = lo, hi
        if a.size <= 2:  # lo and hi adjacent doubles
            break
        b = a + h
        edges = np.unique(np.concatenate((a, b)))
        stats = dask.compute(*[delayed(_bin_stats)(blk, edges) for blk in blocks])
        rounds += 1
        j, inside = _root_interval(a, b, edges, *np.sum(stats, axis=0), mu, cap, total)
        lo, hi = float(a[j]), float(a[j + 1])
        if inside <= bracket:
            break
    v, w, (n_cap0, n_fixed, s_fixed) = _gathered(
        dask.compute(*[delayed(_bracket_stats)(blk, lo, hi, h) for blk in blocks]))
    rounds += 1
    ref, offset = _solve_gathered(v, w, n_cap0, n_fixed, s_fixed, lo, hi, mu, cap, total)
    return Threshold(ref, offset, rounds, v.size)


def _project(u, ref, offset, mu, cap):
    return np.clip(((u - ref) - offset) / mu, 0.0, cap)


def _free_stats(u, ref, offset, mu, cap):
    """One chunk's free-set statistics: count, ``sum q`` and ``sum (keys - ref)`` over ``0 < q < cap``."""
    q = _project(u, ref, offset, mu, cap)
    free = (q > 0.0) & (q < cap)
    return np.array([[np.count_nonzero(free), q[free].sum(), (u[free] - ref).sum()]])


def capped_projection(keys, mu, cap, tau):
    """``q = clip((keys - tau) / mu, 0, cap)`` where the keys live, and the free set's statistics.

    Parameters
    ----------
    keys : ndarray or dask.array.Array of shape (n,)
        The keys of :func:`capped_threshold`.
    mu, cap : float
        As in :func:`capped_threshold`.
    tau : Threshold or float
        The threshold (a :class:`Threshold` keeps its accuracy for a tiny
        ``mu``).

    Returns
    -------
    q : ndarray or dask.array.Array of shape (n,)
        The projection, lazy (``map_blocks``) for Dask keys.
    free : ndarray or dask.array.Array of shape (n,), bool
        The free set ``0 < q < cap``: the one pooled block of the PAVA, on
        which the projection's Jacobian is ``(I - 1 1^T / |free|) / mu``.
    stats : dict
        ``count``, ``sum_q`` and ``sum_keys`` (``sum (keys - ref)``) over the
        free set: floats for NumPy keys, lazy per-chunk reductions (Dask
        scalars) for Dask keys.
    """
    ref, offset = (tau.ref, tau.offset) if isinstance(tau, Threshold) else (float(tau), 0.0)
    if isinstance(keys, np.ndarray) or not hasattr(keys, "map_blocks"):
        u = np.asarray(keys, dtype=np.float64)
        q = _project(u, ref, offset, mu, cap)
        free = (q > 0.0) & (q < cap)
        stats = dict(count=int(np.count_nonzero(free)), sum_q=float(q[free].sum()),
                     sum_keys=float((u[free] - ref).sum()))
        return q, free, stats
    q = keys.map_blocks(_project, ref, offset, mu, cap, dtype=np.float64)
    free = (q > 0.0) & (q < cap)
    parts = keys.map_blocks(_free_stats, ref, offset, mu, cap, dtype=np.float64, new_axis=1,
                            chunks=((1,) * keys.numblocks[0], (3,)))
    total = parts.sum(axis=0)
    return q, free, dict(count=total[0], sum_q=total[1], sum_keys=total[2])
