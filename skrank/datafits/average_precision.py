"""The exact average-precision surrogate of Qi et al. 2021 and its gradient with respect to the scores.

Qi, Luo, Xu, Ji and Yang (NeurIPS 2021), eq. (2): with scores ``h`` and a
surrogate ``l(d)`` of the indicator ``1(h_s >= h_i)`` taken at
``d = h_i - h_s``,

    P(h) = -(1/N+) sum_{i positive} A_i / B_i,
    A_i = sum_{s positive} l(h_i - h_s),    B_i = sum_{s} l(h_i - h_s).

``-P`` is the surrogate average precision.  This module evaluates ``P`` and
``dP/dh`` over the whole training set:

* squared hinge ``l(d) = max(0, margin - d)^2``: ``O(n log n)``.  The
  samples with ``h_s > h_i - margin`` are a suffix of the ascending order,
  so ``A_i`` and ``B_i`` are quadratics in ``h_i`` whose coefficients are
  suffix sums of ``1, h, h^2`` (over the positives for ``A``); the
  gradient with respect to ``h_s`` sums over the anchors with
  ``h_i < h_s + margin``, a prefix of the anchors' order, with prefix sums
  of ``dP/dA_i`` and ``dP/dB_i`` (and those times ``h_i``);
* other surrogates (:mod:`skrank.pairwise_losses`): a compiled loop over
  the ``N+ n`` pairs.

The anchor itself is one of the samples ``s``, so ``B_i >= l(0) > 0``.

Sample weights ``w`` (the user guide's "Sample weights" page) give

    P_w(h) = -(1/W+) sum_{i positive} w_i A_i / B_i,
    A_i = sum_{s positive} w_s l(h_i - h_s),    B_i = sum_{s} w_s l(h_i - h_s),

``W+`` the total weight of the positives.  ``A_i / B_i`` is then the
surrogate of the weighted precision at positive ``i``'s threshold, and
``-P_w`` averages it with the positives' weights: the surrogate of
scikit-learn's weighted ``average_precision_score``.  For integer weights
``P_w`` is ``P`` of the data with row ``i`` repeated ``w_i`` times: each of
the ``w_i`` copies of an anchor has the same ratio, whose sums over ``s``
count every copy of every sample, the anchor's own copies included; so a
weight of zero drops the row and weights of one change nothing.  The sums
above become weighted suffix sums (squared hinge) or weighted pair terms;
without weights the code takes no weighted step.
"""

import numpy as np
from scipy.special import expit

from .._jit import njit
from ..backends.dispatch import make_design
from ..pairwise_losses import pair_value_and_derivative
from .base import Datafit
from .partial_auc import _in_units, resort_scores


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
        (module docstring); None for equal weights.
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

    ``ws`` None (equal weights) compiles a version without the weights.
    """
    n = hs.shape[0]
    # suffix sums over all samples and over the positives of w, w h, w h^2
    c0 = np.zeros(n + 1)
    c1 = np.zeros(n + 1)
    c2 = np.zeros(n + 1)
    p0 = np.zeros(n + 1)
    p1 = np.zeros(n + 1)
    p2 = np.zeros(n + 1)
    for k in range(n - 1, -1, -1):
        v = hs[k]
        wk = 1.0 if ws is None else ws[k]
        c0[k] = c0[k + 1] + wk
        c1[k] = c1[k + 1] + wk * v
        c2[k] = c2[k + 1] + wk * v * v
        p = wk if pos[k] else 0.0
        p0[k] = p0[k + 1] + p
        p1[k] = p1[k + 1] + p * v
        p2[k] = p2[k + 1] + p * v * v
    n_pos = p0[0]
    grad = np.zeros(n)
    # coefficients dP/dA_i and dP/dB_i per sorted position (zero for negatives)
    dA = np.zeros(n)
    dB = np.zeros(n)
    value = 0.0
    start = 0  # first sorted position with h_s > h_i - margin
    for k in range(n):
        if not pos[k] or (ws is not None and ws[k] == 0.0):
            continue  # a weightless anchor counts for nothing (its B may be zero)
        hi = hs[k]
        while start < n and hs[start] <= hi - margin:
            start += 1
        a = margin - hi
        A = a * a * p0[start] + 2.0 * a * p1[start] + p2[start]
        B = a * a * c0[start] + 2.0 * a * c1[start] + c2[start]
        wk = 1.0 if ws is None else ws[k]
        value -= wk * A / B
        dA[k] = -wk / (B * n_pos)
        dB[k] = wk * A / (B * B * n_pos)
        # anchor side: dA_i/dh_i = -2 sum_{s pos active} w_s (a + h_s), likewise B
        grad[order[k]] += dA[k] * (-2.0) * (a * p0[start] + p1[start]) + dB[k] * (-2.0) * (
            a * c0[start] + c1[start]
        )
    value /= n_pos
    # sample side: d/dh_s sum_i [dB_i + dA_i 1(s pos)] w_s (margin - h_i + h_s)^2 over the
    # anchors with h_i < h_s + margin (a prefix of the ascending order)
    sB0 = np.zeros(n + 1)
    sB1 = np.zeros(n + 1)
    sA0 = np.zeros(n + 1)
    sA1 = np.zeros(n + 1)
    for k in range(n):
        sB0[k + 1] = sB0[k] + dB[k]
        sB1[k + 1] = sB1[k] + dB[k] * hs[k]
        sA0[k + 1] = sA0[k] + dA[k]
        sA1[k + 1] = sA1[k] + dA[k] * hs[k]
    end = 0  # anchors at sorted positions < end have h_i < h_s + margin
    for k in range(n):
        hv = hs[k]
        while end < n and hs[end] < hv + margin:
            end += 1
        g = 2.0 * ((margin + hv) * sB0[end] - sB1[end])
        if pos[k]:
            g += 2.0 * ((margin + hv) * sA0[end] - sA1[end])
        if ws is not None:
            g *= ws[k]
        grad[order[k]] += g
    return value, grad


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

    The score is the paper's (Qi et al. 2021): the sigmoid of the
    linear predictor, ``h = sigmoid(X w + b)``, in (0, 1).  Bounded scores
    keep the surrogate's pair differences in (-1, 1): the squared hinge then
    compares them with a margin on a fixed scale, and the ratio ``A_i / B_i``
    cannot be driven by a few far-away scores.  A linear score ``h = X w``
    was tried first: its surrogate has no such scale, and on ISLR Caravan
    its minimiser ranked the training set worse than its start (training AP
    0.20 to 0.16), while the sigmoid score raised it.  The intercept ``b``
    moves the scores along the sigmoid, so it is a parameter here (not
    penalised), although it leaves the ranking unchanged.

    A :class:`~skrank.datafits.base.Datafit` of ``theta = (w, b)``, of
    length ``d + 1``.  One value and gradient cost ``O(n log n + n d)`` for
    the squared hinge.  With sample weights ``P`` is the weighted ``P_w`` of
    the module docstring.  The products with ``X`` go through the design
    ``[X, 1]`` (:func:`skrank.backends.dispatch.make_design`): a Dask array
    chunked by rows is read chunk by chunk and never gathered, a CuPy array
    stays on its device.

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
        self._units = None if sample_weight is None else _in_units(sample_weight)
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
        value, g = self.linear_terms(self.design.matvec(np.asarray(theta, dtype=np.float64)))
        return value, self.design.rmatvec(g) if gradient else None

    def linear_terms(self, z):
        """``P`` and its derivatives in the linear predictor ``z = X w + b`` (scores ``sigmoid(z)``)."""
        h = expit(z)
        value, g = ap_surrogate_and_score_gradients(h, self.y, self.loss, self._units, self._order)
        g *= h * (1.0 - h)
        return value, g

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
