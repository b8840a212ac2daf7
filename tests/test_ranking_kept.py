"""The logistic-anchored fits keep an iterate that ranks the training data at least as well as their start."""

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import average_precision_score, roc_curve
from sklearn.preprocessing import StandardScaler

import skrank.estimators._anchored as anchored
from skrank.datasets import load_tabular
from skrank.estimators import AveragePrecisionClassifier, PartialAUCClassifier
from skrank.metrics import (
    _roc_points,
    average_precision,
    partial_auc_score,
    region_area,
    two_way_partial_auc_score,
)

CASES = [
    # (table, estimator, training metric): tables where the descent of the surrogate ends ranking worse
    ("vote92_perot", lambda: AveragePrecisionClassifier(),
     lambda y, s: average_precision_score(y, s)),
    ("arrests", lambda: PartialAUCClassifier(fpr_range=(0.0, 0.3), tpr_min=0.5),
     lambda y, s: two_way_partial_auc_score(y, s, tpr_min=0.5, fpr_max=0.3)),
]


@pytest.mark.parametrize("table, make, metric", CASES, ids=[c[0] for c in CASES])
def test_training_metric_at_least_logistic_regression(table, make, metric, monkeypatch, capsys):
    X, y = load_tabular(table)
    X = StandardScaler().fit_transform(np.asarray(X, dtype=np.float64))
    reference = metric(y, LogisticRegression().fit(X, y).decision_function(X))
    model = make().set_params(verbose=1).fit(X, y)
    kept = metric(y, model.decision_function(X))
    assert kept >= reference - 1e-9
    assert model.objective_ == pytest.approx(model.objective_history_[-1])
    assert "the training metric ended below the logistic regression's: kept" in capsys.readouterr().out
    # the case is real: the last iterate of the descent ranks worse than logistic regression
    monkeypatch.setattr(anchored, "_ranking_kept", lambda objective, logistic, result: result.coef)
    last = metric(y, make().fit(X, y).decision_function(X))
    assert last < reference - 1e-4


def _random_case(rng, n, weighted):
    y = rng.random(n) < 0.3
    y[0], y[1] = True, False
    scores = np.round(rng.normal(size=n), 1)  # ties
    weight = rng.random(n) * (rng.random(n) > 0.2) if weighted else None
    if weighted:
        weight[0] = weight[1] = 1.0
    return y, scores, weight


@pytest.mark.parametrize("weighted", [False, True])
def test_average_precision_equals_scikit_learn(weighted):
    rng = np.random.default_rng(0)
    for _ in range(100):
        y, s, w = _random_case(rng, int(rng.integers(2, 80)), weighted)
        assert average_precision(y, s, w) == pytest.approx(average_precision_score(y, s, sample_weight=w),
                                                           abs=1e-12)


@pytest.mark.parametrize("weighted", [False, True])
def test_roc_points_are_scikit_learn_s(weighted):
    """The curve under the partial-AUC metrics (tested against brute force in test_two_way_metric.py)."""
    rng = np.random.default_rng(1)
    for _ in range(100):
        y, s, w = _random_case(rng, int(rng.integers(2, 60)), weighted)
        fpr, tpr, _ = roc_curve(y, s, sample_weight=w, drop_intermediate=False)
        kept = slice(None) if w is None else w > 0  # scikit-learn drops the samples of weight zero
        ours = _roc_points(y[kept], s[kept], None if w is None else w[kept])
        np.testing.assert_allclose(ours[0], fpr, rtol=0, atol=1e-15)
        np.testing.assert_allclose(ours[1], tpr, rtol=0, atol=1e-15)
        assert region_area(y, s, w, fpr_range=(0.1, 0.4)) == pytest.approx(region_area(
            y[kept], s[kept], None if w is None else w[kept], fpr_range=(0.1, 0.4)), abs=1e-15)
        assert region_area(y, s, w, fpr_range=(0.1, 0.4)) == partial_auc_score(
            y, s, fpr_range=(0.1, 0.4), sample_weight=w)
