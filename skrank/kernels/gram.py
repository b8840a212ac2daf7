"""The weighted Gram matrix of a CSR matrix, compiled with Numba.

``csr_weighted_gram`` forms ``[X, 1]^T diag(h) [X, 1]`` from the rows of a
CSR matrix: each row adds the products of its stored entries, pair by
pair, to a dense ``p x p`` matrix.  On a sparse ``X`` with few entries per
row this is a few operations per pair, without the sparse product's
index bookkeeping and its sparse result (:meth:`Design.weighted_gram
<skrank.backends.design.Design.weighted_gram>`).
"""

from .._jit import njit


@njit(cache=True)
def csr_weighted_gram(indptr, indices, data, h, d, intercept, out):
    """Add ``[X, 1]^T diag(h) [X, 1]`` to ``out`` (``p x p``, ``p = d + intercept``); returns ``out``.

    ``X`` is given by its CSR arrays (``indptr``, ``indices``, ``data``; the
    column indices of a row in any order, repeated ones adding up), ``h``
    holds the rows' weights (only the positive ones count, as in the
    dense product) and
    ``intercept`` whether the column of ones is the last of ``[X, 1]``.
    The upper triangle is accumulated, then copied to the lower one.
    """
    n = indptr.shape[0] - 1
    for i in range(n):
        w = h[i]
        if not w > 0.0:
            continue
        start, stop = indptr[i], indptr[i + 1]
        for a in range(start, stop):
            j = indices[a]
            v = w * data[a]
            for b in range(start, stop):
                k = indices[b]
                if k >= j:
                    out[j, k] += v * data[b]
            if intercept:
                out[j, d] += v
        if intercept:
            out[d, d] += w
    p = out.shape[0]
    for j in range(p):
        for k in range(j + 1, p):
            out[k, j] = out[j, k]
    return out
