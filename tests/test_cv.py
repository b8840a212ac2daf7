"""PartialAUCClassifierCV and AveragePrecisionClassifierCV: paths, selection, scikit-learn API, errors."""

import warnings

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.datasets import make_classification
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import average_precision_score, get_scorer, roc_auc_score
from sklearn.model_selection import GridSearchCV, StratifiedKFold
from sklearn.preprocessing import StandardScaler
from sklearn.utils._param_validation import InvalidParameterError

from skrank import (
    AveragePrecisionClassifier,
    AveragePrecisionClassifierCV,
    PartialAUCClassifier,
    PartialAUCClassifierCV,
)
from skrank.metrics import make_partial_auc_scorer, partial_auc_score

#: The full range makes the pairwise squared hinge smooth and convex, so that warm-started and cold
#: fits meet (a partial range has kinks where L-BFGS can stall, see test_partial_range_path_stalls).
FPR_RANGE = (0.0, 1.0)


@pytest.fixture(scope="module")
def data():
    # AveragePrecisionClassifier's objective is not convex: on these data its warm-started and cold
    # fits reach the same stationary points (on random_state=0 one fold does not)
    X, y = make_classification(160, n_features=5, n_informative=3, weights=[0.8], random_state=1)
    return StandardScaler().fit_transform(X), y


def _folds(X, y, n_splits=3):
    return list(StratifiedKFold(n_splits, shuffle=True, random_state=0).split(X, y))


# the CV class, its base class, the base's own parameters and the default scorer
CASES = {
    # the linear scores: a convex surrogate on the full range, so warm and cold starts agree
    "pauc": (PartialAUCClassifierCV, PartialAUCClassifier, {"fpr_range": FPR_RANGE, "link": "identity",
                                                                "margin": 1.0},
             make_partial_auc_scorer(FPR_RANGE)),
    "ap": (AveragePrecisionClassifierCV, AveragePrecisionClassifier, {},
           get_scorer("average_precision")),
}
#: the default scorers' metric of one binary problem
METRICS = {"pauc": lambda target, scores: partial_auc_score(target, scores, fpr_range=FPR_RANGE),
           "ap": average_precision_score}
ALPHAS = [1e-1, 1e-2, 1e-3]
RANK_WEIGHTS = [0.0, 0.3, 1.0]
TOL = 1e-8


class _quiet:
    def __enter__(self):
        self._ctx = warnings.catch_warnings()
        self._ctx.__enter__()
        warnings.simplefilter("ignore", ConvergenceWarning)

    def __exit__(self, *exc):
        self._ctx.__exit__(*exc)


@pytest.fixture(scope="module", params=list(CASES))
def fitted(request, data):
    """Each CV class fitted with a tight tol on three fixed folds (shared by the tests below)."""
    X, y = data
    cv_class, base_class, params, scorer = CASES[request.param]
    folds = _folds(X, y)
    search = cv_class(alphas=ALPHAS, rank_weights=RANK_WEIGHTS, cv=folds, tol=TOL, **params).fit(X, y)
    return search, base_class, params, scorer, folds


# --------------------------------------------------------------------------------------
# 1. the warm-started paths are the independent fits
# --------------------------------------------------------------------------------------


def test_path_equals_independent_fits(fitted, data):
    X, y = data
    search, base_class, params, scorer, folds = fitted
    train, test = folds[1]
    assert search.coefs_paths_.shape == (3, len(RANK_WEIGHTS), len(ALPHAS), X.shape[1])
    assert search.scores_.shape == (3, len(RANK_WEIGHTS), len(ALPHAS))
    for i, rank_weight in enumerate(RANK_WEIGHTS):
        for k, alpha in enumerate(ALPHAS):
            fresh = base_class(alpha=alpha, rank_weight=rank_weight, tol=TOL, **params)
            fresh.fit(X[train], y[train])
            coef = fresh.ranking_coef_.ravel()
            where = f"rank_weight={rank_weight}, alpha={alpha}"
            assert_allclose(search.coefs_paths_[1, i, k], coef, rtol=1e-3,
                            atol=1e-4 * np.linalg.norm(coef), err_msg=where)
            assert search.scores_[1, i, k] == pytest.approx(scorer(fresh, X[test], y[test]), abs=1e-6), where


def test_partial_range_path_equals_a_fresh_fit():
    # with fpr_max < 1 the surrogate has kinks (a negative entering or leaving the top fpr_max N-);
    # with the squared hinge, L-BFGS warm-started on one stopped there after one iteration and the
    # path kept the previous alpha's fit.  The default smooth step moves off it.
    X, y = make_classification(160, n_features=5, n_informative=3, weights=[0.8], random_state=0)
    X = StandardScaler().fit_transform(X)
    folds = _folds(X, y)
    search = PartialAUCClassifierCV(alphas=[1e-1, 1e-2], rank_weights=[0.3], cv=folds[:1], tol=TOL,
                                    fpr_range=(0.0, 0.5), refit=False).fit(X, y)
    train, _ = folds[0]
    fresh = PartialAUCClassifier(alpha=1e-2, rank_weight=0.3, tol=TOL, fpr_range=(0.0, 0.5)).fit(X[train],
                                                                                                  y[train])
    assert_allclose(search.coefs_paths_[0, 0, 1], fresh.ranking_coef_.ravel(), rtol=1e-3)


def _record_starts(base_class, monkeypatch):
    """A list that records every fit of ``base_class``: ``(rank_weight, alpha, start, end)`` coefficients."""
    starts = []
    fit = base_class._fit_prepared

    def spy(self, prepared, warm=False):
        start = self.ranking_coef_.copy() if (warm and hasattr(self, "ranking_coef_")) else None
        starts.append((self.rank_weight, self.alpha, start))
        fit(self, prepared, warm)
        starts[-1] += (self.ranking_coef_.copy(),)
        return self

    monkeypatch.setattr(base_class, "_fit_prepared", spy)
    return starts


@pytest.mark.parametrize("name", list(CASES))
def test_each_path_is_warm_started_from_the_previous_alpha(name, data, monkeypatch):
    X, y = data
    cv_class, base_class, params, _ = CASES[name]
    starts = _record_starts(base_class, monkeypatch)
    cv_class(alphas=[1e-1, 1e-2, 1e-3], rank_weights=[0.0, 1.0], cv=2, refit=False, **params).fit(X, y)
    assert len(starts) == 2 * 2 * 3
    for fold in range(2):  # each fold's fits, and in them the path of each rank weight
        for rank_weight in (0.0, 1.0):
            calls = [call for call in starts[6 * fold: 6 * fold + 6] if call[0] == rank_weight]
            assert [alpha for _, alpha, _, _ in calls] == [1e-1, 1e-2, 1e-3]  # from the largest alpha down
            assert calls[0][2] is None  # the first fit of a path starts cold
            for previous, current in zip(calls, calls[1:]):
                assert_array_equal(current[2], previous[3])


@pytest.mark.parametrize("name", list(CASES))
def test_rank_weight_paths_start_from_the_previous_rank_weight(name, data, monkeypatch):
    X, y = data
    cv_class, base_class, params, _ = CASES[name]
    starts = _record_starts(base_class, monkeypatch)
    cv_class(alphas=[1e-1, 1e-2], rank_weights=[0.0, 0.5, 1.0], cv=2, refit=False, path="rank_weight",
             **params).fit(X, y)
    for fold in range(2):
        fits = {(r, a): (start, end) for r, a, start, end in starts[6 * fold: 6 * fold + 6]}
        assert fits[0.0, 1e-1][0] is None  # the first cell starts cold
        assert_array_equal(fits[0.0, 1e-2][0], fits[0.0, 1e-1][1])  # the first rank weight: along alpha
        for alpha in (1e-1, 1e-2):  # the others from the previous rank weight of their alpha
            assert_array_equal(fits[0.5, alpha][0], fits[0.0, alpha][1])
            assert_array_equal(fits[1.0, alpha][0], fits[0.5, alpha][1])


def _search_by_public_fits(base, X, y, folds, alphas, rank_weights, metric):
    """The search done with the base estimator's own ``fit`` and ``decision_function``.

    For each fold and rank weight a warm-started estimator is fitted along
    ``alphas`` and scored on the held-out part: the held-out scores,
    shape ``(n_folds, n_rank_weights, n_alphas)``, and the ranking
    coefficients of every cell.
    """
    scores = np.empty((len(folds), len(rank_weights), len(alphas)))
    coefs = np.empty((len(folds), len(rank_weights), len(alphas), X.shape[1]))
    for f, (train, test) in enumerate(folds):
        for i, rank_weight in enumerate(rank_weights):
            estimator = base.set_params(rank_weight=rank_weight, warm_start=True)
            estimator.__dict__.pop("ranking_coef_", None)  # each path starts cold
            for k, alpha in enumerate(alphas):
                estimator.set_params(alpha=alpha).fit(X[train], y[train])
                scores[f, i, k] = metric(y[test], estimator.decision_function(X[test]))
                coefs[f, i, k] = estimator.ranking_coef_.ravel()
    return scores, coefs


@pytest.mark.parametrize("name", list(CASES))
def test_search_equals_the_public_fits_it_replaces(name, data):
    # the search checks each fold once, shares the logistic starts and scores without checks: every cell
    # is the base estimator's warm-started fit, bit for bit, and scores the same float, on features of
    # few values too (tied scores, where the decision function's rounding decides which scores tie)
    X, y = data
    X = np.clip(np.round(X), -1.0, 1.0)  # three values: many repeated rows
    cv_class, base_class, _, _ = CASES[name]
    folds = _folds(X, y)
    params = {"fpr_range": (0.0, 0.3)} if name == "pauc" else {}  # the default smooth step, margin_ kept
    rank_weights = (0.0, 0.05, 0.2)
    search = cv_class(alphas=4, rank_weights=rank_weights, cv=folds, **params).fit(X, y)
    metric = (METRICS["ap"] if name == "ap" else
              (lambda target, scores: partial_auc_score(target, scores, fpr_range=(0.0, 0.3))))
    with _quiet():
        scores, coefs = _search_by_public_fits(base_class(**params), X, y, folds, search.alphas_,
                                               rank_weights, metric)
    assert_array_equal(search.coefs_paths_, coefs)
    assert_array_equal(search.scores_, scores)
    best = np.unravel_index(np.argmax(scores.mean(axis=0).T), (len(search.alphas_), len(rank_weights)))
    assert (search.alpha_, search.rank_weight_) == (search.alphas_[best[0]], rank_weights[best[1]])


@pytest.mark.parametrize("name", list(CASES))
def test_the_logistic_start_is_fitted_once_per_fold_and_alpha(name, data, monkeypatch):
    # every rank weight r > 0 starts from (and must rank as well as) the logistic regression of its
    # alpha: one fit of it per fold and alpha serves them all, and the refit fits its own
    import skrank.estimators._anchored as anchored

    X, y = data
    cv_class, _, _, _ = CASES[name]
    params = {"fpr_range": (0.0, 0.3)} if name == "pauc" else {}
    calls = []
    solve = anchored.solve

    def counting(info, datafit, penalty, **options):
        calls.append(datafit.rank_weight)
        return solve(info, datafit, penalty, **options)

    monkeypatch.setattr(anchored, "solve", counting)
    cv_class(alphas=3, rank_weights=(0.0, 0.05, 0.2), cv=_folds(X, y, 2), **params).fit(X, y)
    assert calls == [0.0] * (2 * 3 + 1)


def test_average_precision_of_the_search_is_scikit_learns():
    # the search's unchecked average precision: the same float as average_precision_score, ties included
    from skrank.estimators.cv import _average_precision_unchecked

    rng = np.random.default_rng(0)
    for n, levels in [(7, 3), (50, 5), (200, 1000), (1000, 10**9)]:
        target = rng.random(n) < 0.3
        target[:2] = [True, False]
        scores = rng.integers(0, levels, n).astype(np.float64) / 7.0
        assert _average_precision_unchecked(target, scores) == average_precision_score(target, scores)


# --------------------------------------------------------------------------------------
# 2. the selection is GridSearchCV's
# --------------------------------------------------------------------------------------


def test_selection_equals_grid_search(fitted, data):
    X, y = data
    search, base_class, params, scorer, folds = fitted
    grid = GridSearchCV(base_class(tol=TOL, **params),
                        {"alpha": list(search.alphas_), "rank_weight": list(search.rank_weights_)},
                        cv=folds, scoring=scorer).fit(X, y)
    assert grid.best_params_ == {"alpha": search.alpha_, "rank_weight": search.rank_weight_}
    # GridSearchCV's candidates: alpha (decreasing) outer, rank_weight (increasing) inner
    grid_mean = grid.cv_results_["mean_test_score"].reshape(len(ALPHAS), len(RANK_WEIGHTS)).T
    assert_allclose(search.scores_.mean(axis=0), grid_mean, rtol=0, atol=1e-6)
    assert search.best_score_ == pytest.approx(grid.best_score_, abs=1e-6)
    assert_allclose(search.coef_, grid.best_estimator_.coef_, rtol=1e-4, atol=1e-6)
    assert_allclose(search.decision_function(X), grid.best_estimator_.decision_function(X),
                    rtol=1e-4, atol=1e-6)


def test_ties_prefer_the_largest_alpha_then_the_smallest_rank_weight(data):
    X, y = data

    def constant(estimator, X, y):
        return 0.5

    search = PartialAUCClassifierCV(alphas=[1e-3, 1e-1, 1e-2], rank_weights=[1.0, 0.3], cv=2,
                                    scoring=constant, fpr_range=FPR_RANGE).fit(X, y)
    assert_array_equal(search.alphas_, [1e-1, 1e-2, 1e-3])
    assert_array_equal(search.rank_weights_, [0.3, 1.0])
    assert (search.alpha_, search.rank_weight_) == (1e-1, 0.3)
    assert search.best_estimator_.get_params()["alpha"] == 1e-1
    assert search.best_estimator_.get_params()["rank_weight"] == 0.3


def test_best_cell_and_refit(fitted, data):
    X, y = data
    search, base_class, params, _, _ = fitted
    mean = search.scores_.mean(axis=0)
    i, k = np.unravel_index(np.argmax(mean), mean.shape)
    assert mean[i, k] == search.best_score_
    assert isinstance(search.best_estimator_, base_class)
    refit = base_class(alpha=search.alpha_, rank_weight=search.rank_weight_, tol=TOL, **params).fit(X, y)
    assert_allclose(search.coef_, refit.coef_)
    assert_allclose(search.intercept_, refit.intercept_)
    assert_array_equal(search.classes_, [0, 1])
    assert search.n_features_in_ == X.shape[1]
    assert_array_equal(search.predict(X), refit.predict(X))
    assert_allclose(search.predict_proba(X), refit.predict_proba(X))
    assert_allclose(search.predict_log_proba(X), refit.predict_log_proba(X))
    assert search.score(X, y) == refit.score(X, y)


# --------------------------------------------------------------------------------------
# 3. scikit-learn's estimator checks
# --------------------------------------------------------------------------------------


# at the defaults, without exclusions: tests/test_conventions.py::test_sklearn_checks_pass_at_the_defaults


# --------------------------------------------------------------------------------------
# 4. rank_weight = 0 is the logistic regression
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", list(CASES))
def test_rank_weight_zero_ranks_as_logistic_regression(name, data):
    X, y = data
    cv_class, _, params, _ = CASES[name]
    search = cv_class(alphas=[1e-1, 1e-2, 1e-3], rank_weights=(0.0,), cv=3, tol=TOL, **params).fit(X, y)
    assert search.rank_weight_ == 0.0
    lr = LogisticRegression(C=1.0 / (search.alpha_ * X.shape[0]), tol=1e-10, max_iter=10_000).fit(X, y)
    assert_allclose(search.ranking_coef_, lr.coef_, rtol=1e-3, atol=1e-5)
    ours, theirs = search.decision_function(X), lr.decision_function(X)
    assert roc_auc_score(y, ours) == pytest.approx(roc_auc_score(y, theirs), abs=1e-12)
    assert np.corrcoef(ours, theirs)[0, 1] > 1 - 1e-8


# --------------------------------------------------------------------------------------
# 5. grids, errors, weights, options
# --------------------------------------------------------------------------------------


def test_default_grid(data):
    X, y = data
    search = AveragePrecisionClassifierCV(cv=2, refit=False).fit(X, y)
    # the penalties of LogisticRegression(C) for C = 1e-4 .. 1e2 by decades, C = 1 (alpha = 1/n) among them
    assert_allclose(search.alphas_, 1.0 / (10.0 ** np.arange(-4, 3) * X.shape[0]))
    assert_array_equal(search.rank_weights_, [0.0, 0.2, 0.5])
    assert search.scores_.shape == (2, 3, 7)
    assert_allclose(AveragePrecisionClassifierCV(alphas=1, rank_weights=[1.0], cv=2).fit(X, y).alphas_,
                    [1.0 / X.shape[0]])


@pytest.mark.parametrize("cv_class", [PartialAUCClassifierCV, AveragePrecisionClassifierCV])
@pytest.mark.parametrize("params, match", [
    ({"rank_weights": [0.0, 1.5]}, r"rank_weights must lie in \[0, 1\]"),
    ({"rank_weights": [-0.1]}, r"rank_weights must lie in \[0, 1\]"),
    ({"rank_weights": [0.0, np.nan]}, r"rank_weights must lie in \[0, 1\]"),
    ({"rank_weights": []}, "rank_weights is empty"),
    ({"rank_weights": [[0.0, 1.0]]}, "1-d array-like"),
    ({"alphas": []}, "alphas is empty"),
    ({"alphas": [0.1, -1e-3]}, "finite and nonnegative"),
    ({"alphas": [0.1, np.inf]}, "finite and nonnegative"),
    ({"alphas": ["a", "b"]}, "1-d array-like"),
])
def test_bad_grids_raise(cv_class, params, match, data):
    X, y = data
    with pytest.raises(ValueError, match=match):
        cv_class(cv=2, **params).fit(X, y)


@pytest.mark.parametrize("params", [{"alphas": 0}, {"alphas": 1.5}, {"scoring": "no_such_scorer"},
                                    {"cv": "five"}, {"n_jobs": 1.5}, {"refit": "yes"}, {"tol": -1.0}])
def test_bad_parameters_raise(params, data):
    X, y = data
    with pytest.raises(InvalidParameterError):
        PartialAUCClassifierCV(**params).fit(X, y)


@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.parametrize("target", ["multiclass", "multilabel"])
def test_several_problems_share_one_selection_by_their_mean_score(name, target, data):
    # one-vs-rest classes, or one problem per label, as the base estimator fits them; each cell's score
    # is the mean over the problems of the metric of their decision-function columns
    X, y = data
    rng = np.random.default_rng(5)
    if target == "multiclass":
        y = np.where(X[:, 1] + 0.3 * rng.normal(size=y.shape[0]) > 0.8, 2, y)
    else:
        y = np.column_stack([y, (X[:, 2] + 0.3 * rng.normal(size=y.shape[0]) > 0.5).astype(int)])
    cv_class, base_class, params, scorer = CASES[name]
    folds = list(StratifiedKFold(3, shuffle=True, random_state=0).split(X, y if y.ndim == 1 else y[:, 0]))
    search = cv_class(alphas=[1e-1, 1e-2], rank_weights=[0.0, 0.5], cv=folds, tol=TOL, **params).fit(X, y)
    n_problems = 3 if target == "multiclass" else 2
    assert search.coefs_paths_.shape == (3, 2, 2, n_problems, X.shape[1])
    assert search.n_iter_.shape == (3, 2, 2, n_problems) and np.all(search.n_iter_ >= 1)
    train, test = folds[2]
    fresh = base_class(alpha=1e-2, rank_weight=0.5, tol=TOL, **params).fit(X[train], y[train])
    assert_allclose(search.coefs_paths_[2, 1, 1], fresh.ranking_coef_, rtol=1e-3, atol=1e-6)
    columns = fresh.decision_function(X[test])
    targets = ([y[test] == c for c in np.unique(y)] if target == "multiclass"
               else [y[test][:, j] == 1 for j in range(2)])
    mean = np.mean([METRICS[name](t, columns[:, j]) for j, t in enumerate(targets)])
    assert search.scores_[2, 1, 1] == pytest.approx(mean, abs=1e-6)
    refit = base_class(alpha=search.alpha_, rank_weight=search.rank_weight_, tol=TOL, **params).fit(X, y)
    assert_allclose(search.coef_, refit.coef_)
    assert_array_equal(search.predict(X), refit.predict(X))
    assert search.predict_proba(X).shape == (X.shape[0], n_problems)


def test_a_training_fold_without_a_class_is_refused(data):
    X, y = data
    y = y.copy()
    y[:3] = 2  # a third class with three samples, all in the first fold's held-out part
    n = X.shape[0]
    folds = [(np.arange(3, n), np.arange(3)), (np.arange(n - 3), np.arange(n - 3, n))]
    with pytest.raises(ValueError, match="holds no sample of class 2.*fewer folds"):
        PartialAUCClassifierCV(alphas=1, rank_weights=[0.0], cv=folds).fit(X, y)


def test_held_out_folds_of_one_class_are_left_out_of_the_mean(data):
    # a ranking metric is undefined on a held-out part of a single class: that fold is NaN and the
    # mean is over the others (with a warning), as scikit-learn's check_fit2d_1feature needs at cv=5
    X, y = data
    positives, negatives = np.flatnonzero(y == 1), np.flatnonzero(y == 0)
    only_negatives = negatives[:10]
    folds = [(np.setdiff1d(np.arange(y.shape[0]), only_negatives), only_negatives)] + _folds(X, y, 2)
    with pytest.warns(UserWarning, match="1 of the 3 held-out folds hold a single class"):
        search = AveragePrecisionClassifierCV(alphas=2, rank_weights=[0.0], cv=folds).fit(X, y)
    assert np.all(np.isnan(search.scores_[0])) and np.all(np.isfinite(search.scores_[1:]))
    assert search.best_score_ == pytest.approx(np.max(search.scores_[1:].mean(axis=0)))
    assert positives.size > 0


def test_one_class_of_positive_weight_raises(data):
    X, y = data
    with pytest.raises(ValueError, match="two classes in y among the samples of positive weight"):
        AveragePrecisionClassifierCV(cv=2).fit(X, y, sample_weight=(y == 1).astype(float))


def test_a_solver_of_the_rank_term_alone_needs_rank_weight_one(data):
    X, y = data
    with pytest.raises(ValueError, match="rank_weight"):
        PartialAUCClassifierCV(solver="agd-sbcd", link="identity", rank_weights=[0.0, 1.0], cv=2).fit(X, y)
    with pytest.raises(ValueError, match="link='identity'"):
        PartialAUCClassifierCV(solver="agd-sbcd", link="sigmoid", rank_weights=[1.0], cv=2).fit(X, y)
    # with rank_weight=1 the defaults fit it: link='identity', and loss=None is the paper's squared hinge
    with _quiet():
        search = PartialAUCClassifierCV(solver="agd-sbcd", rank_weights=[1.0], alphas=2,
                                        cv=2, max_iter=3, random_state=0).fit(X, y)
    assert search.rank_weight_ == 1.0


@pytest.mark.parametrize("name", list(CASES))
def test_sample_weight_goes_to_the_fits_and_the_scorer(name, data):
    X, y = data
    cv_class, base_class, params, scorer = CASES[name]
    sw = np.random.default_rng(0).uniform(0.2, 3.0, size=y.shape[0])
    folds = _folds(X, y, 2)
    search = cv_class(alphas=[1e-2], rank_weights=[0.3], cv=folds, tol=TOL, **params)
    search.fit(X, y, sample_weight=sw)
    train, test = folds[0]
    fresh = base_class(alpha=1e-2, rank_weight=0.3, tol=TOL, **params).fit(X[train], y[train],
                                                                            sample_weight=sw[train])
    assert_allclose(search.coefs_paths_[0, 0, 0], fresh.ranking_coef_.ravel(), rtol=1e-3, atol=1e-6)
    expected = scorer(fresh, X[test], y[test], sample_weight=sw[test])
    assert search.scores_[0, 0, 0] == pytest.approx(expected, abs=1e-6)
    assert expected != pytest.approx(scorer(fresh, X[test], y[test]), abs=1e-6)  # the weights matter
    weighted = base_class(alpha=1e-2, rank_weight=0.3, tol=TOL, **params).fit(X, y, sample_weight=sw)
    assert_allclose(search.coef_, weighted.coef_, rtol=1e-6)


def test_refit_false_searches_only(data):
    X, y = data
    search = PartialAUCClassifierCV(alphas=2, rank_weights=[0.0, 1.0], cv=2, refit=False).fit(X, y)
    assert search.alpha_ in search.alphas_ and search.rank_weight_ in search.rank_weights_
    assert not hasattr(search, "best_estimator_") and not hasattr(search, "coef_")
    assert not hasattr(search, "predict") and not hasattr(search, "decision_function")


@pytest.mark.slow
def test_parallel_folds_give_the_same_search(data):
    X, y = data
    kwargs = dict(alphas=[1e-1, 1e-3], rank_weights=[0.0, 1.0], cv=3, tol=1e-6, fpr_range=FPR_RANGE)
    serial = PartialAUCClassifierCV(**kwargs).fit(X, y)
    parallel = PartialAUCClassifierCV(n_jobs=2, **kwargs).fit(X, y)
    assert_array_equal(serial.scores_, parallel.scores_)
    assert_array_equal(serial.coefs_paths_, parallel.coefs_paths_)
    assert (serial.alpha_, serial.rank_weight_) == (parallel.alpha_, parallel.rank_weight_)


def test_scoring_by_name_and_feature_names(data):
    pd = pytest.importorskip("pandas")
    X, y = data
    frame = pd.DataFrame(X, columns=[f"f{j}" for j in range(X.shape[1])])
    search = PartialAUCClassifierCV(alphas=2, rank_weights=[0.0, 1.0], cv=2, scoring="roc_auc").fit(frame, y)
    assert_array_equal(search.feature_names_in_, frame.columns)
    assert_array_equal(search.best_estimator_.feature_names_in_, frame.columns)
    assert np.all((search.scores_ > 0.5) & (search.scores_ <= 1.0))
    assert search.predict(frame).shape == y.shape


def test_docstring_examples_run():
    import doctest

    import skrank.estimators.cv as module

    result = doctest.testmod(module)
    assert result.attempted > 0 and result.failed == 0
