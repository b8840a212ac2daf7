"""The partial-AUC and average-precision surrogates on score-sorted Dask partitions.

The functions here evaluate the exact surrogates of
:func:`skrank.datafits.partial_auc.range_loss_and_score_gradients` and
:func:`skrank.datafits.average_precision.ap_surrogate_and_score_gradients`,
with their derivatives in the scores, on scores that live on Dask workers:
the scores ``h`` come sorted ascending over their chunks (every score of a
chunk at most every score of the next), their labels and weights chunked
alike.  The gradient comes back as a Dask array chunked like ``h``, kept on
the workers (persisted); the driving process receives a few numbers per
chunk (counts, sums, the first and last scores, moment totals) and the
value.  The method is described in the user guide,
:ref:`methods-partitioned-surrogates`.

A loss is covered when it is a sum of one-sided quadratics
(:func:`covers`); the other losses (logistic, sigmoid) have no such
decomposition and are evaluated on gathered scores.

Ties are ordered as the in-memory functions order them on their first
call: the sort that makes the partitions must keep tied scores in the order
of their rows (sort by the score, then by the row's position); the
gradient is then the in-memory one, element for element, and
:func:`rows_in_input_order` puts it back in the rows' order.
"""

import numpy as np

from .partial_auc import check_range_holds_negatives, check_range_holds_weight, range_cells

# per-chunk statistics: their positions in the vector that _chunk_stats returns
(_N, _FIRST, _LAST, _N_POS, _N_NEG, _SUM_POS, _SUM_NEG, _W_POS, _W_NEG,
 _MAX_POS, _MAX_NEG, _MIN_NEG) = range(12)


def covers(loss):
    """Whether the partitioned evaluation covers the pairwise loss ``loss``.

    It covers the losses that are sums of one-sided quadratics
    ``c (m - z)^2 1(z < t)`` (:attr:`skrank.pairwise_losses.PairwiseLoss.pieces`:
    the squared hinge, the squared loss, the smooth step), whose pairwise
    sums over score-sorted data are polynomials in a score with prefix
    moments of the other scores as coefficients.

    Parameters
    ----------
    loss : skrank.pairwise_losses.PairwiseLoss

    Returns
    -------
    bool
    """
    return bool(loss.pieces)


# ---------------------------------------------------------------------------------------------
# the partitions


def _positive(y):
    return np.asarray(y) > 0


def _chunk_stats(h, y, w):
    """One chunk's numbers (positions ``_N`` ...), after checking it."""
    h = np.asarray(h, dtype=np.float64)
    pos = _positive(y)
    if pos.shape != h.shape:
        raise ValueError(f"y must be chunked like h: a chunk of h has {h.shape[0]} rows and its labels "
                         f"{pos.shape[0]}.")
    if not np.all(np.isfinite(h)):
        raise ValueError("h contains NaN or infinity.")
    if h.shape[0] > 1 and np.any(h[1:] < h[:-1]):
        raise ValueError("h must be sorted ascending within each chunk and across the chunks.")
    if w is None:
        w = np.ones(h.shape[0])
    else:
        w = np.asarray(w, dtype=np.float64)
        if w.shape != h.shape:
            raise ValueError(f"sample_weight must be chunked like h: a chunk of h has {h.shape[0]} rows "
                             f"and its weights {w.shape[0]}.")
        if not np.all(np.isfinite(w)) or np.any(w < 0):
            raise ValueError("sample_weight must be finite and nonnegative.")
    neg = ~pos
    wn = w[neg]
    out = np.zeros(12)
    out[_N] = h.shape[0]
    out[_FIRST] = h[0] if h.shape[0] else np.nan
    out[_LAST] = h[-1] if h.shape[0] else np.nan
    out[_N_POS], out[_N_NEG] = np.count_nonzero(pos), np.count_nonzero(neg)
    out[_SUM_POS], out[_SUM_NEG] = h[pos].sum(), h[neg].sum()
    out[_W_POS], out[_W_NEG] = w[pos].sum(), wn.sum()
    out[_MAX_POS] = w[pos].max() if out[_N_POS] else 0.0
    out[_MAX_NEG] = wn.max() if out[_N_NEG] else 0.0
    out[_MIN_NEG] = wn[wn > 0].min() if np.any(wn > 0) else np.inf
    return out


def _units_factor(top):
    """The power of two by which :func:`~.partial_auc.in_units` scales weights of largest ``top``."""
    if not (top > 0.0 and np.isfinite(top)):
        return 1.0
    return float(np.ldexp(1.0, -int(np.frexp(top)[1])))


class _Partitions:
    """The chunks of ``h``, ``y`` and the weights as lists of delayed blocks, with their statistics."""

    def __init__(self, h, y, sample_weight):
        import dask

        self.dask = dask
        self.h = _blocks(h, "h")
        self.y = _blocks(y, "y", like=h)
        self.w = [None] * len(self.h) if sample_weight is None else _blocks(sample_weight, "sample_weight",
                                                                               like=h)
        self.weighted = sample_weight is not None
        if not len(self.y) == len(self.w) == len(self.h):
            raise ValueError("h, y and sample_weight must have the same number of chunks.")
        tasks = [dask.delayed(_chunk_stats, pure=True)(h_c, y_c, w_c)
                 for h_c, y_c, w_c in zip(self.h, self.y, self.w)]
        self.stats = np.array(self.fetch(*tasks)).reshape(len(self.h), 12)
        self.sizes = self.stats[:, _N].astype(np.int64)
        self.nonempty = np.flatnonzero(self.sizes > 0)
        firsts, lasts = self.stats[self.nonempty, _FIRST], self.stats[self.nonempty, _LAST]
        if np.any(firsts[1:] < lasts[:-1]):
            raise ValueError("h must be sorted ascending across its chunks: every score of a chunk at most "
                             "every score of the next.")
        totals = self.stats.sum(axis=0)
        self.n_pos, self.n_neg = int(totals[_N_POS]), int(totals[_N_NEG])
        self.sum_pos, self.sum_neg = float(totals[_SUM_POS]), float(totals[_SUM_NEG])
        self.w_pos, self.w_neg = float(totals[_W_POS]), float(totals[_W_NEG])
        self.max_pos = float(self.stats[:, _MAX_POS].max()) if len(self.h) else 0.0
        self.max_neg = float(self.stats[:, _MAX_NEG].max()) if len(self.h) else 0.0
        self.min_neg = float(self.stats[:, _MIN_NEG].min()) if len(self.h) else np.inf

    def fetch(self, *tasks):
        """Compute ``tasks`` into the driving process (each a few numbers)."""
        return self.dask.compute(*tasks)

    def keep(self, *tasks):
        """Compute ``tasks`` where they run and keep them there (persisted)."""
        return self.dask.persist(*tasks)

    def keep_and_fetch(self, kept, fetched):
        """Keep ``kept`` where they run and bring ``fetched`` (a few numbers each), in one submission."""
        from ..backends.dask_design import persist_and_fetch

        return persist_and_fetch(kept, fetched)

    def delayed(self, function, *args, nout=None):
        return self.dask.delayed(function, pure=True, nout=nout)(*args)

    def centred(self, center, factors, fetch=None):
        """Persisted blocks ``h - center`` and the weights times ``factors`` (positives', negatives').

        ``fetch(scores, y, weights)``: a few numbers per chunk of the centred
        blocks, brought back in the same submission (a list, empty without).
        """
        tasks = [self.delayed(_centre_block, h_c, y_c, w_c, center, factors, nout=2)
                 for h_c, y_c, w_c in zip(self.h, self.y, self.w)]
        fetched = [] if fetch is None else [self.delayed(fetch, t[0], y_c, t[1])
                                            for t, y_c in zip(tasks, self.y)]
        kept, values = self.keep_and_fetch([t[0] for t in tasks] + [t[1] for t in tasks], fetched)
        m = len(self.h)
        return kept[:m], kept[m:], values

    def bounds(self, center):
        """The first and last centred score of each chunk (NaN if empty), as the blocks compute them."""
        first = self.stats[:, _FIRST] - center
        last = self.stats[:, _LAST] - center
        return first, last

    def gradient(self, blocks):
        """The persisted blocks as one Dask array chunked like ``h``."""
        return _array_of(blocks, self.sizes)


def _array_of(blocks, sizes):
    """The one-dimensional Dask array of the delayed ``blocks``, of ``sizes`` rows each (empty ones kept)."""
    import dask.array as da
    from dask.base import tokenize
    from dask.highlevelgraph import HighLevelGraph

    name = "partitioned-" + tokenize(*[b.key for b in blocks])
    layer = {(name, c): b.key for c, b in enumerate(blocks)}
    graph = HighLevelGraph.from_collections(name, layer, dependencies=blocks)
    return da.Array(graph, name, chunks=(tuple(int(n) for n in sizes),), dtype=np.float64)


def _blocks(a, name, like=None):
    """The delayed blocks of the one-dimensional Dask array ``a`` (a NumPy array is chunked like ``like``)."""
    import dask.array as da

    if not hasattr(a, "to_delayed"):
        if like is None or any(np.isnan(c) for c in like.chunks[0]):
            raise TypeError(f"{name} must be a one-dimensional Dask array.")
        a = da.from_array(np.asarray(a), chunks=like.chunks)
    if a.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got {a.ndim} dimensions.")
    if like is not None and not any(np.isnan(c) for c in a.chunks[0] + like.chunks[0]) \
            and a.chunks != like.chunks:
        a = a.rechunk(like.chunks)
    return list(a.to_delayed().ravel())


def _centre_block(h, y, w, center, factors):
    h = np.asarray(h, dtype=np.float64) - center
    pos = _positive(y)
    w = np.ones(h.shape[0]) if w is None else np.asarray(w, dtype=np.float64)
    return h, w * np.where(pos, factors[0], factors[1])


# ---------------------------------------------------------------------------------------------
# sums over the scores above or below a threshold


def _suffix_table(values):
    """Row ``j``: the sums of the rows ``j, j + 1, ...`` of ``values`` (one row more, of zeros)."""
    out = np.zeros((values.shape[0] + 1, values.shape[1]))
    out[:-1] = np.cumsum(values[::-1], axis=0)[::-1]
    return out


def _prefix_table(values):
    """Row ``j``: the sums of the rows ``0 .. j - 1`` of ``values``."""
    out = np.zeros((values.shape[0] + 1, values.shape[1]))
    out[1:] = np.cumsum(values, axis=0)
    return out


def _table_total(table, above):
    return table[0] if above else table[-1]


def _threshold_sums(h, mask, shift, base, above, *others):
    """For each ``x = h + shift`` of the rows in ``mask``: ``base`` plus the sums of the blocks in ``others``.

    ``others`` alternates a block's sorted scores and its table
    (:func:`_suffix_table` when ``above``: the rows with scores ``> x``;
    :func:`_prefix_table` otherwise: the rows with scores ``< x``).
    """
    x = h[mask] + shift
    out = np.tile(base, (x.shape[0], 1))
    side = "right" if above else "left"
    for scores, table in zip(others[::2], others[1::2]):
        out += table[np.searchsorted(scores, x, side=side)]
    return out


def _tables(parts, values, above):
    """The (delayed) tables of the per-row ``values`` of each chunk: suffix tables when ``above``."""
    build = _suffix_table if above else _prefix_table
    return [parts.delayed(build, v) for v in values]


def _totals(parts, tables, above):
    """The (delayed) totals of the tables: each chunk's sums over all its rows."""
    return [parts.delayed(_table_total, t, above) for t in tables]


class _Moments:
    """Tables of per-row values of every chunk, and the sums over the scores beyond a threshold.

    ``tables`` the persisted per-chunk tables of :func:`_tables`;
    ``totals`` each chunk's totals (:func:`_totals`, a few numbers per
    chunk), fetched into the driver in the submission that kept the tables.
    """

    def __init__(self, parts, scores, tables, totals, above, first, last):
        self.parts, self.scores, self.tables = parts, scores, list(tables)
        self.totals = np.asarray(totals, dtype=np.float64)
        self.above = above
        self.first, self.last = first, last

    def sums(self, c, mask, shift):
        """A delayed array: for each row of chunk ``c`` in ``mask`` (delayed), the sums beyond ``h + shift``.

        Chunks wholly beyond every threshold of the chunk are added in the
        driver (their totals); chunks that may be cut by one are read by the
        task; the others count for nothing.
        """
        lo, hi = self.first[c] + shift, self.last[c] + shift
        nonempty = self.parts.sizes > 0
        with np.errstate(invalid="ignore"):  # the NaN bounds of empty chunks
            if self.above:
                whole, none = self.first > hi, self.last <= lo
            else:
                whole, none = self.last < lo, self.first >= hi
        base = self.totals[whole & nonempty].sum(axis=0)
        cut = []
        if self.parts.sizes[c]:
            for d in np.flatnonzero(nonempty & ~whole & ~none):
                cut += [self.scores[d], self.tables[d]]
        return self.parts.delayed(_threshold_sums, self.scores[c], mask, shift, base, self.above, *cut)


# ---------------------------------------------------------------------------------------------
# partial AUC


def _pieces(loss):
    if not covers(loss):
        raise ValueError(f"loss={loss.name!r} is not a sum of one-sided quadratics: its sums are not "
                         "evaluated on partitions (covers(loss) is False); gather the scores instead.")
    return np.array(loss.pieces, dtype=np.float64)


def _tie_runs(h, y, w):
    """The weights of the chunk's negatives tied with its first score and with its last score."""
    neg = ~_positive(y)
    if h.shape[0] == 0:
        return np.zeros(2)
    wn = np.where(neg, w, 0.0)
    first_run = np.searchsorted(h, h[0], side="right")
    last_run = np.searchsorted(h, h[-1], side="left")
    return np.array([wn[:first_run].sum(), wn[last_run:].sum()])


def _tied_across(first, last, runs, nonempty):
    """The negatives' weight tied with each chunk's first score before it, and with its last score after it.

    ``runs`` holds each chunk's negatives' weight tied with its first
    score and with its last.  A tie reaches past a neighbour only when the
    neighbour's scores are all equal: one pass each way.
    """
    before = np.zeros(first.shape[0])
    after = np.zeros(first.shape[0])
    for prev, c in zip(nonempty[:-1], nonempty[1:]):
        if last[prev] == first[c]:
            before[c] = runs[prev, 1] + (before[prev] if first[prev] == last[prev] else 0.0)
    for c, following in zip(nonempty[-2::-1], nonempty[:0:-1]):
        if first[following] == last[c]:
            after[c] = runs[following, 0] + (after[following] if first[following] == last[following] else 0.0)
    return before, after


def _rank_weights(h, y, w, offsets, fpr_range, pos_range):
    """The rank weights of the chunk's negatives and positives, and their moment values.

    ``offsets``: the negatives' weight before the chunk, that of the
    negatives tied with its first score in the chunks before it, that of the
    negatives tied with its last score in the chunks after it, the
    positives' weight before it, and the classes' totals.  A negative's
    cell starts at the weight of the negatives scored above it plus that
    of the tied ones before it (the order of the rows among ties).
    """
    before_neg, tied_before, tied_after, before_pos, total_neg, total_pos = offsets
    pos = _positive(y)
    neg = ~pos
    n = h.shape[0]
    omega = np.zeros(n)
    u = np.zeros(n)
    if n:
        wn = np.where(neg, w, 0.0)
        cum = _prefix_table(wn[:, None])[:, 0]
        run_start = np.searchsorted(h, h, side="left")
        run_end = np.searchsorted(h, h, side="right")
        at_or_below = before_neg + cum[run_end] + np.where(h == h[-1], tied_after, 0.0)
        ties_ahead = cum[:-1] - cum[run_start] + np.where(h == h[0], tied_before, 0.0)
        starts = (total_neg - at_or_below) + ties_ahead
        omega[neg] = range_cells(starts[neg], starts[neg] + w[neg], total_neg, fpr_range)
        if pos_range is None:
            u[pos] = w[pos]
        else:
            wp = np.where(pos, w, 0.0)
            starts = before_pos + _prefix_table(wp[:, None])[:-1, 0]
            u[pos] = range_cells(starts[pos], starts[pos] + w[pos], total_pos, pos_range)
    q = omega * h
    return omega, u, np.column_stack([omega, q, q * h]), np.column_stack([u, u * h])


def _range_block(h, y, omega, u, pieces, gradient, *sums):
    """The chunk's share of the range sum and, when ``gradient``, its derivatives in the chunk's scores.

    ``sums`` holds, per piece, the negatives' moments above ``h_i - t`` for
    the positives and, when ``gradient``, the positives' moments below
    ``q_k + t`` for the negatives.
    """
    pos = _positive(y)
    neg = ~pos
    g = np.zeros(h.shape[0])
    total = 0.0
    hp, up = h[pos], u[pos]
    q, om = h[neg], omega[neg]
    gp = np.zeros(hp.shape[0])
    gn = np.zeros(q.shape[0])
    per_piece = 2 if gradient else 1
    for p in range(pieces.shape[0]):
        coefficient, margin, _ = pieces[p]
        above = sums[per_piece * p]
        a = margin - hp
        w0, w1, w2 = above[:, 0], above[:, 1], above[:, 2]
        total += float(np.sum(coefficient * up * (a * a * w0 + 2.0 * a * w1 + w2)))
        if gradient:
            below = sums[2 * p + 1]
            gp -= coefficient * 2.0 * up * (a * w0 + w1)
            gn += coefficient * 2.0 * om * (below[:, 0] * (margin + q) - below[:, 1])
    if not gradient:
        return total, None
    g[pos] = gp
    g[neg] = gn
    return total, g


def _range_sums(h, y, loss, fpr_range, tpr_min, sample_weight, units, gradient):
    pieces = _pieces(loss)
    range_cells(np.zeros(0), np.zeros(0), 0.0, fpr_range)  # checks the range
    if not 0.0 <= tpr_min < 1.0:
        raise ValueError(f"tpr_min must be in [0, 1), got {tpr_min!r}.")
    parts = _Partitions(h, y, sample_weight)
    if parts.n_pos == 0 or parts.n_neg == 0:
        raise ValueError("the partial-AUC surrogate needs positives and negatives in y.")
    weighted = parts.weighted
    if units and weighted:
        if not (parts.w_pos > 0 and parts.w_neg > 0):
            raise ValueError("sample_weight gives one class a total weight of zero: both classes "
                             "need a positive weight.")
        factors = (_units_factor(parts.max_pos), _units_factor(parts.max_neg))
    else:
        factors = (1.0, 1.0)
    if units:
        if weighted:
            check_range_holds_weight(parts.w_neg, parts.min_neg, fpr_range)
        else:
            check_range_holds_negatives(parts.n_neg, fpr_range)
    center = 0.5 * (parts.sum_neg / parts.n_neg + parts.sum_pos / parts.n_pos)
    # the centred blocks kept and their runs of tied negatives brought back in one submission
    scores, weights, runs = parts.centred(center, factors, fetch=_tie_runs)
    runs = np.array(runs).reshape(-1, 2)
    first, last = parts.bounds(center)
    total_neg, total_pos = parts.w_neg * factors[1], parts.w_pos * factors[0]
    neg_before = np.concatenate([[0.0], np.cumsum(parts.stats[:, _W_NEG] * factors[1])])
    pos_before = np.concatenate([[0.0], np.cumsum(parts.stats[:, _W_POS] * factors[0])])
    pos_range = None if tpr_min == 0.0 else (0.0, 1.0 - tpr_min)
    tied_before, tied_after = _tied_across(first, last, runs, parts.nonempty)
    ranked = []
    for c in range(len(scores)):
        offsets = (neg_before[c], tied_before[c], tied_after[c], pos_before[c], total_neg, total_pos)
        ranked.append(parts.delayed(_rank_weights, scores[c], parts.y[c], weights[c], offsets, fpr_range,
                                    pos_range, nout=4))
    m = len(scores)
    tables = _tables(parts, [r[2] for r in ranked], True)
    totals = _totals(parts, tables, True)
    if gradient:
        below = _tables(parts, [r[3] for r in ranked], False)
        tables, totals = tables + below, totals + _totals(parts, below, False)
    # the rank weights and the moments' tables kept, the tables' totals brought back: one submission
    kept, totals = parts.keep_and_fetch([r[0] for r in ranked] + [r[1] for r in ranked] + tables, totals)
    omega, u = kept[:m], kept[m:2 * m]
    neg_moments = _Moments(parts, scores, kept[2 * m:3 * m], totals[:m], True, first, last)
    pos_moments = _Moments(parts, scores, kept[3 * m:], totals[m:], False, first, last) if gradient else None
    blocks = []
    for c in range(m):
        positive = parts.delayed(_positive, parts.y[c])
        negative = parts.delayed(np.logical_not, positive)
        sums = []
        for coefficient, margin, threshold in pieces:
            sums.append(neg_moments.sums(c, positive, -threshold))
            if gradient:
                sums.append(pos_moments.sums(c, negative, threshold))
        blocks.append(parts.delayed(_range_block, scores[c], parts.y[c], omega[c], u[c], pieces, gradient,
                                    *sums, nout=2))
    if not gradient:
        return float(np.sum(parts.fetch(*[b[0] for b in blocks]))), None, parts, factors
    kept, values = parts.keep_and_fetch([b[1] for b in blocks], [b[0] for b in blocks])
    return float(np.sum(values)), parts.gradient(kept), parts, factors


def partial_auc_sums(h, y, loss, fpr_range, *, tpr_min=0.0, sample_weight=None, gradient=True):
    """The ranked pairwise sum of the partial-AUC surrogate and its score gradient, on sorted partitions.

    Equal to :func:`skrank.datafits.partial_auc.range_loss_and_score_gradients`
    on the gathered scores, with the rank weights
    :func:`~skrank.datafits.partial_auc.negative_rank_weights` of the
    negatives (of their weights in decreasing order of the scores) and, for
    the positives, their weights, or with ``tpr_min > 0`` the cells of their
    cumulative weight from the lowest score inside ``[0, (1 - tpr_min) W+]``.

    Parameters
    ----------
    h : dask.array.Array of shape (n,)
        Scores, sorted ascending over the chunks (ties in the order of the
        rows); chunk sizes may be unknown.
    y : dask.array.Array of shape (n,)
        Labels in {-1, +1} (or booleans), chunked like ``h``.
    loss : skrank.pairwise_losses.PairwiseLoss
        A loss that :func:`covers` covers.
    fpr_range : tuple (alpha, beta)
        False-positive-rate range.
    tpr_min : float, default=0.0
        The true-positive-rate floor of a two-way range.
    sample_weight : dask.array.Array of shape (n,), default=None
        Nonnegative weights chunked like ``h``, used as they are; None for
        unit weights.
    gradient : bool, default=True
        Whether to compute the gradient (without it, half of the sums).

    Returns
    -------
    total : float
        ``sum_i u_i sum_k omega_k loss(h_i - q_(k))`` (not normalised).
    g : dask.array.Array of shape (n,) or None
        Its derivatives in ``h``, chunked like ``h``, persisted; None
        without ``gradient``.
    """
    total, g, _, _ = _range_sums(h, y, loss, fpr_range, float(tpr_min), sample_weight, units=False,
                                 gradient=gradient)
    return total, g


def partial_auc_terms(h, y, loss, fpr_range, *, tpr_min=0.0, sample_weight=None, gradient=True):
    """The partial-AUC surrogate and its score gradient, on sorted partitions.

    The data term of :class:`skrank.datafits.partial_auc.PartialAUCObjective`
    (its ``linear_terms``): :func:`partial_auc_sums` with each class's
    weights in the units of :func:`~skrank.datafits.partial_auc.in_units`,
    divided by the normaliser ``W+ (1 - tpr_min) (beta - alpha) W-``.  The
    range is checked to hold at least one negative.

    Parameters
    ----------
    h, y, loss, fpr_range, tpr_min, sample_weight, gradient
        As for :func:`partial_auc_sums`.

    Returns
    -------
    value : float
    g : dask.array.Array of shape (n,) or None
        The derivatives in ``h``, chunked like ``h``; None without ``gradient``.
    """
    tpr_min = float(tpr_min)
    total, g, parts, factors = _range_sums(h, y, loss, fpr_range, tpr_min, sample_weight, units=True,
                                           gradient=gradient)
    alpha, beta = fpr_range
    if parts.weighted:
        units_neg = parts.w_neg * factors[1]
        normaliser = parts.w_pos * factors[0] * (1.0 - tpr_min) * (beta * units_neg - alpha * units_neg)
    else:
        normaliser = parts.n_pos * (1.0 - tpr_min) * (beta * parts.n_neg - alpha * parts.n_neg)
    return total / normaliser, None if g is None else g / normaliser


# ---------------------------------------------------------------------------------------------
# average precision


def _ap_values(h, y, w):
    """Per row: ``w, w h, w h^2`` over all the rows, then over the positives."""
    pos = _positive(y)
    wh = w * h
    every = np.column_stack([w, wh, wh * h])
    return np.column_stack([every, every * pos[:, None]])


def _ap_anchors(h, y, w, n_pos, pieces, *sums):
    """The anchors' share of ``-sum_i w_i A_i / B_i``, their ``dP/dA_i``, ``dP/dB_i`` and own derivatives.

    ``sums`` holds, per piece, the moments of all the rows and of the
    positives above ``h_i - t`` for every anchor (positive of positive weight).
    """
    anchors = _positive(y) & (w > 0.0)
    ha, wa = h[anchors], w[anchors]
    A = np.zeros(ha.shape[0])
    B = np.zeros(ha.shape[0])
    slope_A = np.zeros(ha.shape[0])
    slope_B = np.zeros(ha.shape[0])
    for p in range(pieces.shape[0]):
        coefficient, margin, _ = pieces[p]
        s = sums[p]
        a = margin - ha
        c0, c1, c2, p0, p1, p2 = (s[:, j] for j in range(6))
        A += coefficient * (a * a * p0 + 2.0 * a * p1 + p2)
        B += coefficient * (a * a * c0 + 2.0 * a * c1 + c2)
        slope_A += coefficient * (-2.0) * (a * p0 + p1)
        slope_B += coefficient * (-2.0) * (a * c0 + c1)
    value = -float(np.sum(wa * A / B))
    n = h.shape[0]
    dA, dB, own = np.zeros(n), np.zeros(n), np.zeros(n)
    dA[anchors] = -wa / (B * n_pos)
    dB[anchors] = wa * A / (B * B * n_pos)
    own[anchors] = dA[anchors] * slope_A + dB[anchors] * slope_B
    return value, own, np.column_stack([dA, dA * h, dB, dB * h])


def _ap_gradient(h, y, w, own, pieces, *sums):
    """The chunk's derivatives: the anchors' own plus the sums over the anchors below ``h_s + t``."""
    pos = _positive(y)
    g = np.zeros(h.shape[0])
    for p in range(pieces.shape[0]):
        coefficient, margin, _ = pieces[p]
        s = sums[p]
        shifted = margin + h
        term = 2.0 * (shifted * s[:, 2] - s[:, 3])
        term += np.where(pos, 2.0 * (shifted * s[:, 0] - s[:, 1]), 0.0)
        g += coefficient * term
    return own + w * g


def _every(y):
    return np.ones(np.shape(y), dtype=bool)


def _anchor_mask(y, w):
    return _positive(y) & (w > 0.0)


def average_precision_terms(h, y, loss, sample_weight=None, gradient=True):
    """The average-precision surrogate ``P(h)`` and its score gradient, on sorted partitions.

    Equal to :func:`skrank.datafits.average_precision.ap_surrogate_and_score_gradients`
    on the gathered scores (the weights are taken in the units of
    :func:`~skrank.datafits.partial_auc.in_units`, which leave ``P``
    unchanged, as :class:`~skrank.datafits.average_precision.AveragePrecisionObjective`
    does).

    Parameters
    ----------
    h : dask.array.Array of shape (n,)
        Scores, sorted ascending over the chunks; chunk sizes may be unknown.
    y : dask.array.Array of shape (n,)
        Labels in {-1, +1} (or booleans), chunked like ``h``.
    loss : skrank.pairwise_losses.PairwiseLoss
        A loss that :func:`covers` covers (``loss(z)`` with ``z = h_i - h_s``).
    sample_weight : dask.array.Array of shape (n,), default=None
        Nonnegative weights chunked like ``h``, with a positive total over
        the positives; None for equal weights.
    gradient : bool, default=True
        Whether to compute the gradient (without it, one round of sums
        instead of two).

    Returns
    -------
    value : float
    g : dask.array.Array of shape (n,) or None
        ``dP/dh``, chunked like ``h``, persisted; None without ``gradient``.
    """
    pieces = _pieces(loss)
    parts = _Partitions(h, y, sample_weight)
    n = parts.n_pos + parts.n_neg
    if parts.n_pos == 0 or not parts.w_pos > 0:
        raise ValueError("average precision needs at least one positive sample in y (of positive weight).")
    factor = _units_factor(max(parts.max_pos, parts.max_neg)) if parts.weighted else 1.0
    center = (parts.sum_pos + parts.sum_neg) / n
    scores, weights, _ = parts.centred(center, (factor, factor))
    first, last = parts.bounds(center)
    n_pos = parts.w_pos * factor
    m = len(scores)
    values = [parts.delayed(_ap_values, s, y_c, w_c) for s, y_c, w_c in zip(scores, parts.y, weights)]
    tables = _tables(parts, values, True)
    tables, totals = parts.keep_and_fetch(tables, _totals(parts, tables, True))
    row_moments = _Moments(parts, scores, tables, totals, True, first, last)
    anchors = []
    for c in range(m):
        mask = parts.delayed(_anchor_mask, parts.y[c], weights[c])
        sums = [row_moments.sums(c, mask, -threshold) for _, _, threshold in pieces]
        anchors.append(parts.delayed(_ap_anchors, scores[c], parts.y[c], weights[c], n_pos, pieces, *sums,
                                     nout=3))
    if not gradient:
        return float(np.sum(parts.fetch(*[a[0] for a in anchors]))) / n_pos, None
    tables = _tables(parts, [a[2] for a in anchors], False)
    # the anchors' derivatives and tables kept, their values and the tables' totals brought back
    kept, fetched = parts.keep_and_fetch([a[1] for a in anchors] + tables,
                                         [a[0] for a in anchors] + _totals(parts, tables, False))
    own, parts_value = kept[:m], fetched[:m]
    anchor_moments = _Moments(parts, scores, kept[m:], fetched[m:], False, first, last)
    blocks = []
    for c in range(m):
        every = parts.delayed(_every, parts.y[c])
        sums = [anchor_moments.sums(c, every, threshold) for _, _, threshold in pieces]
        blocks.append(parts.delayed(_ap_gradient, scores[c], parts.y[c], weights[c], own[c], pieces, *sums))
    kept = parts.keep(*blocks)
    return float(np.sum(parts_value)) / n_pos, parts.gradient(kept)


def average_precision_linear_terms(z, y, loss, sample_weight=None, gradient=True):
    """``P(sigmoid(z))`` and its derivatives in ``z``, on partitions sorted by ``z``.

    The data term of :class:`skrank.datafits.average_precision.AveragePrecisionObjective`
    (its ``linear_terms``): the sigmoid keeps the order of ``z``.

    Parameters
    ----------
    z : dask.array.Array of shape (n,)
        The linear predictor ``X w + b``, sorted ascending over the chunks.
    y, loss, sample_weight, gradient
        As for :func:`average_precision_terms`.

    Returns
    -------
    value : float
    dz : dask.array.Array of shape (n,) or None
        None without ``gradient``.
    """
    from scipy.special import expit

    h = z.map_blocks(expit, dtype=np.float64)
    value, g = average_precision_terms(h, y, loss, sample_weight, gradient)
    return value, None if g is None else g * (h * (1.0 - h))


# ---------------------------------------------------------------------------------------------
# back to the rows' order


def _split_by_chunk(positions, values, bounds):
    """The block's values grouped by the output chunk of their positions: (local positions, values) each."""
    positions = np.asarray(positions, dtype=np.int64)
    chunk = np.searchsorted(bounds, positions, side="right") - 1
    order = np.argsort(chunk, kind="stable")
    cuts = np.searchsorted(chunk[order], np.arange(bounds.shape[0]))
    return tuple((positions[order[a:b]] - bounds[c], np.asarray(values)[order[a:b]])
                 for c, (a, b) in enumerate(zip(cuts[:-1], cuts[1:])))


def _assemble(size, *pieces):
    out = np.full(size, np.nan)
    for local, values in pieces:
        out[local] = values
    return out


def rows_in_input_order(values, positions, chunks):
    """Values given in the sorted order, put back in the order of the rows.

    Parameters
    ----------
    values : dask.array.Array of shape (n,)
        One value per row, in the order of the sorted partitions (the
        gradient of :func:`partial_auc_terms`, say).
    positions : dask.array.Array of int of shape (n,)
        The row of each value (the sort's permutation, chunked like
        ``values``): a permutation of ``0 .. n - 1``.
    chunks : tuple of int
        The row chunks of the result (``X.chunks[0]``).

    Returns
    -------
    dask.array.Array of shape (n,)
        ``out[positions[j]] = values[j]``, chunked by ``chunks``; each
        output chunk is put together on a worker from the pieces of every
        input chunk.
    """
    import dask

    chunks = tuple(int(c) for c in chunks)
    bounds = np.concatenate([[0], np.cumsum(chunks)]).astype(np.int64)
    value_blocks = _blocks(values, "values")
    position_blocks = _blocks(positions, "positions", like=values)
    split = [dask.delayed(_split_by_chunk, pure=True, nout=len(chunks))(p, v, bounds)
             for p, v in zip(position_blocks, value_blocks)]
    blocks = [dask.delayed(_assemble, pure=True)(size, *[s[c] for s in split])
              for c, size in enumerate(chunks)]
    return _array_of(blocks, chunks)
