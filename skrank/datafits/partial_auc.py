"""The exact partial-AUC surrogate over a false-positive-rate range, and its gradient.

The objective of Yao, Lin and Yang (2022, "Large-scale optimization of
partial AUC in a range of false positive rates", eq. (3)) with an l2
penalty, evaluated exactly over the training set, with fractional boundary
cells and sample weights.  The formulas and their costs are described in the
user guide, :ref:`partial-auc-evaluation`.
"""

import functools

import numpy as np
from scipy.special import expit

from .._jit import njit
from ..backends.dispatch import external_kind, make_design
from ..kernels.sorting import insertion_keyed
from ..metrics import _check_fpr_range, region_area
from ..pairwise_losses import get_pairwise_loss, pair_value_and_derivative
from .base import Datafit


def negative_rank_weights(n_negatives, fpr_range, sample_weight=None):
    """Weights ``omega_k`` of the negatives ranked ``k = 1..N-`` by decreasing score.

    Parameters
    ----------
    n_negatives : int
        Number of negatives ``N-``.
    fpr_range : tuple (alpha, beta)
        False-positive-rate range.
    sample_weight : ndarray of shape (n_negatives,), default=None
        The negatives' weights, in the same decreasing order of their
        scores; None for unit weights.

    Returns
    -------
    ndarray of shape (n_negatives,)
        The length of the cell ``[C_(k-1), C_k]`` inside
        ``[alpha V, beta V]``, where ``C_k`` is the cumulative weight of the
        top ``k`` negatives and ``V = C_(N-)`` (``C_k = k`` and ``V = N-``
        without weights): ``max(0, min(k, beta N-) - max(k - 1, alpha N-))``
        for unit weights.  Sums to ``V (beta - alpha)``.
    """
    if sample_weight is None:
        k = np.arange(1, n_negatives + 1, dtype=np.float64)
        return range_cells(k - 1.0, k, n_negatives, fpr_range)
    sample_weight = np.asarray(sample_weight, dtype=np.float64)
    if sample_weight.shape != (n_negatives,):
        raise ValueError(f"sample_weight must have shape ({n_negatives},), got {sample_weight.shape}.")
    ends = np.cumsum(sample_weight)
    starts = np.empty_like(ends)
    starts[0] = 0.0
    starts[1:] = ends[:-1]
    return range_cells(starts, ends, ends[-1], fpr_range)


def range_cells(starts, ends, total, fpr_range):
    """The lengths of the cells ``[starts, ends]`` of cumulative weight inside ``[alpha total, beta total]``.

    Parameters
    ----------
    starts, ends : ndarray
        Each cell's ends, in units of weight counted from the top rank
        (``ends - starts`` the weights).
    total : float
        The total weight ``V``.
    fpr_range : tuple (alpha, beta)
        The range, as a share of ``total``.

    Returns
    -------
    ndarray
        ``max(0, min(ends, beta V) - max(starts, alpha V))``: the rank
        weights of :func:`negative_rank_weights`.
    """
    alpha, beta = _check_fpr_range(fpr_range)
    return np.maximum(0.0, np.minimum(ends, beta * total) - np.maximum(starts, alpha * total))


def in_units(weights):
    """``weights`` times the power of two that brings their largest into ``[0.5, 1)``: exact, same ratios.

    The sums of :class:`PartialAUCObjective` multiply a positive's weight
    by a negative's: in these units those products neither underflow nor
    overflow, whatever the scale of the weights, and the ratios the
    objective is made of come out as they would in exact arithmetic.
    """
    weights = np.asarray(weights, dtype=np.float64)
    top = float(weights.max()) if weights.size else 0.0
    if not (top > 0.0 and np.isfinite(top)):
        return weights
    return np.ldexp(weights, -int(np.frexp(top)[1]))


def check_range_holds_negatives(n_negatives, fpr_range, sample_weight=None):
    """Raise a ValueError when the range holds less than one negative.

    Parameters
    ----------
    n_negatives, fpr_range : int, tuple (alpha, beta)
        As for :func:`negative_rank_weights`.
    sample_weight : ndarray of shape (n_negatives,), default=None
        The negatives' weights, in any order; None for unit weights.

    Raises
    ------
    ValueError
        Without weights when ``N- (beta - alpha) < 1``.  With weights when
        the range holds less than one unit of the negatives' weight, as the
        repeated rows of integer weights would, or less than the weight of
        the lightest negative when that is below one:
        ``W- (beta - alpha) < min(1, smallest positive weight)``.
    """
    alpha, beta = _check_fpr_range(fpr_range)
    if sample_weight is None:
        width = n_negatives * (beta - alpha)
        if width < 1.0 - 1e-12:
            raise ValueError(
                f"fpr_range=({alpha:g}, {beta:g}) holds {width:.3g} negatives of the {n_negatives} in "
                "the training set; it must span at least one negative (N- (beta - alpha) >= 1). "
                "Widen the range or use more negatives."
            )
        return
    v = np.asarray(sample_weight, dtype=np.float64)
    check_range_holds_weight(float(v.sum()), float(v[v > 0].min()), fpr_range)


def check_range_holds_weight(total, lightest, fpr_range):
    """Raise a ValueError when the range holds less than one unit of the negatives' weight.

    The weighted check of :func:`check_range_holds_negatives`, from two
    numbers of the negatives' weights.

    Parameters
    ----------
    total : float
        The negatives' total weight ``W-``.
    lightest : float
        The smallest positive weight of a negative.
    fpr_range : tuple (alpha, beta)
        False-positive-rate range.

    Raises
    ------
    ValueError
        When ``W- (beta - alpha) < min(1, lightest)``.
    """
    alpha, beta = _check_fpr_range(fpr_range)
    width = total * (beta - alpha)
    needed = min(1.0, lightest)
    if width < needed * (1.0 - 1e-12):
        raise ValueError(
            f"fpr_range=({alpha:g}, {beta:g}) holds {width:.3g} of the negatives' total weight "
            f"{total:.3g}; it must hold at least {needed:.3g} (one unit of weight, or the "
            "lightest negative's weight when that is less). Widen the range or use more negatives."
        )


def range_loss_and_score_gradients(h_pos, h_neg, omega, loss, orders=None, pos_weight=None):
    """Sum of ranked pairwise losses and its gradient with respect to the scores.

    Parameters
    ----------
    h_pos : ndarray of shape (N+,)
        Positives' scores.
    h_neg : ndarray of shape (N-,)
        Negatives' scores.
    omega : ndarray of shape (N-,) or callable
        Rank weights of :func:`negative_rank_weights`, in decreasing order
        of the scores; or, when they depend on which negative holds which
        rank (sample weights), a function of the permutation that sorts
        ``h_neg`` decreasingly that returns them.
    loss : skrank.pairwise_losses.PairwiseLoss
        The pairwise loss.
    orders : tuple of two int64 arrays, optional
        Permutations that nearly sort ``-h_neg`` and ``h_pos`` ascending
        (an iterative solver's previous ones); updated in place to sort
        them (:func:`resort_scores`, ``O(N)``).
    pos_weight : ndarray of shape (N+,) or callable, optional
        Weights ``v_i`` of the positives (input order); or, when they
        depend on the positives' ranks (two-way ranges), a function of the
        permutation that sorts ``h_pos`` ascending that returns them in that
        order; None for unit weights.

    Returns
    -------
    total : float
        ``sum_i v_i sum_k omega_k loss(h_i - q_(k))`` (not normalised).
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
    if (orders is not None and not callable(omega) and not callable(pos_weight) and loss.pieces
            and h_pos.shape[0] + h_neg.shape[0] >= COMPILED_SORT_FROM):
        # the common case in one compiled call: re-sort both classes, then the prefix sums
        # (fewer scores: the same sums after NumPy's sorts, below, with fewer kernels to compile)
        g_pos = np.empty_like(h_pos)
        g_neg = np.empty_like(h_neg)
        vp = np.empty(0) if pos_weight is None else np.asarray(pos_weight, dtype=np.float64)
        total = _resorted_quadratic_sums(h_pos, h_neg, orders[1], orders[0], omega, vp,
                                         np.array(loss.pieces, dtype=np.float64), g_pos, g_neg)
        return float(total), g_pos, g_neg
    if orders is None:
        order_neg = np.argsort(-h_neg, kind="stable")
        order_pos = np.argsort(h_pos, kind="stable")
        q = h_neg[order_neg]
        hp = h_pos[order_pos]
    else:
        order_neg, order_pos = orders
        hp = resort_scores(h_pos, order_pos)
        q = -resort_scores(-h_neg, order_neg)
        if not callable(omega):
            # ranks below the range weigh nothing
            q = q[:_support(omega)[1]]
            omega = omega[:q.shape[0]]
    if callable(omega):
        omega = omega(order_neg)
    if callable(pos_weight):
        vp = pos_weight(order_pos)
    elif pos_weight is None:
        vp = np.ones(hp.shape[0])
    else:
        vp = np.asarray(pos_weight, dtype=np.float64)[order_pos]
    g_pos = np.empty_like(h_pos)
    g_neg = np.empty_like(h_neg)
    if loss.pieces:
        pieces = np.array(loss.pieces, dtype=np.float64)
        total = _quadratic_range_sums(hp, vp, order_pos, q, order_neg[:q.shape[0]], omega, pieces,
                                      g_pos, g_neg)
    else:
        lo, hi = _support(omega)
        total, g_hp, g_part = _pair_range_sums(
            loss.code, loss.shift, loss.scale, hp, vp, q[lo:hi], omega[lo:hi]
        )
        g_pos[order_pos] = g_hp
        g_neg[:] = 0.0
        g_neg[order_neg[lo:hi]] = g_part
    return float(total), g_pos, g_neg


#: Below this many values NumPy's stable sort is as fast as the compiled ones, and needs no compilation.
COMPILED_SORT_FROM = 1024


def resort_scores(vals, order):
    """``vals`` sorted ascending, ``order`` (a permutation, e.g. the last call's) updated in place to sort it.

    Tied values keep their order in ``order`` (the sums here do not depend
    on the order of ties).  Below :data:`COMPILED_SORT_FROM` values, NumPy's
    stable sort (a timsort, linear on nearly sorted values); otherwise
    insertion sort when few values moved far from ``order``, else
    :func:`_range_radix_sort` (three radix passes), or when the values
    cluster :func:`_radix_sort` (six): ``O(n)``, where a comparison sort
    costs several times more.
    """
    keys = vals[order]
    if keys.shape[0] < COMPILED_SORT_FROM:
        moved = np.argsort(keys, kind="stable")
        order[:] = order[moved]
        return keys[moved]
    _resort_keys(keys, order)
    return keys


@njit(cache=True)
def _resort_keys(keys, order):
    """The compiled body of :func:`resort_scores` on the gathered ``keys = vals[order]``."""
    n = keys.shape[0]
    if not insertion_keyed(keys, order, n // 32) and not _range_radix_sort(keys, order):
        _radix_sort(keys, order)


@njit(cache=True)
def _resorted_quadratic_sums(h_pos, h_neg, order_pos, order_neg, omega, vp, pieces, g_pos, g_neg):
    """:func:`_quadratic_range_sums` after re-sorting both classes from ``order_pos`` and ``order_neg``.

    ``vp`` the positives' weights in input order (empty for unit
    weights); ``omega`` the rank weights, the ranks after its last positive
    entry ignored.  The orders are updated in place, as
    :func:`resort_scores` does.
    """
    hp = h_pos[order_pos]
    _resort_keys(hp, order_pos)
    keys = np.empty(h_neg.shape[0])
    for k in range(keys.shape[0]):
        keys[k] = -h_neg[order_neg[k]]
    _resort_keys(keys, order_neg)
    end = omega.shape[0]
    while end > 0 and not omega[end - 1] > 0:
        end -= 1
    q = np.empty(end)
    for k in range(end):
        q[k] = -keys[k]
    if vp.shape[0] == 0:
        v = np.ones(hp.shape[0])
    else:
        v = vp[order_pos]
    return _quadratic_range_sums(hp, v, order_pos, q, order_neg[:end], omega[:end], pieces, g_pos, g_neg)


@njit(cache=True)
def _range_radix_sort(keys, perm):
    """Sort ``keys`` ascending in place, ``perm`` carried along (stable), or return False.

    Three LSD passes (11, 11 and 10-bit digits) on a monotone 32-bit image
    of each key, ``floor((key - min) 2^32 / (max - min))``, then an
    insertion pass that orders the keys closer than the image resolves.
    False (the keys permuted alike, partly sorted) when the keys are not
    finite or the insertion pass needs more than ``n`` moves (clusters of
    distinct values narrower than ``(max - min) / 2^32``): :func:`_radix_sort`
    then sorts.
    """
    n = keys.shape[0]
    lo = np.inf
    hi = -np.inf
    for j in range(n):
        lo = min(lo, keys[j])
        hi = max(hi, keys[j])
    if not hi - lo < np.inf:
        return False
    if hi == lo:
        return True
    scale = 4294967296.0 / (hi - lo)
    if not scale < np.inf:
        return False  # a spread of a few subnormals: the exact sort orders them
    packed = np.empty(n, dtype=np.uint64)
    packed2 = np.empty(n, dtype=np.uint64)
    counts = np.zeros((3, 2048), dtype=np.int64)
    for j in range(n):
        image = min(np.int64((keys[j] - lo) * scale), 4294967295)
        counts[0, image & 2047] += 1
        counts[1, (image >> 11) & 2047] += 1
        counts[2, image >> 22] += 1
        packed[j] = (np.uint64(image) << np.uint64(32)) | np.uint64(j)
    for p in range(3):
        total = 0
        for m in range(2048):
            c = counts[p, m]
            counts[p, m] = total
            total += c
    for p in range(3):
        shift = np.uint64(32 + 11 * p)
        for j in range(n):
            u = packed[j]
            d = (u >> shift) & np.uint64(2047)
            k = counts[p, d]
            counts[p, d] = k + 1
            packed2[k] = u
        packed, packed2 = packed2, packed
    old_keys = keys.copy()
    old_perm = perm.copy()
    for m in range(n):
        at = packed[m] & np.uint64(0xFFFFFFFF)
        keys[m] = old_keys[at]
        perm[m] = old_perm[at]
    return insertion_keyed(keys, perm, n)


@njit(cache=True)
def _radix_sort(keys, perm):
    """Sort ``keys`` ascending in place, ``perm`` carried along (stable).

    A stable LSD radix sort, six 11-bit digits, of the order-preserving
    integer image of each double, with the positions carried along; a pass
    whose digit is the same for all keys is skipped.  Exact whatever the
    spread of the values (scores often gather in clusters narrower than
    float32 resolves).
    """
    n = keys.shape[0]
    image = np.empty(n, dtype=np.uint64)
    image2 = np.empty(n, dtype=np.uint64)
    at = np.arange(n)
    at2 = np.empty(n, dtype=np.int64)
    counts = np.zeros((6, 2048), dtype=np.int64)
    top = np.uint64(1) << np.uint64(63)
    bits = keys.view(np.uint64)
    for j in range(n):
        u = bits[j]
        u = ~u if u & top else u | top
        image[j] = u
        for p in range(6):
            counts[p, (u >> np.uint64(11 * p)) & np.uint64(2047)] += 1
    for p in range(6):
        shift = np.uint64(11 * p)
        total = 0
        constant = False
        for m in range(2048):
            c = counts[p, m]
            constant = constant or c == n
            counts[p, m] = total
            total += c
        if constant:
            continue
        for j in range(n):
            u = image[j]
            d = (u >> shift) & np.uint64(2047)
            k = counts[p, d]
            counts[p, d] = k + 1
            image2[k] = u
            at2[k] = at[j]
        image, image2 = image2, image
        at, at2 = at2, at
    old_keys = keys.copy()
    old_perm = perm.copy()
    for m in range(n):
        keys[m] = old_keys[at[m]]
        perm[m] = old_perm[at[m]]


def _support(omega):
    nz = np.flatnonzero(omega > 0)
    return int(nz[0]), int(nz[-1]) + 1


@njit(cache=True)
def _quadratic_range_sums(hp, vp, order_pos, q, order_neg, omega, pieces, g_pos, g_neg):
    """Prefix-sum evaluation for ``loss(z) = sum_j c_j (margin_j - z)^2 1(z < threshold_j)``.

    ``pieces`` holds the rows ``(c_j, margin_j, threshold_j)``
    (:attr:`skrank.pairwise_losses.PairwiseLoss.pieces`).  ``hp`` ascending
    with the positives' weights ``vp`` (ones for unit weights: the products
    are then exact), ``q`` descending.  For each piece, a positive's active
    negatives (``q_k > h_i - threshold``) are a prefix of ``q`` that shrinks
    as ``h_i`` grows, and a negative's active positives
    (``h_i < q_k + threshold``) a prefix of ``hp`` that shrinks down the
    ranks: one merge of each class gives every prefix length of every
    piece; the prefix sums are shared by the pieces.  Fills
    ``g_pos``/``g_neg`` (input order); returns the sum.
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
    v = np.zeros(n_pos + 1)
    s = np.zeros(n_pos + 1)
    for j in range(n_pos):
        v[j + 1] = v[j] + vp[j]
        s[j + 1] = s[j] + vp[j] * hp[j]
    g_neg[:] = 0.0  # the ranks below q weigh nothing
    n_pieces = pieces.shape[0]
    K = np.full(n_pieces, n_neg)
    c = np.full(n_pieces, n_pos)
    total = 0.0
    # one sweep of each class serves every piece: a pointer per piece
    for j in range(n_pos):
        h = hp[j]
        g = 0.0
        for p in range(n_pieces):
            coefficient, margin, threshold = pieces[p, 0], pieces[p, 1], pieces[p, 2]
            k = K[p]
            while k > 0 and q[k - 1] <= h - threshold:
                k -= 1
            K[p] = k
            a = margin - h
            total += coefficient * vp[j] * (a * a * w0[k] + 2.0 * a * w1[k] + w2[k])
            g -= coefficient * 2.0 * vp[j] * (a * w0[k] + w1[k])
        g_pos[order_pos[j]] = g
    for k in range(n_neg):
        g = 0.0
        for p in range(n_pieces):
            coefficient, margin, threshold = pieces[p, 0], pieces[p, 1], pieces[p, 2]
            i = c[p]
            while i > 0 and hp[i - 1] >= q[k] + threshold:
                i -= 1
            c[p] = i
            g += coefficient * 2.0 * omega[k] * (v[i] * (margin + q[k]) - s[i])
        g_neg[order_neg[k]] = g
    return total


@njit(cache=True)
def _pair_range_sums(code, shift, scale, h_pos, vp, q, omega):
    """Double loop over positives (weights ``vp``) and in-range negatives (any pairwise loss)."""
    g_pos = np.zeros(h_pos.shape[0])
    g_neg = np.zeros(q.shape[0])
    total = 0.0
    for i in range(h_pos.shape[0]):
        row_sum, row_derivative = _positive_row_sums(code, shift, scale, h_pos[i], vp[i], q, omega, g_neg)
        total += vp[i] * row_sum
        g_pos[i] = vp[i] * row_derivative
    return total, g_pos, g_neg


@njit(cache=True)
def _positive_row_sums(code, shift, scale, h, weight, q, omega, g_neg):
    """One positive's pairs: ``sum_k omega_k loss(h - q_k)`` and its derivative in ``h``.

    Subtracts ``weight`` times each pair's derivative from ``g_neg``.
    """
    row_sum = 0.0
    row_derivative = 0.0
    for k in range(q.shape[0]):
        v, d = pair_value_and_derivative(code, shift, scale, h - q[k])
        row_sum += omega[k] * v
        d *= omega[k]
        row_derivative += d
        g_neg[k] -= weight * d
    return row_sum, row_derivative


class PartialAUCObjective(Datafit):
    """The partial-AUC objective ``F(w)`` on one training set, with its gradient.

    A :class:`~skrank.datafits.base.Datafit` of ``w`` alone (the pairs
    ignore an intercept).  Every product with ``X`` goes through one design,
    so a Dask or CuPy ``X`` is never gathered (:ref:`partial-auc-evaluation`).

    Parameters
    ----------
    X : {ndarray, sparse matrix, dask.array.Array, array-API array} of shape (n_samples, n_features)
        Training data; a Dask array must be chunked by rows
        (:func:`skrank.backends.dask_design.check_dask_array`), an
        array-API array be float64 (:mod:`skrank.backends.dispatch`).
    y : ndarray of shape (n_samples,)
        Labels in {-1, +1}.
    fpr_range : tuple (alpha, beta)
        False-positive-rate range, ``0 <= alpha < beta <= 1``.
    loss : skrank.pairwise_losses.PairwiseLoss
        The pairwise loss.
    alpha : float
        Strength of the l2 penalty ``alpha ||w||^2 / 2``.
    sample_weight : ndarray of shape (n_samples,), default=None
        Nonnegative weights of the rows of ``X``: the objective of the
        weighted empirical distribution.  None, or
        weights of one everywhere, give the unweighted objective.
    tpr_min : float, default=0.0
        The true-positive-rate floor of a two-way range: only the positives
        ranked in the bottom ``1 - tpr_min`` of the positives' weight take
        part (:ref:`partial-auc-two-way`).

    Attributes
    ----------
    X : {ndarray, sparse matrix, dask.array.Array, array-API array}
        The training data, as given.
    design : skrank.backends.design.Design
        The products with ``X`` (:func:`skrank.backends.dispatch.make_design`).
    positive : ndarray of bool of shape (n_samples,)
        The positives' rows.
    X_pos, X_neg : {ndarray, sparse matrix}
        The rows of each class, copied on first use (for the stochastic
        solvers; not available for an external ``X``: Dask, CuPy...).
    sample_weight : ndarray of shape (n_samples,) or None
        The rows' weights; None without weights.
    pos_weight, neg_weight : ndarray or None
        The weights of each class's rows; None without weights.
    weighted : bool
        Whether the objective has sample weights.
    omega : ndarray or None
        Rank weights of the negatives (None with weights: they depend on
        the order of the negatives and are recomputed at each evaluation).
    m, n : float
        The (possibly fractional) ranks ``alpha_fpr N-`` and
        ``beta_fpr N-``; with weights ``alpha_fpr W-`` and ``beta_fpr W-``,
        in units of the negatives' weight.
    normaliser : float
        ``N+ (n - m)``; with weights ``W+ (n - m)``, each class's weights
        rescaled by a power of two (its largest in ``[0.5, 1)``), the units
        in which the weighted sums are computed.
    """

    #: the objective is a function of ``w`` alone (an intercept cancels in the pairs)
    fits_intercept = False

    def __init__(self, X, y, fpr_range, loss, alpha, sample_weight=None, tpr_min=0.0):
        y = np.asarray(y)
        pos = y > 0
        self.X = X
        self.design = make_design(X, fit_intercept=False)
        self.positive = pos
        # index arrays: taking and scattering by them is several times faster than by a mask
        self._rows = (np.flatnonzero(pos), np.flatnonzero(~pos))
        self.n_pos, self.n_neg = self._rows[0].shape[0], self._rows[1].shape[0]
        self.fpr_range = _check_fpr_range(fpr_range)
        self.tpr_min = float(tpr_min)
        self._pos_range = (0.0, 1.0 - self.tpr_min)
        if sample_weight is not None:
            sample_weight = np.asarray(sample_weight, dtype=np.float64)
            if sample_weight.shape != y.shape:
                raise ValueError(f"sample_weight must have shape {y.shape}, got {sample_weight.shape}.")
            if not np.all(np.isfinite(sample_weight)) or np.any(sample_weight < 0):
                raise ValueError("sample_weight must be finite and nonnegative.")
            if np.all(sample_weight == 1.0):
                sample_weight = None
        self.weighted = sample_weight is not None
        self.sample_weight = sample_weight
        self.pos_weight = sample_weight[pos] if self.weighted else None
        self.neg_weight = sample_weight[~pos] if self.weighted else None
        self.loss = loss
        self.alpha = float(alpha)
        # the last sorting permutations: successive iterates rank alike
        self._orders = (np.arange(self.n_neg), np.arange(self.n_pos))
        if not self.weighted:
            check_range_holds_negatives(self.n_neg, self.fpr_range)
            self.m = self.fpr_range[0] * self.n_neg
            self.n = self.fpr_range[1] * self.n_neg
            self.omega = negative_rank_weights(self.n_neg, self.fpr_range)
            self._pos_rank = negative_rank_weights(self.n_pos, self._pos_range)
            self.normaliser = float(self._pos_rank.sum()) * float(self.omega.sum())
            return
        total_pos, total_neg = float(self.pos_weight.sum()), float(self.neg_weight.sum())
        if not (total_pos > 0 and total_neg > 0):
            raise ValueError("sample_weight gives one class a total weight of zero: both classes "
                             "need a positive weight.")
        check_range_holds_negatives(self.n_neg, self.fpr_range, self.neg_weight)
        self.m = self.fpr_range[0] * total_neg
        self.n = self.fpr_range[1] * total_neg
        self.omega = None
        # the sums run on each class's weights rescaled by a power of two (exact): products of
        # a positive's and a negative's weights neither underflow nor overflow at any scale
        self._pos_units, self._neg_units = in_units(self.pos_weight), in_units(self.neg_weight)
        units_neg = float(self._neg_units.sum())
        self.normaliser = (float(self._pos_units.sum()) * (1.0 - self.tpr_min)
                           * (self.fpr_range[1] * units_neg - self.fpr_range[0] * units_neg))

    @functools.cached_property
    def X_pos(self):
        """The positives' rows (a copy, made on first use)."""
        return self._class_rows(self._rows[0])

    @functools.cached_property
    def X_neg(self):
        """The negatives' rows (a copy, made on first use)."""
        return self._class_rows(self._rows[1])

    def _class_rows(self, rows):
        kind = external_kind(self.X)
        if kind is not None:
            raise ValueError(f"the rows of a class are not split out of {kind}: only the full-batch "
                             "solvers (lbfgs, exact) fit one.")
        return self.X[rows]

    def _ranked_omega(self, order_neg):
        """Rank weights of the negatives taken in the order ``order_neg`` (decreasing scores)."""
        return negative_rank_weights(self.n_neg, self.fpr_range, self._neg_units[order_neg])

    def _ranked_positives(self, order_pos):
        """Weights of the positives taken in the order ``order_pos`` (increasing scores), two-way ranges."""
        if not self.weighted:
            return self._pos_rank
        return negative_rank_weights(self.n_pos, self._pos_range, self._pos_units[order_pos])

    def _range_sums(self, h_pos, h_neg, omega=None):
        if omega is None:
            omega = self._ranked_omega if self.weighted else self.omega
        if self.tpr_min > 0.0:
            pos_weight = self._ranked_positives
        else:
            pos_weight = self._pos_units if self.weighted else None
        return range_loss_and_score_gradients(h_pos, h_neg, omega, self.loss, self._orders, pos_weight)

    def _scale_row_weight(self):
        """Each class weighing one half, spread over its rows as the sample weights are, as in ``F``.

        Weights constant over each class leave ``F`` and the units of
        :meth:`variable_scale` unchanged.
        """
        v = np.ones(self.positive.shape[0]) if self.sample_weight is None else self.sample_weight
        pos = self.positive
        return np.where(pos, v / v[pos].sum(), v / v[~pos].sum())

    def check_unweighted(self, solver):
        """Raise a ValueError if the objective has sample weights, which ``solver`` does not take.

        Parameters
        ----------
        solver : str
            The name of the solver, for the message.

        Raises
        ------
        ValueError
            When the objective was built with sample weights.
        """
        if self.weighted:
            raise ValueError(
                f"solver={solver!r} does not take sample_weight; use solver='lbfgs' (or 'exact' "
                "for fpr_range=(0, 1) with loss='squared')."
            )

    def scores(self, w):
        """Positives' and negatives' scores ``X w``.

        Parameters
        ----------
        w : ndarray of shape (n_features,)
            Coefficients.

        Returns
        -------
        h_pos, h_neg : ndarray
            The scores of the positives and of the negatives.
        """
        h = self.design.matvec(np.asarray(w, dtype=np.float64))
        return h.take(self._rows[0]), h.take(self._rows[1])

    def _gradient(self, g_pos, g_neg):
        """``X' g`` for the scores' derivatives of each class, ``g_pos`` and ``g_neg``."""
        g = np.empty(self.positive.shape[0])
        g[self._rows[0]] = g_pos
        g[self._rows[1]] = g_neg
        return self.design.rmatvec(g)

    def _data_term(self, w, gradient):
        h_pos, h_neg = self.scores(w)
        total, g_pos, g_neg = self._range_sums(h_pos, h_neg)
        if not gradient:
            return total / self.normaliser, None
        return total / self.normaliser, self._gradient(g_pos, g_neg) / self.normaliser

    def linear_terms(self, z):
        """The data term and its derivatives in the scores, at the scores ``z`` (``X w`` up to a shift).

        The pairs ignore a common shift of the scores: the gradient in ``w``
        at ``z = X w + b`` is ``X' dz``.

        ``z`` and ``dz`` are ``n``-vectors of the design's namespace: for an
        array-API ``X``, ``z`` goes to the host for the rank step (the sorts
        and sums) and ``dz`` comes back, one ``n``-vector each way.

        Parameters
        ----------
        z : array of shape (n_samples,)
            The linear predictor.

        Returns
        -------
        value : float
        dz : array of shape (n_samples,)
        """
        rows_pos, rows_neg = self._rows
        z = self.design.to_host(z)
        total, g_pos, g_neg = self._range_sums(z.take(rows_pos), z.take(rows_neg))
        g = np.empty(z.shape[0])
        g[rows_pos] = g_pos
        g[rows_neg] = g_neg
        return total / self.normaliser, self.design.to_native(g) / self.normaliser

    def ranked_scores(self, theta):
        """The scores that the pairs compare, ``X w``, at ``theta = (w, b)``.

        Parameters
        ----------
        theta : ndarray of shape (n_features + 1,)
            Coefficients and an intercept (which the pairs ignore).

        Returns
        -------
        ndarray of shape (n_samples,)
        """
        return self.design.matvec(np.asarray(theta, dtype=np.float64)[:-1])

    def metric(self, scores):
        """The training metric the surrogate stands for, at the scores ``scores`` of the samples.

        The (two-way) partial AUC of :mod:`skrank.metrics` over the
        objective's range, with its sample weights.

        Parameters
        ----------
        scores : ndarray of shape (n_samples,)

        Returns
        -------
        float
        """
        return region_area(self.positive, scores, self.sample_weight, fpr_range=self.fpr_range,
                           tpr_min=self.tpr_min)

    def set_margin(self, margin):
        """Replace the pairwise loss by the same loss with margin ``margin``.

        Parameters
        ----------
        margin : float
            Positive margin (the half-width of the smooth step).
        """
        self.loss = get_pairwise_loss(self.loss.name, margin)

    def top_subgradient(self, w, level):
        """A subgradient of ``f^l(w) / normaliser``: the pairs with the ``l`` top negatives.

        ``f^l(w) = sum_i [sum_{k <= floor(l)} loss(h_i - q_(k)) + (l - floor(l))
        loss(h_i - q_(floor(l)+1))]`` (Yao, Lin and Yang 2022, eq. (6), with
        fractional ``l``); used by DCA to linearise ``f^m``.  Unweighted
        objectives only.

        Parameters
        ----------
        w : ndarray of shape (n_features,)
            Coefficients.
        level : float
            The number ``l`` of top negatives.

        Returns
        -------
        value : float
            ``f^l(w) / normaliser``.
        grad : ndarray of shape (n_features,)
            A subgradient of it.
        """
        self.check_unweighted("dca")
        w = np.asarray(w, dtype=np.float64)
        h_pos, h_neg = self.scores(w)
        k = np.arange(1, self.n_neg + 1, dtype=np.float64)
        omega_top = np.clip(level - (k - 1.0), 0.0, 1.0)
        if not np.any(omega_top > 0):
            return 0.0, np.zeros_like(w)
        total, g_pos, g_neg = self._range_sums(h_pos, h_neg, omega_top)
        grad = self._gradient(g_pos, g_neg)
        return total / self.normaliser, grad / self.normaliser


class SigmoidScorePartialAUC:
    """The partial-AUC surrogate of :class:`PartialAUCObjective` on the scores ``sigmoid(X w + b)``.

    The pairs compare bounded scores in ``(0, 1)``, as the networks of the
    papers do (their last layer is a sigmoid): a positive ranked far below
    the negatives weighs at most ``loss(-1)``, so a few positives that no
    threshold in the range would catch cannot steer the fit.  The ranking,
    the rank weights and the exact evaluation in ``O(n log n)`` are those of
    the linear score (the sigmoid keeps the order); the intercept ``b``
    moves the scores along the sigmoid, so it is a parameter.

    Parameters
    ----------
    objective : PartialAUCObjective
        The surrogate on the linear score, built with ``alpha=0``; its data,
        range, loss and weights are used.
    """

    fits_intercept = True

    def __init__(self, objective):
        self.objective = objective
        self.design = make_design(objective.X, fit_intercept=True)

    def _value(self, theta, gradient):
        z = self.design.matvec(np.asarray(theta, dtype=np.float64))
        if not gradient:
            obj = self.objective
            h = expit(z)
            return obj._range_sums(h.take(obj._rows[0]), h.take(obj._rows[1]))[0] / obj.normaliser, None
        value, dz = self.linear_terms(z)
        return value, self.design.rmatvec(dz)

    def linear_terms(self, z):
        """The surrogate and its derivatives in ``z = X w + b``, ``n``-vectors of the design's namespace."""
        h = self.design.sigmoid(z)
        value, g = self.objective.linear_terms(h)
        return value, g * (h * (1.0 - h))

    @property
    def loss(self):
        """The pairwise loss (that of the linear-score objective)."""
        return self.objective.loss

    def ranked_scores(self, theta):
        """The scores that the pairs compare, ``sigmoid(X w + b)``."""
        return expit(self.design.matvec(np.asarray(theta, dtype=np.float64)))

    def set_margin(self, margin):
        """Replace the pairwise loss by the same loss with margin ``margin``."""
        self.objective.set_margin(margin)

    def metric(self, scores):
        """The training metric the surrogate stands for (that of the linear-score objective)."""
        return self.objective.metric(scores)

    def value(self, theta):
        """The surrogate at ``theta = (w, b)``."""
        return self._value(theta, False)[0]

    def value_and_grad(self, theta):
        """The surrogate at ``theta = (w, b)`` and its gradient."""
        return self._value(theta, True)
