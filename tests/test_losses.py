import numpy as np
import pytest
from scipy.optimize import minimize_scalar

from skrank.losses import get_loss, loss_derivative, loss_level, loss_prox, loss_value

NAMES = ["logistic", "hinge", "squared_hinge", "squared", "absolute", "huber"]
rng = np.random.default_rng(1)


def reference_value(name, t, eps=1.0):
    if name == "logistic":
        return np.logaddexp(0.0, t)
    if name == "hinge":
        return np.maximum(1 + t, 0)
    if name == "squared_hinge":
        return np.maximum(1 + t, 0) ** 2
    if name == "squared":
        return t**2 / 2
    if name == "absolute":
        return np.abs(t)
    return np.where(np.abs(t) <= eps, t**2 / 2, eps * (np.abs(t) - eps / 2))


@pytest.mark.parametrize("name", NAMES)
def test_value_and_derivative(name):
    loss = get_loss(name)
    t = rng.normal(scale=3, size=200)
    np.testing.assert_allclose(loss.value(t), reference_value(name, t), rtol=1e-12, atol=1e-14)
    h = 1e-6
    fd = (reference_value(name, t + h) - reference_value(name, t - h)) / (2 * h)
    np.testing.assert_allclose(loss.derivative(t), fd, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("c", [1e-3, 0.3, 2.0, 50.0])
def test_prox_against_scalar_minimisation(name, c):
    loss = get_loss(name)
    v = rng.normal(scale=4, size=25)
    z = loss.prox(v, c)
    for vi, zi in zip(v, z):
        f = lambda x: c * reference_value(name, np.array(x)) + (x - vi) ** 2 / 2  # noqa: E731
        ref = minimize_scalar(f, bracket=(vi - c - 2, vi + 1), tol=1e-12)
        assert f(zi) <= f(ref.x) + 1e-10


@pytest.mark.parametrize("name", NAMES)
def test_stable_for_huge_arguments(name):
    loss = get_loss(name)
    t = np.array([-1e6, -1e3, 1e3, 1e6])
    for arr in (loss.value(t), loss.derivative(t), loss.prox(t, 1e-7), loss.prox(t, 1e5)):
        assert np.all(np.isfinite(arr))
    assert np.all(np.isfinite(get_loss(name).prox(np.array([1e6]), 1e6)))


def test_logistic_prox_with_tiny_rho_large_c():
    # ADMM starts with rho ~ 1e-5, so c = sigma / rho can be 1e5.
    z = get_loss("logistic").prox(np.array([0.0, 10.0, -10.0]), 1e5)
    s = 1 / (1 + np.exp(-z))
    np.testing.assert_allclose(1e5 * s + z - np.array([0.0, 10.0, -10.0]), 0, atol=1e-6)


def test_errors_and_metadata():
    with pytest.raises(ValueError, match="Unknown loss"):
        get_loss("cosh")
    with pytest.raises(ValueError, match="epsilon"):
        get_loss("huber", epsilon=0.0)
    assert get_loss("logistic").task == "classification"
    assert get_loss("huber", epsilon=2.0).param == 2.0


def test_logistic_prox_hard_cases_solve_the_optimality_equation():
    # Newton without safeguards can bounce between the bracket's ends here.
    rng_ = np.random.default_rng(7)
    v = np.concatenate([[2.86935794], rng_.normal(scale=20, size=20000)])
    c = np.concatenate([[33.124], np.exp(rng_.uniform(-8, 12, size=20000))])
    loss = get_loss("logistic")
    z = np.array([loss.prox(np.array([vi]), ci)[0] for vi, ci in zip(v[:2000], c[:2000])])
    resid = c[:2000] / (1 + np.exp(-z)) + z - v[:2000]
    assert np.max(np.abs(resid) / (1 + c[:2000])) < 1e-10
    assert z[0] == pytest.approx(-1.806, abs=1e-3)


def test_loss_level_is_the_threshold_of_the_monotone_losses():
    from skrank.losses import loss_level

    t = np.linspace(-8, 8, 2001)
    for name in ("logistic", "hinge", "squared_hinge"):
        loss = get_loss(name)
        values = loss.value(t)
        for v in (-0.5, 0.0, 1e-3, 0.3, 0.6931, 2.0, 35.0):
            level = loss_level(loss.code, v, 0.0)
            np.testing.assert_array_equal(values > v, t > level)
    for name in ("squared", "absolute", "huber"):
        loss = get_loss(name, epsilon=0.7)
        values = loss.value(t)
        for v in (-0.5, 0.0, 1e-3, 0.2, 0.245, 0.3, 2.0):
            level = loss_level(loss.code, v, loss.param)
            np.testing.assert_array_equal(values > v, np.abs(t) > level)


@pytest.mark.parametrize("kernel", [loss_value, loss_derivative, loss_level])
def test_an_unknown_loss_code_raises(kernel):
    # a compiled dispatcher must not fall through to some other loss
    with pytest.raises(ValueError, match="unknown loss code"):
        kernel(99, 0.5, 1.0)
    with pytest.raises(ValueError, match="unknown loss code"):
        loss_prox(99, 0.5, 1.0, 1.0)


@pytest.mark.parametrize("name", ["logistic", "squared_hinge", "squared", "huber", "hinge", "absolute"])
def test_second_derivative_matches_finite_differences_of_the_derivative(name):
    loss = get_loss(name, epsilon=0.7) if name == "huber" else get_loss(name)
    # away from the kinks (-1 for the hinges, 0 and +-0.7 for the regression losses)
    t = np.array([-3.1, -1.6, -0.4, 0.3, 0.55, 1.3, 2.9])
    value, first, second = loss.derivatives(t)
    h = 1e-6
    fd = (loss.derivative(t + h) - loss.derivative(t - h)) / (2 * h)
    assert np.allclose(second, fd, atol=1e-6)
    assert np.allclose(value, loss.value(t)) and np.allclose(first, loss.derivative(t))
    # alone, as the Newton solver's curvature asks for it; at the kinks too (-1, 0, +-0.7)
    assert np.allclose(loss.second_derivative(t), fd, atol=1e-6)
    kinks = np.array([-1.0, 0.0, -0.7, 0.7, 800.0, -800.0])
    assert np.array_equal(loss.second_derivative(kinks), loss.derivatives(kinks)[2])


@pytest.mark.parametrize("name", ["logistic", "squared_hinge", "squared", "huber", "hinge", "absolute"])
def test_cvxpy_expression_is_the_loss(name):
    cp = pytest.importorskip("cvxpy")
    loss = get_loss(name, epsilon=0.7) if name == "huber" else get_loss(name)
    t = np.array([-3.1, -1.0, -0.4, 0.0, 0.55, 1.3, 2.9])
    assert np.allclose(loss.cvxpy_expression(cp, cp.Constant(t)).value, loss.value(t))


@pytest.mark.parametrize("name", ["logistic", "hinge", "squared_hinge", "squared", "absolute", "huber"])
def test_conjugate_is_the_supremum_over_a_grid(name):
    """``l*(a) = sup_t a t - l(t)``, by brute force over a fine grid of ``t``."""
    loss = get_loss(name, epsilon=0.7)
    t = np.linspace(-60.0, 60.0, 400001)
    lt = loss.value(t)
    for a in [-0.9, -0.3, 0.0, 0.2, 0.5, 0.99, 1.0, 1.7]:
        brute = float(np.max(a * t - lt))
        conj = float(loss.conjugate(np.array([a]))[0])
        if np.isfinite(conj):
            assert abs(brute - conj) <= 1e-3 * (1.0 + abs(conj))
        else:  # outside the domain the supremum grows without bound
            assert brute > 10.0


def test_the_estimators_accept_the_losses_of_the_loss_table():
    # a loss added to skrank.losses reaches the estimators of its task with nothing else to edit
    from skrank.estimators import (
        RankADMMClassifier,
        RankADMMRegressor,
        SpectralRiskClassifier,
        SpectralRiskRegressor,
    )
    from skrank.losses import loss_names

    expected = {
        RankADMMClassifier: loss_names("classification"),
        RankADMMRegressor: loss_names("regression"),
        SpectralRiskClassifier: loss_names("classification", smooth=True),
        SpectralRiskRegressor: loss_names("regression", smooth=True),
    }
    for Estimator, names in expected.items():
        (options,) = Estimator._parameter_constraints["loss"]
        assert set(options.options) == set(names), Estimator.__name__
        line = next(line for line in Estimator.__doc__.splitlines() if line.strip().startswith("loss :"))
        assert line.strip().startswith("loss : {" + ", ".join(f'"{name}"' for name in names) + "}")
    assert set(loss_names("regression", smooth=False)) == {"absolute"}
    assert set(loss_names("classification", smooth=False)) == {"hinge"}


@pytest.mark.parametrize("epsilon", [0.0, -1.0, np.inf, np.nan])
def test_a_loss_that_takes_epsilon_refuses_a_bad_one_by_name(epsilon):
    with pytest.raises(ValueError, match="huber loss's epsilon must be a positive finite number"):
        get_loss("huber", epsilon=epsilon)
    assert get_loss("squared", epsilon=epsilon).param == 0.0  # the others ignore it
