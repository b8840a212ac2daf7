"""The two-way partial AUC against an area computed cell by cell, and its relations to other definitions."""

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import roc_auc_score
from sklearn.model_selection import GridSearchCV

from skrank.metrics import (
    make_two_way_partial_auc_scorer,
    partial_auc_score,
    two_way_partial_auc_score,
)


def _clip(poly, inside, cross):
    """Sutherland-Hodgman: the part of a convex polygon where ``inside(p)`` holds."""
    out = []
    for k, p in enumerate(poly):
        q = poly[k - 1]
        if inside(p):
            if not inside(q):
                out.append(cross(q, p))
            out.append(p)
        elif inside(q):
            out.append(cross(q, p))
    return out


def _shoelace(poly):
    if len(poly) < 3:
        return 0.0
    x, y = np.array(poly).T
    return 0.5 * abs(float(x @ np.roll(y, -1) - y @ np.roll(x, -1)))


def _cell_by_cell(y, s, w, tpr_min, fpr_max):
    """The region's area, from the rectangles of (negative score, positive score) pairs.

    Negatives at a score ``v`` span the false-positive rates of the
    negatives' weight above ``v`` plus theirs, positives likewise in the
    true-positive rates.  The ROC curve passes above the rectangle of a pair
    whose positive scores higher, below it when the positive scores lower,
    and along its diagonal when they tie.  Each rectangle (a triangle for a
    tie) is clipped to FPR <= fpr_max and TPR >= tpr_min.
    """
    pos, neg = y == 1, y == 0
    Wp, Wn = w[pos].sum(), w[neg].sum()
    area = 0.0
    for a in np.unique(s[neg]):
        x0 = w[neg & (s > a)].sum() / Wn
        x1 = x0 + w[neg & (s == a)].sum() / Wn
        for b in np.unique(s[pos]):
            if b < a:
                continue
            y0 = w[pos & (s > b)].sum() / Wp
            y1 = y0 + w[pos & (s == b)].sum() / Wp
            poly = [(x0, y0), (x1, y0), (x1, y1)] if a == b else [(x0, y0), (x1, y0), (x1, y1), (x0, y1)]
            poly = _clip(poly, lambda p: p[0] <= fpr_max,
                         lambda p, q: (fpr_max, p[1] + (q[1] - p[1]) * (fpr_max - p[0]) / (q[0] - p[0])))
            poly = _clip(poly, lambda p: p[1] >= tpr_min,
                         lambda p, q: (p[0] + (q[0] - p[0]) * (tpr_min - p[1]) / (q[1] - p[1]), tpr_min))
            area += _shoelace(poly)
    return area / (fpr_max * (1.0 - tpr_min))


def _case(seed, n, ties, weighted):
    rng = np.random.default_rng(seed)
    y = (rng.random(n) < 0.35).astype(int)
    y[:2] = [0, 1]
    s = rng.normal(size=n) + y
    if ties:
        s = np.round(s * 2) / 2
    w = rng.uniform(0.1, 3.0, size=n) if weighted else np.ones(n)
    return y, s, w


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("ties", [False, True])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("region", [(0.5, 0.3), (0.7, 0.5), (0.0, 0.2), (0.9, 1.0), (0.33, 0.77)])
def test_equals_the_area_cell_by_cell(seed, ties, weighted, region):
    y, s, w = _case(seed, 60, ties, weighted)
    tpr_min, fpr_max = region
    got = two_way_partial_auc_score(y, s, tpr_min=tpr_min, fpr_max=fpr_max,
                                    sample_weight=w if weighted else None)
    assert got == pytest.approx(_cell_by_cell(y, s, w, tpr_min, fpr_max), abs=1e-10)


def test_one_way_and_full_area_are_special_cases():
    y, s, w = _case(7, 200, True, True)
    for fpr_max in (0.1, 0.45, 1.0):
        two_way = two_way_partial_auc_score(y, s, tpr_min=0.0, fpr_max=fpr_max, sample_weight=w)
        assert two_way == pytest.approx(partial_auc_score(y, s, fpr_range=(0.0, fpr_max), sample_weight=w),
                                        abs=1e-12)
    assert two_way_partial_auc_score(y, s, tpr_min=0.0, fpr_max=1.0) == pytest.approx(roc_auc_score(y, s))


def test_selected_pairs_form_without_ties_or_fractional_cells():
    # with n_pos (1 - tpr_min) and n_neg fpr_max whole numbers and no ties, the score is the AUC of the
    # lowest-scored (1 - tpr_min) fraction of the positives against the highest-scored fpr_max fraction
    # of the negatives (the form in which LibAUC's pauc_roc_score(min_tpr=...) computes it)
    rng = np.random.default_rng(4)
    y = np.r_[np.ones(40, int), np.zeros(50, int)]
    s = rng.normal(size=90) + 0.8 * y
    tpr_min, fpr_max = 0.75, 0.3
    low_pos = np.sort(s[y == 1])[:10]
    high_neg = np.sort(s[y == 0])[-15:]
    subset = roc_auc_score(np.r_[np.ones(10), np.zeros(15)], np.r_[low_pos, high_neg])
    got = two_way_partial_auc_score(y, s, tpr_min=tpr_min, fpr_max=fpr_max)
    assert got == pytest.approx(subset, abs=1e-12)


def test_weights_act_as_repeated_rows_and_labels_are_read_like_sklearn():
    y, s, _ = _case(3, 80, True, False)
    counts = np.random.default_rng(1).integers(1, 4, size=80)
    repeated = two_way_partial_auc_score(np.repeat(y, counts), np.repeat(s, counts), tpr_min=0.4, fpr_max=0.6)
    weighted = two_way_partial_auc_score(y, s, tpr_min=0.4, fpr_max=0.6, sample_weight=counts)
    assert weighted == pytest.approx(repeated, abs=1e-12)
    labels = np.where(y == 1, "yes", "no")
    assert two_way_partial_auc_score(labels, s, tpr_min=0.4, fpr_max=0.6, pos_label="yes") == pytest.approx(
        two_way_partial_auc_score(y, s, tpr_min=0.4, fpr_max=0.6))


@pytest.mark.parametrize("kwargs, message", [
    (dict(tpr_min=1.0, fpr_max=0.5), "tpr_min must lie in"),
    (dict(tpr_min=-0.1, fpr_max=0.5), "tpr_min must lie in"),
    (dict(tpr_min=0.5, fpr_max=0.0), "fpr_max must lie in"),
    (dict(tpr_min=0.5, fpr_max=np.nan), "fpr_max must be a finite"),
    (dict(tpr_min=True, fpr_max=0.5), "tpr_min must be a finite"),
])
def test_invalid_regions_are_refused_by_name(kwargs, message):
    with pytest.raises(ValueError, match=message):
        two_way_partial_auc_score([0, 1, 0, 1], [0.1, 0.2, 0.3, 0.4], **kwargs)
    with pytest.raises(ValueError, match=message):
        make_two_way_partial_auc_scorer(**kwargs)


def test_the_range_takes_the_estimators_names_too():
    y, s, w = _case(11, 90, True, True)
    by_max = two_way_partial_auc_score(y, s, tpr_min=0.4, fpr_max=0.3, sample_weight=w)
    for region in (dict(fpr_range=(0.0, 0.3)), dict(fpr_range=(0.0, 0.3), fpr_max=0.3)):
        assert two_way_partial_auc_score(y, s, tpr_min=0.4, sample_weight=w, **region) == by_max
    # without a floor, a range above 0 is the one-way partial AUC
    assert two_way_partial_auc_score(y, s, tpr_min=0.0, fpr_range=(0.1, 0.4)) == pytest.approx(
        partial_auc_score(y, s, fpr_range=(0.1, 0.4)), abs=1e-12)
    X = np.c_[s, np.random.default_rng(0).normal(size=90)]
    model = LogisticRegression().fit(X, y)
    scorer = make_two_way_partial_auc_scorer(tpr_min=0.4, fpr_range=(0.0, 0.3))
    assert scorer(model, X, y) == two_way_partial_auc_score(y, model.decision_function(X), tpr_min=0.4,
                                                            fpr_max=0.3)
    Y, S, _ = _labels(3)
    np.testing.assert_array_equal(
        two_way_partial_auc_score(Y, S, tpr_min=0.5, fpr_range=(0.0, 0.3), average=None),
        two_way_partial_auc_score(Y, S, tpr_min=0.5, fpr_max=0.3, average=None))


@pytest.mark.parametrize("kwargs, message", [
    (dict(tpr_min=0.5, fpr_range=(0.0, 0.3), fpr_max=0.4), r"\(0.0, 0.3\) and fpr_max=0.4 disagree"),
    (dict(tpr_min=0.5, fpr_range=(0.1, 0.3)), r"tpr_min=0.5 .* start at 0; got fpr_range=\(0.1, 0.3\)"),
    (dict(tpr_min=0.5, fpr_range=(0.1, 0.3), fpr_max=0.3), r"start at 0; got fpr_range=\(0.1, 0.3\)"),
    (dict(tpr_min=0.5), "Neither fpr_max nor fpr_range is given"),
    (dict(tpr_min=0.5, fpr_range=(0.3, 0.1)), "fpr_range must satisfy"),
])
def test_a_mix_of_the_names_that_disagree_is_refused_by_name(kwargs, message):
    with pytest.raises(ValueError, match=message):
        two_way_partial_auc_score([0, 1, 0, 1], [0.1, 0.2, 0.3, 0.4], **kwargs)
    with pytest.raises(ValueError, match=message):
        make_two_way_partial_auc_scorer(**kwargs)


def test_scorer_in_a_grid_search():
    y, s, _ = _case(5, 120, False, False)
    X = np.c_[s, np.random.default_rng(0).normal(size=120)]
    scorer = make_two_way_partial_auc_scorer(tpr_min=0.5, fpr_max=0.3)
    search = GridSearchCV(LogisticRegression(), {"C": [0.1, 1.0]}, scoring=scorer, cv=3).fit(X, y)
    model = search.best_estimator_
    assert scorer(model, X, y) == pytest.approx(
        two_way_partial_auc_score(y, model.decision_function(X), tpr_min=0.5, fpr_max=0.3))


def _labels(seed=0, n=80, k=3):
    rng = np.random.default_rng(seed)
    Y = (rng.random((n, k)) < 0.4).astype(int)
    Y[:2] = [[0] * k, [1] * k]
    return Y, rng.normal(size=(n, k)) + Y, rng.uniform(0.2, 2.0, size=n)


@pytest.mark.parametrize("average", ["macro", "micro", None])
@pytest.mark.parametrize("weighted", [False, True])
def test_multilabel_averages_agree_with_sklearn_on_the_full_area(average, weighted):
    Y, S, w = _labels()
    w = w if weighted else None
    expected = roc_auc_score(Y, S, average=average, sample_weight=w)
    np.testing.assert_allclose(partial_auc_score(Y, S, average=average, sample_weight=w), expected,
                               atol=1e-12)
    np.testing.assert_allclose(
        two_way_partial_auc_score(Y, S, tpr_min=0.0, fpr_max=1.0, average=average, sample_weight=w),
        expected, atol=1e-12)


def test_multilabel_regions_average_the_labels_or_pool_the_pairs():
    Y, S, w = _labels(1)
    per_label = [two_way_partial_auc_score(Y[:, k], S[:, k], tpr_min=0.5, fpr_max=0.3, sample_weight=w)
                 for k in range(3)]
    kw = dict(tpr_min=0.5, fpr_max=0.3, sample_weight=w)
    np.testing.assert_allclose(two_way_partial_auc_score(Y, S, average=None, **kw), per_label, atol=1e-15)
    assert two_way_partial_auc_score(Y, S, **kw) == pytest.approx(np.mean(per_label), abs=1e-15)
    pooled = two_way_partial_auc_score(Y.ravel(), S.ravel(), tpr_min=0.5, fpr_max=0.3,
                                       sample_weight=np.repeat(w, 3))
    assert two_way_partial_auc_score(Y, S, average="micro", **kw) == pytest.approx(pooled, abs=1e-15)
    pauc = partial_auc_score(Y, S, fpr_range=(0.1, 0.4), average=None)
    np.testing.assert_allclose(pauc, [partial_auc_score(Y[:, k], S[:, k], fpr_range=(0.1,
                                                                                     0.4)) for k in range(3)])


def test_multilabel_input_errors_name_the_problem():
    Y, S, _ = _labels(2)
    with pytest.raises(ValueError, match="same shape"):
        partial_auc_score(Y, S[:, :2])
    with pytest.raises(ValueError, match="average must be"):
        partial_auc_score(Y, S, average="weighted")
    Y[:, 1] = 0
    with pytest.raises(ValueError, match="label 1: Only one class"):
        two_way_partial_auc_score(Y, S, tpr_min=0.5, fpr_max=0.5)
    Y[0, 0] = 2
    with pytest.raises(ValueError, match="multi-label indicator"):
        partial_auc_score(Y, S)
