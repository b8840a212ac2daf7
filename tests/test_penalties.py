import numpy as np
import pytest
from scipy.optimize import minimize

from skrank.penalties import get_penalty


@pytest.mark.parametrize("kind", ["l2", "l1", "elasticnet", None])
def test_prox_minimises_its_problem(kind):
    rng = np.random.default_rng(2)
    pen = get_penalty(kind, alpha=0.7, l1_ratio=0.3)
    v = rng.normal(size=6)
    step = 0.8
    p = pen.prox(v, step)

    def f(w):
        return step * pen.value(w) + 0.5 * np.sum((w - v) ** 2)

    ref = minimize(f, v, method="Powell", options={"xtol": 1e-10, "ftol": 1e-14})
    assert f(p) <= ref.fun + 1e-9


def test_values_follow_scikit_learn_parametrisation():
    w = np.array([1.0, -2.0, 0.5])
    assert get_penalty("l2", 2.0).value(w) == pytest.approx(0.5 * 2.0 * (w @ w))
    assert get_penalty("l1", 2.0).value(w) == pytest.approx(2.0 * 3.5)
    en = get_penalty("elasticnet", 2.0, l1_ratio=0.25)
    assert en.value(w) == pytest.approx(2.0 * (0.25 * 3.5 + 0.75 / 2 * (w @ w)))


def test_subgradient_distance_is_zero_at_optimality():
    pen = get_penalty("elasticnet", 1.0, l1_ratio=0.5)
    w = np.array([0.0, 2.0])
    g = np.array([0.3, 0.5 + 0.5 * 2.0])  # |g_0| <= l1, g_1 = l1 + l2 w_1
    assert pen.subgradient_distance(w, g) == pytest.approx(0.0, abs=1e-14)
    assert pen.subgradient_distance(w, g + 1.0) > 0.5


def test_errors():
    with pytest.raises(ValueError, match="alpha"):
        get_penalty("l2", -1.0)
    with pytest.raises(ValueError, match="l1_ratio"):
        get_penalty("elasticnet", 1.0, l1_ratio=2.0)
    with pytest.raises(ValueError, match="Unknown penalty"):
        get_penalty("l3", 1.0)
