"""PartialAUCClassifier and the exact partial-AUC objective: brute force, scikit-learn API, bad input."""

import pickle
import warnings

import numpy as np
import pytest
from scipy.optimize import minimize
from sklearn.datasets import load_iris, make_classification
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import GridSearchCV, StratifiedKFold
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.utils.estimator_checks import parametrize_with_checks

from skrank import PartialAUCClassifier
from skrank.datafits.partial_auc import PartialAUCObjective, negative_rank_weights, resort_scores
from skrank.estimators._platt import fit_platt
from skrank.metrics import make_partial_auc_scorer, partial_auc_score
from skrank.pairwise_losses import PAIRWISE_LOSSES, get_pairwise_loss

#: the objective of Yao, Lin and Yang 2022 alone, as the estimator fitted it before the logistic mix
PAPER = dict(rank_weight=1.0, alpha=1e-4)


# --------------------------------------------------------------------------------------
# brute-force references
# --------------------------------------------------------------------------------------


def _brute_objective(X, y, w, fpr_range, name, margin, alpha):
    """Double loop over every (positive, negative) pair with the paper's formula."""
    h = X @ w
    hp, hn = h[y > 0], h[y < 0]
    q = np.sort(hn)[::-1]
    n_neg = len(q)
    m, n = fpr_range[0] * n_neg, fpr_range[1] * n_neg
    total = 0.0
    for k in range(1, n_neg + 1):
        weight = max(0.0, min(k, n) - max(k - 1, m))
        for hi in hp:
            z = hi - q[k - 1]
            if name == "squared_hinge":
                v = max(0.0, margin - z) ** 2
            elif name == "squared":
                v = (margin - z) ** 2
            elif name == "smooth_step":  # 1(z < 0) smoothed over |z| < margin
                u = min(max(-z / margin, -1.0), 1.0)
                v = 0.5 * (u + 1) ** 2 if u <= 0 else 1.0 - 0.5 * (1 - u) ** 2
            else:
                v = np.log1p(np.exp(-z))
            total += weight * v
    return total / (len(hp) * (n - m)) + 0.5 * alpha * w @ w


def _brute_partial_auc(y, s, fpr_range):
    """Spec 000 section 6.7, tie-aware: cell weights times the TPR at each negative."""
    sp, sn = s[y > 0], np.sort(s[y <= 0])[::-1]
    n_neg = len(sn)
    a, b = fpr_range[0] * n_neg, fpr_range[1] * n_neg
    total = 0.0
    for k in range(1, n_neg + 1):
        weight = max(0.0, min(k, b) - max(k - 1, a))
        tpr = np.mean((sp > sn[k - 1]) + 0.5 * (sp == sn[k - 1]))
        total += weight * tpr
    return total / (b - a)


def _random_case(rng, ties):
    n = int(rng.integers(4, 30))
    d = int(rng.integers(1, 5))
    X = rng.normal(size=(n, d))
    if ties:
        X = np.round(X, 0)
        X[1] = X[0]  # a duplicated row
    y = np.where(rng.random(n) < rng.uniform(0.1, 0.6), 1.0, -1.0)
    y[:2] = 1.0 if rng.random() < 0.5 else -1.0
    y[2], y[3] = 1.0, -1.0
    n_neg = int((y < 0).sum())
    lo = min(rng.uniform(0, 0.8), 1.0 - 1.0 / n_neg)
    hi = min(1.0, lo + max(rng.uniform(0, 1), 1.0 / n_neg + 1e-9))
    if rng.random() < 0.2:
        lo, hi = 0.0, 1.0
    return X, y, (lo, hi), rng.normal(size=d)


@pytest.mark.parametrize("name", PAIRWISE_LOSSES)
def test_exact_objective_equals_brute_force_pairs(name):
    rng = np.random.default_rng(0)
    for case in range(60):
        X, y, fr, w = _random_case(rng, ties=case % 2 == 1)
        margin = float(rng.uniform(0.3, 2.0))
        obj = PartialAUCObjective(X, y, fr, get_pairwise_loss(name, margin), 0.3)
        value, grad = obj.value_and_grad(w)
        ref = _brute_objective(X, y, w, fr, name, margin, 0.3)
        assert value == pytest.approx(ref, rel=1e-11, abs=1e-12)
        # central differences of the brute force (w random: scores distinct almost surely)
        if case % 2 == 0:
            eps = 1e-6
            fd = [(_brute_objective(X, y, w + eps * e, fr, name, margin, 0.3)
                   - _brute_objective(X, y, w - eps * e, fr, name, margin, 0.3)) / (2 * eps)
                  for e in np.eye(len(w))]
            np.testing.assert_allclose(grad, fd, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", PAIRWISE_LOSSES)
def test_exact_gradient_is_a_subgradient_under_ties(name):
    # tied negatives at the range boundary: F is still continuous and the
    # gradient of any rank order is a one-sided derivative along w itself.
    X = np.array([[2.0], [1.0], [1.0], [1.0], [0.0], [-1.0]])
    y = np.array([1.0, -1.0, -1.0, -1.0, -1.0, 1.0])
    obj = PartialAUCObjective(X, y, (0.1, 0.6), get_pairwise_loss(name), 0.0)
    w = np.array([1.0])
    value, grad = obj.value_and_grad(w)
    assert value == pytest.approx(_brute_objective(X, y, w, (0.1, 0.6), name, 1.0, 0.0))
    eps = 1e-7
    right = (obj.value(w * (1 + eps)) - value) / eps
    assert grad[0] * w[0] == pytest.approx(right, rel=1e-5)


def test_one_positive_and_one_negative_in_range():
    X = np.array([[0.5, 1.0], [0.1, -0.2], [0.3, 0.4], [-0.7, 0.9]])
    y = np.array([1.0, -1.0, -1.0, -1.0])
    fr = (1 / 3, 2 / 3)  # exactly the middle negative
    for name in PAIRWISE_LOSSES:
        obj = PartialAUCObjective(X, y, fr, get_pairwise_loss(name), 0.0)
        w = np.array([0.3, -1.1])
        assert obj.value(w) == pytest.approx(_brute_objective(X, y, w, fr, name, 1.0, 0.0))


def test_rank_weights_sum_and_fractional_cells():
    w = negative_rank_weights(10, (0.05, 0.47))
    assert w.sum() == pytest.approx(10 * 0.42)
    np.testing.assert_allclose(w[:6], [0.5, 1, 1, 1, 0.7, 0])
    assert np.all(w[5:] == 0)


def test_range_without_negatives_is_rejected():
    X = np.arange(12.0).reshape(6, 2)
    y = np.array([1, 1, 1, -1, -1, -1.0])
    with pytest.raises(ValueError, match="at least one negative"):
        PartialAUCObjective(X, y, (0.1, 0.3), get_pairwise_loss("squared_hinge"), 0.0)


# --------------------------------------------------------------------------------------
# the estimator
# --------------------------------------------------------------------------------------


def _imbalanced(n=400, d=8, seed=0):
    X, y = make_classification(n, d, n_informative=4, weights=[0.85], flip_y=0.03,
                               random_state=seed)
    return StandardScaler().fit_transform(X), y


class _quiet:
    def __enter__(self):
        self._ctx = warnings.catch_warnings()
        self._ctx.__enter__()
        warnings.simplefilter("ignore", ConvergenceWarning)

    def __exit__(self, *exc):
        self._ctx.__exit__(*exc)


def _refused_weight_checks(estimator):
    """The checks that fit with weights other than ones, which the stochastic solvers refuse.

    They fail with the ValueError of ``test_stochastic_solvers_refuse_weights``
    (tests/test_partial_auc_weights.py); strict, so that a solver taking
    weights must come off this list.
    """
    if estimator.solver in ("lbfgs", "exact", "auto"):
        return {}
    reason = f"solver={estimator.solver!r} refuses sample_weight (ValueError naming 'lbfgs')"
    return {name: reason for name in (
        "check_sample_weights_list", "check_sample_weights_not_overwritten",
        "check_sample_weight_equivalence_on_dense_data", "check_sample_weight_equivalence_on_sparse_data",
        "check_class_weight_classifiers")}


# at the defaults: tests/test_conventions.py; here a stochastic solver, which refuses weights
@parametrize_with_checks([PartialAUCClassifier(solver="agd-sbcd", max_iter=3, random_state=0)],
                         expected_failed_checks=_refused_weight_checks, xfail_strict=True)
def test_sklearn_compatible(estimator, check):
    with _quiet():
        check(estimator)


SOLVERS_ANY_RANGE = ["lbfgs", "agd-sbcd", "dca", "prox-dca"]


@pytest.mark.parametrize("solver", SOLVERS_ANY_RANGE)
@pytest.mark.parametrize("loss", ["squared_hinge", "logistic"])
def test_objective_attribute_is_exact_F(solver, loss):
    # the paper's objective alone (rank_weight=1), which every solver fits
    X, y = _imbalanced(200)
    with _quiet():
        clf = PartialAUCClassifier(solver=solver, loss=loss, max_iter=5, random_state=0, **PAPER).fit(X, y)
    ypm = np.where(y == 1, 1.0, -1.0)
    ref = _brute_objective(X, ypm, clf.ranking_coef_[0], (0.05, 0.5), loss, 1.0, 1e-4)
    assert clf.objective_ == pytest.approx(ref, rel=1e-10)
    assert clf.objective_history_[-1] == pytest.approx(ref, rel=1e-10)


@pytest.mark.parametrize("params", [{}, dict(loss="squared_hinge", rank_weight=0.3, alpha=1e-3)])
def test_default_objective_attribute_is_the_exact_mix_with_the_logistic_loss(params):
    # F = (1 - r) mean logistic loss + r pair surrogate + alpha/2 |w|^2, recomputed pair by pair
    X, y = _imbalanced(200, seed=3)
    clf = PartialAUCClassifier(max_iter=5, **params).fit(X, y)
    r = params.get("rank_weight", 0.05)
    loss = params.get("loss", "smooth_step")
    margin = clf.margin_[0]  # the default: a quarter of the spread of the logistic scores
    if loss != "smooth_step":
        assert margin == 1.0
    alpha = params.get("alpha", 1.0 / len(y))
    w, b = clf.ranking_coef_[0], clf.score_intercept_[0]
    ypm = np.where(y == 1, 1.0, -1.0)
    logistic = np.mean(np.log1p(np.exp(-ypm * (X @ w + b))))
    pairs = _brute_objective(X, ypm, w, (0.05, 0.5), loss, margin, 0.0)
    assert clf.objective_ == pytest.approx((1 - r) * logistic + r * pairs + 0.5 * alpha * w @ w, rel=1e-10)


@pytest.mark.parametrize("solver", SOLVERS_ANY_RANGE)
def test_every_solver_lowers_F_from_its_start(solver):
    X, y = _imbalanced(500, seed=1)
    ypm = np.where(y == 1, 1.0, -1.0)
    obj = PartialAUCObjective(X, ypm, (0.05, 0.5), get_pairwise_loss("squared_hinge"), 1e-4)
    clf = PartialAUCClassifier(solver=solver, random_state=0, loss="squared_hinge", **PAPER)
    start = clf._paper_start(clf._solvers[solver], obj, None, None)
    with _quiet():
        clf.fit(X, y)
    assert clf.objective_ < obj.value(start)


def test_auto_is_no_worse_than_the_dca_baselines():
    for seed in range(3):
        X, y = _imbalanced(600, d=10, seed=seed)
        with _quiet():
            auto = PartialAUCClassifier().fit(X, y)
            for solver in ("dca", "prox-dca"):
                base = PartialAUCClassifier(solver=solver, random_state=seed).fit(X, y)
                assert auto.objective_ <= base.objective_ + 1e-12, (seed, solver)


def test_training_partial_auc_beats_zero_and_random_directions():
    X, y = _imbalanced(600, seed=3)
    clf = PartialAUCClassifier(fpr_range=(0.05, 0.5)).fit(X, y)
    fitted = partial_auc_score(y, clf.decision_function(X), fpr_range=(0.05, 0.5))
    assert fitted > partial_auc_score(y, np.zeros(len(y)), fpr_range=(0.05, 0.5))
    rng = np.random.default_rng(0)
    for _ in range(20):
        s = X @ rng.normal(size=X.shape[1])
        assert fitted > partial_auc_score(y, s, fpr_range=(0.05, 0.5))


def test_partial_auc_score_of_the_fit_equals_brute_force():
    X, y = _imbalanced(300, seed=4)
    clf = PartialAUCClassifier(fpr_range=(0.1, 0.4)).fit(X, y)
    s = clf.decision_function(X)
    for fr in [(0.1, 0.4), (0.0, 0.3), (0.05, 0.5)]:
        assert partial_auc_score(y, s, fpr_range=fr) == pytest.approx(
            _brute_partial_auc(y, s, fr), rel=1e-12)


def test_auto_picks_the_closed_form_for_the_full_square_loss():
    X, y = _imbalanced(300)
    clf = PartialAUCClassifier(fpr_range=(0, 1), loss="squared", **PAPER).fit(X, y)
    assert clf.n_iter_ == 1
    ypm = np.where(y == 1, 1.0, -1.0)
    obj = PartialAUCObjective(X, ypm, (0, 1), get_pairwise_loss("squared"), 1e-4)
    _, grad = obj.value_and_grad(clf.ranking_coef_[0])
    assert np.max(np.abs(grad)) < 1e-10


def test_intercept_and_probabilities_come_from_platt_scaling():
    X, y = _imbalanced(400, seed=5)
    clf = PartialAUCClassifier().fit(X, y)
    s = X @ clf.ranking_coef_[0]
    A, B = clf.calibration_[0]
    assert A > 0
    # the Platt map folded into the linear model: coef_ = A w, intercept_ = B
    np.testing.assert_allclose(clf.coef_[0], A * clf.ranking_coef_[0], rtol=1e-15)
    assert clf.intercept_[0] == B
    np.testing.assert_allclose(clf.decision_function(X), A * s + B)
    np.testing.assert_allclose(clf.predict_proba(X)[:, 1], 1 / (1 + np.exp(-(A * s + B))))
    np.testing.assert_array_equal(clf.predict(X), clf.classes_[(A * s + B > 0).astype(int)])
    assert clf.score(X, y) > 0.8


def test_platt_fit_minimises_the_smoothed_log_loss():
    rng = np.random.default_rng(0)
    s = rng.normal(size=300)
    y = np.where(rng.random(300) < 1 / (1 + np.exp(-(2 * s - 1))), 1.0, -1.0)
    A, B = fit_platt(3 * s + 5, y)
    n_pos, n_neg = (y > 0).sum(), (y < 0).sum()
    t = np.where(y > 0, (n_pos + 1) / (n_pos + 2), 1 / (n_neg + 2))

    def nll(p):
        f = p[0] * (3 * s + 5) + p[1]
        return np.sum(np.logaddexp(0, f) - t * f)

    ref = minimize(nll, [0.0, 0.0], method="BFGS", options={"gtol": 1e-10}).x
    np.testing.assert_allclose([A, B], ref, rtol=1e-5, atol=1e-6)


def test_multiclass_one_vs_rest():
    X, y = load_iris(return_X_y=True)
    clf = make_pipeline(StandardScaler(), PartialAUCClassifier(fpr_range=(0.0, 0.5))).fit(X, y)
    est = clf[-1]
    assert est.coef_.shape == (3, 4) and est.objective_.shape == (3,)
    proba = clf.predict_proba(X)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    assert clf.score(X, y) > 0.8


def test_grid_search_over_alpha_and_fpr_range_with_the_pauc_scorer():
    X, y = _imbalanced(300, seed=6)
    search = GridSearchCV(
        make_pipeline(StandardScaler(), PartialAUCClassifier()),
        {"partialaucclassifier__alpha": [1e-4, 1e-1],
         "partialaucclassifier__fpr_range": [(0.0, 0.3), (0.05, 0.5)]},
        scoring=make_partial_auc_scorer((0.05, 0.5)),
        cv=StratifiedKFold(3),
    ).fit(X, y)
    assert len(search.cv_results_["params"]) == 4
    assert 0.275 < search.best_score_ <= 1.0  # 0.275: the expected pAUC of random scores
    assert search.best_estimator_[-1].fpr_range == search.best_params_["partialaucclassifier__fpr_range"]


def test_pickle_and_determinism():
    X, y = _imbalanced(300, seed=7)
    for solver in ("lbfgs", "agd-sbcd", "dca"):
        with _quiet():
            a = PartialAUCClassifier(solver=solver, max_iter=4, random_state=3).fit(X, y)
            b = PartialAUCClassifier(solver=solver, max_iter=4, random_state=3).fit(X, y)
        np.testing.assert_array_equal(a.coef_, b.coef_)
        c = pickle.loads(pickle.dumps(a))
        np.testing.assert_array_equal(c.decision_function(X), a.decision_function(X))


def test_warm_start_continues_from_the_previous_fit():
    X, y = _imbalanced(300, seed=8)
    clf = PartialAUCClassifier(max_iter=3, warm_start=True)
    with _quiet():
        clf.fit(X, y)
        first = clf.objective_
        clf.fit(X, y)
    assert clf.objective_ <= first + 1e-12


@pytest.mark.parametrize(
    "params, match",
    [
        (dict(fpr_range=(0.5, 0.2)), "alpha < beta"),
        (dict(fpr_range=(-0.1, 0.5)), "inside \\[0, 1\\]"),
        (dict(fpr_range=(0.1, 1.5)), "inside \\[0, 1\\]"),
        (dict(fpr_range=(0.3, 0.3)), "alpha < beta"),
        (dict(fpr_range=0.3), "fpr_range"),
        (dict(fpr_range=(0.1, 0.2, 0.3)), "pair"),
        (dict(fpr_range=(0.0, 0.004)), "at least one negative"),
        (dict(solver="exact"), "needs fpr_range=\\(0, 1\\)"),
        (dict(solver="ppd-sg", fpr_range=(0, 1), loss="squared_hinge"), "loss='squared'"),
        (dict(solver="ppd-adagrad", loss="squared"), "needs fpr_range"),
    ],
)
def test_bad_parameters_are_named(params, match):
    X, y = _imbalanced(200)
    with pytest.raises(ValueError, match=match):
        PartialAUCClassifier(**params).fit(X, y)


def test_bad_data_is_named():
    X, y = _imbalanced(100)
    with pytest.raises(ValueError, match="at least two classes"):
        PartialAUCClassifier().fit(X, np.ones(100))
    Xn = X.copy()
    Xn[0, 0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        PartialAUCClassifier().fit(Xn, y)
    Xi = X.copy()
    Xi[0, 0] = np.inf
    with pytest.raises(ValueError, match="infinity"):
        PartialAUCClassifier().fit(Xi, y)
    with pytest.raises(ValueError, match="inconsistent numbers of samples"):
        PartialAUCClassifier().fit(X, y[:-1])
    with pytest.raises(ValueError, match="margin"):
        PartialAUCClassifier(margin=0.0).fit(X, y)
    with pytest.raises(ValueError, match="loss"):
        PartialAUCClassifier(loss="hinge").fit(X, y)
    clf = PartialAUCClassifier().fit(X, y)
    with pytest.raises(ValueError, match="features"):
        clf.predict(X[:, :3])


def test_keyword_only_constructor():
    with pytest.raises(TypeError):
        PartialAUCClassifier((0.1, 0.2))


def test_default_margin_is_a_quarter_of_the_logistic_scores_spread():
    X, y = _imbalanced(300, seed=4)
    clf = PartialAUCClassifier(fpr_range=(0.0, 0.3)).fit(X, y)
    lr = PartialAUCClassifier(fpr_range=(0.0, 0.3), rank_weight=0.0, tol=1e-10).fit(X, y)
    assert clf.margin_[0] == pytest.approx(0.25 * np.std(X @ lr.ranking_coef_[0]), rel=1e-3)
    # it depends on the data and the parameters only: a warm start gives the same objective
    warm = PartialAUCClassifier(fpr_range=(0.0, 0.3), warm_start=True).fit(X, y)
    warm.fit(X, y)
    assert warm.margin_[0] == pytest.approx(clf.margin_[0], rel=1e-6)
    assert PartialAUCClassifier(margin=0.7).fit(X, y).margin_[0] == 0.7


@pytest.mark.parametrize("n", [300, 4000])
@pytest.mark.parametrize("case", ["normal", "spread", "clustered", "ties", "infinite", "nearly_sorted",
                                  "subnormal_spread"])
def test_resort_scores_is_a_stable_sort_from_the_given_order(case, n):
    # the radix sorts (and the insertion shortcut) against NumPy's stable argsort of the same start
    # (300 values: NumPy's own sort, 4000: the compiled ones)
    rng = np.random.default_rng(3)
    vals = {
        "normal": np.round(rng.normal(size=n), 3),
        "spread": rng.normal(size=n) * 10.0 ** rng.integers(-300, 300, size=n),
        "clustered": 0.5 + 1e-13 * rng.integers(0, 300, size=n),
        "ties": rng.integers(-3, 3, size=n).astype(float),
        "infinite": np.concatenate([rng.normal(size=n - 4), [np.inf, -np.inf, 1e308, -5e-324]]),
        "nearly_sorted": np.sort(rng.normal(size=n)),
        "subnormal_spread": rng.integers(0, 5, size=n) * 5e-324,
    }[case]
    order = rng.permutation(n)
    if case == "nearly_sorted":
        order = np.arange(n)
        vals[rng.integers(0, n, size=20)] += rng.normal(size=20) * 1e-3
    start = order.copy()
    keys = resort_scores(vals, order)
    expected = start[np.argsort(vals[start], kind="stable")]
    np.testing.assert_array_equal(order, expected)
    np.testing.assert_array_equal(keys, vals[expected])
