"""The ranking classifiers' anchored objective with its vectors of length ``n`` on Dask workers.

:class:`WorkerAnchoredObjective` is the
:class:`~skrank.datafits.logistic_anchor.LogisticAnchoredObjective` of a
Dask ``X`` computed by a ``dask.distributed`` client's workers, for a rank
term whose pairwise loss :func:`~skrank.datafits.partitioned_surrogates.covers`
covers: the scores ``X w``, the labels, the weights, the sort of the scores
and the derivatives stay on the workers, and the driving process receives
reductions (the values, ``[X, 1]^T`` of the derivatives, a few numbers per
partition of the sort).  Each evaluation runs:

1. the scores ``s = X w`` and ``z = s + b`` on the workers
   (:meth:`skrank.backends.dask_design.DaskDesign.worker_matvec`);
2. the logistic term, ``sum_i p_i log(1 + exp(-y_i z_i))``, and its
   derivatives, elementwise and one sum;
3. the rank term: the scores sorted with their labels, weights and rows
   (:func:`skrank.backends.dask_rank.sort_by_key`), the surrogate and its
   score gradient on the sorted partitions
   (:mod:`skrank.datafits.partitioned_surrogates`), the gradient put back
   in the rows' order (:func:`~skrank.datafits.partitioned_surrogates.rows_in_input_order`);
4. ``[X, 1]^T`` of the mixed derivatives, summed on the workers.

The training metric (partial AUC or average precision) of the ranking
check is computed on the sorted partitions too (:func:`sorted_metric`).
"""

import numpy as np

from ..backends.dask_design import persist, persist_and_fetch
from ..backends.dask_rank import sort_by_key
from .logistic_anchor import LogisticAnchoredObjective
from .partitioned_surrogates import (
    average_precision_linear_terms,
    covers,
    partial_auc_terms,
    rows_in_input_order,
)
from .scale import gradient_test_scale, linear_model_scale


class PartialAUCTerm:
    """The partial-AUC surrogate of the scores ``X w`` (one-way or two-way range), on sorted partitions.

    Parameters
    ----------
    loss : skrank.pairwise_losses.PairwiseLoss
    fpr_range : tuple (alpha, beta)
    tpr_min : float, default=0.0
    """

    #: the pairs ignore an intercept: the term ranks ``X w``
    fits_intercept = False

    def __init__(self, loss, fpr_range, tpr_min=0.0):
        self.loss = loss
        self.fpr_range = tuple(float(a) for a in fpr_range)
        self.tpr_min = float(tpr_min)

    def terms(self, keys, y, weight, gradient):
        """The surrogate and its derivatives in the sorted ``keys`` (``X w``)."""
        return partial_auc_terms(keys, y, self.loss, self.fpr_range, tpr_min=self.tpr_min,
                                 sample_weight=weight, gradient=gradient)

    def metric(self, keys, y, weight):
        """The (two-way) partial AUC of the sorted ``keys``."""
        return sorted_metric(keys, y, weight, "roc", fpr_range=self.fpr_range, tpr_min=self.tpr_min)

    def set_margin(self, margin):
        """Replace the pairwise loss by the same loss with margin ``margin``."""
        from ..pairwise_losses import get_pairwise_loss

        self.loss = get_pairwise_loss(self.loss.name, margin)


class AveragePrecisionTerm:
    """The average-precision surrogate of the sigmoid scores ``sigmoid(X w + b)``, on sorted partitions.

    Parameters
    ----------
    loss : skrank.pairwise_losses.PairwiseLoss
    """

    fits_intercept = True

    def __init__(self, loss):
        self.loss = loss

    def terms(self, keys, y, weight, gradient):
        """The surrogate and its derivatives in the sorted linear predictor ``keys``."""
        return average_precision_linear_terms(keys, y, self.loss, weight, gradient)

    def metric(self, keys, y, weight):
        """The average precision of the sorted ``keys``."""
        return sorted_metric(keys, y, weight, "precision")


def takes(design, term, rank_weight):
    """Whether :class:`WorkerAnchoredObjective` fits the problem: vectors on workers, a covered loss.

    Parameters
    ----------
    design : skrank.backends.design.Design
        The design of ``X`` (it says where the vectors live).
    term : PartialAUCTerm, AveragePrecisionTerm or None
        The rank term (None: none has a form on the workers).
    rank_weight : float
        The weight of the rank term, below 1 (an anchored fit).

    Returns
    -------
    bool
    """
    return term is not None and rank_weight < 1.0 and covers(term.loss) and design.vectors_on_workers()


def _sign_block(y):
    return np.where(np.asarray(y) > 0, 1.0, -1.0)


def _square_sums_block(X, p):
    X = np.asarray(X, dtype=np.float64)
    return (np.asarray(p, dtype=np.float64) @ (X * X),)


class WorkerAnchoredObjective(LogisticAnchoredObjective):
    """``(1 - r) L(w, b) + r R(w, b) + alpha ||w||^2 / 2`` with its ``n``-vectors on Dask workers.

    The objective of :class:`~skrank.datafits.logistic_anchor.LogisticAnchoredObjective`
    (equal to it up to the order of the sums), evaluated as the module
    docstring says.

    Parameters
    ----------
    rank_objective : PartialAUCTerm or AveragePrecisionTerm
        The rank term.
    X : dask.array.Array of shape (n_samples, n_features)
        Training data, chunked by rows.
    y : dask.array.Array or ndarray of shape (n_samples,)
        Labels in {-1, +1}; a NumPy ``y`` is sent to the workers chunked like ``X``.
    rank_weight : float
        ``r`` in ``[0, 1)``.
    alpha : float
        Strength of the l2 penalty on ``w``.
    sample_weight : dask.array.Array or ndarray of shape (n_samples,) or None, default=None
        Positive weights.
    """

    def __init__(self, rank_objective, X, y, rank_weight, alpha, sample_weight=None):
        from ..backends.dispatch import make_design

        self.rank_objective = rank_objective
        self.X = X
        self.design = make_design(X, fit_intercept=True)
        self.sign = self.design.worker_vector(y, _sign_block)
        self.weight = None if sample_weight is None else self.design.worker_vector(sample_weight, np.asarray)
        if self.weight is None:
            self.row_weight = None
            self._total = float(X.shape[0])
        else:
            self._total = float(self.weight.sum().compute())
            self.row_weight = self.weight / self._total
        self.rank_weight = float(rank_weight)
        self.alpha = float(alpha)

    # --- the terms ------------------------------------------------------------------------
    def _p(self):
        return 1.0 / self._total if self.weight is None else self.row_weight

    def _logistic_terms(self, z, gradient):
        import dask.array as da

        m = self.sign * z
        e = da.exp(-abs(m))
        value = (self._p() * (da.log1p(e) - da.minimum(m, 0.0))).sum()
        if not gradient:
            return float(value.compute()), None
        inv = 1.0 / (e + 1.0)
        dz = -(da.where(m >= 0.0, e * inv, inv) * self.sign * self._p())
        (dz,), (value,) = persist_and_fetch([dz], [value])  # one submission
        return float(value), dz

    def _rank_terms(self, keys, gradient):
        """The rank term and, when asked, its derivatives in ``keys`` in the rows' order."""
        sorted_keys, rows, y, *weight = sort_by_key(keys, self.sign, *([] if self.weight is None
                                                                       else [self.weight]))
        value, g = self.rank_objective.terms(sorted_keys, y, weight[0] if weight else None, gradient)
        if not gradient:
            return value, None
        # made while the sorted partitions are held: the result holds its own chunks
        return value, persist(rows_in_input_order(g, rows, self.X.chunks[0]))

    def _scores(self, theta):
        """``s = X w`` on the workers and ``z = s + b`` (lazy)."""
        s = self.design.worker_matvec(np.append(theta[:-1], 0.0))
        return s, s + float(theta[-1])

    def _data_term(self, theta, gradient):
        r = self.rank_weight
        s, z = self._scores(theta)
        value, dz = self._logistic_terms(z, gradient) if r < 1.0 else (0.0, None)
        value *= 1.0 - r
        if r > 0.0:
            keys = z if self.rank_objective.fits_intercept else s
            rank_value, rank_dz = self._rank_terms(keys, gradient)
            value += r * rank_value
            if gradient:
                dz = (1.0 - r) * dz + r * rank_dz
        elif gradient:
            dz = (1.0 - r) * dz
        if not gradient:
            return value, None
        # the derivatives' last elementwise steps run in the pass of [X, 1]^T: one submission
        return value, self.design.worker_rmatvec(dz)

    def logistic_value_and_grad(self, theta, gradient=True):
        _, z = self._scores(theta)
        value, dz = self._logistic_terms(z, gradient)
        return value, None if dz is None else self.design.worker_rmatvec(dz)

    def variable_scale(self):
        """The units of ``theta`` (``Datafit.variable_scale``), their sums made on the workers."""
        if getattr(self, "_variable_scale", None) is None:
            import dask.array as da

            p = self._p() if self.weight is not None else da.full(self.X.shape[0], 1.0 / self._total,
                                                                   chunks=(self.X.chunks[0],))
            self.design.passes += 1
            with np.errstate(over="ignore", invalid="ignore"):
                rms = np.sqrt(self.design.worker_sum(_square_sums_block, p)[0])
            self._variable_scale = linear_model_scale(self.design, alpha=self.alpha, rms=rms)
            self._gradient_scale = gradient_test_scale(self._variable_scale, rms, self.design.fit_intercept)
        return self._variable_scale

    # --- what the estimators ask besides the solver ------------------------------------------
    def ranked_score_spread(self, theta):
        """The (weighted) standard deviation of the scores that the rank term ranks, at ``theta``."""
        s, z = self._scores(theta)
        keys = z if self.rank_objective.fits_intercept else s
        p = self._p()
        mean = float((p * keys).sum().compute())
        return float(np.sqrt(float((p * (keys - mean) ** 2).sum().compute())))

    def segment_metric(self, start, end):
        """The training metric along the segment from ``start`` to ``end``, a function of the fraction.

        The scores are linear in ``theta``: those of the segment's points are
        made on the workers from the two ends' scores.
        """
        (s0, z0), (s1, z1) = self._scores(start), self._scores(end)
        k0, k1 = (z0, z1) if self.rank_objective.fits_intercept else (s0, s1)
        weights = [] if self.weight is None else [self.weight]

        def metric(fraction):
            keys = k0 if fraction == 0.0 else k0 + fraction * (k1 - k0)
            sorted_keys, _, y, *w = sort_by_key(keys, self.sign, *weights)
            return self.rank_objective.metric(sorted_keys, y, w[0] if w else None)

        return metric

    def platt_inputs(self, coef):
        """The scores ``X coef`` and the labels and weights, on the workers, for the Platt fit."""
        s = self.design.worker_matvec(np.append(coef, 0.0))
        return s, self.sign, self.weight


# ---------------------------------------------------------------------------------------------
# the training metric on sorted partitions


def _partition_stats(h, y, w):
    """``[n, first, last, W+, W-, last group's W+, W-]`` of one sorted partition."""
    h = np.asarray(h)
    out = np.zeros(7)
    out[0] = h.shape[0]
    if h.shape[0] == 0:
        out[1:3] = np.nan
        return out
    pos = np.asarray(y) > 0
    w = np.ones(h.shape[0]) if w is None else np.asarray(w, dtype=np.float64)
    out[1], out[2] = h[0], h[-1]
    out[3], out[4] = w[pos].sum(), w[~pos].sum()
    last = h == h[-1]
    out[5], out[6] = w[pos & last].sum(), w[~pos & last].sum()
    return out


def _excess(x, t, level):
    """The polyline ``max(t - level, 0)`` through ``(x, t)``, the crossings of ``level`` added."""
    k = np.flatnonzero((t[:-1] < level) & (t[1:] > level))
    xc = x[k] + (level - t[k]) / (t[k + 1] - t[k]) * (x[k + 1] - x[k])
    return np.insert(x, k + 1, xc), np.maximum(np.insert(t, k + 1, level) - level, 0.0)


def _area(x, t, alpha, beta):
    """The area under the polyline through ``(x, t)`` (``x`` nondecreasing) over ``[alpha, beta]``."""
    x0, x1, t0, t1 = x[:-1], x[1:], t[:-1], t[1:]
    lo, hi = np.maximum(x0, alpha), np.minimum(x1, beta)
    keep = (hi > lo) & (x1 > x0)
    x0, x1, t0, t1, lo, hi = x0[keep], x1[keep], t0[keep], t1[keep], lo[keep], hi[keep]
    slope = (t1 - t0) / (x1 - x0)
    return float(np.sum(0.5 * ((t0 + slope * (lo - x0)) + (t0 + slope * (hi - x0))) * (hi - lo)))


def _partition_metric(h, y, w, above, tied_before, skip_last, totals, kind, fpr_range, tpr_min):
    """One partition's share of the metric, from its groups of tied scores that it owns.

    ``above``: the positives' and negatives' weight of the later partitions;
    ``tied_before``: those of the earlier partitions' rows tied with the first
    score; ``skip_last``: whether the last group goes on in a later partition
    (which owns it).
    """
    h = np.asarray(h)
    if h.shape[0] == 0:
        return 0.0
    pos = np.asarray(y) > 0
    w = np.ones(h.shape[0]) if w is None else np.asarray(w, dtype=np.float64)
    starts = np.flatnonzero(np.r_[True, h[1:] != h[:-1]])
    gp = np.add.reduceat(np.where(pos, w, 0.0), starts)
    gn = np.add.reduceat(np.where(pos, 0.0, w), starts)
    # from the top score down: the weights at or above each group
    top_p, top_n = above[0] + np.cumsum(gp[::-1]), above[1] + np.cumsum(gn[::-1])
    gp, gn = gp[::-1].copy(), gn[::-1].copy()
    gp[-1] += tied_before[0]
    gn[-1] += tied_before[1]
    top_p[-1] += tied_before[0]
    top_n[-1] += tied_before[1]
    first = 1 if skip_last else 0
    if first >= gp.shape[0]:
        return 0.0
    if kind == "precision":
        tp, fp = top_p[first:], top_n[first:]
        return float(np.sum(gp[first:] * (tp / (tp + fp)))) / totals[0]
    tpr = np.r_[top_p[first] - gp[first], top_p[first:]] / totals[0]
    fpr = np.r_[top_n[first] - gn[first], top_n[first:]] / totals[1]
    if tpr_min > 0.0:
        fpr, tpr = _excess(fpr, tpr, tpr_min)
    return _area(fpr, tpr, fpr_range[0], fpr_range[1])


def sorted_metric(h, y, sample_weight, kind, fpr_range=(0.0, 1.0), tpr_min=0.0):
    """The partial AUC (``kind="roc"``) or average precision (``"precision"``) of sorted scores.

    The metrics of :func:`skrank.metrics.region_area` and
    :func:`skrank.metrics.average_precision` (tied scores one threshold), on
    scores sorted ascending over their chunks: each chunk integrates the
    part of the curve of the groups of tied scores it owns (a group cut by
    chunk boundaries belongs to its last chunk), from the weights above it,
    which the driver adds from a few numbers per chunk.

    Parameters
    ----------
    h : dask.array.Array of shape (n,)
        Scores sorted ascending over the chunks.
    y : dask.array.Array of shape (n,)
        Labels (positive: > 0), chunked like ``h``.
    sample_weight : dask.array.Array of shape (n,) or None
    kind : {"roc", "precision"}
    fpr_range : tuple, default=(0.0, 1.0)
    tpr_min : float, default=0.0

    Returns
    -------
    float
    """
    import dask

    blocks = [list(a.to_delayed().ravel()) for a in (h, y)]
    blocks.append([None] * len(blocks[0]) if sample_weight is None
                  else list(sample_weight.to_delayed().ravel()))
    parts = list(zip(*blocks))
    stats = np.array(dask.compute(*[dask.delayed(_partition_stats, pure=True)(*b) for b in parts]))
    totals = stats[:, 3:5].sum(axis=0)
    nonempty = np.flatnonzero(stats[:, 0] > 0)
    tasks = []
    for j, p in enumerate(nonempty):
        later = nonempty[j + 1:]
        above = stats[later, 3:5].sum(axis=0) if later.size else np.zeros(2)
        skip_last = bool(later.size and stats[later[0], 1] == stats[p, 2])
        tied = np.zeros(2)
        for q in nonempty[:j][::-1]:  # the earlier partitions' rows tied with this one's first score
            if stats[q, 2] != stats[p, 1]:
                break
            tied += stats[q, 5:7]
            if stats[q, 1] != stats[q, 2]:
                break
        tasks.append(dask.delayed(_partition_metric, pure=True)(
            *parts[p], above, tied, skip_last, totals, kind, tuple(fpr_range), float(tpr_min)))
    total = float(np.sum(dask.compute(*tasks)))
    if kind == "precision":
        return total
    alpha, beta = fpr_range
    return float(np.clip(total / ((beta - alpha) * (1.0 - tpr_min)), 0.0, 1.0))
