"""Linear classifier that maximises the partial AUC over a false-positive-rate range (Yao et al. 2022)."""

from numbers import Integral, Real

import numpy as np
from sklearn.utils._param_validation import Interval, StrOptions

from ..datafits.partial_auc import PartialAUCObjective, SigmoidScorePartialAUC
from ..metrics import _check_roc_region
from ..pairwise_losses import PARTIAL_AUC_LOSSES, get_pairwise_loss
from ..solvers.registry import solvers_for
from ._anchored import STREAM_ALPHA, RankingFit
from ._base import RankLinearModel
from ._fit_template import problem_labels, problem_target
from ._params import keyword_init, options_doc
from ._platt import FIT_ATTRIBUTES_DOC, PLATT_ATTRIBUTES_DOC, PlattRankingMixin
from ._tasks import RankLinearClassifierMixin

#: The solvers of the estimator: its rows of the table of :mod:`skrank.solvers.registry`.
_SOLVERS = solvers_for("PartialAUCClassifier")
#: ``margin=None`` with the smooth step: its half-width in units of the standard deviation
#: of the logistic regression's scores (chosen on the real-table suite, doc/benchmarks.rst)
_RELATIVE_MARGIN = 0.25
#: Largest number of features for which the default start is the closed-form
#: full-AUC fit (a d x d solve); above it the difference of the class means.
_CLOSED_FORM_START_MAX_FEATURES = 2000
#: Largest number of in-range pairs ``N+ R`` for which ``solver="auto"`` runs
#: L-BFGS on the logistic loss (whose exact pass costs ``O(N+ R)``); above it
#: AGD-SBCD, whose steps cost the same whatever the size.
_AUTO_MAX_LOGISTIC_PAIRS = 50_000_000
#: The false-positive rates of ``fpr_range=None`` without ``fpr_max``; a two-way region
#: (``tpr_min > 0``) starts them at 0.
_DEFAULT_FPR_RANGE = (0.05, 0.5)


def _fitted_region(fpr_range, fpr_max, tpr_min):
    """The region that PartialAUCClassifier's parameters ask for: ``((fpr_min, fpr_max), tpr_min)``.

    ``fpr_range=(a, b)``, or ``fpr_max=b`` for ``(0, b)``, or both when they
    agree; neither means ``_DEFAULT_FPR_RANGE``, from 0 when ``tpr_min > 0``
    (:func:`skrank.metrics._check_roc_region` says what it refuses).
    """
    default = (0.0, _DEFAULT_FPR_RANGE[1]) if tpr_min > 0.0 else _DEFAULT_FPR_RANGE
    return _check_roc_region(tpr_min, fpr_range, fpr_max, default=default)


class PartialAUCClassifier(RankingFit, PlattRankingMixin, RankLinearClassifierMixin, RankLinearModel):
    __doc__ = ("""Linear classifier that maximises the partial AUC over a range of false-positive rates.

    Fits a linear scorer whose ROC curve is as high as possible between the
    false-positive rates ``fpr_range``, for models judged only there (a
    screening test at a low false-alarm rate, say).  The default minimises a
    mix of the logistic loss and a smoothed pairwise surrogate of the partial
    AUC, started from logistic regression; ``rank_weight=1`` fits the
    surrogate of Yao, Lin and Yang (2022), "Large-scale Optimization of
    Partial AUC in a Range of False Positive Rates", alone.

    Read more in the user guide: :doc:`partial_auc`.

    Parameters
    ----------
    fpr_range : tuple of two floats or None, default=None
        ``(fpr_min, fpr_max)`` with ``0 <= fpr_min < fpr_max <= 1``;
        ``(0, 1)`` is the full AUC.  None means ``(0, fpr_max)`` when
        ``fpr_max`` is given, else ``(0.05, 0.5)``, or ``(0, 0.5)`` when
        ``tpr_min > 0``.  The training set must hold at least one negative
        in the range, ``N- (fpr_max - fpr_min) >= 1``.
    fpr_max : float or None, default=None
        The false-positive-rate ceiling in ``(0, 1]``, for the range
        ``(0, fpr_max)``: the name :func:`skrank.metrics.two_way_partial_auc_score`
        takes.  Given with ``fpr_range``, it must be its upper end.
    tpr_min : float, default=0.0
        True-positive-rate floor in ``[0, 1)``.  Above 0, the objective is
        the two-way partial AUC over the region ``TPR >= tpr_min`` and
        ``FPR <= fpr_max``, whose range starts at 0 (``fpr_max=b`` or
        ``fpr_range=(0, b)``): only the positives ranked in the bottom
        ``1 - tpr_min`` of the positives take part (Yang, Xu, Bao, Cao and
        Huang 2021, "When All We Need is a Piece of the Pie: A Generic
        Framework for Optimizing Two-way Partial AUC"); fitted by
        ``"lbfgs"`` and, with ``partial_fit``, ``"sota-s"``.  Score it with
        :func:`skrank.metrics.two_way_partial_auc_score`.
    loss : {"smooth_step", "squared_hinge", "logistic", "squared"} or None, default=None
        Loss of the pairwise margin ``s_positive - s_negative``.  None means
        ``"smooth_step"``, the metric's pair indicator smoothed over a band
        of width ``2 margin`` (fitted by ``"lbfgs"`` only), for ``"auto"``
        and ``"lbfgs"``, and the paper's convex loss for the papers'
        solvers.  Formulas and costs per pass: user guide.
    margin : float or None, default=None
        Margin of the squared hinge and squared losses, half-width of the
        smooth step, on the scale of the scores (ignored by the logistic
        loss).  None means a quarter of the standard deviation of the
        logistic regression's scores for the smooth step (``margin_``), so
        that the band follows their spread, and 1 otherwise.
    rank_weight : float or None, default=None
        Weight in ``[0, 1]`` of the partial-AUC surrogate against the
        logistic loss: 0 is logistic regression, 1 the surrogate alone.
        Values below 1 are fitted by ``"lbfgs"`` only.  None means 0.05, the
        best on the benchmark tables, for ``"auto"`` and ``"lbfgs"``, and 1
        for the papers' solvers.
    link : {"identity", "sigmoid"}, default="identity"
        The scores the surrogate ranks: ``X w``, or ``sigmoid(X w + b)`` as
        the papers' networks score (fitted by ``"lbfgs"`` only).
    alpha : float or None, default=None
        Strength of the l2 penalty ``alpha ||w||^2 / 2``.  None means
        ``1 / n_samples`` (one over the total sample weight), the penalty of
        ``LogisticRegression(C=1)``; ``partial_fit`` then uses 1e-4.
    class_weight : dict, "balanced" or None, default=None
        Weights of the classes, multiplying ``sample_weight`` as in
        :class:`sklearn.linear_model.LogisticRegression`.  With two classes
        they leave the ranking unchanged and move the Platt threshold.
    solver : {""" + options_doc(_SOLVERS, first=("auto",)) + """}, default="auto"
        ``"auto"`` takes ``"exact"``, the closed-form fit of the full-AUC
        square loss, where it applies, and otherwise ``"lbfgs"``, L-BFGS on
        the exact objective: on data that fit in memory it is faster and more
        accurate than the stochastic solvers.  For the logistic loss, when
        one pass would cost more than 5e7 pair terms and there are no sample
        weights, it takes ``"agd-sbcd"``.  The papers' stochastic solvers,
        for data too large for full passes: ``"agd-sbcd"``, ``"dca"`` and
        ``"prox-dca"`` (Yao, Lin and Yang 2022), and ``"ppd-sg"`` and
        ``"ppd-adagrad"`` (Liu, Yuan, Ying and Yang 2020; full AUC with the
        squared loss, and ``partial_fit``).  ``"sota-s"`` (Zhu, Wu, Wang and
        Yang 2022) fits a smoothed two-way range with ``partial_fit``.  Which of them take sample
        weights or Dask arrays: user guide.
    max_iter : int or None, default=None
        Maximum iterations of the solver: L-BFGS iterations, outer
        iterations of AGD-SBCD and DCA, stages of PPD, epochs of SOTA-s.  None means the
        solver's own default.
    tol : float, default=1e-4
        Tolerance of the solver's stopping criterion; for L-BFGS a bound on
        the gradient that depends neither on the scale of ``X`` nor on that
        of the weights (user guide).
    batch_size : int, default=64
        Mini-batch size of the stochastic solvers (positives and negatives
        per block for AGD-SBCD and DCA, per step for SOTA-s; samples for PPD).
    random_state : int, RandomState instance or None, default=None
        Seed of the stochastic solvers.
    warm_start : bool, default=False
        Start from the previous ``ranking_coef_`` when refitting.
    verbose : int, default=0
        Print progress when positive.
""" + PLATT_ATTRIBUTES_DOC + """
    margin_ : ndarray of shape (n_problems,)
        The margin of the pairwise loss in each fit.
    score_intercept_ : ndarray of shape (n_problems,)
        The offset ``b`` of the linear predictor in ``F`` (0 when the
        objective has none: ``rank_weight=1`` with ``link="identity"``).""" + FIT_ATTRIBUTES_DOC + """
    Notes
    -----
    The objective is not convex when ``fpr_min > 0``: every solver returns
    a stationary point.  ``objective_`` is the exact full-data objective at
    the returned ``(ranking_coef_, score_intercept_)`` whatever the solver,
    so fits compare.

    The pairwise surrogate fits no intercept: a Platt fit of the labels on
    the scores ``X ranking_coef_`` gives ``coef_`` and ``intercept_`` (see
    Attributes).  ``score`` is accuracy, as for every scikit-learn
    classifier; tune with
    ``scoring=skrank.metrics.make_partial_auc_scorer(fpr_range)``.

    With ``solver="ppd-sg"``, ``"ppd-adagrad"`` or ``"sota-s"``, ``partial_fit`` runs one
    pass of steps on each batch and carries the solver's state from call to
    call; the Platt map is refitted on the latest batch.  With ``"sota-s"``
    a ConvergenceWarning says when the exact objective on the batch is
    above that at the stream's start.  See the user guide.

    Examples
    --------
    >>> from sklearn.datasets import make_classification
    >>> from skrank.estimators import PartialAUCClassifier
    >>> from skrank.metrics import partial_auc_score
    >>> X, y = make_classification(500, weights=[0.9], random_state=0)
    >>> clf = PartialAUCClassifier(fpr_range=(0.05, 0.5)).fit(X, y)
    >>> partial_auc_score(y, clf.decision_function(X), fpr_range=(0.05, 0.5)) > 0.8
    True
    """)

    _multilabel = True

    _parameter_constraints = {
        "fpr_range": ["array-like", None],
        "fpr_max": [Interval(Real, 0, 1, closed="right"), None],
        "tpr_min": [Interval(Real, 0, 1, closed="left")],
        "loss": [StrOptions(set(PARTIAL_AUC_LOSSES)), None],
        "margin": [Interval(Real, 0, None, closed="neither"), None],
        "rank_weight": [Interval(Real, 0, 1, closed="both"), None],
        "link": [StrOptions({"identity", "sigmoid"})],
        "alpha": [Interval(Real, 0, None, closed="left"), None],
        "class_weight": [dict, StrOptions({"balanced"}), None],
        "solver": [StrOptions({"auto", *_SOLVERS})],
        "max_iter": [Interval(Integral, 1, None, closed="left"), None],
        "tol": [Interval(Real, 0, None, closed="left")],
        "batch_size": [Interval(Integral, 1, None, closed="left")],
        "random_state": ["random_state"],
        "warm_start": ["boolean"],
        "verbose": ["verbose"],
    }

    __init__ = keyword_init(fpr_range=None, fpr_max=None, tpr_min=0.0, loss=None, margin=None,
                            rank_weight=None, link="identity", alpha=None, class_weight=None, solver="auto",
                            max_iter=None, tol=1e-4, batch_size=64, random_state=None, warm_start=False,
                            verbose=0)

    # --- checks --------------------------------------------------------------------------
    _solvers = _SOLVERS

    def _resolve_defaults(self):
        """``loss``, ``margin`` and ``rank_weight``, the None ones chosen by the solver."""
        paper = self._paper_solver()
        if self.loss is not None:
            loss = self.loss
        else:
            loss = self._solvers[self.solver].default_loss if paper else "smooth_step"
        # the smooth step's band follows the spread of the scores (the anchored fit's start sets it)
        relative_margin = _RELATIVE_MARGIN if self.margin is None and loss == "smooth_step" else None
        margin = 1.0 if self.margin is None else self.margin
        rank_weight = self.rank_weight if self.rank_weight is not None else (1.0 if paper else 0.05)
        return loss, margin, rank_weight, relative_margin

    def _check_before_solve(self, X, sample_weight=None):
        self._fpr_range, _ = _fitted_region(self.fpr_range, self.fpr_max, self.tpr_min)
        self._loss, margin, self._rank_weight, self._relative_margin = self._resolve_defaults()
        self._pair_loss = get_pairwise_loss(self._loss, margin)
        self._set_problem(X, sample_weight, risk=None, loss=self._pair_loss, penalty=None,
                          fpr_range=self._fpr_range, rank_weight=self._rank_weight, link=self.link,
                          tpr_min=self.tpr_min)

    # --- fitting -------------------------------------------------------------------------
    def _store_results(self, results):
        super()._store_results(results)
        self.margin_ = np.array([r.info.get("margin", np.nan) for r in results], dtype=np.float64)

    def _new_stream(self, n_features, coef_init=None, intercept_init=None):
        from ..solvers.stochastic.ppd import PPDStream
        from ..solvers.stochastic.sota import SOTAStream

        start = dict(random_state=self.random_state, coef_init=coef_init, n_features=n_features)
        if self._solver == "sota-s":
            return SOTAStream(**self._stream_settings(), **start)
        return PPDStream(adagrad=self._solver == "ppd-adagrad", **self._stream_settings(), **start)

    def _stream_settings(self):
        """The settings of the stream that each ``partial_fit`` call reads from the parameters."""
        settings = dict(alpha=STREAM_ALPHA if self.alpha is None else self.alpha, batch_size=self.batch_size)
        if self._solver == "sota-s":
            return dict(settings, loss=self._pair_loss, fpr_max=self._fpr_range[1], tpr_min=self.tpr_min)
        return dict(settings, margin=self._pair_loss.margin)

    def _after_partial_fit(self, X, y, sample_weight):
        super()._after_partial_fit(X, y, sample_weight)
        if self._solver == "sota-s":
            self._warn_if_stream_above_start(X, y)

    def _warn_if_stream_above_start(self, X, y):
        """Warn when a SOTA-s stream's coefficients score worse than its start on the batch just passed.

        A stream cannot go back to a better point as the fit does (it has
        no exact objective of the whole data): one ConvergenceWarning names
        the problems whose exact objective on the batch is above that of
        the stream's start.
        """
        above = []
        for stream, positive in zip(self._streams, problem_labels(self.classes_)):
            try:
                objective = PartialAUCObjective(X, problem_target(y, positive), (0.0, self._fpr_range[1]),
                                                stream.loss, stream.alpha, tpr_min=self.tpr_min)
            except ValueError:
                continue  # a batch too small for the range: nothing to judge by
            now, start = objective.value(stream.coef), objective.value(stream.w_init)
            if now > start:
                above.append(f"{now:.4g} against {start:.4g} for class {np.asarray(positive).tolist()!r}")
        if above:
            self._warn_unsettled(f"on this batch the objective at the stream's coefficients is above that at "
                                 f"its starting point ({', '.join(above)}): the steps have not improved on "
                                 "the start yet")

    def _anchored(self):
        return self._rank_weight < 1.0 or self.link == "sigmoid" or self._loss == "smooth_step"

    def _worker_rank_term(self):
        if self.link == "sigmoid":
            return None
        from ..datafits import worker_ranking

        return worker_ranking.PartialAUCTerm(self._pair_loss, self._fpr_range, self.tpr_min)

    def _rank_datafit(self, X, y, sample_weight, alpha):
        objective = PartialAUCObjective(X, y, self._fpr_range, self._pair_loss, alpha,
                                        sample_weight=sample_weight, tpr_min=self.tpr_min)
        return SigmoidScorePartialAUC(objective) if self.link == "sigmoid" else objective

    def _stochastic_options(self):
        return dict(batch_size=self.batch_size, random_state=self.random_state)

    def _paper_start(self, info, objective, coef_init, intercept_init):
        if info.closed_form:
            return None  # it takes no start
        if coef_init is not None:
            return np.asarray(coef_init, dtype=np.float64)
        if info.paper_start:
            return None  # the paper's start (PPD: w = 0; the closed form would be the answer)
        d = objective.X.shape[1]
        if d <= _CLOSED_FORM_START_MAX_FEATURES:
            from ..datafits.square_auc import square_auc_coef

            return square_auc_coef(objective.X, np.where(objective.positive, 1.0, -1.0), objective.alpha,
                                   objective.loss.margin, objective.sample_weight)
        diff = _class_mean_difference(objective)
        return diff / max(float(np.linalg.norm(diff)) ** 2, 1e-12)

    @staticmethod
    def _costly(objective):
        """Whether one exact pass costs more than ``_AUTO_MAX_LOGISTIC_PAIRS`` pair terms (logistic loss)."""
        in_range = np.ceil(objective.n) - np.floor(objective.m)
        return not objective.loss.pieces and objective.n_pos * in_range > _AUTO_MAX_LOGISTIC_PAIRS


def _class_mean_difference(objective):
    """The positives' mean row minus the negatives' (weighted with sample weights), as one ``X' c``."""
    v = np.ones(objective.positive.shape[0]) if objective.sample_weight is None else objective.sample_weight
    pos = objective.positive
    c = np.where(pos, v / v[pos].sum(), -v / v[~pos].sum())
    return objective.design.rmatvec(c)
