"""AGD for ranked-range risks (seed 000, Algorithm 3) and RankADMM's solver="agd"."""

import numpy as np
import pytest
from sklearn.datasets import make_classification, make_regression
from sklearn.preprocessing import StandardScaler

from skrank.estimators import RankADMMClassifier, RankADMMRegressor
from skrank.losses import get_loss
from skrank.objective import rank_objective
from skrank.penalties import get_penalty
from skrank.risks import RankedRange, Superquantile
from skrank.solvers.admm import admm
from skrank.solvers.sorr_agd import sorr_agd


def _classification(seed=0, n=800):
    X, y = make_classification(n, 8, n_informative=4, flip_y=0.05, random_state=seed)
    return StandardScaler().fit_transform(X), np.where(y == 1, 1.0, -1.0)


@pytest.mark.parametrize("penalty", ["l2", "l1", "elasticnet"])
def test_agd_lowers_F_and_lands_near_the_admm(penalty):
    X, y = _classification()
    # k = 80%: with k <= 50% of the largest losses w = 0 is a local minimum (every
    # direction raises the upper half of the losses to first order)
    risk, loss, pen = RankedRange(0.05, 0.8), get_loss("logistic"), get_penalty(penalty, 1e-2)
    start = rank_objective(X, y, np.zeros(8), 0.0, risk, loss, pen)
    res = sorr_agd(X, y, risk, loss, pen, random_state=0)
    ref = admm(X, y, risk, loss, pen).objective
    assert res.objective == pytest.approx(rank_objective(X, y, res.coef, res.intercept, risk,
                                                         loss, pen), rel=1e-12)
    assert res.objective < start - 0.01
    # a stochastic method with a fixed budget on a non-convex objective
    assert res.objective <= 1.02 * ref


def test_agd_is_deterministic_and_skips_m_when_zero():
    X, y = _classification(1, 400)
    risk, loss, pen = RankedRange(0, 0.8), get_loss("hinge"), get_penalty("l2", 1e-2)
    a = sorr_agd(X, y, risk, loss, pen, max_iter=4, random_state=3)
    b = sorr_agd(X, y, risk, loss, pen, max_iter=4, random_state=3)
    np.testing.assert_array_equal(a.coef, b.coef)
    assert a.intercept == b.intercept
    assert a.objective < rank_objective(X, y, np.zeros(8), 0.0, risk, loss, pen)


def test_no_intercept_stays_zero():
    X, y = _classification(2, 300)
    res = sorr_agd(X, y, RankedRange(0.1, 0.6), get_loss("logistic"), get_penalty("l2", 1e-2),
                   fit_intercept=False, max_iter=3, random_state=0)
    assert res.intercept == 0.0


def test_estimators_accept_agd_for_ranked_ranges_only():
    X, y = _classification(3, 300)
    clf = RankADMMClassifier(risk=RankedRange(0.05, 0.8), solver="agd", random_state=0).fit(X, y)
    assert clf.coef_.shape == (1, 8) and clf.score(X, y) > 0.7
    Xr, yr = make_regression(300, 5, noise=1.0, random_state=0)
    yr[:10] += 500  # outliers the ranked range leaves out
    reg = RankADMMRegressor(risk=RankedRange(0.05, 0.6), solver="agd", alpha=1e-3,
                            random_state=0).fit(Xr, yr)
    assert np.isfinite(reg.objective_)
    start = rank_objective(Xr, yr, np.zeros(5), 0.0, RankedRange(0.05, 0.6), get_loss("squared"),
                           get_penalty("l2", 1e-3))
    assert reg.objective_ < 0.1 * start
    with pytest.raises(ValueError, match="ranked-range"):
        RankADMMClassifier(risk=Superquantile(0.5), solver="agd").fit(X, y)
