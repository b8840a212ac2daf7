"""AveragePrecisionClassifier and SOAP (seed 002)."""

import pickle

import numpy as np
import pytest
from sklearn.datasets import make_classification
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import average_precision_score
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.utils.estimator_checks import parametrize_with_checks

from skrank import AveragePrecisionClassifier
from skrank.datafits.average_precision import AveragePrecisionObjective
from skrank.datasets import load_tabular
from skrank.pairwise_losses import AVERAGE_PRECISION_LOSSES, get_pairwise_loss
from skrank.solvers.stochastic.sampling import state_from_random_state
from skrank.solvers.stochastic.soap import soap
from skrank.solvers.stochastic.soap_kernel import SGD, soap_steps

#: the objective of Qi et al. 2021 alone (no logistic term), with the former penalty
PAPER = dict(rank_weight=1.0, alpha=1e-4)


def _data(n=300, d=5, seed=0, weights=(0.85,)):
    X, y01 = make_classification(n, d, n_informative=3, n_redundant=0, weights=list(weights),
                                 flip_y=0.05, random_state=seed)
    X = StandardScaler().fit_transform(X)
    return X, y01, np.where(y01 == 1, 1.0, -1.0)


class _Kernel:
    """State of :func:`soap_steps` for one data set, to run steps one at a time."""

    def __init__(self, X, y, loss, alpha, n_anchor, batch, seed=0):
        self.X = np.ascontiguousarray(X)
        self.pos_idx = np.flatnonzero(y > 0).astype(np.int64)
        self.neg_idx = np.flatnonzero(y < 0).astype(np.int64)
        n, n_pos, n_neg = len(y), len(self.pos_idx), len(self.neg_idx)
        d = X.shape[1]
        self.slot = np.arange(n_pos, dtype=np.int64)
        self.u = np.zeros((n_pos, 2))
        self.seen = np.zeros(n_pos, dtype=np.bool_)
        self.stamp = np.full(n_pos, -1, dtype=np.int64)
        self.m1, self.m2 = np.zeros(d + 1), np.zeros(d + 1)
        self.state = state_from_random_state(seed)
        self.perm_pos = np.arange(n_pos, dtype=np.int64)
        self.perm_neg = np.arange(n_neg, dtype=np.int64)
        self.cursor = np.array([n_pos, n_neg], dtype=np.int64)
        self.wp = (n_pos / n) / (n_anchor / batch)
        self.wn = (n_neg / n) / ((batch - n_anchor) / batch)
        self.loss, self.alpha, self.n_anchor, self.batch = loss, alpha, n_anchor, batch
        self.t = 0

    def step(self, theta, gamma, lr, optimizer=SGD):
        loss = self.loss
        alpha = np.full(self.X.shape[1], float(self.alpha))
        soap_steps(self.X, self.pos_idx, self.neg_idx, self.slot, theta, self.u, self.seen, self.stamp,
                   self.m1, self.m2, 1, self.t, self.n_anchor, self.batch, gamma, lr, alpha,
                   optimizer, 0.9, 0.999, 1e-8, self.wp, self.wn, loss.code, loss.shift,
                   loss.scale, self.state, self.perm_pos, self.perm_neg, self.cursor)
        self.t += 1


def _exact_u(X, y, theta, loss):
    """``g_i(w) = (1/n) (A_i, B_i)`` of eq. (4) for every positive, by brute force."""
    h = 1.0 / (1.0 + np.exp(-(X @ theta[:-1] + theta[-1])))
    out = []
    for i in np.flatnonzero(y > 0):
        v = loss.value(h[i] - h)
        out.append([v[y > 0].sum() / len(y), v.sum() / len(y)])
    return np.array(out)


@pytest.mark.parametrize("name", AVERAGE_PRECISION_LOSSES)
def test_soap_step_with_exact_u_is_a_gradient_step(name):
    # the whole data set as one batch and gamma = 1: u is the exact g_i(w) and
    # eq. (9) of Qi et al. 2021 is the gradient of F (our derivation)
    X, _, y = _data(60, 4)
    loss = get_pairwise_loss(name, 0.5)
    obj = AveragePrecisionObjective(X, y, loss, 0.01)
    n_pos = int((y > 0).sum())
    kern = _Kernel(X, y, loss, 0.01, n_pos, len(y))
    theta = obj.start()
    for first_visit in (True, False):
        F, grad = obj.value_and_grad(theta)
        new = theta.copy()
        kern.step(new, 1.0, 0.1)
        np.testing.assert_allclose(kern.u, _exact_u(X, y, theta, loss), rtol=1e-12, atol=1e-15)
        np.testing.assert_allclose(new, theta - 0.1 * grad, rtol=1e-10, atol=1e-13)
        assert kern.seen.all() and (kern.stamp == kern.t - 1).all()
        theta = new


def test_moving_averages_first_visit_and_duplicated_positives():
    # 3 positives and 6 anchors per batch: every batch holds each positive
    # twice and, with batch - 6 = N-, every negative once
    rng = np.random.default_rng(3)
    X = rng.normal(size=(13, 3))
    y = np.array([1.0] * 3 + [-1.0] * 10)
    loss = get_pairwise_loss("squared_hinge", 0.5)
    batch = 16
    kern = _Kernel(X, y, loss, 0.0, 6, batch)
    wp = (3 / 13) / (6 / batch)
    wn = (10 / 13) / (10 / batch)
    mult = np.array([2.0] * 3 + [1.0] * 10) * np.where(y > 0, wp, wn)

    def batch_averages(theta):
        h = 1.0 / (1.0 + np.exp(-(X @ theta[:-1] + theta[-1])))
        g = []
        for i in range(3):
            v = loss.value(h[i] - h) * mult
            g.append([v[:3].sum() / batch, v.sum() / batch])
        return np.array(g)

    gamma = 0.3
    theta = np.array([0.5, -0.2, 0.1, 0.0])
    g0 = batch_averages(theta)
    kern.step(theta, gamma, 0.5)
    np.testing.assert_allclose(kern.u, g0, rtol=1e-12)  # first visit: set, not averaged from 0
    u1 = kern.u.copy()
    g1 = batch_averages(theta)  # at the updated theta, before the second step moves it
    kern.step(theta, gamma, 0.5)
    # one moving-average update per positive, although each is drawn twice
    np.testing.assert_allclose(kern.u, (1 - gamma) * u1 + gamma * g1, rtol=1e-12)


@pytest.mark.parametrize("name", AVERAGE_PRECISION_LOSSES)
@pytest.mark.parametrize("optimizer", ["sgd", "momentum", "adam"])
def test_soap_lowers_the_exact_objective(name, optimizer):
    X, _, y = _data(400, 6)
    obj = AveragePrecisionObjective(X, y, get_pairwise_loss(name, 0.5), 1e-3)
    theta0 = obj.start()
    res = soap(obj, obj.penalty, coef_init=theta0, optimizer=optimizer, max_iter=20, random_state=0)
    assert res.objective < obj.value(theta0) - 1e-3
    assert res.objective == pytest.approx(obj.value(res.coef), rel=1e-12)
    assert res.objective_history[0] == pytest.approx(obj.value(theta0))
    assert res.info["u"].shape == (int((y > 0).sum()), 2)


@pytest.mark.parametrize("sample_weight", [None, np.arange(1.0, 47.0)])
def test_the_start_on_identical_rows_is_finite_and_flat(sample_weight):
    """Every score equal: a spread of zero, not the rounding of a mean (which made ``w`` about 1e16)."""
    X = np.tile(np.random.default_rng(0).normal(size=3), (46, 1))
    y = np.where(np.arange(46) < 14, 1.0, -1.0)
    obj = AveragePrecisionObjective(X, y, get_pairwise_loss("logistic"), 0.01, sample_weight)
    theta = obj.start()
    assert np.abs(theta).max() < 1e-10
    assert obj.value(theta) == pytest.approx(obj.value(np.zeros(4)), abs=1e-12)
    # on rows that differ the start still spreads the scores to unit standard deviation, centred
    Z, _, yz = _data(200, 4)
    obj = AveragePrecisionObjective(Z, yz, get_pairwise_loss("logistic"), 0.01)
    scores = Z @ obj.start()[:-1] + obj.start()[-1]
    assert np.std(scores) == pytest.approx(1.0, rel=1e-12) and abs(np.mean(scores)) < 1e-12


def test_soap_on_identical_rows_fits_the_flat_objective():
    y01 = (np.arange(46) < 14).astype(int)
    X = np.tile(np.random.default_rng(0).normal(size=3), (46, 1))
    clf = AveragePrecisionClassifier(solver="soap", alpha=0.01, random_state=0, max_iter=30).fit(X, y01)
    flat = AveragePrecisionClassifier(solver="soap", alpha=0.01, random_state=0, max_iter=30)
    flat.fit(np.zeros_like(X), y01)
    assert clf.objective_ == pytest.approx(flat.objective_, abs=1e-9)


def test_soap_stalled_far_above_f_at_zero_is_not_converged():
    """A start where Adam's steps barely move ``(w, b)``: no improvement, yet far from the minimum."""
    X = np.tile(np.random.default_rng(0).normal(size=3), (46, 1))
    y = np.where(np.arange(46) < 14, 1.0, -1.0)
    obj = AveragePrecisionObjective(X, y, get_pairwise_loss("logistic"), 0.01)
    res = soap(obj, obj.penalty, coef_init=np.array([2e16, 0.0, 0.0, 8e15]), max_iter=30, random_state=0)
    assert res.objective > 1e30
    assert not res.converged and res.stop_criterion > 1e-4
    good = soap(obj, obj.penalty, coef_init=np.zeros(4), max_iter=30, random_state=0)
    assert good.converged and good.objective == pytest.approx(obj.value(np.zeros(4)), abs=1e-12)


@pytest.mark.parametrize("name", AVERAGE_PRECISION_LOSSES)
def test_each_solver_lowers_the_objective_from_its_start(name):
    X, y01, y = _data(400, 6)
    start = AveragePrecisionObjective(X, y, get_pairwise_loss(name, 0.5), 1e-4)
    F0 = start.value(start.start())
    for solver in ("lbfgs", "soap"):
        clf = AveragePrecisionClassifier(loss=name, solver=solver, random_state=0, **PAPER).fit(X, y01)
        assert clf.objective_ < F0 - 1e-3
        theta = np.append(clf.ranking_coef_[0], clf.score_intercept_[0])
        assert clf.objective_ == pytest.approx(start.value(theta), rel=1e-10)
        assert clf.objective_history_[-1] == pytest.approx(clf.objective_)


@pytest.mark.parametrize("table", ["caravan", "churn", "credit"])
def test_auto_reaches_an_objective_no_higher_than_soap(table):
    X, y = load_tabular(table)
    X = StandardScaler().fit_transform(np.asarray(X, dtype=float))
    auto = AveragePrecisionClassifier(**PAPER).fit(X, y)  # the paper's objective, which SOAP fits
    for optimizer in ("adam", "sgd"):
        stochastic = AveragePrecisionClassifier(solver="soap", optimizer=optimizer,
                                                random_state=0, **PAPER).fit(X, y)
        assert auto.objective_ <= stochastic.objective_ + 1e-9


def test_training_ap_beats_the_start_and_logistic_regression():
    X, y = load_tabular("churn")
    X = StandardScaler().fit_transform(np.asarray(X, dtype=float))
    y01 = (y == np.unique(y)[1]).astype(int)
    clf = AveragePrecisionClassifier().fit(X, y01)
    start = AveragePrecisionObjective(X, np.where(y01 == 1, 1.0, -1.0),
                                      get_pairwise_loss("squared_hinge", 0.5), 1e-4).start()
    lr = LogisticRegression(max_iter=2000).fit(X, y01)
    ap = average_precision_score(y01, clf.decision_function(X))
    assert ap > average_precision_score(y01, X @ start[:-1]) + 0.02
    assert ap > average_precision_score(y01, lr.decision_function(X)) + 0.02


def _stochastic_failures(estimator):
    """The checks SOAP cannot pass: weights resample its batches (equal in distribution only)."""
    if estimator.solver != "soap":
        return {}
    reason = "stochastic: weights resample the batches"
    return {"check_sample_weight_equivalence_on_dense_data": reason,
            "check_sample_weight_equivalence_on_sparse_data": reason}


# at the defaults: tests/test_conventions.py; here the stochastic solver
@parametrize_with_checks([AveragePrecisionClassifier(solver="soap", max_iter=5, random_state=0)],
                         expected_failed_checks=_stochastic_failures)
def test_sklearn_compatible(estimator, check):
    check(estimator)


def test_pipeline_gridsearch_with_the_average_precision_scorer():
    X, y01, _ = _data(300, 5)
    pipe = make_pipeline(StandardScaler(), AveragePrecisionClassifier())
    grid = GridSearchCV(pipe, {"averageprecisionclassifier__margin": [0.25, 0.5]},
                        scoring="average_precision", cv=3).fit(X, y01)
    assert grid.best_score_ > 0.5
    assert set(grid.cv_results_["param_averageprecisionclassifier__margin"]) == {0.25, 0.5}


def test_prediction_calibration_pickle_and_determinism():
    X, y01, _ = _data(300, 5)
    clf = AveragePrecisionClassifier(solver="soap", random_state=3, max_iter=10).fit(X, y01)
    s = X @ clf.ranking_coef_[0]
    A, B = clf.calibration_[0]
    assert A > 0
    np.testing.assert_allclose(clf.decision_function(X), A * s + B)
    np.testing.assert_allclose(clf.coef_[0], A * clf.ranking_coef_[0], rtol=1e-15)
    assert clf.intercept_[0] == B
    np.testing.assert_array_equal(clf.predict(X), np.where(A * s + B > 0, 1, 0))
    np.testing.assert_allclose(clf.predict_proba(X)[:, 1], 1 / (1 + np.exp(-(A * s + B))))
    again = AveragePrecisionClassifier(solver="soap", random_state=3, max_iter=10).fit(X, y01)
    np.testing.assert_array_equal(clf.coef_, again.coef_)
    other = AveragePrecisionClassifier(solver="soap", random_state=4, max_iter=10).fit(X, y01)
    assert not np.array_equal(clf.coef_, other.coef_)
    loaded = pickle.loads(pickle.dumps(clf))
    np.testing.assert_array_equal(loaded.decision_function(X), clf.decision_function(X))


def test_one_vs_rest_fits_one_binary_problem_per_class():
    X, y = make_classification(300, 5, n_informative=3, n_redundant=0, n_classes=3,
                               random_state=0)
    clf = AveragePrecisionClassifier().fit(X, y)
    assert clf.coef_.shape == (3, 5) and clf.decision_function(X).shape == (300, 3)
    for k in range(3):
        binary = AveragePrecisionClassifier().fit(X, (y == k).astype(int))
        np.testing.assert_allclose(clf.coef_[k], binary.coef_[0], rtol=1e-10)
    assert average_precision_score((y == 0), clf.decision_function(X)[:, 0]) > 0.6


def test_warm_start_starts_from_the_previous_coefficients():
    X, y01, _ = _data(300, 5)
    clf = AveragePrecisionClassifier(warm_start=True).fit(X, y01)
    first = clf.objective_
    clf.set_params(max_iter=1).fit(X, y01)
    assert clf.objective_ <= first + 1e-6


@pytest.mark.parametrize("loss", sorted(AVERAGE_PRECISION_LOSSES))
@pytest.mark.parametrize("margin", [np.nan, np.inf, -np.inf])
def test_a_margin_that_is_not_finite_is_refused_whatever_the_loss(loss, margin):
    X, y01, _ = _data(100, 3)
    with pytest.raises(ValueError, match=r"'margin' parameter .* must be a float in the range \(-inf, inf\)"):
        AveragePrecisionClassifier(loss=loss, margin=margin, rank_weight=0.0).fit(X, y01)


def test_bad_inputs_get_clear_errors():
    X, y01, _ = _data(100, 3)
    Xn = X.copy()
    Xn[0, 0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        AveragePrecisionClassifier().fit(Xn, y01)
    Xn[0, 0] = np.inf
    with pytest.raises(ValueError, match="infinity"):
        AveragePrecisionClassifier().fit(Xn, y01)
    with pytest.raises(ValueError, match="at least two classes"):
        AveragePrecisionClassifier().fit(X, np.zeros(100))
    with pytest.raises(ValueError, match="positives_per_batch=8 must be smaller than batch_size=8"):
        AveragePrecisionClassifier(batch_size=8).fit(X, y01)
    with pytest.raises(ValueError, match="margin"):
        AveragePrecisionClassifier(margin=0.0).fit(X, y01)
    with pytest.raises(ValueError, match="margin"):
        AveragePrecisionClassifier(margin=-1.0).fit(X, y01)
    AveragePrecisionClassifier(loss="logistic", margin=0.0).fit(X, y01)  # no margin needed
    with pytest.raises(ValueError, match="gamma"):
        AveragePrecisionClassifier(gamma=0.0).fit(X, y01)
    with pytest.raises(ValueError, match="optimizer"):
        AveragePrecisionClassifier(optimizer="rmsprop").fit(X, y01)
    with pytest.raises(ValueError, match="positive"):
        AveragePrecisionObjective(X, -np.ones(100), get_pairwise_loss("squared_hinge"), 0.0)
