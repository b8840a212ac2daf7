"""AGD with SGD inner loops for ranked-range risks (skrank.solvers.stochastic.sorr_agd) and solver="agd"."""

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.datasets import make_classification, make_regression
from sklearn.preprocessing import StandardScaler

from skrank.datafits.rank_risk import RankRisk, rank_objective
from skrank.estimators import RankADMMClassifier, RankADMMRegressor
from skrank.losses import get_loss
from skrank.penalties import get_penalty
from skrank.risks import RankedRange, Superquantile, TopK
from skrank.solvers.splitting.admm import admm
from skrank.solvers.splitting.dca import dca
from skrank.solvers.stochastic.sampling import seed_state
from skrank.solvers.stochastic.sorr_agd import sorr_agd, sorr_sgd

# Relative gap to the best of ADMM and DCA that the default AGD holds on these
# problems: over random_state = 0..19 the largest was 7.5e-3 (hinge, one seed),
# the medians 4e-5 to 8e-4 (1e-5 for m = 0).
GAP = 1e-2


def _classification(seed=0, n=400, d=6):
    # class_sep=1.5 and k = 80%: with k <= 60% of the largest losses on
    # overlapping classes the optimum is within 1% of F(0), and w = 0 (where
    # every loss ties) a stationary point that AGD and DCA keep
    X, y = make_classification(n, d, n_informative=3, flip_y=0.05, class_sep=1.5,
                               random_state=seed)
    return StandardScaler().fit_transform(X), np.where(y == 1, 1.0, -1.0)


def _regression(seed=0, n=400, d=5):
    rng = np.random.default_rng(seed)
    X, y = make_regression(n, d, noise=20.0, random_state=seed)
    out = rng.choice(n, n // 20, replace=False)
    y[out] += rng.normal(0.0, 10.0 * y.std(), out.size)  # 5% outliers
    return StandardScaler().fit_transform(X), (y - y.mean()) / y.std()


def _reference(X, y, risk, loss, pen):
    a = admm(RankRisk(X, y, risk, loss), pen, max_iter=1000, tol=1e-7).objective
    b = dca(RankRisk(X, y, risk, loss), pen, max_iter=1000, tol=1e-7).objective
    return min(a, b)


CASES = {
    "logistic-l2": (_classification, RankedRange(0.05, 0.8), "logistic", "l2", 1e-2),
    "logistic-elasticnet": (_classification, RankedRange(0.05, 0.8), "logistic", "elasticnet",
                            1e-2),
    "hinge-l2": (_classification, RankedRange(0.05, 0.7), "hinge", "l2", 1e-2),
    "squared-l2": (_regression, RankedRange(0.1, 0.9), "squared", "l2", 1e-3),
    "huber-l2": (_regression, RankedRange(0.05, 0.8), "huber", "l2", 1e-3),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_agd_lowers_F_and_ends_near_admm_and_dca(case):
    data, risk, loss_name, pen_name, alpha = CASES[case]
    X, y = data()
    loss, pen = get_loss(loss_name), get_penalty(pen_name, alpha)
    res = sorr_agd(RankRisk(X, y, risk, loss), pen, random_state=0)
    F0 = rank_objective(X, y, np.zeros(X.shape[1]), 0.0, risk, loss, pen)
    assert res.info["objective_start"] == pytest.approx(F0, rel=1e-12)
    hist = res.objective_history
    assert len(hist) == res.n_iter and np.all(np.diff(hist) <= 0.0)
    assert res.objective == pytest.approx(
        rank_objective(X, y, res.coef, res.intercept, risk, loss, pen), rel=1e-12)
    assert res.objective < 0.95 * F0
    assert res.objective <= (1.0 + GAP) * _reference(X, y, risk, loss, pen)
    assert res.info["passes"] > res.info["inner_passes"] > 0 and res.info["time"] > 0


def test_l1_path_finds_the_zeros_of_the_admm():
    X, y = _classification()
    risk, loss, pen = RankedRange(0.05, 0.8), get_loss("logistic"), get_penalty("l1", 3e-2)
    ref = admm(RankRisk(X, y, risk, loss), pen, max_iter=1000, tol=1e-7)
    assert np.sum(ref.coef == 0.0) >= 3
    res = sorr_agd(RankRisk(X, y, risk, loss), pen, random_state=1)
    # the final proximal-gradient step gives exact zeros, the averaged iterates never do
    np.testing.assert_array_equal(res.coef == 0.0, ref.coef == 0.0)
    # _reference(X, y, risk, loss, pen) without running ref's ADMM a second time
    best = min(ref.objective, dca(RankRisk(X, y, risk, loss), pen, max_iter=1000, tol=1e-7).objective)
    assert res.objective <= (1.0 + GAP) * best


def test_m_zero_skips_the_m_call_and_solves_the_top_k_mean():
    X, y = _classification(1)
    n = X.shape[0]
    loss, pen = get_loss("logistic"), get_penalty("l2", 1e-2)
    res = sorr_agd(RankRisk(X, y, RankedRange(0, 0.8), loss), pen, max_iter=12, batch_size=50, inner_iter0=4,
                   random_state=0)

    def steps(n_iter):
        return sum(4 * j * j for j in range(1, n_iter + 1)) * 50 / n

    # one call of T_k = 4 (k+1)^2 steps of 50 samples per outer iteration, not two
    assert res.info["inner_passes"] == pytest.approx(steps(res.n_iter))
    both = sorr_agd(RankRisk(X, y, RankedRange(1, 0.8), loss), pen, max_iter=12, batch_size=50,
                    inner_iter0=4, random_state=0)
    assert both.info["inner_passes"] == pytest.approx(2 * steps(both.n_iter))
    # m = 0 is the convex mean of the top k losses; the ADMM solves it exactly
    k = RankedRange(0, 0.8).counts(n)[1]
    exact = admm(RankRisk(X, y, TopK(k), loss), pen, max_iter=3000, tol=1e-9).objective
    assert exact <= res.objective <= (1.0 + GAP) * exact


def test_random_state_makes_runs_reproducible():
    X, y = _regression(2)
    risk, loss, pen = RankedRange(0.05, 0.8), get_loss("huber"), get_penalty("l2", 1e-3)
    a = sorr_agd(RankRisk(X, y, risk, loss), pen, max_iter=8, random_state=3)
    b = sorr_agd(RankRisk(X, y, risk, loss), pen, max_iter=8, random_state=3)
    c = sorr_agd(RankRisk(X, y, risk, loss), pen, max_iter=8, random_state=4)
    np.testing.assert_array_equal(a.coef, b.coef)
    assert a.intercept == b.intercept
    np.testing.assert_array_equal(a.info["objective_raw"], b.info["objective_raw"])
    assert not np.array_equal(a.info["objective_raw"], c.info["objective_raw"])


def test_sparse_input_and_no_intercept():
    X, y = _classification(2, 300)
    risk, loss, pen = RankedRange(0.1, 0.8), get_loss("logistic"), get_penalty("l2", 1e-2)
    dense = sorr_agd(RankRisk(X, y, risk, loss), pen, max_iter=6, random_state=0)
    csr = sorr_agd(RankRisk(sp.csr_matrix(X), y, risk, loss), pen, max_iter=6, random_state=0)
    np.testing.assert_allclose(csr.coef, dense.coef, rtol=1e-12, atol=1e-14)
    free = sorr_agd(RankRisk(X, y, risk, loss, fit_intercept=False), pen, max_iter=6, random_state=0)
    assert free.intercept == 0.0
    assert free.objective == pytest.approx(rank_objective(X, y, free.coef, 0.0, risk, loss, pen))


@pytest.mark.parametrize("loss_name, l1, l2", [("logistic", 0.01, 0.02), ("squared", 0.0, 0.1),
                                               ("hinge", 0.03, 0.0)])
def test_inner_kernel_matches_a_numpy_replay(loss_name, l1, l2):
    # With J = n every batch is the whole sample, so Algorithm 3 is deterministic.
    rng = np.random.default_rng(0)
    n, d, T = 30, 4, 6
    X = rng.standard_normal((n, d))
    if loss_name == "squared":
        y = X @ rng.standard_normal(d) + rng.standard_normal(n)
        s, c = np.ones(n), -y
    else:
        y = np.where(rng.standard_normal(n) > 0, 1.0, -1.0)
        s, c = -y, np.zeros(n)
    loss = get_loss(loss_name)
    w, wb, lam0 = 0.3 * rng.standard_normal(d), 0.2, 0.5
    level, mu, eta, theta = 0.4, 2.0, 0.3, 0.1

    v, b, lam = w.copy(), wb, lam0
    vs, bs, lams = [], [], []
    for _ in range(T):
        vs.append(v.copy())
        bs.append(b)
        lams.append(lam)
        t = s * (X @ v + b) + c
        act = loss.value(t) > lam
        g = s * loss.derivative(t) * act
        G, Gb = X.T @ g / n, g.sum() / n
        z = (eta * w + mu * v - mu * eta * G) / (mu + eta)
        a = mu * eta / (mu + eta)
        v = np.sign(z) * np.maximum(np.abs(z) - a * l1, 0.0) / (1.0 + a * l2)
        b = (eta * wb + mu * b - mu * eta * Gb) / (mu + eta)
        lam = max(lam - theta * (level - act.mean()), 0.0)

    v_out, vbar, grad = np.empty(d), np.empty(d), np.empty(d)
    perm = np.arange(n, dtype=np.int64)
    state = seed_state(np.random.default_rng(1))
    vbar_b, b_last, lambar = sorr_sgd(
        X, s, c, loss.code, loss.param, w, wb, lam0, T, n, level, mu, eta, theta, np.full(d, l1),
        np.full(d, l2), True,
        perm, state, v_out, vbar, grad,
    )
    np.testing.assert_allclose(v_out, v, rtol=1e-12, atol=1e-14)
    assert b_last == pytest.approx(b, rel=1e-12)
    np.testing.assert_allclose(vbar, np.mean(vs, axis=0), rtol=1e-12, atol=1e-14)
    assert vbar_b == pytest.approx(np.mean(bs), rel=1e-12)
    assert lambar == pytest.approx(np.mean(lams), rel=1e-12)
    assert np.sort(perm).tolist() == list(range(n))


def test_estimators_accept_agd_for_ranked_ranges_only():
    X, y = _classification(3, 300)
    clf = RankADMMClassifier(risk=RankedRange(0.05, 0.8), solver="agd", max_iter=30,
                             random_state=0).fit(X, y)
    assert clf.coef_.shape == (1, 6) and clf.score(X, y) > 0.8
    F = rank_objective(X, np.where(y == 1, 1.0, -1.0), clf.coef_[0], clf.intercept_[0],
                       RankedRange(0.05, 0.8), get_loss("logistic"), get_penalty("l2", 1e-2))
    assert clf.objective_ == pytest.approx(F, rel=1e-12)
    again = RankADMMClassifier(risk=RankedRange(0.05, 0.8), solver="agd", max_iter=30,
                               random_state=0).fit(X, y)
    np.testing.assert_array_equal(again.coef_, clf.coef_)

    Xr, yr = _regression(4, 300)
    risk = RankedRange(0.05, 0.8)
    reg = RankADMMRegressor(risk=risk, loss="huber", alpha=1e-3, solver="agd", max_iter=30,
                            random_state=0).fit(Xr, yr)
    ref = RankADMMRegressor(risk=risk, loss="huber", alpha=1e-3).fit(Xr, yr)
    assert reg.objective_ <= (1.0 + GAP) * ref.objective_
    start = rank_objective(Xr, yr, np.zeros(5), 0.0, risk, get_loss("huber"),
                           get_penalty("l2", 1e-3))
    assert reg.objective_ < 0.5 * start

    with pytest.raises(ValueError, match="solver='agd'"):
        RankADMMClassifier(risk=Superquantile(0.5), solver="agd").fit(X, y)
    with pytest.raises(ValueError, match="ranked-range"):
        RankADMMRegressor(risk="erm", solver="agd").fit(Xr, yr)


@pytest.mark.parametrize("scales", [1e6, [1e-12, 1.0, 1e12, 1e-3, 1e4]], ids=["uniform", "columns"])
def test_steps_are_scale_covariant(scales):
    # X * s with the penalty rescaled (uniform) or columns scaled one by one without a
    # penalty: the same outer iterations, coef / s.  In the units of X, s = 3e6 froze the
    # intercept (its steps were those of the coefficients)
    X, y = _regression(5, 120)
    risk, loss = RankedRange(0.1, 0.6), get_loss("huber")
    scales = np.broadcast_to(np.asarray(scales, dtype=np.float64), (X.shape[1],))
    alpha = 1e-2 if np.ptp(scales) == 0 else 0.0
    ref = sorr_agd(RankRisk(X, y, risk, loss), get_penalty("l2", alpha), max_iter=8, random_state=0)
    res = sorr_agd(RankRisk(X * scales, y, risk, loss), get_penalty("l2", alpha * scales[0] ** 2),
                   max_iter=8, random_state=0)
    assert res.n_iter == ref.n_iter
    np.testing.assert_allclose(res.objective_history, ref.objective_history, rtol=1e-8)
    np.testing.assert_allclose(res.coef * scales, ref.coef, rtol=1e-6, atol=1e-9)
