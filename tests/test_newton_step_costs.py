"""What one Newton step of the smoothed spectral risk computes, each piece checked against a direct form."""

import numpy as np
import pytest
import scipy.sparse as sp

from skrank.backends.design import Design
from skrank.datafits.rank_risk import RankRisk
from skrank.kernels.pava import project_permutahedron
from skrank.losses import get_loss
from skrank.penalties import get_penalty
from skrank.risks import ExponentialSpectral, Superquantile
from skrank.solvers.full_batch.newton import smoothed_newton


def _blocks(n, sizes, seed):
    """Members of blocks of ``sizes`` (a run each), masses and slopes; the CSR indicator of ``m_i g_i``."""
    rng = np.random.default_rng(seed)
    idx = rng.permutation(n)[: sum(sizes)]
    mass = rng.uniform(0.5, 2.0, n)
    g = rng.normal(size=idx.size)
    indptr = np.concatenate(([0], np.cumsum(sizes)))
    return sp.csr_matrix((mass[idx] * g, idx, indptr), shape=(len(sizes), n)), idx, mass, g, indptr


@pytest.mark.parametrize("fit_intercept", [True, False])
def test_block_gram_is_the_blocks_scatter_around_their_means(fit_intercept):
    rng = np.random.default_rng(0)
    n, d = 200, 4
    X = rng.normal(size=(n, d))
    indicator, idx, mass, g, indptr = _blocks(n, [3, 1, 7, 2, 30], seed=1)
    assert Design(X, fit_intercept).gathers_blocks
    G = Design(X, fit_intercept).block_gram(idx, mass[idx] * g, indptr, mass)
    Xt = np.hstack([X, np.ones((n, 1))]) if fit_intercept else X
    expected = np.zeros((Xt.shape[1], Xt.shape[1]))
    for b in range(indptr.size - 1):
        members = idx[indptr[b]:indptr[b + 1]]
        U = Xt[members] * g[indptr[b]:indptr[b + 1], None]
        m = mass[members]
        centred = U - (m @ U) / m.sum()
        expected += (centred.T * m) @ centred
    np.testing.assert_allclose(G, expected, rtol=1e-12, atol=1e-12 * np.abs(expected).max())
    # the same as the weighted Gram matrix of the members less the block sums' term
    design = Design(X, fit_intercept)
    h = np.zeros(n)
    h[idx] = mass[idx] * g * g
    sums = design.left_product(indicator)
    block_mass = np.add.reduceat(mass[idx], indptr[:-1])
    np.testing.assert_allclose(G, design.weighted_gram(h) - (sums.T / block_mass) @ sums,
                               atol=1e-10 * np.abs(expected).max())


def test_block_gram_leaves_a_sparse_design_to_its_callers():
    X = sp.random(50, 4, density=0.5, format="csr", random_state=0)
    assert not Design(X, True).gathers_blocks


@pytest.mark.parametrize("weighted", [False, True])
def test_block_scatter_the_same_dense_and_sparse(weighted, linear_data):
    X, y = linear_data("classification", n=80, d=3, seed=8)
    X = np.round(X)  # tied losses: several pooled blocks
    weight = np.random.default_rng(9).uniform(0.5, 2.0, 80) if weighted else None
    scatters = []
    for data in (X, sp.csr_matrix(X)):
        problem = RankRisk(data, y, ExponentialSpectral(2.0), get_loss("logistic"),
                           sample_weight=weight).smoothed(get_penalty("l2", 0.1))
        theta = np.array([0.3, -0.2, 0.1, 0.05])
        center = problem.first_center(theta, False)[0]
        _, state = problem.smoothed(theta, 1.0, center)
        assert state["pooled"].size.size > 1  # pooled blocks
        scatters.append(problem.block_scatter(state, 1.0))
    np.testing.assert_allclose(scatters[0], scatters[1], rtol=1e-10, atol=1e-12 * np.abs(scatters[1]).max())


@pytest.mark.parametrize("every_row", [True, False])
def test_weighted_gram_is_the_weighted_product(every_row):
    rng = np.random.default_rng(3)
    X = rng.normal(size=(9000, 6))  # several blocks of rows
    h = rng.random(9000)
    if not every_row:
        h[rng.random(9000) < 0.4] = 0.0
    for fit_intercept in (True, False):
        Xt = np.hstack([X, np.ones((9000, 1))]) if fit_intercept else X
        G = Design(X, fit_intercept).weighted_gram(h)
        np.testing.assert_allclose(G, (Xt.T * h) @ Xt, rtol=1e-11)
        assert np.array_equal(G, G.T)


def test_logistic_curvature_from_the_slope():
    t = np.linspace(-40.0, 40.0, 801)
    logistic = get_loss("logistic")
    assert logistic.curvature_from_slope
    np.testing.assert_allclose(logistic.curvature_of_slope(logistic.derivative(t)),
                               logistic.second_derivative(t), rtol=1e-12, atol=1e-300)
    design = Design(np.ones((t.size, 1)), False)
    np.testing.assert_array_equal(design.loss_curvature(logistic, t, logistic.derivative(t)),
                                  logistic.curvature_of_slope(logistic.derivative(t)))
    hinge = get_loss("squared_hinge")
    assert not hinge.curvature_from_slope
    np.testing.assert_array_equal(design.loss_curvature(hinge, t, hinge.derivative(t)),
                                  hinge.second_derivative(t))
    with pytest.raises(ValueError, match="second_derivative"):
        hinge.curvature_of_slope(hinge.derivative(t))


@pytest.mark.parametrize("weighted", [False, True])
def test_smoothed_from_a_state_at_the_same_point_reuses_its_losses(weighted, linear_data):
    X, y = linear_data("classification", n=60, d=3, seed=4)
    rng = np.random.default_rng(5)
    weight = rng.uniform(0.5, 2.0, 60) if weighted else None
    problem = RankRisk(X, y, ExponentialSpectral(2.0), get_loss("logistic"),
                       sample_weight=weight).smoothed(get_penalty("l2", 0.1))
    sigma = np.sort(ExponentialSpectral(2.0).weights(60))
    theta = rng.normal(size=4)
    first = project_permutahedron(rng.random(60) / 60, sigma)
    _, state = problem.smoothed(theta, 0.3, first)
    center = state["q"].copy()
    calls = []
    kernel = problem.design.losses_and_keys

    def spy(loss, t, mu, center, known=None):
        calls.append(known is not None)
        return kernel(loss, t, mu, center, known)

    problem.design.losses_and_keys = spy
    F_reused, reused = problem.smoothed(theta, 0.05, center, state=state)
    F_fresh, fresh = problem.smoothed(theta, 0.05, center)
    assert calls == [True, False]
    assert F_reused == pytest.approx(F_fresh, rel=1e-14)
    np.testing.assert_allclose(reused["q"], fresh["q"], rtol=1e-13, atol=1e-16)
    assert reused["value"] is state["value"] and reused["d1"] is state["d1"]


def test_newton_moves_the_centre_without_evaluating_the_losses_again(linear_data, monkeypatch):
    X, y = linear_data("classification", n=300, d=4, seed=6)
    calls = []
    kernel = Design.losses_and_keys

    def spy(self, loss, t, mu, center, known=None):
        calls.append(known is not None)
        return kernel(self, loss, t, mu, center, known)

    monkeypatch.setattr(Design, "losses_and_keys", spy)
    datafit = RankRisk(X, y, Superquantile(0.3), get_loss("logistic"))
    result = smoothed_newton(datafit, get_penalty("l2", 1e-3), tol=1e-10)
    assert result.converged and result.info["outer"] >= 2
    # each move of the centre (all the outer iterations but the last, certified one) reuses the losses
    assert sum(calls) == result.info["outer"] - 1


def test_a_warm_start_next_to_a_zero_optimum_is_certified():
    # the optimum is w = 0 (a high superquantile, every loss tied there); from warm starts a rounding away
    # the Newton steps stall before the duality gap closes, and the check of theta = 0 certifies it
    from sklearn.datasets import make_classification
    from sklearn.preprocessing import StandardScaler

    X, y = make_classification(100, 8, n_informative=4, random_state=3, flip_y=0.05)
    X, y = StandardScaler().fit_transform(X), np.where(y == 1, 1.0, -1.0)
    rng = np.random.default_rng(0)
    for _ in range(40):
        start = rng.normal(size=8) * 10.0 ** rng.uniform(-13, -8)
        datafit = RankRisk(X, y, Superquantile(0.8), get_loss("logistic"))
        result = smoothed_newton(datafit, get_penalty("l2", 1e-2), coef_init=start, intercept_init=0.0,
                                 tol=1e-10, max_iter=100)
        assert result.converged and result.info["certified"]
        assert np.max(np.abs(result.coef)) <= 1e-6
