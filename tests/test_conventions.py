"""The conventions every estimator shares."""

import inspect
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model._base import LinearClassifierMixin
from sklearn.utils.estimator_checks import (
    check_sample_weight_equivalence_on_dense_data,
    check_sample_weight_equivalence_on_sparse_data,
    parametrize_with_checks,
)

import skrank

ESTIMATORS = ["SpectralRiskClassifier", "SpectralRiskRegressor", "RankADMMClassifier",
              "RankADMMRegressor", "PartialAUCClassifier", "AveragePrecisionClassifier"]


@pytest.mark.parametrize("name", ESTIMATORS)
def test_estimator_is_exported_with_a_keyword_only_constructor(name):
    assert name in skrank.__all__
    params = list(inspect.signature(getattr(skrank, name).__init__).parameters.values())[1:]
    assert params and all(p.kind is p.KEYWORD_ONLY for p in params)
    shared = {"max_iter", "tol", "alpha", "random_state", "warm_start", "verbose"}
    assert shared <= {p.name for p in params}
    assert "max_epochs" not in {p.name for p in params}


def test_api_reference_names_resolve_and_list_every_estimator():
    import importlib
    import pathlib
    import re

    text = (pathlib.Path(__file__).parents[1] / "doc" / "api.rst").read_text()
    names = re.findall(r"^\.\. auto(?:class|function):: (\S+)$", text, flags=re.M)
    for name in names:
        module, _, attr = name.rpartition(".")
        assert hasattr(importlib.import_module(module), attr), name
    assert {f"skrank.{e}" for e in ESTIMATORS} <= set(names)


@pytest.mark.parametrize("module", ["spectral_risk", "rank_admm", "partial_auc", "average_precision"])
def test_docstring_examples_run(module):
    import doctest
    import importlib

    result = doctest.testmod(importlib.import_module(f"skrank.estimators.{module}"))
    assert result.attempted > 0 and result.failed == 0


# --------------------------------------------------------------------------------------
# scikit-learn's estimator checks, at the defaults, without exclusions
# --------------------------------------------------------------------------------------

#: Every public estimator, at its defaults: the instances scikit-learn's checks run on.
ALL_ESTIMATORS = ESTIMATORS + ["PartialAUCClassifierCV", "AveragePrecisionClassifierCV"]


#: The checks that compare the predictions of two fits to rtol 1e-7.  The spectral-risk estimators'
#: ``tol`` bounds the certified relative gap of ``F``, not the predictions: the fit with integer
#: weights and the fit of the repeated rows reach the same optimum along different paths, and at the
#: default tol=1e-7 their predictions differ by about 1e-8 (3e-6 relative on a score near zero);
#: test_spectral_risk_weights_are_repeated_rows_to_a_tighter_tol runs them at tol=1e-14, where the
#: classifier's default ExponentialSpectral(rho=1), flatter at its optimum than the superquantile's
#: kink, agrees too (at 1e-10 and 1e-12 its probabilities differed by 1.4e-7 and 1.9e-8).
#: scikit-learn's LogisticRegression fails these two checks (its own expected failures).
_PREDICTION_CHECKS = {"check_sample_weight_equivalence_on_dense_data",
                      "check_sample_weight_equivalence_on_sparse_data"}
_TOLERANCE_REASON = ("tol=1e-7 bounds the certified gap of F, not the predictions to rtol 1e-7 "
                     "(they pass at tol=1e-14)")


def _expected_failed_checks(estimator):
    """The checks the estimators fail at their defaults (strict: a fix must take them off)."""
    if type(estimator).__name__ in ("SpectralRiskRegressor", "SpectralRiskClassifier"):
        return {name: _TOLERANCE_REASON for name in _PREDICTION_CHECKS}
    return {}


#: The CV estimators on a small grid (2 alphas x 2 rank weights, 3 folds): ``make test`` runs their
#: checks on dense input; their checks on sparse input, and every check at their defaults (7 x 3 x 5
#: fits a search, about 100 s for a check on sparse input), run in ``make test-slow``.
SMALL_GRIDS = [skrank.PartialAUCClassifierCV(alphas=2, rank_weights=(0.0, 0.2), cv=3),
               skrank.AveragePrecisionClassifierCV(alphas=2, rank_weights=(0.0, 0.5), cv=3)]


def _is_slow_check(estimator, check):
    """A check of a CV estimator at its defaults (a search over its default grid), or on sparse input."""
    if not type(estimator).__name__.endswith("CV"):
        return False
    return not any(estimator is small for small in SMALL_GRIDS) or "sparse" in check.func.__name__


def _mark_slow_checks(parametrize, is_slow):
    """``parametrize_with_checks``'s parametrization with the cases that ``is_slow`` picks marked slow."""
    argnames, cases = parametrize.args
    marked = []
    for case in cases:
        values, marks = (case.values, list(case.marks)) if hasattr(case, "marks") else (case, [])
        if is_slow(*values):
            marks.append(pytest.mark.slow)
        marked.append(pytest.param(*values, marks=marks))
    return pytest.mark.parametrize(argnames, marked, **parametrize.kwargs)


@_mark_slow_checks(parametrize_with_checks([getattr(skrank, name)() for name in ALL_ESTIMATORS] + SMALL_GRIDS,
                                           expected_failed_checks=_expected_failed_checks,
                                           xfail_strict=True),
                   _is_slow_check)
def test_sklearn_checks_pass_at_the_defaults(estimator, check):
    # every check that LogisticRegression, LogisticRegressionCV and Ridge pass, at the defaults (and
    # the CV estimators on a small grid)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        check(estimator)


# --------------------------------------------------------------------------------------
# decision_function is X @ coef_.T + intercept_, as for scikit-learn's linear classifiers
# --------------------------------------------------------------------------------------

#: The classifiers, at settings that fit in a fraction of a second (the CV ones on a small grid).
CLASSIFIERS = {
    "pauc": lambda: skrank.PartialAUCClassifier(),
    "pauc-two-way": lambda: skrank.PartialAUCClassifier(fpr_range=(0.0, 0.5), tpr_min=0.3),
    "ap": lambda: skrank.AveragePrecisionClassifier(),
    "pauc-cv": lambda: skrank.PartialAUCClassifierCV(alphas=2, rank_weights=(0.0, 0.2), cv=3),
    "ap-cv": lambda: skrank.AveragePrecisionClassifierCV(alphas=2, rank_weights=(0.0, 0.5), cv=3),
    "spectral": lambda: skrank.SpectralRiskClassifier(),
    "admm": lambda: skrank.RankADMMClassifier(),
}
#: Those whose decision function is a Platt fit: coef_ = A ranking_coef_, intercept_ = B.
PLATT = {"pauc", "pauc-two-way", "ap", "pauc-cv", "ap-cv"}


def _targets(kind, n, rng, X):
    score = X[:, 0] + 0.5 * X[:, 1] + 0.5 * rng.normal(size=n)
    if kind == "binary":
        return (score > np.quantile(score, 0.75)).astype(int)
    if kind == "multiclass":
        return np.digitize(score, np.quantile(score, [0.5, 0.8]))
    other = X[:, 2] - 0.5 * X[:, 3] + 0.5 * rng.normal(size=n)
    return np.column_stack([score > np.quantile(score, 0.7), other > np.quantile(other, 0.6)]).astype(int)


def _linear_classifier_scores(estimator, X):
    """scikit-learn's linear classifiers' decision function, from the fitted coef_ and intercept_."""
    return LinearClassifierMixin.decision_function(estimator, X)


@pytest.mark.parametrize("target", ["binary", "multiclass", "multilabel"])
@pytest.mark.parametrize("name", list(CLASSIFIERS))
def test_decision_function_is_the_linear_model_of_coef_and_intercept(name, target):
    if target == "multilabel" and not CLASSIFIERS[name]().__sklearn_tags__().classifier_tags.multi_label:
        pytest.skip("the classifier takes no multi-label y")
    rng = np.random.default_rng(0)
    X = rng.normal(size=(240, 5))
    y = _targets(target, 240, rng, X)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        clf = CLASSIFIERS[name]().fit(X, y)
    X_new = rng.normal(size=(60, 5))
    for given in (X_new, sp.csr_matrix(X_new)):
        np.testing.assert_allclose(clf.decision_function(given), _linear_classifier_scores(clf, given),
                                   rtol=1e-12, atol=1e-12)
    if name in PLATT:
        A, B = clf.calibration_[:, 0], clf.calibration_[:, 1]
        assert np.all(A > 0)  # the ranking of X @ ranking_coef_.T is kept
        np.testing.assert_allclose(clf.coef_, A[:, None] * clf.ranking_coef_, rtol=1e-15)
        np.testing.assert_array_equal(clf.intercept_, B)
        probability = 1.0 / (1.0 + np.exp(-np.atleast_2d((X_new @ clf.ranking_coef_.T) * A + B)))
        expected = probability if target == "multilabel" else None
        if target == "binary":
            expected = np.column_stack([1.0 - probability.ravel(), probability.ravel()])
        if expected is not None:
            np.testing.assert_allclose(clf.predict_proba(X_new), expected, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("name", ["pauc", "ap", "spectral", "admm"])
def test_decision_function_of_a_dask_fit_is_the_linear_model(name):
    da = pytest.importorskip("dask.array")
    rng = np.random.default_rng(1)
    X = rng.normal(size=(300, 4))
    y = _targets("binary", 300, rng, X)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        clf = CLASSIFIERS[name]().fit(da.from_array(X, chunks=(100, 4)), da.from_array(y, chunks=100))
    lazy = clf.decision_function(da.from_array(X, chunks=(100, 4)))
    assert isinstance(lazy, da.Array)
    np.testing.assert_allclose(lazy.compute(), _linear_classifier_scores(clf, X), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name", ["pauc", "ap"])
def test_decision_function_of_an_array_api_fit_is_the_linear_model(name):
    import sklearn

    xp = pytest.importorskip("array_api_strict")
    rng = np.random.default_rng(2)
    X = rng.normal(size=(300, 4))
    y = _targets("binary", 300, rng, X)
    with sklearn.config_context(array_api_dispatch=True):
        clf = CLASSIFIERS[name]().fit(xp.asarray(X), xp.asarray(y))
        scores = clf.decision_function(xp.asarray(X))
        expected = xp.reshape(xp.asarray(X) @ xp.matrix_transpose(clf.coef_) + clf.intercept_, (-1,))
    np.testing.assert_allclose(np.asarray(scores), np.asarray(expected), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name, params", [
    ("ap", dict(solver="soap", random_state=0)),
    ("pauc", dict(solver="ppd-sg", fpr_range=(0, 1), loss="squared", random_state=0)),
])
def test_partial_fit_keeps_the_linear_model_and_steps_from_the_ranking_direction(name, params):
    rng = np.random.default_rng(3)
    X = rng.normal(size=(400, 5))
    y = _targets("binary", 400, rng, X)
    clf = CLASSIFIERS[name]().set_params(**params)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        clf.fit(X, y)
        direction = clf.ranking_coef_.copy()
        clf.partial_fit(X[:200], y[:200])
    stream = clf._streams[0]
    if hasattr(stream, "w_init"):  # PPD keeps its start: the solver's direction, not the Platt-scaled coef_
        np.testing.assert_array_equal(stream.w_init, direction[0])
    np.testing.assert_allclose(clf.decision_function(X), _linear_classifier_scores(clf, X), rtol=1e-12)
    np.testing.assert_allclose(clf.coef_, clf.calibration_[:, :1] * clf.ranking_coef_, rtol=1e-15)


@pytest.mark.parametrize("name", ["pauc", "ap"])
def test_a_warm_start_continues_from_the_ranking_direction(name, monkeypatch):
    # the refit of the same data from the fitted (ranking_coef_, score_intercept_) is already there:
    # a warm start from the Platt-scaled coef_ would start elsewhere and end at another objective
    rng = np.random.default_rng(4)
    X = rng.normal(size=(300, 5))
    y = _targets("binary", 300, rng, X)
    clf = CLASSIFIERS[name]().set_params(warm_start=True, tol=1e-8).fit(X, y)
    direction, objective = clf.ranking_coef_.copy(), clf.objective_
    assert not np.allclose(clf.coef_, clf.ranking_coef_)  # A != 1 here: the two starts differ
    starts = []
    solve = type(clf)._solve

    def spy(self, X, y, coef_init, intercept_init, sample_weight=None):
        starts.append(coef_init)
        return solve(self, X, y, coef_init, intercept_init, sample_weight)

    monkeypatch.setattr(type(clf), "_solve", spy)
    clf.fit(X, y)
    np.testing.assert_array_equal(starts[0], direction[0])
    assert clf.objective_ <= objective + 1e-10 * abs(objective)


@pytest.mark.parametrize("name", ["SpectralRiskRegressor", "SpectralRiskClassifier"])
@pytest.mark.parametrize("check", [check_sample_weight_equivalence_on_dense_data,
                                   check_sample_weight_equivalence_on_sparse_data], ids=lambda c: c.__name__)
def test_spectral_risk_weights_are_repeated_rows_to_a_tighter_tol(name, check):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        check(name, getattr(skrank, name)(tol=1e-14))


@pytest.mark.parametrize("name", ["pauc", "ap"])
def test_the_changelog_recipe_gives_the_former_attributes(name):
    # doc/changelog.rst: the former coef_ was ranking_coef_, the former intercept_ the Platt
    # threshold B / A on the scores, intercept_ / calibration_[:, 0] now
    from skrank.estimators._platt import platt_threshold

    rng = np.random.default_rng(5)
    X = rng.normal(size=(200, 4))
    y = _targets("binary", 200, rng, X)
    clf = CLASSIFIERS[name]().fit(X, y)
    threshold, _ = platt_threshold(X @ clf.ranking_coef_[0], np.where(y == 1, 1.0, -1.0))
    assert clf.intercept_[0] / clf.calibration_[0, 0] == pytest.approx(threshold, rel=1e-12)
    np.testing.assert_allclose(clf.decision_function(X),
                               clf.calibration_[0, 0] * (X @ clf.ranking_coef_[0] + threshold), rtol=1e-10)
