import re

import numpy as np
import pytest
from sklearn.base import clone

from skrank.risks import (
    ERM,
    CVaR,
    ExponentialSpectral,
    Extremile,
    HumanAligned,
    RankedRange,
    Superquantile,
    TopK,
    check_risk,
)

rng = np.random.default_rng(0)

SPECTRAL = [ERM(), Superquantile(0.8), Superquantile(0.37), Extremile(2.5), ExponentialSpectral(2.0),
            TopK(3)]


@pytest.mark.parametrize("risk", SPECTRAL, ids=repr)
@pytest.mark.parametrize("n", [1, 2, 7, 10, 244, 1001])
def test_spectral_weights_are_a_nondecreasing_distribution(risk, n):
    if isinstance(risk, TopK) and n < 3:
        pytest.skip("k > n")
    w = risk.weights(n)
    assert w.shape == (n,)
    assert np.all(w >= 0)
    assert np.all(np.diff(w) >= -1e-15)
    assert abs(w.sum() - 1.0) < 1e-12
    assert risk.is_convex


@pytest.mark.parametrize("q", [0.0, 0.3, 0.5, 0.8, 0.95, 0.999])
def test_superquantile_matches_rockafellar_uryasev(q):
    # CVaR_q(L) = min_u u + E[(L - u)_+] / (1 - q); the minimum is at a data point.
    losses = rng.exponential(size=53)
    brute = min(u + np.mean(np.maximum(losses - u, 0.0)) / (1 - q) for u in losses)
    assert Superquantile(q).value(losses) == pytest.approx(brute, rel=1e-12)
    assert CVaR is Superquantile


def test_superquantile_fractional_cell():
    # n = 10, q = 0.75: cells [0.7, 0.8] gets 0.05 / 0.25 = 0.2, the two top cells 0.4 each.
    np.testing.assert_allclose(Superquantile(0.75).weights(10)[-3:], [0.2, 0.4, 0.4], atol=1e-14)


def test_extremile_and_exponential_against_paper_formulas():
    n, r, rho = 13, 2.5, 3.0
    i = np.arange(1, n + 1)
    np.testing.assert_allclose(Extremile(r).weights(n), (i**r - (i - 1) ** r) / n**r, rtol=1e-12)
    naive = np.exp(-rho) * (np.exp(rho * i / n) - np.exp(rho * (i - 1) / n)) / (1 - np.exp(-rho))
    np.testing.assert_allclose(ExponentialSpectral(rho).weights(n), naive, rtol=1e-12)
    np.testing.assert_allclose(Extremile(1.0).weights(n), ERM().weights(n), rtol=1e-12)


def test_exponential_large_rho_does_not_overflow():
    w = ExponentialSpectral(1e5).weights(1000)
    assert np.all(np.isfinite(w)) and abs(w.sum() - 1) < 1e-12
    assert w[-1] > 0.99


def test_spec_sanity_values():
    # ESRM of Ge and Jiang 2024, Table 1: n * max weight at n = 244 (our own check value)
    assert 244 * ExponentialSpectral(2).weights(244).max() == pytest.approx(2.30, abs=0.01)
    assert 244 * Extremile(2.5).weights(244).max() == pytest.approx(2.49, abs=0.01)


def test_topk_and_ranked_range_by_brute_force():
    losses = rng.normal(size=40)
    top = np.sort(losses)[::-1]
    assert TopK(5).value(losses) == pytest.approx(top[:5].mean())
    assert TopK(0.25).value(losses) == pytest.approx(top[:10].mean())
    assert RankedRange(3, 11).value(losses) == pytest.approx(top[3:11].mean())
    assert RankedRange(0.1, 0.5).value(losses) == pytest.approx(top[4:20].mean())
    assert RankedRange(0, 40).value(losses) == pytest.approx(losses.mean())
    assert not RankedRange().is_convex


def _tk(p, g):
    return p**g / (p**g + (1 - p) ** g) ** (1 / g)


def test_human_aligned_follows_eq_4_5():
    n, gamma, delta, ref = 9, 0.61, 0.69, 0.5
    risk = HumanAligned(gamma, delta, ref)
    losses = np.array([0.1, 2.0, 0.4, 3.0, 0.45, 0.9, 0.05, 1.2, 5.0])
    s = np.sort(losses)
    expected = 0.0
    for i in range(1, n + 1):
        if s[i - 1] <= ref:
            wi = _tk(i / n, delta) - _tk((i - 1) / n, delta)
        else:
            wi = _tk((n - i + 1) / n, gamma) - _tk((n - i) / n, gamma)
        expected += wi * s[i - 1]
    assert risk.value(losses) == pytest.approx(expected, rel=1e-12)
    assert risk.depends_on_values and not risk.is_convex
    with pytest.raises(ValueError, match="depend on the loss values"):
        risk.weights(n)


@pytest.mark.parametrize(
    "risk, match",
    [
        (Superquantile(1.0), "q must lie"),
        (Superquantile(-0.1), "q must lie"),
        (Superquantile(float("nan")), "q must be a finite"),
        (Extremile(0.5), "r must lie"),
        (ExponentialSpectral(0.0), "rho must lie"),
        (TopK(0), "TopK needs"),
        (TopK(20), "TopK needs"),
        (RankedRange(5, 3), "0 <= m < k <= n"),
        (RankedRange(2, 1.5), "fraction"),
        (HumanAligned(gamma=1.5), "gamma must lie"),
    ],
)
def test_invalid_parameters_are_named(risk, match):
    with pytest.raises(ValueError, match=match):
        risk.weights(10) if not isinstance(risk, HumanAligned) else risk.weight_pieces(10)


def test_params_and_strings():
    r = Superquantile(0.5)
    assert r.get_params() == {"q": 0.5}
    assert r.set_params(q=0.9).q == 0.9
    assert clone(r) == r and clone(r) is not r
    assert isinstance(check_risk("cvar"), Superquantile)
    assert isinstance(check_risk("ranked_range"), RankedRange)
    with pytest.raises(ValueError, match="Unknown risk"):
        check_risk("nope")
    with pytest.raises(TypeError):
        check_risk(3)


def test_value_rejects_bad_losses():
    with pytest.raises(ValueError, match="NaN"):
        ERM().value([1.0, np.nan])
    with pytest.raises(ValueError, match="empty"):
        ERM().value([])


@pytest.mark.parametrize("risk", [
    Superquantile(q=1.5), Superquantile(q=0.5), Extremile(r=0.5), Extremile(r=3.0),
    ExponentialSpectral(rho=-1.0), ExponentialSpectral(rho=2.0), ERM(), TopK(k=50), TopK(k=3),
    RankedRange(m=2, k=60), RankedRange(m=0.1, k=0.5), HumanAligned(), HumanAligned(gamma=2.0),
])
@pytest.mark.parametrize("n, weighted", [(0, False), (40, False), (40, True)])
def test_check_raises_what_weights_raises(risk, n, weighted):
    sample_weight = np.linspace(0.5, 2.0, n) if weighted else None
    try:
        if risk.depends_on_values:  # its weights need the losses: their pieces are checked
            risk.weight_pieces(n, sample_weight)
        else:
            risk.weights(n, sample_weight)
    except ValueError as error:
        with pytest.raises(ValueError, match=re.escape(str(error))):
            risk.check(n, sample_weight)
    else:
        assert risk.check(n, sample_weight) is None


_SLICED = SPECTRAL + [Extremile(1.0), TopK(0.3), RankedRange(m=2, k=9), RankedRange(m=0.1, k=0.6)]


def _runs(n, pieces, rng):
    """``pieces`` consecutive runs of ``range(n)`` (some empty), as ``(start, stop)``."""
    cuts = np.sort(rng.integers(0, n + 1, pieces - 1))
    ends = np.concatenate(([0], cuts, [n]))
    return list(zip(ends[:-1], ends[1:]))


@pytest.mark.parametrize("risk", _SLICED, ids=repr)
@pytest.mark.parametrize("n", [10, 37, 1000])
def test_weights_slice_is_the_slice_of_the_weights(risk, n):
    full = risk.weights(n)
    for start, stop in _runs(n, 6, np.random.default_rng(n)) + [(0, n), (n, n), (3, 4)]:
        np.testing.assert_array_equal(risk.weights_slice(n, int(start), int(stop)), full[start:stop])
    with pytest.raises(ValueError, match="start and stop"):
        risk.weights_slice(n, 3, 2)


def _cells_of_run(v, start, stop, total):
    """The arguments of ``cell_weights`` for ranks ``start .. stop - 1`` of the sorted weights ``v``."""
    share = v[start:stop] / total
    below = np.cumsum(np.concatenate(([v[:start].sum() / total], share)))
    above = np.cumsum(np.concatenate(([v[stop:].sum() / total], share[::-1])))[::-1]
    if start == 0:
        below[0], above[0] = 0.0, 1.0
    if stop == v.size:
        below[-1], above[-1] = 1.0, 0.0
    return share, below, above


@pytest.mark.parametrize("risk", _SLICED, ids=repr)
@pytest.mark.parametrize("n", [10, 37, 1000])
def test_cell_weights_of_runs_are_the_weighted_weights(risk, n):
    rng = np.random.default_rng(n + 1)
    v = rng.uniform(0.2, 3.0, n) * 7.0
    full = risk.weights(n, v)
    for start, stop in _runs(n, 5, rng) + [(0, n)]:
        share, below, above = _cells_of_run(v, start, stop, v.sum())
        got = risk.cell_weights(share, below, above, v.sum(), n)
        # the cells' ends are summed in another order: equal to rounding of the largest weight (a
        # weight that is a difference of nearby ends, such as a fractional cell, keeps that error)
        np.testing.assert_allclose(got, full[start:stop], rtol=1e-12, atol=1e-12 * full.max())


def test_cell_weights_need_weights_of_cells():
    with pytest.raises(NotImplementedError, match="HumanAligned"):
        HumanAligned().cell_weights(np.ones(2) / 2, [0.0, 0.5, 1.0], [1.0, 0.5, 0.0], 2.0, 2)
