"""SOTA-s (Zhu, Wu, Wang and Yang 2022) for the two-way partial AUC: fit, partial_fit and its state."""

import warnings

import numpy as np
import pytest
from sklearn.datasets import load_breast_cancer, make_classification
from sklearn.exceptions import ConvergenceWarning
from sklearn.preprocessing import StandardScaler

from skrank import PartialAUCClassifier
from skrank.datafits.partial_auc import PartialAUCObjective
from skrank.metrics import two_way_partial_auc_score
from skrank.pairwise_losses import get_pairwise_loss
from skrank.solvers.stochastic.sota import GROW, SHRINK, SOTAStream, default_temperature, sota_s

FPR_MAX, TPR_MIN = 0.3, 0.5


@pytest.fixture(scope="module")
def problem():
    X, y = make_classification(600, n_features=10, weights=[0.7], flip_y=0.05, random_state=0)
    return X, y


def _tpauc(y, scores):
    return two_way_partial_auc_score(y, scores, fpr_max=FPR_MAX, tpr_min=TPR_MIN)


pytestmark = pytest.mark.filterwarnings("ignore:.*did not converge:sklearn.exceptions.ConvergenceWarning")


def _objective(X, y, loss="squared_hinge", alpha=None):
    alpha = 1.0 / X.shape[0] if alpha is None else alpha
    return PartialAUCObjective(X, np.where(y == 1, 1, -1), (0, FPR_MAX), get_pairwise_loss(loss), alpha,
                               tpr_min=TPR_MIN)


def _estimator(**options):
    options = {"random_state": 0, **options}
    return PartialAUCClassifier(fpr_range=(0, FPR_MAX), tpr_min=TPR_MIN, **options)


def test_fit_raises_the_two_way_partial_auc_to_that_of_lbfgs(problem):
    X, y = problem
    random_start = np.random.default_rng(1).normal(size=X.shape[1])
    objective = _objective(X, y)
    result = sota_s(objective, objective.penalty, coef_init=random_start, max_iter=50, random_state=0)
    assert _tpauc(y, X @ random_start) < 0.3  # 0.26
    assert _tpauc(y, X @ result.coef) > 0.75  # 0.80
    lbfgs = _estimator(solver="lbfgs", loss="squared_hinge", rank_weight=1.0).fit(X, y)
    best = _tpauc(y, lbfgs.decision_function(X))  # 0.805
    for state in range(3):  # the estimator's fit, from its default start: 0.79 to 0.80
        sota = _estimator(solver="sota-s", random_state=state).fit(X, y)
        assert abs(_tpauc(y, sota.decision_function(X)) - best) <= 0.03


def test_objective_is_the_exact_two_way_objective(problem):
    X, y = problem
    est = _estimator(solver="sota-s").fit(X, y)
    objective = _objective(X, y)
    assert est.objective_ == pytest.approx(objective.value(est.ranking_coef_.ravel()), rel=1e-12)
    assert est.objective_history_[-1] == est.objective_


def test_partial_fit_over_batches_improves(problem):
    X, y = problem
    est = _estimator(solver="sota-s")
    first = None
    for epoch in range(10):
        for start in range(0, X.shape[0], 150):
            est.partial_fit(X[start:start + 150], y[start:start + 150], classes=[0, 1])
            if first is None:  # one epoch on 150 rows from w = 0: 0.74
                first = _tpauc(y, est.decision_function(X))
    assert est.n_iter_ == 40
    after = _tpauc(y, est.decision_function(X))  # 0.80
    assert after > 0.78 and after > first + 0.03


def test_state_persists_across_partial_fit_calls(problem):
    X, y = problem
    est = _estimator(solver="sota-s").partial_fit(X[:300], y[:300], classes=[0, 1])
    stream = est._streams[0]
    steps, log_v, units = stream.steps, stream.log_v, stream.units
    seen = np.flatnonzero(~np.isnan(stream.log_u)).copy()
    first = stream.log_u[seen].copy()
    est.partial_fit(X[:300], y[:300])
    assert est._streams[0] is stream and stream.units is units
    assert stream.steps == 2 * steps and stream.log_v != log_v
    assert len(stream._index) == int(np.sum(y[:300] == 1))  # the same rows keep their entries
    assert not np.allclose(stream.log_u[seen], first)
    assert np.any(stream.m != 0.0)


def test_default_temperatures_and_refusals(problem):
    loss = get_pairwise_loss("squared_hinge")
    assert default_temperature(0.5, loss) == pytest.approx(0.5 / 0.3989423, rel=1e-6)
    assert default_temperature(0.1, loss) < default_temperature(0.3, loss) < default_temperature(1.0, loss)
    X, y = problem
    with pytest.raises(ValueError, match="fpr_range=\\(0, fpr_max\\)"):
        PartialAUCClassifier(fpr_range=(0.05, 0.3), solver="sota-s").fit(X, y)
    with pytest.raises(ValueError, match="sample_weight"):
        _estimator(solver="sota-s").fit(X, y, sample_weight=np.linspace(1, 2, X.shape[0]))
    with pytest.raises(ValueError, match="coef_init"):
        SOTAStream(loss=loss, alpha=0.0, fpr_max=0.3, tpr_min=0.5, coef_init=np.zeros(2), n_features=3)


def test_solver_function_is_reproducible(problem):
    X, y = problem
    objective = _objective(X, y, "logistic", 1e-3)
    a = sota_s(objective, objective.penalty, max_iter=5, random_state=3)
    b = sota_s(objective, objective.penalty, max_iter=5, random_state=3)
    np.testing.assert_array_equal(a.coef, b.coef)
    assert a.objective_history[-1] < a.objective_history[0]
    assert a.info["lam_p"] > a.info["lam_n"] > 0


@pytest.fixture(scope="module")
def breast_cancer():
    X, y = load_breast_cancer(return_X_y=True)
    return StandardScaler().fit_transform(X), y


def test_fit_converges_with_defaults_on_breast_cancer(breast_cancer):
    X, y = breast_cancer
    for state in range(2):
        with warnings.catch_warnings():
            warnings.simplefilter("error", ConvergenceWarning)
            est = _estimator(solver="sota-s", random_state=state).fit(X, y)
        assert est.n_iter_ < 100  # 62 to 87 epochs


def test_adapted_step_ends_no_worse_than_the_constant_step(breast_cancer, problem):
    for X, y in (breast_cancer, problem):
        objective = _objective(X, y)
        result = sota_s(objective, objective.penalty, random_state=0)
        assert result.converged
        history = result.objective_history
        assert np.all(np.diff(history[1:]) <= 0.0)  # after the first, an epoch that raises F is undone
        assert result.objective_history[-1] == pytest.approx(objective.value(result.coef), rel=1e-12)
        assert result.info["rate"] == pytest.approx(GROW ** (1 + np.sum(np.diff(history[1:]) < 0))
                                                    * SHRINK ** np.sum(np.diff(history[1:]) == 0))
        # the constant step (the stream's own epochs, as partial_fit takes them) for all 100 epochs
        constant = SOTAStream(loss=objective.loss, alpha=objective.alpha, fpr_max=FPR_MAX, tpr_min=TPR_MIN,
                              random_state=0, n_features=X.shape[1])
        data = constant.prepare(X, np.where(y == 1, 1, -1))
        for _ in range(100):
            constant.epoch(data)
        assert constant.rate == 1.0
        # breast cancer: 0.080 against 0.110; make_classification: 0.80 against 0.83
        assert history[-1] <= objective.value(constant.coef) * (1 + 1e-3)


def test_a_step_too_large_is_cut_back(problem):
    X, y = problem
    objective = _objective(X, y)
    # the constant step diverges: F ~ 1e21
    result = sota_s(objective, objective.penalty, step=10.0, random_state=0)
    assert result.converged and result.info["rate"] < 1e-2
    assert result.objective_history[-1] < 0.8 * result.objective_history[0]  # 0.68 against 1


def test_partial_fit_keeps_the_stream_rate(problem):
    X, y = problem
    est = _estimator(solver="sota-s")
    for _ in range(3):
        est.partial_fit(X, y, classes=[0, 1])
    assert est._streams[0].rate == 1.0
