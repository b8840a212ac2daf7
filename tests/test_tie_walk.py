"""The active-set walk over tie groups (skrank.solvers._tie_walk) against brute force and cvxpy."""

import numpy as np
import pytest

from skrank.losses import get_loss
from skrank.penalties import get_penalty
from skrank.risks import ExponentialSpectral, Extremile, Superquantile, TopK
from skrank.solvers._polish import Polisher
from skrank.solvers._stepsize import prepare_data
from skrank.solvers._tie_walk import _design, _first_crossing, _QuadraticFace, _violated_cuts, tie_walk
from skrank.solvers.sorel import sorel


def _brute_crossing(uo, do, go, jumps):
    best = (1.0, -1, -1)
    for k in jumps:
        for i in range(k):
            for j in range(k, uo.size):
                rate = do[i] - do[j]
                if go[i] != go[j] and rate > 0:
                    s = max(uo[j] - uo[i], 0.0) / rate
                    if s < best[0]:
                        best = (s, i, j)
    return best


@pytest.mark.parametrize("seed", range(20))
def test_first_crossing_matches_brute_force(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(5, 90))
    uo = np.sort(rng.normal(size=n))
    go = np.arange(n)
    # a few groups of equal keys (contiguous)
    for start in rng.choice(n - 2, size=min(3, n // 4), replace=False):
        uo[start + 1] = uo[start]
        go[start + 1] = go[start]
    do = rng.normal(size=n) * rng.choice([0.1, 1.0, 10.0])
    jumps = np.sort(rng.choice(np.arange(1, n), size=int(rng.integers(1, n)), replace=False))
    s, i, j = _first_crossing(uo, do, go, jumps, window=2, budget=8)
    s_ref, i_ref, j_ref = _brute_crossing(uo, do, go, jumps)
    assert s == pytest.approx(s_ref, rel=1e-12, abs=1e-15)
    if i_ref >= 0:
        # the pair found crosses at s (another pair may cross at the same s)
        assert i >= 0 and go[i] != go[j]
        assert uo[i] + s * do[i] == pytest.approx(uo[j] + s * do[j], rel=1e-9, abs=1e-12)
    else:
        assert i == -1


def _polisher(X, y, risk, loss, pen, fit_intercept=True):
    Xp, s, c, _ = prepare_data(X, y, loss, fit_intercept)
    return Polisher(Xp, s, c, risk.weights(X.shape[0]), loss, pen, fit_intercept), s, c


def _regression(n=60, d=4, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    return X, X @ rng.normal(size=d) + rng.standard_t(3, size=n)


def test_violated_cuts_finds_the_violated_inequality():
    # squared loss at t = 1: the weights are the gradient itself
    X, y = _regression(n=6)
    risk = TopK(3)  # sigma = (0, 0, 0, 1/3, 1/3, 1/3)
    P, _, _ = _polisher(X, y, risk, get_loss("squared"), get_penalty("l2", 1.0))
    t = np.ones(6)
    order = np.arange(6)
    gid = np.array([0, 1, 2, 2, 2, 3])  # one group over ranks 2..4, sigma (0, 1/3, 1/3)
    feasible = np.array([0, 0, 0.1, 0.3, 0.2667, 1 / 3])
    feasible[2:5] *= (2 / 3) / feasible[2:5].sum()
    assert _violated_cuts(P, gid, np.arange(6), feasible, t, order) == []
    # a member's weight above the group's largest sigma (equivalently the two
    # others' below sigma's two smallest): the group splits into {2, 3} below {4}
    for weights in (np.array([0, 0, 0.0, 0.1, 0.5667, 1 / 3]), np.array([0, 0, 0.05, 0.1, 0.5167, 1 / 3])):
        cuts = _violated_cuts(P, gid, np.arange(6), weights, t, order)
        assert sorted(cuts[0]) == [2, 3]


@pytest.mark.parametrize("fit_intercept", [True, False])
def test_quadratic_face_agrees_with_the_polisher_face(fit_intercept):
    X, y = _regression(seed=3)
    n = X.shape[0]
    risk, loss, pen = Superquantile(0.7), get_loss("squared"), get_penalty("l2", 0.05)
    P, s, c = _polisher(X, y, risk, loss, pen, fit_intercept)
    w = np.linalg.lstsq(X, y, rcond=None)[0]
    t = s * (X @ w) + c
    sgn = np.where(t >= 0, 1.0, -1.0)
    u = sgn * t
    order = np.argsort(u, kind="stable")
    gid = np.arange(n)
    k = int(0.7 * n)
    gid[order[k - 2: k + 2]] = gid[order[k - 2]]  # a group of four across the jump
    us = u.copy()
    us[order[k - 2: k + 2]] = u[order[k - 2: k + 2]].mean()
    x = np.append(w, 0.0) if fit_intercept else w
    qf = _QuadraticFace(P, _design(P))
    quad = qf.certify(qf.solve(order, gid, sgn, x), 1e-8)
    ref = P._face(sgn * us, w, 1e-8, 0.0)
    np.testing.assert_allclose(quad[0], ref[0], rtol=1e-9, atol=1e-10)
    assert quad[1] == pytest.approx(ref[1], abs=1e-10)
    np.testing.assert_allclose(quad[5], ref[5], rtol=1e-7, atol=1e-10)
    assert quad[3] == pytest.approx(ref[3], rel=1e-6, abs=1e-12)


def _classification(n=70, d=4, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    return X, np.where(X @ rng.normal(size=d) + rng.normal(size=n) > 0, 1.0, -1.0)


WALK_CASES = [
    ("squared", Superquantile(0.8), True, 0),
    ("squared", Superquantile(0.5), False, 1),
    ("squared", TopK(10), True, 2),
    ("squared", ExponentialSpectral(2.0), True, 3),
    ("squared", Extremile(2.5), False, 4),
    ("huber", Superquantile(0.7), True, 5),
    ("logistic", Superquantile(0.5), True, 6),  # at q = 0.6 the optimum is w = 0
]


@pytest.mark.parametrize("loss_name,risk,fit_intercept,seed", WALK_CASES,
                         ids=[f"{c[0]}-{type(c[1]).__name__}-{c[2]}" for c in WALK_CASES])
def test_walk_from_a_rough_point_reaches_cvxpy_optimum(loss_name, risk, fit_intercept, seed, referee):
    if loss_name == "logistic":
        X, y = _classification(seed=seed)
    else:
        X, y = _regression(seed=seed)
    # duplicated rows: their losses are always equal, the walk must cope
    X, y = np.vstack([X, X[:5]]), np.concatenate([y, y[:5]])
    loss, pen = get_loss(loss_name), get_penalty("l2", 1e-2)
    rough = sorel(X, y, risk, loss, pen, fit_intercept=fit_intercept, max_iter=30,
                  random_state=0, polish=False)
    f_star = referee.optimum(X, y, risk, loss_name, 1e-2, fit_intercept=fit_intercept,
                           epsilon=loss.param if loss_name == "huber" else 1.0)
    P, s, c = _polisher(X, y, risk, loss, pen, fit_intercept)
    t = s * (X @ rough.coef + rough.intercept) + c
    out = tie_walk(P, t, rough.coef, rough.intercept, 1e-8)
    assert out is not None and out[2], None if out is None else out[3]
    assert P.objective(out[0], out[1]) <= f_star + 1e-8 * abs(f_star)
    assert P.objective(out[0], out[1]) >= f_star - 1e-6 * abs(f_star)  # cvxpy's own accuracy


L1_CASES = [  # loss, risk, penalty, alpha, fit_intercept, seed, ADMM iterations of the start, zeros
    ("squared", Superquantile(0.7), "l1", 0.5, True, 0, 10, True),
    ("squared", TopK(3), "l1", 1.0, False, 1, 20, False),  # no l2, few weighted samples: rays
    ("huber", Superquantile(0.6), "elasticnet", 0.5, True, 3, 20, True),
    ("logistic", Superquantile(0.3), "l1", 0.05, True, 4, 10, True),
]


@pytest.mark.parametrize("loss_name,risk,pen_name,alpha,fit_intercept,seed,iters,zeros", L1_CASES,
                         ids=[f"{c[0]}-{type(c[1]).__name__}-{c[2]}" for c in L1_CASES])
def test_walk_with_l1_reaches_cvxpy_optimum(loss_name, risk, pen_name, alpha, fit_intercept, seed,
                                            iters, zeros, referee):
    # from a rough ADMM iterate: the walk moves the zero set (coefficients
    # reaching zero are held, held ones with a large gradient are released)
    from skrank.solvers.admm import admm

    if loss_name == "logistic":
        X, y = _classification(n=120, d=6, seed=seed)
    else:
        X, y = _regression(n=120, d=6, seed=seed)
    loss, pen = get_loss(loss_name), get_penalty(pen_name, alpha)
    rough = admm(X, y, risk, loss, pen, fit_intercept=fit_intercept, max_iter=iters, polish=False)
    f_star = referee.optimum(X, y, risk, loss, pen, fit_intercept=fit_intercept)
    assert rough.objective - f_star > 1e-6 * abs(f_star)  # the start is not optimal
    P, s, c = _polisher(X, y, risk, loss, pen, fit_intercept)
    t = s * (X @ rough.coef + rough.intercept) + c
    out = tie_walk(P, t, rough.coef, rough.intercept, 1e-8)
    assert out is not None and out[2], None if out is None else out[3]
    F = P.objective(out[0], out[1])
    assert f_star - 1e-6 * abs(f_star) <= F <= f_star + 1e-8 * abs(f_star)
    assert np.any(out[0] == 0.0) == zeros and not np.all(out[0] == 0.0)


def test_walk_stops_at_its_work_budget():
    X, y = _regression(n=200, seed=7)
    risk, loss, pen = Superquantile(0.7), get_loss("squared"), get_penalty("l2", 1e-2)
    rough = sorel(X, y, risk, loss, pen, max_iter=10, random_state=0, polish=False)
    P, s, c = _polisher(X, y, risk, loss, pen)
    t = s * (X @ rough.coef + rough.intercept) + c
    free = tie_walk(P, t, rough.coef, rough.intercept, 1e-8)
    assert free is not None and free[2]
    spent = P.work
    assert spent > 0
    P.work = 0
    assert tie_walk(P, t, rough.coef, rough.intercept, 1e-8, max_work=spent / 10) is None
    assert P.work <= spent  # it stopped early
