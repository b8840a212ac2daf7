"""The one interface of the estimators to NumPy, array-API and Dask arrays (skrank.backends.arrays)."""

import numpy as np
import pytest
from scipy.special import expit

from skrank.backends import arrays

da = pytest.importorskip("dask.array")


def _scores(columns):
    rng = np.random.default_rng(0)
    scores = rng.normal(size=(50, columns)) * 30.0  # some far in the tails of the sigmoid
    return scores[:, 0] if columns == 1 else scores


@pytest.mark.parametrize("columns", [1, 3])
@pytest.mark.parametrize("classes", [np.array([2, 5, 7]), np.array(["a", "b", "c"])], ids=["int", "str"])
def test_labels_are_the_same_wherever_the_scores_live(columns, classes):
    scores = _scores(columns)
    classes = classes[: max(columns, 2)]
    expected = classes[(scores > 0).astype(int)] if columns == 1 else classes[np.argmax(scores, axis=1)]
    np.testing.assert_array_equal(arrays.labels(scores, classes), expected)
    lazy = arrays.labels(da.from_array(scores, chunks=7), classes)
    assert isinstance(lazy, da.Array)
    np.testing.assert_array_equal(lazy.compute(), expected)
    xp = pytest.importorskip("array_api_strict")
    on_device = arrays.labels(xp.asarray(scores), classes)
    np.testing.assert_array_equal(arrays.to_host(on_device), expected)


@pytest.mark.parametrize("columns", [1, 3])
def test_probabilities_are_the_same_wherever_the_scores_live(columns):
    scores = _scores(columns)
    p = expit(scores)
    expected = np.column_stack([1.0 - p, p]) if columns == 1 else p / p.sum(axis=1, keepdims=True)
    np.testing.assert_array_equal(arrays.probabilities(scores), expected)
    lazy = arrays.probabilities(da.from_array(scores, chunks=7))
    assert isinstance(lazy, da.Array)
    np.testing.assert_array_equal(lazy.compute(), expected)
    xp = pytest.importorskip("array_api_strict")
    np.testing.assert_allclose(arrays.to_host(arrays.probabilities(xp.asarray(scores))), expected,
                               rtol=1e-12, atol=1e-300)
    positive = expected[expected > 0]
    np.testing.assert_array_equal(arrays.log(positive), np.log(positive))


def test_linear_scores_and_one_column():
    rng = np.random.default_rng(1)
    X, coef, intercept = rng.normal(size=(40, 4)), rng.normal(size=(4, 1)), np.array([0.5])
    expected = X @ coef + intercept
    np.testing.assert_array_equal(arrays.linear_scores(X, coef, intercept), expected)
    lazy = arrays.linear_scores(da.from_array(X, chunks=(9, 4)), coef, intercept)
    np.testing.assert_allclose(lazy.compute(), expected, rtol=1e-14)
    assert arrays.one_column_flat(expected).shape == (40,)
    assert arrays.one_column_flat(lazy).shape == (40,)
    bad = X.copy()
    bad[3, 1] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        arrays.linear_scores(da.from_array(bad, chunks=(9, 4)), coef, intercept).compute()
