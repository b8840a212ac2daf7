"""Fitting the ranking estimators' logistic-anchored objective (``rank_weight < 1``)."""

import copy

import numpy as np

from ..datafits.logistic_anchor import LogisticAnchoredObjective
from ..solvers.progress import Progress

#: ``alpha`` of ``partial_fit`` when ``alpha=None``: a stream has no ``n_samples``
STREAM_ALPHA = 1e-4
#: Points of the segment from the logistic regression to a fit that ranks worse (:func:`_ranking_kept`).
_SEGMENT_POINTS = 8


def resolve_alpha(alpha, y, sample_weight=None):
    """The l2 strength of a fit: ``alpha``, or for None that of ``LogisticRegression(C=1)``.

    ``LogisticRegression(C=1)`` penalises the summed losses by
    ``||w||^2 / 2``; for a mean loss that is ``alpha = 1 / n_samples`` (with
    sample weights, one over their total), so that ``rank_weight=0`` with
    ``alpha=None`` is scikit-learn's default logistic regression.

    Parameters
    ----------
    alpha : float or None
        The estimator's ``alpha``.
    y : ndarray of shape (n_samples,)
        The training labels.
    sample_weight : ndarray of shape (n_samples,) or None, default=None

    Returns
    -------
    float
    """
    if alpha is not None:
        return float(alpha)
    total = float(np.shape(y)[0]) if sample_weight is None else float(np.sum(sample_weight))
    with np.errstate(divide="ignore", over="ignore"):
        alpha = 1.0 / total
    if not np.isfinite(alpha):
        raise ValueError(f"alpha=None is one over the total sample_weight, {total:.3g}, which overflows; "
                         "rescale sample_weight (e.g. divide it by its largest value) or set alpha.")
    return alpha


def fit_anchored(rank_objective, X, y, estimator, rank_weight, coef_init, intercept_init, sample_weight,
                 relative_margin=None):
    """L-BFGS on ``(1 - r) logistic + r rank + alpha ||w||^2 / 2`` for one binary problem.

    The start is ``(coef_init, intercept_init)`` on a warm start, otherwise
    the logistic regression of the same ``alpha`` (the objective at
    ``r = 0``), so that the rank term moves the fit away from it.  For
    ``r > 0`` the fit never ranks the training data worse than that
    logistic regression (:func:`_ranking_kept`), which is therefore fitted
    on a warm start too.

    Parameters
    ----------
    rank_objective : object
        The rank surrogate built with ``alpha=0``.
    X : {ndarray, sparse matrix, dask.array.Array, array-API array} of shape (n, d)
    y : ndarray of shape (n,)
        Labels in {-1, +1}.
    estimator : object
        Gives ``alpha`` (:func:`resolve_alpha`), ``tol``, ``max_iter`` and ``verbose``.
    rank_weight : float
        ``r`` in ``[0, 1]``.
    coef_init, intercept_init : ndarray or None, float or None
        A warm start, or None.
    sample_weight : ndarray or None
    relative_margin : float or None, default=None
        When given, the rank loss's margin becomes ``relative_margin`` times
        the (weighted) standard deviation of the ranked scores of the
        logistic regression (``rank_objective.set_margin``), so that the
        band the loss smooths over follows the spread of the scores, so
        that the objective depends on the data and the parameters only.

    Returns
    -------
    skrank.solvers.SolverResult
        ``coef`` is ``w``; ``info["score_intercept"]`` is ``b``; ``n_iter``
        counts, for a cold fit, the iterations of its logistic start too;
        ``info["margin"]`` the rank loss's margin.
    """
    from ..solvers.full_batch.lbfgs import lbfgs

    objective = LogisticAnchoredObjective(rank_objective, X, y, rank_weight,
                                          resolve_alpha(estimator.alpha, y, sample_weight), sample_weight)
    max_iter = 500 if estimator.max_iter is None else estimator.max_iter
    # the logistic regression of this alpha: the start of a cold fit and the ranking the fit must match
    logistic, start_iterations = None, 0
    if coef_init is None or rank_weight > 0.0 or relative_margin is not None:
        logistic, start_iterations = _logistic_start(objective, estimator.tol, max_iter)
    if relative_margin is not None:
        spread = _weighted_std(rank_objective.ranked_scores(logistic), objective.row_weight)
        rank_objective.set_margin(relative_margin * spread if spread > 0 else 1.0)
    theta0 = logistic
    if coef_init is not None:
        theta0 = np.append(np.asarray(coef_init, dtype=np.float64),
                           0.0 if intercept_init is None else float(intercept_init))
    result = lbfgs(objective, coef_init=theta0, tol=estimator.tol, max_iter=max_iter,
                   verbose=estimator.verbose)
    if coef_init is None:
        result.n_iter += start_iterations  # a cold fit's way from zero runs through its start
    theta = result.coef if rank_weight == 0.0 else _ranking_kept(objective, logistic, result)
    if "kept_fraction" in result.info:
        fraction = result.info["kept_fraction"]
        kept = (f"the point {fraction:g} of the way from it to the descent's end" if fraction > 0
                else "the logistic regression")
        Progress("lbfgs", estimator.verbose).note(
            f"the training metric ended below the logistic regression's: kept {kept}")
    result.coef, result.info["score_intercept"] = theta[:-1], float(theta[-1])
    result.info["margin"] = rank_objective.loss.margin
    return result


def _ranking_kept(objective, logistic, result):
    """The fit's coefficients, moved back towards ``logistic`` until they rank the training data as well.

    The descent lowers a smoothed surrogate of the metric, which can fall
    while the metric itself falls below that of the logistic regression of
    the same ``alpha``.  The fit then keeps the point nearest its end on
    the segment from the logistic regression whose training metric is at
    least the logistic regression's, among ``_SEGMENT_POINTS`` evenly
    spaced ones (the logistic regression itself at worst).  ``result``
    records its objective and, in ``info["kept_fraction"]``, its position
    on the segment.
    """
    metric = objective.rank_objective.metric
    theta = result.coef
    # the scores are linear in theta: those of the segment's points need no pass over X
    start, end = objective.design.matvec(logistic), objective.design.matvec(theta)
    reference = metric(start)
    if metric(end) >= reference:
        return theta
    kept = 0.0
    for k in range(_SEGMENT_POINTS - 1, 0, -1):
        if metric(start + k / _SEGMENT_POINTS * (end - start)) >= reference:
            kept = k / _SEGMENT_POINTS
            break
    theta = logistic + kept * (theta - logistic)
    result.objective_history = np.append(result.objective_history, objective.value(theta))
    result.info["kept_fraction"] = kept
    return theta


def _weighted_std(values, weights):
    mean = float(weights @ values)
    return float(np.sqrt(weights @ (values - mean) ** 2))


def _logistic_start(objective, tol, max_iter):
    """The minimiser of ``objective`` at ``rank_weight = 0`` (logistic regression), by L-BFGS from zero.

    Returns it and the iterations it took.
    """
    from ..solvers.full_batch.lbfgs import lbfgs

    objective.variable_scale()  # computed once, shared with the copy
    plain = copy.copy(objective)
    plain.rank_weight = 0.0
    result = lbfgs(plain, coef_init=np.zeros(objective.X.shape[1] + 1), tol=tol, max_iter=max_iter)
    return np.asarray(result.coef, dtype=np.float64), int(result.n_iter)
