"""The ranking classifiers' fits: their datafits, starts and ends, and the logistic-anchored fit."""

import copy

import numpy as np

from ..backends import arrays
from ..backends.dask_design import is_dask_array
from ..backends.dispatch import make_design
from ..backends.threads import blas_threads
from ..datafits.logistic_anchor import LogisticAnchoredObjective
from ..solvers.progress import Progress
from ..solvers.registry import solve
from ._platt import platt_calibrate, platt_from_scores

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


class RankingFit:
    """The fit template's hooks for the ranking classifiers: datafit, start and end of each problem.

    A classifier defines ``_anchored()`` (whether its objective mixes in the
    logistic loss: :class:`skrank.datafits.logistic_anchor.LogisticAnchoredObjective`),
    ``_rank_datafit(X, y, sample_weight, alpha)``, ``_costly(datafit)``,
    ``_paper_start(info, datafit, coef_init, intercept_init)`` and
    ``_stochastic_options()``.
    """

    #: with a value, the smooth step's margin follows the spread of the logistic regression's scores
    _relative_margin = None
    #: a Dask ``y`` stays on the workers; a fit without a form there takes it into memory (``_datafit``)
    _keeps_dask_targets = True
    #: a search's store of the logistic starts of one training set (:class:`SharedAnchors`), or None
    _shared_anchors = None

    def _fit_context(self, X):
        return blas_threads(X)

    def _paper_solver(self):
        """Whether ``solver`` names one of the papers' solvers, which fit the rank objective alone."""
        entry = self._solvers.get(self.solver)  # None for "auto"
        return entry is not None and not entry.anchored

    def _worker_rank_term(self):
        """Hook: the rank term with a form on Dask workers (``datafits.worker_ranking``), or None."""
        return None

    def _datafit(self, X, y, sample_weight):
        """The objective (its l2 penalty inside) and that penalty: the rank surrogate, or its anchored mix.

        On a Dask ``X`` computed by a client's workers, an anchored fit
        whose rank term has a form there keeps its ``n``-vectors on the
        workers (:class:`skrank.datafits.worker_ranking.WorkerAnchoredObjective`);
        other fits take the targets into memory.
        """
        if is_dask_array(X):
            # (the module of the workers' objective is loaded for Dask inputs only)
            from ..datafits import worker_ranking

            term = self._worker_rank_term() if self._anchored() else None
            if worker_ranking.takes(make_design(X, True), term, self._rank_weight):
                alpha = resolve_alpha(self.alpha, y, sample_weight)
                datafit = worker_ranking.WorkerAnchoredObjective(term, X, y, self._rank_weight,
                                                                 alpha, sample_weight)
                return datafit, datafit.penalty
        if is_dask_array(y):
            y = arrays.to_host(y)
        rank = self._rank_datafit(X, y, sample_weight, 0.0) if self._anchored() else None
        alpha = resolve_alpha(self.alpha, y, sample_weight)
        datafit = (self._rank_datafit(X, y, sample_weight, alpha) if rank is None
                   else LogisticAnchoredObjective(rank, X, y, self._rank_weight, alpha, sample_weight))
        return datafit, datafit.penalty

    def _problem_solver(self, datafit):
        # "auto" on this problem: a costly pass of the rank surrogate moves it to a stochastic solver
        return self._choose(self.solver, costly=not self._anchored() and self._costly(datafit))

    def _solver_options(self):
        return {name: self._stochastic_options() for name, info in self._solvers.items() if info.stochastic}

    def _start(self, info, datafit, penalty, coef_init, intercept_init):
        if self._anchored():
            return dict(coef_init=_anchored_start(info, datafit, penalty, self, coef_init, intercept_init))
        return dict(coef_init=self._paper_start(info, datafit, coef_init, intercept_init))

    def _finish(self, result, datafit, X, y, sample_weight):
        """``w`` and ``b`` of the result, the margin, and the Platt fit (:func:`._platt.platt_calibrate`)."""
        rank, theta = datafit, result.coef
        if self._anchored():
            rank, theta = datafit.rank_objective, _anchored_end(datafit, result, self.verbose)
        own = theta[:-1] if datafit.fits_intercept else theta  # the rank surrogates of X w fit no intercept
        result.coef, result.info["score_intercept"] = own, float(theta[-1]) if datafit.fits_intercept else 0.0
        result.info["margin"] = rank.loss.margin
        result.info["solver"] = self._solver
        if hasattr(datafit, "platt_inputs"):  # the scores, labels and weights where the datafit keeps them
            return platt_from_scores(result, *datafit.platt_inputs(result.coef))
        if is_dask_array(y):
            y = arrays.to_host(y)
        return platt_calibrate(result, X, y, sample_weight)

    def _update_stream(self, stream):
        stream.update(**self._stream_settings())


def _anchored_start(info, objective, penalty, estimator, coef_init, intercept_init):
    """The start of an anchored fit: ``(coef_init, intercept_init)`` when warm, else the logistic regression.

    The logistic regression of the same ``alpha`` (the objective at
    ``r = 0``, fitted by the row ``info``) is also the ranking that the
    fit must match for ``r > 0`` (:func:`_anchored_end`), so it is fitted
    on a warm start too (or taken from the estimator's ``_shared_anchors``,
    :class:`SharedAnchors`); ``objective.anchor`` keeps it.  With the
    estimator's ``_relative_margin``, the rank loss's margin becomes that
    many (weighted) standard deviations of its ranked scores, so that the
    band the loss smooths over follows their spread.
    """
    r, relative_margin = objective.rank_weight, estimator._relative_margin
    if coef_init is None or r > 0.0 or relative_margin is not None:
        shared = estimator._shared_anchors
        fit = (_fit_logistic(info, objective, penalty, estimator) if shared is None
               else shared.get(info, objective, penalty, estimator))
        objective.anchor = fit[0]
        objective.anchor_iterations = 0 if coef_init is not None else fit[1]
    if relative_margin is not None:
        spread = objective.ranked_score_spread(objective.anchor)
        objective.rank_objective.set_margin(relative_margin * spread if spread > 0 else 1.0)
    if coef_init is None:
        return objective.anchor
    intercept = 0.0 if intercept_init is None else float(intercept_init)
    return np.append(np.asarray(coef_init, dtype=np.float64), intercept)


def _fit_logistic(info, objective, penalty, estimator):
    """The logistic regression of ``objective`` (its ``r = 0``) from zero: ``(theta, iterations)``."""
    objective.variable_scale()  # computed once, shared with the copy
    plain = copy.copy(objective)
    plain.rank_weight = 0.0
    max_iter = 500 if estimator.max_iter is None else estimator.max_iter
    result = solve(info, plain, penalty, coef_init=np.zeros(objective.X.shape[1] + 1), tol=estimator.tol,
                   max_iter=max_iter)
    return np.asarray(result.coef, dtype=np.float64), int(result.n_iter)


class SharedAnchors:
    """The logistic starts of the anchored fits of one training set, each fitted once.

    A search over ``(alpha, rank_weight)`` on one training set needs the
    logistic regression of each ``alpha`` (and problem) as the start and
    reference of every rank weight: an estimator whose ``_shared_anchors``
    is such a store fits it at the first fit that needs it and takes it
    from the store after: the same coefficients as a fit of its own, bit
    for bit.  The key is the penalty, the solver's settings and the
    problem's labels and weights, so the store must serve one ``X`` only.
    """

    def __init__(self):
        self._fits = {}

    def get(self, info, objective, penalty, estimator):
        """``(theta, iterations)`` of the logistic start of ``objective``, fitted on the first call."""
        key = (info.name, objective.alpha, estimator.tol, estimator.max_iter,
               objective.margin_sign.tobytes(), objective.row_weight.tobytes())
        if key not in self._fits:
            self._fits[key] = _fit_logistic(info, objective, penalty, estimator)
        theta, iterations = self._fits[key]
        return theta.copy(), iterations


def _anchored_end(objective, result, verbose):
    """``theta`` of an anchored fit: a cold fit counts its start's iterations; the start's ranking kept."""
    result.n_iter += objective.anchor_iterations  # a cold fit's way from zero runs through its start
    if objective.rank_weight == 0.0:
        return result.coef
    theta = _ranking_kept(objective, objective.anchor, result)
    if "kept_fraction" in result.info:
        fraction = result.info["kept_fraction"]
        kept = (f"the point {fraction:g} of the way from it to the descent's end" if fraction > 0
                else "the logistic regression")
        Progress("lbfgs", verbose).note(
            f"the training metric ended below the logistic regression's: kept {kept}")
    return theta


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
    theta = result.coef
    metric = objective.segment_metric(logistic, theta)
    reference = metric(0.0)
    if metric(1.0) >= reference:
        return theta
    kept = 0.0
    for k in range(_SEGMENT_POINTS - 1, 0, -1):
        if metric(k / _SEGMENT_POINTS) >= reference:
            kept = k / _SEGMENT_POINTS
            break
    theta = logistic + kept * (theta - logistic)
    result.objective_history = np.append(result.objective_history, objective.value(theta))
    result.info["kept_fraction"] = kept
    return theta

