"""Identical training rows merged into one row of their summed weight, before a deterministic fit.

A spectral risk of the weighted empirical distribution integrates the
spectrum over the cumulative weight of the sorted losses, and identical
rows ``(x, y)`` have the same loss at every ``theta``: the risk, and so
the objective and its minimiser, are unchanged when each set of identical
rows becomes one row whose weight is their total.  On data with many
repeated rows (rounded or categorical features) a fit then handles fewer
rows.  The fit template merges them for a datafit that says its objective
allows it (``merges_repeats``) and a solver whose result depends on the
objective alone (``SolverInfo.merges_repeats``).
"""

from typing import NamedTuple

import numpy as np
import scipy.sparse as sp

#: Rows fewer than this are fitted as given (the merge would save little).
MIN_ROWS = 2000
#: The rows are merged only when at most this share of them are distinct.
MAX_DISTINCT_SHARE = 0.8
#: Fewest rows of the first test, a sample (``sqrt(100 n)`` rows for larger ``n``).
SAMPLE_ROWS = 2048


class MergedRows(NamedTuple):
    """The training set with its identical rows merged (:func:`merge_repeated_rows`)."""

    #: the distinct rows, in the order of their first occurrence
    X: object
    #: their targets
    y: np.ndarray
    #: the total weight of each distinct row (its count without sample weights)
    sample_weight: np.ndarray
    #: the index of each original row's distinct row
    group: np.ndarray

    def expanded(self, per_row, sample_weight):
        """Per-row quantities of the merged rows (such as rank weights) shared out to the original rows.

        Each original row gets the share of its merged row's value in
        proportion to its weight (``sample_weight``, None for equal
        weights), so that the values of each set of identical rows sum to
        the merged one.
        """
        weight = np.ones(self.group.size) if sample_weight is None else np.asarray(sample_weight, dtype=float)
        total = self.sample_weight[self.group]
        share = np.divide(weight, total, out=np.zeros_like(weight), where=total > 0)
        return np.asarray(per_row, dtype=np.float64)[self.group] * share


def _hashes(X, y, rows, direction):
    """One number per row of ``rows`` (None: all) from its features and target, equal for identical rows."""
    Xr = X if rows is None else X[rows]
    yr = y if rows is None else y[rows]
    h = np.asarray(Xr @ direction[:-1], dtype=np.float64).ravel()
    return h + direction[-1] * yr


def _same_rows(X, y, a, b):
    """Whether the rows ``a[k]`` and ``b[k]`` of ``(X, y)`` are identical, for each ``k``."""
    if sp.issparse(X):
        differ = np.asarray((X[a] != X[b]).sum(axis=1)).ravel() > 0
    else:
        differ = np.any(X[a] != X[b], axis=1)
    return ~differ & (y[a] == y[b])


def merge_repeated_rows(X, y, sample_weight=None):
    """The rows of ``(X, y)`` with the identical ones merged, or None where it would not pay.

    Rows are identical when their features and target are equal, value for
    value.  The test is exact: rows are first grouped by a random linear
    hash (one product with ``X``), and only neighbours in the hash's order
    that are equal entry by entry are merged.  Returns None for fewer than
    :data:`MIN_ROWS` rows, when a sample of the rows holds too few pairs
    alike for more than a fifth of the rows to be repeats, when more than
    :data:`MAX_DISTINCT_SHARE` of the rows are distinct, or for an ``X``
    that is neither a NumPy array nor a SciPy sparse matrix.

    Parameters
    ----------
    X : {ndarray, sparse matrix} of shape (n, d)
    y : ndarray of shape (n,)
        Numeric targets.
    sample_weight : ndarray of shape (n,) or None, default=None

    Returns
    -------
    MergedRows or None
    """
    if not (isinstance(X, np.ndarray) or sp.issparse(X)) or X.ndim != 2:
        return None
    y = np.asarray(y)
    n = X.shape[0]
    if n < MIN_ROWS or y.ndim != 1 or not np.issubdtype(y.dtype, np.number):
        return None
    if sp.issparse(X):
        X = X.tocsr()
    rng = np.random.default_rng(0)
    direction = rng.standard_normal(X.shape[1] + 1)
    k = min(n, max(SAMPLE_ROWS, int(np.sqrt(100.0 * n))))
    sample = np.sort(rng.choice(n, size=k, replace=False))
    _, counts = np.unique(_hashes(X, y, sample, direction), return_counts=True)
    # With D rows beyond the distinct ones, two rows drawn at random are alike with probability at least
    # 2 D / n^2, so k sampled rows hold at least k^2 D / n^2 alike pairs on average: at least
    # (1 - MAX_DISTINCT_SHARE) k^2 / n (20 or more) where the merge pays; half of that is asked for.
    if float(counts @ (counts - 1)) / 2.0 < 0.5 * (1.0 - MAX_DISTINCT_SHARE) * k * k / n:
        return None
    h = _hashes(X, y, None, direction)
    order = np.argsort(h, kind="stable")
    same = h[order[1:]] == h[order[:-1]]
    pairs = np.flatnonzero(same)
    if n - pairs.size > MAX_DISTINCT_SHARE * n:
        return None
    same[pairs] = _same_rows(X, y, order[pairs], order[pairs + 1])
    starts = np.concatenate(([True], ~same))
    n_groups = int(np.count_nonzero(starts))
    if n_groups > MAX_DISTINCT_SHARE * n:
        return None
    # each group's first row (the groups are runs of the hash's order), the groups in that row's order
    first = np.minimum.reduceat(order, np.flatnonzero(starts))
    by_first = np.argsort(first)
    rank = np.empty(n_groups, dtype=np.int64)
    rank[by_first] = np.arange(n_groups)
    group = np.empty(n, dtype=np.int64)
    group[order] = rank[np.cumsum(starts) - 1]
    rows = first[by_first]
    weight = None if sample_weight is None else np.asarray(sample_weight, dtype=np.float64)
    total = np.bincount(group, weights=weight, minlength=n_groups).astype(np.float64)
    return MergedRows(X[rows], y[rows], total, group)
