"""Linear models for any rank-based risk, fitted by ADMM with a PAVA z-step."""

from numbers import Integral, Real

from sklearn.utils._param_validation import Interval, StrOptions

from ..losses import loss_names
from ..solvers.registry import RANK_ADMM, renamed_for, solvers_for
from ._base import RegisteredSolverModel
from ._params import keyword_init, options_doc
from ._tasks import RankLinearClassifierMixin, RankLinearRegressorMixin
from .spectral_risk import CONSTANT_OPTIMUM_ADVICE

#: The losses of the estimators: every loss of :mod:`skrank.losses` of their task.
_CLASSIFICATION_LOSSES = loss_names("classification")
_REGRESSION_LOSSES = loss_names("regression")
_CLASSIFICATION_LOSSES_DOC = options_doc(_CLASSIFICATION_LOSSES)
_REGRESSION_LOSSES_DOC = options_doc(_REGRESSION_LOSSES)
#: The solvers of the estimators: their rows of the table of :mod:`skrank.solvers.registry`.
_SOLVERS = solvers_for(RANK_ADMM)
#: Most outer iterations of solver="agd": iteration k runs 20 (k+1)^2 inner steps, so the
#: work grows like max_iter^3 and the default max_iter=1000 (sized for the ADMM) never ends.
_AGD_MAX_OUTER = 50


class _RankADMMModel(RegisteredSolverModel):
    """Parameters, checks and solver dispatch shared by the two estimators."""

    _solvers = _SOLVERS

    _parameter_constraints = {
        **RegisteredSolverModel._parameter_constraints,
        "penalty": [StrOptions({"l2", "l1", "elasticnet"}), None],
        "alpha": [Interval(Real, 0, None, closed="left")],
        "l1_ratio": [Interval(Real, 0, 1, closed="both")],
        "fit_intercept": ["boolean"],
        "solver": [StrOptions({"auto", *_SOLVERS, *renamed_for(_SOLVERS)}, deprecated=renamed_for(_SOLVERS))],
        "max_iter": [Interval(Integral, 1, None, closed="left")],
        "tol": [Interval(Real, 0, None, closed="left")],
        "rho": [StrOptions({"paper", "table6", "adaptive"}), Interval(Real, 0, None, closed="neither")],
        "zstep_method": [StrOptions({"stack", "sweep"})],
        "l1_solver": [StrOptions({"cd", "fista", "smoothed"})],
        "warm_start": ["boolean"],
        "random_state": ["random_state"],
        "verbose": ["verbose"],
    }

    def _check_before_solve(self, X, sample_weight=None):
        risk = self._get_risk()
        n = X.shape[0]
        # Validate the risk's parameters for this sample count, and for the weights: an integer
        # count of TopK or RankedRange is in units of weight (clear ValueError naming sample_weight).
        risk.check(n, sample_weight)
        self._choose_solver(risk, X, sample_weight)

    def _solver_options(self):
        """Each solver's keyword arguments beyond the shared ones."""
        zstep = dict(zstep_method=self.zstep_method, l1_solver=self.l1_solver)
        seeded = dict(random_state=self.random_state)
        return {
            "admm": dict(rho=self.rho, **zstep),
            "dca": zstep,
            "agd": dict(seeded, max_iter=min(self.max_iter, _AGD_MAX_OUTER)),
            "sgd": seeded,
            "lsvrg": seeded,
            "lsvrg-nu": seeded,
        }


#: The parameters the two estimators share, after their risk and loss ones, with their defaults.
_SHARED_DEFAULTS = dict(penalty="l2", alpha=1e-2, l1_ratio=0.5, fit_intercept=True, solver="auto",
                        max_iter=1000, tol=1e-7, rho="paper", zstep_method="stack", l1_solver="cd",
                        warm_start=False, random_state=None, verbose=0)

_PARAMS_DOC = """
    penalty : {"l2", "l1", "elasticnet"} or None, default="l2"
        Penalty ``alpha R(w)`` on the coefficients (never on the intercept):
        ``R = ||w||^2 / 2`` (l2), ``||w||_1`` (l1), or
        ``l1_ratio ||w||_1 + (1 - l1_ratio) ||w||^2 / 2`` (elastic net, as in
        scikit-learn).  The paper's l1 term ``mu/2 ||w||_1`` is ``mu = 2 alpha``.
    alpha : float, default=1e-2
        Penalty strength, ``alpha >= 0``.
    l1_ratio : float, default=0.5
        Elastic-net mixing parameter in [0, 1].
    fit_intercept : bool, default=True
        Fit an unpenalised intercept (the paper appends a penalised column
        of ones instead).
    solver : {""" + options_doc(_SOLVERS, first=("auto",)) + """}, default="auto"
        ``"auto"`` picks ``"newton"`` (a certified proximal Newton method)
        for a convex spectral risk with a smooth loss (Huber: with an l2
        part in the penalty), ``"ipm"`` (a certified interior-point method)
        for ERM, a superquantile or a top-k average with the hinge or
        absolute loss, and ``"admm"`` (Algorithm 1 of Xiao et al. 2023, with
        restarts and trimming steps for the non-convex risks) otherwise.
        The paper's baselines: ``"sgd"``, ``"lsvrg"``, ``"lsvrg-nu"``, and for
        ranked-range risks ``"dca"`` (Hu et al. 2020) and ``"agd"`` (Yao, Lin
        and Yang 2022).  Each solver is described in the user guide.
    max_iter : int, default=1000
        Maximum number of iterations of the solver: ADMM iterations (all
        runs together for the non-convex risks), Newton steps, epochs of the
        stochastic baselines (table of :doc:`conventions`).  ``"agd"``, whose
        work grows like ``max_iter^3``, takes at most 50.
    tol : float, default=1e-7
        Tolerance of the solver's stopping criterion: the scaled KKT residual
        of the ADMM, the certified relative gap ``(F - F*) / |F|`` of
        ``"newton"`` and ``"ipm"``; for the others, the table of
        :doc:`conventions`.
    rho : {"paper", "table6", "adaptive"} or float, default="paper"
        Penalty schedule of the ADMM: ``"paper"`` follows the paper's ramp
        from a safer start and then balances the residuals, ``"table6"`` is
        the paper's Table 6 as written, ``"adaptive"`` balances the
        residuals from the start (recommended for ranked ranges), a float is
        a constant penalty.  Details: user guide.
    zstep_method : {"stack", "sweep"}, default="stack"
        PAVA variant of the z-step: a stack, or the paper's run-merging
        sweep.
    l1_solver : {"cd", "fista", "smoothed"}, default="cd"
        w-step solver when the penalty has an l1 part: coordinate descent on
        the Gram matrix, FISTA (the paper's choice), or the smoothed ADMM
        (sADMM) of the paper's Section 4.
    warm_start : bool, default=False
        Start from the previous solution when refitting.
    random_state : int, RandomState instance or None, default=None
        Seed of the stochastic solvers ("sgd", "lsvrg", "lsvrg-nu", "agd";
        the ADMM and DCA are deterministic).
    verbose : int, default=0
        Print progress when positive.
"""

_ATTRS_DOC = """
    coef_ : ndarray
        Coefficients.
    intercept_ : float or ndarray
        Intercept(s).
    n_iter_ : int or ndarray
        Iterations run.
    objective_ : float or ndarray
        Final value of the objective ``F(w, b)``.
    objective_history_ : ndarray or list of ndarray
        ``F`` after each iteration (epoch for the stochastic solvers).
    n_features_in_ : int
        Number of features seen during fit.
    feature_names_in_ : ndarray of str
        Feature names, when ``X`` has string column names.
"""


class RankADMMClassifier(RankLinearClassifierMixin, _RankADMMModel):
    __doc__ = (
        """Linear classifier that minimises a rank-based risk of the margin losses.

    Minimises ``sum_i sigma_i l_(i) + alpha R(w)``, a weighted sum of the
    sorted losses of the margins, ``l_i = loss(-y_i (x_i . w + b))`` with
    ``y_i`` in {-1, +1}, with the weights ``sigma`` of any risk of
    :mod:`skrank.risks`, convex or not (a superquantile to fit the hardest
    samples, a ranked range to ignore outliers).  Fitted by the ADMM of
    Xiao, Ge, Jiang and Yan (2023), "A Unified Framework for Rank-based Loss
    Minimization", or by a certified Newton or interior-point method where
    the problem allows.  More than two classes are fitted one-vs-rest.

    Read more in the user guide: :doc:`rank_admm`.

    Parameters
    ----------
    risk : str or skrank.risks risk object, default="erm"
        The rank weights, e.g. ``Superquantile(q=0.8)``; a name means that
        risk with its defaults.  A tail risk at a high level may have the
        constant classifier (``coef_ = 0``) as its optimum where the
        classes overlap: the fit then warns with a
        :class:`skrank.exceptions.ConstantOptimumWarning`.
    loss : {"""
        + _CLASSIFICATION_LOSSES_DOC
        + """}, default="logistic"
        Loss of the negative margin.
    class_weight : dict, "balanced" or None, default=None
        Weights of the classes, multiplying ``sample_weight`` as in
        :class:`sklearn.linear_model.LogisticRegression`: ``"balanced"``
        gives class ``c`` the weight ``n / (n_classes n_c)``.  The risk is
        then that of the weighted sample (:mod:`skrank.risks`).
"""
        + _PARAMS_DOC
        + """
    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
        Class labels."""
        + _ATTRS_DOC
        + """
    Examples
    --------
    >>> from sklearn.datasets import make_classification
    >>> from skrank.estimators import RankADMMClassifier
    >>> from skrank.risks import Superquantile
    >>> X, y = make_classification(random_state=0)
    >>> clf = RankADMMClassifier(risk=Superquantile(q=0.8)).fit(X, y)
    >>> clf.score(X, y) > 0.8
    True
    """
    )

    _parameter_constraints = {
        **_RankADMMModel._parameter_constraints,
        "loss": [StrOptions(set(_CLASSIFICATION_LOSSES))],
        "class_weight": [dict, StrOptions({"balanced"}), None],
    }

    __init__ = keyword_init(risk="erm", loss="logistic", class_weight=None, **_SHARED_DEFAULTS)

    def _constant_optimum_advice(self):
        """What to change when the fit's optimum is the constant classifier (``ConstantOptimumWarning``)."""
        advice = CONSTANT_OPTIMUM_ADVICE.replace("SpectralRiskClassifier's default",
                                                 "as SpectralRiskClassifier's default")
        if self.penalty in ("l1", "elasticnet") and self.alpha > 0:
            advice += f" The penalty={self.penalty!r} sets coefficients to zero: a smaller alpha keeps some."
        return advice


class RankADMMRegressor(RankLinearRegressorMixin, _RankADMMModel):
    __doc__ = (
        """Linear regressor that minimises a rank-based risk of the residual losses.

    Minimises ``sum_i sigma_i l_(i) + alpha R(w)``, a weighted sum of the
    sorted losses of the residuals, ``l_i = loss(x_i . w + b - y_i)``, with
    the weights ``sigma`` of any risk of :mod:`skrank.risks`, convex or not
    (a superquantile to fit the largest errors, a ranked range to ignore
    outliers).  Fitted by the ADMM of Xiao, Ge, Jiang and Yan (2023), "A
    Unified Framework for Rank-based Loss Minimization", whose z-step is
    adapted to losses even in the residual, or by a certified Newton or
    interior-point method where the problem allows.

    Read more in the user guide: :doc:`rank_admm`.

    Parameters
    ----------
    risk : str or skrank.risks risk object, default="erm"
        The rank weights.
    loss : {"""
        + _REGRESSION_LOSSES_DOC
        + """}, default="squared"
        A loss of the residual ``r`` (:func:`skrank.losses.get_loss`):
        ``r^2 / 2``, ``|r|`` or Huber's loss with threshold ``epsilon``.
    epsilon : float, default=1.0
        Huber's threshold.
"""
        + _PARAMS_DOC
        + """
    Attributes
    ----------"""
        + _ATTRS_DOC
        + """
    Examples
    --------
    >>> from sklearn.datasets import make_regression
    >>> from skrank.estimators import RankADMMRegressor
    >>> X, y = make_regression(n_features=5, noise=1.0, random_state=0)
    >>> reg = RankADMMRegressor(risk="superquantile", alpha=1e-3).fit(X, y)
    >>> reg.score(X, y) > 0.9
    True
    """
    )

    _parameter_constraints = {
        **_RankADMMModel._parameter_constraints,
        "loss": [StrOptions(set(_REGRESSION_LOSSES))],
        "epsilon": [Interval(Real, 0, None, closed="neither")],
    }

    __init__ = keyword_init(risk="erm", loss="squared", epsilon=1.0, **_SHARED_DEFAULTS)
