"""Prospect baseline: the incremental re-ranking and the optimum of a smooth problem."""

import numpy as np
import pytest

from skrank.datafits.rank_risk import RankRisk, rank_objective
from skrank.losses import get_loss
from skrank.penalties import get_penalty
from skrank.risks import ERM, ExponentialSpectral, Extremile, HumanAligned, Superquantile
from skrank.solvers.stochastic.prospect import prospect, rerank


def test_rerank_keeps_the_order():
    rng = np.random.default_rng(0)
    n = 50
    table = rng.normal(size=n)
    perm = np.argsort(table, kind="stable")
    rank = np.empty(n, dtype=np.int64)
    rank[perm] = np.arange(n)
    for _ in range(2000):
        i = int(rng.integers(n))
        value = table[i] + rng.normal() * rng.choice([1e-3, 1.0, 10.0])
        rerank(table, perm, rank, i, value)
        assert table[i] == value
        assert np.all(np.diff(table[perm]) >= 0)
        np.testing.assert_array_equal(rank[perm], np.arange(n))


def _problem(n=60, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3))
    y = X @ [1.0, -2.0, 0.5] + rng.standard_t(4, size=n)
    return (X - X.mean(0)) / X.std(0), (y - y.mean()) / y.std()


@pytest.mark.parametrize(
    "risk,rtol",
    [(ERM(), 1e-9), (ExponentialSpectral(2.0), 1e-5), (Extremile(2.5), 1e-5)],
    ids=lambda r: type(r).__name__ if not isinstance(r, float) else "",
)
@pytest.mark.parametrize("batch_size", [1, 8])
def test_prospect_matches_cvxpy(risk, rtol, batch_size, referee):
    # strictly increasing weights and distinct losses: the smooth case where Prospect converges
    X, y = _problem()
    n = X.shape[0]
    loss, pen = get_loss("squared"), get_penalty("l2", 1.0 / n)
    f_star = referee.optimum(X, y, risk, "squared", 1.0 / n)
    res = prospect(RankRisk(X, y, risk, loss), pen, batch_size=batch_size, max_iter=300, tol=0.0,
                   random_state=0)
    assert res.objective == pytest.approx(rank_objective(X, y, res.coef, res.intercept, risk, loss, pen))
    assert abs(res.objective - f_star) <= rtol * f_star
    assert res.info["passes"][0] == 1.0


def test_prospect_superquantile_and_l1_run():
    X, y = _problem(80, 1)
    res = prospect(RankRisk(X, y, Superquantile(0.5), get_loss("huber")), get_penalty("elasticnet", 0.05),
                   max_iter=40, random_state=0)
    assert res.objective < 0.5 * res.objective_history[0]


def test_prospect_rejects_value_dependent_weights():
    X, y = _problem(20)
    with pytest.raises(ValueError, match="depend on the loss values"):
        prospect(RankRisk(X, np.sign(y), HumanAligned(), get_loss("logistic")), get_penalty("l2", 0.1))


@pytest.mark.parametrize("scale", [1e-12, 1e12])
def test_automatic_step_is_scale_covariant(scale):
    # X * s with alpha * s^2 (and unstandardised columns): the same epochs, coef / s
    X, y = _problem(50, 2)
    X = X * [1.0, 0.01, 100.0] + [0.0, 50.0, -3.0]
    risk, loss = ERM(), get_loss("huber")
    ref = prospect(RankRisk(X, y, risk, loss), get_penalty("l2", 0.01), max_iter=50, random_state=0)
    res = prospect(RankRisk(X * scale, y, risk, loss), get_penalty("l2", 0.01 * scale**2), max_iter=50,
                   random_state=0)
    assert res.n_iter == ref.n_iter and res.converged == ref.converged
    np.testing.assert_allclose(res.objective_history, ref.objective_history, rtol=1e-8)
    np.testing.assert_allclose(res.coef * scale, ref.coef, rtol=1e-6)
    assert res.intercept == pytest.approx(ref.intercept, rel=1e-6, abs=1e-9)
