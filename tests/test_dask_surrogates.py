"""The partial-AUC and average-precision surrogates on score-sorted Dask partitions.

Each is checked against the in-memory evaluation on the gathered scores
(:func:`range_loss_and_score_gradients`, :func:`ap_surrogate_and_score_gradients`
and the objectives' ``linear_terms``): random scores, scores rounded to a
few values (ties across chunk boundaries), one chunk, many uneven chunks of
1 to 7 rows, chunks of one class, empty chunks and chunks of unknown size,
one-way and two-way ranges, sample and class weights.  A run on an
in-process cluster checks that the driving process receives a few numbers
per chunk, never a vector of the rows.
"""

import numpy as np
import pytest

from skrank.datafits.average_precision import AveragePrecisionObjective, ap_surrogate_and_score_gradients
from skrank.datafits.partial_auc import (
    PartialAUCObjective,
    negative_rank_weights,
    range_loss_and_score_gradients,
)
from skrank.datafits.partitioned_surrogates import (
    average_precision_linear_terms,
    average_precision_terms,
    covers,
    partial_auc_sums,
    partial_auc_terms,
    rows_in_input_order,
)
from skrank.pairwise_losses import get_pairwise_loss

da = pytest.importorskip("dask.array")
dask = pytest.importorskip("dask")

RANGES = [((0.0, 0.1), 0.0), ((0.05, 0.3), 0.0), ((0.0, 1.0), 0.0), ((0.0, 0.5), 0.3), ((0.1, 0.6), 0.25)]
#: the losses the estimators fit by default (the partial-AUC smooth step, the AP squared hinge), the squared
LOSSES = [("smooth_step", 0.7), ("squared_hinge", 1.0), ("squared_hinge", 0.5), ("squared", 1.0)]


@pytest.fixture(autouse=True)
def _synchronous():
    with dask.config.set(scheduler="synchronous"):
        yield


def uneven_chunks(n, rng, low=1, high=7):
    """Chunk sizes of ``low`` to ``high`` rows summing to ``n``."""
    sizes = []
    while sum(sizes) < n:
        sizes.append(int(rng.integers(low, high + 1)))
    sizes[-1] -= sum(sizes) - n
    return tuple(s for s in sizes if s > 0)


def problem(seed, n=60, ties=False, weighted=False):
    rng = np.random.default_rng(seed)
    h = rng.normal(size=n) * 1.5
    if ties:
        h = np.round(h * 2.0) / 2.0  # a few values, many rows each
    y = np.where(rng.random(n) < 0.4, 1, -1)
    y[:2] = (1, -1)
    w = rng.random(n) * 3.0 if weighted else None
    if weighted:
        w[rng.random(n) < 0.1] = 0.0
    return h, y, w


def partitions(h, y, w, chunks):
    """The rows sorted by score, ties in the rows' order, as Dask arrays chunked by ``chunks``."""
    order = np.lexsort((np.arange(h.shape[0]), h))
    take = [da.from_array(a[order], chunks=(chunks,)) for a in (h, y)]
    return order, take[0], take[1], None if w is None else da.from_array(w[order], chunks=(chunks,))


def in_rows(g, order):
    out = np.empty(order.shape[0])
    out[order] = g.compute()
    return out


def reference_range(h, y, loss, fpr_range, tpr_min, w):
    """The in-memory range sums, with the rank weights the objective builds."""
    pos = y > 0
    hp, hn = h[pos], h[~pos]
    wp, wn = (None, None) if w is None else (w[pos], w[~pos])

    def omega(order):
        return negative_rank_weights(hn.size, fpr_range, None if w is None else wn[order])

    def pos_cells(order):
        return negative_rank_weights(hp.size, (0.0, 1.0 - tpr_min), None if w is None else wp[order])

    total, gp, gn = range_loss_and_score_gradients(hp, hn, omega, loss, None, pos_cells if tpr_min else wp)
    g = np.empty(h.size)
    g[pos], g[~pos] = gp, gn
    return total, g


def gradient_scale(h, y, loss, w):
    """A bound on one derivative of the sums: the sums of the smooth step cancel to rounding noise."""
    w = np.ones(h.shape[0]) if w is None else w
    c = sum(abs(p[0]) for p in loss.pieces)
    m = max(abs(p[1]) for p in loss.pieces)
    return 2.0 * c * w[y > 0].sum() * w.max() * (m + 2.0 * np.abs(h - h.mean()).max())


def normalised_scale(h, y, loss, w, fpr_range, tpr_min):
    """:func:`gradient_scale` over the objective's normaliser."""
    v = np.ones(h.shape[0]) if w is None else w
    pos = y > 0
    normaliser = v[pos].sum() * (1.0 - tpr_min) * (fpr_range[1] - fpr_range[0]) * v[~pos].sum()
    return gradient_scale(h, y, loss, w) / normaliser


def assert_matches(value, g, value_ref, g_ref, scale):
    assert value == pytest.approx(value_ref, rel=1e-10, abs=1e-300)
    assert np.max(np.abs(g - g_ref)) <= 1e-10 * (np.max(np.abs(g_ref)) + scale)


#: ``(ties, weighted)``: ``make test`` runs the untied unweighted and the tied weighted problems of each
#: sweep below, ``make test-slow`` the two others.
TIES_WEIGHTED = [(False, False), pytest.param(False, True, marks=pytest.mark.slow),
                 pytest.param(True, False, marks=pytest.mark.slow), (True, True)]


@pytest.mark.parametrize("name, margin", LOSSES)
@pytest.mark.parametrize("fpr_range, tpr_min", RANGES)
@pytest.mark.parametrize("ties, weighted", TIES_WEIGHTED)
def test_range_sums_equal_the_in_memory_sums(name, margin, fpr_range, tpr_min, ties, weighted):
    loss = get_pairwise_loss(name, margin)
    seed = hash((name, fpr_range, ties, weighted)) % 2**32
    h, y, w = problem(seed, ties=ties, weighted=weighted)
    order, H, Y, W = partitions(h, y, w, uneven_chunks(h.shape[0], np.random.default_rng(seed)))
    total, g = partial_auc_sums(H, Y, loss, fpr_range, tpr_min=tpr_min, sample_weight=W)
    assert g.chunks == H.chunks
    total_ref, g_ref = reference_range(h, y, loss, fpr_range, tpr_min, w)
    assert_matches(total, in_rows(g, order), total_ref, g_ref, gradient_scale(h, y, loss, w))


@pytest.mark.parametrize("chunks", ["one", "many", "by_class", "empty"])
@pytest.mark.parametrize("fpr_range, tpr_min", [((0.05, 0.3), 0.0), ((0.0, 0.5), 0.3)])
def test_partial_auc_terms_equal_the_objective(chunks, fpr_range, tpr_min):
    """Class weights times sample weights, as the estimator passes them; ties straddling the chunks."""
    rng = np.random.default_rng(3)
    n = 80
    h = np.round(rng.normal(size=n) * 2.0) / 2.0
    y = np.where(h + 0.8 * rng.normal(size=n) > 0.5, 1, -1)
    w = rng.random(n) * np.where(y > 0, 4.0, 0.5)
    sizes = {"one": (n,), "many": uneven_chunks(n, rng), "by_class": (30, 1, 1, 8, 40),
             "empty": (10, 0, 25, 0, 45)}[chunks]
    loss = get_pairwise_loss("smooth_step", 0.6)
    for weights in (None, w):
        order, H, Y, W = partitions(h, y, weights, sizes)
        objective = PartialAUCObjective(np.zeros((n, 1)), y, fpr_range, loss, 0.0, sample_weight=weights,
                                        tpr_min=tpr_min)
        value_ref, g_ref = objective.linear_terms(h)
        value, g = partial_auc_terms(H, Y, loss, fpr_range, tpr_min=tpr_min, sample_weight=W)
        assert g.chunks == H.chunks
        scale = normalised_scale(h, y, loss, weights, fpr_range, tpr_min)
        assert_matches(value, in_rows(g, order), value_ref, g_ref, scale)
        alone, none = partial_auc_terms(H, Y, loss, fpr_range, tpr_min=tpr_min, sample_weight=W,
                                        gradient=False)
        assert none is None and alone == pytest.approx(value_ref, rel=1e-10)


def test_chunks_of_one_class_and_of_unknown_size():
    """Chunks that hold positives only or negatives only, and the unknown sizes of a filtered array."""
    rng = np.random.default_rng(5)
    n = 70
    h = np.sort(rng.normal(size=n))
    y = np.where(np.arange(n) % 20 < 8, 1, -1)  # runs of 8 positives and 12 negatives
    keep = rng.random(n) < 0.8
    loss = get_pairwise_loss("smooth_step", 0.5)
    sizes = uneven_chunks(n, rng, 3, 9)
    H, Y = (da.from_array(a, chunks=(sizes,)) for a in (h, y))
    H, Y = H[da.from_array(keep, chunks=H.chunks)], Y[da.from_array(keep, chunks=H.chunks)]
    assert any(np.isnan(c) for c in H.chunks[0])
    total, g = partial_auc_sums(H, Y, loss, (0.05, 0.4))
    total_ref, g_ref = reference_range(h[keep], y[keep], loss, (0.05, 0.4), 0.0, None)
    assert_matches(total, g.compute(), total_ref, g_ref, gradient_scale(h[keep], y[keep], loss, None))
    hinge = get_pairwise_loss("squared_hinge", 0.5)
    value, g = average_precision_terms(H, Y, hinge)
    value_ref, g_ref = ap_surrogate_and_score_gradients(h[keep], y[keep], hinge)
    assert_matches(value, g.compute(), value_ref, g_ref, 0.0)


@pytest.mark.parametrize("margin", [0.5, 1.0, 0.05])
@pytest.mark.parametrize("ties, weighted", TIES_WEIGHTED)
@pytest.mark.parametrize("chunks", ["one", "many"])
def test_average_precision_equals_the_in_memory_surrogate(margin, ties, weighted, chunks):
    seed = hash((margin, ties, weighted, chunks)) % 2**32
    h, y, w = problem(seed, n=70, ties=ties, weighted=weighted)
    h = 1.0 / (1.0 + np.exp(-h))  # the surrogate's scores are sigmoids
    rng = np.random.default_rng(seed)
    order, H, Y, W = partitions(h, y, w, (70,) if chunks == "one" else uneven_chunks(70, rng))
    loss = get_pairwise_loss("squared_hinge", margin)
    value, g = average_precision_terms(H, Y, loss, W)
    value_ref, g_ref = ap_surrogate_and_score_gradients(h, y, loss, w)
    assert_matches(value, in_rows(g, order), value_ref, g_ref, 0.0)
    alone, none = average_precision_terms(H, Y, loss, W, gradient=False)
    assert none is None and alone == pytest.approx(value_ref, rel=1e-10)


def test_average_precision_linear_terms_equal_the_objective():
    rng = np.random.default_rng(11)
    n = 90
    z = np.round(rng.normal(size=n) * 3.0) / 3.0
    y = np.where(z + rng.normal(size=n) > 0.7, 1, -1)
    w = rng.random(n) * np.where(y > 0, 2.0, 0.25)  # class weights times sample weights
    loss = get_pairwise_loss("squared_hinge", 0.5)
    for weights in (None, w):
        objective = AveragePrecisionObjective(np.zeros((n, 1)), y, loss, 0.0, sample_weight=weights)
        value_ref, g_ref = objective.linear_terms(z)
        order, Z, Y, W = partitions(z, y, weights, uneven_chunks(n, rng))
        value, g = average_precision_linear_terms(Z, Y > 0, loss, W)  # boolean labels
        assert_matches(value, in_rows(g, order), value_ref, g_ref, 0.0)


def test_covers_the_sums_of_one_sided_quadratics_only():
    assert covers(get_pairwise_loss("squared_hinge")) and covers(get_pairwise_loss("squared"))
    assert covers(get_pairwise_loss("smooth_step", 0.3))
    for name in ("logistic", "sigmoid"):
        loss = get_pairwise_loss(name)
        assert not covers(loss)
        H = da.from_array(np.arange(4.0), chunks=2)
        Y = da.from_array(np.array([1, -1, 1, -1]), chunks=2)
        with pytest.raises(ValueError, match="covers"):
            partial_auc_sums(H, Y, loss, (0.0, 1.0))
        with pytest.raises(ValueError, match="covers"):
            average_precision_terms(H, Y, loss)


def test_bad_partitions_are_refused():
    loss = get_pairwise_loss("squared_hinge")
    Y = da.from_array(np.array([1, -1, 1, -1]), chunks=2)
    H = da.from_array(np.arange(4.0), chunks=2)
    with pytest.raises(ValueError, match="sorted ascending"):
        partial_auc_sums(da.from_array(np.array([0.0, 1.0, 0.5, 2.0]), chunks=2), Y, loss, (0.0, 1.0))
    with pytest.raises(ValueError, match="sorted ascending"):
        average_precision_terms(da.from_array(np.array([1.0, 0.0, 2.0, 3.0]), chunks=2), Y, loss)
    with pytest.raises(ValueError, match="NaN"):
        partial_auc_sums(da.from_array(np.array([0.0, 1.0, np.nan, 2.0]), chunks=2), Y, loss, (0.0, 1.0))
    with pytest.raises(ValueError, match="sample_weight must be finite and nonnegative"):
        W = da.from_array(np.array([1.0, -1.0, 1.0, 1.0]), chunks=2)
        partial_auc_terms(H, Y, loss, (0.0, 1.0), sample_weight=W)
    with pytest.raises(ValueError, match="fpr_range"):
        partial_auc_terms(H, Y, loss, (0.0, 0.1))  # less than one negative in the range
    with pytest.raises(ValueError, match="tpr_min"):
        partial_auc_terms(H, Y, loss, (0.0, 1.0), tpr_min=1.0)


def test_rows_in_input_order_inverts_the_sort():
    rng = np.random.default_rng(2)
    n = 50
    values = rng.normal(size=n)
    positions = rng.permutation(n)
    sizes = uneven_chunks(n, rng)
    values_sorted, positions_sorted = (da.from_array(a, chunks=(sizes,)) for a in (values, positions))
    out = rows_in_input_order(values_sorted, positions_sorted, (20, 5, 0, 25))
    expected = np.empty(n)
    expected[positions] = values
    assert out.chunks == ((20, 5, 0, 25),)
    np.testing.assert_array_equal(out.compute(), expected)


def test_the_driver_receives_a_few_numbers_per_chunk():
    """On a cluster, what comes back to the driving process is a few numbers per chunk, never a row vector."""
    distributed = pytest.importorskip("distributed")
    rng = np.random.default_rng(4)
    n = 3000
    h, y, w = problem(4, n=n, ties=True, weighted=True)
    sizes = uneven_chunks(n, rng, 200, 400)
    order, H, Y, W = partitions(h, y, w, sizes)
    gathered = []
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                                  dashboard_address=":0") as cluster, distributed.Client(cluster) as client:
        gather = client.gather

        def recording_gather(futures, *args, **kwargs):
            result = gather(futures, *args, **kwargs)
            gathered.append(result)
            return result

        client.gather = recording_gather
        with dask.config.set(scheduler=client.get):
            loss = get_pairwise_loss("smooth_step", 0.5)
            value, g = partial_auc_terms(H, Y, loss, (0.05, 0.3), tpr_min=0.2, sample_weight=W)
            ap_value, ap_g = average_precision_terms(H, Y, get_pairwise_loss("squared_hinge", 0.5), W)
            sizes_back = [np.size(a) for a in _arrays(gathered)]
            grads = in_rows(g, order), in_rows(ap_g, order)
    assert gathered and max(sizes_back) <= 12 and sum(sizes_back) <= 200 * len(sizes)
    objective = PartialAUCObjective(np.zeros((n, 1)), y, (0.05, 0.3), loss, 0.0, sample_weight=w, tpr_min=0.2)
    value_ref, g_ref = objective.linear_terms(h)
    assert_matches(value, grads[0], value_ref, g_ref, normalised_scale(h, y, loss, w, (0.05, 0.3), 0.2))
    ap_ref, ap_g_ref = ap_surrogate_and_score_gradients(h, y, get_pairwise_loss("squared_hinge", 0.5), w)
    assert_matches(ap_value, grads[1], ap_ref, ap_g_ref, 0.0)


def _arrays(results):
    """Every array or number in nested tuples and lists."""
    for item in results:
        if isinstance(item, (list, tuple)):
            yield from _arrays(item)
        else:
            yield item
