"""Sample and class weights of AveragePrecisionClassifier: the weighted surrogate P_w.

P_w(h) = -(1/W+) sum_{i pos} w_i A_i / B_i with A_i, B_i summing w_s l(h_i - h_s)
(skrank.datafits.average_precision), checked against repeated and dropped rows,
a brute-force double loop and finite differences.
"""

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.datasets import make_classification
from sklearn.metrics import average_precision_score
from sklearn.preprocessing import StandardScaler
from sklearn.utils.class_weight import compute_sample_weight

from skrank import AveragePrecisionClassifier
from skrank.datafits.average_precision import (
    AveragePrecisionObjective,
    ap_surrogate_and_score_gradients,
)
from skrank.estimators import average_precision as ap_module
from skrank.estimators._platt import fit_platt
from skrank.pairwise_losses import AVERAGE_PRECISION_LOSSES, get_pairwise_loss
from skrank.solvers.stochastic.soap import soap

#: the objective of Qi et al. 2021 alone (no logistic term), with the former penalty
PAPER = dict(rank_weight=1.0, alpha=1e-4)


def _pair_loss(name, margin, z):
    if name == "squared_hinge":
        return max(0.0, margin - z) ** 2
    if name == "logistic":
        return np.log1p(np.exp(-z))
    if name == "sigmoid":
        return 1.0 / (1.0 + np.exp(z))
    return float(z <= 0)  # "indicator": the precision itself


def _brute(h, y, w, name, margin=0.5):
    """``P_w`` by a double loop over (anchor positive, sample)."""
    total = 0.0
    for i in np.flatnonzero(y > 0):
        A = B = 0.0
        for s in range(len(h)):
            v = w[s] * _pair_loss(name, margin, h[i] - h[s])
            B += v
            A += v if y[s] > 0 else 0.0
        total -= w[i] * A / B
    return total / w[y > 0].sum()


def _case(seed, n=30):
    rng = np.random.default_rng(seed)
    h = rng.normal(size=n)
    if seed % 2:
        h = np.round(h, 1)  # ties
    y = np.where(rng.random(n) < 0.35, 1.0, -1.0)
    y[:2] = 1.0, -1.0
    counts = rng.integers(0, 4, size=n)
    counts[:2] = 2, 1
    return h, y, counts


@pytest.mark.parametrize("name", AVERAGE_PRECISION_LOSSES)
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_integer_weights_are_repeated_rows(name, seed):
    h, y, counts = _case(seed)
    loss = get_pairwise_loss(name, 0.5)
    value, grad = ap_surrogate_and_score_gradients(h, y, loss, counts.astype(float))
    rep_value, rep_grad = ap_surrogate_and_score_gradients(np.repeat(h, counts), np.repeat(y, counts), loss)
    assert value == pytest.approx(rep_value, rel=1e-12, abs=1e-15)
    # the copies of a row move together: its gradient is the sum of theirs
    owner = np.repeat(np.arange(h.size), counts)
    np.testing.assert_allclose(grad, np.bincount(owner, rep_grad, minlength=h.size), rtol=1e-10, atol=1e-13)


@pytest.mark.parametrize("name", AVERAGE_PRECISION_LOSSES)
def test_zero_weights_are_dropped_rows(name):
    h, y, counts = _case(3)
    weights = np.where(counts > 0, 1.0 + counts / 3, 0.0)
    kept = weights > 0
    loss = get_pairwise_loss(name, 0.5)
    value, grad = ap_surrogate_and_score_gradients(h, y, loss, weights)
    kept_value, kept_grad = ap_surrogate_and_score_gradients(h[kept], y[kept], loss, weights[kept])
    assert value == pytest.approx(kept_value, rel=1e-12)
    np.testing.assert_allclose(grad[kept], kept_grad, rtol=1e-10, atol=1e-14)
    assert np.all(grad[~kept] == 0.0)


def test_a_weightless_anchor_with_no_weighted_sample_near_it_counts_for_nothing():
    # the top positive has weight zero and no weighted sample within the margin: B = 0
    h = np.array([0.0, 0.1, 5.0])
    y = np.array([1.0, -1.0, 1.0])
    weights = np.array([1.0, 1.0, 0.0])
    for name in AVERAGE_PRECISION_LOSSES:
        loss = get_pairwise_loss(name, 0.5)
        value, grad = ap_surrogate_and_score_gradients(h, y, loss, weights)
        kept_value, kept_grad = ap_surrogate_and_score_gradients(h[:2], y[:2], loss)
        assert value == pytest.approx(kept_value, rel=1e-12)
        np.testing.assert_allclose(grad, np.append(kept_grad, 0.0), atol=1e-15)


@pytest.mark.parametrize("name", AVERAGE_PRECISION_LOSSES)
def test_unit_weights_change_nothing(name):
    h, y, _ = _case(4, n=200)
    loss = get_pairwise_loss(name, 0.5)
    value, grad = ap_surrogate_and_score_gradients(h, y, loss)
    unit_value, unit_grad = ap_surrogate_and_score_gradients(h, y, loss, np.ones(h.size))
    assert unit_value == value
    assert np.array_equal(unit_grad, grad)


@pytest.mark.parametrize("name", AVERAGE_PRECISION_LOSSES)
def test_weighted_value_and_gradient_equal_brute_force(name):
    rng = np.random.default_rng(5)
    for case in range(20):
        n = int(rng.integers(2, 25))
        h = rng.normal(size=n) * rng.uniform(0.1, 2.0)
        if case % 3 == 1:
            h = np.round(h, 1)
        y = np.where(rng.random(n) < 0.4, 1.0, -1.0)
        y[0] = 1.0
        w = rng.uniform(0.1, 3.0, size=n)
        margin = float(rng.uniform(0.3, 2.0))
        value, grad = ap_surrogate_and_score_gradients(h, y, get_pairwise_loss(name, margin), w)
        assert value == pytest.approx(_brute(h, y, w, name, margin), rel=1e-10, abs=1e-12)
        eps = 1e-6
        fd = [(_brute(h + eps * e, y, w, name, margin) - _brute(h - eps * e, y, w, name, margin)) / (2 * eps)
              for e in np.eye(n)]
        np.testing.assert_allclose(grad, fd, rtol=1e-5, atol=1e-6)


def test_with_the_indicator_the_weighted_definition_is_sklearns_weighted_average_precision():
    rng = np.random.default_rng(6)
    for h in (rng.normal(size=40), np.round(rng.normal(size=40), 1)):  # ties too
        y = np.where(rng.random(40) < 0.3, 1.0, -1.0)
        w = rng.uniform(0.1, 3.0, size=40)
        assert -_brute(h, y, w, "indicator") == pytest.approx(
            average_precision_score(y > 0, h, sample_weight=w), rel=1e-12)


def _data(n=150, d=4, seed=0):
    X, y01 = make_classification(n, d, n_informative=3, n_redundant=0, weights=[0.8], flip_y=0.05,
                                 random_state=seed)
    X = StandardScaler().fit_transform(X)
    counts = np.random.default_rng(seed).integers(0, 4, size=n)
    counts[:3] = 1
    return X, y01, np.where(y01 == 1, 1.0, -1.0), counts


@pytest.mark.parametrize("name", AVERAGE_PRECISION_LOSSES)
def test_objective_gradient_with_weights_equals_finite_differences(name):
    X, _, y, _ = _data(80)
    w = np.random.default_rng(7).uniform(0.0, 3.0, size=y.size)
    obj = AveragePrecisionObjective(X, y, get_pairwise_loss(name, 0.5), 1e-3, sample_weight=w)
    theta = np.random.default_rng(8).normal(size=X.shape[1] + 1) * 0.5
    value, grad = obj.value_and_grad(theta)
    assert value == pytest.approx(obj.value(theta), rel=1e-12)
    eps = 1e-6
    fd = [(obj.value(theta + eps * e) - obj.value(theta - eps * e)) / (2 * eps) for e in np.eye(theta.size)]
    np.testing.assert_allclose(grad, fd, rtol=1e-5, atol=1e-9)


@pytest.mark.parametrize("sparse", [False, True])
def test_weighted_start_is_the_start_of_repeated_rows(sparse):
    X, _, y, counts = _data()
    Xw, Xr = X, np.repeat(X, counts, 0)
    if sparse:
        Xw, Xr = sp.csr_matrix(Xw), sp.csr_matrix(Xr)
    loss = get_pairwise_loss("squared_hinge", 0.5)
    weighted = AveragePrecisionObjective(Xw, y, loss, 1e-3, sample_weight=counts.astype(float)).start()
    repeated = AveragePrecisionObjective(Xr, np.repeat(y, counts), loss, 1e-3).start()
    np.testing.assert_allclose(weighted, repeated, rtol=1e-10, atol=1e-12)


def test_weighted_platt_fit_is_that_of_repeated_rows():
    rng = np.random.default_rng(9)
    s = rng.normal(size=60)
    y = np.where(s + rng.normal(size=60) > 0.5, 1.0, -1.0)
    counts = rng.integers(1, 4, size=60)
    weighted = fit_platt(s, y, sample_weight=counts.astype(float))
    repeated = fit_platt(np.repeat(s, counts), np.repeat(y, counts))
    np.testing.assert_allclose(weighted, repeated, rtol=1e-9)
    assert fit_platt(s, y, sample_weight=np.ones(60)) == pytest.approx(fit_platt(s, y), rel=1e-12)


@pytest.mark.parametrize("name", AVERAGE_PRECISION_LOSSES)
def test_estimator_integer_weights_are_repeated_rows_and_zero_weights_dropped_rows(name):
    X, y01, _, counts = _data()
    est = dict(loss=name, solver="lbfgs", tol=1e-8)
    repeated = AveragePrecisionClassifier(**est).fit(np.repeat(X, counts, 0), np.repeat(y01, counts))
    weighted = AveragePrecisionClassifier(**est).fit(X, y01, sample_weight=counts)
    assert weighted.objective_ == pytest.approx(repeated.objective_, rel=1e-7)
    np.testing.assert_allclose(weighted.decision_function(X), repeated.decision_function(X),
                               rtol=1e-6, atol=1e-8)
    kept = counts > 0
    dropped = AveragePrecisionClassifier(**est).fit(X[kept], y01[kept])
    zeroed = AveragePrecisionClassifier(**est).fit(X, y01, sample_weight=kept.astype(float))
    assert zeroed.objective_ == pytest.approx(dropped.objective_, rel=1e-7)
    np.testing.assert_allclose(zeroed.coef_, dropped.coef_, rtol=1e-6, atol=1e-8)
    unit = AveragePrecisionClassifier(**est).fit(X, y01, sample_weight=np.ones(y01.size))
    plain = AveragePrecisionClassifier(**est).fit(X, y01)
    assert np.array_equal(unit.coef_, plain.coef_) and unit.objective_ == plain.objective_


def test_estimator_objective_is_the_weighted_surrogate():
    X, y01, y, _ = _data()
    w = np.random.default_rng(10).uniform(0.2, 3.0, size=y.size)
    clf = AveragePrecisionClassifier(alpha=1e-3, rank_weight=1.0).fit(X, y01, sample_weight=w)
    obj = AveragePrecisionObjective(X, y, get_pairwise_loss("squared_hinge", 0.5), 1e-3, sample_weight=w)
    theta = np.append(clf.ranking_coef_[0], clf.score_intercept_[0])
    assert clf.objective_ == pytest.approx(obj.value(theta), rel=1e-12)
    assert clf.objective_ < obj.value(obj.start())
    unweighted = AveragePrecisionObjective(X, y, get_pairwise_loss("squared_hinge", 0.5), 1e-3)
    assert clf.objective_ != pytest.approx(unweighted.value(theta), rel=1e-3)  # the weights matter


@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("params", [{}, dict(loss="logistic", rank_weight=0.3, alpha=1e-3)])
def test_default_objective_is_the_exact_mix_with_the_logistic_loss(params, weighted):
    # F = (1 - r) weighted-mean logistic loss + r P_w(sigmoid(X w + b)) + alpha/2 |w|^2, with the
    # surrogate by the brute-force double loop; the default is r = 0.5, alpha = 1/W (1/n unweighted)
    X, y01, y, _ = _data()
    w = np.random.default_rng(11).uniform(0.2, 3.0, size=y.size) if weighted else np.ones(y.size)
    clf = AveragePrecisionClassifier(**params).fit(X, y01, sample_weight=w if weighted else None)
    r = params.get("rank_weight", 0.5)
    alpha = params.get("alpha", 1.0 / w.sum())
    coef, b = clf.ranking_coef_[0], clf.score_intercept_[0]
    f = X @ coef + b
    logistic = np.sum(w * np.log1p(np.exp(-y * f))) / w.sum()
    rank = _brute(1.0 / (1.0 + np.exp(-f)), y, w, params.get("loss", "squared_hinge"))
    expected = (1 - r) * logistic + r * rank + 0.5 * alpha * coef @ coef
    assert clf.objective_ == pytest.approx(expected, rel=1e-10)


def test_class_weight_is_the_matching_sample_weight():
    X, y01, _, _ = _data(seed=1)
    by_class = AveragePrecisionClassifier(class_weight="balanced").fit(X, y01)
    by_sample = AveragePrecisionClassifier().fit(X, y01, sample_weight=compute_sample_weight("balanced", y01))
    np.testing.assert_array_equal(by_class.coef_, by_sample.coef_)
    assert by_class.objective_ == by_sample.objective_
    plain = AveragePrecisionClassifier().fit(X, y01)
    assert not np.allclose(by_class.coef_, plain.coef_, atol=1e-3)
    X3, y3 = make_classification(200, 4, n_informative=3, n_redundant=0, n_classes=3, random_state=2)
    weights = {0: 1.0, 1: 3.0, 2: 0.5}
    by_dict = AveragePrecisionClassifier(class_weight=weights).fit(X3, y3)
    by_sample = AveragePrecisionClassifier().fit(X3, y3, sample_weight=np.vectorize(weights.get)(y3))
    np.testing.assert_array_equal(by_dict.coef_, by_sample.coef_)
    with pytest.raises(ValueError, match="class_weight"):
        AveragePrecisionClassifier(class_weight="uniform").fit(X, y01)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_soap_draws_the_weighted_sample():
    X, y01, y, counts = _data(300)
    exact = AveragePrecisionClassifier(solver="lbfgs", **PAPER).fit(X, y01, sample_weight=counts).objective_
    # each epoch draws each class's rows with probabilities proportional to the weights, so the
    # weighted fit and the fit of the repeated rows minimise the same F (equal in distribution only)
    weighted = AveragePrecisionClassifier(solver="soap", max_iter=60, tol=0.0, random_state=0, **PAPER).fit(
        X, y01, sample_weight=counts)
    repeated = AveragePrecisionClassifier(solver="soap", max_iter=30, tol=0.0, random_state=0, **PAPER).fit(
        np.repeat(X, counts, 0), np.repeat(y01, counts))
    start = AveragePrecisionObjective(X, y, get_pairwise_loss("squared_hinge", 0.5), 1e-4, counts).start()
    assert weighted.objective_history_[0] == pytest.approx(
        AveragePrecisionObjective(X, y, get_pairwise_loss("squared_hinge", 0.5), 1e-4, counts).value(start))
    for fit in (weighted, repeated):
        assert fit.objective_ < 0.93 * exact  # F < 0: within 7% of the weighted optimum
    # rows of weight zero are never drawn: they get no moving average
    obj = AveragePrecisionObjective(X, y, get_pairwise_loss("logistic"), 1e-3, sample_weight=counts)
    res = soap(obj, obj.penalty, coef_init=obj.start(), max_iter=3, random_state=0)
    assert res.info["u"].shape == (int(np.sum((y > 0) & (counts > 0))), 2)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_auto_takes_soap_by_cost_with_or_without_weights(monkeypatch):
    X, y01, _, counts = _data()
    monkeypatch.setattr(ap_module, "_AUTO_MAX_LOGISTIC_PAIRS", 10)
    for weights in (None, counts):
        stochastic = AveragePrecisionClassifier(loss="logistic", max_iter=2, random_state=0, **PAPER).fit(
            X, y01, sample_weight=weights)
        assert "u" in stochastic._solver_info[0]
        # the logistic mix (the default) is L-BFGS's alone, whatever the size
        mixed = AveragePrecisionClassifier(loss="logistic", max_iter=2).fit(X, y01, sample_weight=weights)
        assert "u" not in mixed._solver_info[0]
    AveragePrecisionClassifier(solver="soap", max_iter=2).fit(X, y01, sample_weight=np.ones(y01.size))
    balanced = AveragePrecisionClassifier(solver="soap", class_weight="balanced", max_iter=2, random_state=0)
    assert balanced.fit(X, y01).coef_.shape == (1, X.shape[1])


def test_objective_rejects_weights_without_a_weighted_positive():
    X, _, y, _ = _data(40)
    loss = get_pairwise_loss("squared_hinge")
    with pytest.raises(ValueError, match="positive"):
        AveragePrecisionObjective(X, y, loss, 0.0, sample_weight=(y < 0).astype(float))
    with pytest.raises(ValueError, match="nonnegative"):
        AveragePrecisionObjective(X, y, loss, 0.0, sample_weight=-np.ones(y.size))
