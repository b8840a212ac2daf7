"""The exact average-precision surrogate (seed 002, eq. (2)): brute force and finite differences."""

import numpy as np
import pytest

from skrank.datafits.average_precision import ap_surrogate_and_score_gradients
from skrank.pairwise_losses import get_pairwise_loss


def _brute(h, y, name, margin):
    """Eq. (2) by a double loop over (anchor positive, sample)."""
    total, n_pos = 0.0, np.sum(y > 0)
    for i in np.flatnonzero(y > 0):
        A = B = 0.0
        for s in range(len(h)):
            z = h[i] - h[s]
            if name == "squared_hinge":
                v = max(0.0, margin - z) ** 2
            elif name == "logistic":
                v = np.log1p(np.exp(-z))
            else:  # sigmoid, the paper's sigmoid(c (h_s - h_i)) with c = 1
                v = 1.0 / (1.0 + np.exp(z))
            B += v
            A += v if y[s] > 0 else 0.0
        total -= A / B
    return total / n_pos


@pytest.mark.parametrize("name", ["squared_hinge", "logistic", "sigmoid"])
def test_value_and_gradient_equal_brute_force(name):
    rng = np.random.default_rng(0)
    for case in range(60):
        n = int(rng.integers(2, 40))
        h = rng.normal(size=n) * rng.uniform(0.1, 3.0)
        if case % 3 == 1:
            h = np.round(h, 1)  # ties
        y = np.where(rng.random(n) < rng.uniform(0.05, 0.7), 1.0, -1.0)
        y[0] = 1.0  # at least one positive; sometimes the only one
        margin = float(rng.uniform(0.3, 2.0))
        loss = get_pairwise_loss(name, margin)
        value, grad = ap_surrogate_and_score_gradients(h, y, loss)
        assert value == pytest.approx(_brute(h, y, name, margin), rel=1e-10, abs=1e-12)
        eps = 1e-6
        fd = [(_brute(h + eps * e, y, name, margin) - _brute(h - eps * e, y, name, margin))
              / (2 * eps) for e in np.eye(n)]
        np.testing.assert_allclose(grad, fd, rtol=1e-5, atol=1e-6)


def test_perfect_separation_by_more_than_the_margin_gives_minus_one():
    h = np.array([5.0, 4.0, 0.0, -1.0])
    y = np.array([1.0, 1.0, -1.0, -1.0])
    value, grad = ap_surrogate_and_score_gradients(h, y, get_pairwise_loss("squared_hinge", 1.0))
    assert value == pytest.approx(-1.0)
    np.testing.assert_allclose(grad, 0.0, atol=1e-12)


def test_objective_gradient_and_an_lbfgs_fit_raise_training_ap():
    from sklearn.datasets import make_classification
    from sklearn.metrics import average_precision_score
    from sklearn.preprocessing import StandardScaler

    from skrank.datafits.average_precision import AveragePrecisionObjective
    from skrank.solvers.full_batch.lbfgs import lbfgs

    X, y01 = make_classification(400, 6, n_informative=3, weights=[0.9], flip_y=0.05,
                                 random_state=0)
    X = StandardScaler().fit_transform(X)
    y = np.where(y01 == 1, 1.0, -1.0)
    obj = AveragePrecisionObjective(X, y, get_pairwise_loss("squared_hinge"), 1e-3)
    rng = np.random.default_rng(1)
    theta = rng.normal(size=7) * 0.3  # (w, b)
    value, grad = obj.value_and_grad(theta)
    assert value == pytest.approx(obj.value(theta), rel=1e-12)
    h = 1.0 / (1.0 + np.exp(-(X @ theta[:6] + theta[6])))
    ref, _ = ap_surrogate_and_score_gradients(h, y, get_pairwise_loss("squared_hinge"))
    assert value == pytest.approx(ref + 0.5e-3 * theta[:6] @ theta[:6], rel=1e-12)
    eps = 1e-6
    fd = [(obj.value(theta + eps * e) - obj.value(theta - eps * e)) / (2 * eps) for e in np.eye(7)]
    np.testing.assert_allclose(grad, fd, rtol=1e-5, atol=1e-8)
    res = lbfgs(obj, obj.penalty, coef_init=theta)
    assert res.objective < obj.value(theta)
    assert (average_precision_score(y01, X @ res.coef[:6])
            > average_precision_score(y01, X @ theta[:6]))
    start = obj.start()
    assert np.std(X @ start[:6]) == pytest.approx(1.0)
    assert np.mean(X @ start[:6] + start[6]) == pytest.approx(0.0, abs=1e-12)
    with pytest.raises(ValueError, match="positive"):
        AveragePrecisionObjective(X, -np.ones(400), get_pairwise_loss("squared_hinge"), 0.0)
