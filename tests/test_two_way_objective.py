"""The two-way partial-AUC objective against a double loop over the pairs, and its gradient."""

import numpy as np
import pytest
from scipy.optimize import approx_fprime

from skrank.datafits.partial_auc import PartialAUCObjective
from skrank.pairwise_losses import PARTIAL_AUC_LOSSES, get_pairwise_loss


def _cells(weights_in_rank_order, lo, hi):
    """Each sample's share of ``[lo, hi]`` of the cumulative weight, in rank order."""
    total = sum(weights_in_rank_order)
    out, start = [], 0.0
    for v in weights_in_rank_order:
        end = start + v
        out.append(max(0.0, min(end, hi * total) - max(start, lo * total)))
        start = end
    return out


def _double_loop(X, y, w, fpr_range, tpr_min, loss, alpha, weights):
    """``F(w)`` written out: the bottom positives against the top negatives, pair by pair."""
    h = X @ w
    pos = [i for i in range(len(y)) if y[i] > 0]
    neg = [j for j in range(len(y)) if y[j] < 0]
    pos.sort(key=lambda i: h[i])            # lowest scores first
    neg.sort(key=lambda j: -h[j])           # highest scores first
    u = _cells([weights[i] for i in pos], 0.0, 1.0 - tpr_min)
    v = _cells([weights[j] for j in neg], *fpr_range)
    total = 0.0
    for a, i in enumerate(pos):
        for b, j in enumerate(neg):
            total += u[a] * v[b] * float(loss.value(np.array([h[i] - h[j]]))[0])
    return total / (sum(u) * sum(v)) + 0.5 * alpha * float(w @ w)


def _case(seed, weighted):
    rng = np.random.default_rng(seed)
    n, d = 70, 4
    X = rng.normal(size=(n, d))
    y = np.where(rng.random(n) < 0.35, 1.0, -1.0)
    y[:2] = [1.0, -1.0]
    weights = rng.uniform(0.2, 3.0, size=n) if weighted else np.ones(n)
    return X, y, rng.normal(size=d), weights


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("loss_name", PARTIAL_AUC_LOSSES)
@pytest.mark.parametrize("fpr_range, tpr_min", [((0.0, 0.3), 0.5), ((0.0, 0.5), 0.7), ((0.1, 0.6), 0.33),
                                                ((0.0, 1.0), 0.9), ((0.05, 0.5), 0.0)])
def test_value_equals_the_double_loop(seed, weighted, loss_name, fpr_range, tpr_min):
    X, y, w, weights = _case(seed, weighted)
    loss = get_pairwise_loss(loss_name, 0.5)
    objective = PartialAUCObjective(X, y, fpr_range, loss, 0.01, sample_weight=weights if weighted else None,
                                    tpr_min=tpr_min)
    expected = _double_loop(X, y, w, fpr_range, tpr_min, loss, 0.01, weights)
    assert objective.value(w) == pytest.approx(expected, rel=1e-10, abs=1e-12)


@pytest.mark.parametrize("weighted", [False, True])
def test_gradient_matches_finite_differences_away_from_ties(weighted):
    X, y, w, weights = _case(11, weighted)
    objective = PartialAUCObjective(X, y, (0.0, 0.4), get_pairwise_loss("squared_hinge", 1.0), 0.01,
                                    sample_weight=weights if weighted else None, tpr_min=0.6)
    value, grad = objective.value_and_grad(w)
    numeric = approx_fprime(w, objective.value, 1e-7)
    np.testing.assert_allclose(grad, numeric, rtol=1e-4, atol=1e-6)


def test_tpr_min_zero_is_the_one_way_objective():
    X, y, w, weights = _case(5, True)
    loss = get_pairwise_loss("logistic", 1.0)
    one_way = PartialAUCObjective(X, y, (0.05, 0.5), loss, 0.1, sample_weight=weights)
    two_way = PartialAUCObjective(X, y, (0.05, 0.5), loss, 0.1, sample_weight=weights, tpr_min=0.0)
    assert two_way.value(w) == one_way.value(w)


def test_the_estimator_reports_the_exact_two_way_objective():
    # rank_weight=1 with lbfgs fits the surrogate alone; objective_ is its exact value at ranking_coef_
    X, y, _, _ = _case(2, False)
    from skrank import PartialAUCClassifier

    clf = PartialAUCClassifier(fpr_range=(0.0, 0.4), tpr_min=0.6, loss="squared_hinge", margin=1.0,
                               rank_weight=1.0, alpha=0.05, solver="lbfgs").fit(X, y)
    expected = _double_loop(X, np.where(y > 0, 1.0, -1.0), clf.ranking_coef_.ravel(), (0.0, 0.4), 0.6,
                            get_pairwise_loss("squared_hinge", 1.0), 0.05, np.ones(len(y)))
    assert clf.objective_ == pytest.approx(expected, rel=1e-10)


@pytest.mark.parametrize("tpr_min", [1.0, -0.1, np.nan])
def test_an_invalid_floor_is_refused(tpr_min):
    from skrank import PartialAUCClassifier

    X, y, _, _ = _case(3, False)
    with pytest.raises(ValueError, match="tpr_min"):
        PartialAUCClassifier(tpr_min=tpr_min).fit(X, y)


@pytest.mark.parametrize("solver", ["agd-sbcd", "dca", "prox-dca", "ppd-sg", "exact"])
def test_solvers_without_two_way_ranges_refuse_them_by_name(solver):
    from skrank import PartialAUCClassifier

    X, y, _, _ = _case(4, False)
    with pytest.raises(ValueError, match=f"solver='{solver}' needs tpr_min=0"):
        PartialAUCClassifier(tpr_min=0.5, fpr_range=(0.0, 1.0), solver=solver, rank_weight=1.0).fit(X, y)


def test_a_two_way_range_starts_at_fpr_zero():
    from skrank import PartialAUCClassifier

    X, y, _, _ = _case(6, False)
    with pytest.raises(ValueError, match=r"tpr_min=0.5 asks for the two-way region .*fpr_range=\(0.05, 0.5\)"
                                         r"\. Pass fpr_max=0.5 or fpr_range=\(0, 0.5\)"):
        PartialAUCClassifier(tpr_min=0.5, fpr_range=(0.05, 0.5)).fit(X, y)
    # without a range, a two-way region keeps the default ceiling 0.5 and starts at 0
    default = PartialAUCClassifier(tpr_min=0.5).fit(X, y)
    explicit = PartialAUCClassifier(tpr_min=0.5, fpr_range=(0.0, 0.5)).fit(X, y)
    np.testing.assert_array_equal(default.coef_, explicit.coef_)


def test_the_estimator_takes_the_metrics_names_for_the_range():
    from sklearn.base import clone

    from skrank import PartialAUCClassifier
    from skrank.metrics import two_way_partial_auc_score

    X, y, _, _ = _case(8, False)
    by_range = PartialAUCClassifier(tpr_min=0.5, fpr_range=(0.0, 0.3)).fit(X, y)
    for region in (dict(fpr_max=0.3), dict(fpr_max=0.3, fpr_range=(0.0, 0.3))):
        other = PartialAUCClassifier(tpr_min=0.5, **region)
        assert clone(other).get_params()["fpr_max"] == 0.3  # stored as given, validated in fit
        np.testing.assert_array_equal(other.fit(X, y).coef_, by_range.coef_)
    one_way = PartialAUCClassifier(fpr_max=0.3).fit(X, y)
    np.testing.assert_array_equal(one_way.coef_, PartialAUCClassifier(fpr_range=(0.0, 0.3)).fit(X, y).coef_)
    # the metric and the estimator read the same words
    s = by_range.decision_function(X)
    assert two_way_partial_auc_score(y, s, tpr_min=0.5, fpr_range=(0.0, 0.3)) == two_way_partial_auc_score(
        y, s, tpr_min=0.5, fpr_max=0.3)
    moved = PartialAUCClassifier(tpr_min=0.5, fpr_range=(0.0, 0.3)).set_params(fpr_range=None, fpr_max=0.3)
    np.testing.assert_array_equal(moved.fit(X, y).coef_, by_range.coef_)


@pytest.mark.parametrize("region, message", [
    (dict(fpr_range=(0.0, 0.3), fpr_max=0.4), r"fpr_range=\(0.0, 0.3\) and fpr_max=0.4 disagree"),
    (dict(fpr_range=(0.1, 0.3), fpr_max=0.3, tpr_min=0.5), r"tpr_min=0.5 .* start at 0; got fpr_range"),
    (dict(fpr_max=1.5), "fpr_max"),
])
def test_the_estimator_refuses_a_mix_of_the_names_that_disagree(region, message):
    from skrank import PartialAUCClassifier
    from skrank.estimators import PartialAUCClassifierCV

    X, y, _, _ = _case(9, False)
    with pytest.raises(ValueError, match=message):
        PartialAUCClassifier(**region).fit(X, y)
    with pytest.raises(ValueError, match=message):
        PartialAUCClassifierCV(alphas=2, rank_weights=(0.05,), cv=2, **region).fit(X, y)


def test_the_cv_variant_scores_the_two_way_range():
    from skrank.estimators import PartialAUCClassifierCV
    from skrank.metrics import two_way_partial_auc_score

    X, y, _, _ = _case(7, False)
    for region in (dict(fpr_range=(0.0, 0.5)), dict(fpr_max=0.5)):
        search = PartialAUCClassifierCV(tpr_min=0.5, alphas=(1e-2, 1e-1), rank_weights=(0.05,), cv=3,
                                        **region).fit(X, y)
        assert search.best_estimator_.tpr_min == 0.5
        scorer = search._default_scorer(search.classes_)
        labels = np.where(y > 0, 1, -1)
        assert scorer(search.best_estimator_, X, labels) == pytest.approx(two_way_partial_auc_score(
            labels, search.best_estimator_.decision_function(X), tpr_min=0.5, fpr_max=0.5))


def test_two_way_fits_on_dask_and_with_weights_as_repeated_rows():
    da = pytest.importorskip("dask.array")
    from skrank import PartialAUCClassifier

    X, y, _, _ = _case(8, False)
    params = dict(fpr_range=(0.0, 0.4), tpr_min=0.5, loss="squared_hinge", margin=1.0, rank_weight=1.0,
                  alpha=0.05, solver="lbfgs", tol=1e-10)
    numpy_fit = PartialAUCClassifier(**params).fit(X, y)
    dask_fit = PartialAUCClassifier(**params).fit(da.from_array(X, chunks=(20, X.shape[1])), y)
    np.testing.assert_allclose(dask_fit.ranking_coef_, numpy_fit.ranking_coef_, atol=1e-12)
    counts = np.random.default_rng(0).integers(1, 4, size=len(y))
    weighted = PartialAUCClassifier(**params).fit(X, y, sample_weight=counts)
    repeated = PartialAUCClassifier(**params).fit(np.repeat(X, counts, 0), np.repeat(y, counts))
    assert weighted.objective_ == pytest.approx(repeated.objective_, rel=1e-8)
    np.testing.assert_allclose(weighted.ranking_coef_, repeated.ranking_coef_, atol=1e-5)
