"""The rank step on Dask workers equals the in-memory sort and PAVA (``pooled_projection``)."""

import numpy as np
import pytest

from skrank.backends import dask_rank
from skrank.backends.dask_rank import DaskSortedRankStep
from skrank.datafits.smoothed_risk import pooled_projection
from skrank.risks import ERM, ExponentialSpectral, Extremile, HumanAligned, RankedRange, Superquantile, TopK

da = pytest.importorskip("dask.array")
dask = pytest.importorskip("dask")

RISKS = [ERM(), Superquantile(0.7), Superquantile(0.0), ExponentialSpectral(3.0), Extremile(2.5), TopK(0.3),
         TopK(3)]
TOL = 1e-12


@pytest.fixture(autouse=True)
def synchronous(monkeypatch):
    """The synchronous scheduler, and partitions of 8 rows by default: many, on tiny data."""
    monkeypatch.setattr(dask_rank, "_PARTITION_ROWS", 8)
    with dask.config.set(scheduler="synchronous"):
        yield


def _in_memory(keys, mu, risk, masses=None, weights=None):
    """``pooled_projection``'s ``q`` after a stable sort, the order and the blocks' first positions."""
    n = keys.size
    order = np.argsort(keys, kind="stable")
    weights = masses if weights is None else weights
    sigma = risk.weights(n) if masses is None else risk.weights(n, weights[order])
    q = keys.copy()
    starts = np.empty(n + 1, dtype=np.int64)
    nb = pooled_projection(q, order, sigma, mu, starts, np.ones(1) if masses is None else masses)
    return q, order, starts[: nb + 1]


def _tol(q, keys, mu, masses):
    """``TOL`` of the largest weight, plus the PAVA's own rounding: ``(keys - mean_B(keys)) / mu`` loses
    a few ulps of the keys over ``mu`` (times a mass), whatever order sums a block."""
    m = 1.0 if masses is None else masses.max()
    return TOL * np.abs(q).max() + 16 * np.finfo(float).eps * np.abs(keys).max() * m / mu


def _chunks(rng, n, kind):
    if kind == "one":
        return (n,)
    if kind == "tiny":  # 1 to 7 rows a chunk
        sizes = []
        while sum(sizes) < n:
            sizes.append(int(rng.integers(1, 8)))
        sizes[-1] -= sum(sizes) - n
        return tuple(s for s in sizes if s > 0)
    cuts = np.sort(rng.choice(np.arange(1, n), size=min(6, n - 1), replace=False))
    return tuple(np.diff(np.concatenate(([0], cuts, [n]))).tolist())


def _keys(rng, n, kind):
    if kind == "random":
        return rng.standard_normal(n) * 3.0
    if kind == "ties":  # many ties, on a grid whose sums are inexact
        return rng.integers(0, max(2, n // 8), n) * 0.1 - 1.0
    if kind == "equal":
        return np.full(n, 0.7)
    if kind == "sorted":
        return np.sort(rng.standard_normal(n))
    return np.sort(rng.standard_normal(n))[::-1].copy()


def _check_projection(keys, mu, risk, chunks, masses=None, weights=None, n_partitions=None):
    q0, order, starts = _in_memory(keys, mu, risk, masses, weights)

    def lazy(v):
        return None if v is None else da.from_array(v, chunks=(chunks,))

    step = DaskSortedRankStep(risk, lazy(masses), lazy(weights), n_partitions=n_partitions)
    q, pooled = step.project(lazy(keys), mu)
    assert q.chunks == (chunks,)
    np.testing.assert_allclose(q.compute(), q0, rtol=0, atol=_tol(q0, keys, mu, masses))
    return q0, order, starts, pooled


#: Each kind of keys in each kind of chunks, with a tiny, a middle and a huge ``mu`` in turn.
CASES = [(kind, chunks, (1e-9, 0.3, 1e9)[(k + c) % 3])
         for k, kind in enumerate(("random", "ties", "equal", "sorted", "reversed"))
         for c, chunks in enumerate(("one", "tiny", "uneven"))]


@pytest.mark.parametrize("risk", RISKS, ids=repr)
@pytest.mark.parametrize("weighted", [False, True])
def test_projection_equals_the_in_memory_pava(risk, weighted):
    rng = np.random.default_rng(7)
    for kind, chunk_kind, mu in CASES:
        n = int(rng.integers(20, 90))
        keys = _keys(rng, n, kind)
        masses = rng.uniform(0.2, 3.0, n) if weighted else None
        _check_projection(keys, mu * np.ptp(np.r_[keys, 0.0, 1.0]), risk, _chunks(rng, n, chunk_kind), masses)


def test_projection_with_sample_weights_apart_from_the_masses_and_counts_of_weight():
    rng = np.random.default_rng(3)
    n = 60
    keys, masses = rng.standard_normal(n), rng.uniform(0.5, 1.5, n)
    weights = rng.uniform(0.1, 4.0, n) * 10.0  # TopK(3): 3 units of a total of about 120
    for risk in (TopK(3), RankedRange(m=2, k=20), Extremile(2.0)):
        _check_projection(keys, 0.5, risk, (7, 20, 3, 30), masses, weights)


def test_a_merge_longer_than_the_summaries_asks_for_more(monkeypatch):
    """A pooled block across several partitions with many blocks each: the summaries grow until the
    merge closes (from one block a side)."""
    monkeypatch.setattr(dask_rank, "_FIRST_SUMMARY", 1)
    rng = np.random.default_rng(5)
    n = 600
    keys = np.arange(n, dtype=np.float64) + rng.uniform(0, 0.5, n)  # singletons but for the drop
    chunks = (100,) * 6
    for risk, mu in [(TopK(250), 250 * 150.0), (TopK(310), 310 * 40.0), (Superquantile(0.5), 300 * 500.0)]:
        q0, order, starts, pooled = _check_projection(keys, mu, risk, chunks)
        sizes = np.diff(starts)
        assert sizes.max() > 30  # the pooled block around the drop of the weights spans partitions
        assert pooled.n_pooled == np.count_nonzero(sizes > 1)
        _check_projection(keys, mu, risk, chunks, masses=rng.uniform(0.5, 2.0, n))


def _blocks_of(ids):
    """The rows of each pooled block, from the rows' block ids."""
    return [np.flatnonzero(ids == b) for b in range(ids.max() + 1)]


@pytest.mark.parametrize("weighted", [False, True])
def test_pooled_blocks_are_the_in_memory_blocks_and_their_sums(weighted):
    rng = np.random.default_rng(11)
    for risk, mu in [(ExponentialSpectral(4.0), 300.0), (Superquantile(0.6), 30.0), (TopK(0.2), 5.0),
                     (Extremile(3.0), 500.0)]:
        n = 300
        keys = rng.standard_normal(n)  # continuous: no two blocks of equal means
        masses = rng.uniform(0.5, 2.0, n) if weighted else None
        _, order, starts, pooled = _check_projection(keys, mu, risk, _chunks(rng, n, "uneven"), masses)
        sizes = np.diff(starts)
        members = [order[a:b] for a, b in zip(starts[:-1], starts[1:]) if b - a > 1]
        assert pooled.n_pooled == len(members) > 0
        ids = pooled.block_id.compute()
        assert [sorted(b) for b in _blocks_of(ids)] == [sorted(b) for b in members]
        assert np.all(ids[order[np.repeat(sizes == 1, sizes)]] == -1)
        m = np.ones(n) if masses is None else masses
        np.testing.assert_allclose(pooled.block_mass, [m[b].sum() for b in members], rtol=1e-13)
        V = rng.standard_normal((n, 3))
        sums = pooled.block_sums(da.from_array(V, chunks=(37, 3)))
        np.testing.assert_allclose(sums, [V[b].sum(axis=0) for b in members], rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(pooled.block_sums(da.from_array(V[:, 0], chunks=50))[:, 0], sums[:, 0])
        outer = sum(np.outer(V[b].sum(axis=0), V[b].sum(axis=0)) / m[b].sum() for b in members)
        np.testing.assert_allclose(pooled.block_outer(da.from_array(V, chunks=(60, 3))), outer, rtol=1e-12)


def test_tied_keys_give_one_pooled_block_per_tie_where_the_weights_rise():
    """All-equal keys with rising weights pool into one block, of the total mass, across every chunk."""
    n = 50
    keys = np.full(n, 2.5)
    rng = np.random.default_rng(2)
    masses = rng.uniform(0.5, 2.0, n)
    _, _, starts, pooled = _check_projection(keys, 1e-3, Extremile(2.0), _chunks(rng, n, "tiny"), masses)
    assert starts.tolist() == [0, n] and pooled.n_pooled == 1
    np.testing.assert_allclose(pooled.block_mass, [masses.sum()], rtol=1e-14)
    assert np.all(pooled.block_id.compute() == 0)


@pytest.mark.parametrize("risk", RISKS + [RankedRange(m=3, k=12)], ids=repr)
def test_risk_value_equals_the_risks_value(risk):
    rng = np.random.default_rng(4)
    for kind in ("random", "ties", "equal", "reversed"):
        for chunk_kind in ("one", "tiny", "uneven"):
            n = int(rng.integers(15, 80))
            losses = np.abs(_keys(rng, n, kind))
            chunks = _chunks(rng, n, chunk_kind)
            lazy = da.from_array(losses, chunks=(chunks,))
            expected = risk.value(losses)
            assert DaskSortedRankStep(risk).risk_value(lazy) == pytest.approx(expected, rel=1e-13, abs=1e-300)
            sample_weight = rng.uniform(0.5, 3.0, n) * 5.0
            step = DaskSortedRankStep(risk, da.from_array(sample_weight, chunks=(chunks,)))
            expected = risk.value(losses, sample_weight)
            tol = 1e-14 * np.abs(losses).max()
            assert step.risk_value(lazy) == pytest.approx(expected, rel=1e-12, abs=tol)


@pytest.mark.parametrize("n_partitions", [1, 2, 5, 40])
def test_any_number_of_partitions(n_partitions):
    rng = np.random.default_rng(n_partitions)
    keys = rng.integers(0, 12, 97) * 0.3
    _check_projection(keys, 0.8, ExponentialSpectral(2.0), (13, 40, 1, 43), n_partitions=n_partitions)


def test_on_a_two_worker_local_cluster():
    distributed = pytest.importorskip("distributed")
    rng = np.random.default_rng(9)
    n = 400
    keys, masses = rng.standard_normal(n), rng.uniform(0.5, 2.0, n)
    with dask.config.set(scheduler=None), \
            distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                                     dashboard_address=":0") as cluster, distributed.Client(cluster):
        chunks = (100, 60, 140, 100)
        _, order, starts, pooled = _check_projection(keys, 3.0, Superquantile(0.8), chunks, masses)
        sizes = np.diff(starts)
        members = [order[a:b] for a, b in zip(starts[:-1], starts[1:]) if b - a > 1]
        sums = pooled.block_sums(da.from_array(masses, chunks=100))
        np.testing.assert_allclose(sums[:, 0], [masses[b].sum() for b in members], rtol=1e-13)
        step = DaskSortedRankStep(Superquantile(0.8), da.from_array(masses, chunks=100))
        assert step.risk_value(da.from_array(keys, chunks=100)) == pytest.approx(
            Superquantile(0.8).value(keys, masses), rel=1e-13)
        assert sizes.max() > 1


def test_errors_name_the_input():
    keys = da.from_array(np.array([1.0, np.nan, 2.0]), chunks=2)
    with pytest.raises(ValueError, match="keys contain NaN"):
        DaskSortedRankStep(ERM()).project(keys, 1.0)
    good = da.from_array(np.array([1.0, 0.0, 2.0]), chunks=2)
    with pytest.raises(ValueError, match="mu must be positive"):
        DaskSortedRankStep(ERM()).project(good, 0.0)
    with pytest.raises(ValueError, match="masses and sample weights must be positive"):
        DaskSortedRankStep(ERM(), da.from_array(np.array([1.0, 0.0, 2.0]), chunks=2)).project(good, 1.0)
    with pytest.raises(ValueError, match="depend on the loss values"):
        DaskSortedRankStep(HumanAligned())
    with pytest.raises(ValueError, match="TopK needs 1 <= k <= n"):
        DaskSortedRankStep(TopK(5)).project(good, 1.0)
    with pytest.raises(ValueError, match="sample_weight"):
        DaskSortedRankStep(TopK(50), good + 1.0).risk_value(good)


def test_lazy_keys_and_masses_in_other_chunks():
    """Keys computed from ``X`` (not persisted) and masses chunked otherwise: rechunked like the keys."""
    rng = np.random.default_rng(8)
    X = rng.standard_normal((90, 3))
    masses = rng.uniform(0.5, 2.0, 90)
    keys = (da.from_array(X, chunks=(20, 3)) @ np.ones(3)) ** 2
    step = DaskSortedRankStep(Extremile(2.0), da.from_array(masses, chunks=45))
    q, _ = step.project(keys, 2.0)
    plain = (X @ np.ones(3)) ** 2
    q0, _, _ = _in_memory(plain, 2.0, Extremile(2.0), masses)
    assert q.chunks == keys.chunks
    np.testing.assert_allclose(q.compute(), q0, rtol=0, atol=_tol(q0, plain, 2.0, masses))
    assert step.risk_value(keys) == pytest.approx(Extremile(2.0).value(plain, masses), rel=1e-13)
