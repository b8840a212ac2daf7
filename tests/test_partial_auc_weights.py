"""PartialAUCClassifier with sample and class weights: the objective of the weighted sample.

Checked against repeated and dropped rows, a double loop over the pairs
with the rank weights computed as lengths of cells of probability, the
integral of the negatives' weighted quantile function, finite differences,
the weighted partial_auc_score and scikit-learn's class weights.
"""

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.base import clone
from sklearn.datasets import load_iris, make_classification
from sklearn.preprocessing import StandardScaler
from sklearn.utils.class_weight import compute_sample_weight

from skrank import PartialAUCClassifier
from skrank.datafits.partial_auc import PartialAUCObjective, negative_rank_weights
from skrank.metrics import partial_auc_score
from skrank.pairwise_losses import PAIRWISE_LOSSES, get_pairwise_loss
from skrank.solvers.full_batch.lbfgs import lbfgs

RANGES = [(0.05, 0.5), (0.0, 1.0), (0.13, 0.77), (0.0, 0.3)]


#: the objective of Yao, Lin and Yang 2022 alone (no logistic term), with the former penalty
PAPER = dict(rank_weight=1.0, alpha=1e-4)


def _pair_loss(name, z, margin=1.0):
    if name == "squared_hinge":
        return max(0.0, margin - z) ** 2
    if name == "squared":
        return (margin - z) ** 2
    return float(np.log1p(np.exp(-z)))


def _case(seed, n=40, d=3, ties=False):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    if ties:
        X = np.round(X)
    y = np.where(X @ rng.normal(size=d) + rng.normal(size=n) > 0.5, 1.0, -1.0)
    y[:2] = [1.0, -1.0]
    counts = rng.integers(0, 4, size=n)
    counts[:2] = 1
    return X, y, counts, rng.normal(size=d)


# -- the objective ------------------------------------------------------------------------------


@pytest.mark.parametrize("name", PAIRWISE_LOSSES)
@pytest.mark.parametrize("fpr_range", RANGES)
def test_integer_weights_are_repeated_rows(name, fpr_range):
    for seed in range(4):
        X, y, counts, w = _case(seed, ties=seed % 2 == 1)
        loss = get_pairwise_loss(name, 0.7)
        repeated = PartialAUCObjective(np.repeat(X, counts, 0), np.repeat(y, counts), fpr_range, loss, 0.2)
        weighted = PartialAUCObjective(X, y, fpr_range, loss, 0.2, sample_weight=counts.astype(float))
        value, grad = weighted.value_and_grad(w)
        ref_value, ref_grad = repeated.value_and_grad(w)
        assert value == pytest.approx(ref_value, rel=1e-10)
        if seed % 2 == 0:  # distinct scores: the gradient is unique
            np.testing.assert_allclose(grad, ref_grad, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("name", PAIRWISE_LOSSES)
def test_zero_weights_are_dropped_rows_and_unit_weights_change_nothing(name):
    X, y, counts, w = _case(1)
    loss = get_pairwise_loss(name)
    kept = counts > 0
    dropped = PartialAUCObjective(X[kept], y[kept], (0.1, 0.6), loss, 0.2)
    zeroed = PartialAUCObjective(X, y, (0.1, 0.6), loss, 0.2, sample_weight=kept.astype(float))
    assert zeroed.value(w) == pytest.approx(dropped.value(w), rel=1e-12)
    np.testing.assert_allclose(zeroed.value_and_grad(w)[1], dropped.value_and_grad(w)[1], rtol=1e-10)
    plain = PartialAUCObjective(X, y, (0.1, 0.6), loss, 0.2)
    unit = PartialAUCObjective(X, y, (0.1, 0.6), loss, 0.2, sample_weight=np.ones(y.size))
    assert not unit.weighted
    value, grad = unit.value_and_grad(w)
    ref_value, ref_grad = plain.value_and_grad(w)
    assert value == ref_value and np.array_equal(grad, ref_grad)


def _cell_weights(neg_weight_sorted, fpr_range):
    """``|[D_(k-1), D_k] ∩ [a, b]|`` for the cells of cumulative probability, one at a time."""
    a, b = fpr_range
    total = sum(neg_weight_sorted)
    omega, lower = [], 0.0
    for v in neg_weight_sorted:
        upper = lower + v / total
        omega.append(max(0.0, min(upper, b) - max(lower, a)))
        lower = upper
    return omega


def _brute_weighted(X, y, v, w, fpr_range, name, margin, alpha):
    """``sum_i p_i sum_j omega_j loss(h_i - h_j) / (b - a)`` by a double loop over the pairs."""
    h = X @ w
    pos, neg = np.flatnonzero(y > 0), np.flatnonzero(y < 0)
    neg = neg[np.argsort(-h[neg], kind="stable")]
    omega = _cell_weights([v[j] for j in neg], fpr_range)
    total_pos = sum(v[i] for i in pos)
    value = 0.0
    for i in pos:
        for j, om in zip(neg, omega):
            value += v[i] / total_pos * om * _pair_loss(name, h[i] - h[j], margin)
    return value / (fpr_range[1] - fpr_range[0]) + 0.5 * alpha * float(w @ w)


def _quantile_integral(X, y, v, w, fpr_range, name, margin, alpha):
    """``1/(b - a) sum_i p_i int_a^b loss(h_i - Q(u)) du``, ``Q`` the negatives' weighted quantile.

    ``Q(u)`` is the score of the negative at cumulative probability ``u`` of
    the negatives in decreasing order of score; it is constant between its
    jumps, so the integral is a sum over the pieces between them.
    """
    h = X @ w
    pos, neg = y > 0, y < 0
    order = np.argsort(-h[neg])
    scores, cum = h[neg][order], np.cumsum(v[neg][order]) / v[neg].sum()
    a, b = fpr_range
    knots = np.unique(np.concatenate([[a, b], cum[(cum > a) & (cum < b)]]))
    mids = 0.5 * (knots[1:] + knots[:-1])
    q = scores[np.minimum(np.searchsorted(cum, mids), scores.size - 1)]
    p = v[pos] / v[pos].sum()
    value = sum(pi * np.diff(knots) @ [_pair_loss(name, hi - qk, margin) for qk in q]
                for pi, hi in zip(p, h[pos]))
    return value / (b - a) + 0.5 * alpha * float(w @ w)


@pytest.mark.parametrize("name", PAIRWISE_LOSSES)
def test_weighted_objective_equals_brute_force_pairs_and_quantile_integral(name):
    rng = np.random.default_rng(2)
    for case in range(12):
        n, d = int(rng.integers(6, 25)), int(rng.integers(1, 4))
        X = rng.normal(size=(n, d))
        y = np.where(rng.random(n) < 0.4, 1.0, -1.0)
        y[:2] = [1.0, -1.0]
        v = rng.uniform(0.05, 3.0, size=n)
        lo = rng.uniform(0.0, 0.6)
        fpr_range = (lo, min(1.0, lo + rng.uniform(0.3, 0.8))) if case % 4 else (0.0, 1.0)
        w = rng.normal(size=d)
        margin = float(rng.uniform(0.3, 2.0))
        obj = PartialAUCObjective(X, y, fpr_range, get_pairwise_loss(name, margin), 0.3, sample_weight=v)
        value = obj.value(w)
        assert value == pytest.approx(_brute_weighted(X, y, v, w, fpr_range, name, margin, 0.3),
                                      rel=1e-11, abs=1e-12)
        assert value == pytest.approx(_quantile_integral(X, y, v, w, fpr_range, name, margin, 0.3),
                                      rel=1e-11, abs=1e-12)


@pytest.mark.parametrize("name", PAIRWISE_LOSSES)
def test_weighted_value_does_not_depend_on_the_order_of_tied_negatives(name):
    # tied negatives of different weights straddle the bounds: any order of
    # them covers the same interval, so F is the same
    X = np.array([[2.0], [1.0], [1.0], [1.0], [0.0], [-1.0], [1.0]])
    y = np.array([1.0, -1.0, -1.0, -1.0, -1.0, 1.0, -1.0])
    v = np.array([1.0, 0.3, 2.5, 0.7, 1.1, 2.0, 1.4])
    loss = get_pairwise_loss(name)
    value = PartialAUCObjective(X, y, (0.1, 0.6), loss, 0.0, sample_weight=v).value(np.ones(1))
    for seed in range(5):
        perm = np.random.default_rng(seed).permutation(y.size)
        shuffled = PartialAUCObjective(X[perm], y[perm], (0.1, 0.6), loss, 0.0, sample_weight=v[perm])
        assert shuffled.value(np.ones(1)) == pytest.approx(value, rel=1e-13)
    assert value == pytest.approx(_brute_weighted(X, y, v, np.ones(1), (0.1, 0.6), name, 1.0, 0.0),
                                  rel=1e-12)


@pytest.mark.parametrize("name", PAIRWISE_LOSSES)
@pytest.mark.parametrize("fpr_range", RANGES)
def test_weighted_gradient_matches_finite_differences(name, fpr_range):
    X, y, _, w = _case(3, n=30, d=4)
    v = np.random.default_rng(4).uniform(0.1, 3.0, size=y.size)
    obj = PartialAUCObjective(X, y, fpr_range, get_pairwise_loss(name, 0.8), 0.1, sample_weight=v)
    _, grad = obj.value_and_grad(w)
    eps = 1e-6
    fd = [(obj.value(w + eps * e) - obj.value(w - eps * e)) / (2 * eps) for e in np.eye(w.size)]
    np.testing.assert_allclose(grad, fd, rtol=1e-6, atol=1e-8)


def test_weighted_rank_weights_give_the_weighted_partial_auc_score():
    # with the 0-1 loss in place of the surrogate, F's weights give
    # partial_auc_score with sample_weight (weighted true and false positive rates)
    rng = np.random.default_rng(6)
    for fpr_range in [(0.13, 0.71), (0.0, 0.2), (0.0, 1.0)]:
        s = rng.normal(size=30)
        y = np.where(rng.random(30) < 0.4, 1, 0)
        y[:2] = [0, 1]
        v = rng.uniform(0.1, 3.0, size=30)
        pos, neg = np.flatnonzero(y == 1), np.flatnonzero(y == 0)
        neg = neg[np.argsort(-s[neg])]
        omega = negative_rank_weights(neg.size, fpr_range, v[neg]) / v[neg].sum()
        tpr = [v[pos] @ (s[pos] > s[j]) / v[pos].sum() for j in neg]
        assert omega @ tpr / (fpr_range[1] - fpr_range[0]) == pytest.approx(
            partial_auc_score(y, s, fpr_range=fpr_range, sample_weight=v), rel=1e-12)


def test_weighted_range_must_hold_a_negative():
    X, y, _, _ = _case(5)
    loss = get_pairwise_loss("squared_hinge")
    n_neg = int((y < 0).sum())
    v = np.ones(y.size)
    v[y < 0] = 1.0 / n_neg  # the negatives' weights sum to one: the range holds the lightest one
    PartialAUCObjective(X, y, (0.05, 0.5), loss, 0.0, sample_weight=v)
    v[y < 0] = 0.01
    with pytest.raises(ValueError, match="must hold at least 0.01"):
        PartialAUCObjective(X, y, (0.0, 0.5 / n_neg), loss, 0.0, sample_weight=v)
    with pytest.raises(ValueError, match="total weight of zero"):
        PartialAUCObjective(X, y, (0.05, 0.5), loss, 0.0, sample_weight=(y < 0).astype(float))


# -- the estimator ------------------------------------------------------------------------------


def _data(n=120, d=5, seed=0):
    X, y = make_classification(n, d, n_informative=3, weights=[0.7], flip_y=0.05, random_state=seed)
    counts = np.random.default_rng(seed).integers(0, 4, size=n)
    counts[:3] = 1
    return StandardScaler().fit_transform(X), y, counts


ESTIMATORS = [
    PartialAUCClassifier(solver="lbfgs", tol=1e-10),
    PartialAUCClassifier(solver="lbfgs", loss="logistic", fpr_range=(0.1, 0.6), tol=1e-10),
    PartialAUCClassifier(solver="lbfgs", fpr_range=(0.0, 0.3), alpha=1e-2, tol=1e-10),
    PartialAUCClassifier(solver="exact", loss="squared", fpr_range=(0, 1)),
]


@pytest.mark.parametrize("estimator", ESTIMATORS, ids=repr)
def test_estimator_weights_equal_repeated_and_dropped_rows(estimator):
    X, y, counts = _data()
    repeated = clone(estimator).fit(np.repeat(X, counts, 0), np.repeat(y, counts))
    weighted = clone(estimator).fit(X, y, sample_weight=counts)
    assert weighted.objective_ == pytest.approx(repeated.objective_, rel=1e-7)
    # L-BFGS stops on a kink of F (its gradient there is far from zero), where the rounding of two
    # equal objectives picks the last step: a permutation of the repeated rows moves coef_ by 2e-5 relative
    np.testing.assert_allclose(weighted.coef_, repeated.coef_, rtol=1e-4, atol=1e-7)
    np.testing.assert_allclose(weighted.decision_function(X), repeated.decision_function(X),
                               rtol=1e-4, atol=1e-7)
    kept = counts > 0
    dropped = clone(estimator).fit(X[kept], y[kept])
    zeroed = clone(estimator).fit(X, y, sample_weight=kept.astype(float))
    assert zeroed.objective_ == dropped.objective_
    assert np.array_equal(zeroed.coef_, dropped.coef_)
    assert np.array_equal(zeroed.calibration_, dropped.calibration_)
    unit = clone(estimator).fit(X, y, sample_weight=np.ones(y.size))
    plain = clone(estimator).fit(X, y)
    assert np.array_equal(unit.coef_, plain.coef_) and np.array_equal(unit.calibration_, plain.calibration_)


@pytest.mark.parametrize("fit_sparse", [False, True])
def test_exact_solver_is_the_weighted_minimum(fit_sparse):
    X, y, _ = _data(seed=1)
    v = np.random.default_rng(1).uniform(0.2, 3.0, size=y.size)
    exact = PartialAUCClassifier(solver="exact", loss="squared", fpr_range=(0, 1), alpha=1e-3)
    exact.fit(sp.csr_matrix(X) if fit_sparse else X, y, sample_weight=v)
    obj = PartialAUCObjective(X, np.where(y == 1, 1.0, -1.0), (0, 1), get_pairwise_loss("squared"), 1e-3,
                              sample_weight=v)
    ref = lbfgs(obj, obj.penalty, coef_init=np.zeros(X.shape[1]), tol=1e-12, max_iter=2000)
    assert exact.objective_ == pytest.approx(obj.value(exact.ranking_coef_[0]), rel=1e-12)
    assert exact.objective_ <= ref.objective_history[-1] * (1 + 1e-10)
    np.testing.assert_allclose(exact.ranking_coef_[0], ref.coef, rtol=1e-5, atol=1e-7)
    unweighted = PartialAUCClassifier(solver="exact", loss="squared", fpr_range=(0, 1), alpha=1e-3).fit(X, y)
    assert not np.allclose(unweighted.coef_, exact.coef_, atol=1e-3)  # the weights matter here


def test_class_weight_is_the_matching_sample_weight():
    X, y = load_iris(return_X_y=True)
    X = StandardScaler().fit_transform(X)
    keep = np.r_[0:50, 50:80, 100:150]  # unequal classes
    X, y = X[keep], y[keep]
    by_class = PartialAUCClassifier(class_weight="balanced", solver="lbfgs").fit(X, y)
    balanced = compute_sample_weight("balanced", y)
    by_sample = PartialAUCClassifier(solver="lbfgs").fit(X, y, sample_weight=balanced)
    assert np.array_equal(by_class.coef_, by_sample.coef_)
    assert np.array_equal(by_class.calibration_, by_sample.calibration_)
    plain = PartialAUCClassifier(solver="lbfgs").fit(X, y)
    # one-vs-rest: the rest's classes are reweighted, and so are the rankings
    assert not np.allclose(by_class.coef_, plain.coef_, atol=1e-3)
    weights = {0: 1.0, 1: 3.0, 2: 0.5}
    by_dict = PartialAUCClassifier(class_weight=weights, solver="lbfgs").fit(X, y)
    by_sample = PartialAUCClassifier(solver="lbfgs").fit(X, y, sample_weight=np.vectorize(weights.get)(y))
    assert np.array_equal(by_dict.coef_, by_sample.coef_)


def test_binary_class_weight_moves_only_the_threshold():
    X, y, _ = _data(seed=2)
    # the rank objective alone normalises each class by its weight: class weights leave it unchanged
    plain = PartialAUCClassifier(solver="lbfgs", loss="squared_hinge", **PAPER).fit(X, y)
    heavy = PartialAUCClassifier(solver="lbfgs", loss="squared_hinge", class_weight={0: 10.0, 1: 1.0},
                                 **PAPER).fit(X, y)
    np.testing.assert_allclose(heavy.ranking_coef_, plain.ranking_coef_, rtol=1e-9)  # F is the same
    # ...but negatives weigh more in the Platt fit: the threshold B / A on the scores X w is higher
    thresholds = [-fit.calibration_[0, 1] / fit.calibration_[0, 0] for fit in (plain, heavy)]
    assert thresholds[1] > thresholds[0]
    assert heavy.predict(X).mean() < plain.predict(X).mean()
    # the default mixes in the logistic loss, whose weighted mean does weigh the classes (and alpha=None is
    # 1 / total weight): the ranking moves too, not only the threshold
    plain = PartialAUCClassifier(solver="lbfgs").fit(X, y)
    heavy = PartialAUCClassifier(solver="lbfgs", class_weight={0: 10.0, 1: 1.0}).fit(X, y)
    direction = [c[0] / np.linalg.norm(c[0]) for c in (plain.coef_, heavy.coef_)]
    # not a rescaling: the direction of w, so the order of the scores, changes
    assert np.linalg.norm(direction[1] - direction[0]) > 1e-2
    assert heavy.predict(X).mean() < plain.predict(X).mean()


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@pytest.mark.parametrize("solver, kwargs", [
    ("agd-sbcd", {}),
    ("dca", {}),
    ("prox-dca", {}),
])
def test_stochastic_solvers_refuse_weights(solver, kwargs):
    X, y, counts = _data()
    message = rf"solver='{solver}' does not take sample_weight.*solver='lbfgs'"
    with pytest.raises(ValueError, match=message):
        PartialAUCClassifier(solver=solver, **kwargs).fit(X, y, sample_weight=counts)
    with pytest.raises(ValueError, match=message):
        PartialAUCClassifier(solver=solver, class_weight="balanced", **kwargs).fit(X, y)
    PartialAUCClassifier(solver=solver, max_iter=1, random_state=0, **kwargs).fit(
        X, y, sample_weight=np.ones(y.size))  # unit weights are no weights


def test_stochastic_solver_functions_refuse_a_weighted_objective():
    from skrank.solvers.splitting.pauc_dca import dca_partial_auc
    from skrank.solvers.stochastic.sbcd import agd_sbcd

    X, y, counts = _data()
    ypm = np.where(y == 1, 1.0, -1.0)
    for solver, fpr_range, loss in [(agd_sbcd, (0.05, 0.5), "squared_hinge"),
                                    (dca_partial_auc, (0.05, 0.5), "squared_hinge")]:
        obj = PartialAUCObjective(X, ypm, fpr_range, get_pairwise_loss(loss), 1e-3, sample_weight=counts)
        with pytest.raises(ValueError, match="does not take sample_weight"):
            solver(obj, obj.penalty)


def test_ppd_step_units_and_restarts_of_integer_weights_are_those_of_repeated_rows():
    from skrank.solvers.stochastic.ppd import PPDStream, _curvature_parts, _units

    X, ypm, counts, _ = _case(5, n=60)  # d = 3: the largest eigenvalue is computed exactly
    pos = ypm > 0
    order = np.concatenate([np.flatnonzero(pos), np.flatnonzero(~pos)])
    Xs, cs, n_pos = X[order], counts[order].astype(float), int(pos.sum())
    rep = np.repeat(Xs, counts[order], 0)
    np.testing.assert_allclose(_units(_curvature_parts(Xs, n_pos, cs), 8, 0.1),
                               _units(_curvature_parts(rep, int(counts[pos].sum())), 8, 0.1), rtol=1e-12)
    weighted = PPDStream(alpha=0.1, margin=1.0, adagrad=False, n_features=3)
    weighted.prepare(X, ypm, counts.astype(float))
    repeated = PPDStream(alpha=0.1, margin=1.0, adagrad=False, n_features=3)
    repeated.prepare(np.repeat(X, counts, 0), np.repeat(ypm, counts))
    for a, b in zip(weighted.class_means() + weighted.class_ratio(),
                    repeated.class_means() + repeated.class_ratio()):
        np.testing.assert_allclose(a, b, rtol=1e-12)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@pytest.mark.parametrize("solver", ["ppd-sg", "ppd-adagrad"])
def test_ppd_draws_the_weighted_sample(solver):
    X, y, _ = _data(600, seed=3)
    counts = np.where(X[:, 0] > 0.5, 8, 1)  # weights that move the minimiser
    kwargs = dict(solver=solver, loss="squared", fpr_range=(0, 1), random_state=0)
    exact = PartialAUCClassifier(solver="exact", loss="squared", fpr_range=(0, 1))
    exact.fit(X, y, sample_weight=counts)
    weighted = PartialAUCClassifier(**kwargs).fit(X, y, sample_weight=counts)
    assert weighted.objective_ <= 1.001 * exact.objective_  # the weighted F, within 0.1% of its minimum
    unweighted = PartialAUCClassifier(**kwargs).fit(X, y)
    objective = PartialAUCObjective(X, np.where(y == 1, 1.0, -1.0), (0, 1), get_pairwise_loss("squared"),
                                    1e-4, sample_weight=counts)
    assert objective.value(unweighted.ranking_coef_[0]) > 1.1 * exact.objective_  # the weights matter here
    balanced = PartialAUCClassifier(class_weight="balanced", **kwargs).fit(X, y)
    np.testing.assert_allclose(balanced.ranking_coef_, unweighted.ranking_coef_, rtol=0.05, atol=0.02)


def test_auto_keeps_lbfgs_with_weights(monkeypatch):
    import skrank.estimators.partial_auc as module
    import skrank.solvers.stochastic.sbcd as sbcd

    def refuse(*args, **kwargs):
        raise AssertionError("agd-sbcd was called")

    monkeypatch.setattr(module, "_AUTO_MAX_LOGISTIC_PAIRS", 0)  # every problem counts as huge
    monkeypatch.setattr(sbcd, "agd_sbcd", refuse)
    X, y, counts = _data()
    with pytest.raises(AssertionError, match="agd-sbcd was called"):
        PartialAUCClassifier(loss="logistic", **PAPER).fit(X, y)
    clf = PartialAUCClassifier(loss="logistic", **PAPER).fit(X, y, sample_weight=counts)
    assert "message" in clf._solver_info[0]  # L-BFGS's
    PartialAUCClassifier(loss="logistic", class_weight="balanced", **PAPER).fit(X, y)
    PartialAUCClassifier(loss="logistic").fit(X, y)  # the logistic mix is L-BFGS's alone, whatever the size
