"""Linear classifier that maximises a surrogate of average precision (Qi et al. 2021)."""

from numbers import Integral, Real

import numpy as np
from sklearn.utils._param_validation import Interval, StrOptions

from ..backends.dispatch import external_kind
from ..datafits.average_precision import AveragePrecisionObjective
from ..pairwise_losses import AVERAGE_PRECISION_LOSSES, get_pairwise_loss
from ..solvers.registry import auto_preference, solvers_for, streaming_solvers
from ..solvers.stochastic.soap import OPTIMIZERS
from ._anchored import STREAM_ALPHA, fit_anchored, resolve_alpha
from ._base import RankLinearClassifierMixin, _RankLinearModel
from ._params import keyword_init, options_doc
from ._platt import FIT_ATTRIBUTES_DOC, PLATT_ATTRIBUTES_DOC, PlattRankingMixin, platt_calibrate
from .partial_auc import _AUTO_MAX_LOGISTIC_PAIRS

#: The solvers of the estimator: its rows of the table of :mod:`skrank.solvers.registry`.
_SOLVERS = solvers_for("AveragePrecisionClassifier")


class AveragePrecisionClassifier(PlattRankingMixin, RankLinearClassifierMixin, _RankLinearModel):
    __doc__ = ("""Linear classifier that maximises a surrogate of average precision (AUPRC).

    Minimises the negative surrogate average precision of Qi, Luo, Xu, Ji
    and Yang ("Stochastic Optimization of Areas Under Precision-Recall
    Curves with Provable Convergence", NeurIPS 2021, eq. (2)) with an l2
    penalty:

        F(w, b) = -(1/N+) sum_{i positive} A_i / B_i + alpha ||w||^2 / 2,
        A_i = sum_{s positive} l(h_i - h_s),   B_i = sum_{s} l(h_i - h_s),

    on the scores ``h = sigmoid(X w + b)``.  ``A_i / B_i`` replaces the
    indicator ``1(h_s >= h_i)`` of the precision at positive ``i``'s
    threshold by the surrogate ``l``, so ``-F`` (without the penalty) is a
    smooth stand-in for the average precision of the training set.  The
    sigmoid is the paper's: it bounds the score differences to (-1, 1), so
    that the margin means the same whatever the scale of ``X w`` (see
    :class:`skrank.datafits.average_precision.AveragePrecisionObjective`
    for the measurement that chose it).

    With ``solver="auto"`` or ``"lbfgs"`` the default fits this surrogate
    mixed with the logistic loss, ``(1 - r) L(w, b) + r F(w, b)`` with
    ``r = rank_weight = 0.5`` and ``alpha = 1 / n_samples``, started from
    the logistic regression: on the real-table benchmark
    (``doc/benchmarks.rst``) the paper's objective alone (``rank_weight=1``,
    which SOAP fits) lost to logistic regression on held-out average
    precision, and the mix did not.

    The objective is not convex; every solver returns a stationary point.
    ``objective_`` is always the exact full-data ``F`` at the returned
    coefficients, whatever the solver, so fits by different solvers
    compare.

    Parameters
    ----------
    loss : {"squared_hinge", "logistic", "sigmoid"}, default="squared_hinge"
        The surrogate ``l(z)`` of ``1(z <= 0)``, ``z = h_i - h_s``:
        ``max(0, margin - z)^2`` (the paper's main choice),
        ``log(1 + exp(-z))`` or ``1 / (1 + exp(z))`` (its ablation, with
        ``c = 1``).  The squared hinge is evaluated exactly in
        ``O(n log n + n d)`` per pass; the other two in ``O(N+ n + n d)``.
    class_weight : dict, "balanced" or None, default=None
        Weights of the classes, multiplying ``sample_weight`` as in
        :class:`sklearn.linear_model.LogisticRegression`: ``"balanced"``
        gives class ``c`` the weight ``n / (n_classes n_c)``.  The objective
        is then the weighted surrogate (see Notes).
    margin : float, default=0.5
        Margin of the squared hinge, on the scale of the sigmoid scores;
        must be positive for it (the other surrogates ignore it), and
        finite whatever the loss.  With
        ``margin >= 1`` the hinge is never reached (score differences are
        below one) and the surrogate is a plain square.
    gamma : float, default=0.9
        SOAP's moving-average weight of the newest mini-batch estimate,
        ``u <- (1 - gamma) u + gamma g`` (the paper's convention), in
        (0, 1].
    rank_weight : float or None, default=None
        ``r`` in ``[0, 1]``: the objective is ``(1 - r) L(w, b) + r P(w, b)
        + alpha ||w||^2 / 2``, with ``L`` the mean logistic loss of
        ``X w + b`` and ``P`` the average-precision surrogate above.
        ``rank_weight=0`` is :class:`~sklearn.linear_model.LogisticRegression`
        with ``C = 1 / (alpha n_samples)``; ``rank_weight=1`` the paper's
        objective alone, which SOAP needs.  Values below 1 are fitted by
        ``"lbfgs"`` only, from the logistic regression's solution.  None
        means 0.5 for ``solver="auto"`` and ``"lbfgs"``, 1 for SOAP.  That
        default comes from the real-table benchmark (``doc/benchmarks.rst``),
        where it beat both ends on held-out average precision;
        :class:`AveragePrecisionClassifierCV` chooses it by cross-validation.
    alpha : float or None, default=None
        Strength of the l2 penalty ``alpha ||w||^2 / 2``.  None means
        ``1 / n_samples`` (one over the total sample weight), the penalty
        of ``LogisticRegression(C=1)``; ``partial_fit`` then uses 1e-4.
    solver : {""" + options_doc(_SOLVERS, first=("auto",)) + """}, default="auto"
        - ``"lbfgs"``: L-BFGS on the exact full-batch ``F`` and its
          gradient (:func:`skrank.solvers.full_batch.lbfgs.lbfgs`); deterministic.
        - ``"soap"``: the paper's Algorithms 1-3 (:func:`skrank.solvers.stochastic.soap.soap`),
          one moving average per positive and a sampler with
          ``positives_per_batch`` positives per batch; the one solver with
          ``partial_fit``.
        - ``"auto"``: ``"lbfgs"``, except for the logistic and sigmoid
          surrogates when one pass would cost more than 5e7 pair terms
          (``N+ n``), where it takes ``"soap"``.  On tables that fit in
          memory L-BFGS reaches a lower ``F`` than SOAP in less time
          (``benchmarks/average_precision.py``).

        Both take sample and class weights: L-BFGS exactly, SOAP by drawing
        each class's rows with probabilities proportional to their weights
        (equal to the repeated rows in distribution only).  A Dask array
        ``X`` chunked by rows is fitted by ``"lbfgs"`` (what ``"auto"``
        takes for it) without being gathered (``doc/scaling.rst``); SOAP
        refuses it.
    optimizer : {"sgd", "momentum", "adam"}, default="adam"
        SOAP's update (Algorithm 3): plain SGD, momentum, or the paper's
        Adam-style step.
    learning_rate : float or None, default=None
        SOAP's step size.  None: 1e-2 for Adam, and ``10 / mean ||(x, 1)||^2``
        for SGD and momentum (the value given is divided by the mean squared
        row norm for those two).
    batch_size : int, default=64
        SOAP's samples per step.
    positives_per_batch : int, default=8
        Positives per SOAP step, below ``batch_size``.
    max_iter : int or None, default=None
        L-BFGS iterations (default 500) or SOAP epochs (default 100).
    tol : float, default=1e-4
        L-BFGS: the largest gradient entry with respect to the coefficients
        in units of the features' root mean squares, or a relative decrease
        of ``F`` per iteration below ``tol / 1000``
        (:func:`skrank.solvers.full_batch.lbfgs.lbfgs`; neither depends on the scale
        of ``X``, with ``alpha`` rescaled to match, nor on that of the
        weights).  SOAP: the best exact ``F`` improved by less
        than ``tol * max(1, |F|)`` over 5 epochs.
    random_state : int, RandomState instance or None, default=None
        Seed of SOAP's sampler.
    warm_start : bool, default=False
        Start from the previous ``coef_`` when refitting.
    verbose : int, default=0
        Print the objective after each iteration (L-BFGS) or epoch (SOAP).
""" + PLATT_ATTRIBUTES_DOC + """
    score_intercept_ : ndarray of shape (n_problems,)
        The ``b`` of the objective's scores ``sigmoid(X w + b)``.""" + FIT_ATTRIBUTES_DOC + """
    Notes
    -----
    The ranking is ``X coef_``; ``b`` only places the scores on the
    sigmoid.  After the ranking is fitted, a one-dimensional logistic
    regression of the labels on ``s = X coef_`` (Platt scaling) gives
    ``decision_function = A s + B``, ``intercept_ = B / A``,
    ``predict_proba`` its sigmoid and ``predict`` its sign; none of them
    changes the ranking.  ``score`` is accuracy, as for every scikit-learn
    classifier; tune with ``scoring="average_precision"`` (scikit-learn's
    scorer, which is average precision as eq. (1) of the paper defines it).

    The default start is the closed-form full-AUC square-loss direction,
    scaled so that ``X w`` has unit spread, with ``b`` centring it.

    With sample weights ``v`` (times ``class_weight``'s) the objective is

        F(w, b) = -(1/V+) sum_{i positive} v_i A_i / B_i + alpha ||w||^2 / 2,
        A_i = sum_{s positive} v_s l(h_i - h_s),   B_i = sum_{s} v_s l(h_i - h_s),

    ``V+`` the positives' total weight: the surrogate of scikit-learn's
    weighted ``average_precision_score``.  Integer weights fit as repeated
    rows, zero weights as dropped rows.  The start (class moments, spread
    and centre) and the Platt fit (log-likelihood and Platt's targets) are
    weighted too.

    With ``solver="soap"``, ``partial_fit(X, y, classes, sample_weight)``
    runs one SOAP epoch (``ceil(N- / (batch_size - positives_per_batch))``
    steps) on each batch it is given and keeps what the steps carry between
    calls (:class:`skrank.solvers.stochastic.soap.SOAPStream`): ``(w, b)``, the
    optimizer's moments and step counter, the generator, the moving
    averages, keyed by the positives' content so that a row seen again
    continues its average, and the class totals of all the batches seen,
    which set the batch reweighting.  The first call starts from the
    default start computed on its batch (on the first batch that holds both
    classes), or from ``coef_`` after a ``fit``; a batch without positives
    or without negatives takes no step.  After every call the Platt map is
    refitted on that call's batch, the only data at hand, so
    ``intercept_`` and ``calibration_`` describe the latest batch;
    ``objective_`` is left as it was (``partial_fit`` does not evaluate
    ``F``).  ``max_iter`` and ``tol`` play no part.  Each call reads the
    current parameters: ``alpha``, ``loss``, ``margin``, ``gamma``,
    ``learning_rate``, ``batch_size``, ``positives_per_batch`` and
    ``class_weight`` may change between calls, a new ``random_state``
    reseeds the draws, and a change of ``solver`` or ``optimizer`` (whose
    moments the stream carries) raises a ValueError.

    Examples
    --------
    >>> from sklearn.datasets import make_classification
    >>> from sklearn.metrics import average_precision_score
    >>> from skrank.estimators import AveragePrecisionClassifier
    >>> X, y = make_classification(500, weights=[0.9], random_state=0)
    >>> clf = AveragePrecisionClassifier().fit(X, y)
    >>> average_precision_score(y, clf.decision_function(X)) > 0.75
    True
    """)

    _parameter_constraints = {
        "loss": [StrOptions(set(AVERAGE_PRECISION_LOSSES))],
        "class_weight": [dict, StrOptions({"balanced"}), None],
        "margin": [Interval(Real, None, None, closed="neither")],  # finite, whatever the loss
        "gamma": [Interval(Real, 0, 1, closed="right")],
        "rank_weight": [Interval(Real, 0, 1, closed="both"), None],
        "alpha": [Interval(Real, 0, None, closed="left"), None],
        "solver": [StrOptions({"auto", *_SOLVERS})],
        "optimizer": [StrOptions(set(OPTIMIZERS))],
        "learning_rate": [Interval(Real, 0, None, closed="neither"), None],
        "batch_size": [Interval(Integral, 2, None, closed="left")],
        "positives_per_batch": [Interval(Integral, 1, None, closed="left")],
        "max_iter": [Interval(Integral, 1, None, closed="left"), None],
        "tol": [Interval(Real, 0, None, closed="left")],
        "random_state": ["random_state"],
        "warm_start": ["boolean"],
        "verbose": ["verbose"],
    }

    __init__ = keyword_init(loss="squared_hinge", class_weight=None, margin=0.5, gamma=0.9, rank_weight=None,
                            alpha=None, solver="auto", optimizer="adam", learning_rate=None, batch_size=64,
                            positives_per_batch=8, max_iter=None, tol=1e-4, random_state=None,
                            warm_start=False, verbose=0)

    _solvers = _SOLVERS
    _AUTO = auto_preference(_SOLVERS)

    def _check_before_solve(self, X, sample_weight=None):
        self._pair_loss = get_pairwise_loss(self.loss, self.margin)
        entry = self._solvers.get(self.solver)  # None for "auto"
        paper = entry is not None and not entry.anchored  # a paper's solver fits its objective alone
        self._rank_weight = self.rank_weight if self.rank_weight is not None else (1.0 if paper else 0.5)
        self._problem = dict(risk=None, loss=self._pair_loss, penalty=None,
                             weighted=sample_weight is not None, external=external_kind(X),
                             rank_weight=self._rank_weight)
        self._solver = self._choose(self.solver).name
        if self.positives_per_batch >= self.batch_size:
            raise ValueError(
                f"positives_per_batch={self.positives_per_batch} must be smaller than "
                f"batch_size={self.batch_size}: every SOAP batch needs negatives too."
            )

    def _solve(self, X, y, coef_init, intercept_init, sample_weight=None):
        from ..backends.threads import blas_threads

        if self._rank_weight < 1.0:
            objective = AveragePrecisionObjective(X, y, self._pair_loss, 0.0, sample_weight)
            with blas_threads(X):
                result = fit_anchored(objective, X, y, self, self._rank_weight, coef_init, intercept_init,
                                      sample_weight)
            result.info["solver"] = self._solver
            return platt_calibrate(result, X, y, sample_weight)
        alpha = resolve_alpha(self.alpha, y, sample_weight)
        objective = AveragePrecisionObjective(X, y, self._pair_loss, alpha, sample_weight)
        if coef_init is None:
            theta0 = objective.start()
        else:
            theta0 = np.append(coef_init, intercept_init)
        # "auto" on this problem: a costly pass of a non-quadratic surrogate moves it to SOAP
        costly = (not objective.loss.is_quadratic
                  and np.sum(objective.y > 0) * objective.y.shape[0] > _AUTO_MAX_LOGISTIC_PAIRS)
        entry = self._choose(self.solver, costly=costly)
        self._solver = entry.name  # the solver of this problem, which the verbose line names
        with blas_threads(X):
            result = entry.run(objective, coef_init=theta0, tol=self.tol, verbose=self.verbose,
                               max_iter=self.max_iter,
                               stochastic=dict(batch_size=self.batch_size,
                                               positives_per_batch=self.positives_per_batch, gamma=self.gamma,
                                               optimizer=self.optimizer, learning_rate=self.learning_rate,
                                               random_state=self.random_state))
        theta = result.coef
        result.coef, result.info["score_intercept"] = theta[:-1], float(theta[-1])
        result.info["solver"] = entry.name
        return platt_calibrate(result, X, y, sample_weight)

    _STREAMING_SOLVERS = streaming_solvers(_SOLVERS)
    # the optimizer's moments are the stream's state
    _STREAM_FIXED = ("solver", "optimizer")

    def _new_stream(self, n_features, coef_init=None, intercept_init=None):
        from ..solvers.stochastic.soap import SOAPStream

        theta0 = None if coef_init is None else np.append(coef_init, intercept_init)
        alpha = STREAM_ALPHA if self.alpha is None else self.alpha
        return SOAPStream(self._pair_loss, alpha, batch_size=self.batch_size,
                          positives_per_batch=self.positives_per_batch, gamma=self.gamma,
                          optimizer=self.optimizer, learning_rate=self.learning_rate,
                          random_state=self.random_state, coef_init=theta0, n_features=n_features)

    def _update_stream(self, stream):
        alpha = STREAM_ALPHA if self.alpha is None else self.alpha
        stream.update(self._pair_loss, alpha, batch_size=self.batch_size,
                      positives_per_batch=self.positives_per_batch, gamma=self.gamma,
                      learning_rate=self.learning_rate)

    def _after_partial_fit(self, X, y, sample_weight):
        self.score_intercept_ = np.array([stream.intercept for stream in self._streams])
        super()._after_partial_fit(X, y, sample_weight)
