"""Linear classifier that maximises a surrogate of average precision (Qi et al. 2021)."""

from numbers import Integral, Real

import numpy as np
from sklearn.utils._param_validation import Interval, StrOptions

from ..datafits.average_precision import AveragePrecisionObjective
from ..pairwise_losses import AVERAGE_PRECISION_LOSSES, get_pairwise_loss
from ..solvers.registry import solvers_for
from ..solvers.stochastic.soap_kernel import OPTIMIZERS
from ._anchored import STREAM_ALPHA, RankingFit
from ._base import RankLinearModel
from ._params import keyword_init, options_doc
from ._platt import FIT_ATTRIBUTES_DOC, PLATT_ATTRIBUTES_DOC, PlattRankingMixin
from ._tasks import RankLinearClassifierMixin
from .partial_auc import _AUTO_MAX_LOGISTIC_PAIRS

#: The solvers of the estimator: its rows of the table of :mod:`skrank.solvers.registry`.
_SOLVERS = solvers_for("AveragePrecisionClassifier")


class AveragePrecisionClassifier(RankingFit, PlattRankingMixin, RankLinearClassifierMixin, RankLinearModel):
    __doc__ = ("""Linear classifier that maximises a surrogate of average precision (AUPRC).

    Fits a linear scorer whose precision-recall curve is as high as
    possible, for models judged by the precision of their top-ranked cases
    (fraud, screening).  The default minimises an even mix of the logistic
    loss and the surrogate average precision of Qi, Luo, Xu, Ji and Yang
    (2021), "Stochastic Optimization of Areas Under Precision-Recall Curves
    with Provable Convergence", on sigmoid scores, started from logistic
    regression; ``rank_weight=1`` fits the paper's objective alone.

    Read more in the user guide: :doc:`average_precision`.

    Parameters
    ----------
    loss : {"squared_hinge", "logistic", "sigmoid"}, default="squared_hinge"
        The surrogate of the precision's indicator: the squared hinge, the
        paper's main choice and the fastest (``O(n log n)`` per pass), or
        the logistic and sigmoid losses of its ablation (``O(N+ n)``).
    class_weight : dict, "balanced" or None, default=None
        Weights of the classes, multiplying ``sample_weight`` as in
        :class:`sklearn.linear_model.LogisticRegression`; the objective is
        then the surrogate of the weighted average precision.
    margin : float, default=0.5
        Margin of the squared hinge, on the scale of the sigmoid scores
        (their differences lie in (-1, 1)); positive for the squared hinge,
        ignored by the other losses but finite.  ``margin >= 1`` makes the
        hinge a plain square; 0.5 won the ablation of the user guide.
    gamma : float, default=0.9
        SOAP's moving-average weight of the newest mini-batch estimate,
        ``u <- (1 - gamma) u + gamma g`` (the paper's convention), in (0, 1].
    rank_weight : float or None, default=None
        Weight in ``[0, 1]`` of the surrogate against the logistic loss: 0 is
        logistic regression, 1 the paper's objective alone (which SOAP
        needs).  Values below 1 are fitted by ``"lbfgs"`` only.  None means
        0.5, the best on the benchmark tables, for ``"auto"`` and
        ``"lbfgs"``, and 1 for SOAP.
    alpha : float or None, default=None
        Strength of the l2 penalty ``alpha ||w||^2 / 2``.  None means
        ``1 / n_samples`` (one over the total sample weight), the penalty
        of ``LogisticRegression(C=1)``; ``partial_fit`` then uses 1e-4.
    solver : {""" + options_doc(_SOLVERS, first=("auto",)) + """}, default="auto"
        ``"lbfgs"``: L-BFGS on the exact objective, deterministic; on data
        that fit in memory it is faster and more accurate than SOAP.
        ``"soap"``: the paper's stochastic method, for data too large for
        full passes, and the one solver with ``partial_fit``.  ``"auto"``
        is ``"lbfgs"``, except for the logistic and sigmoid losses when one
        pass would cost more than 5e7 pair terms, where it is ``"soap"``.
        Both take sample weights; only ``"lbfgs"`` takes Dask arrays.
    optimizer : {"sgd", "momentum", "adam"}, default="adam"
        SOAP's update: plain SGD, momentum, or the paper's Adam-style step.
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
        Tolerance of the stopping criterion: for L-BFGS a bound on the
        gradient that depends neither on the scale of ``X`` nor on that of
        the weights; for SOAP the relative improvement of the best objective
        over 5 epochs (user guide).
    random_state : int, RandomState instance or None, default=None
        Seed of SOAP's sampler.
    warm_start : bool, default=False
        Start from the previous ``ranking_coef_`` when refitting.
    verbose : int, default=0
        Print the objective after each iteration (L-BFGS) or epoch (SOAP).
""" + PLATT_ATTRIBUTES_DOC + """
    score_intercept_ : ndarray of shape (n_problems,)
        The ``b`` of the objective's scores ``sigmoid(X w + b)``.""" + FIT_ATTRIBUTES_DOC + """
    Notes
    -----
    The objective is not convex: every solver returns a stationary point.
    ``objective_`` is the exact full-data objective at the returned
    ``(ranking_coef_, score_intercept_)`` whatever the solver, so fits
    compare.

    The ranking is ``X ranking_coef_``; ``score_intercept_`` only places
    the scores on the sigmoid.  A Platt fit of the labels on those scores
    gives ``coef_`` and ``intercept_`` (see Attributes).  ``score`` is
    accuracy, as for every scikit-learn classifier; tune with
    ``scoring="average_precision"``.

    With ``solver="soap"``, ``partial_fit`` runs one SOAP epoch on each
    batch and carries the solver's state from call to call; the Platt map is
    refitted on the latest batch.  See the user guide.

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

    _multilabel = True

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

    def _check_before_solve(self, X, sample_weight=None):
        self._pair_loss = get_pairwise_loss(self.loss, self.margin)
        default = 1.0 if self._paper_solver() else 0.5
        self._rank_weight = self.rank_weight if self.rank_weight is not None else default
        self._set_problem(X, sample_weight, risk=None, loss=self._pair_loss, penalty=None,
                          rank_weight=self._rank_weight)
        if self.positives_per_batch >= self.batch_size:
            raise ValueError(
                f"positives_per_batch={self.positives_per_batch} must be smaller than "
                f"batch_size={self.batch_size}: every SOAP batch needs negatives too."
            )

    def _anchored(self):
        return self._rank_weight < 1.0

    def _worker_rank_term(self):
        from ..datafits import worker_ranking

        return worker_ranking.AveragePrecisionTerm(self._pair_loss)

    def _rank_datafit(self, X, y, sample_weight, alpha):
        return AveragePrecisionObjective(X, y, self._pair_loss, alpha, sample_weight)

    def _stochastic_options(self):
        return dict(batch_size=self.batch_size, positives_per_batch=self.positives_per_batch,
                    gamma=self.gamma, optimizer=self.optimizer, learning_rate=self.learning_rate,
                    random_state=self.random_state)

    @staticmethod
    def _paper_start(info, objective, coef_init, intercept_init):
        return objective.start() if coef_init is None else np.append(coef_init, intercept_init)

    @staticmethod
    def _costly(objective):
        """Whether one pass of a non-quadratic loss costs more than ``_AUTO_MAX_LOGISTIC_PAIRS`` terms."""
        return (not objective.loss.is_quadratic
                and np.sum(objective.y > 0) * objective.y.shape[0] > _AUTO_MAX_LOGISTIC_PAIRS)

    # the optimizer's moments are the stream's state
    _STREAM_FIXED = ("solver", "optimizer")

    def _new_stream(self, n_features, coef_init=None, intercept_init=None):
        from ..solvers.stochastic.soap import SOAPStream

        theta0 = None if coef_init is None else np.append(coef_init, intercept_init)
        return SOAPStream(optimizer=self.optimizer, random_state=self.random_state, coef_init=theta0,
                          n_features=n_features, **self._stream_settings())

    def _stream_settings(self):
        """The settings of the stream that each ``partial_fit`` call reads from the parameters."""
        return dict(loss=self._pair_loss, alpha=STREAM_ALPHA if self.alpha is None else self.alpha,
                    batch_size=self.batch_size, positives_per_batch=self.positives_per_batch,
                    gamma=self.gamma, learning_rate=self.learning_rate)

    def _after_partial_fit(self, X, y, sample_weight):
        self.score_intercept_ = np.array([stream.intercept for stream in self._streams])
        super()._after_partial_fit(X, y, sample_weight)
