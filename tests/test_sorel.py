"""SOREL solver: the dual projection, the toy problem (22) of Ge and Jiang 2024, ridge."""

import numpy as np
import pytest

from skrank.datafits.rank_risk import RankRisk, rank_objective
from skrank.kernels.pava import project_permutahedron as _project
from skrank.losses import get_loss
from skrank.penalties import get_penalty
from skrank.risks import ERM, ExponentialSpectral, Extremile, Superquantile, TopK
from skrank.solvers.stochastic.sorel import dual_smoothness, sorel, sorel_paper
from skrank.solvers.stochastic.steps import svrg_step_size


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("risk", [Superquantile(0.6), Extremile(2.5), ExponentialSpectral(2.0), TopK(3)])
def test_projection_invariants(seed, risk):
    # Ge and Jiang 2024, Algorithm 1 line 4: sum, bounds and majorisation of the projection
    rng = np.random.default_rng(seed)
    n = 17
    sigma = risk.weights(n)
    z = rng.normal(size=n) * rng.choice([0.01, 1.0, 100.0])
    lam = _project(z, sigma)
    assert lam.sum() == pytest.approx(1.0, abs=1e-12)
    assert lam.min() >= sigma[0] - 1e-12
    assert lam.max() <= sigma[-1] + 1e-12
    lam_sorted = np.sort(lam)
    assert np.all(np.cumsum(lam_sorted) >= np.cumsum(sigma) - 1e-12)
    # ranks are kept: larger z never gets a smaller weight
    order = np.argsort(z)
    assert np.all(np.diff(lam[order]) >= -1e-12)


def test_projection_limits():
    sigma = Superquantile(0.5).weights(6)
    z = np.array([3.0, -1.0, 2.0, 0.5, 10.0, -4.0])
    # a huge step ranks sigma by z; a point of the permutahedron is fixed
    hard = _project(1e6 * z, sigma)
    expected = np.empty(6)
    expected[np.argsort(z)] = sigma
    np.testing.assert_allclose(hard, expected, atol=1e-9)
    np.testing.assert_allclose(_project(expected, sigma), expected, atol=1e-12)


def test_toy_problem_converges_to_zero():
    # Ge and Jiang 2024, problem (22): sigma = (0, 1), l1 = (w - 1)^2 / 2, l2 = (w + 1)^2 / 2, optimum w = 0
    X = np.array([[1.0], [1.0]])
    y = np.array([1.0, -1.0])
    risk = TopK(1)
    res = sorel(RankRisk(X, y, risk, get_loss("squared"), fit_intercept=False), get_penalty("l2", 1e-3),
                max_iter=2000, tol=1e-12, coef_init=np.array([0.7]), random_state=0)
    assert abs(res.coef[0]) < 1e-3
    assert res.objective_history[-1] == pytest.approx(0.5 + 0.5e-3 * res.coef[0] ** 2, abs=1e-5)


@pytest.mark.parametrize("fit_intercept", [False, True])
@pytest.mark.parametrize("batch_size", [1, 8])
def test_erm_matches_ridge(fit_intercept, batch_size):
    rng = np.random.default_rng(0)
    n, d, mu = 80, 4, 0.05
    X = rng.normal(size=(n, d))
    y = X @ rng.normal(size=d) + 1.5 + 0.3 * rng.normal(size=n)
    data = RankRisk(X, y, ERM(), get_loss("squared"), fit_intercept=fit_intercept)
    res = sorel(data, get_penalty("l2", mu), max_iter=500, tol=1e-12, batch_size=batch_size,
                random_state=0)
    # closed form of (1/n) sum (x.w + b - y)^2 / 2 + mu ||w||^2 / 2
    A = np.hstack([X, np.ones((n, 1))]) if fit_intercept else X
    reg = np.full(A.shape[1], mu)
    if fit_intercept:
        reg[-1] = 0.0
    sol = np.linalg.solve(A.T @ A / n + np.diag(reg), A.T @ y / n)
    np.testing.assert_allclose(res.coef, sol[:d], atol=1e-6)
    if fit_intercept:
        assert res.intercept == pytest.approx(sol[-1], abs=1e-6)


def test_result_fields_and_history():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(50, 3))
    y = X[:, 0] + rng.normal(size=50)
    risk, loss, pen = Superquantile(0.7), get_loss("squared"), get_penalty("l2", 0.02)
    res = sorel(RankRisk(X, y, risk, loss), pen, max_iter=30, tol=0.0, random_state=0, polish=False)
    assert res.n_iter == 30 and not res.converged
    assert len(res.objective_history) == 31
    assert res.objective == pytest.approx(rank_objective(X, y, res.coef, res.intercept, risk, loss, pen))
    lam = res.info["lambda"]
    assert lam.sum() == pytest.approx(1.0)
    assert np.all(np.diff(res.info["passes"]) == pytest.approx(2.0))
    assert np.all(np.diff(res.info["times"]) >= 0)


def test_same_seed_same_result_and_sparse():
    import scipy.sparse as sp

    rng = np.random.default_rng(2)
    X = rng.normal(size=(40, 3))
    y = X[:, 1] - X[:, 2] + rng.normal(size=40)
    args = (Extremile(2.0), get_loss("huber"), get_penalty("l2", 0.01))
    a = sorel(RankRisk(X, y, *args[:2]), args[2], max_iter=20, tol=0, random_state=3)
    b = sorel(RankRisk(sp.csr_matrix(X), y, *args[:2]), args[2], max_iter=20, tol=0, random_state=3)
    np.testing.assert_array_equal(a.coef, b.coef)


def test_step_rules_positive():
    L = np.array([1.0, 2.0, 5.0])
    sigma = Superquantile(0.5).weights(3)
    assert svrg_step_size(L, sigma, 1, "importance") > svrg_step_size(L, sigma, 1, "uniform")


@pytest.mark.parametrize("fit_intercept", [True, False])
def test_dual_smoothness_is_the_norm_of_J_Hinv_JT(fit_intercept):
    # The squared loss has l'' = 1, l'(t) = t: the constant is the largest
    # eigenvalue of J H^-1 J^T, J = diag(t) [X 1], H = [X 1]^T diag(lam) [X 1] + reg.
    rng = np.random.default_rng(1)
    X = rng.normal(size=(30, 3))
    t = rng.normal(size=30)
    lam = Superquantile(0.6).weights(30)
    Xt = np.hstack([X, np.ones((30, 1))]) if fit_intercept else X
    H = Xt.T @ (lam[:, None] * Xt)
    reg = np.full(Xt.shape[1], 0.1)
    if fit_intercept:
        reg[-1] = 1e-12 * max(1.0, np.trace(H))
    H += np.diag(reg)
    J = t[:, None] * Xt
    expected = np.linalg.eigvalsh(J @ np.linalg.solve(H, J.T)).max()
    got = dual_smoothness(X, np.ones(30), t, lam, get_loss("squared"), 0.1, fit_intercept)
    assert got == pytest.approx(expected, rel=1e-6)


def test_paper_rules_reference():
    # The practical SOREL of Ge and Jiang 2024, verbatim: converges on a small problem, flags divergence
    rng = np.random.default_rng(4)
    X = rng.normal(size=(120, 3))
    y = X @ [1.0, -0.5, 0.2] + rng.normal(size=120)
    args = (ExponentialSpectral(2.0), get_loss("squared"), get_penalty("l2", 1 / 120))
    ref = sorel(RankRisk(X, y, *args[:2], fit_intercept=False), args[2], max_iter=400, tol=1e-12,
                random_state=0)
    res = sorel_paper(X, y, *args, learning_rate=0.01, dual_scale=0.1, max_iter=150, random_state=0)
    assert not res.info["diverged"] and res.n_iter == 150
    assert res.objective == pytest.approx(ref.objective, rel=1e-6)
    bad = sorel_paper(X, y, *args, learning_rate=10.0, dual_scale=0.1, max_iter=20, random_state=0)
    assert bad.info["diverged"] and np.isinf(bad.objective_history[-1])


def test_frozen_dual_does_not_look_converged():
    # With a tiny dual step the weights barely move: the objective change, the
    # Lagrangian gradient and ||lam_{k+1} - lam_k|| all become small while w
    # is 15% off.  The criterion's dual part, the gap R_sigma(l) - lam^T l,
    # does not shrink with the step, so the run must not stop.
    rng = np.random.default_rng(5)
    X = rng.normal(size=(60, 3))
    y = X @ [1.0, -1.0, 0.5] + rng.standard_t(3, size=60)
    args = (Superquantile(0.7), get_loss("squared"), get_penalty("l2", 0.05))
    frozen = sorel(RankRisk(X, y, *args[:2]), args[2], dual_scale=1e-9, max_iter=100, tol=1e-6,
                   random_state=0,
                    polish=False)
    assert not frozen.converged and frozen.n_iter == 100
    assert frozen.stop_criterion > 1e-2
    ref = sorel(RankRisk(X, y, *args[:2]), args[2], max_iter=2000, tol=1e-12, random_state=0)
    assert ref.converged and frozen.objective > 1.1 * ref.objective


@pytest.mark.parametrize("n", [5, 200, 3000])
@pytest.mark.parametrize("case", ["sorted", "random", "shuffled", "near_sorted", "near", "ties", "scaled"])
def test_sort_keyed_sorts_from_any_order(case, n):
    # the adaptive sort of both SOREL kernels: insertion sort (n < 256 or few far descents),
    # or radix on a 22-bit key + insertion; the keys come out sorted with their order
    from skrank.kernels.sorting import gather_keys, keyed_scratch, sort_keyed

    rng = np.random.default_rng(3)
    vals = rng.normal(size=n) * np.exp(rng.normal(size=n) * 3)
    perm = np.argsort(vals, kind="stable")
    if case == "random":
        perm = rng.permutation(n)
    elif case == "shuffled":
        vals = vals + rng.normal(size=n) * 0.3  # many inversions from the previous order
    elif case == "near_sorted":
        # neighbours exchanged, and a few samples moved by 20 places (far descents)
        pos = rng.choice(np.arange(0, n - 1, 2), size=max(1, n // 20), replace=False)
        perm[pos], perm[pos + 1] = perm[pos + 1].copy(), perm[pos].copy()
        for start in rng.integers(0, max(1, n - 21), size=2):
            perm[start:start + 21] = np.roll(perm[start:start + 21], 1)
    elif case == "near":
        vals = vals * (1.0 + 1e-9 * rng.normal(size=n))  # values closer than the key's resolution
        perm = rng.permutation(n)
    elif case == "ties":
        vals = np.round(vals, 1)  # many exact ties, +0.0 and -0.0 included
        vals[:5] = -0.0
        perm = rng.permutation(n)
    elif case == "scaled":
        vals = 1e200 * vals  # beyond float32: the key saturates, the insertion pass orders
        perm = rng.permutation(n)
    keys = np.empty(n)
    descents, far = gather_keys(vals, perm, keys)
    np.testing.assert_array_equal(keys, vals[perm])
    assert descents == np.count_nonzero(keys[1:] < keys[:-1])
    assert far == np.count_nonzero(keys[8:] < keys[:-8])
    sort_keyed(keys, perm, descents, far, *keyed_scratch(n))
    np.testing.assert_array_equal(np.sort(perm), np.arange(n))
    np.testing.assert_array_equal(keys, vals[perm])
    np.testing.assert_array_equal(keys, np.sort(vals))
    np.testing.assert_array_equal(vals[perm], vals[np.argsort(vals, kind="stable")])


def test_isotonic_into_matches_sklearn():
    # the allocation-free PAV used inside the epoch kernel is isotonic regression
    from sklearn.isotonic import isotonic_regression

    from skrank.kernels.pava import _isotonic_into

    rng = np.random.default_rng(0)
    n = 500
    y = np.cumsum(rng.normal(size=n)) + rng.normal(size=n) * 3
    out = np.empty(n)
    _isotonic_into(y, np.empty(0), out, np.empty(n), np.empty(n), np.empty(n, dtype=np.int64))
    np.testing.assert_allclose(out, isotonic_regression(y), rtol=0, atol=1e-12)


@pytest.mark.parametrize("case", ["random", "sparse", "equal", "one"])
def test_alias_table_gives_the_weights(case):
    # the packed alias table: column i (drawn uniformly) gives i with probability prob[i],
    # else alias[i] = packed[i] >> 32; the probability of i is then p_i / sum(p)
    from skrank.solvers.stochastic.sampling import build_alias, draw_index

    rng = np.random.default_rng(0)
    n = 500
    if case == "random":
        p = rng.random(n)
    elif case == "sparse":
        p = rng.random(n) * (rng.random(n) < 0.5)
    elif case == "equal":
        p = np.where(rng.random(n) < 0.3, 0.7, 0.0)  # equal weights: Vose's pairing at exactly one
    else:
        p = np.zeros(n)
        p[17] = 2.0
    total = p.sum()
    prob, packed = p * n / total, np.empty(n, dtype=np.int64)
    build_alias(prob, packed, np.empty(n, dtype=np.int64), np.empty(n, dtype=np.int64))
    np.testing.assert_array_equal(packed & 0xFFFFFFFF, np.arange(n))
    alias = packed >> 32
    assert np.all((alias >= 0) & (alias < n)) and np.all((prob >= 0.0) & (prob <= 1.0))
    assert np.all(p[alias[prob < 1.0]] > 0.0)  # a zero weight is never an alias
    # the probability of i: its own column's prob plus the others aliased to it
    mass = prob.copy()
    np.add.at(mass, alias, 1.0 - prob)
    np.testing.assert_allclose(mass / n, p / total, atol=1e-12)
    # the draw decodes the table
    state = np.array([12345], dtype=np.uint64)
    draws = np.array([draw_index(state, n, prob, packed, True) for _ in range(20000)])
    assert np.all(p[draws] > 0.0)
    if case == "one":
        assert np.all(draws == 17)


@pytest.mark.parametrize("fit_intercept", [False, True])
@pytest.mark.parametrize("p", [1, 3, 8, 30])
def test_top_generalised_eigenvalue_matches_scipy(p, fit_intercept):
    # the face cap's eigenvalue (hand-written Cholesky and solves) against scipy's eigh
    from scipy.linalg import eigh

    from skrank.solvers.stochastic.sorel_kernel import _top_generalised_eigenvalue

    rng = np.random.default_rng(p)
    Z = rng.normal(size=(max(1, p // 2), p))
    M = Z.T @ Z
    Y = rng.normal(size=(3 * p, p))
    H = 0.1 * Y.T @ Y
    mu, inv_tau = 1e-3, 1e-2
    A = H.copy()
    d = p - 1 if fit_intercept else p
    A[np.arange(d), np.arange(d)] += mu + inv_tau
    if fit_intercept:
        A[d, d] += inv_tau + 1e-12 * max(1.0, np.trace(H))
    expected = eigh(M, A, eigvals_only=True)[-1]
    got = _top_generalised_eigenvalue(M.copy(), H, mu, inv_tau, fit_intercept, np.empty((p, p)))
    assert got == pytest.approx(expected, rel=1e-10)


@pytest.mark.parametrize("batch_size,penalty", [(4, "l2"), (1, "elasticnet"), (8, "elasticnet")])
def test_zero_row_without_intercept_is_sampled_safely(batch_size, penalty):
    # a zero row has zero smoothness, hence zero sampling weight: it must not
    # be divided by (it was, in the batch and l1 paths)
    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 3))
    X[5] = 0.0
    y = X @ [1.0, -2.0, 0.5] + rng.normal(size=60)
    res = sorel(RankRisk(X, y, Superquantile(0.5), get_loss("squared"), fit_intercept=False),
                get_penalty(penalty, 0.05), batch_size=batch_size, max_iter=20, random_state=0)
    assert np.all(np.isfinite(res.objective_history))
    assert res.objective_history[-1] < res.objective_history[0]


@pytest.mark.parametrize("scale", [1e-12, 3.16e-9, 1e12])
def test_automatic_steps_are_scale_covariant(scale):
    # X * s with alpha * s^2: the same epochs and coef / s.  In the units of X the intercept's
    # step and proximal term were tied to the coefficients': at s = 1e-12 the coefficients did
    # not move and the criterion passed at F = 0.999 (optimum 0.828); at s = 3e-9 a
    # superquantile fit diverged and overflowed
    rng = np.random.default_rng(4)
    X = rng.normal(size=(50, 3)) * [1.0, 0.1, 10.0] + [2.0, -30.0, 0.0]
    y = X @ [1.0, 5.0, 0.1] + rng.standard_t(3, size=50)
    risk, loss = Superquantile(0.8), get_loss("huber")
    ref = sorel(RankRisk(X, y, risk, loss), get_penalty("l2", 1e-3), max_iter=300, random_state=0)
    with np.errstate(all="raise"):
        res = sorel(RankRisk(X * scale, y, risk, loss), get_penalty("l2", 1e-3 * scale**2), max_iter=300,
                    random_state=0)
    assert res.n_iter == ref.n_iter and res.converged == ref.converged
    assert res.objective == pytest.approx(ref.objective, rel=1e-8)
    np.testing.assert_allclose(res.coef * scale, ref.coef, rtol=1e-5)
    assert res.intercept == pytest.approx(ref.intercept, rel=1e-5)


def test_given_step_too_small_does_not_converge():
    rng = np.random.default_rng(5)
    X = rng.normal(size=(40, 3))
    y = X @ [1.0, -1.0, 0.5] + rng.normal(size=40)
    args = (ERM(), get_loss("squared"), get_penalty("l2", 0.1))
    auto = sorel(RankRisk(X, y, *args[:2]), args[2], random_state=0, polish=False)
    slow = sorel(RankRisk(X, y, *args[:2]), args[2], learning_rate=1e-9 * auto.info["learning_rate"],
                 max_iter=30,
                 random_state=0, polish=False)
    assert auto.converged
    assert not slow.converged and slow.stop_criterion > 1e-9
