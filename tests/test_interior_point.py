"""The interior-point solver for one-threshold risks with the hinge and absolute losses."""

import numpy as np
import pytest
import scipy.sparse as sp

from skrank import RankADMMClassifier, RankADMMRegressor
from skrank.datafits.rank_risk import RankRisk
from skrank.losses import get_loss
from skrank.penalties import get_penalty
from skrank.risks import ERM, Extremile, Superquantile, TopK
from skrank.solvers.full_batch.interior_point import interior_point

RISKS = [ERM(), Superquantile(q=0.7), TopK(k=0.2)]


@pytest.mark.parametrize("risk", RISKS, ids=repr)
@pytest.mark.parametrize("loss_name", ["hinge", "absolute"])
@pytest.mark.parametrize("penalty", [("l2", 0.05), ("elasticnet", 0.05), ("l1", 0.05)])
def test_certified_fit_reaches_cvxpy(referee, risk, loss_name, penalty, linear_data):
    loss = get_loss(loss_name)
    X, y = linear_data(loss.task, n=80)
    pen = get_penalty(*penalty)
    res = interior_point(RankRisk(X, y, risk, loss), pen, tol=1e-9)
    f_star = referee.optimum(X, y, risk, loss, pen, fit_intercept=True)
    assert res.converged and res.info["certified"]
    assert res.objective <= f_star + 1e-8 * abs(f_star)
    assert res.objective >= f_star - 1e-6 * abs(f_star)  # cvxpy's own accuracy
    assert res.objective - f_star <= res.info["gap"] + 1e-9 * abs(f_star)


@pytest.mark.parametrize("fit_intercept", [True, False])
def test_sparse_input_and_no_intercept(referee, fit_intercept, linear_data):
    loss, risk, pen = get_loss("hinge"), Superquantile(q=0.5), get_penalty("l2", 0.05)
    X, y = linear_data("classification", n=120, d=6, seed=2)
    X[np.abs(X) < 0.8] = 0.0
    dense = interior_point(RankRisk(X, y, risk, loss, fit_intercept=fit_intercept), pen, tol=1e-10)
    sparse = interior_point(RankRisk(sp.csr_matrix(X), y, risk, loss, fit_intercept=fit_intercept), pen,
                            tol=1e-10)
    assert dense.converged and sparse.converged
    assert abs(dense.objective - sparse.objective) <= 1e-9 * abs(dense.objective)
    f_star = referee.optimum(X, y, risk, loss, pen, fit_intercept=fit_intercept)
    assert abs(dense.objective - f_star) <= 1e-6 * abs(f_star)
    if not fit_intercept:
        assert dense.intercept == 0.0


def test_an_early_stop_certifies_an_upper_bound_on_the_gap(referee, linear_data):
    loss, risk, pen = get_loss("absolute"), TopK(k=0.3), get_penalty("elasticnet", 0.02)
    X, y = linear_data("regression", n=150, d=5, seed=4)
    f_star = referee.optimum(X, y, risk, loss, pen, fit_intercept=True)
    for max_iter in (2, 4, 6, 8):
        res = interior_point(RankRisk(X, y, risk, loss), pen, max_iter=max_iter, tol=1e-14)
        assert res.objective - f_star <= res.info["gap"] * (1 + 1e-9) + 1e-12
        assert res.objective == pytest.approx(res.objective_history[-1])


def test_refuses_what_it_does_not_fit(linear_data):
    X, y = linear_data("classification", n=80)
    with pytest.raises(ValueError, match="one level"):
        interior_point(RankRisk(X, y, Extremile(), get_loss("hinge")), get_penalty("l2", 0.1))
    with pytest.raises(ValueError, match="piecewise-linear"):
        interior_point(RankRisk(X, y, ERM(), get_loss("logistic")), get_penalty("l2", 0.1))
    with pytest.raises(ValueError, match="needs a penalty"):
        interior_point(RankRisk(X, y, ERM(), get_loss("hinge")), get_penalty("l2", 0.0))


def test_estimators_choose_it_for_the_hinge_and_absolute_losses(referee, linear_data):
    X, y = linear_data("classification", n=100, seed=5)
    clf = RankADMMClassifier(loss="hinge", risk="superquantile", alpha=0.05).fit(X, (y > 0).astype(int))
    assert clf._solver == "ipm"
    pen = get_penalty("l2", 0.05)
    f_star = referee.optimum(X, y, Superquantile(q=clf._risk.q), get_loss("hinge"), pen)
    assert clf.objective_ == pytest.approx(f_star, rel=1e-6)
    Xr, yr = linear_data("regression", n=100, seed=6)
    reg = RankADMMRegressor(loss="absolute", risk="erm", penalty="l1", alpha=0.05).fit(Xr, yr)
    assert reg._solver == "ipm"
    assert reg.objective_ == pytest.approx(
        referee.optimum(Xr, yr, ERM(), get_loss("absolute"), get_penalty("l1", 0.05)), rel=1e-6)
    assert RankADMMClassifier(loss="hinge", risk="extremile").fit(X, y)._solver == "admm"


@pytest.mark.parametrize("risk", [ERM(), Superquantile(q=0.8)], ids=repr)
@pytest.mark.parametrize("big, small", [(1e191, 1e-65), (1e177, 1e-103), (1e300, 1e-200)])
def test_weights_of_1e300_beside_1e_200_fit_as_the_rows_of_the_large_ones(risk, big, small, linear_data):
    """Levels of a share below 2^-52 are raised to it: no multiplier underflows to a 0 / 0 step.

    The tiny weights hold no share of the risk that the rank weights
    resolve: the fit is that of the rows of the large weights alone.
    """
    import warnings

    loss, pen = get_loss("hinge"), get_penalty("l2", 0.01)
    X, y = linear_data("classification", n=44, d=6, seed=3)
    keep = np.random.default_rng(3).random(y.size) > 0.3
    weight = np.where(keep, big, small)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        res = interior_point(RankRisk(X, y, risk, loss, sample_weight=weight), pen)
    ref = interior_point(RankRisk(X[keep], y[keep], risk, loss), pen)
    assert res.converged and ref.converged
    assert res.objective == pytest.approx(ref.objective, rel=1e-8)
    np.testing.assert_allclose(res.coef, ref.coef, rtol=1e-5, atol=1e-7)
