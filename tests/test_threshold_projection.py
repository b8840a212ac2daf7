"""The superquantile's threshold form of the smoothed rank step equals the PAVA's projection."""

from fractions import Fraction

import numpy as np
import pytest

from skrank.datafits.smoothed_risk import pooled_projection
from skrank.datafits.threshold_projection import (
    Threshold,
    capped_projection,
    capped_threshold,
    capped_threshold_dask,
)
from skrank.risks import Superquantile

LEVELS = [0.0, 0.5, 0.8, 0.9, 0.95, 0.99, 0.999, 0.37]
SIZES = [1, 2, 3, 7, 10, 30, 55, 100, 257, 1000, 2345]
TOL = 1e-12  # relative to the cap


def _tol(keys, mu, cap):
    """``TOL cap`` plus the PAVA's own rounding: ``(keys - mean_B(keys)) / mu`` loses an ulp of the
    keys' mean over ``mu`` (the threshold form is checked against rationals below)."""
    return TOL * cap + 4.0 * np.finfo(float).eps * np.max(np.abs(keys)) / mu


def _keys(rng, n, kind):
    """Keys with ties: on a grid of 2^-5 (sums of a few exact), or continuous with copies."""
    if kind == "grid":
        return 3.0 + rng.integers(0, max(2, n // 3), n) * 2.0**-5
    keys = 10.0 + rng.standard_normal(n)
    keys[rng.integers(0, n, n // 4)] = keys[rng.integers(0, n, n // 4)]  # copies: ties
    return keys


def _pava(keys, sigma, mu):
    """``pooled_projection``'s ``q``, the sorting order and its blocks' first positions."""
    q = keys.copy()
    order = np.argsort(q, kind="stable")
    starts = np.empty(q.size + 1, dtype=np.int64)
    nb = pooled_projection(q, order, sigma, mu, starts, np.ones(1))
    return q, order, starts[: nb + 1]


def _cases(seed=0, per_size=6):
    rng = np.random.default_rng(seed)
    for n in SIZES:
        for _ in range(per_size):
            level = float(rng.choice(LEVELS))
            kind = "grid" if rng.random() < 0.5 else "normal"
            keys = _keys(rng, n, kind)
            spread = max(np.ptp(keys), 2.0**-5)
            yield n, level, keys, spread * 10.0 ** rng.uniform(-8, 8)
    # mu at the ends of the range
    for mu in (1e-8, 1e8):
        yield 500, 0.9, _keys(rng, 500, "normal"), mu
        yield 500, 0.9, _keys(rng, 500, "grid"), mu * 2.0**-5


def _superquantile(n, level):
    """The cap and total of the superquantile's capped simplex, and its rank weights."""
    return 1.0 / ((1.0 - level) * n), 1.0, Superquantile(level).weights(n)


def _inside(q, cap, tol):
    """The free set of ``q`` away from the bounds by more than the rounding ``tol``."""
    return (q > tol) & (q < cap - tol)


@pytest.mark.parametrize("seed", [0, 1])
def test_numpy_threshold_equals_pava(seed):
    for n, level, keys, mu in _cases(seed):
        cap, total, sigma = _superquantile(n, level)
        q_pava, order, starts = _pava(keys, sigma, mu)
        tau = capped_threshold(keys, mu, cap, total)
        q, free, stats = capped_projection(keys, mu, cap, tau)
        tol = _tol(keys, mu, cap)
        assert np.max(np.abs(q - q_pava)) <= tol, (n, level, mu)
        assert abs(q.sum() - total) <= 1e-13 * total
        # the free set is one of PAVA's blocks, whose members are free (or at a bound to rounding)
        inside = _inside(q, cap, tol)
        assert np.array_equal(inside, _inside(q_pava, cap, tol))
        assert np.all(inside <= free)
        if inside.any():
            block = np.searchsorted(starts, np.flatnonzero(inside[order]), side="right") - 1
            assert np.unique(block).size == 1
            members = order[starts[block[0]]: starts[block[0] + 1]]
            assert np.all(inside[members] | (np.minimum(q[members], cap - q[members]) <= tol))
        assert stats["count"] == int(free.sum())
        assert np.isclose(stats["sum_q"], q[free].sum(), rtol=1e-12, atol=0.0)


def _exact_q(keys, mu, cap, total, free, capped):
    """The projection in rationals, on the sets of the threshold form (checked to be its sets)."""
    K = [Fraction(float(x)) for x in keys]
    mu_, cap_, total_ = Fraction(mu), Fraction(cap), Fraction(total)
    nf = int(free.sum())
    if nf == 0:
        return None
    tau = (sum(K[i] for i in np.flatnonzero(free)) - mu_ * (total_ - cap_ * int(capped.sum()))) / nf
    q = [min(max((x - tau) / mu_, Fraction(0)), cap_) for x in K]
    # KKT: the sets are those of this tau
    assert sum(q) == total_
    return np.array([float(x) for x in q])


def test_numpy_threshold_is_exact_to_rounding():
    # for tiny mu the PAVA and the threshold form both round ``mean(keys)``; against rationals the
    # threshold form's ``ref + offset`` is accurate to a few ulps of the cap
    checked = 0
    for n, level, keys, mu in list(_cases(4, per_size=2))[:60]:
        cap, total, _ = _superquantile(n, level)
        q, free, _ = capped_projection(keys, mu, cap, capped_threshold(keys, mu, cap, total))
        exact = _exact_q(keys, mu, cap, total, free, q >= cap)
        if exact is not None:
            assert np.max(np.abs(q - exact)) <= 64 * np.finfo(float).eps * cap * max(1, np.log2(n))
            checked += 1
    assert checked >= 20


def test_two_and_three_levels():
    # (1 - q) n integer: two levels (up to ulps); fractional: one weight between 0 and the cap, and
    # the capped simplex is still P(sigma) (the partial sums of the largest are min(j c, 1))
    sigma = Superquantile(0.8).weights(10)
    assert np.unique(sigma).size == 2 and np.count_nonzero(sigma) == 2
    sigma = Superquantile(0.8).weights(7)
    cap = 1.0 / (0.2 * 7)
    assert np.count_nonzero((sigma > 0) & (sigma < cap * (1 - 1e-12))) == 1
    top = np.cumsum(np.sort(sigma)[::-1])
    assert np.allclose(top, np.minimum(np.arange(1, 8) * cap, 1.0), rtol=0, atol=1e-15)


def test_edge_cases():
    keys = np.array([1.0, 1.0, 2.0])
    assert capped_threshold(keys, 1.0, 1.0 / 3.0, 1.0).ref == -np.inf  # the mean: every q is the cap
    q, free, stats = capped_projection(keys, 1.0, 1.0 / 3.0, capped_threshold(keys, 1.0, 1.0 / 3.0, 1.0))
    assert np.allclose(q, 1.0 / 3.0) and stats["count"] == 0
    with pytest.raises(ValueError, match="empty"):
        capped_threshold(keys, 1.0, 0.1, 1.0)
    with pytest.raises(ValueError, match="mu"):
        capped_threshold(keys, 0.0, 0.5, 1.0)
    # a float threshold is accepted
    q, _, _ = capped_projection(keys, 1e3, 1.0, 0.0)
    assert np.allclose(q, np.clip(keys / 1e3, 0.0, 1.0))
    assert isinstance(capped_threshold(np.array([5.0]), 1e-3, 1.0, 1.0), Threshold)


@pytest.fixture
def counted_compute(monkeypatch):
    """Patches ``dask.compute``: counts the calls and asserts no result holds ``n`` values."""
    dask = pytest.importorskip("dask")
    original = dask.compute
    box = dict(calls=0, n=None, largest=0)

    def sizes(x):
        if isinstance(x, (tuple, list)):
            return max([sizes(y) for y in x], default=0)
        return int(np.size(x))

    def compute(*args, **kwargs):
        out = original(*args, **kwargs)
        box["calls"] += 1
        box["largest"] = max(box["largest"], sizes(out))
        return out

    monkeypatch.setattr(dask, "compute", compute)
    return box


def _uneven_chunks(n, rng):
    cuts = np.unique(rng.integers(1, n, size=min(n - 1, 7))) if n > 1 else np.array([], dtype=int)
    return tuple(np.diff(np.concatenate(([0], cuts, [n]))).tolist())


@pytest.mark.parametrize("seed", [0, 1])
def test_dask_threshold_equals_pava_without_gathering(seed, counted_compute):
    dask = pytest.importorskip("dask")
    da = pytest.importorskip("dask.array")
    rng = np.random.default_rng(10 + seed)
    with dask.config.set(scheduler="synchronous"):
        for n, level, keys, mu in _cases(seed, per_size=3):
            if n < 30:
                continue
            cap, total, sigma = _superquantile(n, level)
            q_pava, _, _ = _pava(keys, sigma, mu)
            x = da.from_array(keys, chunks=(_uneven_chunks(n, rng),))
            bracket = max(2, n // 20)  # the last round gathers at most about 5% of the keys
            counted_compute["calls"] = counted_compute["largest"] = 0
            tau = capped_threshold_dask(x, mu, cap, total, bracket=bracket, candidates=16)
            assert tau.rounds == counted_compute["calls"]
            # continuous keys: round 0, then a few rounds of 17 bins each, then the gather; ties and
            # clusters may need rounds down to adjacent doubles (about 64 / log2(17) more)
            assert tau.rounds <= 20
            # per chunk and round: 2 x (2 x 18 + 1) bin statistics, or the distinct keys of the bracket
            assert counted_compute["largest"] <= max(2 * 37, 4 * bracket), (n, tau)
            if n >= 100:
                assert counted_compute["largest"] < n
            q, free, stats = capped_projection(x, mu, cap, tau)
            stats = dask.compute(stats)[0]
            assert counted_compute["largest"] <= max(2 * 37, 4 * bracket)
            q = q.compute(scheduler="synchronous")  # here only, to compare
            tol = _tol(keys, mu, cap)
            assert np.max(np.abs(q - q_pava)) <= tol, (n, level, mu)
            assert np.array_equal(_inside(q, cap, tol), _inside(q_pava, cap, tol))
            assert stats["count"] == int(free.sum().compute())


def test_dask_rounds_on_continuous_keys(counted_compute):
    dask = pytest.importorskip("dask")
    da = pytest.importorskip("dask.array")
    n = 200_000
    keys = da.random.RandomState(0).standard_normal(n, chunks=13_001)
    cap = 1.0 / (0.1 * n)
    with dask.config.set(scheduler="synchronous"):
        for mu in (1e-6, 1.0, 1e4):
            counted_compute["calls"] = counted_compute["largest"] = 0
            tau = capped_threshold_dask(keys, mu, cap, 1.0, bracket=2_000, candidates=64)
            # 2 n breakpoints shrink by about 65 a round: 2 rounds to 2 000, plus the extremes and the gather
            assert tau.rounds <= 5
            assert counted_compute["largest"] <= 4 * 2_000
            ref = capped_threshold(keys.compute(), mu, cap, 1.0)
            assert abs(tau.value - ref.value) <= 1e-12 * max(1.0, abs(ref.value))
