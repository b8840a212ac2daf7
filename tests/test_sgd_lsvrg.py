"""SGD and LSVRG baselines: ridge closed form, cvxpy optimum, any risk, SGD's bias."""

import numpy as np
import pytest

from skrank.datafits.rank_risk import RankRisk, rank_objective
from skrank.estimators.spectral_risk import SpectralRiskClassifier, SpectralRiskRegressor
from skrank.losses import get_loss
from skrank.penalties import get_penalty
from skrank.risks import ERM, HumanAligned, RankedRange, Superquantile
from skrank.solvers.stochastic.lsvrg import lsvrg
from skrank.solvers.stochastic.sgd import sgd
from skrank.solvers.stochastic.weights import rank_weights


def _standardised(n=128, d=3, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    y = X @ np.linspace(1.0, -2.0, d) + rng.standard_t(3, size=n)
    return (X - X.mean(0)) / X.std(0), (y - y.mean()) / y.std()


def _ridge(X, y, mu, fit_intercept):
    n, d = X.shape
    A = np.hstack([X, np.ones((n, 1))]) if fit_intercept else X
    reg = np.full(A.shape[1], mu)
    if fit_intercept:
        reg[-1] = 0.0
    sol = np.linalg.solve(A.T @ A / n + np.diag(reg), A.T @ y / n)
    return sol[:d], (sol[-1] if fit_intercept else 0.0)


@pytest.mark.parametrize("sampling", ["uniform", "nonuniform"])
@pytest.mark.parametrize("fit_intercept,batch_size", [(True, 1), (False, 1), (True, 8)])
def test_lsvrg_erm_matches_ridge(sampling, fit_intercept, batch_size):
    rng = np.random.default_rng(0)
    n, d, mu = 80, 4, 0.05
    X = rng.normal(size=(n, d))
    y = X @ rng.normal(size=d) + 1.5 + 0.3 * rng.normal(size=n)
    data = RankRisk(X, y, ERM(), get_loss("squared"), fit_intercept=fit_intercept)
    res = lsvrg(data, get_penalty("l2", mu), sampling=sampling, batch_size=batch_size, max_iter=300,
                tol=1e-15, random_state=0)
    coef, intercept = _ridge(X, y, mu, fit_intercept)
    np.testing.assert_allclose(res.coef, coef, atol=1e-6)
    assert res.intercept == pytest.approx(intercept, abs=1e-6)


@pytest.mark.parametrize("solver", [sgd, lsvrg])
def test_superquantile_decreases_to_near_optimum(solver, referee):
    X, y = _standardised()
    n = X.shape[0]
    risk, loss, pen = Superquantile(0.5), get_loss("squared"), get_penalty("l2", 1.0 / n)
    f_star = referee.optimum(X, y, risk, "squared", 1.0 / n)
    res = solver(RankRisk(X, y, risk, loss), pen, max_iter=100, tol=0.0, random_state=0)
    hist = res.objective_history
    assert hist[-1] < 0.5 * hist[0]
    assert res.objective == pytest.approx(rank_objective(X, y, res.coef, res.intercept, risk, loss, pen))
    # these baselines are not exact: loose tolerance
    assert f_star - 1e-7 <= hist[-1] <= f_star * (1 + 1e-3)
    assert len(res.info["passes"]) == len(hist) and np.all(np.diff(res.info["times"]) >= 0)


def test_sgd_bias_is_visible(referee):
    # Started AT the optimum with a small step, SGD stays there for the mean
    # (uniform batch weights: unbiased) but drifts away for a superquantile.
    X, y = _standardised()
    n = X.shape[0]
    loss, pen = get_loss("squared"), get_penalty("l2", 1.0 / n)
    gaps = {}
    for risk in (ERM(), Superquantile(0.5)):
        f_star, w, b = referee.optimum(X, y, risk, "squared", 1.0 / n, return_solution=True)
        res = sgd(RankRisk(X, y, risk, loss), pen, batch_size=16, learning_rate=1e-3, max_iter=150, tol=0.0,
                  coef_init=w, intercept_init=b, random_state=0)
        gaps[type(risk).__name__] = (np.mean(res.objective_history[-30:]) - f_star) / f_star
    assert gaps["ERM"] < 1e-8
    assert gaps["Superquantile"] > 1e-5


@pytest.mark.parametrize("risk", [Superquantile(0.6), RankedRange(0.1, 0.6), HumanAligned()],
                         ids=lambda r: type(r).__name__)
@pytest.mark.parametrize("task", ["regression", "classification"])
def test_sgd_step_uses_batch_rank_weights(risk, task):
    # one full-batch step equals the proximal subgradient step with risk.weights(n, losses)
    rng = np.random.default_rng(1)
    n, d = 24, 3
    X = rng.normal(size=(n, d))
    if task == "regression":
        y, loss = X[:, 0] + rng.normal(size=n), get_loss("huber")
        s, c = np.ones(n), -y
    else:
        y, loss = np.where(X[:, 0] + rng.normal(size=n) > 0, 1.0, -1.0), get_loss("logistic")
        s, c = -y, np.zeros(n)
    pen = get_penalty("elasticnet", 0.1)
    w0, b0, lr = rng.normal(size=d), 0.3, 0.05
    res = sgd(RankRisk(X, y, risk, loss), pen, batch_size=n, epoch_length=1, max_iter=1, learning_rate=lr,
              coef_init=w0, intercept_init=b0, random_state=0)
    t = s * (X @ w0 + b0) + c
    lam = rank_weights(risk, loss.value(t))
    g = lam * s * loss.derivative(t)
    expected = pen.prox(w0 - lr * (X.T @ g), lr)
    np.testing.assert_allclose(res.coef, expected, atol=1e-12)
    assert res.intercept == pytest.approx(b0 - lr * g.sum(), abs=1e-12)


@pytest.mark.parametrize("solver", [sgd, lsvrg])
@pytest.mark.parametrize("risk", [RankedRange(0.1, 0.6), HumanAligned()], ids=lambda r: type(r).__name__)
@pytest.mark.parametrize(
    "loss,penalty", [("logistic", "l1"), ("hinge", "l2"), ("squared_hinge", "elasticnet")]
)
def test_any_risk_loss_penalty(solver, risk, loss, penalty):
    rng = np.random.default_rng(2)
    X = rng.normal(size=(100, 4))
    y = np.where(X @ [1.0, -1.0, 0.5, 0.0] + 0.5 * rng.normal(size=100) > 0, 1.0, -1.0)
    loss, pen = get_loss(loss), get_penalty(penalty, 0.02)
    res = solver(RankRisk(X, y, risk, loss), pen, max_iter=20, tol=0.0, random_state=0, epoch_length=100)
    assert np.all(np.isfinite(res.objective_history))
    assert res.objective < res.objective_history[0]
    assert res.objective == pytest.approx(rank_objective(X, y, res.coef, res.intercept, risk, loss, pen))


def test_l1_gives_sparse_coefficients():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(150, 6))
    y = X[:, 0] - X[:, 1] + 0.1 * rng.normal(size=150)
    res = lsvrg(RankRisk(X, y, Superquantile(0.5), get_loss("squared")), get_penalty("l1", 0.2), max_iter=60,
                tol=0.0, random_state=0)
    assert np.sum(res.coef == 0.0) >= 3


def test_same_seed_same_result():
    X, y = _standardised(60)
    args = (Superquantile(0.5), get_loss("squared"), get_penalty("l2", 0.01))
    for solver in (sgd, lsvrg):
        a = solver(RankRisk(X, y, *args[:2]), args[2], max_iter=5, random_state=4)
        b = solver(RankRisk(X, y, *args[:2]), args[2], max_iter=5, random_state=4)
        np.testing.assert_array_equal(a.coef, b.coef)


def test_bad_options():
    X, y = _standardised(30)
    args = (ERM(), get_loss("squared"), get_penalty("l2", 0.01))
    with pytest.raises(ValueError, match="sampling"):
        lsvrg(RankRisk(X, y, *args[:2]), args[2], sampling="importance")
    with pytest.raises(ValueError, match="learning_rate"):
        sgd(RankRisk(X, y, *args[:2]), args[2], learning_rate=-1.0)


@pytest.mark.parametrize("solver", ["sgd", "lsvrg", "prospect"])
def test_estimators_accept_baselines(solver):
    X, y = _standardised(80)
    reg = SpectralRiskRegressor(solver=solver, alpha=0.0, max_iter=30, random_state=0)
    with pytest.warns(Warning):  # the baselines rarely meet tol=1e-9 in 30 epochs
        reg.fit(X, y)
    assert reg.objective_ < reg.objective_history_[0]
    clf = SpectralRiskClassifier(risk="extremile", solver=solver, alpha=0.01, max_iter=10, random_state=0)
    with pytest.warns(Warning):
        clf.fit(X, (y > 0).astype(int))
    assert clf.objective_ < clf.objective_history_[0]


def _raw(n=60, d=3, seed=5):
    # unstandardised columns: a large mean, a small spread, another scale
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) * [1.0, 0.05, 30.0] + [0.0, 1990.0, 5.0]
    y = X @ [1.0, 20.0, 0.05] - 39800.0 + rng.standard_t(3, size=n)
    return X, y


_SOLVERS = {"sgd": sgd, "lsvrg": lsvrg, "lsvrg-nu": lambda *a, **k: lsvrg(*a, sampling="nonuniform", **k)}


@pytest.mark.parametrize("name", list(_SOLVERS))
@pytest.mark.parametrize("scale", [1e-12, 3e6, 1e12])
def test_automatic_steps_are_scale_covariant(name, scale):
    # X * s with alpha * s^2 is the same problem: the same epochs, coef / s
    X, y = _raw()
    risk, loss = Superquantile(0.5), get_loss("huber")
    ref = _SOLVERS[name](RankRisk(X, y, risk, loss), get_penalty("l2", 1e-2), max_iter=40, random_state=0)
    res = _SOLVERS[name](RankRisk(X * scale, y, risk, loss), get_penalty("l2", 1e-2 * scale**2), max_iter=40,
                         random_state=0)
    assert res.n_iter == ref.n_iter and res.converged == ref.converged
    np.testing.assert_allclose(res.objective_history, ref.objective_history, rtol=1e-8)
    np.testing.assert_allclose(res.coef * scale, ref.coef, rtol=1e-6, atol=1e-9 * np.abs(ref.coef).max())
    assert res.intercept == pytest.approx(ref.intercept, rel=1e-6)


@pytest.mark.parametrize("name", list(_SOLVERS))
def test_column_scales_change_only_the_coefficients(name):
    # without a penalty, scaling column j by c_j is the same problem: coef_j / c_j
    X, y = _raw()
    scales = np.array([1e-12, 1e9, 1.0])
    args = (Superquantile(0.5), get_loss("squared"), get_penalty("l2", 0.0))
    ref = _SOLVERS[name](RankRisk(X, y, *args[:2]), args[2], max_iter=30, random_state=0)
    res = _SOLVERS[name](RankRisk(X * scales, y, *args[:2]), args[2], max_iter=30, random_state=0)
    np.testing.assert_allclose(res.objective_history, ref.objective_history, rtol=1e-8)
    np.testing.assert_allclose(res.coef * scales, ref.coef, rtol=1e-6)


def test_constant_column_is_left_out():
    # a constant column is the intercept's: the fit with it is the fit without it
    X, y = _standardised(60)
    X_more = np.insert(X, 1, 1e3, axis=1)
    args = (ERM(), get_loss("squared"), get_penalty("l2", 0.01))
    ref = lsvrg(RankRisk(X, y, *args[:2]), args[2], random_state=0)
    res = lsvrg(RankRisk(X_more, y, *args[:2]), args[2], random_state=0)
    assert res.converged and res.coef[1] == 0.0
    assert res.objective == pytest.approx(ref.objective, rel=1e-10)
    np.testing.assert_allclose(np.delete(res.coef, 1), ref.coef, rtol=1e-8)


@pytest.mark.parametrize("name", ["sgd", "lsvrg"])
def test_given_step_too_small_to_move_does_not_converge(name):
    # a given learning_rate 1e-9 times the automatic step changes F by about 1e-9 of what
    # the automatic step would: the changes are divided by that ratio, so no convergence
    X, y = _standardised(60)
    args = (ERM(), get_loss("squared"), get_penalty("l2", 0.01))
    auto = _SOLVERS[name](RankRisk(X, y, *args[:2]), args[2], max_iter=300, tol=1e-6, random_state=0)
    slow = _SOLVERS[name](RankRisk(X, y, *args[:2]), args[2],
                          learning_rate=1e-9 * auto.info["learning_rate"], max_iter=30,
                          tol=1e-6, random_state=0)
    assert auto.converged
    assert not slow.converged and slow.stop_criterion > 1e-6
    # a given step at least the automatic one is judged as the automatic one
    fast = _SOLVERS[name](RankRisk(X, y, *args[:2]), args[2], learning_rate=auto.info["learning_rate"],
                          max_iter=300,
                          tol=1e-6, random_state=0)
    assert fast.converged


def test_estimator_warns_when_a_given_step_is_too_small():
    from sklearn.exceptions import ConvergenceWarning

    X, y = _standardised(60)
    reg = SpectralRiskRegressor(risk="erm", solver="lsvrg", learning_rate=1e-12, max_iter=20, random_state=0)
    with pytest.warns(ConvergenceWarning):
        reg.fit(X * 1e-3, y)
