"""The exact partial-AUC surrogate over a false-positive-rate range, and its gradient.

For a linear score ``h = X w``, positives' scores ``h_i`` and negatives'
scores sorted in decreasing order ``q_(1) >= q_(2) >= ...``, the objective
of Yao, Lin and Yang 2022 (eq. (3)) with an l2 penalty is

    F(w) = 1 / (N+ (n - m)) sum_i sum_k omega_k loss(h_i - q_(k))
           + alpha ||w||^2 / 2,

``m = alpha_fpr N-`` and ``n = beta_fpr N-``.  The rank weights
``omega_k = max(0, min(k, n) - max(k - 1, m))`` are one on the ranks
``m+1 .. n`` and fractional on the two boundary cells (the paper assumes
integer ``m`` and ``n``; this extension is ours): the top ``floor(l)``
plus ``(l - floor(l))`` times the next, for ``l = m`` and ``l = n``; they sum to ``n - m``.

Cost of one value and gradient (``d`` features):

* squared hinge and squared losses: ``O((N+ + N-) log N- + (N+ + N-) d)``.
  Each loss is the quadratic ``(margin - z)^2`` on one side of a threshold,
  so a positive's sum over the negatives above ``h_i - threshold`` is a
  polynomial in ``h_i`` whose coefficients are prefix sums of
  ``omega_k q_(k)^r`` (``r = 0, 1, 2``) in rank order, read at the position
  given by a binary search; the negatives' gradients use the same trick
  over the sorted positives.
* logistic loss: ``O(N+ R + N- log N- + (N+ + N-) d)`` with
  ``R = ceil(n) - floor(m)`` the negatives inside the range, by a compiled
  double loop (no prefix-sum form exists for ``log(1 + exp(q - h))``).

The sum is continuous in ``w`` (the weights are attached to ranks, and tied
negatives carry equal loss), and differentiable wherever the negatives'
scores are distinct; the gradient returned is then exact, and a valid
element of the Clarke subdifferential otherwise.
"""

import numpy as np
from numba import njit

from ._sorting import _insertion_keyed
from .metrics import _check_fpr_range
from .pairwise_losses import pair_value_and_derivative


def negative_rank_weights(n_negatives, fpr_range):
    """Weights ``omega_k`` of the negatives ranked ``k = 1..N-`` by decreasing score.

    Parameters
    ----------
    n_negatives : int
    fpr_range : tuple (alpha, beta)

    Returns
    -------
    ndarray of shape (n_negatives,)
        ``max(0, min(k, beta N-) - max(k - 1, alpha N-))``; sums to
        ``N- (beta - alpha)``.
    """
    alpha, beta = _check_fpr_range(fpr_range)
    k = np.arange(1, n_negatives + 1, dtype=np.float64)
    return np.maximum(0.0, np.minimum(k, beta * n_negatives) - np.maximum(k - 1.0, alpha * n_negatives))


def check_range_holds_negatives(n_negatives, fpr_range):
    """Raise a ValueError when ``N- (beta - alpha) < 1``."""
    alpha, beta = _check_fpr_range(fpr_range)
    width = n_negatives * (beta - alpha)
    if width < 1.0 - 1e-12:
        raise ValueError(
            f"fpr_range=({alpha:g}, {beta:g}) holds {width:.3g} negatives of the {n_negatives} in "
            "the training set; it must span at least one negative (N- (beta - alpha) >= 1). "
            "Widen the range or use more negatives."
        )


def range_loss_and_score_gradients(h_pos, h_neg, omega, loss, orders=None):
    """Sum of ranked pairwise losses and its gradient with respect to the scores.

    Parameters
    ----------
    h_pos : ndarray of shape (N+,)
    h_neg : ndarray of shape (N-,)
    omega : ndarray of shape (N-,)
        Rank weights of :func:`negative_rank_weights`.
    loss : skrank.pairwise_losses.PairwiseLoss
    orders : tuple of two int64 arrays, optional
        Permutations that nearly sort ``-h_neg`` and ``h_pos`` ascending
        (an iterative solver's previous ones); updated in place to sort
        them.  Sorting from them costs ``O(N)`` when few scores moved.

    Returns
    -------
    total : float
        ``sum_i sum_k omega_k loss(h_i - q_(k))`` (not normalised).
    g_pos : ndarray of shape (N+,)
        Its derivatives with respect to ``h_pos``.
    g_neg : ndarray of shape (N-,)
        Its derivatives with respect to ``h_neg`` (in the input order).
    """
    h_pos = np.asarray(h_pos, dtype=np.float64)
    h_neg = np.asarray(h_neg, dtype=np.float64)
    # Pairwise margins are invariant to a common shift; centring keeps the
    # prefix-sum polynomials free of cancellation.
    center = 0.5 * (h_neg.mean() + h_pos.mean()) if h_pos.size and h_neg.size else 0.0
    h_pos = h_pos - center
    h_neg = h_neg - center
    if orders is None:
        order_neg = np.argsort(-h_neg, kind="stable")
        order_pos = np.argsort(h_pos, kind="stable")
        q = h_neg[order_neg]
        hp = h_pos[order_pos]
    else:
        order_neg, order_pos = orders
        q = -_warm_sort(-h_neg, order_neg)
        hp = _warm_sort(h_pos, order_pos)
    g_pos = np.empty_like(h_pos)
    g_neg = np.empty_like(h_neg)
    if loss.is_quadratic:
        total = _quadratic_range_sums(hp, order_pos, q, order_neg, omega, loss.margin,
                                      loss.threshold, g_pos, g_neg)
    else:
        lo, hi = _support(omega)
        total, g_hp, g_part = _pair_range_sums(
            loss.code, loss.shift, loss.scale, hp, q[lo:hi], omega[lo:hi]
        )
        g_pos[order_pos] = g_hp
        g_sorted = np.zeros_like(q)
        g_sorted[lo:hi] = g_part
        g_neg[order_neg] = g_sorted
    return float(total), g_pos, g_neg


def _warm_sort(vals, order):
    """``vals`` sorted ascending, ``order`` updated in place to sort it.

    Insertion sort from the previous order (``O(n)`` when few scores moved),
    falling back to a comparison sort once it has moved ``4 n`` places.
    Only the insertion pass of :mod:`skrank._sorting` is used: it compiles in
    a fraction of a second, where the radix sort behind
    :func:`skrank._sorting.resort` takes seconds, which a first fit would feel.
    """
    keys = vals[order]
    if _insertion_keyed(keys, order, 4 * vals.shape[0]):
        return keys
    order[:] = np.argsort(vals, kind="stable")
    return vals[order]


def _support(omega):
    nz = np.flatnonzero(omega > 0)
    return int(nz[0]), int(nz[-1]) + 1


@njit(cache=True)
def _quadratic_range_sums(hp, order_pos, q, order_neg, omega, margin, threshold, g_pos, g_neg):
    """Prefix-sum evaluation for ``loss(z) = (margin - z)^2 1(z < threshold)``.

    ``hp`` ascending, ``q`` descending.  A positive's active negatives
    (``q_k > h_i - threshold``) are a prefix of ``q`` that shrinks as ``h_i``
    grows, and a negative's active positives (``h_i < q_k + threshold``) a
    prefix of ``hp`` that shrinks down the ranks: two merges give every
    prefix length.  Fills ``g_pos``/``g_neg`` (input order); returns the sum.
    """
    n_pos = hp.shape[0]
    n_neg = q.shape[0]
    w0 = np.zeros(n_neg + 1)
    w1 = np.zeros(n_neg + 1)
    w2 = np.zeros(n_neg + 1)
    for k in range(n_neg):
        wq = omega[k] * q[k]
        w0[k + 1] = w0[k] + omega[k]
        w1[k + 1] = w1[k] + wq
        w2[k + 1] = w2[k] + wq * q[k]
    total = 0.0
    K = n_neg
    for j in range(n_pos):
        h = hp[j]
        while K > 0 and q[K - 1] <= h - threshold:
            K -= 1
        a = margin - h
        total += a * a * w0[K] + 2.0 * a * w1[K] + w2[K]
        g_pos[order_pos[j]] = -2.0 * (a * w0[K] + w1[K])
    s = np.zeros(n_pos + 1)
    for j in range(n_pos):
        s[j + 1] = s[j] + hp[j]
    c = n_pos
    for k in range(n_neg):
        while c > 0 and hp[c - 1] >= q[k] + threshold:
            c -= 1
        g_neg[order_neg[k]] = 2.0 * omega[k] * (c * (margin + q[k]) - s[c])
    return total


@njit(cache=True)
def _pair_range_sums(code, shift, scale, h_pos, q, omega):
    """Double loop over positives and in-range negatives (any pairwise loss)."""
    n_pos = h_pos.shape[0]
    n_neg = q.shape[0]
    g_pos = np.zeros(n_pos)
    g_neg = np.zeros(n_neg)
    total = 0.0
    for i in range(n_pos):
        hi = h_pos[i]
        acc = 0.0
        gi = 0.0
        for k in range(n_neg):
            v, d = pair_value_and_derivative(code, shift, scale, hi - q[k])
            acc += omega[k] * v
            d *= omega[k]
            gi += d
            g_neg[k] -= d
        total += acc
        g_pos[i] = gi
    return total, g_pos, g_neg


class PartialAUCObjective:
    """``F(w)`` of the module docstring on one training set, with its gradient.

    Parameters
    ----------
    X : {ndarray, sparse matrix} of shape (n_samples, n_features)
    y : ndarray of shape (n_samples,)
        Labels in {-1, +1}.
    fpr_range : tuple (alpha, beta)
        False-positive-rate range, ``0 <= alpha < beta <= 1``.
    loss : skrank.pairwise_losses.PairwiseLoss
    alpha : float
        Strength of the l2 penalty ``alpha ||w||^2 / 2``.

    Attributes
    ----------
    X_pos, X_neg : the rows of each class.
    omega : ndarray
        Rank weights of the negatives.
    m, n : float
        The (possibly fractional) ranks ``alpha_fpr N-`` and ``beta_fpr N-``.
    normaliser : float
        ``N+ (n - m)``.
    """

    def __init__(self, X, y, fpr_range, loss, alpha):
        y = np.asarray(y)
        pos = y > 0
        self.X_pos = X[pos]
        self.X_neg = X[~pos]
        self.n_pos = self.X_pos.shape[0]
        self.n_neg = self.X_neg.shape[0]
        self.fpr_range = _check_fpr_range(fpr_range)
        check_range_holds_negatives(self.n_neg, self.fpr_range)
        self.m = self.fpr_range[0] * self.n_neg
        self.n = self.fpr_range[1] * self.n_neg
        self.omega = negative_rank_weights(self.n_neg, self.fpr_range)
        self.normaliser = self.n_pos * float(self.omega.sum())
        self.loss = loss
        self.alpha = float(alpha)
        self.n_passes = 0
        # the last sorting permutations: successive iterates rank alike
        self._orders = (np.arange(self.n_neg), np.arange(self.n_pos))

    def scores(self, w):
        """Positives' and negatives' scores ``X w``."""
        return (np.asarray(self.X_pos @ w, dtype=np.float64).ravel(),
                np.asarray(self.X_neg @ w, dtype=np.float64).ravel())

    def data_value(self, w):
        """The pAUC surrogate without the penalty."""
        h_pos, h_neg = self.scores(w)
        total, _, _ = range_loss_and_score_gradients(h_pos, h_neg, self.omega, self.loss,
                                                     self._orders)
        return total / self.normaliser

    def value(self, w):
        """``F(w)``."""
        w = np.asarray(w, dtype=np.float64)
        return self.data_value(w) + 0.5 * self.alpha * float(w @ w)

    def value_and_grad(self, w):
        """``F(w)`` and its gradient (one pass over the data)."""
        w = np.asarray(w, dtype=np.float64)
        h_pos, h_neg = self.scores(w)
        total, g_pos, g_neg = range_loss_and_score_gradients(h_pos, h_neg, self.omega, self.loss,
                                                             self._orders)
        grad = np.asarray(self.X_pos.T @ g_pos).ravel() + np.asarray(self.X_neg.T @ g_neg).ravel()
        self.n_passes += 1
        return (total / self.normaliser + 0.5 * self.alpha * float(w @ w),
                grad / self.normaliser + self.alpha * w)

    def top_subgradient(self, w, level):
        """A subgradient of ``f^l(w) / normaliser``: the pairs with the ``l`` top negatives.

        ``f^l(w) = sum_i [sum_{k <= floor(l)} loss(h_i - q_(k)) + (l - floor(l))
        loss(h_i - q_(floor(l)+1))]`` (Yao, Lin and Yang 2022, eq. (6), with
        fractional ``l``); used by DCA to linearise ``f^m``.
        """
        w = np.asarray(w, dtype=np.float64)
        h_pos, h_neg = self.scores(w)
        k = np.arange(1, self.n_neg + 1, dtype=np.float64)
        omega_top = np.clip(level - (k - 1.0), 0.0, 1.0)
        if not np.any(omega_top > 0):
            return 0.0, np.zeros_like(w)
        total, g_pos, g_neg = range_loss_and_score_gradients(h_pos, h_neg, omega_top, self.loss,
                                                             self._orders)
        grad = np.asarray(self.X_pos.T @ g_pos).ravel() + np.asarray(self.X_neg.T @ g_neg).ravel()
        return total / self.normaliser, grad / self.normaliser
