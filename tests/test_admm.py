"""Exactness of the rank ADMM (skrank.solvers.splitting.admm) against cvxpy, and stationarity."""

import numpy as np
import pytest
from sklearn.datasets import make_regression

from skrank.datafits.rank_risk import RankRisk
from skrank.kernels.pava import zstep
from skrank.losses import get_loss
from skrank.penalties import get_penalty
from skrank.risks import ERM, ExponentialSpectral, Extremile, HumanAligned, RankedRange, Superquantile
from skrank.solvers.splitting.admm import RhoSchedule, admm, reference_to_z

REL = 1e-6



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


def _check_exact(referee, X, y, risk, loss_name, pen_name, fit_intercept, **kw):
    loss = get_loss(loss_name)
    penalty = get_penalty(pen_name, 1e-2, 0.5)
    res = admm(RankRisk(X, y, risk, loss, fit_intercept=fit_intercept), penalty, max_iter=6000, tol=1e-8,
               rho="paper", l1_solver="cd", **kw)
    F_star = referee.optimum(X, y, risk, loss, penalty, fit_intercept=fit_intercept)
    # (convergence to tol=1e-8 itself is not required; the objective is the goal)
    assert res.objective <= F_star * (1 + REL) + 1e-12, (res.objective, F_star)
    assert res.objective >= F_star * (1 - 1e-5)  # cvxpy is the referee, not beaten by much


def _one_risk_per_pair_fast():
    """Every (risk, loss, penalty) of the grid; ``make test`` keeps one risk per loss and penalty.

    The kept risk cycles through :data:`CONVEX_RISKS`, so that the fast cases still cover every
    risk, every loss and every penalty; the rest of the grid is marked slow.
    """
    cases = []
    for i, (loss_name, pen_name) in enumerate(LOSS_PENALTY):
        for j, risk in enumerate(CONVEX_RISKS):
            marks = () if j == i % len(CONVEX_RISKS) else (pytest.mark.slow,)
            cases.append(pytest.param(risk, loss_name, pen_name, marks=marks,
                                      id=f"{loss_name}-{pen_name}-{type(risk).__name__}"))
    return cases


@pytest.mark.parametrize("risk,loss_name,pen_name", _one_risk_per_pair_fast())
def test_convex_exact_breast_cancer(risk, loss_name, pen_name, referee, breast_cancer_small):
    X, y = breast_cancer_small
    _check_exact(referee, X, y, risk, loss_name, pen_name, True)


@pytest.mark.parametrize("risk", [ERM(), Superquantile(0.7)], ids=lambda r: type(r).__name__)
@pytest.mark.parametrize("loss_name,pen_name", [("logistic", "l1"), ("hinge", "l2"),
                                                ("squared_hinge", "elasticnet")])
@pytest.mark.parametrize("fit_intercept", [True, False])
@pytest.mark.parametrize("data", ["synthetic_classification", "credit_small"])
def test_convex_exact_other_data(risk, loss_name, pen_name, fit_intercept, data, referee, request):
    X, y = request.getfixturevalue(data)
    _check_exact(referee, X, y, risk, loss_name, pen_name, fit_intercept)


@pytest.mark.parametrize("loss_name", ["squared", "absolute", "huber"])
@pytest.mark.parametrize("risk", [ERM(), Superquantile(0.7), Extremile(2.0)],
                         ids=lambda r: type(r).__name__)
def test_regression_even_zstep_exact(loss_name, risk, referee):
    X, y = make_regression(80, 5, noise=5.0, random_state=0)
    y = y / np.std(y)
    loss = get_loss(loss_name)
    penalty = get_penalty("l2", 1e-2)
    res = admm(RankRisk(X, y, risk, loss), penalty, max_iter=6000, tol=1e-9)
    F_star = referee.optimum(X, y, risk, loss, penalty)
    assert abs(res.objective - F_star) <= REL * abs(F_star)


def test_sweep_and_smoothed_variants(synthetic_classification):
    X, y = synthetic_classification
    loss, pen = get_loss("logistic"), get_penalty("l2", 1e-2)
    a = admm(RankRisk(X, y, Superquantile(0.8), loss), pen, tol=1e-8, max_iter=3000)
    b = admm(RankRisk(X, y, Superquantile(0.8), loss), pen, tol=1e-8, max_iter=3000, zstep_method="sweep")
    assert abs(a.objective - b.objective) <= 1e-7 * a.objective
    pen1 = get_penalty("l1", 1e-2)
    c = admm(RankRisk(X, y, ERM(), loss), pen1, tol=1e-8, max_iter=3000, l1_solver="cd")
    d = admm(RankRisk(X, y, ERM(), loss), pen1, tol=1e-8, max_iter=3000, l1_solver="fista")
    e = admm(RankRisk(X, y, ERM(), loss), pen1, tol=1e-6, max_iter=300, l1_solver="smoothed")
    assert abs(c.objective - d.objective) <= 1e-6 * c.objective
    assert e.objective <= c.objective * (1 + 1e-3)


def test_rho_schedules(synthetic_classification):
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
    X, y = synthetic_classification
    res = admm(RankRisk(X, y, ERM(), get_loss("logistic")), get_penalty("l2", 1e-2), rho=1e-3, tol=1e-8,
               max_iter=3000)
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
    """The three eps-KKT residuals of Xiao et al. 2023, Theorem 1 (scaled as in admm)."""
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


NONCONVEX_CASES = [
    (RankedRange(0.1, 0.6), "logistic", "adaptive"),
    (RankedRange(0.1, 0.6), "logistic", "paper"),
    (RankedRange(0.2, 0.8), "logistic", "paper"),
    pytest.param(RankedRange(0.1, 0.6), "hinge", "paper", marks=pytest.mark.slow),  # the hinge's long run
    (HumanAligned(), "logistic", "paper"),
]


@pytest.fixture(scope="module")
def dca_objective(synthetic_classification):
    """``objective(risk, loss_name)``: DCA's ``F`` on ``synthetic_classification`` with l2 1e-2, run once.

    The hinge-loss DCA is the slowest fit of the module and two tests compare with the same one.  On
    these rows it reaches its objective at the third outer iteration and rejects every later step
    (each of 2,000 inner iterations): 5 outer iterations give the same ``F`` as the default 50, bit
    for bit, in a tenth of the time.
    """
    from skrank.solvers.splitting.dca import dca

    X, y = synthetic_classification
    done = {}

    def objective(risk, loss_name):
        key = (repr(risk), loss_name)
        if key not in done:
            max_iter = 5 if loss_name == "hinge" else 50
            done[key] = dca(RankRisk(X, y, risk, get_loss(loss_name)), get_penalty("l2", 1e-2),
                            max_iter=max_iter).objective
        return done[key]

    return objective


@pytest.mark.parametrize(
    "risk,loss_name,rho", NONCONVEX_CASES,
    ids=[f"{type(r).__name__}-{ln}-{rho}" for r, ln, rho in (c.values if hasattr(c, "values") else c
                                                             for c in NONCONVEX_CASES)],
)
def test_nonconvex_stationary_and_not_worse_than_baselines(risk, loss_name, rho, synthetic_classification,
                                                          dca_objective):
    from skrank.solvers.stochastic.lsvrg import lsvrg
    from skrank.solvers.stochastic.sgd import sgd

    X, y = synthetic_classification
    loss, penalty = get_loss(loss_name), get_penalty("l2", 1e-2)
    tol = 1e-6
    res = admm(RankRisk(X, y, risk, loss), penalty, rho=rho, max_iter=5000, tol=tol)
    assert res.converged, res.stop_criterion
    # The eps-KKT residuals of Xiao et al. 2023 (Theorem 1), recomputed here from
    # (w, b, z, lambda), against a fixed bound (not the solver's own residual).
    primal, dual, pen = _stationarity(X, y, res, risk, loss, penalty)
    bound = 10 * tol
    assert primal <= bound and dual <= bound and pen <= bound, (primal, dual, pen)
    baselines = {
        "sgd": sgd(RankRisk(X, y, risk, loss), penalty, max_iter=200, random_state=0),
        "lsvrg": lsvrg(RankRisk(X, y, risk, loss), penalty, sampling="uniform", max_iter=200, random_state=0),
        "lsvrg-nu": lsvrg(RankRisk(X, y, risk, loss), penalty, sampling="nonuniform", max_iter=200,
                          random_state=0),
    }
    objectives = {name: base.objective for name, base in baselines.items()}
    if isinstance(risk, RankedRange):
        objectives["dca"] = dca_objective(risk, loss_name)
    worse = {name: F for name, F in objectives.items() if res.objective > F * (1 + 1e-6)}
    assert not worse, (res.objective, worse)


def test_nonconvex_refine_no_worse_than_plain_admm(synthetic_classification, dca_objective):
    # Algorithm 1 alone (refine=False) with the paper's Table 6 schedule stops
    # at a worse point than DCA on this problem (hinge loss); the default
    # (refine=True, rho="paper") reaches DCA's objective or lower, and no
    # higher than Algorithm 1 alone with the same schedule.
    X, y = synthetic_classification
    args = (RankRisk(X, y, RankedRange(0.1, 0.6), get_loss("hinge")), get_penalty("l2", 1e-2))
    F_dca = dca_objective(RankedRange(0.1, 0.6), "hinge")
    table6 = admm(*args, rho="table6", max_iter=5000, tol=1e-6, refine=False)
    plain = admm(*args, max_iter=5000, tol=1e-6, refine=False)
    refined = admm(*args, max_iter=5000, tol=1e-6)
    assert table6.objective > F_dca * (1 + 1e-3)
    assert refined.objective <= min(plain.objective, F_dca) * (1 + 1e-9)
    assert refined.info["source"].startswith("trimming")


def test_stationarity_check_can_fail(synthetic_classification):
    # The check above is not vacuous: an early-stopped run fails it.
    X, y = synthetic_classification
    risk, loss, penalty = RankedRange(0.1, 0.6), get_loss("logistic"), get_penalty("l2", 1e-2)
    res = admm(RankRisk(X, y, risk, loss), penalty, rho="adaptive", max_iter=50, tol=1e-6, refine=False)
    assert max(_stationarity(X, y, res, risk, loss, penalty)) > 1e-5


@pytest.mark.parametrize("shape", [(40, 15), (15, 40)], ids=["n>d", "n<d"])
@pytest.mark.parametrize("fit_intercept", [True, False])
@pytest.mark.parametrize("l2", [1e-2, 0.0])
def test_prediction_space_l2_step_matches_closed_form(shape, fit_intercept, l2):
    # WStep.fast_l2 (B^T v and B c only) gives the same (w, b, X w + b, penalty)
    # as the closed form through the eigenpairs, for the Gram (n >= d) and
    # kernel (n < d) factorisations, including the pseudo-inverse when l2 = 0.
    from skrank.penalties import Penalty
    from skrank.solvers.splitting.admm_wstep import WStep

    rng = np.random.default_rng(0)
    X = rng.standard_normal(shape)
    v = rng.standard_normal(shape[0])
    ws = WStep(X, Penalty(0.0, l2), fit_intercept)
    assert ws.fast_l2_available()
    for rho in [1e-4, 0.3, 50.0]:
        w, b, _ = ws.solve(v, rho, np.zeros(shape[1]))
        f, coeffs, pen_value = ws.fast_l2(v, rho)
        w_fast = ws.fast_coef(coeffs)
        scale = 1.0 + np.abs(X @ w).max()
        assert np.allclose(f, X @ w + b, atol=1e-9 * scale)
        assert np.allclose(w_fast, w, atol=1e-8 * (1.0 + np.abs(w).max()))
        assert ws.intercept_for(w_fast, v, rho) == pytest.approx(b, abs=1e-8 * scale)
        assert pen_value == pytest.approx(0.5 * l2 * (w @ w), rel=1e-9, abs=1e-14)


def test_fast_path_same_iterates_as_general_path(synthetic_classification):
    from skrank.solvers.splitting import admm as admm_module

    X, y = synthetic_classification
    loss, pen = get_loss("logistic"), get_penalty("l2", 1e-2)
    a = admm(RankRisk(X, y, Superquantile(0.8), loss), pen, tol=1e-8, max_iter=3000)
    size = admm_module.WStep.max_basis_size
    admm_module.WStep.max_basis_size = 0  # disable the prediction-space step
    try:
        b = admm(RankRisk(X, y, Superquantile(0.8), loss), pen, tol=1e-8, max_iter=3000)
    finally:
        admm_module.WStep.max_basis_size = size
    assert a.n_iter == b.n_iter
    assert np.allclose(a.objective_history, b.objective_history, rtol=1e-9)
    assert np.allclose(a.coef, b.coef, atol=1e-8) and a.intercept == pytest.approx(b.intercept, abs=1e-9)


def test_rho_rises_when_nonconvex_iterates_cycle():
    sched = RhoSchedule("adaptive", RankedRange(), 100, 5)
    sched.n_changes = sched.max_changes  # balancing over
    rho = 1.0
    # A cycle: flat residual, objective going up and down.
    for k in range(3 * sched.stall_window):
        rho = sched.update(k, rho, 1e-2, 1e-2, 1e-2, objective=1.0 + 1e-3 * (k % 2))
    assert rho == 4.0  # first window: reference; then doubled after each window
    # Slow but monotone convergence: no raise.
    sched = RhoSchedule("adaptive", RankedRange(), 100, 5)
    sched.n_changes = sched.max_changes
    rho = 1.0
    for k in range(3 * sched.stall_window):
        rho = sched.update(k, rho, 1e-2, 1e-2, 1e-2, objective=1.0 - 1e-6 * k)
    assert rho == 1.0
    # Convex risks never use the rule.
    assert not RhoSchedule("adaptive", ERM(), 100, 5).raise_on_stall


def test_thin_tail_logistic_fit_is_certified_by_the_newton_finish(referee):
    # A superquantile at q = 0.93 of 163 samples: the ADMM alone crawls (1e-4
    # above the optimum after 1000 iterations); the Newton method from its
    # iterate certifies the optimum.
    rng = np.random.default_rng(1)
    n, d = int(rng.integers(40, 300)), int(rng.integers(2, 10))
    X = rng.normal(size=(n, d)) * rng.choice([0.3, 1, 3])
    rng.random()  # (keeps the draw of the case below)
    assert np.unique(X, axis=0).shape[0] == n  # no duplicated rows in this draw
    risk = Superquantile(float(rng.uniform(0.3, 0.95)))
    rng.integers(1, n // 3 + 2), rng.uniform(1.5, 4), rng.uniform(0.5, 5)
    fit_intercept = bool(rng.random() < 0.7)
    alpha = float(10 ** rng.uniform(-3, -0.5))
    y = np.where(X @ rng.normal(size=d) + rng.normal(size=n) > 0, 1.0, -1.0)
    loss, pen = get_loss("logistic"), get_penalty("l2", alpha)
    res = admm(RankRisk(X, y, risk, loss, fit_intercept=fit_intercept), pen, max_iter=1000)
    assert res.converged and res.info["polished"]
    f_star = referee.optimum(X, y, risk, loss, pen, fit_intercept=fit_intercept)
    assert res.objective <= f_star + 1e-8 * abs(f_star)
    plain = admm(RankRisk(X, y, risk, loss, fit_intercept=fit_intercept), pen, max_iter=1000, polish=False)
    assert plain.objective - f_star > 1e-6 * abs(f_star)  # the case is hard without it


def _sweep_case(seed, target):
    """Data and settings of case ``target`` of a randomized sweep of convex fits (``default_rng(seed)``)."""
    from skrank.risks import TopK

    rng = np.random.default_rng(seed)
    for case in range(target + 1):
        n, d = int(rng.integers(40, 300)), int(rng.integers(2, 10))
        X = rng.normal(size=(n, d)) * rng.choice([0.3, 1, 3])
        if rng.random() < 0.3:
            X = np.vstack([X, X[:10]])
            n = X.shape[0]
        risks = [Superquantile(float(rng.uniform(0.3, 0.95))), TopK(int(rng.integers(1, n // 3 + 2))),
                 Extremile(float(rng.uniform(1.5, 4))), ExponentialSpectral(float(rng.uniform(0.5, 5))),
                 ERM()]
        risk = risks[case % 5]
        fit_intercept = bool(rng.random() < 0.7)
        alpha = float(10 ** rng.uniform(-3, -0.5))
        pen = ["l2", "l1", "elasticnet"][case % 3]
        if case % 2 == 0:
            loss = ["logistic", "hinge", "squared_hinge"][(case // 2) % 3]
            y = np.where(X @ rng.normal(size=d) + rng.normal(size=n) > 0, 1.0, -1.0)
        else:
            loss = ["squared", "absolute", "huber"][(case // 2) % 3]
            y = X @ rng.normal(size=d) + rng.standard_t(3, size=n)
    return X, y, risk, get_loss(loss), get_penalty(pen, alpha), fit_intercept


def test_topk_hinge_fit_with_an_extra_tie_member_is_certified(referee):
    # Top-33 of 108 hinge losses (10 rows duplicated), elastic net: the
    # optimum ties 7 losses at the top-k boundary, but the z-step's block there
    # holds an 8th sample.  As constraints, 8 ties fix all 7 unknowns of
    # (w, b) (at w = 0, b = 0); the walk must let the block's members move
    # (its tau pieces) to find the optimum's block, which the face certifies.
    X, y, risk, loss, pen, fit_intercept = _sweep_case(1, 26)
    assert (type(risk).__name__, loss.name, risk.k, X.shape) == ("TopK", "hinge", 33, (108, 6))
    res = admm(RankRisk(X, y, risk, loss, fit_intercept=fit_intercept), pen, max_iter=1000)
    assert res.converged and res.info["polished"]
    f_star = referee.optimum(X, y, risk, loss, pen, fit_intercept=fit_intercept)
    assert abs(res.objective - f_star) <= 1e-8 * abs(f_star)


def pytest_generate_tests(metafunc):
    # `pytest --sweep full` runs the whole randomized sweep; `make test` a fast subset
    if "sweep_case" in metafunc.fixturenames:
        count = 60 if metafunc.config.getoption("--sweep") == "full" else 8
        # Known miss of the ADMM at max_iter=1000, measured 2026-11-24: the
        # absolute loss with a superquantile (case 45, 1.2e-6 above).  (Case 46,
        # the squared hinge with top-k and l1, 1.7e-4 above then, is certified
        # since smooth losses are finished by the Newton method.)
        missed = {45}
        # case 3 takes several times the others together: ``make test-slow`` runs it
        slow = {3}
        miss = pytest.mark.xfail(strict=True, reason="known ADMM miss")
        cases = [pytest.param(c, marks=[miss] * (c in missed) + [pytest.mark.slow] * (c in slow))
                 for c in range(count)]
        metafunc.parametrize("sweep_case", cases)


def test_randomized_sweep_of_convex_fits_reaches_cvxpy(sweep_case, referee):
    # Random sizes, scales, duplicated rows, risks, losses and penalties: the
    # kind of sweep that found the tie-walk and kink-set bugs.
    # The estimators' budget (max_iter=1000); the solver's own default is 300.
    X, y, risk, loss, pen, fit_intercept = _sweep_case(1, sweep_case)
    res = admm(RankRisk(X, y, risk, loss, fit_intercept=fit_intercept), pen, max_iter=1000)
    f_star = referee.optimum(X, y, risk, loss, pen, fit_intercept=fit_intercept)
    assert res.objective <= f_star + 1e-6 * abs(f_star), (res.objective, f_star)


def test_penalty_residual_is_measured_per_standardised_coefficient():
    # columns rescaled one by one (and the penalty with them) leave the residual unchanged;
    # in the units of X a column of scale 1e-12 would pass at any coefficient
    from skrank.solvers.splitting.admm import _penalty_residual
    from skrank.solvers.splitting.admm_wstep import WStep

    rng = np.random.default_rng(0)
    n, d = 30, 3
    X = rng.normal(size=(n, d)) + [0.0, 5.0, -1.0]
    s, lam, w = np.ones(n), rng.normal(size=n) / n, rng.normal(size=d)
    scales = np.array([1e-12, 1.0, 1e9])
    for pen in (get_penalty("l2", 0.0), get_penalty("elasticnet", 0.3)):
        ref = _penalty_residual(X, s, lam, w, WStep(X, pen, True), None)
        # the elastic net rescaled per column is not an elastic net: only its l2-free part here
        if pen.l1 == 0.0:
            got = _penalty_residual(X * scales, s, lam, w / scales, WStep(X * scales, pen, True), None)
            assert got == pytest.approx(ref, rel=1e-10)
        uniform = type(pen)(pen.l1 * 1e-9, pen.l2 * 1e-18)
        got = _penalty_residual(X * 1e-9, s, lam, w * 1e9, WStep(X * 1e-9, uniform, True), None)
        assert got == pytest.approx(ref, rel=1e-10)


@pytest.mark.parametrize("loss_name,risk", [("absolute", ERM()), ("absolute", Superquantile(0.5))])
def test_columns_scaled_apart_are_not_declared_converged_off_the_optimum(loss_name, risk):
    # columns of scale 1e7 and 1e-7 (alpha = 0): the w-step cannot resolve both; the fit must
    # reach the unscaled optimum or say that it did not converge (the finish's certificate,
    # measured in the units of X, is checked again per standardised coefficient)
    rng = np.random.default_rng(3)
    X = rng.normal(size=(46, 2))
    y = X @ [1.0, -0.5] + 0.5 * rng.standard_t(3, size=46)
    scales = np.array([1e7, 1e-7])
    pen = get_penalty("elasticnet", 0.0)
    ref = admm(RankRisk(X, y, risk, get_loss(loss_name)), pen)
    res = admm(RankRisk(X * scales, y, risk, get_loss(loss_name)), pen)
    assert ref.converged
    assert not res.converged or res.objective == pytest.approx(ref.objective, rel=1e-4)
    if not res.converged:
        assert res.stop_criterion > 1e-6
