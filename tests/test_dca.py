"""The DCA baseline for ranked-range risks (skrank.solvers.splitting.dca)."""

import numpy as np
import pytest
from sklearn.datasets import make_classification
from sklearn.preprocessing import StandardScaler

from skrank.datafits.rank_risk import RankRisk, rank_objective
from skrank.losses import get_loss
from skrank.penalties import get_penalty
from skrank.risks import RankedRange, TopK
from skrank.solvers.splitting.admm import admm
from skrank.solvers.splitting.dca import dca


def _data():
    X, y = make_classification(100, 5, random_state=1, flip_y=0.05)
    return StandardScaler().fit_transform(X), np.where(y == 1, 1.0, -1.0)


@pytest.mark.parametrize("loss_name", ["logistic", "hinge"])
def test_dca_decreases_and_beats_zero(loss_name):
    X, y = _data()
    risk, loss, pen = RankedRange(m=0.1, k=0.6), get_loss(loss_name), get_penalty("l2", 1e-2)
    res = dca(RankRisk(X, y, risk, loss), pen, max_iter=30)
    hist = res.objective_history
    assert np.all(np.diff(hist) <= 1e-12)
    F0 = rank_objective(X, y, np.zeros(5), 0.0, risk, loss, pen)
    # The DCA values of Xiao et al. 2023 (Table 4) look like the loss at w = 0; ours must improve on it
    assert res.objective < 0.5 * F0
    assert res.objective == pytest.approx(rank_objective(X, y, res.coef, res.intercept, risk, loss, pen))


def test_dca_with_m_zero_is_the_convex_top_k_problem():
    X, y = _data()
    loss, pen = get_loss("logistic"), get_penalty("l2", 1e-2)
    res = dca(RankRisk(X, y, RankedRange(m=0, k=30), loss), pen)
    ref = admm(RankRisk(X, y, TopK(30), loss), pen, tol=1e-8, max_iter=3000)
    assert res.objective == pytest.approx(ref.objective, rel=1e-5)


def test_outer_loop_does_not_converge_on_an_unsolved_subproblem():
    # a small decrease means nothing when the inner ADMM stopped short of its tolerance
    X, y = _data()
    risk, loss, pen = RankedRange(m=0.1, k=0.6), get_loss("logistic"), get_penalty("l2", 1e-2)
    # one ADMM iteration per subproblem: F barely moves between outer iterations
    res = dca(RankRisk(X, y, risk, loss), pen, max_iter=20, inner_max_iter=1)
    assert not res.converged and res.stop_criterion > 1e-7
    full = dca(RankRisk(X, y, risk, loss), pen, max_iter=50)
    assert full.converged and full.stop_criterion <= 1e-7


def test_columns_scaled_apart_are_not_declared_converged_off_the_optimum():
    # columns of scale 1e-4 to 1e-11 (alpha = 0): the inner ADMM's w-step cannot resolve them
    # all, and its penalty residual in the units of X passed at any coefficient
    rng = np.random.default_rng(9148)
    X = rng.normal(size=(59, 4))
    y = X @ rng.normal(size=4) / 2 + 0.5 * rng.standard_t(3, size=59)
    scales = np.array([1e-6, 1e-10, 1e-4, 1e-11])
    risk, loss, pen = RankedRange(m=0.1, k=0.6), get_loss("squared"), get_penalty("l2", 0.0)
    ref = dca(RankRisk(X, y, risk, loss), pen, max_iter=50)
    res = dca(RankRisk(X * scales, y, risk, loss), pen, max_iter=5)
    assert ref.converged
    assert not res.converged or res.objective == pytest.approx(ref.objective, rel=1e-4)
