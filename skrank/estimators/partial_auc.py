"""Linear classifier that maximises the partial AUC over a false-positive-rate range (Yao et al. 2022)."""

from numbers import Integral, Real

import numpy as np
from sklearn.utils._param_validation import Interval, StrOptions

from ..backends.dispatch import external_kind
from ..datafits.partial_auc import PartialAUCObjective, SigmoidScorePartialAUC
from ..metrics import _check_fpr_range
from ..pairwise_losses import PARTIAL_AUC_LOSSES, get_pairwise_loss
from ..solvers.registry import auto_preference, solvers_for, streaming_solvers
from ._anchored import STREAM_ALPHA, fit_anchored, resolve_alpha
from ._base import RankLinearClassifierMixin, _RankLinearModel
from ._params import keyword_init, options_doc
from ._platt import FIT_ATTRIBUTES_DOC, PLATT_ATTRIBUTES_DOC, PlattRankingMixin, platt_calibrate

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


class PartialAUCClassifier(PlattRankingMixin, RankLinearClassifierMixin, _RankLinearModel):
    __doc__ = ("""Linear classifier that maximises the partial AUC over a range of false-positive rates.

    Minimises a mix of the logistic loss and the pairwise surrogate of the
    normalised partial AUC over the false-positive rates
    ``fpr_range = (fpr_min, fpr_max)`` (Yao, Lin and Yang, "Large-scale
    Optimization of Partial AUC in a Range of False Positive Rates",
    NeurIPS 2022, eq. (3)), with an l2 penalty:

        F(w, b) = (1 - r) L(w, b) + r P(w, b) + alpha ||w||^2 / 2,
        P(w, b) = 1/(N+ (n - m)) sum_{i positive} sum_{k = m+1..n} loss(s_i - q_(k)),

    where ``r = rank_weight``, ``L`` is the mean logistic loss of the
    linear predictor ``X w + b``, ``s`` the scores (``sigmoid(X w + b)``
    with ``link="sigmoid"``, ``X w`` with ``link="identity"``),
    ``q_(1) >= q_(2) >= ...`` the negatives' scores sorted in decreasing
    order, ``m = fpr_min N-`` and ``n = fpr_max N-``.  ``rank_weight=0``
    is :class:`~sklearn.linear_model.LogisticRegression` with
    ``C = 1 / (alpha n_samples)``; ``rank_weight=1`` with
    ``link="identity"`` the paper's objective alone, which its solvers
    (AGD-SBCD, DCA, proximal DCA) and the full-AUC solvers need.
    Fractional ranks are weighted as the ROC cells they cut: the sum runs
    over the top ``floor(n)`` negatives plus ``n - floor(n)`` times the
    next, minus the same for ``m`` (the paper assumes integer ranks; this is
    our extension).  So only the
    negatives whose scores rank them inside the range count: a positive is
    pushed above the negatives that a threshold in that FPR range would let
    through.  With ``fpr_range=(0, 1)`` and the squared loss this is the
    full-AUC square loss of Liu, Yuan, Ying and Yang ("Stochastic AUC
    Maximization with Deep Neural Networks", ICLR 2020).

    The defaults of ``solver="auto"`` (``loss="smooth_step"`` with a
    margin of a quarter of the scores' spread, ``rank_weight=0.05``,
    ``alpha=1/n_samples``) come from the real-table benchmark
    (``doc/benchmarks.rst``).  The paper's objective alone
    (``loss="squared_hinge", margin=1, rank_weight=1``) ranks worse than
    logistic regression on most of its tables, even on the training data:
    a convex loss of ``X w`` grows without bound for positives ranked far
    below the negatives, which the metric ignores.  The smooth step is the
    metric's own pair indicator, smoothed over a band of scores; started
    from the logistic regression and held near it by the logistic term, it
    moves the ranking towards the metric.  :class:`PartialAUCClassifierCV`
    chooses ``rank_weight`` and ``alpha`` by cross-validation, and falls
    back to logistic regression where the rank term does not help.

    The objective is not convex when ``fpr_min > 0`` (a difference of two
    convex functions of ``w``); every solver returns a stationary point, not
    a certified global minimum.  ``objective_`` is always the exact
    full-data ``F`` at the returned coefficients, whatever the solver, so
    fits by different solvers compare.

    With ``sample_weight`` (and ``class_weight``) ``F`` is the objective of
    the weighted empirical distribution: positive ``i`` and negative ``j``
    carry the probabilities ``p_i = v_i / W+`` and ``r_j = v_j / W-``, and
    the negatives' rank weights are the lengths of their cells of
    cumulative probability, in decreasing order of score, inside
    ``fpr_range`` (:mod:`skrank.datafits.partial_auc`,
    ``doc/sample_weights.rst``).  Integer weights fit as repeated rows and
    zero weights as dropped rows.  The deterministic solvers ``"lbfgs"``
    and ``"exact"`` take weights, and so do ``"ppd-sg"`` and
    ``"ppd-adagrad"``, which draw their samples with probabilities
    proportional to the weights (equal to the repeated rows in distribution
    only); ``"agd-sbcd"``, ``"dca"`` and ``"prox-dca"`` do not yet.

    Parameters
    ----------
    fpr_range : tuple of two floats, default=(0.05, 0.5)
        ``(fpr_min, fpr_max)`` with ``0 <= fpr_min < fpr_max <= 1``.  The
        training set must hold at least one negative in the range,
        ``N- (fpr_max - fpr_min) >= 1``.
    loss : {"smooth_step", "squared_hinge", "logistic", "squared"} or None, default=None
        Loss of the pairwise margin ``z = s_positive - s_negative``; None
        means ``"smooth_step"`` for ``solver="auto"`` and ``"lbfgs"``,
        the paper's loss for its solvers (``"squared"`` for ``"exact"``
        and PPD, ``"squared_hinge"`` for the others):
        ``"smooth_step"`` is the metric's indicator ``1(z < 0)`` (a half at
        ties) smoothed for ``|z| < margin`` by two quadratic pieces
        (bounded, not convex; ``"lbfgs"`` only); the convex ones as the
        papers write them (no factor 1/2): ``max(0, margin - z)^2``,
        ``log(1 + exp(-z))`` (the experiments of Yao, Lin and Yang 2022) or
        ``(margin - z)^2`` (Liu et al. 2020).  The smooth step costs
        three squared-hinge passes.  The squared hinge and squared losses are evaluated
        exactly in ``O((N+ + N-) log N- + (N+ + N-) d)`` per pass; the
        logistic loss in ``O(N+ R + N- log N- + (N+ + N-) d)`` with ``R``
        the number of negatives in the range.
    margin : float or None, default=None
        Margin of the squared hinge and squared losses, half-width of the
        smooth step (ignored by the logistic loss), on the scale of the
        scores: logits with ``link="identity"`` and the logistic term
        (``2`` is a factor ``e^2`` in odds), ``(0, 1)`` with
        ``link="sigmoid"``.  None means, for the smooth step, a quarter of
        the standard deviation of the logistic regression's training scores
        (its fit at ``rank_weight=0``, so that the band follows the spread
        of the scores; ``margin_`` holds the value), and 1 otherwise.
    rank_weight : float or None, default=None
        ``r`` in ``[0, 1]``: the weight of the partial-AUC surrogate
        against the logistic loss.  Values below 1 are fitted by
        ``"lbfgs"`` only, from the logistic regression's solution.  None
        means 0.05 for ``solver="auto"`` and ``"lbfgs"``, 1 (the paper's
        objective alone) for the papers' solvers.
    link : {"identity", "sigmoid"}, default="identity"
        The scores the surrogate ranks: ``sigmoid(X w + b)`` (bounded, as
        the papers' networks score) or ``X w``.  ``"sigmoid"`` is fitted
        by ``"lbfgs"`` only.
    alpha : float or None, default=None
        Strength of the l2 penalty ``alpha ||w||^2 / 2``.  None means
        ``1 / n_samples`` (one over the total sample weight), the penalty
        of ``LogisticRegression(C=1)``; ``partial_fit`` then uses 1e-4.
    class_weight : dict, "balanced" or None, default=None
        Weights of the classes, multiplying ``sample_weight`` as in
        :class:`sklearn.linear_model.LogisticRegression`: ``"balanced"``
        gives class ``c`` the weight ``n / (n_classes n_c)``.  ``F`` is then
        that of the weighted sample.  As ``F`` normalises each class by its
        total weight, weights constant over each class leave a binary
        ranking unchanged and move only the Platt threshold (so
        ``predict``); with more than two classes they also reweight the
        classes that make up each one-vs-rest problem's negatives.
    solver : {""" + options_doc(_SOLVERS, first=("auto",)) + """}, default="auto"
        - ``"lbfgs"``: L-BFGS on the exact full-batch ``F`` and its
          gradient (:func:`skrank.solvers.full_batch.lbfgs.lbfgs`); deterministic.
        - ``"exact"``: the closed-form minimiser of the full-AUC square loss
          (class means and covariances,
          :func:`skrank.solvers.full_batch.auc_closed_form.exact_square_auc`); needs
          ``loss="squared"`` and ``fpr_range=(0, 1)``.
        - ``"agd-sbcd"``: Algorithms 1-2 of Yao, Lin and Yang 2022, approximate gradient
          descent on the Moreau-smoothed objective with stochastic block
          coordinate descent inner loops (:func:`skrank.solvers.stochastic.sbcd.agd_sbcd`).
        - ``"dca"``, ``"prox-dca"``: the paper's baselines, DCA and proximal
          DCA with stochastic inner loops
          (:mod:`skrank.solvers.splitting.pauc_dca`).
        - ``"ppd-sg"``, ``"ppd-adagrad"``: the proximal primal-dual
          stochastic methods of Liu et al. 2020 on the min-max form of the square loss; need
          ``loss="squared"`` and ``fpr_range=(0, 1)``
          (:mod:`skrank.solvers.stochastic.ppd`).  The solvers with ``partial_fit``.
        - ``"auto"``: ``"exact"`` when it applies; otherwise ``"lbfgs"``,
          except for the logistic loss when a pass would cost more than
          5e7 pair terms (``N+`` times the negatives in the range) and the
          fit has no sample weights, where it takes ``"agd-sbcd"``.  On tables that fit in memory the exact
          full-batch evaluators make L-BFGS reach a lower ``F`` than the
          stochastic solvers in less time (``benchmarks/partial_auc.py``);
          the stochastic ones are for data too large for full passes.

        A Dask array ``X`` chunked by rows is fitted by ``"lbfgs"`` and
        ``"exact"`` without being gathered (every product with ``X`` runs
        chunk by chunk, ``doc/scaling.rst``); ``"auto"`` then takes one of
        them, and the stochastic solvers refuse it.
    max_iter : int or None, default=None
        Maximum iterations of the solver: L-BFGS iterations, outer
        iterations of AGD-SBCD and DCA, stages of PPD.  None means the
        solver's own default.
    tol : float, default=1e-4
        Tolerance of the solver's stopping criterion (L-BFGS: the largest
        gradient entry with respect to the coefficients in units of the
        features' root mean squares, or a relative decrease of ``F`` per
        iteration below ``tol / 1000``, :func:`skrank.solvers.full_batch.lbfgs.lbfgs`;
        neither depends on the scale of ``X``, with ``alpha`` rescaled to
        match, nor on that of the weights; the stochastic solvers: their
        documented criterion).
    batch_size : int, default=64
        Mini-batch size of the stochastic solvers (positives and negatives
        per block for AGD-SBCD and DCA; samples for PPD).
    random_state : int, RandomState instance or None, default=None
        Seed of the stochastic solvers.
    warm_start : bool, default=False
        Start from the previous ``coef_`` when refitting.
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
    An intercept cancels in ``h_i - q_k``, so the objective fits none.
    After the ranking is fitted, a one-dimensional logistic regression of
    the labels on the training scores ``s = X coef_`` (Platt scaling,
    :func:`skrank.estimators._platt.fit_platt`) gives ``sigmoid(A s + B)``
    with ``A > 0``: ``decision_function`` returns ``A s + B``,
    ``intercept_ = B / A`` is the threshold on ``s``, ``predict`` takes
    the sign (the largest column for more than two classes) and
    ``predict_proba`` the sigmoid.  None of them changes the ranking.
    With sample weights the Platt fit is weighted too.
    ``score`` is accuracy, as for every scikit-learn classifier; tune with
    ``scoring=skrank.metrics.make_partial_auc_scorer(fpr_range)``.

    The default start is the closed-form full-AUC square-loss fit, which
    ranks well and avoids the all-tied point ``w = 0`` (the paper leaves the start open);
    PPD-SG and PPD-AdaGrad start from ``w = 0`` as in their paper (their
    min-max form has no ties to fear, and the closed form is their answer).

    With ``solver="ppd-sg"`` or ``"ppd-adagrad"``,
    ``partial_fit(X, y, classes, sample_weight)`` runs one pass on each
    batch it is given, ``max(n // batch_size, 1)`` steps on samples drawn
    from the batch, and keeps what the steps carry between calls
    (:class:`skrank.solvers.stochastic.ppd.PPDStream`): the stage's start and current
    ``(w, a, b, dual)``, the sums of its average, its step counter and step
    size, the AdaGrad sums, the generator, and the class totals and class
    sums of all the batches seen, which give the class ratio and the
    class means of the dual's restarts.  A stage ends after its
    ``1000 3^k`` steps, whichever call they fall in, and the next starts
    from its average with a third of its step (the paper's schedule, with
    no last stage; there is no exact objective to check a stage against,
    so the safeguard of ``fit`` is off).  ``coef_`` is the average of the
    current stage's points so far, the stage's output were it to end now.
    The step units come from the first batch that holds both classes, and
    no step is taken before one has come.  Both methods step there with
    ``step=1`` (:data:`skrank.solvers.stochastic.ppd.STREAM_STEP`; ``fit``'s
    PPD-AdaGrad takes 10): AdaGrad's first steps move every coordinate by
    the whole step, and at 10 they overshoot and flip to a ranking worse
    than chance, which ``fit`` averages away over its 1000-step first
    stage but a young stream's average would return.  After every call the
    Platt map is refitted on that call's batch, the only data at hand, so
    ``intercept_`` and ``calibration_`` describe the latest batch;
    ``objective_`` is left as it was.  ``max_iter`` and ``tol`` play no
    part.  Each call reads the current parameters: ``alpha``, ``margin``,
    ``batch_size`` and ``class_weight`` may change between calls (the step
    units follow), a new ``random_state`` reseeds the draws, and a change
    of ``solver`` raises a ValueError.

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

    _parameter_constraints = {
        "fpr_range": ["array-like"],
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

    __init__ = keyword_init(fpr_range=(0.05, 0.5), loss=None, margin=None, rank_weight=None, link="identity",
                            alpha=None, class_weight=None, solver="auto", max_iter=None, tol=1e-4,
                            batch_size=64, random_state=None, warm_start=False, verbose=0)

    # --- checks --------------------------------------------------------------------------
    _solvers = _SOLVERS
    _AUTO = auto_preference(_SOLVERS)

    def _resolve_defaults(self):
        """``loss``, ``margin`` and ``rank_weight``, the None ones chosen by the solver."""
        entry = self._solvers.get(self.solver)  # None for "auto"
        paper = entry is not None and not entry.anchored  # a paper's solver fits its objective alone
        if self.loss is not None:
            loss = self.loss
        else:
            loss = entry.default_loss if paper else "smooth_step"
        # the smooth step's band follows the spread of the scores (fit_anchored sets it)
        relative_margin = _RELATIVE_MARGIN if self.margin is None and loss == "smooth_step" else None
        margin = 1.0 if self.margin is None else self.margin
        rank_weight = self.rank_weight if self.rank_weight is not None else (1.0 if paper else 0.05)
        return loss, margin, rank_weight, relative_margin

    def _check_before_solve(self, X, sample_weight=None):
        self._fpr_range = _check_fpr_range(self.fpr_range)
        self._loss, margin, self._rank_weight, self._relative_margin = self._resolve_defaults()
        self._pair_loss = get_pairwise_loss(self._loss, margin)
        self._problem = dict(risk=None, loss=self._pair_loss, penalty=None,
                             weighted=sample_weight is not None, external=external_kind(X),
                             fpr_range=self._fpr_range, rank_weight=self._rank_weight, link=self.link)
        self._solver = self._choose(self.solver).name

    # --- fitting -------------------------------------------------------------------------
    def _store_results(self, results):
        super()._store_results(results)
        self.margin_ = np.array([r.info.get("margin", np.nan) for r in results], dtype=np.float64)

    _STREAMING_SOLVERS = streaming_solvers(_SOLVERS)

    def _new_stream(self, n_features, coef_init=None, intercept_init=None):
        from ..solvers.stochastic.ppd import PPDStream

        alpha = STREAM_ALPHA if self.alpha is None else self.alpha
        return PPDStream(alpha=alpha, margin=self._pair_loss.margin,
                         adagrad=self._solver == "ppd-adagrad", batch_size=self.batch_size,
                         random_state=self.random_state, coef_init=coef_init, n_features=n_features)

    def _update_stream(self, stream):
        alpha = STREAM_ALPHA if self.alpha is None else self.alpha
        stream.update(alpha=alpha, margin=self._pair_loss.margin, batch_size=self.batch_size)

    def _start(self, objective, coef_init):
        entry = self._solvers[self._solver]
        if entry.closed_form:
            return None  # it takes no start
        if coef_init is not None:
            return np.asarray(coef_init, dtype=np.float64)
        if entry.paper_start:
            return None  # the paper's start (PPD: w = 0; the closed form would be the answer)
        d = objective.X.shape[1]
        if d <= _CLOSED_FORM_START_MAX_FEATURES:
            from ..datafits.square_auc import square_auc_coef

            return square_auc_coef(objective.X, np.where(objective.positive, 1.0, -1.0), objective.alpha,
                                   objective.loss.margin, objective.sample_weight)
        diff = _class_mean_difference(objective)
        return diff / max(float(np.linalg.norm(diff)) ** 2, 1e-12)

    def _solve(self, X, y, coef_init, intercept_init, sample_weight=None):
        from ..backends.threads import blas_threads

        anchored = self._rank_weight < 1.0 or self.link == "sigmoid" or self._loss == "smooth_step"
        objective = PartialAUCObjective(X, y, self._fpr_range, self._pair_loss,
                                        0.0 if anchored else resolve_alpha(self.alpha, y, sample_weight),
                                        sample_weight=sample_weight)
        with blas_threads(X):
            if anchored:
                rank = SigmoidScorePartialAUC(objective) if self.link == "sigmoid" else objective
                result = fit_anchored(rank, X, y, self, self._rank_weight, coef_init, intercept_init,
                                      sample_weight, relative_margin=self._relative_margin)
            else:
                # "auto" on this problem: a costly logistic pass may move it to a stochastic solver
                entry = self._choose(self.solver, costly=self._costly(objective))
                self._solver = entry.name  # the solver of this problem, which the verbose line names
                stochastic = dict(batch_size=self.batch_size, random_state=self.random_state)
                result = entry.run(objective, coef_init=self._start(objective, coef_init),
                                   tol=self.tol, verbose=self.verbose, max_iter=self.max_iter,
                                   stochastic=stochastic)
                result.info["score_intercept"] = 0.0
                result.info["margin"] = objective.loss.margin
        result.info["solver"] = self._solver
        return platt_calibrate(result, X, y, sample_weight if objective.weighted else None)

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
