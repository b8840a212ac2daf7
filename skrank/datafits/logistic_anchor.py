"""A rank surrogate mixed with the logistic loss: a family that holds logistic regression.

``F(w, b) = (1 - r) L(w, b) + r R(w, b) + alpha ||w||^2 / 2``, with ``L`` the
(weighted) mean logistic loss of ``X w + b``, ``R`` a rank surrogate (the
partial-AUC one, which ignores ``b``, or the average-precision one) and
``r = rank_weight`` in ``[0, 1]``: ``r = 0`` is
``LogisticRegression(C=1 / (alpha n))``, ``r = 1`` the rank objective alone
(user guide, :doc:`partial_auc` and :doc:`average_precision`).
"""

import numpy as np

from .._jit import njit
from ..backends.dispatch import make_design
from .base import Datafit


class LogisticAnchoredObjective(Datafit):
    """``F(theta)`` of the module docstring with its gradient, ``theta = (w, b)``.

    A :class:`~skrank.datafits.base.Datafit`; :meth:`value` skips the
    logistic term when ``rank_weight`` is 1.

    Parameters
    ----------
    rank_objective : object
        The rank surrogate, built with ``alpha=0``: ``value_and_grad``
        and ``value`` of ``(w, b)`` when its attribute ``fits_intercept``
        is True, of ``w`` alone otherwise; optionally ``linear_terms(z)``,
        its value and derivatives in the linear predictor ``z = X w + b``,
        which lets one product with ``[X, 1]`` each way serve both terms.
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
    #: the logistic regression ``theta`` the fit starts from and must rank as well as (set by the estimator)
    anchor = None
    #: the iterations of that start that a cold fit counts
    anchor_iterations = 0

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
        # the signs and weights as n-vectors of the design's namespace, sent to X's device once
        self._sign_native = self.design.to_native(self.margin_sign)
        self._weight_native = self.design.to_native(self.row_weight)

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
        value, dz = self._logistic_terms(self.design.native_matvec(theta), gradient)
        return value, None if dz is None else self.design.native_rmatvec(dz)

    def _logistic_terms(self, z, gradient):
        """``L`` at the linear predictor ``z = X w + b`` and, when asked, its derivatives in ``z``.

        ``z`` and the derivatives are ``n``-vectors of the design's
        namespace: NumPy's (a compiled loop) or ``X``'s (:func:`logistic_terms`).
        """
        if not self.design.vectors_on_host:
            return logistic_terms(self.design.xp, z, self._sign_native, self._weight_native, gradient)
        m = self.margin_sign * z
        # one exponential serves log(1 + exp(-m)) and sigmoid(-m), stably on both signs; in place
        e = np.abs(m)
        np.negative(e, out=e)
        np.exp(e, out=e)
        terms = np.log1p(e)
        terms -= np.minimum(m, 0.0)
        value = float(self.row_weight @ terms)
        if not gradient:
            return value, None
        _logistic_derivatives(m, e, self.margin_sign, self.row_weight, terms)
        return value, terms


    def _data_term(self, theta, gradient):
        r = self.rank_weight
        if gradient and 0.0 < r < 1.0 and hasattr(self.rank_objective, "linear_terms"):
            # one product with [X, 1] each way serves both terms
            scores = self.design.native_matvec(np.append(theta[:-1], 0.0))
            z = scores + float(theta[-1])
            log_value, log_dz = self._logistic_terms(z, True)
            # a rank term that ignores b ranks X w itself: adding b first can round small scores to ties
            rank_value, rank_dz = self.rank_objective.linear_terms(
                z if self.rank_objective.fits_intercept else scores)
            value = (1.0 - r) * log_value + r * rank_value
            return value, self.design.native_rmatvec((1.0 - r) * log_dz + r * rank_dz)
        if gradient or r < 1.0:
            log_value, log_grad = self.logistic_value_and_grad(theta, gradient)
        else:  # the value alone skips the logistic term, which has no weight
            log_value, log_grad = 0.0, None
        rank_value, rank_grad = self._rank_part(theta, gradient)
        value = (1.0 - r) * log_value + r * rank_value
        if not gradient:
            return value, None
        return value, (1.0 - r) * log_grad + r * rank_grad

    def _scale_row_weight(self):
        return self.row_weight

    def ranked_score_spread(self, theta):
        """The (weighted) standard deviation of the scores that the rank term ranks, at ``theta``."""
        values = self.rank_objective.ranked_scores(theta)
        mean = float(self.row_weight @ values)
        return float(np.sqrt(self.row_weight @ (values - mean) ** 2))

    def segment_metric(self, start, end):
        """The training metric along the segment from ``start`` to ``end``, a function of the fraction.

        The scores are linear in ``theta``: those of the segment's points
        need no pass over ``X`` beyond the two ends'.
        """
        first, last = self.design.matvec(start), self.design.matvec(end)
        metric = self.rank_objective.metric
        return lambda fraction: metric(first if fraction == 0.0 else last if fraction == 1.0
                                       else first + fraction * (last - first))


def logistic_terms(xp, z, sign, weight, gradient):
    """The weighted mean logistic loss of the margins ``sign z`` and its derivatives in ``z``, in ``xp``.

    The arithmetic of :meth:`LogisticAnchoredObjective._logistic_terms` on
    ``n``-vectors of any array namespace (those of ``X``, on its device):
    one exponential ``exp(-|m|)`` serves ``log(1 + exp(-m))`` and
    ``sigmoid(-m)``, stably on both signs.

    Parameters
    ----------
    xp : module
        The namespace of ``z``, ``sign`` and ``weight``.
    z, sign, weight : arrays of shape (n,)
        The linear predictor, the labels' signs and the rows' weights (summing to one).
    gradient : bool
        Whether to return the derivatives.

    Returns
    -------
    value : float
    dz : array of shape (n,) or None
        ``-sign weight sigmoid(-sign z)``, in ``xp``.
    """
    m = sign * z
    e = xp.exp(-xp.abs(m))
    value = float(weight @ (xp.log1p(e) - xp.minimum(m, 0.0)))
    if not gradient:
        return value, None
    inv = 1.0 / (e + 1.0)
    return value, -(xp.where(m >= 0.0, e * inv, inv) * sign * weight)


@njit(cache=True)
def _logistic_derivatives(m, e, sign, row_weight, out):
    """``out = -sign row_weight sigmoid(-m)`` from ``e = exp(-|m|)``: the derivatives in ``z``."""
    for i in range(m.shape[0]):
        inv = 1.0 / (e[i] + 1.0)
        d = e[i] * inv if m[i] >= 0.0 else inv
        out[i] = -(d * sign[i] * row_weight[i])
