"""Arrays where they live: one interface for NumPy, array-API libraries and Dask.

The estimators ask this module, not the kind of an array, how to check an
input, compute scores, turn them into labels or probabilities and bring a
vector to the host.  NumPy is one array namespace among others (through
``array_api_compat``); a Dask array goes through the same functions block
by block of rows, lazily.
"""

import functools

import numpy as np
from scipy.special import expit
from sklearn import get_config

from .array_api_design import (
    array_api_namespace,
    check_array_api_array,
    compat_module,
    device_of,
    to_namespace,
    to_numpy,
)
from .dask_design import check_dask_array, finite_lazily, is_dask_array
from .dispatch import external_kind


def namespace(x):
    """The array namespace of ``x``: NumPy's (wrapped for the array API) for NumPy arrays."""
    return compat_module().array_namespace(x)


def check_where_it_lives(X):
    """An external ``X`` (Dask, or an array-API array) checked where it lives, on its device.

    Raises
    ------
    ValueError
        For an array-API array without scikit-learn's array API dispatch.
    """
    if is_dask_array(X):
        return check_dask_array(X)
    if not get_config()["array_api_dispatch"]:
        raise ValueError(
            f"X is {external_kind(X)}: fitting or predicting where it lives needs scikit-learn's array API "
            "dispatch, sklearn.set_config(array_api_dispatch=True), with SCIPY_ARRAY_API=1 set in the "
            "environment before SciPy is imported. Or pass a NumPy array."
        )
    return check_array_api_array(X, array_api_namespace(X))


def to_host(v):
    """``v`` as a NumPy array: a Dask array computed, an array-API array copied to the host."""
    if is_dask_array(v):
        return np.asarray(v.compute())
    if array_api_namespace(v) is not None:
        return to_numpy(v)
    return np.asarray(v)


def linear_scores(X, coef, intercept):
    """``X @ coef + intercept`` where ``X`` lives (``coef``, ``intercept``: NumPy).

    Lazy for a Dask ``X``, whose computation raises the ValueError of NaN
    or infinity in ``X``; on the device of an array-API ``X``.
    """
    if is_dask_array(X):
        return finite_lazily(X) @ coef + intercept
    xp = array_api_namespace(X)
    if xp is None:
        return np.asarray(X @ coef + intercept)
    device = device_of(X)
    return X @ to_namespace(coef, xp, device) + to_namespace(intercept, xp, device)


def one_column_flat(scores):
    """``scores`` of shape ``(n, 1)`` as a vector; wider ones as given."""
    if scores.shape[1] != 1:
        return scores
    if is_dask_array(scores):
        return scores.ravel()
    return namespace(scores).reshape(scores, (-1,))


def labels(scores, classes):
    """``classes[1]`` where a single column of ``scores`` is positive, else the class of the largest score.

    Parameters
    ----------
    scores : array of shape (n,) or (n, n_classes)
    classes : ndarray
        The class labels (NumPy).

    Returns
    -------
    array of shape (n,)
        In the namespace of ``scores``, except labels that an array library
        cannot hold (strings), which stay NumPy.
    """
    if is_dask_array(scores):
        of_block = functools.partial(labels, classes=classes)
        if scores.ndim == 1:
            return scores.map_blocks(of_block, dtype=classes.dtype)
        return scores.rechunk({1: -1}).map_blocks(of_block, drop_axis=1, dtype=classes.dtype)
    xp = namespace(scores)
    index = xp.astype(scores > 0, xp.int64) if scores.ndim == 1 else xp.argmax(scores, axis=1)
    if isinstance(scores, np.ndarray) or classes.dtype.kind not in "biuf":
        return classes[to_numpy(index)]
    return xp.take(to_namespace(classes, xp, device_of(scores)), index, axis=0)


def probabilities(scores):
    """Class probabilities from decision scores: ``[1 - p, p]`` of one column, else normalised sigmoids.

    Parameters
    ----------
    scores : array of shape (n,) or (n, n_classes)

    Returns
    -------
    array of shape (n, 2) or (n, n_classes)
        In the namespace of ``scores``.
    """
    if is_dask_array(scores):
        if scores.ndim == 1:
            return scores.map_blocks(probabilities, new_axis=1, chunks=(scores.chunks[0], (2,)),
                                     dtype=np.float64)
        return scores.rechunk({1: -1}).map_blocks(probabilities, dtype=np.float64)
    xp = namespace(scores)
    p = sigmoid(scores)
    if p.ndim == 1:
        return xp.stack([1.0 - p, p], axis=1)
    return p / xp.sum(p, axis=1, keepdims=True)


def sigmoid(scores):
    """The logistic sigmoid of each score where it lives (lazily for Dask), of any shape."""
    if is_dask_array(scores):
        return scores.map_blocks(sigmoid, dtype=np.float64)
    if isinstance(scores, np.ndarray):
        return expit(scores)
    xp = namespace(scores)
    return 1.0 / (1.0 + xp.exp(-scores))


def indicator(scores):
    """An indicator matrix of the positive ``scores``: 1 where a score is positive, else 0 (int64).

    Where ``scores`` lives: lazily for Dask, in the namespace and on the
    device of an array-API array.
    """
    if is_dask_array(scores):
        return scores.map_blocks(indicator, dtype=np.int64)
    xp = namespace(scores)
    return xp.astype(scores > 0, xp.int64)


def two_valued(scores, values):
    """``values[1]`` where a score is positive, else ``values[0]``: an indicator in a ``y``'s own two values.

    Where ``scores`` lives, as :func:`indicator`.

    Parameters
    ----------
    scores : array of any shape
    values : ndarray of shape (2,)
        The value of a nonpositive score, then of a positive one (NumPy).

    Returns
    -------
    array of the shape of ``scores``, of the dtype of ``values``
    """
    if is_dask_array(scores):
        return scores.map_blocks(two_valued, values=values, dtype=values.dtype)
    positive = indicator(scores)
    if isinstance(scores, np.ndarray):
        return values[positive]
    xp = namespace(scores)
    flat = xp.take(to_namespace(values, xp, device_of(scores)), xp.reshape(positive, (-1,)), axis=0)
    return xp.reshape(flat, positive.shape)


def log(values):
    """The natural logarithm of ``values`` where they live (lazily for Dask)."""
    if is_dask_array(values):
        return np.log(values)
    return namespace(values).log(values)
