"""The rank-based objective, evaluated once for every solver and test.

``F(w, b) = sum_i sigma_i L_(i) + R(w)`` with ``L_i = l(t_i)``, where
``t_i = -y_i (x_i.w + b)`` (classification, ``y`` in {-1, +1}) or
``t_i = x_i.w + b - y_i`` (regression), ``sigma`` the risk's weights of the
ascending order statistics and ``R`` the penalty.
"""

import numpy as np


def affine_map(y, task):
    """``(s, c)`` with ``t_i = s_i f_i + c_i`` for the linear prediction ``f``.

    Classification: ``s = -y``, ``c = 0``; regression: ``s = 1``, ``c = -y``.
    So ``d l(t_i) / d w = s_i l'(t_i) x_i`` and ``d l(t_i) / d b = s_i l'(t_i)``.
    """
    y = np.asarray(y, dtype=np.float64)
    if task == "classification":
        return -y, np.zeros_like(y)
    return np.ones_like(y), -y


def loss_arguments(X, y, coef, intercept, task):
    """The loss arguments ``t``: negative margins or residuals."""
    f = np.asarray(X @ coef + intercept, dtype=np.float64).ravel()
    s, c = affine_map(y, task)
    return s * f + c


def rank_objective(X, y, coef, intercept, risk, loss, penalty, sample_weight=None):
    """Value of ``F(w, b)``.

    Parameters
    ----------
    X : {ndarray, sparse matrix} of shape (n, d)
    y : ndarray of shape (n,)
        Labels in {-1, +1} for classification losses, targets otherwise.
    coef : ndarray of shape (d,)
    intercept : float
    risk : skrank.risks.BaseRisk
    loss : skrank.losses.Loss
    penalty : skrank.penalties.Penalty
    sample_weight : ndarray of shape (n,), optional
        Weights of the samples: the risk is that of the weighted empirical
        distribution (:mod:`skrank.risks`).

    Returns
    -------
    float
    """
    t = loss_arguments(X, y, coef, intercept, loss.task)
    return risk.value(loss.value(t), sample_weight) + penalty.value(coef)
