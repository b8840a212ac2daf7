import numpy as np
import pytest
from numpy.testing import assert_allclose

from skrank.datafits.partial_auc import negative_rank_weights, range_loss_and_score_gradients
from skrank.estimators import PartialAUCClassifier
from skrank.pairwise_losses import get_pairwise_loss


def _smooth_step(z, width):
    """The smoothed indicator written piece by piece (independent of the squared hinges)."""
    u = -np.asarray(z) / width
    upper = np.where(u <= 1, 1 - (1 - u) ** 2 / 2, 1.0)
    return np.where(u <= -1, 0.0, np.where(u <= 0, (u + 1) ** 2 / 2, upper))


@pytest.mark.parametrize("width", [0.3, 1.0, 2.5])
def test_smooth_step_values_and_derivatives(width):
    loss = get_pairwise_loss("smooth_step", width)
    z = np.linspace(-3 * width, 3 * width, 101)
    assert_allclose(loss.value(z), _smooth_step(z, width), atol=1e-12)
    assert loss.value(np.array([0.0]))[0] == pytest.approx(0.5)  # a tie counts one half, as in the metric
    eps = 1e-6
    numeric = (_smooth_step(z + eps, width) - _smooth_step(z - eps, width)) / (2 * eps)
    assert_allclose(loss.derivative(z), numeric, atol=1e-4)  # the curvature jumps at 0 and +-width


@pytest.mark.parametrize("fpr_range", [(0.0, 0.3), (0.1, 0.6), (0.0, 1.0)])
def test_smooth_step_range_sums_equal_brute_force(fpr_range):
    rng = np.random.RandomState(0)
    loss = get_pairwise_loss("smooth_step", 0.7)
    h_pos, h_neg = rng.randn(30), rng.randn(50) - 0.5
    omega = negative_rank_weights(50, fpr_range)
    total, g_pos, g_neg = range_loss_and_score_gradients(h_pos, h_neg, omega, loss)
    q = np.sort(h_neg)[::-1]
    brute = sum(omega[k] * _smooth_step(h_pos - q[k], 0.7).sum() for k in range(50))
    assert total == pytest.approx(brute, rel=1e-12)

    def f(a, b):
        return range_loss_and_score_gradients(a, b, omega, loss)[0]

    eps = 1e-6
    fd_pos = [(f(h_pos + eps * e, h_neg) - f(h_pos - eps * e, h_neg)) / (2 * eps) for e in np.eye(30)]
    fd_neg = [(f(h_pos, h_neg + eps * e) - f(h_pos, h_neg - eps * e)) / (2 * eps) for e in np.eye(50)]
    assert_allclose(g_pos, fd_pos, atol=1e-5)
    assert_allclose(g_neg, fd_neg, atol=1e-5)


def test_smooth_step_needs_a_positive_margin_and_lbfgs():
    with pytest.raises(ValueError, match="positive finite margin"):
        get_pairwise_loss("smooth_step", 0.0)
    X = np.random.RandomState(0).randn(60, 3)
    y = (X[:, 0] > 0.5).astype(int)
    with pytest.raises(ValueError, match="smooth_step"):
        PartialAUCClassifier(loss="smooth_step", solver="agd-sbcd").fit(X, y)


@pytest.mark.parametrize("name", ["squared_hinge", "logistic", "squared", "sigmoid", "smooth_step"])
def test_a_pairwise_loss_declares_its_convexity_and_whether_it_is_one_quadratic(name):
    # the solver table asks these instead of the loss's name: checked against the values themselves
    loss = get_pairwise_loss(name, 1.0)
    z = np.linspace(-6.0, 6.0, 241)
    values = loss.value(z)
    midpoint_gap = (values[:-2] + values[2:]) / 2.0 - values[1:-1]  # >= 0 on a grid for a convex loss
    assert loss.is_convex == bool(np.all(midpoint_gap >= -1e-12))
    quadratic = np.allclose(values, (loss.margin - z) ** 2, rtol=1e-12, atol=1e-12)
    assert loss.is_full_quadratic == quadratic
