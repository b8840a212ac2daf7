"""Answers that must not be silently wrong.

* L-BFGS does not stop at its start when the penalty, not the data, sets
  the units of the coefficients (tiny features with ``alpha=None``): its
  gradient test reads the gradient per unit root mean square of the
  features, whatever ``alpha``.

* ``objective_`` is the exact objective at the returned coefficients, even
  where the scores are tiny next to the intercept.
* SOTA-s's streams take a new range between ``partial_fit`` calls, and its
  fit never returns a point above its start (and warns when it keeps the
  start); a stream whose coefficients score worse than its start on a
  batch says so.
"""

import warnings

import numpy as np
import pytest
from sklearn.datasets import make_classification, make_multilabel_classification

from skrank import AveragePrecisionClassifier, PartialAUCClassifier
from skrank.datafits.average_precision import AveragePrecisionObjective
from skrank.datafits.logistic_anchor import LogisticAnchoredObjective
from skrank.datafits.partial_auc import PartialAUCObjective, SigmoidScorePartialAUC
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
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            result = estimator._solve(X, ypm, None, None)  # the fit of one problem, through the solver table
        if isinstance(estimator, PartialAUCClassifier):
            rank = _rank_objective(estimator.link, X, ypm, margin=result.info["margin"])
        else:
            rank = _rank_objective("average_precision", X, ypm)
        check = LogisticAnchoredObjective(rank, X, ypm, estimator._rank_weight, 1.0 / X.shape[0])
        theta = np.append(result.coef, result.info["score_intercept"])
        assert result.objective == pytest.approx(check.value(theta), rel=1e-12, abs=1e-15)


# --- SOTA-s: a new range between partial_fit calls, and a fit that ends above its start -----------------

def _sota_stream(X, y, change=None):
    estimator = PartialAUCClassifier(solver="sota-s", fpr_range=(0, 0.3), tpr_min=0.5, random_state=0)
    estimator.partial_fit(X[:200], y[:200], classes=[0, 1])
    if change:
        estimator.set_params(**change)
    return _quiet_fit_partial(estimator, X[200:], y[200:])


def _quiet_fit_partial(estimator, X, y):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return estimator.partial_fit(X, y)


@pytest.mark.parametrize("change, fpr_max, tpr_min", [({"tpr_min": 0.0}, 0.3, 0.0),
                                                      ({"fpr_range": (0, 1.0)}, 1.0, 0.5),
                                                      ({"fpr_range": (0, 0.1), "tpr_min": 0.8}, 0.1, 0.8)])
def test_sota_stream_takes_a_new_range(change, fpr_max, tpr_min):
    # the stream's temperatures stood for the first call's range: a new one changed nothing, bit for bit
    from skrank.solvers.stochastic.sota import default_temperature

    X, y = make_classification(400, 5, weights=[0.7], random_state=0)
    kept, changed = _sota_stream(X, y), _sota_stream(X, y, change)
    stream = changed._streams[0]
    loss = stream.loss
    assert stream.lam_n == default_temperature(fpr_max, loss)
    assert stream.lam_p == default_temperature(1.0 - tpr_min, loss)
    assert not np.array_equal(changed._streams[0].v, kept._streams[0].v)


def test_sota_stream_refuses_a_range_it_cannot_fit_naming_it():
    X, y = make_classification(400, 5, weights=[0.7], random_state=0)
    with pytest.raises(ValueError, match="fpr_range"):
        _sota_stream(X, y, {"fpr_range": (0.1, 0.3), "tpr_min": 0.0})


def _noise(seed):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((400, 5)), np.where(rng.random(400) < 0.3, 1.0, -1.0)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_sota_never_returns_a_point_above_its_start(seed):
    # labels independent of X: no direction beats w = 0 (F = l(0) = 1); the epochs ended at 1.05-1.06
    from skrank.solvers.stochastic.sota import sota_s

    X, y = _noise(seed)
    loss = get_pairwise_loss("squared_hinge", 1.0)
    objective = PartialAUCObjective(X, y, (0, 0.3), loss, 1e-4, tpr_min=0.5)
    start = objective.value(np.zeros(X.shape[1]))
    result = sota_s(objective, objective.penalty, random_state=seed)
    assert objective.value(result.coef) <= start
    assert result.objective == objective.value(result.coef)
    if result.info["kept_start"]:
        assert not result.converged  # which the estimators report with a ConvergenceWarning
        assert np.max(result.objective_history[1:-1]) > start


def test_an_estimator_whose_sota_fit_ends_above_its_start_warns(monkeypatch):
    from sklearn.exceptions import ConvergenceWarning

    X, y = _noise(0)
    monkeypatch.setattr(PartialAUCClassifier, "_paper_start",
                        lambda self, info, objective, coef_init, intercept_init: np.zeros(X.shape[1]))
    estimator = PartialAUCClassifier(solver="sota-s", fpr_range=(0, 0.3), tpr_min=0.5, random_state=0)
    with pytest.warns(ConvergenceWarning, match="ended above its starting point"):
        estimator.fit(X, y)
    assert estimator.objective_ == pytest.approx(1.0, abs=1e-12)  # l(0), that of every tied pair


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_estimators_sota_fit_from_its_own_start_never_ends_above_w_zero(seed):
    # the estimator starts SOTA-s from the square-AUC closed form (F 1.5-1.6 on noise labels); its epochs
    # ended at F 1.05-1.10, below that start but above w = 0's 1.0, converged and unwarned
    from sklearn.exceptions import ConvergenceWarning

    X, y = _noise(seed)
    estimator = PartialAUCClassifier(solver="sota-s", fpr_range=(0, 0.3), tpr_min=0.5, random_state=seed)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        estimator.fit(X, y)
    # F at w = 0: every pair tied, no penalty (alpha plays no part)
    objective = PartialAUCObjective(X, y, (0, 0.3), estimator._pair_loss, 0.0, tpr_min=0.5)
    zero = objective.value(np.zeros(X.shape[1]))
    assert estimator.objective_ <= zero * (1 + 1e-12)
    if estimator.objective_ >= zero * (1 - 1e-12):  # w = 0 kept: the fit says so
        assert any(issubclass(w.category, ConvergenceWarning) and "ended above" in str(w.message)
                   for w in caught)


# --- L-BFGS: the gradient test does not depend on which of X and alpha sets the units --------------------

@pytest.mark.parametrize("scale", [1e-8, 1e-6, 1e-4, 1e-2, 1.0, 1e2, 1e4])
def test_logistic_fit_ranks_as_scikit_learn_at_any_scale_of_x(scale):
    # rank_weight=0 is LogisticRegression(C=1): with X 1e-6 the penalty set the units and the gradient
    # test passed at w = 0, every score tied (area under the ROC curve 0.5 against 0.98)
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import roc_auc_score

    X, y = _binary(scale)
    reference = LogisticRegression(C=1.0, tol=1e-14, max_iter=100_000).fit(X, y)
    fit = PartialAUCClassifier(rank_weight=0.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a silent answer must be the right one
        fit.fit(X, y)
    expected = roc_auc_score(y, reference.decision_function(X))
    assert roc_auc_score(y, fit.decision_function(X)) == pytest.approx(expected, abs=1e-9)
    assert np.ptp(fit.decision_function(X)) > 0.0


@pytest.mark.parametrize("Est", [PartialAUCClassifier, AveragePrecisionClassifier])
@pytest.mark.parametrize("scale", [1e-8, 1e-5, 1e-3, 1.0, 1e3])
def test_a_fit_without_warning_matches_a_tight_fit_when_the_penalty_sets_the_units(Est, scale):
    # X 1e-5 with alpha=None: n_iter_=0, coef_ zero, accuracy 0.5, no warning; the tight fit reaches
    # F 0.6593 against 0.6835, accuracy 0.93
    X, y = _binary(scale)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fit = Est().fit(X, y)
    tight = _quiet_fit(Est(tol=1e-12, max_iter=5000), X, y)
    if not caught:
        assert fit.objective_ <= tight.objective_ + 1e-4 * max(1.0, abs(tight.objective_))
        assert fit.score(X, y) >= tight.score(X, y) - 0.02
        assert np.ptp(fit.decision_function(X)) > 0.0


def test_a_sota_stream_above_its_start_on_a_batch_warns():
    from sklearn.exceptions import ConvergenceWarning

    X, y = _noise(0)
    labels = (y > 0).astype(int)
    estimator = PartialAUCClassifier(solver="sota-s", fpr_range=(0, 0.3), tpr_min=0.5, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        estimator.partial_fit(X[:200], labels[:200], classes=[0, 1])
    batch, batch_y = X[200:], labels[200:]
    with pytest.warns(ConvergenceWarning, match="above that at its starting point"):
        estimator.partial_fit(batch, batch_y)
    # the warning's comparison, recomputed: the exact objective on the batch at coef_ and at zero
    objective = PartialAUCObjective(batch, y[200:], (0, 0.3), estimator._streams[0].loss,
                                    estimator._streams[0].alpha, tpr_min=0.5)
    assert objective.value(estimator._streams[0].coef) > objective.value(np.zeros(X.shape[1]))


@pytest.mark.parametrize("Est", [PartialAUCClassifier, AveragePrecisionClassifier])
@pytest.mark.parametrize("scale", [1e-8, 1e-2, 1e2, 1e8])
def test_x_and_alpha_rescaled_together_give_the_fit_and_it_is_near_a_tight_fit(Est, scale):
    # X c with alpha c^2 is the same problem in other units (user guide): the same F, and the gradient
    # test, read per unit root mean square of the features, stops as near the optimum at every c
    X, y = _binary()
    alpha = 1.0 / X.shape[0]
    base = Est(alpha=alpha).fit(X, y)
    scaled = Est(alpha=alpha * scale**2).fit(X * scale, y)
    tight = _quiet_fit(Est(alpha=alpha, tol=1e-10, max_iter=5000), X, y)
    assert scaled.objective_ == pytest.approx(base.objective_, rel=1e-7, abs=1e-9)
    assert scaled.objective_ <= tight.objective_ + 1e-4 * max(1.0, abs(tight.objective_))
