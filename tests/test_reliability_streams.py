"""Streams and stopping rules that must not fail silently.

``partial_fit`` reads the parameters at every call and names the solvers
that stream; PPD-AdaGrad's streams rank forwards; the stochastic baselines
warn when they stall short of their criterion; ``class_weight`` and
``random_state`` follow scikit-learn; ``max_iter`` bounds the non-convex
ADMM's iterations.
"""

import warnings

import numpy as np
import pytest
from sklearn.datasets import make_classification
from sklearn.exceptions import ConvergenceWarning
from sklearn.metrics import roc_auc_score
from sklearn.preprocessing import StandardScaler

from skrank import AveragePrecisionClassifier, PartialAUCClassifier
from skrank.datafits.rank_risk import RankRisk
from skrank.estimators import (
    RankADMMClassifier,
    RankADMMRegressor,
    SpectralRiskClassifier,
    SpectralRiskRegressor,
)
from skrank.losses import get_loss
from skrank.penalties import get_penalty
from skrank.risks import ERM, RankedRange, Superquantile
from skrank.solvers.full_batch.newton import smoothed_newton
from skrank.solvers.stochastic.epochs import N_ITER_NO_CHANGE, EpochLog
from skrank.solvers.stochastic.sgd import sgd

_FULL_AUC = dict(fpr_range=(0, 1), loss="squared")


def _data(n=400, d=5, seed=0):
    X, y = make_classification(n, d, n_informative=3, n_redundant=0, weights=[0.7], flip_y=0.05,
                               random_state=seed)
    return StandardScaler().fit_transform(X), y


def _streams():
    """The seven streaming setups: (estimator, regression?)."""
    return [
        (RankADMMClassifier(solver="sgd", random_state=0), False),
        (RankADMMRegressor(solver="sgd", random_state=0), True),
        (SpectralRiskClassifier(solver="sgd", random_state=0), False),
        (SpectralRiskRegressor(solver="sgd", random_state=0), True),
        (AveragePrecisionClassifier(solver="soap", random_state=0), False),
        (PartialAUCClassifier(solver="ppd-sg", random_state=0, **_FULL_AUC), False),
        (PartialAUCClassifier(solver="ppd-adagrad", random_state=0, **_FULL_AUC), False),
    ]


_IDS = ["rankadmm-clf", "rankadmm-reg", "spectral-clf", "spectral-reg", "soap", "ppd-sg", "ppd-adagrad"]


def _partial_fit(est, X, y, regression):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        if regression:
            return est.partial_fit(X, X @ [1.0, -1.0, 0.5, 0.0, 0.0] + 0.1 * y)
        return est.partial_fit(X, y, classes=[0, 1])


def _stream_alpha(stream):
    return stream.penalty.l2 if hasattr(stream, "penalty") else stream.alpha


# --- 1. every partial_fit call reads the current parameters -------------------------------------


@pytest.mark.parametrize("est, regression", _streams(), ids=_IDS)
def test_set_params_between_partial_fit_calls_takes_effect(est, regression):
    from sklearn.base import clone

    X, y = _data()
    kept, changed = clone(est), clone(est)
    _partial_fit(kept, X[:200], y[:200], regression)
    _partial_fit(kept, X[200:], y[200:], regression)
    _partial_fit(changed, X[:200], y[:200], regression)
    changed.set_params(alpha=10.0)
    _partial_fit(changed, X[200:], y[200:], regression)
    assert _stream_alpha(changed._streams[0]) == 10.0  # the stream took the new alpha
    assert np.linalg.norm(changed.coef_) < np.linalg.norm(kept.coef_)  # and stepped with it
    changed.set_params(alpha=-1.0)
    with pytest.raises(ValueError, match="alpha"):  # validated at every call
        _partial_fit(changed, X[:50], y[:50], regression)


@pytest.mark.parametrize("est, regression", _streams(), ids=_IDS)
def test_a_new_random_state_reseeds_the_stream(est, regression):
    from sklearn.base import clone

    X, y = _data()
    runs = {}
    for name, seed in (("same", 0), ("same_value", int(np.int64(0))), ("other", 7)):
        stream = clone(est)
        _partial_fit(stream, X[:200], y[:200], regression)
        stream.set_params(random_state=seed)
        _partial_fit(stream, X[200:], y[200:], regression)
        runs[name] = stream.coef_.copy()
    np.testing.assert_array_equal(runs["same"], runs["same_value"])  # an equal seed goes on
    assert not np.array_equal(runs["same"], runs["other"])  # a new one reseeds the draws


@pytest.mark.parametrize("est, name, value", [
    (PartialAUCClassifier(solver="ppd-sg", random_state=0, **_FULL_AUC), "solver", "ppd-adagrad"),
    (RankADMMClassifier(solver="sgd", random_state=0), "fit_intercept", False),
    (SpectralRiskRegressor(solver="sgd", random_state=0), "fit_intercept", False),
    (AveragePrecisionClassifier(solver="soap", random_state=0), "optimizer", "sgd"),
], ids=["ppd-solver", "sgd-fit_intercept", "sgd-regressor-fit_intercept", "soap-optimizer"])
def test_a_parameter_the_stream_state_belongs_to_cannot_change(est, name, value):
    X, y = _data()
    regression = isinstance(est, SpectralRiskRegressor)
    _partial_fit(est, X[:200], y[:200], regression)
    old = est.get_params()[name]
    est.set_params(**{name: value})
    with pytest.raises(ValueError, match=f"{name}={value!r} differs from {name}={old!r}.*fit"):
        _partial_fit(est, X[200:], y[200:], regression)
    est.set_params(**{name: old})  # set back: the stream goes on
    _partial_fit(est, X[200:], y[200:], regression)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        est.set_params(**{name: value}).fit(X, X[:, 0] if regression else y)  # fit starts anew
    _partial_fit(est, X[200:], y[200:], regression)


def test_sgd_stream_takes_the_new_risk_loss_and_step():
    X, y = _data()
    est = SpectralRiskRegressor(solver="sgd", random_state=0)
    _partial_fit(est, X[:200], y[:200], True)
    stream = est._streams[0]
    auto_step = stream.lr
    est.set_params(learning_rate=1e-3)
    _partial_fit(est, X[200:], y[200:], True)
    assert stream.lr == 1e-3
    est.set_params(learning_rate="auto", risk=ERM(), loss="huber", batch_size=16)
    _partial_fit(est, X[200:], y[200:], True)
    assert isinstance(stream.risk, ERM) and stream.loss.name == "huber" and stream.batch_size == 16
    assert stream.lr != auto_step  # derived again for the new risk, loss and batch


def test_ppd_stream_units_follow_alpha_margin_and_batch_size():
    X, y = _data()
    est = PartialAUCClassifier(solver="ppd-adagrad", random_state=0, **_FULL_AUC)
    _partial_fit(est, X[:200], y[:200], False)
    stream = est._streams[0]
    units, eta = stream.units, stream.eta
    est.set_params(margin=2.0, batch_size=16)
    _partial_fit(est, X[200:], y[200:], False)
    assert (stream.margin, stream.batch) == (2.0, 16)
    assert stream.units != units and stream.eta != eta
    assert stream.t == 200 // 64 + 200 // 16  # the second pass stepped on batches of 16


# --- 2. PPD-AdaGrad's streams rank forwards -----------------------------------------------------


@pytest.mark.parametrize("seed", range(5))
def test_ppd_adagrad_stream_of_small_batches_ranks_its_batches_forwards(seed):
    # 4 batches of 100 rows, 20 features: with fit's step=10 the first steps overshot and
    # flipped, and the stream ranked its own batches at AUC 0.25 (0.08 on some tables)
    X, y = make_classification(400, random_state=seed)
    est = PartialAUCClassifier(solver="ppd-adagrad", random_state=seed, **_FULL_AUC)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)  # no batch ranked backwards
        for _ in range(3):
            for start in range(0, 400, 100):
                batch = slice(start, start + 100)
                est.partial_fit(X[batch], y[batch], classes=[0, 1])
                if np.any(est.coef_):
                    assert roc_auc_score(y[batch], X[batch] @ est.coef_[0]) > 0.55
    assert roc_auc_score(y, est.decision_function(X)) > 0.85


@pytest.mark.parametrize("est", [PartialAUCClassifier(solver="ppd-adagrad", random_state=0, **_FULL_AUC),
                                 AveragePrecisionClassifier(solver="soap", random_state=0),
                                 RankADMMClassifier(solver="sgd", random_state=0)],
                         ids=["ppd-adagrad", "soap", "sgd"])
def test_a_stream_that_ranks_its_batch_backwards_says_so(est):
    X, y = _data()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        est.fit(X, y)
    # a batch whose labels the fitted coefficients get the wrong way round
    with pytest.warns(ConvergenceWarning, match="worse than chance.*for class 1"):
        est.partial_fit(X[:100], 1 - y[:100])


# --- 3. the stochastic baselines warn when they stall short of their criterion -------------------


def test_one_quiet_epoch_does_not_meet_the_criterion():
    log = EpochLog(1.0, "SGD", verbose=0)
    values = [0.5, 0.4, 0.41, 0.40999999, 0.41]  # the noisy F crosses its last value once
    criteria = [log.record(v, 0.0, 1.0) for v in values]
    assert criteria[3] > 1e-2  # the largest change over the last epochs
    for k in range(N_ITER_NO_CHANGE):
        criterion = log.record(0.41 * (1 + 1e-9 * k), 0.0, 1.0)
    assert criterion < 1e-8  # stalled for N_ITER_NO_CHANGE epochs: met


def test_sgd_that_stalls_above_the_optimum_warns():
    # epoch 77's objective nearly equals epoch 76's (change < 1e-5) while the neighbouring changes
    # are 1e-2: the one-epoch criterion stopped there 1.5% above the optimum, reported converged
    X, y = make_classification(200, 8, flip_y=0.1, random_state=0)
    X = StandardScaler().fit_transform(X)
    risk, loss, pen = Superquantile(0.8), get_loss("logistic"), get_penalty("l2", 1e-2)
    y_pm = np.where(y == 1, 1.0, -1.0)
    res = sgd(RankRisk(X, y_pm, risk, loss), pen, max_iter=200, tol=1e-5, random_state=2)
    assert not res.converged and res.n_iter == 200 and res.stop_criterion > 1e-5
    best = smoothed_newton(RankRisk(X, y_pm, risk, loss), pen, tol=1e-10).objective
    assert res.objective > 1.005 * best  # the stall the warning is about
    est = RankADMMClassifier(solver="sgd", risk=risk, tol=1e-5, max_iter=200, random_state=2)
    with pytest.warns(ConvergenceWarning, match="did not converge after 200 iterations"):
        est.fit(X, y)


@pytest.mark.parametrize("Estimator, solver", [(RankADMMClassifier, "lsvrg"),
                                               (SpectralRiskClassifier, "prospect"),
                                               (SpectralRiskClassifier, "sgd")])
def test_the_other_epoch_solvers_warn_at_max_iter(Estimator, solver):
    X, y = _data()
    with pytest.warns(ConvergenceWarning, match="did not converge after 3 iterations"):
        est = Estimator(solver=solver, max_iter=3, random_state=0).fit(X, y)
    assert est.n_iter_ == 3


# --- 4. partial_fit with a full-batch solver names the solvers that stream -----------------------


@pytest.mark.parametrize("est, streaming", [
    (RankADMMClassifier(), "'sgd'"),
    (RankADMMRegressor(solver="admm"), "'sgd'"),
    (SpectralRiskClassifier(solver="newton"), "'sgd'"),
    (SpectralRiskRegressor(), "'sgd'"),
    (AveragePrecisionClassifier(), "'soap'"),
    (PartialAUCClassifier(solver="lbfgs"), "'ppd-sg' or 'ppd-adagrad'"),
], ids=lambda p: type(p).__name__ if not isinstance(p, str) else "")
def test_partial_fit_with_a_full_batch_solver_names_the_streaming_ones(est, streaming):
    assert not hasattr(est, "partial_fit")
    X, y = _data()
    with pytest.raises(AttributeError, match=f"solver={est.solver!r}.*solver={streaming}"):
        est.partial_fit(X, y)


# --- 5. class_weight's values are checked ------------------------------------------------------


@pytest.mark.parametrize("Estimator", [RankADMMClassifier, SpectralRiskClassifier, PartialAUCClassifier,
                                       AveragePrecisionClassifier])
@pytest.mark.parametrize("value", [-1, np.nan])
def test_negative_class_weight_is_named(Estimator, value):
    X, y = _data()
    with pytest.raises(ValueError, match=r"class_weight gives class 0 the weight (-1|nan)"):
        Estimator(class_weight={0: value, 1: 1}).fit(X, y)
    with pytest.raises(ValueError, match="class_weight gives class 0"):
        RankADMMClassifier(solver="sgd", class_weight={0: value, 1: 1}).partial_fit(X, y, classes=[0, 1])


# --- 6. random_state=None draws from NumPy's global RandomState ----------------------------------


@pytest.mark.parametrize("make", [
    lambda: RankADMMClassifier(solver="sgd", max_iter=2),
    lambda: SpectralRiskClassifier(solver="lsvrg", max_iter=2),
    lambda: AveragePrecisionClassifier(solver="soap", max_iter=2),
    lambda: PartialAUCClassifier(solver="ppd-sg", max_iter=1, **_FULL_AUC),
    lambda: PartialAUCClassifier(solver="agd-sbcd", max_iter=1, rank_weight=1.0),
], ids=["sgd", "lsvrg", "soap", "ppd", "sbcd"])
def test_random_state_none_follows_np_random_seed(make):
    X, y = _data()
    coefs = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        for seed in (0, 0, 1):
            np.random.seed(seed)
            coefs.append(make().fit(X, y).coef_.copy())
    np.testing.assert_array_equal(coefs[0], coefs[1])
    assert not np.array_equal(coefs[0], coefs[2])


# --- 8. max_iter bounds the non-convex ADMM's iterations, all runs together ----------------------


@pytest.mark.parametrize("max_iter", [1, 30, 300])
def test_ranked_range_admm_counts_all_its_runs_within_max_iter(max_iter):
    X, y = _data(n=300, seed=3)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ConvergenceWarning)
        est = RankADMMClassifier(risk=RankedRange(m=0.05, k=0.5), max_iter=max_iter).fit(X, y)
    assert 1 <= est.n_iter_ <= max_iter
    for warning in caught:
        assert f"after {est.n_iter_} iterations" in str(warning.message)


def test_readme_ranked_range_example_reports_at_most_max_iter():
    # the README's robust classifier on churn said "did not converge after 2029 iterations"
    from sklearn.model_selection import train_test_split

    from skrank.datasets import load_tabular

    X, y = load_tabular("churn")
    X_tr, _, y_tr, _ = train_test_split(X, y, stratify=y, random_state=0)
    Z_tr = StandardScaler().fit_transform(X_tr)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ConvergenceWarning)
        robust = RankADMMClassifier(risk=RankedRange(m=0.05, k=0.5)).fit(Z_tr, y_tr)
    assert robust.n_iter_ <= robust.max_iter == 1000
    assert all(f"after {robust.n_iter_} iterations" in str(w.message) for w in caught)


@pytest.mark.parametrize("est", [
    AveragePrecisionClassifier(solver="soap", random_state=0),
    RankADMMClassifier(solver="sgd", random_state=0),
], ids=["soap", "sgd"])
def test_a_column_constant_in_the_first_batch_is_learnt_later(est):
    # the steps' units are read from the first batch; a column that is constant there must
    # still move its coefficient when later batches vary it (it decides the labels here)
    rng = np.random.default_rng(0)
    X = rng.normal(size=(600, 3))
    y = (X[:, 0] + 0.3 * rng.normal(size=600) > 0).astype(int)
    X[:200, 0] = 0.0
    est.partial_fit(X[:200], y[:200], classes=[0, 1])
    for _ in range(20):
        for start in (200, 400):
            est.partial_fit(X[start:start + 200], y[start:start + 200])
    coef = est.coef_.ravel()
    assert coef[0] > 0 and abs(coef[0]) > 2 * np.abs(coef[1:]).max()
