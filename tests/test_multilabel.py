"""Multi-label targets: one ranking per label, as scikit-learn's multi-label classifiers fit them."""

import numpy as np
import pytest
from scipy.special import expit
from sklearn.datasets import make_multilabel_classification
from sklearn.model_selection import GridSearchCV

from skrank import AveragePrecisionClassifier, PartialAUCClassifier
from skrank.estimators import SpectralRiskClassifier
from skrank.metrics import make_partial_auc_scorer, partial_auc_score

ESTIMATORS = [PartialAUCClassifier, AveragePrecisionClassifier]


@pytest.fixture(scope="module")
def labelled():
    X, Y = make_multilabel_classification(n_samples=240, n_features=6, n_classes=3, random_state=1)
    return X, Y


@pytest.mark.parametrize("Estimator", ESTIMATORS)
@pytest.mark.parametrize("weighted", [False, True])
def test_each_label_is_the_binary_fit_of_its_column(Estimator, weighted, labelled):
    X, Y = labelled
    w = np.random.default_rng(0).uniform(0.5, 2.0, size=X.shape[0]) if weighted else None
    model = Estimator().fit(X, Y, sample_weight=w)
    assert model.coef_.shape == (3, X.shape[1])
    np.testing.assert_array_equal(model.classes_, [0, 1, 2])
    assert model.multilabel_
    scores = model.decision_function(X)
    assert scores.shape == (X.shape[0], 3)
    for j in range(3):
        binary = Estimator().fit(X, Y[:, j], sample_weight=w)
        np.testing.assert_allclose(scores[:, j], binary.decision_function(X), rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(model.predict(X), (scores > 0).astype(int))
    np.testing.assert_allclose(model.predict_proba(X), expit(scores))


@pytest.mark.parametrize("Estimator", ESTIMATORS)
def test_a_grid_search_scores_the_labels_by_their_mean(Estimator, labelled):
    X, Y = labelled
    scorer = make_partial_auc_scorer((0.0, 0.3))
    search = GridSearchCV(Estimator(), {"alpha": [1e-3, 1e-1]}, scoring=scorer, cv=3).fit(X, Y)
    best = search.best_estimator_
    assert scorer(best, X, Y) == pytest.approx(
        partial_auc_score(Y, best.decision_function(X), fpr_range=(0.0, 0.3)))


@pytest.mark.parametrize("Estimator", ESTIMATORS)
def test_multilabel_misuse_is_refused_with_the_reason(Estimator, labelled):
    X, Y = labelled
    with pytest.raises(ValueError, match="class_weight is not supported with a multi-label y"):
        Estimator(class_weight="balanced").fit(X, Y)
    one_valued = Y.copy()
    one_valued[:, 2] = 1
    with pytest.raises(ValueError, match="label 2 holds only"):
        Estimator().fit(X, one_valued)
    three_valued = Y.copy()
    three_valued[0, 0] = 2
    with pytest.raises(ValueError, match="multi-label indicator"):
        Estimator().fit(X, three_valued)


def test_a_stream_takes_class_labels_only(labelled):
    X, Y = labelled
    with pytest.raises(ValueError, match="partial_fit takes class labels"):
        PartialAUCClassifier(solver="ppd-sg", fpr_range=(0.0, 1.0)).partial_fit(X, Y, classes=[0, 1])


def test_estimators_without_multilabel_targets_refuse_them(labelled):
    X, Y = labelled
    with pytest.raises(ValueError, match="1d"):
        SpectralRiskClassifier().fit(X, Y)
