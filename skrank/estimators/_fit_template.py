"""``fit``, written once: the binary problems of the targets, a solver run per problem, the results."""

import contextlib
import time
import warnings
from typing import Any, NamedTuple

import numpy as np
from sklearn.exceptions import ConvergenceWarning

from ..backends import arrays
from ..backends.array_api_design import to_numpy
from ..backends.dask_design import is_dask_array
from ..backends.dispatch import external_kind
from ..exceptions import ConstantOptimumWarning
from ..solvers.registry import solve
from ._params import fit_doc
from ._repeated_rows import merge_repeated_rows


def _scores_constant(X, coef):
    """Whether ``X @ coef`` is constant: ``coef`` zero, or the scores of an in-memory ``X`` within 1e-6."""
    coef = np.asarray(to_numpy(coef), dtype=np.float64).ravel()
    if not np.any(coef):
        return True
    if np.max(np.abs(coef)) > 1e-6 or external_kind(X) is not None:
        return False
    scores = np.asarray(X @ coef).ravel()
    return bool(np.ptp(scores) <= 1e-6)


def problem_labels(classes):
    """The positive class of each binary problem: one for two classes, one per class beyond (one-vs-rest).

    ``classes`` None (a regression) is one problem, of the targets as given.
    """
    if classes is None:
        return [None]
    return [classes[1]] if classes.shape[0] == 2 else list(classes)


def problem_target(y, positive):
    """The targets of one problem: ``y`` for a regression, else +1 for class ``positive``, -1 for the rest."""
    return y if positive is None else np.where(y == positive, 1.0, -1.0)


class PreparedFit(NamedTuple):
    """The checked data of one ``fit``: what :meth:`FitTemplate._prepare_fit` returns."""

    #: the training data, checked (the samples of zero weight dropped)
    X: Any
    #: each binary problem's targets (:func:`problem_target`)
    problems: list
    #: the checked weights, or None for equal weights
    sample_weight: Any
    #: the classes of a classifier, None for a regression
    classes: Any


class FitTemplate:
    """``fit`` and what it calls: the problems, their starts, the solver runs, the fitted attributes."""

    # --- the hooks of the classifier and the regressor ----------------------------------
    def _check_targets(self, y, classes=None):  # pragma: no cover - abstract
        """Hook: ``y`` checked and converted; with ``classes`` (a stream's), also checked against them."""
        raise NotImplementedError

    def _fit_classes(self, y, sample_weight):  # pragma: no cover - abstract
        """Hook: the classes of ``fit``'s samples of positive weight (None for a regression)."""
        raise NotImplementedError

    def _set_coefficients(self, coefs, intercepts):  # pragma: no cover - abstract
        """Hook: ``coef_`` and ``intercept_`` from each problem's coefficients and intercept."""
        raise NotImplementedError

    def _datafit(self, X, y, sample_weight):  # pragma: no cover - abstract
        """Hook: ``(datafit, penalty)`` of one binary problem (the solver's first two arguments)."""
        raise NotImplementedError

    def _problem_solver(self, datafit):
        """Hook: the row of the solver table that fits ``datafit`` (the one ``_check_before_solve`` chose)."""
        return self._solver_row

    def _start(self, info, datafit, penalty, coef_init, intercept_init):
        """Hook: the solver's start keywords, from a warm start or ``(None, None)``."""
        return dict(coef_init=coef_init, intercept_init=intercept_init)

    def _finish(self, result, datafit, X, y, sample_weight):
        """Hook: the solver's result completed for the estimator (the ranking classifiers' Platt fit)."""
        return result

    def _fit_context(self, X):
        """Hook: the context of a solver run (the ranking classifiers limit BLAS's threads)."""
        return contextlib.nullcontext()

    def _solve(self, X, y, coef_init, intercept_init, sample_weight=None):
        """One problem: its datafit and penalty, its row of the table (run by ``solve``) and the result."""
        datafit, penalty = self._datafit(X, y, sample_weight)
        info = self._problem_solver(datafit)
        self._solver = info.name  # the solver of this problem, which the verbose line names
        merged = None
        if info.merges_repeats and getattr(datafit, "merges_repeats", False):
            merged = merge_repeated_rows(X, y, sample_weight)
        if merged is not None:
            # the same objective on the distinct rows, weighted by their totals
            original_weight = sample_weight
            X, y, sample_weight = merged.X, merged.y, merged.sample_weight
            datafit, penalty = self._datafit(X, y, sample_weight)
        options = dict(tol=self.tol, verbose=self.verbose)
        if self.max_iter is not None:
            options["max_iter"] = self.max_iter
        options.update(self._solver_options().get(info.name, {}))
        with self._fit_context(X):
            options.update(self._start(info, datafit, penalty, coef_init, intercept_init))
            result = solve(info, datafit, penalty, **options)
            result = self._finish(result, datafit, X, y, sample_weight)
        if merged is not None and result.info.get("weights") is not None:
            result.info["weights"] = merged.expanded(result.info["weights"], original_weight)
        return result

    @fit_doc("Fit the model.",
             y="""Targets of a regressor; class labels of a classifier, where two
classes give one binary problem and more give one-vs-rest
problems.  PartialAUCClassifier and AveragePrecisionClassifier
also take a multi-label indicator matrix, dense or SciPy sparse,
of 0 and 1 (or of two other values, such as -1 and 1, the larger
meaning the label is on): one ranking per label (``classes_``
then holds the labels' indices, and ``predict`` returns a matrix
of the same two values).  Labels must be all strings or all
numbers.""",
             sample_weight="""Nonnegative weights of the samples: the risk becomes that of the
weighted empirical distribution (integer weights fit as repeated
rows, zero weights as dropped rows; :mod:`skrank.risks`).
Multiplied by ``class_weight``'s weights where the estimator has
that parameter.""")
    def fit(self, X, y, sample_weight=None):
        self._validate_params()
        return self._fit_prepared(self._prepare_fit(X, y, sample_weight),
                                  warm=getattr(self, "warm_start", False))

    def _prepare_fit(self, X, y, sample_weight=None):
        """The checked data of ``fit``: ``X``, each problem's targets, the weights and the classes.

        What depends on the data alone, not on the parameters that a search
        changes between fits of the same data (``alpha``, ``rank_weight``):
        a cross-validation checks each fold once and fits it many times
        with :meth:`_fit_prepared`.

        Returns
        -------
        PreparedFit
        """
        self.__dict__.pop("_streams", None)
        X, y = self._validate_fit_data(X, y)
        weighted = sample_weight is not None or getattr(self, "class_weight", None) is not None
        if is_dask_array(y) and weighted:
            y = arrays.to_host(y)  # the weights are checked against the targets in memory
        y = self._check_targets(y)
        sample_weight = self._fit_sample_weight(X, y, sample_weight)
        X, y, sample_weight = self._drop_weightless(X, y, sample_weight)
        classes = self._fit_classes(y, sample_weight)
        return PreparedFit(X, self._problem_targets(y, classes), sample_weight, classes)

    def _fit_prepared(self, prepared, warm=False):
        """Fit the problems of ``prepared`` (:meth:`_prepare_fit`) with the current parameters.

        Parameters
        ----------
        prepared : PreparedFit
        warm : bool, default=False
            Start from the fitted coefficients, when they are of the same
            problems and features (:meth:`_warm_starts`).

        Returns
        -------
        self
        """
        X, problems, sample_weight, classes = prepared
        self._check_before_solve(X, sample_weight)
        starts = self._warm_starts(len(problems), X.shape[1], warm=warm)
        results = [self._run_solver(X, target, coef_init, intercept_init, sample_weight)
                   for target, (coef_init, intercept_init) in zip(problems, starts)]
        if classes is not None:
            self.classes_ = classes
        self._set_coefficients([result.coef for result in results], [result.intercept for result in results])
        self._warn_if_constant(X, results, classes)
        self._set_solver_summary(results)
        self._store_results(results)
        self._place_fitted(X)
        return self

    def _problem_targets(self, y, classes):
        """The targets of each problem (:func:`problem_target`); a classifier's ``classes`` name them."""
        return [problem_target(y, positive) for positive in problem_labels(classes)]

    def _warm_starts(self, n_problems, n_features, warm=True):
        """Each problem's start ``(coef_init, intercept_init)``: the fitted ones, or ``(None, None)``.

        The fitted coefficients are a start when ``warm`` and they are of
        the same problems and features.
        """
        coef = self._warm_start_coef() if warm else None
        coef = None if coef is None else np.atleast_2d(to_numpy(coef))
        if coef is None or coef.shape != (n_problems, n_features):
            return [(None, None)] * n_problems
        return [(coef[j].copy(), self._warm_start_intercept(j)) for j in range(n_problems)]

    def _warm_start_coef(self):
        """Hook: the fitted coefficients a warm start (or ``partial_fit``) goes on from; None before a fit."""
        return getattr(self, "coef_", None)

    def _warm_start_intercept(self, j):
        """Hook: the solver's starting intercept of problem ``j`` on a warm start (or ``partial_fit``)."""
        return float(np.atleast_1d(to_numpy(self.intercept_))[j])

    def _run_solver(self, X, y, coef_init, intercept_init, sample_weight=None):
        start = time.perf_counter()
        result = self._solve(X, y, coef_init, intercept_init, sample_weight)
        if self.verbose:
            solver = getattr(self, "_solver", getattr(self, "solver", ""))
            state = "converged" if result.converged else "did not converge"
            print(f"[{type(self).__name__}] solver={solver!r} {state} after {result.n_iter} iterations "
                  f"in {time.perf_counter() - start:.2f} s: F={result.objective:.10g}, "
                  f"criterion={result.stop_criterion:.3g}", flush=True)
        self._warn_if_not_converged(result)
        self._last_result_info = result.info  # for the benchmarks (passes, times)
        return result

    def _warn_if_not_converged(self, result):
        if not result.converged:
            # a solver that could not move from its start says so: its coefficients are the start's
            at_start = " (it stopped at its starting point)" if result.n_iter == 0 else ""
            if result.info.get("kept_start"):
                at_start = (" (every iterate ended above its starting point, or above w = 0 where that is "
                            "lower, which it returned)")
            warnings.warn(
                f"{type(self).__name__} did not converge after {result.n_iter} iterations{at_start} "
                f"(stopping criterion {result.stop_criterion:.3g} > tol={self.tol}); "
                "increase max_iter or tol.",
                ConvergenceWarning,
            )

    def _constant_optimum_advice(self):
        """Hook: what to change when a fit's optimum is the constant classifier, or None (no warning)."""
        return None

    def _warn_if_constant(self, X, results, classes):
        """A ConstantOptimumWarning when a converged problem's optimum is the constant classifier.

        A problem's coefficients are constant when they are zero, or, for
        the solvers that stop near a zero optimum without reaching it
        (the ADMM), when its scores ``X coef`` on an in-memory ``X`` differ
        by at most ``1e-6`` (a margin no loss tells apart).  Unconverged
        problems already have their ConvergenceWarning.
        """
        advice = self._constant_optimum_advice()
        if advice is None or classes is None:
            return
        labels = classes if len(results) == len(classes) else classes[1:]
        constant = [np.asarray(label).tolist() for result, label in zip(results, labels)
                    if result.converged and _scores_constant(X, result.coef)]
        if not constant:
            return
        if len(results) == 1:
            what = "coef_ is zero, so every sample gets the same score and predict returns one class"
        else:
            which = f"class {constant[0]!r}" if len(constant) == 1 else f"the classes {constant}"
            what = (f"coef_ is zero for {which} (one-vs-rest), so every sample gets the same score for "
                    f"{'it' if len(constant) == 1 else 'them'}")
        risk = self._risk
        params = ", ".join(f"{name}={value!r}" for name, value in risk.get_params().items())
        warnings.warn(
            f"{type(self).__name__}: the optimum of the objective is the constant classifier on this data: "
            f"{what}; nothing is ranked. The fit is exact (more iterations do not change it): the risk "
            f"{type(risk).__name__}({params}) of the {self.loss} losses is smallest without a ranking here, "
            f"as a tail risk at a high level is where the classes overlap. {advice}",
            ConstantOptimumWarning,
        )

    def _set_solver_summary(self, results):
        """``n_iter_``, ``objective_`` and ``objective_history_``: numbers for one problem, else arrays."""
        histories = [np.asarray(result.objective_history) for result in results]
        if len(results) == 1:
            self.n_iter_ = int(results[0].n_iter)
            self.objective_ = float(results[0].objective)
            self.objective_history_ = histories[0]
        else:
            self.n_iter_ = np.asarray([result.n_iter for result in results])
            self.objective_ = np.asarray([result.objective for result in results])
            self.objective_history_ = histories

    def _store_results(self, results):
        """Hook: keep solver extras of each binary problem (``results[j].info``)."""
