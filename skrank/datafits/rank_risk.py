"""The rank-based objective, evaluated once for every solver and test.

``F(w, b) = sum_i sigma_i L_(i) + R(w)`` with ``L_i = l(t_i)``, where
``t_i = -y_i (x_i.w + b)`` (classification, ``y`` in {-1, +1}) or
``t_i = x_i.w + b - y_i`` (regression), ``sigma`` the risk's weights of the
ascending order statistics and ``R`` the penalty.
"""

import numpy as np

from ..backends.dispatch import is_external, make_design
from .smoothed_rank_risk import SmoothedRankRisk


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


class RankRisk:
    """The data of a rank-risk fit: the training set, the risk, the loss and the sample weights.

    The rank-risk solvers take ``(datafit, penalty, **options)`` with this
    datafit and ask it for what they read (:meth:`weighted`,
    :meth:`unweighted`, :meth:`design`...); it computes the exact objective
    and, bound to a penalty, the smoothed one of the Newton solver
    (:meth:`smoothed`).

    Parameters
    ----------
    X : {ndarray, sparse matrix, Dask array, array-API array} of shape (n, d)
        The features.
    y : ndarray of shape (n,)
        Labels in {-1, +1} for classification losses, targets otherwise.
    risk : skrank.risks.BaseRisk
        The rank risk of the losses.
    loss : skrank.losses.Loss
        The loss of each sample.
    fit_intercept : bool, default=True
        Whether the model has an intercept (not penalised).
    sample_weight : ndarray of shape (n,) or None, default=None
        Weights of the samples: the risk is that of the weighted empirical
        distribution (:mod:`skrank.risks`).
    """

    def __init__(self, X, y, risk, loss, *, fit_intercept=True, sample_weight=None):
        self.X, self.y, self.risk, self.loss = X, y, risk, loss
        self.fit_intercept = bool(fit_intercept)
        self.sample_weight = sample_weight

    @property
    def merges_repeats(self):
        """Whether identical rows ``(x, y)`` may become one row of their summed weight (same objective).

        They have the same loss at every point: true for a risk whose
        weighted form integrates over the cumulative weight alone
        (``risk.merges_repeats``).
        """
        return bool(getattr(self.risk, "merges_repeats", False))

    def check_unweighted(self, solver):
        """Raise a ValueError if the fit has sample weights, which ``solver`` (its name) does not take."""
        if self.sample_weight is not None:
            raise ValueError(f"solver={solver!r} does not take sample_weight.")

    def weighted(self):
        """``(X, y, risk, loss, fit_intercept, sample_weight)``, in the order of the solvers' helpers."""
        return self.X, self.y, self.risk, self.loss, self.fit_intercept, self.sample_weight

    def unweighted(self, solver):
        """``(X, y, risk, loss, fit_intercept)``, after :meth:`check_unweighted` (``solver``: its name)."""
        self.check_unweighted(solver)
        return self.weighted()[:5]

    def arguments(self, coef, intercept):
        """The loss arguments ``t`` at ``(coef, intercept)`` (:func:`loss_arguments`)."""
        return loss_arguments(self.X, self.y, coef, intercept, self.loss.task)

    def affine_map(self):
        """``(s, c)`` with ``t = s f + c`` for the linear predictions ``f`` (:func:`affine_map`)."""
        return affine_map(self.y, self.loss.task)

    def design(self):
        """The design ``[X, 1]`` of the features where they live (:func:`make_design`).

        ``X`` as float64 NumPy data unless it is sparse or external (a Dask
        or array-API array), which the design takes as it is.
        """
        X = self.X
        if not (hasattr(X, "tocsr") or is_external(X)):
            X = np.asarray(X, dtype=np.float64)
        return make_design(X, self.fit_intercept)

    def smoothed(self, penalty, gathered=False):
        """This datafit bound to its design and ``penalty``: the smoothed objective of the Newton solver.

        ``gathered``: with the vectors of length ``n`` in this process even
        where the design could keep them apart (on Dask workers).

        Returns
        -------
        skrank.datafits.smoothed_rank_risk.SmoothedRankRisk
        """
        return SmoothedRankRisk(self, penalty, gathered)

    def objective(self, coef, intercept, penalty):
        """The exact ``F(w, b)`` with ``penalty`` (:func:`rank_objective`)."""
        return rank_objective(self.X, self.y, coef, intercept, self.risk, self.loss, penalty,
                              self.sample_weight)
