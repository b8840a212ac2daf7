"""The exact average-precision surrogate of seed 002 and its gradient with respect to the scores.

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
"""

import numpy as np
from numba import njit
from scipy.special import expit

from .pairwise_losses import pair_value_and_derivative


def ap_surrogate_and_score_gradients(h, y, loss):
    """``P(h)`` and ``dP/dh``.

    Parameters
    ----------
    h : ndarray of shape (n,)
        Scores.
    y : ndarray of shape (n,)
        Labels in {-1, +1}; at least one positive.
    loss : skrank.pairwise_losses.PairwiseLoss
        The surrogate of ``1(h_s >= h_i)`` as a function of ``h_i - h_s``
        (``loss(z)`` with ``z = h_i - h_s``).

    Returns
    -------
    value : float
    grad : ndarray of shape (n,)
    """
    h = np.ascontiguousarray(h, dtype=np.float64)
    pos = np.asarray(y) > 0
    if loss.is_quadratic and np.isfinite(loss.threshold):
        h = h - h.mean()  # differences only: centring avoids cancellation
        order = np.argsort(h)  # ties may come in any order: the sums below do not see it
        return _squared_hinge_ap(h[order], pos[order], order, loss.margin)
    return _pair_ap(loss.code, loss.shift, loss.scale, h, pos)


@njit(cache=True)
def _squared_hinge_ap(hs, pos, order, margin):
    """Sorted scores ``hs`` (ascending), their labels and positions in the input."""
    n = hs.shape[0]
    # suffix sums over all samples and over the positives of 1, h, h^2
    c0 = np.zeros(n + 1)
    c1 = np.zeros(n + 1)
    c2 = np.zeros(n + 1)
    p0 = np.zeros(n + 1)
    p1 = np.zeros(n + 1)
    p2 = np.zeros(n + 1)
    for k in range(n - 1, -1, -1):
        v = hs[k]
        c0[k] = c0[k + 1] + 1.0
        c1[k] = c1[k + 1] + v
        c2[k] = c2[k + 1] + v * v
        p = 1.0 if pos[k] else 0.0
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
        if not pos[k]:
            continue
        hi = hs[k]
        while start < n and hs[start] <= hi - margin:
            start += 1
        a = margin - hi
        A = a * a * p0[start] + 2.0 * a * p1[start] + p2[start]
        B = a * a * c0[start] + 2.0 * a * c1[start] + c2[start]
        value -= A / B
        dA[k] = -1.0 / (B * n_pos)
        dB[k] = A / (B * B * n_pos)
        # anchor side: dA_i/dh_i = -2 sum_{s pos active} (a + h_s), likewise B
        grad[order[k]] += dA[k] * (-2.0) * (a * p0[start] + p1[start]) + dB[k] * (-2.0) * (
            a * c0[start] + c1[start]
        )
    value /= n_pos
    # sample side: d/dh_s sum_i [dB_i + dA_i 1(s pos)] (margin - h_i + h_s)^2 over the
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
        grad[order[k]] += g
    return value, grad


@njit(cache=True)
def _pair_ap(code, shift, scale, h, pos):
    """Double loop over the (anchor positive, sample) pairs, any surrogate."""
    n = h.shape[0]
    n_pos = 0.0
    for s in range(n):
        if pos[s]:
            n_pos += 1.0
    grad = np.zeros(n)
    dl = np.empty(n)
    value = 0.0
    for i in range(n):
        if not pos[i]:
            continue
        A = 0.0
        B = 0.0
        for s in range(n):
            v, d = pair_value_and_derivative(code, shift, scale, h[i] - h[s])
            dl[s] = d
            B += v
            if pos[s]:
                A += v
        value -= A / B
        dA = -1.0 / (B * n_pos)
        dB = A / (B * B * n_pos)
        for s in range(n):
            c = dB + (dA if pos[s] else 0.0)
            grad[i] += c * dl[s]
            grad[s] -= c * dl[s]
    return value / n_pos, grad


class AveragePrecisionObjective:
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

    The parameter vector is ``theta = (w, b)`` of length ``d + 1``.  One
    value and gradient cost ``O(n log n + n d)`` for the squared hinge.

    Parameters
    ----------
    X : {ndarray, sparse matrix} of shape (n_samples, n_features)
    y : ndarray of shape (n_samples,)
        Labels in {-1, +1}, at least one positive.
    loss : skrank.pairwise_losses.PairwiseLoss
    alpha : float
        Strength of the l2 penalty on ``w``.
    """

    def __init__(self, X, y, loss, alpha):
        self.X = X
        self.y = np.asarray(y, dtype=np.float64)
        if not np.any(self.y > 0):
            raise ValueError("average precision needs at least one positive sample in y.")
        self.loss = loss
        self.alpha = float(alpha)

    def scores(self, theta):
        """``h = sigmoid(X w + b)``."""
        theta = np.asarray(theta, dtype=np.float64)
        z = np.asarray(self.X @ theta[:-1], dtype=np.float64).ravel() + theta[-1]
        return expit(z)

    def value(self, theta):
        """``F(theta)``."""
        theta = np.asarray(theta, dtype=np.float64)
        value, _ = ap_surrogate_and_score_gradients(self.scores(theta), self.y, self.loss)
        w = theta[:-1]
        return value + 0.5 * self.alpha * float(w @ w)

    def value_and_grad(self, theta):
        """``F(theta)`` and its gradient (one pass over the data)."""
        theta = np.asarray(theta, dtype=np.float64)
        h = self.scores(theta)
        value, g = ap_surrogate_and_score_gradients(h, self.y, self.loss)
        g *= h * (1.0 - h)
        w = theta[:-1]
        grad = np.empty_like(theta)
        grad[:-1] = np.asarray(self.X.T @ g, dtype=np.float64).ravel() + self.alpha * w
        grad[-1] = g.sum()
        return value + 0.5 * self.alpha * float(w @ w), grad

    def start(self, y_margin=1.0):
        """A start that ranks well and spreads the scores over the sigmoid's range.

        The minimiser ``w0`` of the full-AUC square loss
        (:func:`skrank.solvers.auc_closed_form.square_auc_coef`), scaled so
        that ``X w`` has unit standard deviation, and ``b`` centring it.
        """
        from .solvers.auc_closed_form import square_auc_coef

        w = square_auc_coef(self.X, self.y, self.alpha, y_margin)
        z = np.asarray(self.X @ w, dtype=np.float64).ravel()
        spread = float(np.std(z))
        if spread > 0:
            w, z = w / spread, z / spread
        return np.append(w, -float(np.mean(z)))
