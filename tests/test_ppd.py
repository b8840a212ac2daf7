"""Full-AUC square loss (seed 001): the closed form, the min-max form, PPD-SG and PPD-AdaGrad."""

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.datasets import load_digits, make_classification
from sklearn.preprocessing import StandardScaler

from skrank import PartialAUCClassifier
from skrank.datafits.partial_auc import PartialAUCObjective
from skrank.pairwise_losses import get_pairwise_loss
from skrank.solvers.full_batch.auc_closed_form import exact_square_auc
from skrank.solvers.stochastic.ppd import _ppd_steps, _sample_terms, ppd_adagrad, ppd_sg
from skrank.solvers.stochastic.sampling import state_from_random_state, xorshift_uniform


def saddle_objective(X, positive, w, a, b, dual, p, margin, alpha, q=None):
    """``mean_i F(w, a, b, dual; z_i) / (p(1-p)) + alpha ||w||^2 / 2``, eq. (2) of Liu et al. 2020 (NumPy).

    ``q`` replaces ``p(1-p)`` in the ``dual^2`` term (Algorithm 4); with ``p`` the share of
    positives and ``(a, b, dual)`` at their optimum, ``c^2`` plus this value is the full-AUC ``F(w)``.
    """
    h = X @ w
    q = p * (1.0 - p) if q is None else q
    F = ((1 - p) * (h - a) ** 2 * positive + p * (h - b) ** 2 * ~positive
         + 2 * (margin + dual) * (p * h * ~positive - (1 - p) * h * positive) - q * dual**2)
    return float(F.mean() / (p * (1 - p)) + 0.5 * alpha * float(np.dot(w, w)))


def stochastic_gradient(X, positive, w, a, b, dual, p, margin, alpha, q=None):
    """``(g_w, g_a, g_b, g_dual)`` of :func:`saddle_objective` from the kernel's per-sample terms."""
    q = p * (1.0 - p) if q is None else q
    terms = np.array([_sample_terms(h, bool(pos), a, b, dual, p, q, margin)
                      for h, pos in zip(X @ w, positive)])
    return X.T @ terms[:, 0] / X.shape[0] + alpha * w, *terms[:, 1:].mean(axis=0)


def _objective(X, y, alpha=1e-4, margin=1.0):
    return PartialAUCObjective(X, np.where(y == 1, 1.0, -1.0), (0.0, 1.0),
                               get_pairwise_loss("squared", margin), alpha)


def _pair_differences(X, y):
    Xp, Xn = X[y == 1], X[y != 1]
    return (Xp[:, None, :] - Xn[None, :, :]).reshape(-1, X.shape[1])


def _pair_mean(X, y, w, margin):
    return np.mean((margin - _pair_differences(X, y) @ w) ** 2)


def _random_problem(seed, n=40, d=5, share=0.3):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) @ rng.normal(size=(d, d)) + rng.normal(size=d)
    y = (rng.random(n) < share).astype(int)
    y[:2] = [0, 1]
    return X, y


# --- closed form ---------------------------------------------------------------------------

def _exact(objective):
    return exact_square_auc(objective, objective.penalty)


def _ppd_sg(objective, **options):
    return ppd_sg(objective, objective.penalty, **options)


@pytest.mark.parametrize("seed, alpha, margin", [(0, 0.0, 1.0), (1, 1e-3, 1.0), (2, 0.1, 0.5),
                                                 (3, 0.0, 2.0)])
def test_closed_form_matches_cvxpy_and_zeroes_the_pairwise_gradient(seed, alpha, margin, referee):
    cp = referee.cp
    X, y = _random_problem(seed)
    res = _exact(_objective(X, y, alpha, margin))
    D = _pair_differences(X, y)
    w = cp.Variable(X.shape[1])
    # the pairwise mean as a quadratic in w, every pair written out
    F = cp.sum_squares(margin - D @ w) / len(D) + alpha / 2 * cp.sum_squares(w)
    f_ref = referee.solve(F, tol=1e-14)
    assert res.objective == pytest.approx(f_ref, rel=1e-8)
    assert res.objective == pytest.approx(_pair_mean(X, y, res.coef, margin)
                                          + alpha / 2 * res.coef @ res.coef, rel=1e-12)
    np.testing.assert_allclose(res.coef, w.value, rtol=1e-5, atol=1e-7)
    grad = -2 * D.T @ (margin - D @ res.coef) / len(D) + alpha * res.coef
    assert np.max(np.abs(grad)) < 1e-10 * max(1.0, np.max(np.abs(D)) ** 2)
    assert res.converged and res.n_iter == 1


def test_closed_form_singular_is_least_norm_and_sparse_equals_dense():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(30, 4))
    X = np.column_stack([X, X[:, 0], X[:, 1] - X[:, 2]])  # rank 4 of 6: singular with alpha = 0
    y = (rng.random(30) < 0.4).astype(int)
    dense = _exact(_objective(X, y, 0.0))
    sparse = _exact(_objective(sp.csr_matrix(X), y, 0.0))
    assert dense.info["method"] == "least-norm"
    np.testing.assert_allclose(sparse.coef, dense.coef, rtol=1e-9, atol=1e-12)
    # least squares on the pairs, least-norm solution, independently
    D = _pair_differences(X, y)
    np.testing.assert_allclose(dense.coef, np.linalg.pinv(D) @ np.ones(len(D)), rtol=1e-8,
                               atol=1e-10)
    with_ridge = _exact(_objective(sp.csr_matrix(X), y, 1e-2))
    assert with_ridge.info["method"] == "cholesky"
    np.testing.assert_allclose(with_ridge.coef, _exact(_objective(X, y, 1e-2)).coef,
                               rtol=1e-9)


# --- the min-max form and the kernel's formulas --------------------------------------------

@pytest.mark.parametrize("margin, alpha", [(1.0, 0.0), (0.7, 0.3)])
def test_min_max_identity_of_proposition_1(margin, alpha):
    X, y = _random_problem(4, n=50, d=3, share=0.35)
    w = np.random.default_rng(5).normal(size=3)
    obj = _objective(X, y, alpha, margin)
    pos = y == 1
    p = pos.mean()
    h = X @ w
    a, b = h[pos].mean(), h[~pos].mean()
    saddle = saddle_objective(X, pos, w, a, b, b - a, p, margin, alpha)
    brute = _pair_mean(X, y, w, margin) + alpha / 2 * w @ w
    assert margin**2 + saddle == pytest.approx(brute, rel=1e-12)
    assert obj.value(w) == pytest.approx(brute, rel=1e-12)
    # a minimum in (a, b), a maximum in the dual
    for e in (0.1, -0.1):
        assert saddle_objective(X, pos, w, a + e, b, b - a, p, margin, alpha) > saddle
        assert saddle_objective(X, pos, w, a, b + e, b - a, p, margin, alpha) > saddle
        assert saddle_objective(X, pos, w, a, b, b - a + e, p, margin, alpha) < saddle


def test_saddle_gradients_match_finite_differences():
    rng = np.random.default_rng(6)
    X = rng.normal(size=(17, 4))
    pos = rng.random(17) < 0.4
    w, (a, b, dual) = rng.normal(size=4), rng.normal(size=3)
    for p, q, c, alpha in [(0.3, None, 1.0, 0.0), (0.8, 0.1, 0.6, 0.2)]:
        g_w, g_a, g_b, g_d = stochastic_gradient(X, pos, w, a, b, dual, p, c, alpha, q)
        u = np.concatenate([w, [a, b, dual]])

        def f(u):
            return saddle_objective(X, pos, u[:4], u[4], u[5], u[6], p, c, alpha, q)

        eps = 1e-5
        fd = np.array([(f(u + eps * e) - f(u - eps * e)) / (2 * eps) for e in np.eye(7)])
        np.testing.assert_allclose(np.concatenate([g_w, [g_a, g_b, g_d]]), fd, rtol=1e-7,
                                   atol=1e-7)


@pytest.mark.parametrize("adagrad, sparse", [(False, False), (True, False), (False, True)])
def test_one_stage_step_is_the_stated_update(adagrad, sparse):
    """Two steps of the compiled stage against a replay in NumPy (same draws)."""
    rng = np.random.default_rng(7)
    n, n_pos, d, B = 30, 11, 4, 5
    X = rng.normal(size=(n, d))
    X[rng.random((n, d)) < 0.3] = 0.0
    w0, (a0, b0, dual0) = rng.normal(size=d), rng.normal(size=3)
    eta, eta_s, ig, ig_s, dl, dl_s = 0.05, 0.2, 0.3, 0.7, 0.01, 0.02
    p, c, alpha = n_pos / n, 0.9, 0.05
    state = state_from_random_state(3)
    replay = state.copy()
    if sparse:
        S = sp.csr_matrix(X)
        args = (np.zeros((1, 1)), S.indptr.astype(np.int64), S.indices.astype(np.int64), S.data)
    else:
        args = (X, np.zeros(1, np.int64), np.zeros(1, np.int64), np.zeros(1))
    u0 = np.concatenate([w0, [a0, b0, dual0]])
    cur, sums, gw, G, S2 = u0.copy(), np.zeros(d + 2), np.empty(d), np.zeros(d + 3), np.zeros(d + 3)
    _ppd_steps(*args, sparse, n_pos, np.zeros(1), np.zeros(1, np.int64), False, u0, cur, 2, eta, eta_s,
               ig, ig_s, dl, dl_s, adagrad, B, p, c, alpha, False, np.zeros(4), state, gw, G, S2, sums,
               np.zeros(1), False)

    u, iterates = u0.copy(), [u0.copy()]
    G_sum, S2_sum = np.zeros(d + 3), np.zeros(d + 3)
    step = np.array([eta] * d + [eta_s] * 3)
    dlt = np.array([dl] * d + [dl_s] * 3)
    prox = np.array([ig] * d + [ig_s] * 2 + [0.0])
    for _ in range(2):
        idx = [min(int(xorshift_uniform(replay) * n), n - 1) for _ in range(B)]
        g_w, g_a, g_b, g_d = stochastic_gradient(X[idx], np.array(idx) < n_pos, u[:d], u[d],
                                                 u[d + 1], u[d + 2], p, c, alpha)
        g = np.concatenate([g_w, [g_a, g_b, -g_d]]) + prox * (u - u0)  # descent direction
        if adagrad:
            G_sum += g
            S2_sum += g * g
            u = u0 - step * G_sum / (dlt + np.sqrt(S2_sum))
        else:
            u = u - step * g
        iterates.append(u.copy())
    np.testing.assert_allclose(cur, u, rtol=1e-10)
    total = np.sum(iterates[:2], axis=0)  # the points where gradients were taken
    np.testing.assert_allclose(sums, total[:d + 2], rtol=1e-10)


# --- PPD-SG and PPD-AdaGrad against the closed form ---------------------------------------

def _tables():
    X, y = make_classification(2000, 20, weights=[0.9], random_state=0)
    yield "make_classification 90/10", StandardScaler().fit_transform(X), y
    X, digit = load_digits(return_X_y=True)
    yield "digits 0-4 vs 5-9", StandardScaler().fit_transform(X), (digit >= 5).astype(int)


TABLES = list(_tables())


@pytest.mark.parametrize("solver", [ppd_sg, ppd_adagrad])
@pytest.mark.parametrize("table", range(len(TABLES)), ids=[t[0] for t in TABLES])
def test_ppd_defaults_within_one_percent_of_the_closed_form(solver, table):
    _, X, y = TABLES[table]
    obj = _objective(X, y)
    best = exact_square_auc(obj, obj.penalty).objective
    res = solver(obj, obj.penalty, random_state=0)
    assert res.objective <= 1.01 * best
    assert res.objective == pytest.approx(obj.value(res.coef), rel=1e-12)
    # lowers F from the start (w = 0, F = c^2), at every accepted stage but noise
    history = res.objective_history
    assert history[0] == pytest.approx(1.0) and history[1] < 0.5 * history[0]
    assert np.all(history[1:] <= history[:-1] * (1 + 1e-2))
    assert res.info["passes"] > 0 and res.info["time"] > 0
    again = solver(obj, obj.penalty, random_state=0)
    np.testing.assert_array_equal(res.coef, again.coef)
    other = solver(obj, obj.penalty, random_state=1)
    assert not np.array_equal(res.coef, other.coef)
    assert other.objective <= 1.01 * best


@pytest.mark.parametrize("solver", [ppd_sg, ppd_adagrad])
def test_online_class_ratio_lands_close_too(solver):
    _, X, y = TABLES[0]
    obj = _objective(X, y)
    best = exact_square_auc(obj, obj.penalty).objective
    res = solver(obj, obj.penalty, class_ratio="online", random_state=1)
    assert res.objective <= 1.01 * best
    p = y.mean()
    assert res.info["p"] == pytest.approx(p, abs=5e-3)
    assert res.info["q"] == pytest.approx(p * (1 - p), abs=5e-3)
    known = solver(obj, obj.penalty, random_state=1)  # same draws, other ratio in the steps
    assert not np.array_equal(res.coef, known.coef)


def test_sparse_input_warm_start_and_margin():
    X, y = make_classification(600, 30, weights=[0.8], random_state=2)
    X = StandardScaler().fit_transform(X)
    X[np.abs(X) < 0.8] = 0.0
    dense, sparse = _objective(X, y, 1e-2, 0.5), _objective(sp.csr_matrix(X), y, 1e-2, 0.5)
    best = exact_square_auc(sparse, sparse.penalty)
    assert best.objective == pytest.approx(exact_square_auc(dense, dense.penalty).objective, rel=1e-10)
    r_dense = ppd_sg(dense, dense.penalty, random_state=0)
    r_sparse = ppd_sg(sparse, sparse.penalty, random_state=0)
    assert r_sparse.objective <= 1.01 * best.objective
    assert r_sparse.objective == pytest.approx(r_dense.objective, rel=1e-6)
    # started at the solution with the dual reset to its optimum, a short
    # small-step stage stays there (a wrong dual drifts by ~0.5%)
    warm = ppd_sg(sparse, sparse.penalty, coef_init=best.coef, max_iter=1, inner_iter0=20, step=0.02,
                  random_state=0)
    assert warm.objective_history[0] == pytest.approx(best.objective, rel=1e-12)
    assert warm.objective <= (1 + 1e-3) * best.objective
    h_pos, h_neg = sparse.scores(warm.coef)
    assert warm.info["dual"] == pytest.approx(h_neg.mean() - h_pos.mean(), rel=1e-10)
    warm = ppd_adagrad(sparse, sparse.penalty, coef_init=best.coef, max_iter=2, inner_iter0=200,
                       random_state=0)
    assert warm.objective <= 1.01 * best.objective


def test_bad_arguments_are_named():
    _, X, y = TABLES[0]
    obj = _objective(X, y)
    with pytest.raises(ValueError, match="class_ratio"):
        ppd_sg(obj, obj.penalty, class_ratio="stream")
    with pytest.raises(ValueError, match="coef_init"):
        ppd_adagrad(obj, obj.penalty, coef_init=np.zeros(3))


def test_estimator_full_auc_solvers_agree():
    _, X, y = TABLES[0]
    fits = {s: PartialAUCClassifier(solver=s, fpr_range=(0, 1), loss="squared",
                                    random_state=0).fit(X, y) for s in ("exact", "ppd-sg",
                                                                        "ppd-adagrad")}
    for s in ("ppd-sg", "ppd-adagrad"):
        assert fits[s].objective_ <= 1.01 * fits["exact"].objective_


# --- constant columns and constant rows ----------------------------------------------------

@pytest.mark.parametrize("solver", [ppd_sg, ppd_adagrad])
@pytest.mark.parametrize("sparse", [False, True])
def test_a_large_constant_column_changes_nothing(solver, sparse):
    """The rows are centred: a column of 1e6 (an intercept-like feature) does not set the step units.

    Uncentred, it was a direction of curvature 1e12 that the offsets ``a``
    and ``b`` cancel in ``F`` but not in the steps: every other coordinate
    got a step of nothing and PPD-SG stopped near ``w = 0``.
    """
    _, X, y = TABLES[0]
    X = X[:600, :6]
    y = y[:600]
    X_more = np.insert(X, 2, 1e6, axis=1)
    obj, obj_more = _objective(X, y, 1e-2), _objective(sp.csr_matrix(X_more) if sparse else X_more, y, 1e-2)
    best = exact_square_auc(obj, obj.penalty).objective
    res = solver(obj_more, obj_more.penalty, random_state=0)
    assert res.objective <= 1.01 * best
    assert abs(res.coef[2]) < 1e-6
    ref = solver(obj, obj.penalty, random_state=0)
    np.testing.assert_allclose(np.delete(res.coef, 2), ref.coef, rtol=0.05, atol=0.02)
    # a and b in the units of the rows as given: the class-mean scores, each of about 1e6 w_2
    h_pos, h_neg = obj_more.scores(res.coef)
    assert res.info["b"] - res.info["a"] == pytest.approx(h_neg.mean() - h_pos.mean(), abs=0.05)


@pytest.mark.parametrize("solver", [ppd_sg, ppd_adagrad])
@pytest.mark.parametrize("d", [2, 6])
@pytest.mark.parametrize("value", [0.0, 3.0])
def test_constant_rows_have_no_curvature_and_fit_w_zero(solver, d, value):
    """``X = 0`` or every row equal: ``F(w) = c^2 + alpha ||w||^2 / 2`` (no ArpackError: no Krylov space)."""
    from skrank.solvers.stochastic.ppd import _curvature_parts

    y = np.arange(40) % 3 == 0
    X = np.full((40, d), value)
    assert _curvature_parts(X, int(y.sum()), center=X.mean(axis=0))[0] == 0.0
    objective = _objective(X, y.astype(int), 0.05)
    res = solver(objective, objective.penalty, random_state=0)
    assert np.all(np.isfinite(res.coef)) and np.abs(res.coef).max() < 1e-9
    assert res.objective == pytest.approx(1.0, rel=1e-12)


def test_sparse_rows_are_shifted_as_the_dense_ones_are_centred():
    """The sparse kernel subtracts the centre in its steps: the dense fit's iterates, to rounding."""
    X, y = _random_problem(4, n=80, d=5)
    X[np.abs(X) < 0.5] = 0.0
    dense = _ppd_sg(_objective(X, y, 1e-2), max_iter=2, inner_iter0=50, tol=0.0, random_state=0)
    sparse = _ppd_sg(_objective(sp.csr_matrix(X), y, 1e-2), max_iter=2, inner_iter0=50, tol=0.0,
                     random_state=0)
    np.testing.assert_allclose(sparse.coef, dense.coef, rtol=1e-9, atol=1e-12)
    assert sparse.info["a"] == pytest.approx(dense.info["a"], rel=1e-9)


def test_a_fit_above_f_at_zero_is_not_converged():
    """``F(0) = c^2`` bounds the minimum: a start far out that tiny steps barely move is flagged."""
    _, X, y = TABLES[0]
    obj = _objective(X, y)
    res = ppd_sg(obj, obj.penalty, coef_init=np.full(X.shape[1], 10.0), max_iter=1, step=1e-12,
                 random_state=0)
    assert res.objective > 1.0 and not res.converged and res.stop_criterion > 1e-4
