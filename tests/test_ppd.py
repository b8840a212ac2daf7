"""Full-AUC square loss: the closed form (cvxpy, brute force) and PPD-SG / PPD-AdaGrad (seed 001)."""

import cvxpy as cp
import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.datasets import load_digits, make_classification
from sklearn.preprocessing import StandardScaler

from skrank import PartialAUCClassifier
from skrank.pairwise_losses import get_pairwise_loss
from skrank.partial_auc_objective import PartialAUCObjective
from skrank.solvers.auc_closed_form import exact_square_auc
from skrank.solvers.ppd import ppd_adagrad, ppd_sg


def _objective(X, y, alpha=1e-4, margin=1.0):
    return PartialAUCObjective(X, np.where(y == 1, 1.0, -1.0), (0.0, 1.0),
                               get_pairwise_loss("squared", margin), alpha)


def _pair_mean(X, y, w, margin):
    hp, hn = X[y == 1] @ w, X[y != 1] @ w
    return np.mean((margin - (hp[:, None] - hn[None, :])) ** 2)


@pytest.mark.parametrize("seed, alpha, margin", [(0, 0.0, 1.0), (1, 1e-3, 1.0), (2, 0.1, 0.5)])
def test_closed_form_matches_cvxpy(seed, alpha, margin):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(40, 5)) + 0.3 * rng.normal(size=5)
    y = (rng.random(40) < 0.3).astype(int)
    y[:2] = [0, 1]
    res = exact_square_auc(_objective(X, y, alpha, margin))
    D = (X[y == 1][:, None, :] - X[y != 1][None, :, :]).reshape(-1, 5)
    w = cp.Variable(5)
    F = cp.sum_squares(margin - D @ w) / len(D) + alpha / 2 * cp.sum_squares(w)
    prob = cp.Problem(cp.Minimize(F))
    prob.solve(solver=cp.CLARABEL, tol_gap_abs=1e-12, tol_gap_rel=1e-12, tol_feas=1e-12)
    assert res.objective == pytest.approx(prob.value, rel=1e-8)
    np.testing.assert_allclose(res.coef, w.value, rtol=1e-5, atol=1e-7)
    # the pairwise gradient vanishes there (brute force over the pairs)
    grad = -2 * D.T @ (margin - D @ res.coef) / len(D) + alpha * res.coef
    assert np.max(np.abs(grad)) < 1e-10


def test_closed_form_sparse_equals_dense_and_least_norm_when_singular():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(30, 4))
    X = np.column_stack([X, X[:, 0]])  # a duplicated column: singular with alpha = 0
    y = (rng.random(30) < 0.4).astype(int)
    dense = exact_square_auc(_objective(X, y, 0.0))
    sparse = exact_square_auc(_objective(sp.csr_matrix(X), y, 0.0))
    np.testing.assert_allclose(sparse.coef, dense.coef, rtol=1e-10, atol=1e-12)
    assert dense.coef[0] == pytest.approx(dense.coef[4])  # least norm splits the weight
    assert dense.objective == pytest.approx(_pair_mean(X, y, dense.coef, 1.0), rel=1e-12)


def test_min_max_identity_of_proposition_1():
    rng = np.random.default_rng(4)
    X = rng.normal(size=(50, 3))
    y = (rng.random(50) < 0.35).astype(int)
    w = rng.normal(size=3)
    c = 0.7
    h = X @ w
    p = y.mean()
    a, b = h[y == 1].mean(), h[y == 0].mean()
    dual = b - a
    F = ((1 - p) * (h - a) ** 2 * (y == 1) + p * (h - b) ** 2 * (y == 0)
         + 2 * (c + dual) * (p * h * (y == 0) - (1 - p) * h * (y == 1)) - p * (1 - p) * dual**2)
    assert c**2 + F.mean() / (p * (1 - p)) == pytest.approx(_pair_mean(X, y, w, c), rel=1e-12)


def _tables():
    X, y = make_classification(2000, 20, weights=[0.9], random_state=0)
    yield "make_classification", StandardScaler().fit_transform(X), y
    X, digit = load_digits(return_X_y=True)
    yield "digits", StandardScaler().fit_transform(X), (digit >= 5).astype(int)


@pytest.mark.parametrize("solver", [ppd_sg, ppd_adagrad])
def test_ppd_within_one_percent_of_the_closed_form(solver):
    for name, X, y in _tables():
        obj = _objective(X, y)
        best = exact_square_auc(obj).objective
        w0 = np.zeros(X.shape[1])
        res = solver(obj, coef_init=w0, random_state=0)
        assert res.objective <= 1.01 * best, name
        assert res.objective < obj.value(w0)
        again = solver(obj, coef_init=w0, random_state=0)
        np.testing.assert_array_equal(res.coef, again.coef)


def test_online_class_ratio_lands_close_too():
    name, X, y = next(_tables())
    obj = _objective(X, y)
    best = exact_square_auc(obj).objective
    res = ppd_sg(obj, coef_init=np.zeros(X.shape[1]), class_ratio="online", random_state=1)
    assert res.objective <= 1.02 * best


def test_estimator_full_auc_solvers_agree():
    _, X, y = next(_tables())
    fits = {s: PartialAUCClassifier(solver=s, fpr_range=(0, 1), loss="squared",
                                    random_state=0).fit(X, y) for s in ("exact", "ppd-sg",
                                                                        "ppd-adagrad")}
    for s in ("ppd-sg", "ppd-adagrad"):
        assert fits[s].objective_ <= 1.01 * fits["exact"].objective_
