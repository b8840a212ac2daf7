"""The active-set finish of the certified Newton solver: Newton's method on the exact risk's tied losses."""

import itertools

import numpy as np
import pytest
import scipy.optimize

from skrank.datafits.rank_risk import RankRisk
from skrank.datafits.rank_step import Pooled
from skrank.losses import get_loss
from skrank.penalties import get_penalty
from skrank.risks import ExponentialSpectral, Extremile, Superquantile
from skrank.solvers.full_batch.active_set import ActiveSetFinish, in_permutahedron, join_blocks, split_blocks
from skrank.solvers.full_batch.newton import smoothed_newton


def _in_hull_of_permutations(q, sigma):
    """Whether ``q`` is a convex combination of the permutations of ``sigma`` (a linear programme)."""
    vertices = np.array(list(itertools.permutations(sigma))).T
    ones = np.ones(vertices.shape[1])
    res = scipy.optimize.linprog(0.0 * ones, A_eq=np.vstack([vertices, ones]), b_eq=np.r_[q, 1.0],
                                 bounds=(0, None), method="highs")
    return res.status == 0


def test_permutahedron_membership_matches_the_hull_of_the_permutations():
    rng = np.random.default_rng(0)
    sigma = np.sort(rng.random(4))
    seen = set()
    for _ in range(60):
        mix = rng.dirichlet(np.ones(24))
        inside = np.array(list(itertools.permutations(sigma))).T @ mix
        # a point of the hull, pushed along a direction of zero sum: inside or outside
        push = rng.normal(size=4)
        q = inside + rng.choice([0.0, 0.05, 0.5]) * (push - push.mean())
        expected = _in_hull_of_permutations(q, sigma)
        seen.add(expected)
        assert in_permutahedron(q, sigma) == expected
    assert seen == {True, False}


def _multiset(w, blocks, untied):
    return np.sort(np.concatenate([w[untied]] + [s for _, s in blocks]))


def test_splits_and_joins_keep_every_rank_weight_once():
    rng = np.random.default_rng(1)
    n = 30
    sigma = np.sort(rng.random(n))
    members = np.arange(10, 20)
    w = sigma.copy()
    w[members] = 0.0
    blocks = [(members, sigma[10:20])]
    q = rng.normal(scale=sigma[10:20].std() * 3, size=10) + sigma[10:20].mean()
    q += sigma[10:20].mean() - q.mean()  # the block's total
    w2, blocks2, split = split_blocks(w, blocks, [q])
    assert split
    untied = np.ones(n, dtype=bool)
    for m, _ in blocks2:
        untied[m] = False
    assert np.allclose(_multiset(w2, blocks2, untied), sigma)
    # a weight above the block's largest rank weight sends its loss out at that weight
    leaving = members[np.argmax(q)]
    if q.max() > sigma[19]:
        assert untied[leaving] and w2[leaving] == sigma[19]
    losses = rng.random(n)
    w3, blocks3, _ = join_blocks(w2, blocks2, losses, n)
    untied = np.ones(n, dtype=bool)
    for m, _ in blocks3:
        untied[m] = False
    assert np.allclose(_multiset(w3, blocks3, untied), sigma)


CASES = [(Superquantile(q=0.5), "squared"), (Superquantile(q=0.8), "squared"),
         (Superquantile(q=0.7), "logistic"), (Extremile(r=2.0), "logistic"),
         (ExponentialSpectral(rho=1.0), "logistic")]


@pytest.mark.parametrize("risk,loss_name", CASES, ids=repr)
def test_the_fit_with_the_active_set_finish_reaches_cvxpy(referee, risk, loss_name, linear_data):
    loss = get_loss(loss_name)
    X, y = linear_data(loss.task, n=80, d=5, seed=3)
    pen = get_penalty("l2", 0.05)
    res = smoothed_newton(RankRisk(X, y, risk, loss), pen, tol=1e-8, active_set=True)
    assert res.converged and res.info["certified"]
    f_star = referee.optimum(X, y, risk, loss, pen, fit_intercept=True)
    assert res.objective <= f_star + 1e-7 * abs(f_star)
    assert res.objective >= f_star - 1e-6 * abs(f_star)
    assert res.objective - f_star <= res.info["gap"] + 1e-9 * abs(f_star)


def test_the_superquantile_of_squared_residuals_is_finished_on_its_tied_losses(referee, linear_data):
    X, y = linear_data("regression", n=80, d=5, seed=3)
    risk, loss, pen = Superquantile(q=0.8), get_loss("squared"), get_penalty("l2", 0.05)
    res = smoothed_newton(RankRisk(X, y, risk, loss), pen, tol=1e-8, active_set=True)
    assert res.info["finish"] == "active set"
    f_star = referee.optimum(X, y, risk, loss, pen, fit_intercept=True)
    assert abs(res.objective - f_star) <= 1e-6 * abs(f_star)
    plain = smoothed_newton(RankRisk(X, y, risk, loss), pen, tol=1e-8)
    assert plain.info["finish"] == "proximal point"


def test_a_wrong_guess_of_the_blocks_certifies_only_a_true_bound(referee, linear_data):
    X, y = linear_data("regression", n=60, d=4, seed=5)
    risk, loss, pen = Superquantile(q=0.6), get_loss("squared"), get_penalty("l2", 0.05)
    problem = RankRisk(X, y, risk, loss).smoothed(pen)
    f_star = referee.optimum(X, y, risk, loss, pen, fit_intercept=True)
    rng = np.random.default_rng(2)
    finish = ActiveSetFinish.for_problem(problem)
    checked = 0
    for _ in range(5):
        theta = rng.normal(size=problem.design.p)
        _, state = problem.smoothed(theta, 1.0, np.full(problem.n, 1.0 / problem.n))
        # a block of random losses over the ranks around the quantile: not the optimum's ties
        order = rng.permutation(problem.n)
        state["pooled"] = Pooled(order, np.array([30]), np.array([8]))
        found = finish.solve(theta, state)
        if found is None:
            continue
        F, theta_found, gap, q = found
        assert np.isclose(F, problem.objective(theta_found))
        assert F - f_star <= gap + 1e-9 * abs(f_star)
        checked += 1
    assert checked


def test_problems_without_the_finish_are_not_offered_one(linear_data):
    X, y = linear_data("regression")
    loss = get_loss("squared")
    with_l1 = RankRisk(X, y, Superquantile(q=0.5), loss).smoothed(get_penalty("elasticnet", 0.05))
    weighted = RankRisk(X, y, Superquantile(q=0.5), loss, sample_weight=np.arange(1.0, 61.0)).smoothed(
        get_penalty("l2", 0.05))
    assert ActiveSetFinish.for_problem(with_l1) is None
    assert ActiveSetFinish.for_problem(weighted) is None
