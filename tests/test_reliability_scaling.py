"""Fits that do not depend on the units of ``X`` nor on the scale of the weights, and clear refusals.

* The full-batch L-BFGS fits (PartialAUCClassifier, AveragePrecisionClassifier)
  stop by criteria that do not change when ``X`` is rescaled with ``alpha``
  rescaled to match (the same problem in other units): the rescaled fit is
  the fit.  A fit that returns without a ConvergenceWarning met one of them;
  one that cannot leave its start says so.
* Uniform sample weights, tiny or huge, fit as unit weights (with ``alpha``
  given; ``alpha=None`` is one over the total weight by definition), and
  weights that overflow are refused with a ValueError naming
  ``sample_weight``.
* Predicting on a Dask array that holds NaN raises, as for NumPy.
"""

import warnings

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.datasets import make_classification, make_regression
from sklearn.exceptions import ConvergenceWarning

from skrank import AveragePrecisionClassifier, PartialAUCClassifier
from skrank.datafits.average_precision import AveragePrecisionObjective
from skrank.datafits.logistic_anchor import LogisticAnchoredObjective
from skrank.datafits.partial_auc import PartialAUCObjective
from skrank.estimators import RankADMMClassifier, SpectralRiskClassifier, SpectralRiskRegressor
from skrank.pairwise_losses import get_pairwise_loss
from skrank.risks import Superquantile
from skrank.solvers.full_batch.lbfgs import lbfgs


def _data(n=300, d=6, seed=0):
    X, y = make_classification(n, d, n_informative=d - 2, weights=[0.7], flip_y=0.05, random_state=seed)
    return X, y


def _regression():
    return make_regression(200, 5, noise=3.0, random_state=0)


def _fit_recording(estimator, X, y, **fit_params):
    """Fit, returning the ConvergenceWarnings and RuntimeWarnings raised."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        estimator.fit(X, y, **fit_params)
    return [w for w in caught if issubclass(w.category, (ConvergenceWarning, RuntimeWarning))]


# --- A: stopping criteria that do not depend on the units of X ---------------------------------------

#: L-BFGS fits with a given ``alpha`` (rescaled with X below)
LBFGS_FITS = [
    PartialAUCClassifier(alpha=1e-3),
    PartialAUCClassifier(alpha=1e-3, link="sigmoid"),
    PartialAUCClassifier(alpha=1e-3, solver="lbfgs", loss="squared_hinge", rank_weight=1.0),
    AveragePrecisionClassifier(alpha=1e-3),
    AveragePrecisionClassifier(alpha=1e-3, solver="lbfgs", rank_weight=1.0),
]


@pytest.mark.parametrize("estimator", LBFGS_FITS, ids=repr)
@pytest.mark.parametrize("s", [1e-12, 1e-6, 1e-3, 1e4])
def test_rescaled_features_with_rescaled_alpha_give_the_same_fit(estimator, s):
    # X s with alpha s^2 is the same problem in other units: coef_ s, the same F and scores.
    # Before, the gradient test was absolute: X 1e-12 stopped at 0 iterations, F 4.6 times the optimum
    X, y = _data()
    base = clone(estimator)
    assert _fit_recording(base, X, y) == []
    scaled = clone(estimator).set_params(alpha=estimator.alpha * s * s)
    assert _fit_recording(scaled, X * s, y) == []
    assert scaled.objective_ == pytest.approx(base.objective_, rel=1e-7, abs=1e-9)
    assert scaled.n_iter_ == base.n_iter_
    np.testing.assert_allclose(scaled.coef_ * s, base.coef_, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(scaled.decision_function(X * s), base.decision_function(X),
                               rtol=1e-5, atol=1e-6)


#: the other full-batch solvers, whose criteria were scale-free already: kept so
OTHER_FULL_BATCH = [
    (SpectralRiskClassifier(risk=Superquantile(q=0.5), solver="newton"), "classification"),
    (SpectralRiskRegressor(risk=Superquantile(q=0.5), solver="admm"), "regression"),
    (RankADMMClassifier(solver="admm"), "classification"),
    (RankADMMClassifier(solver="ipm", loss="hinge"), "classification"),
    (RankADMMClassifier(solver="dca", risk="ranked_range"), "classification"),
]


@pytest.mark.parametrize("estimator, task", OTHER_FULL_BATCH,
                         ids=lambda v: v if isinstance(v, str) else repr(v))
@pytest.mark.parametrize("s", [1e-6, 1e4])
def test_other_full_batch_solvers_do_not_see_the_units_of_x(estimator, task, s):
    X, y = _data(200, 5) if task == "classification" else _regression()
    base = clone(estimator)
    assert _fit_recording(base, X, y) == []
    scaled = clone(estimator).set_params(alpha=estimator.alpha * s * s)
    assert _fit_recording(scaled, X * s, y) == []
    assert scaled.n_iter_ == base.n_iter_
    assert scaled.objective_ == pytest.approx(base.objective_, rel=1e-7, abs=1e-10)
    np.testing.assert_allclose(scaled.coef_ * s, base.coef_, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("estimator", [AveragePrecisionClassifier(),
                                       PartialAUCClassifier(margin=0.1),
                                       AveragePrecisionClassifier(solver="lbfgs", rank_weight=1.0)], ids=repr)
@pytest.mark.parametrize("s", [1e-6, 1e4])
def test_a_fit_without_warning_is_near_the_minimum_at_any_scale_of_x(estimator, s):
    # alpha=None is not rescaled: X s is another problem, but the default tol must still stop near
    # its minimum (or warn). Before, X 1e4 stopped at 3 times the objective of a tight fit, silently
    X, y = _data(seed=1)
    fit = clone(estimator)
    caught = _fit_recording(fit, X * s, y)
    tight = clone(estimator).set_params(tol=1e-10, max_iter=5000)
    _fit_recording(tight, X * s, y)
    if not caught:
        assert fit.objective_ <= tight.objective_ + 1e-3 * max(1.0, abs(tight.objective_))


def _anchored(X, y):
    ypm = np.where(y == 1, 1.0, -1.0)
    rank = PartialAUCObjective(X, ypm, (0.05, 0.5), get_pairwise_loss("squared_hinge", 1.0), 0.0)
    return LogisticAnchoredObjective(rank, X, ypm, 0.3, 1e-3)


@pytest.mark.parametrize("s", [1e-9, 1e5])
def test_lbfgs_stopping_criterion_does_not_depend_on_the_units_of_x(s):
    X, y = _data()
    base = _anchored(X, y)
    scaled = _anchored(X * s, y)
    scaled.alpha = base.alpha * s * s
    start = np.append(np.full(X.shape[1], 0.1), -0.2)
    r0 = lbfgs(base, base.penalty, coef_init=start, tol=1e-5)
    r1 = lbfgs(scaled, scaled.penalty, coef_init=np.append(start[:-1] / s, start[-1]), tol=1e-5)
    assert r0.converged and r1.converged and r0.n_iter == r1.n_iter > 0
    assert r1.stop_criterion == pytest.approx(r0.stop_criterion, rel=1e-5)
    np.testing.assert_allclose(r1.objective_history, r0.objective_history, rtol=1e-9)
    np.testing.assert_allclose(r1.info["scale"][:-1], r0.info["scale"][:-1] * s, rtol=1e-12)


class _Uphill:
    """``||w - 1||^2`` with the gradient's sign flipped: no line search can leave the start."""

    def value_and_grad(self, w):
        return float(np.sum((w - 1.0) ** 2)), -2.0 * (w - 1.0)


def test_lbfgs_reports_a_start_it_cannot_leave():
    result = lbfgs(_Uphill(), None, coef_init=np.full(3, 1.0 - 1e-4), tol=1e-6)
    assert result.n_iter == 0 and not result.converged
    assert result.stop_criterion > 1e-6


def test_an_estimator_stuck_at_its_start_warns(monkeypatch):
    X, y = _data()

    def uphill(self, theta):
        value, grad = original(self, theta)
        return value, -grad

    original = AveragePrecisionObjective.value_and_grad
    monkeypatch.setattr(AveragePrecisionObjective, "value_and_grad", uphill)
    clf = AveragePrecisionClassifier(solver="lbfgs", rank_weight=1.0, alpha=1e-3)
    with pytest.warns(ConvergenceWarning, match="after 0 iterations .it stopped at its starting point"):
        clf.fit(X, y)
    assert clf.n_iter_ == 0


# --- B: the scale of the weights ----------------------------------------------------------------------

#: estimators whose fit, with alpha given, must not see a uniform rescaling of the weights
WEIGHTED_FITS = [
    (PartialAUCClassifier(alpha=1e-3), "classification"),
    (PartialAUCClassifier(alpha=1e-3, solver="lbfgs", loss="squared_hinge", rank_weight=1.0),
     "classification"),
    (PartialAUCClassifier(alpha=1e-3, solver="exact", loss="squared", fpr_range=(0, 1), rank_weight=1.0),
     "classification"),
    (AveragePrecisionClassifier(alpha=1e-3), "classification"),
    (AveragePrecisionClassifier(alpha=1e-3, solver="lbfgs", rank_weight=1.0), "classification"),
    (RankADMMClassifier(), "classification"),
    (RankADMMClassifier(solver="ipm", loss="hinge"), "classification"),
    (SpectralRiskClassifier(risk=Superquantile(q=0.5)), "classification"),
    (SpectralRiskRegressor(risk=Superquantile(q=0.5)), "regression"),
]


def _solution(estimator):
    """The coefficients the solver returned: ``ranking_coef_`` where ``coef_`` folds in a Platt fit."""
    return getattr(estimator, "ranking_coef_", estimator.coef_)


@pytest.mark.parametrize("estimator, task", WEIGHTED_FITS, ids=lambda v: v if isinstance(v, str) else repr(v))
@pytest.mark.parametrize("c", [1e-300, 1e-200, 1e160, 1e300])
def test_uniform_weights_of_any_scale_fit_as_unit_weights(estimator, task, c):
    # before: 1e-200 raised ZeroDivisionError (pAUC, AP), 1e160 gave a NaN objective
    X, y = _data(200, 5) if task == "classification" else _regression()
    plain = clone(estimator).fit(X, y)
    weighted = clone(estimator)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        assert _fit_recording(weighted, X, y, sample_weight=np.full(y.shape[0], c)) == []
    assert weighted.objective_ == pytest.approx(plain.objective_, rel=1e-9, abs=1e-12)
    # the fitted solution (of a Platt classifier, its ranking: Platt's smoothed targets count weight units)
    np.testing.assert_allclose(_solution(weighted), _solution(plain), rtol=1e-7, atol=1e-9)
    assert np.all(np.isfinite(weighted.predict(X) if task == "regression" else weighted.decision_function(X)))


@pytest.mark.parametrize("Est", [PartialAUCClassifier, AveragePrecisionClassifier])
@pytest.mark.parametrize("c", [1e-200, 1e160])
def test_with_alpha_none_uniform_weights_act_through_alpha_only(Est, c):
    # alpha=None is 1 / (total weight), LogisticRegression(C=1)'s penalty (repeated rows); the
    # weighted mean objective is otherwise that of unit weights
    X, y = _data(200, 5)
    weighted = Est()
    assert _fit_recording(weighted, X, y, sample_weight=np.full(y.shape[0], c)) == []
    assert np.isfinite(weighted.objective_)
    given = Est(alpha=1.0 / (c * y.shape[0])).fit(X, y)
    assert weighted.objective_ == pytest.approx(given.objective_, rel=1e-9, abs=1e-12)
    np.testing.assert_allclose(weighted.ranking_coef_, given.ranking_coef_, rtol=1e-7, atol=1e-9)


@pytest.mark.parametrize("estimator", [PartialAUCClassifier(), AveragePrecisionClassifier(),
                                       RankADMMClassifier(), SpectralRiskClassifier()], ids=repr)
def test_weights_that_overflow_are_refused(estimator):
    # before: 1e306 gave RankADMMClassifier objective_ = 0 with RuntimeWarnings, NaN for the others
    X, y = _data(200, 5)
    with pytest.raises(ValueError, match="sample_weight overflows"):
        clone(estimator).fit(X, y, sample_weight=np.full(y.shape[0], 1e306))
    with pytest.raises(ValueError, match="sample_weight"):
        clone(estimator).fit(X, y, sample_weight=np.full(y.shape[0], np.inf))
    with pytest.raises(ValueError, match="sample_weight overflows: its values times class_weight's"):
        clone(estimator).set_params(class_weight={0: 1.0, 1: 1e10}).fit(
            X, y, sample_weight=np.full(y.shape[0], 1e300))


def test_alpha_none_of_a_tiny_total_weight_is_refused():
    X, y = _data(200, 5)
    with pytest.raises(ValueError, match="alpha=None is one over the total sample_weight"):
        PartialAUCClassifier().fit(X, y, sample_weight=np.full(y.shape[0], 1e-322))
    # with alpha given, the same weights fit as unit weights
    plain = PartialAUCClassifier(alpha=1e-3).fit(X, y)
    tiny = PartialAUCClassifier(alpha=1e-3).fit(X, y, sample_weight=np.full(y.shape[0], 1e-322))
    np.testing.assert_allclose(tiny.ranking_coef_, plain.ranking_coef_, rtol=1e-7, atol=1e-9)


# --- C: Dask arrays that hold NaN -----------------------------------------------------------------------

@pytest.mark.parametrize("estimator", [PartialAUCClassifier(), AveragePrecisionClassifier(),
                                       RankADMMClassifier(solver="newton")], ids=repr)
def test_predicting_on_a_dask_array_with_nan_raises(estimator):
    da = pytest.importorskip("dask.array")
    X, y = _data(200, 4)
    clf = clone(estimator).fit(X, y)
    bad = X.copy()
    bad[57, 2] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        clf.predict(bad)  # NumPy
    Xd = da.from_array(bad, chunks=(50, 4))
    for method in ("predict", "predict_proba", "decision_function"):
        lazy = getattr(clf, method)(Xd)
        assert isinstance(lazy, da.Array)  # still lazy: the check runs with the prediction
        with pytest.raises(ValueError, match="NaN or infinity"):
            lazy.compute()
    clean = da.from_array(X, chunks=(50, 4))
    np.testing.assert_array_equal(clf.predict(clean).compute(), clf.predict(X))
    np.testing.assert_allclose(clf.predict_proba(clean).compute(), clf.predict_proba(X))
