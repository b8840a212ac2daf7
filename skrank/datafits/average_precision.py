"""The exact average-precision surrogate and its gradient with respect to the scores.

The surrogate ``P(h) = -(1/N+) sum_{i positive} A_i / B_i`` of Qi, Luo, Xu,
Ji and Yang (2021, "Stochastic optimization of areas under precision-recall
curves with provable convergence", eq. (2)), evaluated over the whole
training set: in ``O(n log n)`` for the squared hinge, by a compiled loop
over the pairs otherwise, with or without sample weights.  The algorithm is
described in the user guide, :ref:`average-precision-evaluation`.
"""

import numpy as np
from scipy.special import expit

from .._jit import njit
from ..backends.dispatch import make_design
from ..metrics import average_precision
from ..pairwise_losses import pair_value_and_derivative
from .base import Datafit
from .partial_auc import in_units, resort_scores


def ap_surrogate_and_score_gradients(h, y, loss, sample_weight=None, order=None):
    """``P(h)`` and ``dP/dh``, or ``P_w(h)`` and ``dP_w/dh`` with weights.

    Parameters
    ----------
    h : ndarray of shape (n,)
        Scores.
    y : ndarray of shape (n,)
        Labels in {-1, +1}; at least one positive.
    loss : skrank.pairwise_losses.PairwiseLoss
        The surrogate of ``1(h_s >= h_i)`` as a function of ``h_i - h_s``
        (``loss(z)`` with ``z = h_i - h_s``).
    sample_weight : ndarray of shape (n,) or None, default=None
        Nonnegative weights ``w``, with a positive total over the positives
        (the weighted ``P_w`` of the user guide); None for equal weights.
    order : ndarray of shape (n,) of int64, default=None
        A permutation that nearly sorts ``h`` ascending (an iterative
        solver's previous one), updated in place to sort it (squared hinge).

    Returns
    -------
    value : float
    grad : ndarray of shape (n,)
    """
    h = np.ascontiguousarray(h, dtype=np.float64)
    pos = np.asarray(y) > 0
    if sample_weight is not None:
        sample_weight = np.ascontiguousarray(sample_weight, dtype=np.float64)
    if loss.is_quadratic and np.isfinite(loss.threshold):
        h = h - h.mean()  # differences only: centring avoids cancellation
        # ties may come in any order: the sums below do not see it
        if order is None:
            order = np.argsort(h)
            hs = h[order]
        else:
            hs = resort_scores(h, order)
        ws = None if sample_weight is None else sample_weight[order]
        return _squared_hinge_ap(hs, pos[order], order, loss.margin, ws)
    return _pair_ap(loss.code, loss.shift, loss.scale, h, pos, sample_weight)


@njit(cache=True)
def _squared_hinge_ap(hs, pos, order, margin, ws):
    """Sorted scores ``hs`` (ascending), their labels, positions in the input and weights.

    ``ws`` None (equal weights) compiles a version without the weights.  The
    anchors are swept downwards: the samples with ``h_s > h_i - margin``
    (a suffix) grow, and their sums of ``w, w h, w h^2`` (over all samples
    and over the positives) are carried along; then the samples are swept
    upwards, with the sums of ``dP/dA_i`` and ``dP/dB_i`` (and those times
    ``h_i``) over the anchors below ``h_s + margin`` (a prefix).
    """
    n = hs.shape[0]
    n_pos = 0.0
    for k in range(n - 1, -1, -1):
        if pos[k]:
            n_pos += 1.0 if ws is None else ws[k]
    # dP/dA_i and dP/dB_i per sorted position (zero for negatives); the anchor side of the gradient
    dA = np.zeros(n)
    dB = np.zeros(n)
    anchor = np.zeros(n)
    value = c0 = c1 = c2 = p0 = p1 = p2 = 0.0
    start = n  # first sorted position with h_s > h_i - margin
    for k in range(n - 1, -1, -1):
        if not pos[k] or (ws is not None and ws[k] == 0.0):
            continue  # a weightless anchor counts for nothing (its B may be zero)
        hi = hs[k]
        while start > 0 and hs[start - 1] > hi - margin:
            start -= 1
            v = hs[start]
            wk = 1.0 if ws is None else ws[start]
            c0 += wk
            c1 += wk * v
            c2 += wk * v * v
            if pos[start]:
                p0 += wk
                p1 += wk * v
                p2 += wk * v * v
        a = margin - hi
        A = a * a * p0 + 2.0 * a * p1 + p2
        B = a * a * c0 + 2.0 * a * c1 + c2
        wk = 1.0 if ws is None else ws[k]
        value -= wk * A / B
        dA[k] = -wk / (B * n_pos)
        dB[k] = wk * A / (B * B * n_pos)
        # dA_i/dh_i = -2 sum_{s pos active} w_s (a + h_s), likewise B
        anchor[k] = dA[k] * (-2.0) * (a * p0 + p1) + dB[k] * (-2.0) * (a * c0 + c1)
    sA0 = sA1 = sB0 = sB1 = 0.0
    end = 0  # anchors at sorted positions < end have h_i < h_s + margin
    for k in range(n):
        hv = hs[k]
        while end < n and hs[end] < hv + margin:
            sB0 += dB[end]
            sB1 += dB[end] * hs[end]
            sA0 += dA[end]
            sA1 += dA[end] * hs[end]
            end += 1
        g = 2.0 * ((margin + hv) * sB0 - sB1)
        if pos[k]:
            g += 2.0 * ((margin + hv) * sA0 - sA1)
        if ws is not None:
            g *= ws[k]
        anchor[k] += g
    grad = np.empty(n)
    for k in range(n):
        grad[order[k]] = anchor[k]
    return value / n_pos, grad


@njit(cache=True)
def _pair_ap(code, shift, scale, h, pos, w):
    """Double loop over the (anchor positive, sample) pairs, any surrogate.

    ``w`` None (equal weights) compiles a version without the weights.
    """
    n = h.shape[0]
    n_pos = 0.0
    for s in range(n):
        if pos[s]:
            n_pos += 1.0 if w is None else w[s]
    grad = np.zeros(n)
    dl = np.empty(n)
    value = 0.0
    for i in range(n):
        if not pos[i] or (w is not None and w[i] == 0.0):
            continue
        A = 0.0
        B = 0.0
        for s in range(n):
            v, d = pair_value_and_derivative(code, shift, scale, h[i] - h[s])
            if w is not None:
                v *= w[s]
                d *= w[s]
            dl[s] = d
            B += v
            if pos[s]:
                A += v
        wi = 1.0 if w is None else w[i]
        value -= wi * A / B
        dA = -wi / (B * n_pos)
        dB = wi * A / (B * B * n_pos)
        for s in range(n):
            c = dB + (dA if pos[s] else 0.0)
            grad[i] += c * dl[s]
            grad[s] -= c * dl[s]
    return value / n_pos, grad


class AveragePrecisionObjective(Datafit):
    """``F(w, b) = P(sigmoid(X w + b)) + alpha ||w||^2 / 2`` on one training set.

    The paper's sigmoid score, whose intercept ``b`` is an unpenalised
    parameter (user guide, "Why sigmoid scores" in :doc:`average_precision`).
    A :class:`~skrank.datafits.base.Datafit` of ``theta = (w, b)``; the
    products with ``X`` go through the design ``[X, 1]``
    (:func:`skrank.backends.dispatch.make_design`), so a Dask or CuPy ``X``
    is never gathered.  One value and gradient cost ``O(n log n + n d)`` for
    the squared hinge (:ref:`average-precision-evaluation`).

    Parameters
    ----------
    X : {ndarray, sparse matrix, dask.array.Array, array-API array} of shape (n_samples, n_features)
    y : ndarray of shape (n_samples,)
        Labels in {-1, +1}, at least one positive.
    loss : skrank.pairwise_losses.PairwiseLoss
    alpha : float
        Strength of the l2 penalty on ``w``.
    sample_weight : array-like of shape (n_samples,) or None, default=None
        Nonnegative weights of the samples, with a positive total over the
        positives; None for equal weights.
    """

    #: the parameter vector is ``(w, b)``
    fits_intercept = True

    def __init__(self, X, y, loss, alpha, sample_weight=None):
        self.X = X
        self.design = make_design(X, fit_intercept=True)
        self.y = np.asarray(y, dtype=np.float64)
        if sample_weight is not None:
            sample_weight = np.asarray(sample_weight, dtype=np.float64)
            if sample_weight.shape != self.y.shape or np.any(sample_weight < 0):
                raise ValueError("sample_weight must hold one nonnegative weight per sample.")
        self.sample_weight = sample_weight
        # P_w depends on the ratios of the weights only: it is computed with the weights rescaled
        # by a power of two (exact), whose products and squares neither underflow nor overflow
        self._units = None if sample_weight is None else in_units(sample_weight)
        positive = self.y > 0
        if not np.any(positive if sample_weight is None else sample_weight[positive] > 0):
            raise ValueError("average precision needs at least one positive sample in y "
                             "(of positive weight).")
        self.loss = loss
        self.alpha = float(alpha)
        # the last sorting permutation of the scores: successive iterates rank alike
        self._order = np.arange(self.y.shape[0])

    def _scale_row_weight(self):
        return self.sample_weight

    def scores(self, theta):
        """``h = sigmoid(X w + b)``."""
        return expit(self.design.matvec(np.asarray(theta, dtype=np.float64)))

    def _data_term(self, theta, gradient):
        value, g = self.linear_terms(self.design.native_matvec(np.asarray(theta, dtype=np.float64)))
        return value, self.design.native_rmatvec(g) if gradient else None

    def linear_terms(self, z):
        """``P`` and its derivatives in the linear predictor ``z = X w + b`` (scores ``sigmoid(z)``).

        ``z`` and the derivatives are ``n``-vectors of the design's
        namespace: for an array-API ``X`` the scores go to the host for the
        rank step (a sort and prefix sums) and their derivatives come back.
        """
        h = self.design.sigmoid(z)
        value, g = ap_surrogate_and_score_gradients(self.design.to_host(h), self.y, self.loss, self._units,
                                                    self._order)
        return value, self.design.to_native(g) * (h * (1.0 - h))

    def metric(self, scores):
        """The training average precision at the scores ``scores`` of the samples, with their weights.

        Parameters
        ----------
        scores : ndarray of shape (n_samples,)

        Returns
        -------
        float
        """
        return average_precision(self.y > 0, scores, self.sample_weight)

    def start(self, y_margin=1.0):
        """A start that ranks well and spreads the scores over the sigmoid's range.

        The minimiser ``w0`` of the full-AUC square loss
        (:func:`skrank.datafits.square_auc.square_auc_coef`), scaled so
        that ``X w`` has unit standard deviation, and ``b`` centring it;
        with sample weights, all three over the weighted sample.

        Parameters
        ----------
        y_margin : float, default=1.0
            Margin of the square loss (it only scales ``w0``).

        Returns
        -------
        ndarray of shape (n_features + 1,)
            The start ``(w, b)``.
        """
        from .square_auc import square_auc_coef

        w = square_auc_coef(self.X, self.y, self.alpha, y_margin, self.sample_weight)
        z = self.design.matvec(np.append(w, 0.0))
        # the spread about one of the scores: exactly 0 when they are all equal (identical rows),
        # not the rounding of their mean, which would blow w up
        first = float(z[0]) if z.size else 0.0
        dz = z - first
        p = None if self.sample_weight is None else self.sample_weight / self.sample_weight.sum()
        mean_dz = float(np.mean(dz)) if p is None else float(p @ dz)
        spread = float(np.sqrt(np.mean((dz - mean_dz) ** 2) if p is None else p @ (dz - mean_dz) ** 2))
        if spread > 0:
            return np.append(w / spread, -(first + mean_dz) / spread)
        return np.append(w, -(first + mean_dz))
