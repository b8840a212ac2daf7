"""Cross-validated PartialAUCClassifier and AveragePrecisionClassifier.

In the manner of :class:`sklearn.linear_model.LogisticRegressionCV`: for
each fold and each ``rank_weight`` the penalties ``alphas`` are fitted as a
path, from the largest to the smallest, each fit starting from the
coefficients of the previous one (or, ``path="rank_weight"``, the rank
weights of each penalty); each fold is checked once, and the logistic
regression of each penalty, which starts every rank weight's fit, is
fitted once; the pair ``(alpha, rank_weight)`` of best
mean held-out score is then refitted on all the data.  Several classes are
one-vs-rest problems and a multi-label ``y`` one problem per label, as in
the base estimators; one pair is chosen for all of them, by the mean over
the problems of their held-out scores.
"""

import warnings
from numbers import Integral

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, clone
from sklearn.metrics import average_precision_score, check_scoring, get_scorer_names
from sklearn.model_selection import check_cv
from sklearn.utils import _safe_indexing
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.metaestimators import available_if
from sklearn.utils.multiclass import check_classification_targets, type_of_target, unique_labels
from sklearn.utils.parallel import Parallel, delayed
from sklearn.utils.validation import _check_sample_weight, check_is_fitted, validate_data

from ..backends import arrays
from ..metrics import _check_label_types, region_area, two_way_partial_auc_score
from ..solvers.registry import solvers_for
from ._anchored import SharedAnchors
from ._params import fit_doc, keyword_init, options_doc, parameter_defaults, samples_method_doc
from .average_precision import AveragePrecisionClassifier
from .partial_auc import PartialAUCClassifier, _fitted_region

__all__ = ["PartialAUCClassifierCV", "AveragePrecisionClassifierCV"]

#: The parameters of the CV estimators that the base estimator does not have.
_CV_PARAMS = ("alphas", "rank_weights", "path", "cv", "scoring", "n_jobs", "refit")
#: The base estimator's parameters that the CV estimators set themselves.
_SEARCHED = ("alpha", "rank_weight", "warm_start")


def _check_alphas(alphas, n_samples):
    """The penalties of the grid, decreasing: ``alphas`` values around ``1 / n_samples``, or those given."""
    if isinstance(alphas, Integral):
        if int(alphas) == 1:
            return np.array([1.0 / n_samples])
        # alpha = 1 / (C n) for C from 1e-4 to 1e2: LogisticRegression(C=C)'s penalties
        return 1.0 / (np.logspace(-4.0, 2.0, int(alphas)) * n_samples)
    values = np.asarray(alphas)
    if values.dtype.kind not in "biuf" or values.ndim != 1:
        raise ValueError(f"alphas must be an int or a 1-d array-like of nonnegative floats, got {alphas!r}.")
    values = values.astype(np.float64)
    if values.shape[0] == 0:
        raise ValueError("alphas is empty: give at least one penalty (or an int, the number of penalties).")
    if not np.all(np.isfinite(values)) or np.any(values < 0.0):
        raise ValueError(f"alphas must be finite and nonnegative, got {values.tolist()}.")
    return np.unique(values)[::-1].copy()


def _check_rank_weights(rank_weights):
    """The rank weights of the grid, increasing, each in [0, 1]."""
    values = np.asarray(rank_weights)
    if values.ndim == 0:
        values = values.reshape(1)
    if values.dtype.kind not in "biuf" or values.ndim != 1:
        raise ValueError(f"rank_weights must be a 1-d array-like of floats in [0, 1], got {rank_weights!r}.")
    values = values.astype(np.float64)
    if values.shape[0] == 0:
        raise ValueError("rank_weights is empty: give at least one rank weight in [0, 1].")
    if not np.all(np.isfinite(values)) or np.any(values < 0.0) or np.any(values > 1.0):
        raise ValueError(f"rank_weights must lie in [0, 1], got {values.tolist()}.")
    return np.unique(values)


class _ProblemMeanScorer:
    """The mean over the binary problems of a ranking metric of the decision function's columns.

    Two classes are one problem (``classes[1]`` positive), more classes one
    one-vs-rest problem each, a multi-label indicator one problem per
    label: the problems the estimator fits.  A problem whose held-out
    samples hold a single class has no ranking to score and is left out;
    with none left the score is NaN (the fold then does not count in the
    mean over the folds).

    Parameters
    ----------
    metric : callable
        ``metric(y_true, y_score, sample_weight=...)`` with ``y_true``
        boolean, greater is better.
    classes : ndarray
        The classes of ``y`` (the labels' indices for a multi-label ``y``).
    """

    def __init__(self, metric, classes, unchecked=None):
        self.metric = metric
        self.classes = classes
        self.unchecked = unchecked

    def _problems(self, y, scores):
        if np.ndim(y) == 2:
            return [(y[:, j] == 1, scores[:, j]) for j in range(y.shape[1])]
        if self.classes.shape[0] == 2:
            return [(y == self.classes[1], np.ravel(scores))]
        return [(y == label, scores[:, j]) for j, label in enumerate(self.classes)]

    def __call__(self, estimator, X, y, sample_weight=None):
        # the search checked X: the fitted estimator's decision function without its checks, the same floats
        coef, intercept = np.atleast_2d(estimator.coef_).T, np.atleast_1d(estimator.intercept_)
        scores = arrays.one_column_flat(arrays.linear_scores(X, coef, intercept))
        return self._mean(y, np.asarray(scores, dtype=np.float64), sample_weight)

    def _mean(self, y, scores, sample_weight):
        values = []
        for target, column in self._problems(y, scores):
            present = target if sample_weight is None else target[sample_weight > 0]
            if present.all() or not present.any():
                continue  # one class held out: no ranking to score
            if self.unchecked is not None and sample_weight is None and np.all(np.isfinite(column)):
                values.append(self.unchecked(target, column))  # the checks passed: the same value
            else:
                values.append(self.metric(target, column, sample_weight=sample_weight))
        return float(np.mean(values)) if values else np.nan


def _average_precision_unchecked(target, scores):
    """:func:`sklearn.metrics.average_precision_score` of a boolean ``target`` without weights, unchecked.

    The same arithmetic on the same arrays (the precision-recall curve at
    every distinct score, integrated as a step function), so the same float.
    """
    order = np.argsort(scores, kind="mergesort")[::-1]
    sorted_scores, positive = scores[order], target[order].astype(np.float64)
    thresholds = np.r_[np.flatnonzero(np.diff(sorted_scores)), positive.shape[0] - 1]
    tps = np.cumsum(positive)[thresholds]
    fps = 1 + thresholds.astype(np.float64) - tps
    predicted = tps + fps
    with np.errstate(divide="ignore", invalid="ignore"):
        precision = np.where(predicted != 0, tps / predicted, 0.0)
    recall = tps / tps[-1]
    precision, recall = np.r_[precision[::-1], 1.0], np.r_[recall[::-1], 0.0]
    return float(max(0.0, -np.sum(np.diff(recall) * precision[:-1])))


def _path_start(path, i, k):
    """The grid cell whose fit starts the fit of cell ``(i, k)`` (rank weight ``i``, alpha ``k``), or None.

    ``path="alpha"``: the previous (larger) alpha of the same rank weight;
    ``path="rank_weight"``: the previous (smaller) rank weight of the same
    alpha, and for the first rank weight the previous alpha.  The first
    cell of a path starts cold.
    """
    if path == "rank_weight" and i > 0:
        return i - 1, k
    return (i, k - 1) if k > 0 else None


def _fit_fold(estimator, X, y, sample_weight, train, test, alphas, rank_weights, scorer, classes, path):
    """Fit every cell of the grid on ``train``, warm started along ``path``; score each fit on ``test``.

    One estimator checks the training part once (:meth:`_prepare_fit`)
    and fits every cell from it, the penalties from the largest down,
    each fit warm started from that of the cell :func:`_path_start`
    names.  The logistic regression of each penalty, the start and
    reference of every rank weight's fit, is fitted once and shared
    (:class:`~skrank.estimators._anchored.SharedAnchors`).

    Returns, per rank weight, the held-out scores, shape ``(n_alphas,)``,
    the ranking coefficients ``ranking_coef_``, shape ``(n_alphas,
    n_problems, n_features)``, and the solver's iterations, shape
    ``(n_alphas, n_problems)``.  ``classes`` are those of the whole ``y``:
    a training part without one of them is refused (ValueError naming
    ``cv``).
    """
    X_train, y_train = _safe_indexing(X, train), y[train]
    weight_train = None if sample_weight is None else sample_weight[train]
    _check_training_classes(y_train, classes, weight_train)
    X_test, y_test = _safe_indexing(X, test), y[test]
    score_params = {} if sample_weight is None else {"sample_weight": sample_weight[test]}
    estimator._shared_anchors = SharedAnchors()
    prepared = estimator._prepare_fit(X_train, y_train, weight_train)
    cells = {}  # (i, k): score, ranking_coef_, n_iter_, and the start of a fit that goes on from it
    for k, alpha in enumerate(alphas):
        for i, rank_weight in enumerate(rank_weights):
            estimator.alpha, estimator.rank_weight = float(alpha), float(rank_weight)
            start = _path_start(path, i, k)
            if start is not None:
                estimator.ranking_coef_, estimator.score_intercept_ = cells[start][3]
            estimator._fit_prepared(prepared, warm=start is not None)
            coef = np.atleast_2d(np.asarray(estimator.ranking_coef_, dtype=np.float64))
            score = scorer(estimator, X_test, y_test, **score_params)
            cells[i, k] = (score, coef, np.atleast_1d(estimator.n_iter_),
                           (estimator.ranking_coef_, estimator.score_intercept_))
    return [(np.asarray([cells[i, k][0] for k in range(len(alphas))], dtype=np.float64),
             np.asarray([cells[i, k][1] for k in range(len(alphas))]),
             np.asarray([cells[i, k][2] for k in range(len(alphas))], dtype=np.int64))
            for i in range(len(rank_weights))]


def _check_training_classes(y_train, classes, sample_weight):
    """Raise a ValueError naming ``cv`` when a fold's training part misses a class (or a label's value)."""
    if sample_weight is not None:
        y_train = y_train[sample_weight > 0]
    if np.ndim(y_train) == 2:
        missing = [j for j in range(y_train.shape[1]) if np.unique(y_train[:, j]).shape[0] < 2]
        what = f"both values of label {missing[0]}" if missing else ""
    else:
        absent = np.setdiff1d(classes, np.unique(y_train))
        what = f"class {absent.tolist()[0]!r}" if absent.size else ""
    if what:
        raise ValueError(f"A training part of the cross-validation folds holds no sample of {what}, which "
                         "every fit needs; use fewer folds (cv) or folds that keep every class in each "
                         "training part.")


def _refitted(cv_estimator):
    """Whether the prediction methods are available: ``refit=True`` (checked again after ``fit``)."""
    return cv_estimator.refit


def _refitted_method(name, summary, returns, description):
    """The CV estimator's method ``name`` (that of ``best_estimator_``), available with ``refit=True``."""
    def method(self, X):
        check_is_fitted(self, "best_estimator_")
        return getattr(self.best_estimator_, name)(X)

    method.__name__ = name
    method.__qualname__ = f"_RankClassifierCVMixin.{name}"
    return available_if(_refitted)(samples_method_doc(summary, returns, description)(method))


def _search_init(base_class, rank_weights):
    """The ``__init__`` of the CV estimator of ``base_class``: the search's parameters and the base's.

    The base's parameters keep their defaults, but for those the search
    sets itself (``alpha``, ``rank_weight``, ``warm_start``).
    """
    return keyword_init(alphas=7, rank_weights=rank_weights, path="alpha", cv=5, scoring=None,
                        **parameter_defaults(base_class, leave_out=_SEARCHED), n_jobs=None, refit=True)


class _RankClassifierCVMixin(ClassifierMixin, BaseEstimator):
    """Cross-validation over ``(alpha, rank_weight)`` with warm-started paths (not public).

    A subclass sets ``_base_class`` (the estimator it tunes), its
    ``_parameter_constraints`` and ``__init__``, and ``_default_scorer``.
    """

    _base_class = None

    @classmethod
    def _cv_constraints(cls, base_class):
        constraints = {k: v for k, v in base_class._parameter_constraints.items() if k not in _SEARCHED}
        constraints.update({
            "alphas": [Interval(Integral, 1, None, closed="left"), "array-like"],
            "rank_weights": ["array-like"],
            "path": [StrOptions({"alpha", "rank_weight"})],
            "cv": ["cv_object"],
            "scoring": [StrOptions(set(get_scorer_names())), callable, None],
            "n_jobs": [Integral, None],
            "refit": ["boolean"],
        })
        return constraints

    def _default_scorer(self, classes):  # pragma: no cover - abstract
        raise NotImplementedError

    def _base_estimator(self):
        """The base estimator with this estimator's shared parameters, warm started."""
        params = {k: v for k, v in self.get_params(deep=False).items() if k not in _CV_PARAMS}
        return self._base_class(**params, warm_start=True)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        tags.classifier_tags.multi_label = True
        tags.target_tags.multi_output = True
        return tags

    @fit_doc("Fit the paths on every fold, select ``(alpha, rank_weight)`` and refit on all the data.",
             y="""Class labels (more than two classes are one-vs-rest problems),
or a multi-label indicator matrix of 0 and 1 (one problem per
label), as for the base estimator.""",
             sample_weight="""Nonnegative weights of the samples.  Each fold's fits take the
weights of its training part, and its held-out part is scored
with its weights (``scoring(estimator, X, y, sample_weight=...)``,
so a callable scorer must then accept them); the final refit
takes them all.  With ``scoring=None``, a held-out fold that
holds a single class of every problem has no ranking to score
and is left out of the mean, with a warning.""")
    def fit(self, X, y, sample_weight=None):
        self._validate_params()
        X_given = X
        _check_label_types(y, "y")
        X, y = validate_data(self, X, y, accept_sparse="csr", dtype=[np.float64, np.float32],
                             ensure_min_samples=2, multi_output=True)
        if y.ndim == 2 and y.shape[1] == 1:
            y = y.ravel()
        check_classification_targets(y)
        rank_weights = _check_rank_weights(self.rank_weights)
        if sample_weight is not None:
            sample_weight = _check_sample_weight(sample_weight, X, dtype=np.float64,
                                                 ensure_non_negative=True)
        # weights count as repeated rows, as in the estimators' alpha=None
        alphas = _check_alphas(self.alphas, X.shape[0] if sample_weight is None else sample_weight.sum())
        y_type = type_of_target(y, input_name="y", raise_unknown=True)
        if y_type not in ("binary", "multiclass", "multilabel-indicator"):
            raise ValueError(f"{type(self).__name__} takes class labels or a multi-label indicator matrix; "
                             f"the type of the target is {y_type}.")
        weighted = "" if sample_weight is None else " among the samples of positive weight"
        present = unique_labels(y if sample_weight is None else y[sample_weight > 0])
        if y.ndim == 1 and present.shape[0] < 2:
            raise ValueError(f"{type(self).__name__} needs samples of two classes in y{weighted}; got "
                             f"{'only class ' + repr(present[0]) if present.shape[0] else 'none'}.")
        self.classes_ = np.arange(y.shape[1]) if y.ndim == 2 else np.unique(y)

        cv = check_cv(self.cv, y, classifier=True)
        folds = list(cv.split(X, y))
        scorer = self._default_scorer(self.classes_) if self.scoring is None else check_scoring(
            self._base_estimator(), scoring=self.scoring)
        base = self._base_estimator()
        folds_paths = Parallel(n_jobs=self.n_jobs)(
            delayed(_fit_fold)(clone(base), X, y, sample_weight, train, test, alphas, rank_weights, scorer,
                               self.classes_, self.path)
            for train, test in folds
        )
        paths = [path for fold in folds_paths for path in fold]
        n_folds, n_rw, n_alphas = len(folds), rank_weights.shape[0], alphas.shape[0]
        n_problems = paths[0][1].shape[1]
        # one problem (two classes) keeps the shapes of a single ranking
        problems = () if n_problems == 1 else (n_problems,)
        self.scores_ = np.array([scores for scores, _, _ in paths]).reshape(n_folds, n_rw, n_alphas)
        self.coefs_paths_ = np.array([coefs for _, coefs, _ in paths]).reshape(
            n_folds, n_rw, n_alphas, *problems, X.shape[1])
        self.n_iter_ = np.array([n_iter for _, _, n_iter in paths]).reshape(n_folds, n_rw, n_alphas,
                                                                            *problems)
        self.alphas_ = alphas
        self.rank_weights_ = rank_weights

        # alpha-major, rank_weight-minor: the first best is the largest alpha, then the smallest weight
        mean = self._mean_over_folds()
        if not np.any(np.isfinite(mean)):
            raise ValueError("Every (alpha, rank_weight) has a non-finite mean score over the folds.")
        best = int(np.argmax(np.where(np.isfinite(mean), mean, -np.inf)))
        self.alpha_ = float(alphas[best // n_rw])
        self.rank_weight_ = float(rank_weights[best % n_rw])
        self.best_score_ = float(mean[best])

        if self.refit:
            fit_params = {} if sample_weight is None else {"sample_weight": sample_weight}
            self.best_estimator_ = clone(base).set_params(
                alpha=self.alpha_, rank_weight=self.rank_weight_, warm_start=False
            ).fit(X_given, y, **fit_params)
            self.classes_ = self.best_estimator_.classes_
            self.coef_ = self.best_estimator_.coef_
            self.intercept_ = self.best_estimator_.intercept_
            self.ranking_coef_ = self.best_estimator_.ranking_coef_
            self.calibration_ = self.best_estimator_.calibration_
        return self

    def _mean_over_folds(self):
        """The mean held-out score of each grid cell, alpha-major, over the folds that could be scored.

        A fold whose held-out part leaves every problem with a single class
        scores NaN (:class:`_ProblemMeanScorer`) and is left out of the
        mean, with a warning; a cell that no fold could score is NaN.
        """
        unscored = np.isnan(self.scores_).all(axis=(1, 2))
        if unscored.any() and not unscored.all():
            warnings.warn(f"{int(unscored.sum())} of the {unscored.shape[0]} held-out folds hold a single "
                          "class for every problem and cannot be scored by a ranking metric; the mean "
                          "score is that of the other folds. Use fewer folds (cv) for a score on each.",
                          UserWarning, stacklevel=3)
        scored = self.scores_[~unscored] if not unscored.all() else self.scores_
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # a cell that no fold scored is NaN
            return np.nanmean(scored, axis=0).T.ravel()

    decision_function = _refitted_method(
        "decision_function", "Decision function of ``best_estimator_``: positive means ``classes_[1]``.",
        "ndarray of shape (n_samples,) or (n_samples, n_classes)",
        "``X @ coef_.T + intercept_``, the Platt logits of ``best_estimator_``.")
    predict = _refitted_method(
        "predict", "Predicted class labels of ``best_estimator_``.",
        "ndarray of shape (n_samples,) or (n_samples, n_labels)",
        "The class of each sample among ``classes_`` (an indicator matrix for a\nmulti-label fit).")
    predict_proba = _refitted_method(
        "predict_proba", "Class probabilities of ``best_estimator_`` (its Platt fit).",
        "ndarray of shape (n_samples, n_classes)",
        "The probability of each class, in the order of ``classes_``.")
    predict_log_proba = _refitted_method(
        "predict_log_proba", "Logarithm of :meth:`predict_proba`.",
        "ndarray of shape (n_samples, n_classes)",
        "The log-probability of each class, in the order of ``classes_``.")


_GRID_DOC_TEMPLATE = """
    alphas : int or array-like of shape (n_alphas,), default=7
        The penalties ``alpha`` to try.  An int ``k`` gives the penalties
        ``1 / (C n_samples)`` of ``LogisticRegression(C=C)`` for ``k`` values
        of ``C`` log-spaced from 1e-4 to 1e2 (``C = 1`` alone for ``k = 1``):
        the default steps by decades and holds ``C = 1``.  An array-like of
        nonnegative floats is used as given, in decreasing order.
    rank_weights : array-like of shape (n_rank_weights,), default={rank_weights}
        The weights ``rank_weight`` in [0, 1] to try, sorted in increasing
        order (repeated values once): 0 is an l2-penalised logistic
        regression, 1 the pure rank objective.
    path : {"alpha", "rank_weight"}, default="alpha"
        The cell of the grid each fit is warm started from.  ``"alpha"``:
        the previous (larger) penalty of the same rank weight, a path of
        penalties for each rank weight, as in
        :class:`~sklearn.linear_model.LogisticRegressionCV`.
        ``"rank_weight"``: the previous (smaller) rank weight of the same
        penalty, the first rank weight from the previous penalty: the
        default rank weights lie closer together than the penalties, a
        decade apart, and the search takes fewer iterations (user guide,
        :doc:`benchmarks`).  The objectives are not convex (but for the
        full AUC with a convex loss): the two paths can reach different
        stationary points of a cell, and select another cell.
    cv : int, cross-validation generator or iterable, default=5
        The folds, as :func:`sklearn.model_selection.check_cv` reads them:
        an int is the number of folds of a
        :class:`~sklearn.model_selection.StratifiedKFold`; an iterable
        yields ``(train, test)`` index arrays.
    scoring : str, callable or None, default=None
        The held-out score, greater is better: a scorer name of
        :func:`sklearn.metrics.get_scorer_names` or a callable
        ``scorer(estimator, X, y)``.  None means {scoring}"""


def _grid_doc(rank_weights, scoring):
    """The parameters of the search: the grid, the folds and ``scoring`` (``scoring``: what None means)."""
    return _GRID_DOC_TEMPLATE.replace("{rank_weights}", rank_weights).replace("{scoring}", scoring)


_COMMON_DOC = """
    verbose : int, default=0
        Print the solver's progress when positive.
    n_jobs : int or None, default=None
        Number of jobs that fit the folds in parallel (one job per fold,
        which fits the paths of every rank weight), with joblib; None means
        1 outside a :func:`joblib.parallel_backend` context, -1 all
        processors.
    refit : bool, default=True
        Refit the base estimator on all the data with the selected
        ``(alpha_, rank_weight_)``.  With ``refit=False`` there is no
        ``best_estimator_``, ``coef_`` nor ``intercept_``, and no prediction.
"""


_PARTIAL_AUC_CAVEAT = """
    With a partial ``fpr_range`` a warm-started fit may stop near the
    previous penalty's.  Read more in the user guide: :doc:`partial_auc`.
"""

_AVERAGE_PRECISION_CAVEAT = """
    The objective is not convex: a warm-started fit may reach another
    stationary point.  Read more in the user guide: :doc:`average_precision`.
"""

#: What ``scoring=None`` means, for :func:`_grid_doc`.
_PARTIAL_AUC_SCORING = """the partial AUC over
        ``fpr_range`` of the decision function,
        :func:`skrank.metrics.partial_auc_score` (the two-way partial AUC,
        :func:`skrank.metrics.two_way_partial_auc_score`, when
        ``tpr_min > 0``), averaged over the one-vs-rest problems or labels
        when there are several."""
_AVERAGE_PRECISION_SCORING = """the average precision of
        the decision function (:func:`sklearn.metrics.average_precision_score`),
        averaged over the one-vs-rest problems or labels when there are
        several."""


def _selection_doc(base, surrogate, caveat):
    """The summary and description of the CV estimator of ``base``, whose rank surrogate is ``surrogate``."""
    return f"""{base} with ``alpha`` and ``rank_weight`` chosen by cross-validation.

    Tunes the penalty ``alpha`` and the weight ``rank_weight`` of the
    {surrogate} surrogate against the logistic loss of
    :class:`~skrank.estimators.{base}` over a grid, in the
    manner of :class:`sklearn.linear_model.LogisticRegressionCV`.
    Each fold fits a warm-started path of penalties for every rank weight
    (or of rank weights for every penalty, ``path="rank_weight"``), with
    the logistic regression of each penalty, the start of every rank
    weight's fit, fitted once; the pair of best mean held-out score (on
    ties the largest ``alpha``, then the smallest ``rank_weight``) is
    refitted on all the data (``best_estimator_``).  More than two classes are one-vs-rest problems
    and a multi-label ``y`` one problem per label, as for {base}; one pair
    is chosen for them all, by the mean over the problems of their held-out
    scores.
{caveat}"""


def _search_doc(base):
    """The Attributes, See Also and Examples sections of the CV estimator of ``base``."""
    return f"""    Attributes
    ----------
    alpha_ : float
        The selected penalty.
    rank_weight_ : float
        The selected rank weight.
    best_score_ : float
        The mean held-out score of ``(alpha_, rank_weight_)``.
    alphas_ : ndarray of shape (n_alphas,)
        The penalties tried, decreasing.
    rank_weights_ : ndarray of shape (n_rank_weights,)
        The rank weights tried, increasing.
    scores_ : ndarray of shape (n_folds, n_rank_weights, n_alphas)
        The held-out score of every fold and grid cell (NaN for a fold
        that the default scoring cannot score, see ``fit``).
    coefs_paths_ : ndarray of shape (n_folds, n_rank_weights, n_alphas[, n_problems], n_features)
        The ranking coefficients ``ranking_coef_`` of every fold's fits,
        the path the warm starts follow (the axis ``n_problems`` for more
        than one problem only).
    n_iter_ : ndarray of shape (n_folds, n_rank_weights, n_alphas[, n_problems])
        The solver's iterations in every fold's fits (warm-started fits
        take fewer).
    best_estimator_ : {base}
        The fit of ``(alpha_, rank_weight_)`` on all the data (with
        ``refit=True``).
    classes_ : ndarray of shape (n_classes,)
        The class labels; for a multi-label ``y``, the labels' indices.
    coef_ : ndarray of shape (1, n_features) or (n_classes, n_features)
        ``best_estimator_.coef_``: ``decision_function`` is
        ``X @ coef_.T + intercept_``.
    intercept_ : ndarray of shape (1,) or (n_classes,)
        ``best_estimator_.intercept_``.
    ranking_coef_ : ndarray of shape (1, n_features) or (n_classes, n_features)
        ``best_estimator_.ranking_coef_``, the ranking direction.
    calibration_ : ndarray of shape (n_problems, 2)
        ``best_estimator_.calibration_``, the Platt coefficients ``(A, B)``.
    n_features_in_ : int
        Number of features seen during ``fit``.
    feature_names_in_ : ndarray of shape (n_features_in_,)
        Names of the features seen during ``fit``, when ``X`` has feature
        names that are all strings.

    See Also
    --------
    skrank.estimators.{base} : The estimator tuned here.
    sklearn.linear_model.LogisticRegressionCV : The same search for the
        logistic regression.

    Examples
    --------
    >>> from sklearn.datasets import make_classification
    >>> from skrank.estimators import {base}CV
    >>> X, y = make_classification(300, weights=[0.85], random_state=0)
    >>> clf = {base}CV(alphas=3, rank_weights=(0.0, 1.0), cv=3).fit(X, y)
    >>> clf.scores_.shape
    (3, 2, 3)
    >>> float(clf.alpha_) in clf.alphas_, float(clf.rank_weight_) in clf.rank_weights_
    (True, True)
"""


class PartialAUCClassifierCV(_RankClassifierCVMixin):
    __doc__ = f"""{_selection_doc("PartialAUCClassifier", "partial-AUC", _PARTIAL_AUC_CAVEAT)}
    Parameters
    ----------{_grid_doc('(0.0, 0.05, 0.2)', _PARTIAL_AUC_SCORING)}
    fpr_range : tuple of two floats or None, default=None
        ``(fpr_min, fpr_max)`` of the partial AUC, fitted and (with
        ``scoring=None``) scored.  None means ``(0, fpr_max)`` when
        ``fpr_max`` is given, else ``(0.05, 0.5)``, or ``(0, 0.5)`` when
        ``tpr_min > 0``.  Every training fold must hold at least one
        negative in the range.
    fpr_max : float or None, default=None
        The false-positive-rate ceiling, for the range ``(0, fpr_max)``;
        given with ``fpr_range``, it must be its upper end.
    tpr_min : float, default=0.0
        True-positive-rate floor of a two-way range (``fpr_max=b`` or
        ``fpr_range=(0, b)``), fitted and (with ``scoring=None``) scored.
    loss : {{"smooth_step", "squared_hinge", "logistic", "squared"}} or None, default=None
        Loss of the pairwise margin of the rank surrogate; None chooses by
        the solver (``"smooth_step"`` for ``"auto"`` and ``"lbfgs"``).
    margin : float or None, default=None
        Margin of the squared hinge and squared losses, half-width of the
        smooth step; None means a quarter of the spread of the logistic
        regression's scores for the smooth step, 1 otherwise.
    link : {{"identity", "sigmoid"}}, default="identity"
        The scores the surrogate ranks: ``X w`` or ``sigmoid(X w + b)``.
    class_weight : dict, "balanced" or None, default=None
        Weights of the classes, multiplying ``sample_weight``.
    solver : {{{options_doc(solvers_for("PartialAUCClassifier"), first=("auto",))}}}, default="auto"
        The solver of every fit; see
        :class:`~skrank.estimators.PartialAUCClassifier`.  Only ``"auto"``
        and ``"lbfgs"`` fit ``rank_weight < 1``: the others need
        ``rank_weights=(1.0,)``.
    max_iter : int or None, default=None
        Maximum iterations of the solver in each fit; None means the
        solver's own default.
    tol : float, default=1e-4
        Tolerance of the solver's stopping criterion in each fit.
    batch_size : int, default=64
        Mini-batch size of the stochastic solvers.
    random_state : int, RandomState instance or None, default=None
        Seed of the stochastic solvers.{_COMMON_DOC}
{_search_doc("PartialAUCClassifier")}    """

    _base_class = PartialAUCClassifier
    _parameter_constraints = _RankClassifierCVMixin._cv_constraints(PartialAUCClassifier)

    __init__ = _search_init(PartialAUCClassifier, rank_weights=(0.0, 0.05, 0.2))

    def _default_scorer(self, classes):
        fpr_range, tpr_min = _fitted_region(self.fpr_range, self.fpr_max, self.tpr_min)
        def metric(target, scores, sample_weight=None):
            return two_way_partial_auc_score(target, scores, tpr_min=tpr_min, fpr_range=fpr_range,
                                             sample_weight=sample_weight, pos_label=True)

        def unchecked(target, scores):
            return region_area(target, scores, fpr_range=fpr_range, tpr_min=tpr_min)

        return _ProblemMeanScorer(metric, classes, unchecked)


class AveragePrecisionClassifierCV(_RankClassifierCVMixin):
    __doc__ = f"""{_selection_doc("AveragePrecisionClassifier", "average-precision",
                                  _AVERAGE_PRECISION_CAVEAT)}
    Parameters
    ----------{_grid_doc('(0.0, 0.2, 0.5)', _AVERAGE_PRECISION_SCORING)}
    loss : {{"squared_hinge", "logistic", "sigmoid"}}, default="squared_hinge"
        The surrogate of the precision's indicator.
    class_weight : dict, "balanced" or None, default=None
        Weights of the classes, multiplying ``sample_weight``.
    margin : float, default=0.5
        Margin of the squared hinge, on the scale of the sigmoid scores.
    gamma : float, default=0.9
        SOAP's moving-average weight, in (0, 1].
    solver : {{{options_doc(solvers_for("AveragePrecisionClassifier"), first=("auto",))}}}, default="auto"
        The solver of every fit; see
        :class:`~skrank.estimators.AveragePrecisionClassifier`.  Only
        ``"auto"`` and ``"lbfgs"`` fit ``rank_weight < 1``: ``"soap"``
        needs ``rank_weights=(1.0,)``.
    optimizer : {{"sgd", "momentum", "adam"}}, default="adam"
        SOAP's update.
    learning_rate : float or None, default=None
        SOAP's step size; None for its default.
    batch_size : int, default=64
        SOAP's samples per step.
    positives_per_batch : int, default=8
        Positives per SOAP step, below ``batch_size``.
    max_iter : int or None, default=None
        Maximum iterations of the solver in each fit; None means the
        solver's own default.
    tol : float, default=1e-4
        Tolerance of the solver's stopping criterion in each fit.
    random_state : int, RandomState instance or None, default=None
        Seed of SOAP's sampler.{_COMMON_DOC}
{_search_doc("AveragePrecisionClassifier")}    """

    _base_class = AveragePrecisionClassifier
    _parameter_constraints = _RankClassifierCVMixin._cv_constraints(AveragePrecisionClassifier)

    __init__ = _search_init(AveragePrecisionClassifier, rank_weights=(0.0, 0.2, 0.5))

    def _default_scorer(self, classes):
        # scikit-learn's average precision of each problem's decision function
        def metric(target, scores, sample_weight=None):
            return average_precision_score(target, scores, sample_weight=sample_weight, pos_label=True)

        return _ProblemMeanScorer(metric, classes, _average_precision_unchecked)
