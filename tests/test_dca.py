"""The DCA baseline for ranked-range risks (skrank.solvers.dca)."""

import numpy as np
import pytest
from sklearn.datasets import make_classification
from sklearn.preprocessing import StandardScaler

from skrank.losses import get_loss
from skrank.objective import rank_objective
from skrank.penalties import get_penalty
from skrank.risks import RankedRange, TopK
from skrank.solvers.admm import admm
from skrank.solvers.dca import dca


def _data():
    X, y = make_classification(100, 5, random_state=1, flip_y=0.05)
    return StandardScaler().fit_transform(X), np.where(y == 1, 1.0, -1.0)


@pytest.mark.parametrize("loss_name", ["logistic", "hinge"])
def test_dca_decreases_and_beats_zero(loss_name):
    X, y = _data()
    risk, loss, pen = RankedRange(m=0.1, k=0.6), get_loss(loss_name), get_penalty("l2", 1e-2)
    res = dca(X, y, risk, loss, pen, max_iter=30)
    hist = res.objective_history
    assert np.all(np.diff(hist) <= 1e-12)
    F0 = rank_objective(X, y, np.zeros(5), 0.0, risk, loss, pen)
    # The DCA values of Xiao et al. 2023 (Table 4) look like the loss at w = 0; ours must improve on it
    assert res.objective < 0.5 * F0
    assert res.objective == pytest.approx(rank_objective(X, y, res.coef, res.intercept, risk, loss, pen))


def test_dca_with_m_zero_is_the_convex_top_k_problem():
    X, y = _data()
    loss, pen = get_loss("logistic"), get_penalty("l2", 1e-2)
    res = dca(X, y, RankedRange(m=0, k=30), loss, pen)
    ref = admm(X, y, TopK(30), loss, pen, tol=1e-8, max_iter=3000)
    assert res.objective == pytest.approx(ref.objective, rel=1e-5)
