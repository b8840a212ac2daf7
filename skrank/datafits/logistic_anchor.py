"""A rank surrogate mixed with the logistic loss: a family that holds logistic regression.

For a rank objective ``R(w, b)`` (the partial-AUC surrogate, which ignores
``b``, or the average-precision surrogate) and ``r = rank_weight`` in
``[0, 1]``, the objective is

    F(w, b) = (1 - r) L(w, b) + r R(w, b) + alpha ||w||^2 / 2,

with ``L`` the mean logistic loss ``1/n sum_i log(1 + exp(-y_i (x_i w + b)))``
(with sample weights, their weighted mean).  ``r = 0`` is the l2 logistic
regression ``LogisticRegression(C=1 / (alpha n))``; ``r = 1`` the rank
objective alone.  In between, the logistic loss fixes the scale and the
offset of the scores, and the rank term moves the ranking towards the
metric; a search over ``r`` (as the cross-validated estimators do) can
always fall back to logistic regression.

The logistic loss goes through the design ``[X, 1]``
(:func:`skrank.backends.dispatch.make_design`), so a Dask array is read
chunk by chunk and a CuPy array stays on its device, as for the rank
objectives.
"""

import numpy as np

from ..backends.dispatch import make_design


class LogisticAnchoredObjective:
    """``F(theta)`` of the module docstring with its gradient, ``theta = (w, b)``.

    Parameters
    ----------
    rank_objective : object
        The rank surrogate, built with ``alpha=0``: ``value_and_grad``
        and ``value`` of ``(w, b)`` when its attribute ``fits_intercept``
        is True, of ``w`` alone otherwise.
    X : {ndarray, sparse matrix, dask.array.Array, array-API array} of shape (n_samples, n_features)
        Training data.
    y : ndarray of shape (n_samples,)
        Labels in {-1, +1}.
    rank_weight : float
        ``r`` in ``[0, 1]``.
    alpha : float
        Strength of the l2 penalty on ``w``.
    sample_weight : ndarray of shape (n_samples,) or None, default=None
        Nonnegative weights; the logistic term is their weighted mean.
    """

    fits_intercept = True

    def __init__(self, rank_objective, X, y, rank_weight, alpha, sample_weight=None):
        self.rank_objective = rank_objective
        self.X = X
        self.design = make_design(X, fit_intercept=True)
        self.margin_sign = np.where(np.asarray(y) > 0, 1.0, -1.0)
        if sample_weight is None:
            self.row_weight = np.full(self.margin_sign.shape[0], 1.0 / self.margin_sign.shape[0])
        else:
            v = np.asarray(sample_weight, dtype=np.float64)
            self.row_weight = v / v.sum()
        self.rank_weight = float(rank_weight)
        self.alpha = float(alpha)
        self.n_passes = 0

    def _rank_part(self, theta, gradient):
        if self.rank_weight == 0.0:
            return 0.0, np.zeros_like(theta) if gradient else None
        own = theta if self.rank_objective.fits_intercept else theta[:-1]
        if not gradient:
            return self.rank_objective.value(own), None
        value, grad = self.rank_objective.value_and_grad(own)
        if not self.rank_objective.fits_intercept:
            grad = np.append(grad, 0.0)
        return value, grad

    def logistic_value_and_grad(self, theta, gradient=True):
        """The mean logistic loss ``L(w, b)`` and, when asked, its gradient."""
        z = self.margin_sign * self.design.matvec(theta)
        # one exponential serves log(1 + exp(-z)) and sigmoid(-z), stably on both signs
        e = np.exp(-np.abs(z))
        value = float(self.row_weight @ (np.log1p(e) - np.minimum(z, 0.0)))
        if not gradient:
            return value, None
        inv = 1.0 / (1.0 + e)
        sigmoid_minus_z = np.where(z >= 0.0, e * inv, inv)
        return value, self.design.rmatvec(-self.row_weight * self.margin_sign * sigmoid_minus_z)

    def value(self, theta):
        """``F(theta)``."""
        theta = np.asarray(theta, dtype=np.float64)
        r = self.rank_weight
        log_value, _ = self.logistic_value_and_grad(theta, gradient=False) if r < 1.0 else (0.0, None)
        rank_value, _ = self._rank_part(theta, gradient=False)
        w = theta[:-1]
        return (1.0 - r) * log_value + r * rank_value + 0.5 * self.alpha * float(w @ w)

    def value_and_grad(self, theta):
        """``F(theta)`` and its gradient (one pass over the data for each term)."""
        theta = np.asarray(theta, dtype=np.float64)
        r = self.rank_weight
        log_value, log_grad = self.logistic_value_and_grad(theta)
        rank_value, rank_grad = self._rank_part(theta, gradient=True)
        w = theta[:-1]
        grad = (1.0 - r) * log_grad + r * rank_grad
        grad[:-1] += self.alpha * w
        self.n_passes += 1
        return (1.0 - r) * log_value + r * rank_value + 0.5 * self.alpha * float(w @ w), grad

    def variable_scale(self):
        """The units of ``theta`` for :func:`skrank.solvers.full_batch.lbfgs.lbfgs` (one per coefficient).

        :func:`skrank.datafits.scale.linear_model_scale` of ``[X, 1]``
        under the row weights and ``alpha`` (computed once, one pass over
        ``X``).

        Returns
        -------
        ndarray of shape (n_features + 1,)
        """
        if getattr(self, "_variable_scale", None) is None:
            from .scale import linear_model_scale

            self._variable_scale = linear_model_scale(self.design, self.row_weight, self.alpha)
        return self._variable_scale
