"""Fitting the ranking estimators' logistic-anchored objective (``rank_weight < 1``)."""

import copy

import numpy as np

from ..datafits.logistic_anchor import LogisticAnchoredObjective

#: ``alpha`` of ``partial_fit`` when ``alpha=None``: a stream has no ``n_samples``
STREAM_ALPHA = 1e-4


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
    ``r = 0``), so that the rank term moves the fit away from it.

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
        band the loss smooths over follows the spread of the scores; the
        logistic regression is then fitted even on a warm start, so that
        the objective depends on the data and the parameters only.

    Returns
    -------
    skrank.solvers.SolverResult
        ``coef`` is ``w``; ``info["score_intercept"]`` is ``b``;
        ``info["margin"]`` the rank loss's margin.
    """
    from ..solvers.full_batch.lbfgs import lbfgs

    objective = LogisticAnchoredObjective(rank_objective, X, y, rank_weight,
                                          resolve_alpha(estimator.alpha, y, sample_weight), sample_weight)
    max_iter = 500 if estimator.max_iter is None else estimator.max_iter
    theta0 = None
    if coef_init is None or relative_margin is not None:
        theta0 = _logistic_start(objective, estimator.tol, max_iter)
    if relative_margin is not None:
        spread = _weighted_std(rank_objective.ranked_scores(theta0), objective.row_weight)
        rank_objective.set_margin(relative_margin * spread if spread > 0 else 1.0)
    if coef_init is not None:
        theta0 = np.append(np.asarray(coef_init, dtype=np.float64),
                           0.0 if intercept_init is None else float(intercept_init))
    result = lbfgs(objective, coef_init=theta0, tol=estimator.tol, max_iter=max_iter,
                   verbose=estimator.verbose)
    theta = result.coef
    result.coef, result.info["score_intercept"] = theta[:-1], float(theta[-1])
    result.info["margin"] = rank_objective.loss.margin
    return result


def _weighted_std(values, weights):
    mean = float(weights @ values)
    return float(np.sqrt(weights @ (values - mean) ** 2))


def _logistic_start(objective, tol, max_iter):
    """The minimiser of ``objective`` at ``rank_weight = 0`` (logistic regression), by L-BFGS from zero."""
    from ..solvers.full_batch.lbfgs import lbfgs

    objective.variable_scale()  # computed once, shared with the copy
    plain = copy.copy(objective)
    plain.rank_weight = 0.0
    result = lbfgs(plain, coef_init=np.zeros(objective.X.shape[1] + 1), tol=tol, max_iter=max_iter)
    return np.asarray(result.coef, dtype=np.float64)
