"""Linear models that minimise a spectral risk: SOREL and its baselines."""

from numbers import Integral, Real

import numpy as np
from sklearn.utils._param_validation import Interval, StrOptions

from ..losses import loss_names
from ..solvers.registry import SPECTRAL_RISK, solvers_for
from ._base import RegisteredSolverModel
from ._params import keyword_init, options_doc
from ._tasks import RankLinearClassifierMixin, RankLinearRegressorMixin

#: The losses of the estimators: the smooth ones of :mod:`skrank.losses` (SOREL and Newton need them).
_CLASSIFICATION_LOSSES = loss_names("classification", smooth=True)
_REGRESSION_LOSSES = loss_names("regression", smooth=True)
_CLASSIFICATION_LOSSES_DOC = options_doc(_CLASSIFICATION_LOSSES)
_REGRESSION_LOSSES_DOC = options_doc(_REGRESSION_LOSSES)

#: The solvers of the estimators: their rows of the table of :mod:`skrank.solvers.registry`.
_SOLVERS = solvers_for(SPECTRAL_RISK)


class _SpectralRiskModel(RegisteredSolverModel):
    """Shared parameters, checks and solver dispatch of the two estimators."""

    _solvers = _SOLVERS

    _parameter_constraints = {
        **RegisteredSolverModel._parameter_constraints,
        "alpha": [Interval(Real, None, None, closed="neither")],
        "fit_intercept": ["boolean"],
        "solver": [StrOptions({"auto", *_SOLVERS})],
        "max_iter": [Interval(Integral, 1, None, closed="left")],
        "tol": [Interval(Real, 0, None, closed="left")],
        "batch_size": [Interval(Integral, 1, None, closed="left"), None],
        "learning_rate": [StrOptions({"auto"}), Interval(Real, 0, None, closed="neither")],
        "random_state": ["random_state"],
        "warm_start": ["boolean"],
        "verbose": ["verbose"],
    }

    def _check_before_solve(self, X, sample_weight=None):
        risk = self._get_risk()
        self._risk = risk
        if not risk.is_convex:
            raise ValueError(
                f"{type(self).__name__} minimises spectral risks (nondecreasing rank weights); "
                f"{type(risk).__name__} is not one. Use RankADMMClassifier or RankADMMRegressor "
                "(skrank.estimators), which handle ranked-range and human-aligned risks."
            )
        risk.check(X.shape[0], sample_weight)  # the risk's parameters for this n and weights
        if not np.isfinite(self.alpha) or self.alpha < 0:
            raise ValueError(f"alpha must be a nonnegative finite number, got {self.alpha!r}.")
        self._choose_solver(risk, X, sample_weight)

    def _solver_options(self):
        """Each solver's keyword arguments beyond the shared ones."""
        stochastic = dict(learning_rate=self.learning_rate, random_state=self.random_state)
        if self.batch_size is not None:
            stochastic["batch_size"] = self.batch_size
        return {name: stochastic for name in ("sorel", "sgd", "lsvrg", "prospect")}

    def _constant_optimum_advice(self):
        """What to change when the fit's optimum is the constant classifier (``ConstantOptimumWarning``)."""
        return CONSTANT_OPTIMUM_ADVICE


#: The advice of the classifiers' ConstantOptimumWarning.
CONSTANT_OPTIMUM_ADVICE = (
    "To rank and classify, lower the risk's level (e.g. Superquantile(q=0.5)) or use a risk that weighs "
    "every loss: risk='exponential' (ExponentialSpectral(rho=1), SpectralRiskClassifier's default) or "
    "risk='erm' (the mean loss, as LogisticRegression); a smaller alpha also helps."
)


#: The parameters the two estimators share, after their risk and loss ones, with their defaults.
_SHARED_DEFAULTS = dict(alpha=1e-3, fit_intercept=True, solver="auto", max_iter=1000, tol=1e-7,
                        batch_size=None, learning_rate="auto", random_state=None, warm_start=False, verbose=0)

_COMMON_PARAMS_DOC = """
    alpha : float, default=1e-3
        Strength of the penalty ``alpha ||w||^2 / 2`` (the intercept is not
        penalised).  SOREL needs ``alpha > 0``.
    fit_intercept : bool, default=True
        Fit an unpenalised intercept.
    solver : {""" + options_doc(_SOLVERS, first=("auto",)) + """}, default="auto"
        ``"auto"`` is ``"newton"`` (``"admm"`` for the Huber loss with
        ``alpha=0``): a full-batch proximal Newton method that stops once it
        has certified that ``F`` is within ``tol |F|`` of the optimum.
        ``"sorel"``: the stochastic primal-dual method of Ge and Jiang
        (2024), which converges to the exact minimiser.  Its baselines
        ``"sgd"``, ``"lsvrg"`` and ``"prospect"`` may stall above the
        optimum.  ``"admm"`` delegates to the RankADMM solver.  Each solver
        is described in the user guide.
    max_iter : int, default=1000
        Maximum number of iterations: Newton steps for ``"newton"``, outer
        iterations (about a pass) for SOREL, epochs for the baselines, ADMM
        iterations for ``"admm"``.
    tol : float, default=1e-7
        Tolerance of the solver's stopping criterion: for ``"newton"`` the
        certified relative gap ``(F - F*) / |F|``; for the others, the table
        of :doc:`conventions`.  It bounds ``F``, not the coefficients.
    batch_size : int or None, default=None
        Samples per stochastic step; ``None`` is the solver's default (64
        for ``"sgd"``, whose batch weights need a batch, 1 otherwise).
    learning_rate : "auto" or float, default="auto"
        Step size of the stochastic solvers; "auto" derives it from the data
        (user guide).
    random_state : int, RandomState instance or None, default=None
        Seed of the sampling.
    warm_start : bool, default=False
        Start from the previous solution when refitting.
    verbose : int, default=0
        Print progress when positive.
"""

#: The Attributes of the data seen by ``fit`` (the end of the section).
_FEATURES_DOC = """
    n_features_in_ : int
    feature_names_in_ : ndarray of shape (n_features_in_,)
        Defined when ``X`` has string feature names.
"""


class SpectralRiskRegressor(RankLinearRegressorMixin, _SpectralRiskModel):
    __doc__ = (
        """Linear regression that minimises a spectral risk of the residual losses.

    Minimises ``sum_i sigma_i l_(i) + alpha ||w||^2 / 2``, a weighted sum
    of the sorted losses ``l_(1) <= ... <= l_(n)`` of the residuals whose
    weights ``sigma`` increase: between the mean loss (ERM) and the largest,
    for a fit judged by its largest errors (the superquantile, or CVaR,
    averages the losses above a quantile).  The default solver is a
    certified full-batch Newton method; ``solver="sorel"`` is the stochastic
    method of Ge and Jiang (2024), "SOREL: A Stochastic Algorithm for
    Spectral Risks Minimization".

    Read more in the user guide: :doc:`spectral_risk`.

    Parameters
    ----------
    risk : str or risk object, default="superquantile"
        A spectral risk: ``ERM``, ``Superquantile`` (CVaR), ``Extremile``,
        ``ExponentialSpectral``, ``TopK`` from :mod:`skrank.risks`, or its
        name (the defaults).  Non-spectral risks raise an error that points
        to ``RankADMMRegressor``.
    loss : {""" + _REGRESSION_LOSSES_DOC + """}, default="squared"
        A smooth loss of the residual (:func:`skrank.losses.get_loss`);
        ``squared`` is ``r^2 / 2``, ``huber`` uses ``epsilon``.
    epsilon : float, default=1.0
        Huber's threshold.
    """ + _COMMON_PARAMS_DOC + """
    Attributes
    ----------
    coef_ : ndarray of shape (n_features,)
    intercept_ : float
    n_iter_ : int
        Newton steps (``"newton"``) or epochs run.
    objective_ : float
        Final value of ``F``.
    objective_history_ : ndarray
        ``F`` at the start and after every epoch (``"newton"``: after every
        outer iteration).""" + _FEATURES_DOC + """
    Examples
    --------
    >>> import numpy as np
    >>> from skrank.estimators.spectral_risk import SpectralRiskRegressor
    >>> from skrank.risks import Superquantile
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(100, 3)); y = X @ [1.0, -2.0, 0.5] + rng.normal(size=100)
    >>> reg = SpectralRiskRegressor(risk=Superquantile(q=0.7), alpha=0.01).fit(X, y)
    >>> reg.coef_.shape
    (3,)
    """
    )

    _parameter_constraints = {
        **_SpectralRiskModel._parameter_constraints,
        "loss": [StrOptions(set(_REGRESSION_LOSSES))],
        "epsilon": [Interval(Real, 0, None, closed="neither")],
    }

    __init__ = keyword_init(risk="superquantile", loss="squared", epsilon=1.0, **_SHARED_DEFAULTS)

    def _constant_optimum_advice(self):
        return None


class SpectralRiskClassifier(RankLinearClassifierMixin, _SpectralRiskModel):
    __doc__ = (
        """Linear classifier that minimises a spectral risk of the margin losses.

    Minimises ``sum_i sigma_i l_(i) + alpha ||w||^2 / 2``, a weighted sum
    of the sorted losses of the margins, ``l_i = loss(-y_i (x_i . w + b))``
    with ``y_i`` in {-1, +1}, whose weights ``sigma`` increase: the worst
    classified samples count more than in the mean loss.  A fit whose
    optimum is the constant classifier warns
    (:class:`skrank.exceptions.ConstantOptimumWarning`).  The default
    solver is a certified full-batch Newton method; ``solver="sorel"`` is
    the stochastic method of Ge and Jiang (2024), "SOREL: A Stochastic
    Algorithm for Spectral Risks Minimization".  More than two classes are
    fitted one-vs-rest.

    Read more in the user guide: :doc:`spectral_risk`.

    Parameters
    ----------
    risk : str or risk object, default="exponential"
        A spectral risk (see :class:`SpectralRiskRegressor`); non-spectral
        risks raise an error that points to ``RankADMMClassifier``.  The
        default, ``ExponentialSpectral(rho=1)``, weighs every loss, the
        largest 2.7 times as much as the smallest: on the imbalanced suite
        its held-out AUC and accuracy tie with logistic regression's and
        the mean of its worst 20% held-out losses is 11% lower.  A tail
        risk at a high level, such as ``Superquantile(q=0.8)``, has the
        constant classifier (``coef_ = 0``) as its exact optimum wherever
        the classes overlap (16 of the suite's 36 tables): the fit then
        warns with a :class:`skrank.exceptions.ConstantOptimumWarning`.
        Raise ``rho`` for more weight on the tail (user guide).
    loss : {""" + _CLASSIFICATION_LOSSES_DOC + """}, default="logistic"
        Smooth margin losses (SOREL needs Lipschitz gradients);
        ``predict_proba`` is available for ``logistic``.
    class_weight : dict, "balanced" or None, default=None
        Weights of the classes, multiplying ``sample_weight`` as in
        :class:`sklearn.linear_model.LogisticRegression`: ``"balanced"``
        gives class ``c`` the weight ``n / (n_classes n_c)``.  The risk is
        then that of the weighted sample (:mod:`skrank.risks`).
    """ + _COMMON_PARAMS_DOC + """
    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
    coef_ : ndarray of shape (1, n_features) or (n_classes, n_features)
    intercept_ : ndarray of shape (1,) or (n_classes,)
    n_iter_ : int or ndarray
        Newton steps or epochs run (per one-vs-rest problem).
    objective_ : float or ndarray
        Final value of ``F`` (per problem).
    objective_history_ : ndarray or list of ndarray""" + _FEATURES_DOC + """
    Examples
    --------
    >>> import numpy as np
    >>> from skrank.estimators.spectral_risk import SpectralRiskClassifier
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(100, 3)); y = (X[:, 0] + 0.5 * rng.normal(size=100) > 0).astype(int)
    >>> clf = SpectralRiskClassifier(risk="extremile", alpha=0.01).fit(X, y)
    >>> clf.predict_proba(X[:2]).shape
    (2, 2)
    """
    )

    _parameter_constraints = {
        **_SpectralRiskModel._parameter_constraints,
        "loss": [StrOptions(set(_CLASSIFICATION_LOSSES))],
        "class_weight": [dict, StrOptions({"balanced"}), None],
    }

    __init__ = keyword_init(risk="exponential", loss="logistic", class_weight=None, **_SHARED_DEFAULTS)


__all__ = ["SpectralRiskRegressor", "SpectralRiskClassifier"]
