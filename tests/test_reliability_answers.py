"""Answers that must not be silently wrong.

* ``objective_`` is the exact objective at the returned coefficients, even
  where the scores are tiny next to the intercept.
"""

import warnings

import numpy as np
import pytest
from sklearn.datasets import make_classification, make_multilabel_classification

from skrank import AveragePrecisionClassifier, PartialAUCClassifier
from skrank.datafits.average_precision import AveragePrecisionObjective
from skrank.datafits.logistic_anchor import LogisticAnchoredObjective
from skrank.datafits.partial_auc import PartialAUCObjective, SigmoidScorePartialAUC
from skrank.estimators._anchored import fit_anchored
from skrank.pairwise_losses import get_pairwise_loss


def _binary(scale=1.0):
    X, y = make_classification(200, 5, n_informative=3, n_redundant=0, n_clusters_per_class=1, class_sep=2.0,
                               random_state=0)
    return X * scale, y


def _quiet_fit(estimator, X, y):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return estimator.fit(X, y)


# --- objective_ is F at the returned coefficients -------------------------------------------------------

def _rank_objective(kind, X, ypm, margin=1.0):
    if kind == "average_precision":
        return AveragePrecisionObjective(X, ypm, get_pairwise_loss("squared_hinge", 0.5), 0.0)
    rank = PartialAUCObjective(X, ypm, (0.05, 0.5), get_pairwise_loss("smooth_step", margin), 0.0)
    return SigmoidScorePartialAUC(rank) if kind == "sigmoid" else rank


@pytest.mark.parametrize("kind", ["identity", "sigmoid", "average_precision"])
@pytest.mark.parametrize("scale", [1.0, 1e-6, 1e-12])
def test_value_and_gradient_pass_gives_the_value_of_the_value_pass(kind, scale):
    # scores X w of 1e-22 next to an intercept of 0.2: X w + b rounded them to ties in the gradient pass,
    # which the solver reports, while the value pass ranked X w itself (0.6823 against 0.6734)
    X, y = _binary(scale)
    ypm = np.where(y == 1, 1.0, -1.0)
    rng = np.random.default_rng(0)
    theta = np.append(rng.standard_normal(X.shape[1]) * 1e-10, 0.22)  # scores of about 1e-10 scale
    objective = LogisticAnchoredObjective(_rank_objective(kind, X, ypm, margin=1e-21), X, ypm, 0.05, 5e-3)
    assert objective.value_and_grad(theta)[0] == pytest.approx(objective.value(theta), rel=1e-12)


@pytest.mark.parametrize("make", [PartialAUCClassifier, lambda: PartialAUCClassifier(link="sigmoid"),
                                  AveragePrecisionClassifier], ids=["pauc", "pauc-sigmoid", "ap"])
@pytest.mark.parametrize("scale", [1.0, 1e-12])
def test_the_reported_objective_is_the_objective_at_the_returned_coefficients(make, scale):
    X, Y = make_multilabel_classification(200, 5, n_classes=3, random_state=0)
    X = X * scale
    estimator = make()
    _quiet_fit(estimator, X, Y)  # sets the resolved parameters (loss, rank weight, range)
    for k in range(Y.shape[1]):
        ypm = np.where(Y[:, k] > 0, 1.0, -1.0)
        if isinstance(estimator, PartialAUCClassifier):
            kind = estimator.link
            rank = _rank_objective(kind, X, ypm)
            relative = estimator._relative_margin
        else:
            rank, relative = _rank_objective("average_precision", X, ypm), None
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            result = fit_anchored(rank, X, ypm, estimator, estimator._rank_weight, None, None, None,
                                  relative_margin=relative)
        check = LogisticAnchoredObjective(rank, X, ypm, estimator._rank_weight, 1.0 / X.shape[0])
        theta = np.append(result.coef, result.info["score_intercept"])
        assert result.objective == pytest.approx(check.value(theta), rel=1e-12, abs=1e-15)
