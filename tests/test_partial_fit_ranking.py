"""partial_fit of the streaming ranking solvers: SOAP (average precision), PPD-SG and PPD-AdaGrad (full AUC).

One call is one epoch of the solver (SOAP: the epoch of ``fit``; PPD: the
first steps of a stage, stages ending wherever their steps fall); the
state the steps carry (moving averages keyed by the rows' content, class
totals, optimizer moments, AdaGrad sums, stage counters) persists between
calls; the Platt map is refitted on each call's batch.
"""

import warnings

import numpy as np
import pytest
from sklearn.datasets import make_classification
from sklearn.preprocessing import StandardScaler
from sklearn.utils.estimator_checks import parametrize_with_checks

from skrank import AveragePrecisionClassifier, PartialAUCClassifier
from skrank.datafits.average_precision import AveragePrecisionObjective
from skrank.datafits.partial_auc import PartialAUCObjective
from skrank.estimators._platt import platt_calibrate, platt_threshold
from skrank.pairwise_losses import get_pairwise_loss
from skrank.solvers.full_batch.auc_closed_form import exact_square_auc
from skrank.solvers.stochastic.ppd import PPDStream, ppd_adagrad, ppd_sg
from skrank.solvers.stochastic.soap import SOAPStream

_FULL_AUC = dict(fpr_range=(0, 1), loss="squared")
_STOCHASTIC = {
    # equal in distribution only: a weighted pass draws other samples than the repeated rows
    "check_sample_weight_equivalence_on_dense_data": "stochastic: weights resample the batches",
    "check_sample_weight_equivalence_on_sparse_data": "stochastic: weights resample the batches",
}


# two PPD stages instead of the default four: the checks end the same (the two weight checks xfail,
# the others pass) in about half the time; fits with the default stages are test_ppd.py's
@parametrize_with_checks(
    [AveragePrecisionClassifier(solver="soap", max_iter=5, random_state=0),
     PartialAUCClassifier(solver="ppd-sg", max_iter=2, random_state=0, **_FULL_AUC),
     PartialAUCClassifier(solver="ppd-adagrad", max_iter=2, random_state=0, **_FULL_AUC)],
    expected_failed_checks=lambda estimator: _STOCHASTIC,
    xfail_strict=True,
)
def test_sklearn_compatible_with_partial_fit(estimator, check):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        check(estimator)


def _data(n=400, d=5, seed=0, weights=(0.85,)):
    X, y = make_classification(n, d, n_informative=3, n_redundant=0, weights=list(weights), flip_y=0.05,
                               random_state=seed)
    return StandardScaler().fit_transform(X), y


def _ap_objective(X, y, alpha=1e-4, margin=0.5):
    return AveragePrecisionObjective(X, np.where(y == 1, 1.0, -1.0),
                                     get_pairwise_loss("squared_hinge", margin), alpha)


def _auc_objective(X, y, alpha=1e-4):
    return PartialAUCObjective(X, np.where(y == 1, 1.0, -1.0), (0, 1), get_pairwise_loss("squared"), alpha)


# --- one call is the solver's epoch ---------------------------------------------------------


@pytest.mark.parametrize("optimizer", ["adam", "sgd", "momentum"])
def test_soap_partial_fit_is_one_epoch_of_fit(optimizer):
    X, y = _data()
    # alpha=None is 1/n in fit but 1e-4 in partial_fit (a stream has no n): give both the same
    streamed = AveragePrecisionClassifier(solver="soap", optimizer=optimizer, random_state=3, alpha=1e-4)
    streamed.partial_fit(X, y, classes=[0, 1])
    fitted = AveragePrecisionClassifier(solver="soap", optimizer=optimizer, max_iter=1, random_state=3,
                                        alpha=1e-4)
    fitted.fit(X, y)
    history = fitted.objective_history_
    assert history[1] < history[0]  # so fit returns its epoch's end, not its start
    for name in ("coef_", "ranking_coef_", "score_intercept_", "intercept_", "calibration_"):
        np.testing.assert_array_equal(getattr(streamed, name), getattr(fitted, name), err_msg=name)
    assert streamed.n_iter_ == 1
    stream = streamed._streams[0]
    n_neg = int(np.sum(y == 0))
    assert stream.t == -(-n_neg // (64 - 8))  # ceil(N- / (B - B+)) steps
    np.testing.assert_array_equal(stream.totals, [np.sum(y == 1), n_neg])


@pytest.mark.parametrize("solver, function", [("ppd-sg", ppd_sg), ("ppd-adagrad", ppd_adagrad)])
def test_ppd_partial_fit_is_the_first_steps_of_a_stage(solver, function):
    X, y = _data(n=1000)
    streamed = PartialAUCClassifier(solver=solver, random_state=3, batch_size=32, **_FULL_AUC)
    streamed.partial_fit(X, y, classes=[0, 1])
    # one pass: n // batch_size steps of stage 0, whose average so far is coef_; a stream
    # steps with step=1 (PPD-AdaGrad's fit takes 10, too large for a stream's first steps)
    objective = _auc_objective(X, y)
    ref = function(objective, objective.penalty, max_iter=1, inner_iter0=1000 // 32, batch_size=32, tol=0.0,
                   step=1.0, random_state=3)
    assert ref.n_iter == 1 and ref.info["stages_redone"] == 0
    np.testing.assert_array_equal(streamed.ranking_coef_[0], ref.coef)
    platt_calibrate(ref, X, np.where(y == 1, 1.0, -1.0))
    np.testing.assert_array_equal(streamed.calibration_[0], ref.info["calibration"])
    assert streamed.intercept_[0] == ref.info["calibration"][1]
    np.testing.assert_array_equal(streamed.coef_[0], ref.info["calibration"][0] * ref.coef)
    stream = streamed._streams[0]
    assert (stream.stage, stream.t, stream.passes) == (0, 1000 // 32, 1)


@pytest.mark.parametrize("adagrad", [False, True])
def test_ppd_stages_end_wherever_their_steps_fall(adagrad):
    X, y = _data(n=256)
    y_pm = np.where(y == 1, 1.0, -1.0)
    step = 3.0 if adagrad else 1.0  # steps whose stages fit's safeguard keeps on this small table
    stream = PPDStream(alpha=1e-4, margin=1.0, adagrad=adagrad, step=step, inner_iter0=4, random_state=5,
                       n_features=5)
    for _ in range(4):  # 4 steps a pass: stage 0 is the first pass, stage 1 (12 steps) the next three
        stream.partial(X, y_pm)
    assert (stream.stage, stream.t, stream.passes, stream.samples) == (2, 0, 4, 16 * 64)
    objective = _auc_objective(X, y)
    ref = (ppd_adagrad if adagrad else ppd_sg)(objective, objective.penalty, max_iter=2, inner_iter0=4,
                                               step=step, tol=0.0, random_state=5)
    assert ref.n_iter == 2 and ref.info["stages_redone"] == 0
    np.testing.assert_array_equal(stream.coef, ref.coef)  # the start of stage 2: stage 1's average
    assert stream.eta == stream.eta0 / 9  # eta_0 / 3^k
    # the dual restarts at its closed form on the class means of everything seen
    mu_pos, mu_neg = X[y == 1].mean(axis=0), X[y == 0].mean(axis=0)
    assert stream.start[-1] == pytest.approx(mu_neg @ ref.coef - mu_pos @ ref.coef, rel=1e-12)


# --- the state between calls ------------------------------------------------------------------


def _batch_averages(theta, X, y, loss, weight_pos, weight_neg):
    """Each positive's ``(gt1, gt2)`` on a batch holding every row of ``(X, y)`` once (Algorithm 2)."""
    h = 1.0 / (1.0 + np.exp(-(X @ theta[:-1] + theta[-1])))
    mult = np.where(y > 0, weight_pos, weight_neg)
    out = []
    for i in np.flatnonzero(y > 0):
        v = loss.value(h[i] - h) * mult
        out.append([v[y > 0].sum() / len(y), v.sum() / len(y)])
    return np.array(out)


def test_soap_moving_averages_persist_for_rows_seen_again():
    # 4 positives and 12 negatives per chunk, B+ = 4 and B = 16: one step per epoch whose batch
    # holds every row of the chunk once, so that its averages can be written down
    rng = np.random.default_rng(0)
    positives = rng.normal(size=(4, 3)) + 0.5
    X_a = np.vstack([positives, rng.normal(size=(12, 3))])
    X_b = np.vstack([positives[::-1], rng.normal(size=(12, 3))])  # the same positives, reordered
    y = np.array([1.0] * 4 + [-1.0] * 12)
    loss, gamma = get_pairwise_loss("squared_hinge", 0.5), 0.3
    stream = SOAPStream(loss, 0.0, batch_size=16, positives_per_batch=4, gamma=gamma, optimizer="sgd",
                        learning_rate=0.5, random_state=0, n_features=3)
    wp, wn = (4 / 16) / (4 / 16), (12 / 16) / (12 / 16)  # the class mix of the batch is the data's
    data = stream.prepare(X_a, y)
    theta = stream.theta.copy()  # the start, computed on this first batch
    stream.epoch(data)
    g_a = _batch_averages(theta, X_a, y, loss, wp, wn)
    np.testing.assert_allclose(stream.moving_averages(data), g_a, rtol=1e-12)  # first visit: set
    theta = stream.theta.copy()
    data = stream.prepare(X_b, y)
    np.testing.assert_array_equal(data.slot, [3, 2, 1, 0])  # keyed by content, not by position
    stream.epoch(data)
    g_b = _batch_averages(theta, X_b, y, loss, wp, wn)
    np.testing.assert_allclose(stream.moving_averages(data), (1 - gamma) * g_a[::-1] + gamma * g_b,
                               rtol=1e-12)
    # a new positive starts from its first batch averages, the others go on averaging
    X_c = np.vstack([positives[:3], rng.normal(size=(1, 3)), rng.normal(size=(12, 3))])
    before = stream.u[:3].copy()
    theta = stream.theta.copy()
    data = stream.prepare(X_c, y)
    np.testing.assert_array_equal(data.slot, [0, 1, 2, 4])
    stream.epoch(data)
    g_c = _batch_averages(theta, X_c, y, loss, wp, wn)
    u = stream.moving_averages(data)
    np.testing.assert_allclose(u[:3], (1 - gamma) * before + gamma * g_c[:3], rtol=1e-12)
    np.testing.assert_allclose(u[3], g_c[3], rtol=1e-12)
    assert len(stream._index) == 5 and stream.t == 3 and stream.passes == 3
    np.testing.assert_array_equal(stream.totals, [12, 36])


def test_soap_class_weights_come_from_the_running_totals(monkeypatch):
    import skrank.solvers.stochastic.soap as soap_module

    weights = []

    def record(*args):
        weights.append(args[21:23])  # weight_pos, weight_neg
        return kernel(*args)

    kernel = soap_module.soap_steps
    monkeypatch.setattr(soap_module, "soap_steps", record)
    X, y = _data(300, seed=1)
    y_pm = np.where(y == 1, 1.0, -1.0)
    n_pos, n_neg = int(np.sum(y == 1)), int(np.sum(y == 0))
    chunk = np.concatenate([np.flatnonzero(y == 1), np.flatnonzero(y == 0)[:100]])  # richer in positives
    stream = SOAPStream(get_pairwise_loss("squared_hinge", 0.5), 1e-4, batch_size=64, positives_per_batch=8,
                        random_state=0, n_features=5)
    stream.partial(X, y_pm)
    stream.partial(X[chunk], y_pm[chunk])
    np.testing.assert_array_equal(stream.totals, [2 * n_pos, n_neg + 100])
    total = 2 * n_pos + n_neg + 100
    # the class mix of everything seen, not the chunk's, against the batch's 8 of 64
    assert weights == [((n_pos / 300) / (8 / 64), (n_neg / 300) / (56 / 64)),
                       ((2 * n_pos / total) / (8 / 64), ((n_neg + 100) / total) / (56 / 64))]


def test_ppd_state_is_kept_between_calls():
    X, y = _data(n=600)
    y_pm = np.where(y == 1, 1.0, -1.0)
    stream = PPDStream(alpha=1e-4, margin=1.0, adagrad=True, class_ratio="online", random_state=0,
                       n_features=5)
    stream.partial(X[y == 0][:50], y_pm[y == 0][:50])  # one class only: counted, no step yet
    assert stream.units is None and stream.stage is None and stream.t == 0
    np.testing.assert_array_equal(stream.coef, np.zeros(5))
    stream.partial(X[:300], y_pm[:300])
    units, G = stream.units, stream.G.copy()
    assert stream.stage == 0 and stream.t == 300 // 64 and stream.stats[0] + stream.stats[1] == 64 * 4
    stream.partial(X[300:], y_pm[300:])
    assert stream.units == units  # from the first batch with both classes
    assert stream.t == 2 * (300 // 64) and not np.array_equal(stream.G, G)
    assert stream.stats[0] + stream.stats[1] == 64 * 8  # Algorithm 4's counts go on
    np.testing.assert_array_equal(stream.totals, [np.sum(y == 1), 50 + np.sum(y == 0)])
    p, q = stream.class_ratio()
    assert p == pytest.approx(y.mean(), abs=0.08) and q == stream.stats[3]


def test_platt_map_is_refitted_on_each_batch():
    X, y = _data(n=600)
    weights = np.random.default_rng(1).integers(1, 4, size=600).astype(float)
    for est in (AveragePrecisionClassifier(solver="soap", random_state=0),
                PartialAUCClassifier(solver="ppd-sg", random_state=0, **_FULL_AUC)):
        est.partial_fit(X[:300], y[:300], classes=[0, 1])
        est.partial_fit(X[300:], y[300:], sample_weight=weights[300:])
        _, calibration = platt_threshold(X[300:] @ est.ranking_coef_[0], np.where(y[300:] == 1, 1.0, -1.0),
                                         weights[300:])
        assert est.intercept_[0] == calibration[1]
        np.testing.assert_array_equal(est.calibration_[0], calibration)
        np.testing.assert_allclose(est.decision_function(X), calibration[0] * X @ est.ranking_coef_[0]
                                   + calibration[1], rtol=1e-10, atol=1e-10)


# --- streams lower the objective --------------------------------------------------------------


def test_repeated_soap_partial_fit_lowers_the_exact_objective():
    X, y = _data(n=2000, seed=2)
    objective = _ap_objective(X, y)
    est = AveragePrecisionClassifier(solver="soap", random_state=0)
    values = []
    for epoch in range(8):
        for start in range(0, 2000, 500):
            est.partial_fit(X[start:start + 500], y[start:start + 500], classes=[0, 1])
            if epoch == 0 and start == 0:
                first_start = _ap_objective(X[:500], y[:500]).start()
        values.append(objective.value(np.append(est.ranking_coef_[0], est.score_intercept_[0])))
    assert est.n_iter_ == 32
    assert values[0] < objective.value(first_start)
    assert values[-1] < values[0]
    best = AveragePrecisionClassifier(solver="lbfgs").fit(X, y).objective_
    assert values[-1] <= 0.97 * best  # F < 0: within 3% of the L-BFGS fit


@pytest.mark.parametrize("solver", ["ppd-sg", "ppd-adagrad"])
def test_repeated_ppd_partial_fit_lowers_the_exact_objective(solver):
    X, y = _data(n=2000, d=8, seed=2)
    objective = _auc_objective(X, y)
    est = PartialAUCClassifier(solver=solver, random_state=0, **_FULL_AUC)
    values = []
    for _ in range(8):
        for start in range(0, 2000, 500):
            est.partial_fit(X[start:start + 500], y[start:start + 500], classes=[0, 1])
        values.append(objective.value(est.ranking_coef_[0]))
    assert est.n_iter_ == 32
    assert values[0] < objective.value(np.zeros(8))  # F(0) = margin^2 = 1, the start
    assert values[-1] < values[0]
    assert values[-1] <= 1.02 * exact_square_auc(objective, objective.penalty).objective


@pytest.mark.parametrize("solver", ["ppd-sg", "ppd-adagrad"])
def test_weighted_ppd_partial_fit_draws_the_weighted_sample(solver):
    X, y = _data(n=1000, seed=4)
    weights = np.where(X[:, 0] > 0.5, 8.0, 1.0)  # weights that move the minimiser
    est = PartialAUCClassifier(solver=solver, random_state=0, batch_size=16, **_FULL_AUC)
    for _ in range(10):
        for start in range(0, 1000, 250):
            chunk = slice(start, start + 250)
            est.partial_fit(X[chunk], y[chunk], classes=[0, 1], sample_weight=weights[chunk])
    weighted = PartialAUCObjective(X, np.where(y == 1, 1.0, -1.0), (0, 1), get_pairwise_loss("squared"), 1e-4,
                                   sample_weight=weights)
    best = exact_square_auc(weighted, weighted.penalty).objective
    assert weighted.value(est.ranking_coef_[0]) <= 1.02 * best
    totals = [weights[y == 1].sum(), weights[y == 0].sum()]
    np.testing.assert_allclose(est._streams[0].totals, 10 * np.array(totals))  # ten passes over each row


# --- estimator rules ------------------------------------------------------------------------


def _streaming_estimators():
    return [AveragePrecisionClassifier(solver="soap", random_state=0),
            PartialAUCClassifier(solver="ppd-sg", random_state=0, **_FULL_AUC),
            PartialAUCClassifier(solver="ppd-adagrad", random_state=0, **_FULL_AUC)]


@pytest.mark.parametrize("est", _streaming_estimators(), ids=["soap", "ppd-sg", "ppd-adagrad"])
def test_classes_rules(est):
    X, y = _data()
    with pytest.raises(ValueError, match="classes must be passed"):
        est.partial_fit(X, y)
    with pytest.raises(ValueError, match="not in classes"):
        est.partial_fit(X, np.where(y == 1, 2, 0), classes=[0, 1])
    est.partial_fit(X, y, classes=[0, 1])
    with pytest.raises(ValueError, match="differs"):
        est.partial_fit(X, y, classes=[0, 1, 2])
    with pytest.raises(ValueError, match="features"):
        est.partial_fit(X[:, :3], y)
    with pytest.raises(ValueError, match="balanced"):
        type(est)(**{**est.get_params(), "class_weight": "balanced"}).partial_fit(X, y, classes=[0, 1])
    three = type(est)(**est.get_params())
    three.partial_fit(X[:50], y[:50] * 0, classes=[0, 1, 2])  # one class: no step for any problem
    assert three.coef_.shape == (3, 5) and three.calibration_.shape == (3, 2)
    np.testing.assert_array_equal(three.coef_, 0.0)
    three.partial_fit(X, np.where(X[:, 0] > 0.5, 2, y))
    assert np.all(np.abs(three.coef_).sum(axis=1) > 0)  # one-vs-rest, every problem has both now
    assert three.predict(X).shape == (400,)


def test_partial_fit_needs_a_streaming_solver():
    assert not hasattr(AveragePrecisionClassifier(), "partial_fit")
    assert not hasattr(AveragePrecisionClassifier(solver="lbfgs"), "partial_fit")
    for solver in ("auto", "lbfgs", "exact", "agd-sbcd", "dca", "prox-dca"):
        assert not hasattr(PartialAUCClassifier(solver=solver), "partial_fit")
    for est in _streaming_estimators():
        assert hasattr(est, "partial_fit")
    with pytest.raises(ValueError, match="needs fpr_range"):
        PartialAUCClassifier(solver="ppd-sg", loss="squared").partial_fit(*_data(), classes=[0, 1])


def test_partial_fit_continues_a_fit():
    X, y = _data()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ap = AveragePrecisionClassifier(solver="soap", max_iter=3, random_state=0).fit(X, y)
    stream_start = np.append(ap.ranking_coef_[0], ap.score_intercept_[0])
    ap.partial_fit(X[:200], y[:200])  # classes known from fit
    assert ap._streams[0].t > 0
    moved = np.append(ap.ranking_coef_[0], ap.score_intercept_[0]) - stream_start
    assert 0 < np.abs(moved).max() < 0.5 * np.abs(stream_start).max()  # it went on from there
    auc = PartialAUCClassifier(solver="ppd-sg", random_state=0, **_FULL_AUC).fit(X, y)
    before = auc.ranking_coef_.copy()
    auc.partial_fit(X[:200], y[:200])
    np.testing.assert_array_equal(auc._streams[0].w_init, before[0])  # the ranking direction, not A w
    assert 0 < np.abs(auc.ranking_coef_ - before).max() < 0.5 * np.abs(before).max()


@pytest.mark.parametrize("est", _streaming_estimators(), ids=["soap", "ppd-sg", "ppd-adagrad"])
def test_a_pickled_stream_goes_on_as_the_original(est):
    import pickle

    X, y = _data()
    est.partial_fit(X[:200], y[:200], classes=[0, 1])
    copy = pickle.loads(pickle.dumps(est))
    est.partial_fit(X[200:], y[200:])
    copy.partial_fit(X[200:], y[200:])
    np.testing.assert_array_equal(copy.coef_, est.coef_)
    np.testing.assert_array_equal(copy.calibration_, est.calibration_)
