"""Evaluation metrics for rank-based objectives, and scorers for model selection.

* :func:`partial_auc_score` -- the normalised area under the ROC curve between
  two false-positive rates, computed on scikit-learn's ROC points;
* :func:`two_way_partial_auc_score` -- the normalised area under the ROC curve
  where the true-positive rate is at least a floor and the false-positive
  rate at most a ceiling;
* :func:`rank_risk_score` -- a risk (superquantile, extremile, ...) of the
  individual losses of a prediction;
* :func:`make_partial_auc_scorer`, :func:`make_two_way_partial_auc_scorer`
  and :func:`make_rank_risk_scorer` -- the
  same quantities as scorers for :class:`~sklearn.model_selection.GridSearchCV`
  and :func:`~sklearn.model_selection.cross_val_score`.
"""


import numpy as np
import scipy.sparse as sp
from sklearn.metrics import make_scorer
from sklearn.utils import check_consistent_length, column_or_1d
from sklearn.utils.multiclass import type_of_target

from ._docs import filling
from .losses import Loss, get_loss
from .risks import check_real, check_risk

__all__ = [
    "partial_auc_score",
    "make_partial_auc_scorer",
    "two_way_partial_auc_score",
    "make_two_way_partial_auc_scorer",
    "rank_risk_score",
    "make_rank_risk_scorer",
]


#: Texts the partial-AUC metrics' and scorers' docstrings name as ``{key}``, written in by ``_fill_doc``.
_SHARED_DOC = {
    "average": """average : {"macro", "micro"} or None, default="macro"
        For a multi-label indicator ``y_true`` of shape (n_samples,
        n_labels), dense or SciPy sparse, with scores of the same shape: the mean of the labels'
        scores ("macro"), the score of all (sample, label) pairs pooled
        ("micro", each pair with its sample's weight), or the array of the
        labels' scores (None), as in :func:`sklearn.metrics.roc_auc_score`.
        Ignored for binary ``y_true``.""",
    "region": """tpr_min : float
        The true-positive-rate floor, in ``[0, 1)``.
    fpr_max : float or None, default=None
        The false-positive-rate ceiling, in ``(0, 1]``; None reads it from
        ``fpr_range``, and one of the two is required.""",
    "input_errors": """If ``y_true`` is not binary or holds a single class, if its labels
        mix strings and numbers, if ``y_score`` holds NaN or infinity or
        has columns for a binary ``y_true``, if the lengths disagree""",
}


_fill_doc = filling(_SHARED_DOC)


def _check_fpr_range(fpr_range):
    """Validate ``fpr_range`` and return it as two floats ``(alpha, beta)``."""
    try:
        alpha, beta = fpr_range
    except (TypeError, ValueError):
        raise ValueError(
            f"fpr_range must be a pair (alpha, beta) of false-positive rates, got {fpr_range!r}."
        ) from None
    alpha, beta = check_real("fpr_range alpha", alpha), check_real("fpr_range beta", beta)
    if not (0.0 <= alpha <= 1.0 and 0.0 <= beta <= 1.0):
        raise ValueError(f"fpr_range must lie inside [0, 1], got ({alpha!r}, {beta!r}).")
    if alpha >= beta:
        raise ValueError(
            f"fpr_range must satisfy alpha < beta, got alpha={alpha!r} and beta={beta!r}."
        )
    return alpha, beta


def _area_between(x, y, alpha, beta):
    """Area under the piecewise-linear curve through ``(x, y)`` over ``[alpha, beta]``.

    ``x`` must be nondecreasing.  Vertical segments (repeated ``x``) have no
    width and contribute nothing; every other segment is clipped to
    ``[alpha, beta]`` and integrated exactly by the trapezoid rule.
    """
    x0, x1 = x[:-1], x[1:]
    y0, y1 = y[:-1], y[1:]
    lo = np.maximum(x0, alpha)
    hi = np.minimum(x1, beta)
    keep = (hi > lo) & (x1 > x0)
    x0, x1, y0, y1, lo, hi = x0[keep], x1[keep], y0[keep], y1[keep], lo[keep], hi[keep]
    slope = (y1 - y0) / (x1 - x0)
    y_lo = y0 + slope * (lo - x0)
    y_hi = y0 + slope * (hi - x0)
    return float(np.sum(0.5 * (y_lo + y_hi) * (hi - lo)))


@_fill_doc
def partial_auc_score(y_true, y_score, *, fpr_range=(0.0, 1.0), sample_weight=None, pos_label=None,
                      average="macro"):
    """Normalised partial area under the ROC curve over a false-positive-rate range.

    The ROC curve is the one of :func:`sklearn.metrics.roc_curve` with
    ``drop_intermediate=False``, joined by straight lines, so that tied scores
    count one half, exactly as in :func:`sklearn.metrics.roc_auc_score`.  The
    score is the area under that curve between the false-positive rates
    ``alpha`` and ``beta``, divided by ``beta - alpha``: a number in ``[0, 1]``
    that equals ``roc_auc_score`` when ``fpr_range=(0, 1)``.  No McClish
    correction is applied (unlike ``roc_auc_score(max_fpr=...)``), so a
    random scorer has expected value ``(alpha + beta) / 2``, not one half.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        True binary labels.
    y_score : array-like of shape (n_samples,)
        Scores, larger meaning more likely positive: the output of
        ``decision_function`` or the positive-class column of
        ``predict_proba``.
    fpr_range : tuple of two floats, default=(0.0, 1.0)
        False-positive rates ``(alpha, beta)`` with ``0 <= alpha < beta <= 1``.
    sample_weight : array-like of shape (n_samples,), default=None
        Sample weights.
    pos_label : int, float, bool or str, default=None
        Label of the positive class.  When None the larger of the two labels
        present in ``y_true`` is positive (as in ``roc_auc_score`` and as
        ``classes_[1]`` of scikit-learn classifiers).
    {average}

    Returns
    -------
    float or ndarray of shape (n_labels,)
        The partial AUC, normalised to ``[0, 1]`` (per label with
        ``average=None``).

    Raises
    ------
    ValueError
        {input_errors}, or if
        ``fpr_range`` is not a valid range.

    See Also
    --------
    sklearn.metrics.roc_auc_score : The full area, and McClish's standardised
        partial area for ``max_fpr``.

    Examples
    --------
    >>> from skrank.metrics import partial_auc_score
    >>> y = [0, 0, 1, 1]
    >>> s = [0.1, 0.4, 0.35, 0.8]
    >>> partial_auc_score(y, s)
    0.75
    >>> partial_auc_score(y, s, fpr_range=(0.0, 0.5))
    0.5
    """
    return two_way_partial_auc_score(y_true, y_score, tpr_min=0.0, fpr_range=_check_fpr_range(fpr_range),
                                     sample_weight=sample_weight, pos_label=pos_label, average=average)


def _threshold_sums(is_pos, y_score, sample_weight=None):
    """The weights of the positives and of the negatives scored at or above each distinct score.

    From the top score down; tied scores form one threshold.  Returns
    ``(tps, fps)``, the cumulative sums at each threshold.
    """
    order = np.argsort(y_score)[::-1]  # the order within tied scores does not matter
    score = y_score[order]
    pos = is_pos[order]
    weight = np.ones(score.shape[0]) if sample_weight is None else sample_weight[order]
    last = np.r_[np.flatnonzero(np.diff(score)), score.shape[0] - 1]
    return np.cumsum(np.where(pos, weight, 0.0))[last], np.cumsum(np.where(pos, 0.0, weight))[last]


def _roc_points(is_pos, y_score, sample_weight=None):
    """The false- and true-positive rates at every distinct threshold, from the top score down.

    The points of :func:`sklearn.metrics.roc_curve` with
    ``drop_intermediate=False``, starting at ``(0, 0)``: tied scores form
    one step, a diagonal segment of the curve.
    """
    tps, fps = _threshold_sums(is_pos, y_score, sample_weight)
    return np.r_[0.0, fps / fps[-1]], np.r_[0.0, tps / tps[-1]]


def region_area(is_pos, y_score, sample_weight=None, *, fpr_range=(0.0, 1.0), tpr_min=0.0):
    """Normalised ROC area of checked inputs over an FPR range, above a TPR floor.

    The core of :func:`partial_auc_score` (``tpr_min=0``) and
    :func:`two_way_partial_auc_score` (``fpr_range=(0, fpr_max)``), without
    their checks; the estimators evaluate their training metric with it.

    Parameters
    ----------
    is_pos : ndarray of bool of shape (n_samples,)
        Whether each sample is a positive; both classes present.
    y_score : ndarray of float64 of shape (n_samples,)
        Finite scores.
    sample_weight : ndarray of shape (n_samples,) or None, default=None
        Nonnegative weights, positive in total in each class.
    fpr_range : (float, float), default=(0.0, 1.0)
        A valid range ``0 <= alpha < beta <= 1``.
    tpr_min : float, default=0.0
        The floor, in ``[0, 1)``; a positive floor needs ``alpha = 0``.

    Returns
    -------
    float
        The area over the region divided by the region's area, in ``[0, 1]``.
    """
    alpha, beta = fpr_range
    fpr, tpr = _roc_points(is_pos, y_score, sample_weight)
    if tpr_min > 0.0:
        fpr, tpr = _excess_over(fpr, tpr, tpr_min)
    # the area lies in [0, region]; rounding can put the ratio an ulp above 1
    return float(np.clip(_area_between(fpr, tpr, alpha, beta) / ((beta - alpha) * (1.0 - tpr_min)), 0.0, 1.0))


def average_precision(is_pos, y_score, sample_weight=None):
    """Average precision of checked inputs, as :func:`sklearn.metrics.average_precision_score`.

    ``sum_k (R_k - R_{k-1}) P_k`` over the distinct thresholds, tied scores
    one threshold.

    Parameters
    ----------
    is_pos : ndarray of bool of shape (n_samples,)
        Whether each sample is a positive; at least one positive of positive weight.
    y_score : ndarray of float64 of shape (n_samples,)
        Finite scores.
    sample_weight : ndarray of shape (n_samples,) or None, default=None
        Nonnegative weights.

    Returns
    -------
    float
    """
    tps, fps = _threshold_sums(is_pos, y_score, sample_weight)
    predicted = tps + fps
    with np.errstate(invalid="ignore", divide="ignore"):
        precision = np.where(predicted > 0, tps / predicted, 1.0)
    recall_steps = np.diff(np.r_[0.0, tps / tps[-1]])
    return float(recall_steps @ precision)


def _check_roc_region(tpr_min=0.0, fpr_range=None, fpr_max=None, *, default=None):
    """The ROC region of a partial AUC, from the names its metrics, scorers and estimators share.

    The false-positive rates are ``fpr_range=(fpr_min, fpr_max)``, or
    ``fpr_max=b`` alone for the range ``(0, b)``; both may be given when
    ``fpr_max`` is the upper end of ``fpr_range``.  A positive ``tpr_min``
    makes the region two-way, ``TPR >= tpr_min`` and ``FPR <= fpr_max``,
    whose range starts at 0.

    Parameters
    ----------
    tpr_min : float, default=0.0
        The true-positive-rate floor, in ``[0, 1)``.
    fpr_range : tuple of two floats or None, default=None
        ``(fpr_min, fpr_max)`` with ``0 <= fpr_min < fpr_max <= 1``.
    fpr_max : float or None, default=None
        The false-positive-rate ceiling, in ``(0, 1]``.
    default : tuple of two floats or None, default=None
        The range when neither ``fpr_range`` nor ``fpr_max`` is given; None
        makes one of them required.

    Returns
    -------
    fpr_range : tuple of two floats
        ``(fpr_min, fpr_max)``.
    tpr_min : float

    Raises
    ------
    ValueError
        Naming the parameter: a value out of range, ``fpr_range`` and
        ``fpr_max`` that disagree, a positive ``tpr_min`` with a range that
        does not start at 0, or no range without a default.
    """
    tpr_min = check_real("tpr_min", tpr_min)
    if not 0.0 <= tpr_min < 1.0:
        raise ValueError(f"tpr_min must lie in [0, 1), got {tpr_min!r}.")
    if fpr_max is not None:
        fpr_max = check_real("fpr_max", fpr_max)
        if not 0.0 < fpr_max <= 1.0:
            raise ValueError(f"fpr_max must lie in (0, 1], got {fpr_max!r}.")
    if fpr_range is not None:
        fpr_range = _check_fpr_range(fpr_range)
        if fpr_max is not None and fpr_max != fpr_range[1]:
            raise ValueError(
                f"fpr_range={fpr_range} and fpr_max={fpr_max!r} disagree: fpr_max is the upper end of "
                f"fpr_range. Pass one of them, fpr_range=({fpr_range[0]!r}, {fpr_max!r}) or fpr_max="
                f"{fpr_max!r} (the range (0, {fpr_max!r}))."
            )
    elif fpr_max is not None:
        fpr_range = (0.0, fpr_max)
    elif default is not None:
        fpr_range = _check_fpr_range(default)
    else:
        raise ValueError("Neither fpr_max nor fpr_range is given: pass the false-positive-rate ceiling as "
                         "fpr_max=b, or fpr_range=(0, b).")
    if tpr_min > 0.0 and fpr_range[0] > 0.0:
        raise ValueError(
            f"tpr_min={tpr_min:g} asks for the two-way region TPR >= tpr_min and FPR <= fpr_max, whose "
            f"false-positive rates start at 0; got fpr_range={fpr_range}. Pass fpr_max={fpr_range[1]!r} "
            f"or fpr_range=(0, {fpr_range[1]!r})."
        )
    return fpr_range, tpr_min


def _excess_over(x, y, level):
    """The curve ``max(y - level, 0)`` through ``(x, y)`` (both nondecreasing), as points.

    The points where a segment crosses ``level`` are added, so that the
    curve stays piecewise linear between the returned points.
    """
    k = np.flatnonzero((y[:-1] < level) & (y[1:] > level))
    xc = x[k] + (level - y[k]) / (y[k + 1] - y[k]) * (x[k + 1] - x[k])
    x = np.insert(x, k + 1, xc)
    y = np.insert(y, k + 1, level)
    return x, np.maximum(y - level, 0.0)


@_fill_doc
def two_way_partial_auc_score(y_true, y_score, *, tpr_min, fpr_max=None, fpr_range=None, sample_weight=None,
                              pos_label=None, average="macro"):
    """Normalised two-way partial AUC: the ROC area where TPR >= ``tpr_min`` and FPR <= ``fpr_max``.

    The ROC curve is that of :func:`sklearn.metrics.roc_curve` with
    ``drop_intermediate=False``, joined by straight lines (tied scores count
    one half, as in :func:`sklearn.metrics.roc_auc_score`).  The score is
    the area of the region under the curve, above the line
    ``TPR = tpr_min`` and left of ``FPR = fpr_max``, divided by the area of
    that rectangle, ``fpr_max (1 - tpr_min)``: 1 for a perfect ranking, 0
    for one whose curve never enters the rectangle.  With ``tpr_min=0`` it
    is :func:`partial_auc_score` over ``fpr_range=(0, fpr_max)``.  The user
    guide relates it to other libraries' definitions.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        True binary labels.
    y_score : array-like of shape (n_samples,)
        Scores, larger meaning more likely positive.
    {region}
    fpr_range : tuple of two floats or None, default=None
        The false-positive rates ``(0, fpr_max)``, as
        :class:`~skrank.estimators.PartialAUCClassifier` takes them (give
        ``fpr_max``, ``fpr_range`` or both when they agree).  It must start
        at 0 when ``tpr_min > 0``; with ``tpr_min=0``, ``(a, b)`` gives
        :func:`partial_auc_score` over that range.
    sample_weight : array-like of shape (n_samples,), default=None
        Sample weights.
    pos_label : int, float, bool or str, default=None
        Label of the positive class; None means the larger label.
    {average}

    Returns
    -------
    float or ndarray of shape (n_labels,)
        The two-way partial AUC, normalised to ``[0, 1]``.

    Raises
    ------
    ValueError
        {input_errors}, if ``tpr_min`` or
        ``fpr_max`` is out of range, if neither ``fpr_max`` nor
        ``fpr_range`` is given, if they disagree, or if ``tpr_min > 0`` and
        ``fpr_range`` does not start at 0.

    Examples
    --------
    >>> from skrank.metrics import two_way_partial_auc_score
    >>> y = [0, 0, 1, 1]
    >>> s = [0.1, 0.4, 0.35, 0.8]
    >>> two_way_partial_auc_score(y, s, tpr_min=0.5, fpr_max=0.5)
    0.0
    >>> two_way_partial_auc_score(y, s, tpr_min=0.5, fpr_max=1.0)
    0.5
    >>> two_way_partial_auc_score(y, s, tpr_min=0.5, fpr_range=(0.0, 1.0))
    0.5
    """
    fpr_range, tpr_min = _check_roc_region(tpr_min, fpr_range, fpr_max)
    y_true = _dense(y_true)
    if _is_multilabel(y_true):
        return _over_labels(two_way_partial_auc_score, y_true, y_score, sample_weight, average,
                            tpr_min=tpr_min, fpr_range=fpr_range)
    y_true, y_score = _check_scores(y_true, y_score, sample_weight)
    pos_label = _check_binary_labels(y_true, pos_label)
    if sample_weight is not None:
        sample_weight = _check_class_weights(sample_weight, y_true == pos_label)
    return region_area(y_true == pos_label, y_score, sample_weight, fpr_range=fpr_range, tpr_min=tpr_min)


@_fill_doc
def make_two_way_partial_auc_scorer(*, tpr_min, fpr_max=None, fpr_range=None, pos_label=None):
    """Scorer for :func:`two_way_partial_auc_score`, for ``GridSearchCV(scoring=...)``.

    The scorer uses the estimator's ``decision_function`` when it has one,
    and the positive-class column of ``predict_proba`` otherwise.  The
    region takes the names of the metric and of
    :class:`~skrank.estimators.PartialAUCClassifier`: ``tpr_min`` with
    ``fpr_max=b`` or ``fpr_range=(0, b)``.

    Parameters
    ----------
    {region}
    fpr_range : tuple of two floats or None, default=None
        The false-positive rates ``(0, fpr_max)``; it must start at 0 when
        ``tpr_min > 0``.
    pos_label : int, float, bool or str, default=None
        Label of the positive class; None means the larger label.

    Returns
    -------
    scorer : callable
        ``scorer(estimator, X, y)``; greater is better.

    Raises
    ------
    ValueError
        If the region is not valid, as :func:`two_way_partial_auc_score`
        says.

    Examples
    --------
    >>> from skrank.estimators import PartialAUCClassifier
    >>> from skrank.metrics import make_two_way_partial_auc_scorer
    >>> region = dict(tpr_min=0.5, fpr_range=(0.0, 0.3))
    >>> clf = PartialAUCClassifier(**region)
    >>> scorer = make_two_way_partial_auc_scorer(**region)
    """
    fpr_range, tpr_min = _check_roc_region(tpr_min, fpr_range, fpr_max)
    return _ranking_scorer(two_way_partial_auc_score, pos_label, tpr_min=tpr_min, fpr_range=fpr_range)


def _ranking_scorer(score, pos_label, **region):
    """The scorer of ``score`` over ``region`` on the decision function (else ``predict_proba``'s column)."""
    if pos_label is not None:
        region["pos_label"] = pos_label
    return make_scorer(score, response_method=("decision_function", "predict_proba"), greater_is_better=True,
                       **region)


def _is_multilabel(y_true):
    return np.ndim(y_true) == 2 and np.shape(y_true)[1] > 1


def _over_labels(score, y_true, y_score, sample_weight, average, **region):
    """``score`` on a multi-label indicator ``y_true``: macro, micro or per label (``average=None``)."""
    if average not in ("macro", "micro", None):
        raise ValueError(f"average must be 'macro', 'micro' or None, got {average!r}.")
    y_true, y_score = np.asarray(y_true), np.asarray(y_score)
    if type_of_target(y_true, input_name="y_true") != "multilabel-indicator":
        raise ValueError("A 2-D y_true must be a multi-label indicator matrix of 0 and 1.")
    if y_score.shape != y_true.shape:
        raise ValueError(f"y_score has shape {y_score.shape}; a multi-label y_true of shape "
                         f"{y_true.shape} needs scores of the same shape.")
    if average == "micro":
        weight = None if sample_weight is None else np.repeat(np.asarray(sample_weight), y_true.shape[1])
        return score(y_true.ravel(), y_score.ravel(), sample_weight=weight, **region)
    per_label = []
    for k in range(y_true.shape[1]):
        try:
            per_label.append(score(y_true[:, k], y_score[:, k], sample_weight=sample_weight, **region))
        except ValueError as exc:
            raise ValueError(f"label {k}: {exc}") from None
    per_label = np.asarray(per_label)
    return per_label if average is None else float(per_label.mean())


def _check_label_types(y, name):
    """Raise a ValueError naming ``name`` when the labels ``y`` mix strings with numbers.

    Only labels held as Python objects (a list, an object array, a pandas
    column of dtype object) can mix; NumPy turns a list of both into
    strings, so they are read before any conversion.
    """
    dtype = getattr(y, "dtype", None)
    if dtype is not None and getattr(dtype, "kind", None) != "O":
        return  # numbers, or NumPy strings: one type (an array-API dtype has no kind, and no strings)
    values = np.asarray(y, dtype=object).ravel()
    is_str = np.fromiter((isinstance(v, str) for v in values), dtype=bool, count=values.shape[0])
    if is_str.any() and not is_str.all():
        raise ValueError(
            f"{name} mixes label types (string and number), for example {values[is_str][0]!r} and "
            f"{values[~is_str][0]!r}: the labels of a classification must all be strings or all be "
            f"numbers. Convert them to one type, for example with np.asarray({name}).astype(str)."
        )


def _dense(y):
    """``y`` as a dense array where it is a SciPy sparse matrix (a multi-label indicator), else as given."""
    return y.toarray() if sp.issparse(y) else y


def _one_per_sample(values, name, hint="."):
    """``values`` as a 1-D array, or a ValueError naming ``name`` when it has columns."""
    if np.ndim(values) > 2 or (np.ndim(values) == 2 and np.shape(values)[1] != 1):
        raise ValueError(f"{name} has shape {np.shape(values)}; it must hold one value per sample, of shape "
                         f"(n_samples,){hint}")
    return column_or_1d(values)


_ONE_SCORE = (": the output of decision_function, or the positive class's column of predict_proba "
              "(y_score[:, 1]). A multi-label y_true is a matrix of y_score's shape.")


def _check_scores(y_true, y_score, sample_weight):
    """``y_true`` and ``y_score`` as 1-D arrays of one length, the scores finite float64."""
    _check_label_types(y_true, "y_true")
    y_true = column_or_1d(y_true)
    y_score = _one_per_sample(y_score, "y_score", _ONE_SCORE)
    check_consistent_length(y_true, y_score, sample_weight)
    if y_true.shape[0] == 0:
        raise ValueError("y_true is empty; partial AUC needs samples of both classes.")
    try:
        y_score = y_score.astype(np.float64)
    except (TypeError, ValueError):
        raise ValueError("y_score must hold real numbers.") from None
    if not np.all(np.isfinite(y_score)):
        raise ValueError("y_score contains NaN or infinity; partial AUC needs finite scores.")
    return y_true, y_score


def _check_binary_labels(y_true, pos_label):
    """The positive label: ``pos_label``, or the larger of the two labels of ``y_true`` when None."""
    target_type = type_of_target(y_true, input_name="y_true")
    labels = np.unique(y_true)
    if labels.shape[0] < 2:
        raise ValueError(
            f"Only one class ({labels[0]!r}) is present in y_true; "
            "partial AUC is not defined in that case."
        )
    if target_type != "binary":
        raise ValueError(
            f"partial_auc_score supports binary classification only; y_true is {target_type!r} "
            f"with {labels.shape[0]} distinct labels."
        )
    if pos_label is None:
        return labels[-1]
    if pos_label not in labels.tolist():
        raise ValueError(
            f"pos_label={pos_label!r} is not one of the labels in y_true {labels.tolist()}."
        )
    return pos_label


def _check_class_weights(sample_weight, is_pos):
    """``sample_weight`` as float64, finite and nonnegative, with a positive weight in each class."""
    sample_weight = column_or_1d(sample_weight).astype(np.float64)
    if not np.all(np.isfinite(sample_weight)) or np.any(sample_weight < 0):
        raise ValueError("sample_weight must be finite and nonnegative.")
    if not np.any(sample_weight[is_pos] > 0) or not np.any(sample_weight[~is_pos] > 0):
        raise ValueError(
            "After sample weighting only one class has positive weight; "
            "partial AUC is not defined in that case."
        )
    return sample_weight


def make_partial_auc_scorer(fpr_range=(0.0, 1.0), *, pos_label=None):
    """Scorer for :func:`partial_auc_score`, for ``GridSearchCV(scoring=...)``.

    The scorer uses the estimator's ``decision_function`` when it has one,
    and the positive-class column of ``predict_proba`` otherwise.

    Parameters
    ----------
    fpr_range : tuple of two floats, default=(0.0, 1.0)
        False-positive rates ``(alpha, beta)`` with ``0 <= alpha < beta <= 1``.
    pos_label : int, float, bool or str, default=None
        Label of the positive class; None means the larger label
        (``classes_[1]``).

    Returns
    -------
    scorer : callable
        ``scorer(estimator, X, y)``; greater is better.

    Examples
    --------
    >>> from sklearn.linear_model import LogisticRegression
    >>> from sklearn.model_selection import GridSearchCV
    >>> from skrank.metrics import make_partial_auc_scorer
    >>> search = GridSearchCV(LogisticRegression(), {"C": [0.1, 1.0]},
    ...                       scoring=make_partial_auc_scorer((0.0, 0.3)))
    """
    return _ranking_scorer(partial_auc_score, pos_label, fpr_range=_check_fpr_range(fpr_range))


def _resolve_loss(loss):
    if isinstance(loss, Loss):
        return loss
    if isinstance(loss, str):
        return get_loss(loss)
    raise TypeError(f"loss must be a loss name or a skrank.losses.Loss, got {type(loss).__name__}.")


def rank_risk_score(y_true, y_pred, *, risk="superquantile", loss="squared", sample_weight=None,
                    pos_label=None):
    """Risk of the individual losses of a prediction.

    For a regression loss (``"squared"``, ``"absolute"``, ``"huber"``) the
    individual losses are ``loss(y_pred - y_true)``; for a classification loss
    (``"logistic"``, ``"hinge"``, ``"squared_hinge"``) ``y_pred`` holds
    decision scores and the losses are ``loss(-y * y_pred)`` with ``y`` the
    labels encoded as -1 / +1.  The result is
    ``risk.value(losses) = sum_i sigma_i L_(i)`` over the sorted losses:
    smaller is better.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        Targets (regression) or labels (binary classification).
    y_pred : array-like of shape (n_samples,)
        Predictions (regression) or decision scores (classification).
    risk : str or skrank.risks.BaseRisk, default="superquantile"
        The risk, as accepted by :func:`skrank.risks.check_risk`; a string
        means the class with its defaults (superquantile level 0.8).
    loss : str or skrank.losses.Loss, default="squared"
        The individual loss; ``"squared"`` is ``t**2 / 2``.
    sample_weight : array-like of shape (n_samples,), default=None
        Nonnegative weights: the risk of the weighted sample
        (:mod:`skrank.risks`; integer weights count as repeated samples).
    pos_label : int, float, bool or str, default=None
        Classification losses only: the positive label; None means the larger
        of the two labels in ``y_true``.

    Returns
    -------
    float
        The risk value.

    Examples
    --------
    >>> from skrank.metrics import rank_risk_score
    >>> from skrank.risks import Superquantile
    >>> rank_risk_score([0, 0, 0, 0], [1, 1, 2, 2], risk=Superquantile(q=0.5))
    2.0
    """
    risk = check_risk(risk)
    loss = _resolve_loss(loss)
    if loss.task == "classification":
        _check_label_types(y_true, "y_true")
    y_true = _one_per_sample(y_true, "y_true")
    y_pred = _one_per_sample(y_pred, "y_pred")
    y_pred = y_pred.astype(np.float64)
    check_consistent_length(y_true, y_pred)
    if y_pred.shape[0] == 0:
        raise ValueError("rank_risk_score needs at least one sample.")
    if not np.all(np.isfinite(y_pred)):
        raise ValueError("y_pred contains NaN or infinity.")
    if loss.task == "classification":
        labels = np.unique(y_true)
        if labels.shape[0] > 2:
            raise ValueError(
                f"Classification loss {loss.name!r} needs binary labels, "
                f"got {labels.shape[0]} classes."
            )
        if pos_label is None:
            pos_label = labels[-1]
        elif pos_label not in labels.tolist() and labels.shape[0] == 2:
            raise ValueError(f"pos_label={pos_label!r} is not one of the labels {labels.tolist()}.")
        y_sign = np.where(y_true == pos_label, 1.0, -1.0)
        t = -y_sign * y_pred
    else:
        y_true = y_true.astype(np.float64)
        if not np.all(np.isfinite(y_true)):
            raise ValueError("y_true contains NaN or infinity.")
        t = y_pred - y_true
    if sample_weight is not None:
        sample_weight = column_or_1d(sample_weight).astype(np.float64)
        check_consistent_length(y_true, sample_weight)
    return float(risk.value(loss.value(t), sample_weight))


def make_rank_risk_scorer(risk="superquantile", loss="squared"):
    """Scorer for :func:`rank_risk_score`, for ``GridSearchCV(scoring=...)``.

    The risk is a loss (smaller is better), so the scorer returns its
    negative, following scikit-learn's "greater is better" convention for
    scorers (like ``"neg_mean_squared_error"``).  Regression losses score
    ``predict``; classification losses score ``decision_function``.

    Parameters
    ----------
    risk : str or skrank.risks.BaseRisk, default="superquantile"
        The risk; see :func:`rank_risk_score`.
    loss : str or skrank.losses.Loss, default="squared"
        The individual loss; see :func:`rank_risk_score`.

    Returns
    -------
    scorer : callable
        ``scorer(estimator, X, y, sample_weight=None)`` returning
        ``-rank_risk_score(...)``.

    Examples
    --------
    >>> from skrank.metrics import make_rank_risk_scorer
    >>> from skrank.risks import Superquantile
    >>> scorer = make_rank_risk_scorer(Superquantile(q=0.9), "absolute")
    """
    risk_obj = check_risk(risk)
    loss_obj = _resolve_loss(loss)
    response = "decision_function" if loss_obj.task == "classification" else "predict"
    return make_scorer(
        rank_risk_score,
        response_method=response,
        greater_is_better=False,
        risk=risk_obj,
        loss=loss_obj,
    )
