"""The exact finishes of the ADMM and SOREL, against cvxpy.

The Newton finish of smooth losses and the piecewise-linear finish of the
hinge loss (skrank.solvers.finish).
"""

import numpy as np
import pytest

from skrank.datafits.rank_risk import RankRisk, affine_map
from skrank.losses import get_loss
from skrank.penalties import get_penalty
from skrank.risks import Superquantile, TopK
from skrank.solvers.finish import FinishSchedule, NewtonFinish, PiecewiseLinearFinish
from skrank.solvers.stochastic.sorel import sorel
from skrank.solvers.stochastic.units import prepare_data


def _data(loss_name, n=80, d=5, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    f = X @ rng.normal(size=d)
    if loss_name == "logistic":
        return X, np.where(f + rng.normal(size=n) > 0, 1.0, -1.0)
    return X, f + rng.standard_t(3, size=n)


def _piecewise_linear_finish(X, y, risk, loss, pen):
    Xp, s, c, _ = prepare_data(X, y, loss, True)
    return PiecewiseLinearFinish(Xp, s, c, risk.weights(X.shape[0]), loss, pen, True), s, c


# The classification tails are wider: at q = 0.8 the logistic optimum of these
# data is w = 0 (every sample tied).
CASES = [("squared", Superquantile(0.8), 150), ("squared", TopK(0.15), 80),
         ("logistic", Superquantile(0.7), 100), ("logistic", TopK(0.4), 100)]


@pytest.mark.parametrize("loss_name,risk,epochs", CASES, ids=[f"{c[0]}-{type(c[1]).__name__}" for c in CASES])
def test_newton_finish_certifies_the_optimum_from_an_iterate(loss_name, risk, epochs, referee):
    # A short SOREL run (no finish) leaves the tail's tie block unresolved; the
    # Newton method from its iterate certifies cvxpy's optimum, and its ADMM
    # multipliers make the point stationary: X^T (s (-lambda)) + l2 w = 0.
    X, y = _data(loss_name)
    loss, pen = get_loss(loss_name), get_penalty("l2", 1e-3)
    rough = sorel(RankRisk(X, y, risk, loss), pen, max_iter=epochs, random_state=0, polish=False)
    f_star = referee.optimum(X, y, risk, loss_name, 1e-3)
    assert rough.objective - f_star > 1e-8 * abs(f_star)  # the rough point is not optimal yet
    finish = NewtonFinish(RankRisk(X, y, risk, loss), pen)
    w, b, certified, gap, t, lam = finish.from_iterate(None, rough.coef, rough.intercept, 1e-8)
    assert certified, gap
    assert abs(finish.objective(w, b) - f_star) <= 1e-8 * abs(f_star)
    s, _ = affine_map(y, loss.task)
    assert np.allclose(X.T @ (s * -lam) + 1e-3 * w, 0.0, atol=1e-6)
    assert abs(np.sum(s * -lam)) <= 1e-6
    assert finish.work > 0


def test_sorel_finishes_and_stops(referee):
    # The default SOREL run ends on a certified Newton finish when the tail is thin.
    X, y = _data("squared", n=90, d=8, seed=4)
    risk, loss, pen = Superquantile(0.85), get_loss("squared"), get_penalty("l2", 1e-3)
    res = sorel(RankRisk(X, y, risk, loss), pen, max_iter=1000, random_state=0)
    plain = sorel(RankRisk(X, y, risk, loss), pen, max_iter=res.n_iter, random_state=0, polish=False)
    f_star = referee.optimum(X, y, risk, "squared", 1e-3)
    assert res.converged and res.info["polished"]
    assert abs(res.objective - f_star) <= 1e-8 * abs(f_star)
    assert plain.objective - f_star > 1e-9 * abs(f_star)  # SOREL alone was not there yet
    assert res.info["passes"][-1] > plain.info["passes"][-1]  # the finish's work is counted


@pytest.mark.parametrize("loss_name", ["squared", "huber"])
def test_admm_regression_fits_are_certified(loss_name, referee):
    # The ADMM's z-step puts z exactly on the ties; with the even smooth losses
    # the Newton finish turns its iterate into a certified optimum.
    from skrank.solvers.splitting.admm import admm

    X, y = _data(loss_name, n=90, d=6, seed=7)
    risk, loss, pen = Superquantile(0.8), get_loss(loss_name), get_penalty("l2", 1e-3)
    res = admm(RankRisk(X, y, risk, loss), pen)
    f_star = referee.optimum(X, y, risk, loss_name, 1e-3)
    assert res.info["polished"]
    assert abs(res.objective - f_star) <= 1e-8 * abs(f_star)


def _hinge_data(n, d, seed):
    # Two redundant features make [X, 1] rank deficient: the z-step then puts
    # more points on the hinge's kink than the face has free unknowns.
    from sklearn.datasets import make_classification
    from sklearn.preprocessing import scale

    X, y = make_classification(n_samples=n, n_features=d, n_informative=6, n_redundant=2,
                               class_sep=2.0, random_state=seed)
    return scale(X), np.where(y == 1, 1.0, -1.0)


HINGE_CASES = [("l2", 1e-2, 0), ("l1", 5e-3, 1), ("l2", 1e-2, 4), ("elasticnet", 1e-2, 3)]


@pytest.mark.parametrize("pen_name,alpha,seed", HINGE_CASES)
def test_admm_superquantile_hinge_fits_are_certified(pen_name, alpha, seed, referee):
    # Superquantile + hinge: the optimum has fewer positive losses than the
    # tail holds (the quantile loss is 0) and its kink points are an
    # over-determined face of the z-step's reading; the fit must still end on
    # a certified face solve at cvxpy's optimum.
    from skrank.solvers.splitting.admm import admm

    X, y = _hinge_data(300, 20, seed)
    risk, loss, pen = Superquantile(0.8), get_loss("hinge"), get_penalty(pen_name, alpha, 0.5)
    res = admm(RankRisk(X, y, risk, loss), pen, max_iter=1000, tol=1e-7, l1_solver="cd")
    f_star = referee.optimum(X, y, risk, "hinge", pen)
    assert res.converged and res.info["polished"]
    assert abs(res.objective - f_star) <= 1e-8 * abs(f_star)


def test_piecewise_linear_finish_resolves_an_overdetermined_kink_set(referee):
    # cvxpy's optimum with extra points put on the kink (the points just
    # below it, as the z-step leaves them): more kink rows than the rank of [X, 1].
    # The walk drops the right ones and the face solve certifies the optimum;
    # moved off the optimum, the certificate fails.
    X, y = _hinge_data(300, 20, 0)
    risk, loss, pen = Superquantile(0.8), get_loss("hinge"), get_penalty("l2", 1e-2)
    P, s, c = _piecewise_linear_finish(X, y, risk, loss, pen)
    _, w, b = referee.optimum(X, y, risk, "hinge", pen, return_solution=True)
    t = s * (X @ w + b) + c
    kink = np.abs(t + 1.0) <= 1e-7
    rank = np.linalg.matrix_rank(np.hstack([X, np.ones((X.shape[0], 1))]))
    below = np.flatnonzero(~kink & (t < -1.0))
    extra = below[np.argsort(t[below])[::-1][: max(1, rank + 1 - int(kink.sum()))]]
    z = t.copy()
    z[kink] = -1.0
    z[extra] = -1.0
    assert np.sum(z == -1.0) > rank  # the face is over-determined
    wp, bp, certified, residual, tp, lam = P(z, w, 1e-8, b)
    f_star = P.objective(w, b)
    assert certified, residual
    assert abs(P.objective(wp, bp) - f_star) <= 1e-9 * abs(f_star)
    assert np.all(tp[extra] < -1.0)  # the extra points left the kink downwards
    w_off = wp + 1e-3
    t_off = s * (X @ w_off + bp) + c
    assert P._certificate(-lam, t_off, w_off) > 1e-6


def test_finish_schedule_doubles_and_tries_the_last_iteration():
    sched = FinishSchedule(16)
    due = []
    for k in range(1, 101):
        if sched.due(k, k == 100):
            sched.attempted(k)
            due.append(k)
    assert due == [16, 32, 64, 100]
    assert sched.attempts == 4


def test_finish_schedule_without_first_tries_only_the_end():
    sched = FinishSchedule(None)
    assert [k for k in range(1, 51) if sched.due(k, k == 50)] == [50]


def test_finish_schedule_residual_trigger():
    sched = FinishSchedule(1000, crit_level=1e-3, gap=10)
    assert not sched.due(5, False, crit=1e-2)  # above the level
    assert sched.due(6, False, crit=1e-4)  # first time below the level
    sched.attempted(6, crit=1e-4)
    assert sched.gap == 10
    assert not sched.due(7, False, crit=5e-5)  # not tenfold lower, gap not elapsed
    assert sched.due(8, False, crit=5e-6)  # tenfold lower
    assert sched.due(16, False, crit=9e-5)  # the gap has elapsed
    sched.attempted(8, crit=5e-6)
    assert sched.gap == 20  # doubled after two attempts in quick succession
    assert not sched.due(16, False, crit=9e-6)


def test_finish_schedule_keep_rule():
    assert FinishSchedule.keep(1.0, 1.0 + 1e-9, True, False)
    assert FinishSchedule.keep(1.0 + 1e-13, 1.0, True, False)  # rounding
    assert not FinishSchedule.keep(1.0 + 1e-6, 1.0, True, True)
    assert not FinishSchedule.keep(0.5, 1.0, False, False)  # uncertified, not last
    assert FinishSchedule.keep(0.5, 1.0, False, True)
    assert not FinishSchedule.keep(1.5, 1.0, False, True)
