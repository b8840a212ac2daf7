"""The base of every skrank estimator: the fit template composed, and the models of the solver table."""

from sklearn.base import BaseEstimator
from sklearn.utils._param_validation import StrOptions

from ..backends import arrays
from ..backends.dask_design import is_dask_array
from ..backends.dispatch import external_kind
from ..datafits.rank_risk import RankRisk
from ..losses import get_loss
from ..penalties import get_penalty
from ..risks import _RISKS, BaseRisk, check_risk
from ..solvers.registry import auto_preference, choose_solver, streaming_solvers
from ._fit_template import FitTemplate
from ._input_checks import InputChecks
from ._streams import Streams


class RankLinearModel(FitTemplate, Streams, InputChecks, BaseEstimator):
    """Base of all linear rank-risk estimators (not public): the fit template, composed.

    ``fit`` (:class:`FitTemplate`), ``partial_fit`` (:class:`Streams`) and
    their input checks (:class:`InputChecks`) are written once; the
    classifier and regressor mixins (:mod:`._tasks`) supply the checks of
    the targets, their classes and the shape of the coefficients.  An
    estimator declares its solvers (``_solvers``, from which ``_AUTO`` and
    ``_STREAMING_SOLVERS`` follow), its ``_parameter_constraints``, and implements
    ``_check_before_solve`` and ``_datafit(X, y, sample_weight)``, the
    solver's ``(datafit, penalty)``, which ``_solve`` hands to the chosen
    row of the solver table (``doc/architecture.rst``).
    """

    def _get_risk(self):
        return check_risk(self.risk)

    def _get_loss(self):
        loss = get_loss(self.loss, epsilon=getattr(self, "epsilon", 1.0))
        if loss.task != self._task:
            kind = "classifier" if self._task == "classification" else "regressor"
            raise ValueError(f"loss={self.loss!r} is a {loss.task} loss and cannot be used by a {kind}.")
        return loss

    def _get_penalty(self):
        return get_penalty(getattr(self, "penalty", "l2"), self.alpha, getattr(self, "l1_ratio", 0.5))

    def _check_before_solve(self, X, sample_weight=None):
        """Hook: resolve and check the risk, loss and solver before fitting."""

    #: The estimator's solvers by name: its rows of the table of :mod:`skrank.solvers.registry`.
    _solvers = {}

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        # the order in which solver="auto" tries the solvers, and those with partial_fit
        cls._AUTO, cls._STREAMING_SOLVERS = auto_preference(cls._solvers), streaming_solvers(cls._solvers)

    def _set_problem(self, X, sample_weight, **problem):
        """``self._problem`` (the keywords of ``choose_solver``) and its row of the table (or an error)."""
        self._problem = dict(weighted=sample_weight is not None, external=external_kind(X), **problem)
        self._solver_row = self._choose(self.solver)
        self._solver = self._solver_row.name

    def _choose(self, requested, costly=False):
        """The row of the solver to run for the problem ``self._problem`` (its keywords of ``choose_solver``).

        ``requested`` is a solver's name or ``"auto"``; ``costly``: one
        exact pass of the objective would be too costly
        (:func:`skrank.solvers.registry.choose_solver`).
        """
        return choose_solver(requested, self._AUTO, solvers=self._solvers, costly=costly, **self._problem)

    def _takes_external(self):
        """Whether the configured solver fits an external ``X`` (Dask, array API).

        ``"auto"`` does, and so do the full-batch solvers of the estimator's
        rows of the solver table.
        """
        entry = self._solvers.get(self.solver)
        return self.solver == "auto" or (entry is not None and entry.external)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        tags.array_api_support = self._takes_external()
        return tags


class RegisteredSolverModel(RankLinearModel):
    """A rank-risk model whose solvers come from the table of :mod:`skrank.solvers.registry`.

    Subclasses declare their solvers (``_solvers``) and define ``_solver_options`` (each solver's
    keyword arguments beyond the shared ones).
    """

    _parameter_constraints = {
        "risk": [StrOptions(set(_RISKS)), BaseRisk],  # the names skrank.risks.check_risk accepts
    }
    # the stream's intercept is fitted or not from its first step
    _STREAM_FIXED = ("solver", "fit_intercept")
    _keeps_dask_targets = True

    def _new_stream(self, n_features, coef_init=None, intercept_init=None):
        from ..solvers.stochastic.sgd import SGDStream

        return SGDStream(self._risk, self._loss_obj, self._penalty_obj, fit_intercept=self.fit_intercept,
                         random_state=self._solver_options().get("sgd", {}).get("random_state"),
                         coef_init=coef_init, intercept_init=intercept_init, n_features=n_features,
                         **self._stream_steps())

    def _update_stream(self, stream):
        stream.update(self._risk, self._loss_obj, self._penalty_obj, **self._stream_steps())

    def _stream_steps(self):
        """The SGD stream's ``batch_size`` and ``learning_rate``: the estimator's, else the defaults."""
        steps = self._solver_options().get("sgd", {})
        return dict(batch_size=steps.get("batch_size", 64), learning_rate=steps.get("learning_rate", "auto"))

    def _choose_solver(self, risk, X, sample_weight=None):
        """Resolve the loss, the penalty and the solver for ``risk`` (a clear error if it does not fit).

        Only some solvers take sample weights, and only the full-batch ones
        an ``X`` that is not in memory (a Dask or array-API array,
        :func:`skrank.backends.dispatch.external_kind`).
        """
        self._risk = risk
        self._loss_obj = self._get_loss()
        self._penalty_obj = self._get_penalty()
        self._set_problem(X, sample_weight, risk=risk, loss=self._loss_obj, penalty=self._penalty_obj)

    def _datafit(self, X, y, sample_weight):
        """The rank risk of the problem (its targets gathered unless the solver keeps them on Dask)."""
        if is_dask_array(y) and not self._solver_row.dask_targets:
            y = arrays.to_host(y)
        return RankRisk(X, y, self._risk, self._loss_obj, fit_intercept=self.fit_intercept,
                        sample_weight=sample_weight), self._penalty_obj
