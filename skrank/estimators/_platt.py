"""Platt scaling: a one-dimensional logistic regression of the labels on ranking scores.

The pairwise objectives fit no intercept; the estimators then fit
``P(y = 1 | s) = sigmoid(A s + B)`` on the training scores ``s = X w``
(Platt 1999, "Probabilistic outputs for support vector machines and
comparisons to regularized likelihood methods", with his smoothed targets),
and fold it into the linear model ``coef_ = A w``, ``intercept_ = B``, which
leaves the ranking unchanged (``A > 0``).  Sample weights weigh
the log-likelihood terms and Platt's class counts (user guide,
:doc:`partial_auc` and :doc:`sample_weights`).
"""

import numpy as np

from ..backends import arrays
from ..backends.array_api_design import array_api_namespace
from ..backends.dask_design import is_dask_array
from ..backends.dispatch import make_design
from ._fit_template import problem_labels, problem_target
from ._params import samples_method_doc


def fit_platt(scores, y, *, sample_weight=None, max_iter=100):
    """Fit ``sigmoid(A s + B)`` to labels ``y`` in {-1, +1} by Newton's method.

    The arithmetic on the ``n`` scores runs in their namespace (NumPy's, or
    that of an array-API library on its device): each Newton step reads
    five sums of them and each trial of its step one, and only those
    numbers come to the host.

    Parameters
    ----------
    scores : array of shape (n,)
        Ranking scores.
    y : array of shape (n,)
        Labels in {-1, +1}, in the namespace of ``scores``.
    sample_weight : array of shape (n,), default=None
        Positive weights of the samples, in the namespace of ``scores``;
        None for unit weights.
    max_iter : int, default=100
        Newton iterations at most.

    Returns
    -------
    A, B : float
        Slope and offset; ``A >= 0`` unless the scores rank the classes
        worse than chance.
    """
    xp = _namespace(scores)
    s = xp.asarray(scores, dtype=xp.float64)
    pos = xp.asarray(y) > 0
    if sample_weight is None:
        v = 1.0  # the products below are then exact: the unweighted fit
        n_pos, n_neg = int(xp.count_nonzero(pos)), int(xp.count_nonzero(~pos))
        mean, spread = float(xp.mean(s)), float(xp.std(s))
    else:
        v = xp.asarray(sample_weight, dtype=xp.float64)
        n_pos, n_neg = float(xp.sum(v[pos])), float(xp.sum(v[~pos]))
        total = xp.sum(v)
        mean = float(xp.sum(s * v) / total)
        spread = float(xp.sqrt(xp.sum((s - mean) ** 2 * v) / total))
    t = xp.where(pos, xp.full_like(s, (n_pos + 1.0) / (n_pos + 2.0)), 1.0 / (n_neg + 2.0))
    if spread == 0.0:
        # constant scores: only the base rate is left
        rate = (n_pos + 1.0) / (n_pos + n_neg + 2.0)
        return 0.0, float(np.log(rate / (1.0 - rate)))
    u = (s - mean) / spread  # work on standardised scores
    a, b = 0.0, float(np.log((n_pos + 1.0) / (n_neg + 1.0)))

    uu = u * u
    weighted = xp.ones_like(u) if sample_weight is None else v
    # one exponential per point serves the likelihood and the next Newton step
    current, p = _platt_nll(xp, a, b, u, t, weighted)
    for _ in range(max_iter):
        r = v * (p - t)
        g = np.array([float(r @ u), float(xp.sum(r))])
        wgt = v * p * (1.0 - p) + 1e-12
        wu = float(wgt @ u)
        H = np.array([[float(wgt @ uu), wu], [wu, float(xp.sum(wgt))]]) + 1e-10 * np.eye(2)
        step = [float(c) for c in np.linalg.solve(H, g)]  # Python floats: they scale arrays of any namespace
        size = 1.0
        while size > 1e-10:
            trial, p_trial = _platt_nll(xp, a - size * step[0], b - size * step[1], u, t, weighted)
            if trial <= current:
                break
            size *= 0.5
        a, b = a - size * step[0], b - size * step[1]
        done = current - trial <= 1e-12 * max(1.0, abs(current))
        if trial <= current:
            current, p = trial, p_trial
        else:  # no decrease down to the smallest step: the step is taken all the same
            p = _platt_nll(xp, a, b, u, t, weighted)[1]
        if done or np.max(np.abs(g)) <= 1e-10 * max(1, n_pos + n_neg):
            break
    A = a / spread
    B = b - a * mean / spread
    return float(A), float(B)


def _namespace(a):
    """NumPy for a NumPy array (or a list), else the array-API namespace of ``a``."""
    if is_dask_array(a):
        import dask.array as da

        return da
    xp = array_api_namespace(a)
    return np if xp is None else xp


def _platt_nll(xp, a, b, u, t, v):
    """Platt's smoothed negative log-likelihood at ``(a, b)`` and ``sigmoid(a u + b)``: one exponential."""
    f = a * u + b
    e = xp.exp(-xp.abs(f))
    # t log sigmoid(f) + (1 - t) log sigmoid(-f) = log sigmoid(f) - (1 - t) f
    log_sigmoid = xp.minimum(f, 0.0) - xp.log1p(e)
    value = -float(v @ (log_sigmoid - (1.0 - t) * f))
    inv = 1.0 / (1.0 + e)
    return value, xp.where(f >= 0.0, inv, e * inv)


def platt_threshold(scores, y, sample_weight=None):
    """The Platt map of ``scores`` as a threshold on them and its coefficients.

    When the scores carry no ranking to calibrate (constant, or ranking the
    classes worse than chance, ``A <= 0``) the model predicts the majority
    class: ``A = 1`` and a threshold that puts every score on that side.

    Parameters
    ----------
    scores, y, sample_weight
        The ranking scores, their labels in {-1, +1} and the samples'
        positive weights (None for unit weights), as in :func:`fit_platt`.

    Returns
    -------
    intercept : float
        ``B / A``, the threshold on the scores.
    calibration : tuple of two floats
        ``(A, B)``.
    """
    A, B = fit_platt(scores, y, sample_weight=sample_weight)
    if A > 0:
        return B / A, (A, B)
    xp = _namespace(scores)
    intercept = (1.0 - float(xp.min(scores))) if B > 0 else -(1.0 + float(xp.max(scores)))
    return intercept, (1.0, intercept)


def platt_calibrate(result, X, y, sample_weight=None):
    """Fit the Platt map on the training scores ``X @ result.coef``, in place.

    Sets ``result.intercept`` to the threshold ``B / A`` on the scores and
    ``result.info["calibration"] = (A, B)`` (:func:`platt_threshold`).

    Parameters
    ----------
    result : skrank.solvers.SolverResult
    X : {ndarray, sparse matrix, dask.array.Array, array-API array} of shape (n, d)
        A Dask array is read chunk by chunk and its scores come into
        memory; the scores of a CuPy array stay on its device, where the
        labels and weights are sent and the fit runs.
    y, sample_weight : ndarray
        The labels in {-1, +1} and the samples' positive weights (None for
        unit weights), NumPy arrays, as in :func:`fit_platt`.

    Returns
    -------
    result
    """
    design = make_design(X, fit_intercept=False)
    # the scores stay where X lives; the labels and weights join them there
    scores = design.native_matvec(np.asarray(result.coef, dtype=np.float64))
    y = design.to_native(np.asarray(y, dtype=np.float64))
    if sample_weight is not None:
        sample_weight = design.to_native(np.asarray(sample_weight, dtype=np.float64))
    return platt_from_scores(result, scores, y, sample_weight)


def platt_from_scores(result, scores, y, sample_weight=None):
    """:func:`platt_calibrate` from the training scores, labels and weights, wherever they live.

    Parameters
    ----------
    result : skrank.solvers.SolverResult
    scores, y, sample_weight : arrays of shape (n,)
        In one namespace: NumPy's, an array-API library's, or Dask arrays
        (then every sum of the fit is a reduction on the workers).

    Returns
    -------
    result
    """
    result.intercept, result.info["calibration"] = platt_threshold(scores, y, sample_weight)
    return result


#: The Attributes of a ranking classifier's Platt fit (the start of the section).
PLATT_ATTRIBUTES_DOC = """
    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
        The class labels; for a multi-label ``y``, the labels' indices.
    multilabel_ : bool
        Whether ``fit`` was given a multi-label indicator ``y`` (one ranking
        per label; ``predict`` then returns an indicator matrix).
    coef_ : ndarray of shape (1, n_features) or (n_classes, n_features)
        The coefficients of the decision function, ``A ranking_coef_`` (one
        row per one-vs-rest problem or label): ``decision_function`` is
        ``X @ coef_.T + intercept_``, as for every linear classifier.
    intercept_ : ndarray of shape (1,) or (n_classes,)
        The offset ``B`` of the Platt fit (see Notes).
    ranking_coef_ : ndarray of shape (1, n_features) or (n_classes, n_features)
        The ranking direction ``w`` that the solver fits (and a warm start
        or ``partial_fit`` continues from); ``coef_`` is it times the
        positive Platt slope ``A``, so both rank the samples alike.
    calibration_ : ndarray of shape (n_problems, 2)
        The Platt coefficients ``(A, B)``: ``coef_ = A ranking_coef_`` and
        ``intercept_ = B``, so that ``decision_function`` is the Platt logit
        ``A X ranking_coef_ + B`` and ``predict_proba`` its sigmoid."""

#: The Attributes of a ranking classifier's solver and data (the end of the section).
FIT_ATTRIBUTES_DOC = """
    n_iter_ : int or ndarray
        The solver's iterations; for an L-BFGS fit of ``rank_weight < 1``
        without a warm start, those of its logistic start included.
    objective_ : float or ndarray
        Exact ``F`` at ``(ranking_coef_, score_intercept_)``.
    objective_history_ : ndarray or list of ndarray
        ``F`` after each iteration of the solver.
    n_features_in_ : int
    feature_names_in_ : ndarray of str
"""


class PlattRankingMixin:
    """Prediction for ranking classifiers whose decision function is a Platt fit.

    The estimator's ``_finish`` ends with :func:`platt_calibrate`; this mixin
    keeps the solver's direction as ``ranking_coef_``, the Platt
    coefficients as ``calibration_``, and folds them into the linear model
    ``coef_ = A ranking_coef_``, ``intercept_ = B``, so that
    ``decision_function`` is ``X @ coef_.T + intercept_`` (the Platt logit)
    and ``predict_proba`` its sigmoid.  After each ``partial_fit`` call the
    Platt map is refitted on that call's batch.
    """

    def _store_results(self, results):
        self._fold_platt(self.coef_, [r.info["calibration"] for r in results])
        self.score_intercept_ = np.array([r.info["score_intercept"] for r in results], dtype=np.float64)
        self._solver_info = [r.info for r in results]

    def _fold_platt(self, directions, calibration):
        """``ranking_coef_``, ``calibration_``, and the linear model ``coef_ = A w``, ``intercept_ = B``."""
        self.ranking_coef_ = np.array(directions, dtype=np.float64, ndmin=2)
        self.calibration_ = np.array(calibration, dtype=np.float64, ndmin=2)
        slope, offset = self.calibration_[:, 0], self.calibration_[:, 1]
        self.coef_ = slope[:, None] * self.ranking_coef_
        self.intercept_ = offset.copy()

    def _warm_start_coef(self):
        # the solver goes on from its own direction, not from the Platt-scaled coef_
        return getattr(self, "ranking_coef_", None)

    def _warm_start_intercept(self, j):
        # the objective's own offset of the scores (the Platt intercept is refitted after)
        score_intercept = getattr(self, "score_intercept_", None)
        return 0.0 if score_intercept is None else float(score_intercept[j])

    def _after_partial_fit(self, X, y, sample_weight):
        # partial_fit: the Platt map is refitted on the batch's scores, the only data at hand
        directions = np.atleast_2d(self.coef_)  # the streams' coefficients, before the fold
        fits = [platt_threshold(np.asarray(X @ directions[j], dtype=np.float64).ravel(),
                                problem_target(y, positive), sample_weight)
                for j, positive in enumerate(problem_labels(self.classes_))]
        self._fold_platt(directions, [calibration for _, calibration in fits])

    @samples_method_doc("Platt logits: positive means ``classes_[1]`` (binary).",
                        "ndarray of shape (n_samples,) or (n_samples, n_classes)",
                        "``X @ coef_.T + intercept_``, that is ``A X @ ranking_coef_.T + B``:\n"
                        "every column ranks the samples as ``X @ ranking_coef_.T`` does.\n"
                        "One column for two classes; a lazy Dask array for a Dask ``X``,\n"
                        "an array of ``X``'s namespace and device for an array-API ``X``.")
    def decision_function(self, X):
        return arrays.one_column_flat(self._linear_predict(X, "decision_function"))

    def _has_proba(self):
        # sigmoid(decision_function) is the Platt probability
        return True
