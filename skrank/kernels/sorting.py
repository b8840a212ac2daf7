"""Sorting nearly sorted keys, for solvers that re-rank ``n`` values every epoch.

Between two epochs the values move little: the previous order is a good
start.  :func:`sort_keyed` sorts a gathered copy ``keys = vals[perm]``
(contiguous) ascending and carries ``perm`` along, so that the sorted values
come out with the order (SOREL's projection and objective read them in
sorted order): insertion sort when few samples moved far, otherwise a radix
sort on a 22-bit key finished by an insertion pass, ``O(n)`` in all cases (a
comparison sort of ``n = 7000`` values costs ten times more).
:func:`gather_keys` gathers the copy and :func:`count_descents` counts the
descents that choose between the two.
"""

import numpy as np

from .._jit import njit

_RADIX_BITS = 11  # two LSD passes on the top 22 bits of a float32 key
_RADIX_BUCKETS = 1 << _RADIX_BITS
_U32 = np.uint64(32)
_LOW32 = np.uint64(0xFFFFFFFF)
_FAR = 8  # a "far" descent: keys[j] < keys[j - _FAR] (a sample moved by _FAR places or more)


@njit(cache=True)
def keyed_scratch(n):
    """Work arrays of :func:`sort_keyed`: two packed-key buffers, keys, positions, counts."""
    return (np.empty(n, dtype=np.uint64), np.empty(n, dtype=np.uint64), np.empty(n),
            np.empty(n, dtype=np.int64), np.empty((2, _RADIX_BUCKETS), dtype=np.int64),
            np.empty((4, _RADIX_BUCKETS), dtype=np.int32))


@njit(cache=True)
def insertion_keyed(keys, perm, budget):
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
    """Stable LSD radix sort of ``keys`` by a monotone 22-bit key, ``perm`` carried along.

    The key is the top 22 bits of the order-preserving integer image of
    ``float32(keys)`` (rounding to float32 is monotone), so the result is
    sorted up to values closer than about ``1e-4`` relative, which keep
    their previous order: an insertion pass finishes the job in ``O(n)``
    work.  The key and the position travel packed in one 64-bit word (key
    in the high half) through the two 11-bit passes, a pass whose digit is
    the same for all keys is skipped; the last pass moves the keys and
    ``perm`` themselves.  Histograms are counted in two interleaved copies
    (``hist``), so that runs of equal digits (nearly sorted input) do not
    serialise the increments.
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
def sort_keyed(keys, perm, descents, far, pk, pk2, kbuf, pbuf, counts, hist):
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
        insertion_keyed(keys, perm, -1)
        return
    if far * 128 < n and insertion_keyed(keys, perm, 4 * n + 64):
        return
    _radix_keyed(keys, perm, pk, pk2, kbuf, pbuf, counts, hist)
    if not insertion_keyed(keys, perm, 8 * n + 64):
        # many values closer than the key's resolution, far from their previous order
        order = np.argsort(keys, kind="mergesort")
        for m in range(n):
            kbuf[m] = keys[order[m]]
            pbuf[m] = perm[order[m]]
        for m in range(n):
            keys[m] = kbuf[m]
            perm[m] = pbuf[m]


@njit(cache=True)
def count_descents(keys):
    """The numbers of descents ``keys[j] < keys[j - 1]`` and far descents ``keys[j] < keys[j - _FAR]``.

    They choose between the insertion and the radix sort of :func:`sort_keyed`.
    """
    descents = 0
    far = 0
    for j in range(1, keys.shape[0]):
        descents += keys[j] < keys[j - 1]
        if j >= _FAR:
            far += keys[j] < keys[j - _FAR]
    return descents, far


@njit(cache=True)
def gather_keys(vals, perm, out):
    """``out[j] = vals[perm[j]]`` (the keys of :func:`sort_keyed`).

    Returns the number of descents and of far descents of the keys
    (:func:`count_descents`).
    """
    for j in range(out.shape[0]):
        out[j] = vals[perm[j]]
    return count_descents(out)


def resort(vals, order):
    """``vals[order]`` sorted ascending, ``order`` updated in place to sort ``vals``.

    ``order`` is a permutation that nearly sorts ``vals`` (the previous
    call's, in an iterative solver); the result is stable with respect to
    it.  NumPy's stable sort of float64 is a timsort, linear on such nearly
    sorted data, and needs no compilation (the compiled radix sort of
    :func:`sort_keyed` took 2.5 s to compile on a first fit).
    """
    perm = order[np.argsort(vals[order], kind="stable")]
    order[:] = perm
    return vals[perm]
