import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.datasets import make_classification, make_regression
from sklearn.linear_model import LinearRegression, LogisticRegression, Ridge
from sklearn.metrics import roc_auc_score, roc_curve
from sklearn.model_selection import GridSearchCV, StratifiedKFold
from sklearn.naive_bayes import GaussianNB

from skrank.metrics import (
    make_partial_auc_scorer,
    make_rank_risk_scorer,
    partial_auc_score,
    rank_risk_score,
)
from skrank.risks import ERM, Superquantile

# --------------------------------------------------------------------------
# independent reference computations
# --------------------------------------------------------------------------


def pairwise_pauc(y, s, alpha, beta, w=None):
    """pAUC for data without ties between a positive and a negative score.

    Walking the negatives from the highest score down, the k-th negative
    occupies the FPR interval [W_<k, W_<=k] / W_neg, over which the ROC curve
    is flat at the (weighted) share of positives scoring above it.
    """
    y = np.asarray(y)
    s = np.asarray(s, dtype=float)
    w = np.ones_like(s) if w is None else np.asarray(w, dtype=float)
    pos, neg = y == 1, y == 0
    order = np.argsort(-s[neg], kind="stable")
    s_neg, w_neg = s[neg][order], w[neg][order]
    edges = np.concatenate([[0.0], np.cumsum(w_neg)]) / w_neg.sum()
    area = 0.0
    for k in range(s_neg.size):
        height = w[pos][s[pos] > s_neg[k]].sum() / w[pos].sum()
        overlap = max(0.0, min(edges[k + 1], beta) - max(edges[k], alpha))
        area += height * overlap
    return area / (beta - alpha)


def midpoint_pauc(y, s, alpha, beta, w=None):
    """Integrate the piecewise-linear ROC curve exactly with the midpoint rule.

    The breakpoints are the ROC points' FPRs inside (alpha, beta); the curve is
    linear between consecutive breakpoints, where the midpoint rule is exact.
    """
    fpr, tpr, _ = roc_curve(y, s, sample_weight=w, drop_intermediate=False)
    x = np.unique(np.concatenate([[alpha, beta], fpr[(fpr > alpha) & (fpr < beta)]]))
    mids = 0.5 * (x[:-1] + x[1:])
    return float(np.sum(np.interp(mids, fpr, tpr) * np.diff(x)) / (beta - alpha))


def _random_case(rng, n, ties):
    y = rng.integers(0, 2, size=n)
    y[0], y[1] = 0, 1
    s = rng.integers(0, 4, size=n).astype(float) if ties else rng.standard_normal(n)
    return y, s


RANGES = [(0.0, 1.0), (0.0, 0.3), (0.05, 0.5), (0.2, 0.21), (0.5, 1.0), (0.13, 0.77)]


# --------------------------------------------------------------------------
# partial_auc_score
# --------------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("ties", [False, True])
@pytest.mark.parametrize("weighted", [False, True])
def test_full_range_equals_roc_auc(seed, ties, weighted):
    rng = np.random.default_rng(seed)
    y, s = _random_case(rng, 60, ties)
    w = rng.uniform(0.1, 3.0, size=y.size) if weighted else None
    assert partial_auc_score(y, s, sample_weight=w) == pytest.approx(
        roc_auc_score(y, s, sample_weight=w), abs=1e-12
    )


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("fpr_range", RANGES)
@pytest.mark.parametrize("weighted", [False, True])
def test_no_ties_matches_pairwise_formula(seed, fpr_range, weighted):
    rng = np.random.default_rng(100 + seed)
    y, s = _random_case(rng, 40, ties=False)
    w = rng.uniform(0.2, 2.0, size=y.size) if weighted else None
    got = partial_auc_score(y, s, fpr_range=fpr_range, sample_weight=w)
    assert got == pytest.approx(pairwise_pauc(y, s, *fpr_range, w=w), abs=1e-12)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("fpr_range", RANGES)
@pytest.mark.parametrize("weighted", [False, True])
def test_ties_match_trapezoid_on_roc_points(seed, fpr_range, weighted):
    rng = np.random.default_rng(200 + seed)
    y, s = _random_case(rng, 50, ties=True)
    w = rng.uniform(0.2, 2.0, size=y.size) if weighted else None
    got = partial_auc_score(y, s, fpr_range=fpr_range, sample_weight=w)
    assert got == pytest.approx(midpoint_pauc(y, s, *fpr_range, w=w), abs=1e-12)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 1), st.integers(-3, 3)), min_size=2, max_size=25),
    st.floats(0.0, 1.0),
    st.floats(0.0, 1.0),
)
def test_property_matches_midpoint_rule(pairs, a, b):
    y = np.array([p[0] for p in pairs])
    s = np.array([p[1] for p in pairs], dtype=float)
    if y.min() == y.max() or abs(a - b) < 1e-9:
        return
    alpha, beta = min(a, b), max(a, b)
    got = partial_auc_score(y, s, fpr_range=(alpha, beta))
    assert 0.0 <= got <= 1.0
    assert got == pytest.approx(midpoint_pauc(y, s, alpha, beta), abs=1e-9)


def test_tied_pair_counts_one_half():
    # one positive and one negative with the same score: ROC is the diagonal
    assert partial_auc_score([0, 1], [0.5, 0.5]) == pytest.approx(0.5)
    # area under y = x on [0, 0.5] is 0.125, normalised by 0.5
    assert partial_auc_score([0, 1], [0.5, 0.5], fpr_range=(0.0, 0.5)) == pytest.approx(0.25)
    assert partial_auc_score([0, 1], [0.5, 0.5], fpr_range=(0.5, 1.0)) == pytest.approx(0.75)


def test_hand_computed_example():
    y = [0, 0, 1, 1]
    s = [0.1, 0.4, 0.35, 0.8]
    # ROC: (0,0) (0,.5) (.5,.5) (.5,1) (1,1)
    assert partial_auc_score(y, s) == pytest.approx(0.75)
    assert partial_auc_score(y, s, fpr_range=(0.0, 0.5)) == pytest.approx(0.5)
    assert partial_auc_score(y, s, fpr_range=(0.5, 1.0)) == pytest.approx(1.0)
    assert partial_auc_score(y, s, fpr_range=(0.25, 0.75)) == pytest.approx(0.75)


@pytest.mark.parametrize("fpr_range", RANGES)
def test_perfect_reversed_and_random(fpr_range):
    y = np.array([0] * 50 + [1] * 50)
    s = np.arange(100.0)
    assert partial_auc_score(y, s, fpr_range=fpr_range) == pytest.approx(1.0)
    assert partial_auc_score(y, -s, fpr_range=fpr_range) == pytest.approx(0.0)
    # constant scores: ROC is the diagonal; no McClish correction
    const = partial_auc_score(y, np.zeros(100), fpr_range=fpr_range)
    assert const == pytest.approx(sum(fpr_range) / 2)


def test_invariant_to_monotone_transform_and_labels():
    rng = np.random.default_rng(3)
    y, s = _random_case(rng, 80, ties=True)
    ref = partial_auc_score(y, s, fpr_range=(0.1, 0.4))
    assert partial_auc_score(y, np.exp(s), fpr_range=(0.1, 0.4)) == pytest.approx(ref)
    labels = np.where(y == 1, "yes", "no")
    assert partial_auc_score(labels, s, fpr_range=(0.1, 0.4)) == pytest.approx(ref)
    assert partial_auc_score(labels, s, fpr_range=(0.1, 0.4), pos_label="yes") == pytest.approx(ref)
    assert partial_auc_score(2 * y - 1, s, fpr_range=(0.1, 0.4)) == pytest.approx(ref)
    # the other class as positive with negated scores transposes the ROC
    # curve: the full area is unchanged, a partial one is not in general
    assert partial_auc_score(labels, -s, pos_label="no") == pytest.approx(partial_auc_score(y, s))
    flipped = partial_auc_score(labels, -s, fpr_range=(0.1, 0.4), pos_label="no")
    assert flipped == pytest.approx(midpoint_pauc(1 - y, -s, 0.1, 0.4))


def test_integer_weights_equal_repetition():
    rng = np.random.default_rng(4)
    y, s = _random_case(rng, 30, ties=True)
    w = rng.integers(1, 4, size=y.size)
    got = partial_auc_score(y, s, fpr_range=(0.05, 0.5), sample_weight=w)
    rep = partial_auc_score(np.repeat(y, w), np.repeat(s, w), fpr_range=(0.05, 0.5))
    assert got == pytest.approx(rep, abs=1e-12)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(y_true=[1, 1, 1], y_score=[0.1, 0.2, 0.3]), "Only one class"),
        (dict(y_true=[0, 1, 2], y_score=[0.1, 0.2, 0.3]), "binary classification only"),
        (dict(y_true=[0.0, 0.5, 1.0], y_score=[0.1, 0.2, 0.3]), "binary classification only"),
        (dict(y_true=[0, 1], y_score=[0.1, np.nan]), "NaN or infinity"),
        (dict(y_true=[0, 1], y_score=[np.inf, 0.2]), "NaN or infinity"),
        (dict(y_true=[0, 1, 1], y_score=[0.1, 0.2]), "inconsistent numbers of samples"),
        (dict(y_true=[0, 1], y_score=[0.1, 0.2], fpr_range=(-0.1, 0.5)), r"inside \[0, 1\]"),
        (dict(y_true=[0, 1], y_score=[0.1, 0.2], fpr_range=(0.2, 1.5)), r"inside \[0, 1\]"),
        (dict(y_true=[0, 1], y_score=[0.1, 0.2], fpr_range=(0.5, 0.5)), "alpha < beta"),
        (dict(y_true=[0, 1], y_score=[0.1, 0.2], fpr_range=(0.6, 0.2)), "alpha < beta"),
        (dict(y_true=[0, 1], y_score=[0.1, 0.2], fpr_range=0.5), "pair"),
        (dict(y_true=[0, 1], y_score=[0.1, 0.2], fpr_range=(0.0, np.nan)), "finite real"),
        (dict(y_true=[0, 1], y_score=[0.1, 0.2], pos_label=3), "pos_label=3"),
        (dict(y_true=[0, 1, 1], y_score=[0.1, 0.2, 0.3], sample_weight=[0, 1, 1]), "one class"),
        (dict(y_true=[0, 1], y_score=[0.1, 0.2], sample_weight=[-1, 1]), "nonnegative"),
    ],
)
def test_errors(kwargs, match):
    with pytest.raises(ValueError, match=match):
        partial_auc_score(**kwargs)


# --------------------------------------------------------------------------
# partial AUC scorer
# --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def imbalanced():
    return make_classification(n_samples=300, n_features=5, weights=[0.85], random_state=0)


def test_partial_auc_scorer_uses_decision_function(imbalanced):
    X, y = imbalanced
    clf = LogisticRegression().fit(X, y)
    scorer = make_partial_auc_scorer((0.0, 0.3))
    expected = partial_auc_score(y, clf.decision_function(X), fpr_range=(0.0, 0.3))
    assert scorer(clf, X, y) == pytest.approx(expected)


def test_partial_auc_scorer_falls_back_to_predict_proba(imbalanced):
    X, y = imbalanced
    clf = GaussianNB().fit(X, y)
    scorer = make_partial_auc_scorer((0.05, 0.5))
    expected = partial_auc_score(y, clf.predict_proba(X)[:, 1], fpr_range=(0.05, 0.5))
    assert scorer(clf, X, y) == pytest.approx(expected)


def test_partial_auc_scorer_string_labels(imbalanced):
    X, y = imbalanced
    labels = np.where(y == 1, "pos", "neg")
    clf = LogisticRegression().fit(X, labels)
    expected = partial_auc_score(y, clf.decision_function(X), fpr_range=(0.0, 0.3))
    assert make_partial_auc_scorer((0.0, 0.3))(clf, X, labels) == pytest.approx(expected)
    # asking for the other class as positive reverses the scores
    other = make_partial_auc_scorer((0.0, 0.3), pos_label="neg")(clf, X, labels)
    flipped = partial_auc_score(1 - y, -clf.decision_function(X), fpr_range=(0.0, 0.3))
    assert other == pytest.approx(flipped)


def test_partial_auc_scorer_in_grid_search(imbalanced):
    X, y = imbalanced
    cv = StratifiedKFold(3, shuffle=True, random_state=0)
    search = GridSearchCV(
        LogisticRegression(),
        {"C": [0.01, 1.0]},
        scoring=make_partial_auc_scorer((0.0, 0.2)),
        cv=cv,
    ).fit(X, y)
    assert np.all(np.isfinite(search.cv_results_["mean_test_score"]))
    # recompute the score of the best candidate by hand
    manual = []
    for train, test in cv.split(X, y):
        clf = LogisticRegression(C=search.best_params_["C"]).fit(X[train], y[train])
        s = clf.decision_function(X[test])
        manual.append(partial_auc_score(y[test], s, fpr_range=(0.0, 0.2)))
    assert search.best_score_ == pytest.approx(np.mean(manual))


def test_partial_auc_scorer_validates_range():
    with pytest.raises(ValueError, match="alpha < beta"):
        make_partial_auc_scorer((0.3, 0.1))


# --------------------------------------------------------------------------
# rank_risk_score and its scorer
# --------------------------------------------------------------------------


def test_rank_risk_score_regression_matches_manual():
    rng = np.random.default_rng(0)
    y = rng.standard_normal(50)
    pred = y + rng.standard_normal(50)
    losses = 0.5 * (pred - y) ** 2
    # n = 50, q = 0.8: the mean of the 10 largest losses
    expected = np.sort(losses)[-10:].mean()
    assert rank_risk_score(y, pred) == pytest.approx(expected)
    assert rank_risk_score(y, pred, risk=Superquantile(q=0.8)) == pytest.approx(expected)
    assert rank_risk_score(y, pred, risk=ERM()) == pytest.approx(losses.mean())
    mae = np.abs(pred - y).mean()
    assert rank_risk_score(y, pred, risk="erm", loss="absolute") == pytest.approx(mae)


def test_rank_risk_score_classification_uses_margins():
    rng = np.random.default_rng(1)
    y = rng.integers(0, 2, size=40)
    f = rng.standard_normal(40)
    margin = np.where(y == 1, 1.0, -1.0) * f
    logistic = np.log1p(np.exp(-margin))
    expected = np.sort(logistic)[-8:].mean()
    assert rank_risk_score(y, f, loss="logistic") == pytest.approx(expected)
    labels = np.where(y == 1, "b", "a")
    assert rank_risk_score(labels, f, loss="logistic") == pytest.approx(expected)
    hinge = np.maximum(0.0, 1.0 - margin)
    assert rank_risk_score(y, f, risk="erm", loss="hinge") == pytest.approx(hinge.mean())


def test_rank_risk_score_errors():
    with pytest.raises(ValueError, match="Unknown loss"):
        rank_risk_score([0.0, 1.0], [0.0, 1.0], loss="nope")
    with pytest.raises(ValueError, match="Unknown risk"):
        rank_risk_score([0.0, 1.0], [0.0, 1.0], risk="nope")
    with pytest.raises(ValueError, match="NaN or infinity"):
        rank_risk_score([0.0, 1.0], [0.0, np.nan])
    with pytest.raises(ValueError, match="inconsistent numbers of samples"):
        rank_risk_score([0.0, 1.0], [0.0, 1.0, 2.0])
    with pytest.raises(ValueError, match="binary labels"):
        rank_risk_score([0, 1, 2], [0.0, 1.0, 2.0], loss="logistic")


def test_rank_risk_scorer_is_negated_and_works_in_grid_search():
    X, y = make_regression(n_samples=120, n_features=4, noise=5.0, random_state=0)
    reg = LinearRegression().fit(X, y)
    scorer = make_rank_risk_scorer(Superquantile(q=0.9), "squared")
    expected = rank_risk_score(y, reg.predict(X), risk=Superquantile(q=0.9))
    assert scorer(reg, X, y) == pytest.approx(-expected)
    search = GridSearchCV(Ridge(), {"alpha": [0.1, 100.0]}, scoring=scorer, cv=3).fit(X, y)
    assert search.best_params_["alpha"] == 0.1
    assert search.best_score_ < 0


def test_rank_risk_scorer_classification(imbalanced):
    X, y = imbalanced
    clf = LogisticRegression().fit(X, y)
    scorer = make_rank_risk_scorer("superquantile", "logistic")
    expected = rank_risk_score(y, clf.decision_function(X), loss="logistic")
    assert scorer(clf, X, y) == pytest.approx(-expected)


def test_a_narrow_band_does_not_round_above_one():
    # found by the property test above: a perfect ranking gave 1 + 2e-16 on this band
    value = partial_auc_score([0, 0, 1], [-1.0, -2.0, 0.0], fpr_range=(1.3099027131335344e-09, 1.0))
    assert value <= 1.0
    value = partial_auc_score([0, 0, 1], [-1.0, -2.0, 0.0], fpr_range=(0.0, 1.3099027131335344e-09))
    assert 0.0 <= value <= 1.0


# --------------------------------------------------------------------------
# inputs that name their problem
# --------------------------------------------------------------------------
def _two_way(y, s, **kw):
    from skrank.metrics import two_way_partial_auc_score

    return two_way_partial_auc_score(y, s, tpr_min=0.3, fpr_max=0.5, **kw)


def _rank_risk_labels(y, s, **kw):
    return rank_risk_score(y, s, loss="logistic", **kw)


@pytest.mark.parametrize("metric", [partial_auc_score, _two_way, _rank_risk_labels])
@pytest.mark.parametrize("as_objects", [False, True])
def test_labels_mixing_strings_and_numbers_are_refused_by_name(metric, as_objects):
    mixed = [1, "a"] * 5  # NumPy would read the list as the strings '1' and 'a'
    y = np.array(mixed, dtype=object) if as_objects else mixed
    with pytest.raises(ValueError, match=r"y_true mixes label types \(string and number\)"):
        metric(y, np.linspace(0.0, 1.0, 10))
    # one type is fine, as it was
    assert np.isfinite(metric(np.array(["b", "a"] * 5, dtype=object), np.linspace(0.0, 1.0, 10)))


@pytest.mark.parametrize("metric", [partial_auc_score, _two_way])
def test_a_score_matrix_for_binary_labels_names_y_score(metric):
    y = np.array([0, 1] * 10)
    scores = np.random.default_rng(0).normal(size=(20, 2))
    with pytest.raises(ValueError, match=r"y_score has shape \(20, 2\); .* \(y_score\[:, 1\]\)"):
        metric(y, scores)
    # a column is one score per sample
    assert metric(y, scores[:, [1]]) == metric(y, scores[:, 1])


def test_rank_risk_score_names_the_argument_with_columns():
    y = np.arange(10.0)
    with pytest.raises(ValueError, match=r"y_pred has shape \(10, 2\)"):
        rank_risk_score(y, np.c_[y, y])
    with pytest.raises(ValueError, match=r"y_true has shape \(10, 2\)"):
        rank_risk_score(np.c_[y, y], y)


@pytest.mark.parametrize("metric", [partial_auc_score, _two_way])
@pytest.mark.parametrize("average", ["macro", "micro", None])
def test_a_sparse_multilabel_y_true_scores_as_the_dense_one(metric, average):
    import scipy.sparse as sp

    rng = np.random.default_rng(3)
    Y = (rng.random((60, 3)) < 0.4).astype(int)
    Y[:2] = [[0, 0, 0], [1, 1, 1]]
    S = rng.normal(size=(60, 3)) + Y
    np.testing.assert_array_equal(metric(sp.csr_matrix(Y), S, average=average), metric(Y, S, average=average))
    if metric is partial_auc_score:  # and both agree with scikit-learn's dense full area
        np.testing.assert_allclose(metric(sp.csr_matrix(Y), S, average=average),
                                   roc_auc_score(Y, S, average=average), atol=1e-12)


def test_a_multilabel_y_true_of_minus_one_and_one_scores_as_sklearn():
    rng = np.random.default_rng(4)
    Y = (rng.random((60, 3)) < 0.4).astype(int)
    Y[:2] = [[0, 0, 0], [1, 1, 1]]
    S = rng.normal(size=(60, 3)) + Y
    for average in ("macro", "micro", None):
        np.testing.assert_allclose(partial_auc_score(2 * Y - 1, S, average=average),
                                   roc_auc_score(2 * Y - 1, S, average=average), atol=1e-12)
        np.testing.assert_array_equal(_two_way(2 * Y - 1, S, average=average),
                                      _two_way(Y, S, average=average))
