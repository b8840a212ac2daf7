"""Robustness cases of the skrank estimators: generators, references and the verdict of each case.

Shared by ``tests/test_robustness.py`` (cases drawn by Hypothesis) and
``benchmarks/probe_robustness.py`` (a seeded sweep of a thousand cases and
more).  A case is a dict of JSON values, built by :func:`build_case` from a
drawer (:class:`NumpyDraw` or :class:`HypothesisDraw`); :func:`run_case`
makes its data, fits and returns an :class:`Outcome` whose ``status`` is

- ``"ok"``: a fit whose ``objective_`` is within tolerance of its reference
  (or farther, with a ``ConvergenceWarning``, which says so), with finite
  ``coef_``, ``intercept_`` and ``objective_``;
- ``"error"``: a clear error (:func:`clear_error`);
- ``"bad"``: anything else: an exception that is not a clear error, an
  invalid input accepted, a NaN or infinite result, an objective off its
  reference without a ``ConvergenceWarning``, a ``ConvergenceWarning`` that
  contradicts the solver's own stopping criterion, a ``RuntimeWarning``
  that leaks to the user, or two fits of the same problem that differ.

The references (:data:`AREAS` lists the areas):

- the unscaled fit, for ``X * s`` with the penalty rescaled so that the
  problem is the same (``alpha ||w||^2 / 2`` on scores ``X w``: ``alpha s^2``
  gives ``w / s`` and the same ``F``; an l1 part takes ``alpha s``), for a
  regression target ``y * t`` (the loss homogeneous of degree ``p``: the
  l2 part times ``t^(p-2)``, the l1 part times ``t^(p-1)``, Huber's
  ``epsilon`` times ``t``; ``F`` times ``t^p``), and for columns scaled one
  by one with ``alpha = 0``;
- the unit-weight fit for ``sample_weight * c`` (only the ratios of the
  weights matter; the risks drawn give their counts as fractions, which
  count samples, not units of weight), the fit without the rows for zero
  weights or weights negligible next to the others (for ``TopK`` with a
  fractional ``k``, whose ``n`` counts those rows too, the superquantile
  of the same share: :func:`_negligible_rows_reference`), and repeated rows
  for integer weights;
- the fit without the column for a constant feature (with an intercept);
- the dense float64 fit for the other input kinds (sparse, Dask, ...);
- for the classifiers of spectral risks on overlapping, imbalanced classes
  (``constant_model``): a fit whose optimum is the constant classifier
  (the scores ``X coef_`` of a problem constant) warns with a
  ``ConstantOptimumWarning`` naming the class and what to change, a fit
  that ranks does not, and the default ``SpectralRiskClassifier()`` ranks;
- CLARABEL (cvxpy) on the convex rank-risk problems, scikit-learn's
  logistic regression for ``rank_weight=0``, the closed form for the
  full-AUC square loss;
- for the ``messages`` area, the same request in other words: a two-way
  region as ``fpr_max`` or ``fpr_range`` (the metric, its scorer and the
  estimators against their ``fpr_range=(0, b)`` or ``fpr_max=b`` form), a
  multi-label ``y`` sparse or of two other values against the dense
  indicator of 0 and 1; and the errors of labels mixing strings and
  numbers, of a score matrix for binary labels and of a region whose names
  disagree, each of which must name its input.
"""

import hashlib
import json
import os
import re
import time
import traceback
import warnings
from dataclasses import asdict, dataclass, field

import numpy as np
import scipy.sparse as sp

AREAS = ("nan_inf", "feature_scale", "weight_scale", "degenerate", "input_kind", "determinism", "streams",
         "solvers", "conventions", "constant_model", "silent_wrong", "messages")

#: Relative tolerance on ``objective_`` against an optimum, by kind of solver: the certified
#: solvers (a duality gap below ``tol``), the deterministic ones (KKT residual or gradient
#: criteria, such as L-BFGS's default ``tol=1e-4`` on the gradient, which bound no gap) and
#: the stochastic ones (whose documented criteria bound no gap either).
OPTIMUM_RTOL = {"certified": 1e-6, "deterministic": 1e-3, "stochastic": 2e-2, "stochastic_nonconvex": 0.1}
#: Relative tolerance between two fits of the same problem written two ways (rescaled data,
#: rescaled weights, another input kind): the same solver on the same path.  A stochastic
#: solver on a non-convex problem (:func:`is_convex_problem`) may end at another stationary
#: point: ``"stochastic_nonconvex"`` (the ranked-range AGD documents ends up to 7% apart).
INVARIANCE_RTOL = {"certified": 1e-6, "deterministic": 1e-4, "stochastic": 2e-2,
                   "stochastic_nonconvex": 0.1}
#: Absolute slack of every objective comparison.
ATOL = 1e-9
#: Relative tolerance of ``objective_`` against ``F(coef_, intercept_)`` evaluated afresh.
REEVALUATION_RTOL = 1e-8

ESTIMATORS = ("SpectralRiskRegressor", "SpectralRiskClassifier", "RankADMMRegressor", "RankADMMClassifier",
              "PartialAUCClassifier", "AveragePrecisionClassifier")
CV_ESTIMATORS = ("PartialAUCClassifierCV", "AveragePrecisionClassifierCV")
SOLVERS = {
    "SpectralRiskRegressor": ("auto", "newton", "sorel", "sgd", "lsvrg", "prospect", "admm"),
    "SpectralRiskClassifier": ("auto", "newton", "sorel", "sgd", "lsvrg", "prospect", "admm"),
    "RankADMMRegressor": ("auto", "newton", "ipm", "admm", "sgd", "lsvrg", "lsvrg-nu", "dca", "agd"),
    "RankADMMClassifier": ("auto", "newton", "ipm", "admm", "sgd", "lsvrg", "lsvrg-nu", "dca", "agd"),
    "PartialAUCClassifier": ("auto", "lbfgs", "exact", "agd-sbcd", "dca", "prox-dca", "ppd-sg",
                             "ppd-adagrad"),
    "AveragePrecisionClassifier": ("auto", "lbfgs", "soap"),
    "PartialAUCClassifierCV": ("auto",),
    "AveragePrecisionClassifierCV": ("auto",),
}
_RISK_MODELS = ESTIMATORS[:4]
_RANKERS = ("PartialAUCClassifier", "AveragePrecisionClassifier")
_STOCHASTIC = {
    "SpectralRiskRegressor": {"sorel", "sgd", "lsvrg", "prospect"},
    "RankADMMRegressor": {"sgd", "lsvrg", "lsvrg-nu", "agd"},
    "PartialAUCClassifier": {"agd-sbcd", "dca", "prox-dca", "ppd-sg", "ppd-adagrad"},
    "AveragePrecisionClassifier": {"soap"},
}
_STOCHASTIC["SpectralRiskClassifier"] = _STOCHASTIC["SpectralRiskRegressor"]
_STOCHASTIC["RankADMMClassifier"] = _STOCHASTIC["RankADMMRegressor"]
_CERTIFIED = {"newton", "ipm", "exact"}
#: The solvers that take sample weights ("auto" where it resolves to one of them).
_WEIGHTED = {
    "SpectralRiskRegressor": {"auto", "newton", "sgd"},
    "RankADMMRegressor": {"auto", "newton", "ipm", "sgd"},
    "PartialAUCClassifier": {"auto", "lbfgs", "exact", "ppd-sg", "ppd-adagrad"},
    "AveragePrecisionClassifier": {"auto", "lbfgs", "soap"},
}
_WEIGHTED["SpectralRiskClassifier"] = _WEIGHTED["SpectralRiskRegressor"]
_WEIGHTED["RankADMMClassifier"] = _WEIGHTED["RankADMMRegressor"]
#: The full-batch solvers that fit a Dask ``X`` where it lives.
_EXTERNAL = {
    "SpectralRiskRegressor": {"auto", "newton"},
    "RankADMMRegressor": {"auto", "newton", "ipm"},
    "PartialAUCClassifier": {"auto", "lbfgs", "exact"},
    "AveragePrecisionClassifier": {"auto", "lbfgs"},
}
_EXTERNAL["SpectralRiskClassifier"] = _EXTERNAL["SpectralRiskRegressor"]
_EXTERNAL["RankADMMClassifier"] = _EXTERNAL["RankADMMRegressor"]
#: The solvers with ``partial_fit``.
_STREAMING = {"SpectralRiskRegressor": {"sgd"}, "SpectralRiskClassifier": {"sgd"},
              "RankADMMRegressor": {"sgd"}, "RankADMMClassifier": {"sgd"},
              "PartialAUCClassifier": {"ppd-sg", "ppd-adagrad"}, "AveragePrecisionClassifier": {"soap"}}

CONVEX_RISKS = ({"name": "ERM"}, {"name": "Superquantile", "q": 0.5}, {"name": "Superquantile", "q": 0.8},
                {"name": "Extremile", "r": 2.0}, {"name": "ExponentialSpectral", "rho": 1.0},
                {"name": "TopK", "k": 0.3})
ONE_THRESHOLD_RISKS = ({"name": "ERM"}, {"name": "Superquantile", "q": 0.8}, {"name": "TopK", "k": 0.3})
RANKED_RANGE = {"name": "RankedRange", "m": 0.1, "k": 0.6}
NONCONVEX_RISKS = (RANKED_RANGE, {"name": "HumanAligned"})
_SMOOTH = {"regression": ("squared", "huber"), "classification": ("logistic", "squared_hinge")}
_PIECEWISE = {"regression": ("absolute",), "classification": ("hinge",)}

#: What a clear error must name, by what the case gets wrong (case-insensitive regular expressions).
ERROR_PATTERNS = {
    "nonfinite": r"nan|infinit|finite",
    "class": r"class",
    "sample_weight": r"sample_weight|weight",
    "scale": r"scale|large|small|overflow|underflow|finite|condition|standardi|range",
    "shape": r"feature|sample|singular|rank|constant|duplicat|degenerate|class|negative|positive|fpr_range",
    "external": r"memory|dask|solver",
    "solver": r"solver",
    "classes": r"classes",
    "label": r"class|label",
    "feature": r"feature",
}
#: A clear error about a non-finite ``X`` names both.
_NONFINITE_X = r"(nan|infinit|finite).*\bX\b|\bX\b.*(nan|infinit|finite)"


# --------------------------------------------------------------------------- drawers
class NumpyDraw:
    """Draws from a seeded NumPy generator (the probe's sweep).

    Parameters
    ----------
    seed : int
        Seed of the generator.
    """

    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)

    def choice(self, options):
        """One of ``options``."""
        options = list(options)
        return options[int(self.rng.integers(len(options)))]

    def integer(self, low, high):
        """An integer in ``[low, high]``."""
        return int(self.rng.integers(low, high + 1))

    def uniform(self, low, high):
        """A float in ``[low, high]``."""
        return float(self.rng.uniform(low, high))

    def boolean(self):
        """True or False."""
        return bool(self.rng.integers(2))


class HypothesisDraw:
    """Draws from Hypothesis strategies (the tests): ``draw`` is the ``draw`` of ``st.composite``."""

    def __init__(self, draw):
        from hypothesis import strategies

        self.draw = draw
        self.st = strategies

    def choice(self, options):
        """One of ``options``."""
        return self.draw(self.st.sampled_from(list(options)))

    def integer(self, low, high):
        """An integer in ``[low, high]``."""
        return self.draw(self.st.integers(low, high))

    def uniform(self, low, high):
        """A float in ``[low, high]``."""
        return self.draw(self.st.floats(low, high, allow_nan=False, allow_infinity=False))

    def boolean(self):
        """True or False."""
        return self.draw(self.st.booleans())


# --------------------------------------------------------------------------- configurations
def task_of(estimator):
    """``"regression"`` or ``"classification"``."""
    return "regression" if estimator.endswith("Regressor") else "classification"


def solver_kind(estimator, solver):
    """``"certified"``, ``"deterministic"`` or ``"stochastic"`` (the tolerance class of the solver)."""
    if solver in _STOCHASTIC.get(estimator, ()):
        return "stochastic"
    if solver in _CERTIFIED:
        return "certified"
    if solver == "auto" and estimator in _RISK_MODELS:
        return "certified"  # newton or ipm, else the ADMM (deterministic): see resolved_kind
    return "deterministic"


def _fits(estimator, solver, need):
    if "weighted" in need and solver not in _WEIGHTED.get(estimator, ()):
        return False
    if "external" in need and solver not in _EXTERNAL.get(estimator, ()):
        return False
    if "stream" in need and solver not in _STREAMING.get(estimator, ()):
        return False
    if "deterministic" in need and solver_kind(estimator, solver) == "stochastic":
        return False
    if "alpha_zero" in need:
        if estimator == "AveragePrecisionClassifier" or estimator in CV_ESTIMATORS:
            return False
        if estimator == "PartialAUCClassifier":
            return solver in ("auto", "lbfgs")
        return solver not in ("sorel", "ipm")
    return True


def draw_config(draw, *, estimators=ESTIMATORS, need=()):
    """An estimator, a solver and parameters that solver accepts.

    Parameters
    ----------
    draw : NumpyDraw or HypothesisDraw
    estimators : tuple of str, default=ESTIMATORS
    need : tuple of str, default=()
        Among ``"weighted"`` (takes sample weights), ``"external"`` (fits a
        Dask ``X``), ``"stream"`` (has ``partial_fit``), ``"deterministic"``,
        ``"alpha_zero"`` (a bounded problem without penalty).

    Returns
    -------
    dict
        ``{"estimator", "solver", "params"}`` (JSON values; the risk as a dict).
    """
    need = tuple(need)
    options = [e for e in estimators if any(_fits(e, s, need) for s in SOLVERS[e])]
    estimator = draw.choice(options)
    solver = draw.choice([s for s in SOLVERS[estimator] if _fits(estimator, s, need)])
    return {"estimator": estimator, "solver": solver, "params": _draw_params(draw, estimator, solver, need)}


def _draw_params(draw, estimator, solver, need):
    task = task_of(estimator)
    zero = "alpha_zero" in need
    if estimator in CV_ESTIMATORS:
        return {"alphas": 2, "rank_weights": [0.0, 0.2], "cv": 2}
    if estimator.startswith("Spectral"):
        losses = _SMOOTH[task] if not zero else _SMOOTH[task][:1] if task == "regression" else _SMOOTH[task]
        params = {"risk": draw.choice(CONVEX_RISKS), "loss": draw.choice(losses),
                  "alpha": 0.0 if zero else draw.choice([1e-3, 1e-2, 0.1]), "solver": solver}
        if solver in _STOCHASTIC[estimator]:
            params["random_state"] = 0
        return params
    if estimator.startswith("RankADMM"):
        weighted = "weighted" in need or "external" in need
        if solver == "newton" or (solver == "auto" and weighted and draw.boolean()):
            risk, loss = draw.choice(CONVEX_RISKS), draw.choice(_SMOOTH[task])
        elif solver == "ipm" or (solver == "auto" and weighted):
            risk, loss = draw.choice(ONE_THRESHOLD_RISKS), draw.choice(_PIECEWISE[task])
        elif solver in ("dca", "agd"):
            risk, loss = RANKED_RANGE, draw.choice(_SMOOTH[task] + _PIECEWISE[task])
        else:
            risk = draw.choice(CONVEX_RISKS + NONCONVEX_RISKS)
            loss = draw.choice(_SMOOTH[task] + _PIECEWISE[task])
        if zero and loss == "huber":
            loss = "squared"
        penalty = draw.choice(["l2", "l1", "elasticnet"]) if solver in ("admm", "ipm", "auto") else "l2"
        if solver == "auto" and weighted:
            penalty = "l2"
        params = {"risk": risk, "loss": loss, "penalty": penalty,
                  "alpha": 0.0 if zero else draw.choice([1e-3, 1e-2, 0.1]), "solver": solver}
        if solver in _STOCHASTIC[estimator]:
            params["random_state"] = 0
        if solver in ("agd", "dca"):
            # outer iterations of up to a second here (the solvers area runs the defaults)
            params["max_iter"] = 10
        return params
    if estimator == "PartialAUCClassifier":
        params = {"solver": solver, "alpha": 0.0 if zero else draw.choice([0.01, 0.05]), "random_state": 0}
        if solver in ("exact", "ppd-sg", "ppd-adagrad"):
            params["fpr_range"] = [0.0, 1.0]
        elif solver in ("agd-sbcd", "dca", "prox-dca"):
            params["fpr_range"] = draw.choice([[0.05, 0.5], [0.0, 0.3], [0.0, 1.0]])
            params["loss"] = draw.choice(["squared_hinge", "squared"])
        else:
            variant = draw.choice(["default", "rank", "sigmoid", "logistic"] if not zero
                                  else ["default", "sigmoid", "logistic"])
            params["fpr_range"] = draw.choice([[0.05, 0.5], [0.0, 0.3], [0.0, 1.0]])
            if variant == "rank":
                params.update(rank_weight=1.0, loss=draw.choice(["squared_hinge", "squared"]),
                              fpr_range=draw.choice([[0.0, 0.3], [0.0, 1.0]]))
            elif variant == "sigmoid":
                params["link"] = "sigmoid"
            elif variant == "logistic":
                params["rank_weight"] = 0.0
        return params
    params = {"solver": solver, "alpha": draw.choice([0.01, 0.05]), "loss": draw.choice(
        ["squared_hinge", "logistic", "sigmoid"]), "random_state": 0}
    if solver == "soap":
        params["optimizer"] = draw.choice(["adam", "sgd", "momentum"])
        params["max_iter"] = 30
    else:
        params["rank_weight"] = draw.choice([None, 1.0, 0.0])
    return params


def make_risk(spec):
    """A :mod:`skrank.risks` object from its dict ``{"name": ..., parameters}``."""
    from skrank import risks

    spec = dict(spec)
    return getattr(risks, spec.pop("name"))(**spec)


def make_estimator(config, **overrides):
    """The estimator of ``config`` (its ``params`` updated by ``overrides``)."""
    import skrank

    params = dict(config["params"], **overrides)
    if isinstance(params.get("risk"), dict):
        params["risk"] = make_risk(params["risk"])
    if isinstance(params.get("fpr_range"), list):
        params["fpr_range"] = tuple(params["fpr_range"])
    if isinstance(params.get("rank_weights"), list):
        params["rank_weights"] = tuple(params["rank_weights"])
    return getattr(skrank, config["estimator"])(**params)


def is_convex_problem(config):
    """Whether the objective of ``config`` is convex (every local minimum is global)."""
    params, estimator = config["params"], config["estimator"]
    if estimator in _RISK_MODELS:
        return make_risk(params["risk"]).is_convex
    if estimator == "PartialAUCClassifier":
        paper = config["solver"] not in ("auto", "lbfgs")
        rank_weight = params.get("rank_weight", 1.0 if paper else 0.05)
        if rank_weight == 0.0:
            return True
        loss = params.get("loss") or ("squared" if config["solver"] in ("exact", "ppd-sg", "ppd-adagrad")
                                      else "squared_hinge" if paper else "smooth_step")
        return (params.get("link", "identity") == "identity" and loss != "smooth_step"
                and params.get("fpr_range", [0.05, 0.5])[0] == 0.0)
    if estimator == "AveragePrecisionClassifier":
        return params.get("rank_weight") == 0.0 and config["solver"] != "soap"
    return False


def describe(config):
    """``Estimator(solver=..., ...)`` in one line."""
    params = ", ".join(f"{k}={_short(v)}" for k, v in config["params"].items() if k != "solver")
    return f"{config['estimator']}(solver={config['solver']!r}{', ' if params else ''}{params})"


def _short(value):
    if isinstance(value, dict):
        rest = ", ".join(f"{k}={v}" for k, v in value.items() if k != "name")
        return f"{value['name']}({rest})"
    return repr(value)


def penalty_parts(config):
    """``(l1, l2)`` strengths of the penalty ``l1 ||w||_1 + l2 ||w||^2 / 2`` of ``config``."""
    params = config["params"]
    alpha = params.get("alpha")
    if alpha is None:
        return None
    penalty = params.get("penalty", "l2")
    if penalty == "l1":
        return float(alpha), 0.0
    if penalty == "elasticnet":
        ratio = params.get("l1_ratio", 0.5)
        return float(alpha) * ratio, float(alpha) * (1.0 - ratio)
    return 0.0, float(alpha)


def with_penalty(config, l1, l2):
    """``config`` with the penalty strengths ``(l1, l2)`` (the same kind of penalty)."""
    params = dict(config["params"])
    penalty = params.get("penalty", "l2")
    if penalty == "l1":
        params["alpha"] = l1
    elif penalty == "elasticnet":
        params["alpha"] = l1 + l2
        params["l1_ratio"] = l1 / (l1 + l2) if l1 + l2 > 0 else 0.5
    else:
        params["alpha"] = l2
    return dict(config, params=params)


def rescaled_config(config, l1_factor, l2_factor):
    """``config`` with the l1 part of its penalty times ``l1_factor`` and its l2 part times ``l2_factor``."""
    l1, l2 = penalty_parts(config)
    return with_penalty(config, l1 * l1_factor, l2 * l2_factor)


# --------------------------------------------------------------------------- data
def make_data(spec):
    """``(X, y)`` of a data spec ``{"task", "n", "d", "seed", "classes"?, "positive"?}``.

    Gaussian rows and a linear signal with noise (so that the classes
    overlap); labels ``0 .. classes - 1`` by quantiles of the noisy score
    (every class has at least two members), targets with Student-t noise.
    """
    rng = np.random.default_rng(spec["seed"])
    n, d = spec["n"], spec["d"]
    X = rng.normal(size=(n, d))
    coef = rng.normal(size=d)
    score = X @ coef / np.sqrt(max(d, 1))
    if spec["task"] == "regression":
        return X, score + 0.5 * rng.standard_t(3, size=n)
    noisy = score + rng.normal(size=n)
    classes = spec.get("classes", 2)
    if classes == 2:
        n_pos = int(round(spec.get("positive", 0.4) * n))
        n_pos = min(max(n_pos, 2), n - 2) if n >= 4 else max(1, n // 2)
        y = np.zeros(n, dtype=np.int64)
        y[np.argsort(noisy)[n - n_pos:]] = 1
        return X, y
    order = np.argsort(noisy)
    y = np.empty(n, dtype=np.int64)
    for c, block in enumerate(np.array_split(order, classes)):
        y[block] = c
    return X, y


def draw_data(draw, task, *, n=(24, 60), d=(2, 6), classes=False):
    """A data spec: ``n`` and ``d`` in the given ranges, a seed, two classes (or three when ``classes``)."""
    spec = {"task": task, "n": draw.integer(*n), "d": draw.integer(*d), "seed": draw.integer(0, 10_000)}
    if task == "classification":
        spec["classes"] = draw.choice([2, 2, 3]) if classes else 2
        spec["positive"] = draw.choice([0.3, 0.5])
    return spec


# --------------------------------------------------------------------------- outcomes and fits
@dataclass
class Outcome:
    """The verdict of one case.

    Attributes
    ----------
    status : {"ok", "error", "bad"}
    cause : str
        For ``"bad"``, a short cause that groups the cases; else what happened.
    detail : str
        The message, traceback tail or numbers behind the verdict.
    warned : bool
        Whether a ConvergenceWarning was raised.
    fingerprint : str
        A hash of the fitted arrays (determinism cases).
    """

    status: str
    cause: str = ""
    detail: str = ""
    warned: bool = False
    fingerprint: str = ""
    seconds: float = 0.0

    def to_dict(self):
        """The outcome as a dict of JSON values."""
        return asdict(self)


@dataclass
class Fit:
    """What one call of ``fit`` (or of a sequence of ``partial_fit``) gave."""

    estimator: object = None
    error: BaseException = None
    error_text: str = ""
    warnings: list = field(default_factory=list)
    results: list = field(default_factory=list)

    @property
    def convergence_warned(self):
        """Whether a ConvergenceWarning was raised."""
        from sklearn.exceptions import ConvergenceWarning

        return any(issubclass(w.category, ConvergenceWarning) for w in self.warnings)

    @property
    def runtime_warnings(self):
        """The RuntimeWarnings (floating-point overflow, invalid values...) that reached the user."""
        return [str(w.message) for w in self.warnings if issubclass(w.category, RuntimeWarning)]

    @property
    def objective(self):
        """``objective_`` as a float (the sum over one-vs-rest problems)."""
        return float(np.sum(np.asarray(self.estimator.objective_, dtype=np.float64)))


def run_fit(estimator, X, y, sample_weight=None, *, method="fit", **kwargs):
    """Call ``estimator.method(X, y, ...)`` recording warnings, the solver results and any exception.

    The solver results come from the estimator's ``_run_solver`` (wrapped on
    the instance), so that the probe can check a ConvergenceWarning against
    the solver's ``stop_criterion`` and ``tol``.
    """
    fit = Fit(estimator=estimator)
    original = getattr(estimator, "_run_solver", None)
    if original is not None:
        def capture(*args, **kw):
            result = original(*args, **kw)
            fit.results.append(result)
            return result
        estimator._run_solver = capture
    if sample_weight is not None:
        kwargs["sample_weight"] = sample_weight
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            getattr(estimator, method)(X, y, **kwargs)
        except TimeoutError:  # the tests' time limit, not the estimator's error
            raise
        except Exception as exc:  # the verdict classifies it
            fit.error = exc
            fit.error_text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)[-4:])
        finally:
            if original is not None:
                del estimator.__dict__["_run_solver"]
    fit.warnings = list(caught)
    return fit


def clear_error(exc, pattern):
    """Whether ``exc`` is a clear error for a case whose problem ``pattern`` names; and why not.

    The rule: a ``ValueError`` or ``TypeError`` (not one of numba's), raised
    by skrank's or scikit-learn's own code (the innermost frame of its
    traceback is in one of the two packages, not in NumPy, SciPy or a
    compiled kernel's dispatcher), whose message matches ``pattern``
    (case-insensitive).  A ZeroDivisionError, AttributeError, IndexError,
    FloatingPointError, LinAlgError or a numba error is never clear.

    Returns
    -------
    ok : bool
    reason : str
    """
    name = type(exc).__name__
    if not isinstance(exc, (ValueError, TypeError)):
        return False, f"{name} (not a ValueError/TypeError)"
    if type(exc).__module__.split(".")[0] in ("numba", "numpy", "scipy"):
        return False, f"{type(exc).__module__}.{name}"
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    where = tb.tb_frame.f_code.co_filename if tb is not None else ""
    parts = where.replace("\\", "/").split("/")
    if "skrank" not in parts and "sklearn" not in parts:
        return False, f"{name} raised in {os.path.basename(where)}"
    if not re.search(pattern, str(exc), re.IGNORECASE):
        return False, f"{name} whose message does not name the problem"
    return True, ""


def _first_line(text, width=160):
    text = " ".join(str(text).split())
    return text if len(text) <= width else text[:width - 3] + "..."


def error_outcome(fit, pattern):
    """The verdict on a fit that raised: a clear error, or bad."""
    ok, reason = clear_error(fit.error, pattern)
    message = f"{type(fit.error).__name__}: {_first_line(fit.error)}"
    if ok:
        return Outcome("error", message, fit.error_text, fit.convergence_warned)
    return Outcome("bad", f"unclear error: {reason}", message + "\n" + fit.error_text, fit.convergence_warned)


def _arrays(estimator):
    names = ("coef_", "intercept_", "objective_")
    return {name: np.asarray(getattr(estimator, name), dtype=np.float64) for name in names
            if hasattr(estimator, name)}


def fingerprint(estimator):
    """A hash of ``coef_``, ``intercept_`` and ``objective_`` (bit for bit)."""
    digest = hashlib.sha256()
    for name, value in sorted(_arrays(estimator).items()):
        digest.update(name.encode())
        digest.update(np.ascontiguousarray(value).tobytes())
    return digest.hexdigest()[:16]


def sanity(fit, config, X=None, y=None, sample_weight=None, *, check_criterion=True):
    """The checks every successful fit must pass; an Outcome ``"bad"``, or None when they pass.

    Finite ``coef_``, ``intercept_`` and ``objective_``; a ConvergenceWarning
    exactly when the solver's ``converged`` is False; no ConvergenceWarning
    when ``stop_criterion <= tol``, and none missing when ``stop_criterion >
    tol``, except where the solver documents a second test (L-BFGS's
    decrease test, the closed form's round-off, DCA's single convex step
    when the ranked range drops nothing: :func:`_other_stopping_test`); for
    the rank-risk models fitted in memory, ``objective_`` equal to
    ``F(coef_, intercept_)`` evaluated afresh.  RuntimeWarnings are checked
    by :func:`judged`, after the comparison with the reference.
    """
    est = fit.estimator
    for name, value in _arrays(est).items():
        if not np.all(np.isfinite(value)):
            return Outcome("bad", f"non-finite {name}", f"{name} = {value}", fit.convergence_warned)
    if check_criterion and fit.results:
        tol = getattr(est, "tol", None)
        for r in fit.results:
            crit = float(r.stop_criterion)
            met = crit <= tol * (1 + 1e-12) if tol is not None else True
            if r.converged and not met and not _other_stopping_test(r):
                return Outcome("bad", "claims convergence with stop_criterion > tol",
                               f"converged=True, stop_criterion={crit:.3g}, tol={tol}",
                               fit.convergence_warned)
            if not r.converged and tol is not None and crit <= tol and np.isfinite(crit):
                return Outcome("bad", "ConvergenceWarning though stop_criterion <= tol",
                               f"converged=False, stop_criterion={crit:.3g}, tol={tol}, n_iter={r.n_iter}",
                               fit.convergence_warned)
        if fit.convergence_warned != any(not r.converged for r in fit.results):
            return Outcome("bad", "ConvergenceWarning does not match the solver's result",
                           f"warned={fit.convergence_warned}, converged={[r.converged for r in fit.results]}",
                           fit.convergence_warned)
    if X is not None and config["estimator"] in _RISK_MODELS:
        value = reevaluate(est, X, y, sample_weight)
        if value is not None and not _close(value, fit.objective, REEVALUATION_RTOL):
            return Outcome("bad", "objective_ differs from F(coef_, intercept_)",
                           f"objective_={fit.objective!r}, F={value!r}", fit.convergence_warned)
    return None


def _other_stopping_test(result):
    """Whether the solver of ``result`` documents a stopping test besides ``stop_criterion <= tol``.

    L-BFGS (its ``info`` has scipy's ``message``) also stops on scipy's
    decrease test; the closed form (``info["method"]``) is exact up to
    round-off; skrank's ranked-range DCA (``info["inner_iterations"]``)
    stops after one convex step when the range drops no loss.
    """
    info = result.info or {}
    return "message" in info or "method" in info or ("inner_iterations" in info and result.n_iter == 1)


def reevaluate(est, X, y, sample_weight=None):
    """``F(coef_, intercept_)`` of a binary or regression rank-risk fit."""
    from skrank.datafits.rank_risk import rank_objective

    if sp.issparse(X) or not isinstance(X, np.ndarray):
        return None
    coef = np.asarray(est.coef_, dtype=np.float64)
    if coef.ndim == 2:
        if coef.shape[0] != 1:
            return None
        coef = coef[0]
        y = np.where(np.asarray(y) == est.classes_[1], 1.0, -1.0)
    intercept = float(np.ravel(np.asarray(est.intercept_, dtype=np.float64))[0])
    weights = None if sample_weight is None else np.asarray(sample_weight, dtype=np.float64)
    return float(rank_objective(X, np.asarray(y, dtype=np.float64), coef, intercept, est._risk,
                                est._loss_obj, est._penalty_obj, weights))


def _close(a, b, rtol):
    return abs(a - b) <= rtol * max(abs(a), abs(b)) + ATOL


def resolved_kind(config, fit):
    """The tolerance class of the solver the fit ran (``"auto"`` resolved)."""
    solver = None if fit is None or fit.estimator is None else getattr(fit.estimator, "_solver", None)
    if not isinstance(solver, str) or config["estimator"] not in ESTIMATORS:
        solver = config["solver"]
    if solver == "auto":
        return "deterministic"
    return solver_kind(config["estimator"], solver)


def compare(fit, reference, *, config, rtol_table, factor=1.0, optimum=False, label="reference"):
    """The verdict of a successful fit against a reference objective (``factor`` times it).

    ``reference`` is a :class:`Fit` (two ways of writing one problem: the
    two must agree unless one of them warned) or a float (an optimum: the
    fit may not be above it unless it warned).
    """
    kind = resolved_kind(config, fit)
    if kind == "stochastic" and not optimum and not is_convex_problem(config):
        kind = "stochastic_nonconvex"
    rtol = rtol_table[kind]
    value = fit.objective
    if isinstance(reference, Fit):
        target = factor * reference.objective
        ref_warned = reference.convergence_warned
    else:
        target, ref_warned = factor * float(reference), False
    detail = f"objective_={value!r}, {label}={target!r}, rtol={rtol:g} ({kind})"
    if _close(value, target, rtol) or (optimum and value < target):
        return Outcome("ok", "", detail, fit.convergence_warned)
    if fit.convergence_warned or (ref_warned and not optimum):
        return Outcome("ok", "off the reference with a ConvergenceWarning", detail, True)
    gap = abs(value - target) / max(abs(target), ATOL)
    shape = "" if is_convex_problem(config) else " (non-convex problem)"
    return Outcome("bad", f"objective off the {label} without ConvergenceWarning{shape}",
                   detail + f", gap={gap:.2g}")


def check_reference(reference, config, X=None, y=None, sample_weight=None):
    """The reference fit must itself be a clean fit; an Outcome ``"bad"`` when it is not."""
    if reference.error is not None:
        return Outcome("bad", f"reference fit failed: {type(reference.error).__name__}",
                       _first_line(reference.error) + "\n" + reference.error_text)
    problem = sanity(reference, config, X, y, sample_weight)
    if problem is None and reference.runtime_warnings:
        problem = Outcome("bad", "RuntimeWarning leaked", _first_line(reference.runtime_warnings[0]))
    if problem is not None:
        problem.cause = "reference fit: " + problem.cause
        return problem
    return None


def judged(fit, config, X, y, sample_weight=None, *, pattern, reference=None, rtol_table=INVARIANCE_RTOL,
           factor=1.0, optimum=False, label="reference", expect_error=False):
    """The full verdict of one fit: error handling, sanity, then the comparison with the reference."""
    if fit.error is not None:
        return error_outcome(fit, pattern)
    if expect_error:
        return Outcome("bad", "invalid input accepted silently",
                       f"fit returned; warnings={[str(w.message)[:80] for w in fit.warnings]}",
                       fit.convergence_warned)
    problem = sanity(fit, config, X, y, sample_weight)
    if problem is not None:
        return problem
    outcome = Outcome("ok", "", "", fit.convergence_warned)
    if reference is not None:
        outcome = compare(fit, reference, config=config, rtol_table=rtol_table, factor=factor,
                          optimum=optimum, label=label)
    if outcome.status == "ok" and fit.runtime_warnings:
        return Outcome("bad", "RuntimeWarning leaked (the fit is otherwise within tolerance)",
                       _first_line(fit.runtime_warnings[0]), fit.convergence_warned)
    return outcome


# --------------------------------------------------------------------------- references
def cvxpy_optimum(X, y, config):
    """``F`` at CLARABEL's minimiser of a convex, unweighted, binary rank-risk problem (or None)."""
    if config["estimator"] not in _RISK_MODELS:
        return None
    risk = make_risk(config["params"]["risk"])
    if not risk.is_convex:
        return None
    try:
        import cvxpy as cp
    except ImportError:  # pragma: no cover - cvxpy is a test dependency
        return None
    from skrank.losses import get_loss
    from skrank.penalties import get_penalty

    params = config["params"]
    task = task_of(config["estimator"])
    loss = get_loss(params.get("loss"), epsilon=params.get("epsilon", 1.0))
    penalty = get_penalty(params.get("penalty", "l2"), params["alpha"], params.get("l1_ratio", 0.5))
    y = np.asarray(y, dtype=np.float64)
    if task == "classification":
        classes = np.unique(y)
        if classes.shape[0] != 2:
            return None
        y = np.where(y == classes[1], 1.0, -1.0)
    n, d = X.shape
    sigma = np.asarray(risk.weights(n), dtype=np.float64)
    step = np.diff(sigma, prepend=0.0)
    jumps = np.flatnonzero(step > 1e-9 * max(float(np.max(np.abs(sigma))), 1e-300))
    w = cp.Variable(d)
    b = cp.Variable() if params.get("fit_intercept", True) else 0.0
    f = X @ w + b
    t = cp.multiply(-y, f) if task == "classification" else f - y
    losses = loss.cvxpy_expression(cp, t)
    rank_term = sum(step[k] * cp.sum_largest(losses, n - k) for k in jumps)
    objective = rank_term + penalty.l1 * cp.norm1(w) + 0.5 * penalty.l2 * cp.sum_squares(w)
    problem = cp.Problem(cp.Minimize(objective))
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # an inaccurate solution is still an upper bound of the optimum
            problem.solve(solver="CLARABEL", tol_gap_abs=1e-10, tol_gap_rel=1e-10, tol_feas=1e-10)
    except cp.error.SolverError:
        return None
    if problem.status not in (cp.OPTIMAL, cp.OPTIMAL_INACCURATE) or w.value is None:
        return None
    w_opt = np.asarray(w.value, dtype=np.float64)
    b_opt = float(b.value) if params.get("fit_intercept", True) else 0.0
    f_opt = X @ w_opt + b_opt
    t_opt = -y * f_opt if task == "classification" else f_opt - y
    return float(np.sort(loss.value(t_opt)) @ sigma + penalty.value(w_opt))


def logistic_optimum(X, y, alpha, sample_weight=None):
    """``min mean log(1 + exp(-y f)) + alpha ||w||^2 / 2`` by scikit-learn (``rank_weight=0``)."""
    from sklearn.linear_model import LogisticRegression

    y_pm = np.where(np.asarray(y) == np.unique(y)[1], 1.0, -1.0)
    v = np.ones(X.shape[0]) if sample_weight is None else np.asarray(sample_weight, dtype=np.float64)
    v = v / v.sum()
    if alpha > 0:
        model = LogisticRegression(C=1.0 / alpha, tol=1e-12, max_iter=100_000)
    else:
        model = LogisticRegression(penalty=None, tol=1e-12, max_iter=100_000)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model.fit(X, y_pm, sample_weight=v)
    coef, b = model.coef_.ravel(), float(model.intercept_[0])
    margins = y_pm * (X @ coef + b)
    return float(v @ np.logaddexp(0.0, -margins) + 0.5 * alpha * coef @ coef)


def optimum_of(X, y, config):
    """A certified optimum of ``config``'s problem on ``(X, y)`` (unweighted), or None."""
    params = config["params"]
    if config["estimator"] in _RISK_MODELS:
        return cvxpy_optimum(X, y, config)
    if len(np.unique(y)) != 2 or params.get("alpha") is None:
        return None
    if params.get("rank_weight") == 0.0:
        return logistic_optimum(X, y, params["alpha"])
    return None


# --------------------------------------------------------------------------- case builders
def _base_case(area, kind, config, data, **extra):
    return {"area": area, "kind": kind, "config": config, "data": data, **extra}


def build_nan_inf(draw):
    """NaN or +-inf in X (dense, sparse, Dask), y, sample_weight, a batch to predict, or a parameter."""
    kind = draw.choice(["X", "X", "X_sparse", "X_dask", "y", "sample_weight", "predict", "param"])
    need = ("external",) if kind == "X_dask" else ("weighted",) if kind == "sample_weight" else ()
    estimators = ESTIMATORS + (CV_ESTIMATORS if kind in ("X", "y") else ())
    config = draw_config(draw, estimators=estimators, need=need)
    task = task_of(config["estimator"])
    data = draw_data(draw, task)
    value = draw.choice(["nan", "inf", "-inf"])
    if kind == "y" and task == "classification":
        value = draw.choice(["nan", "inf"])
    count = draw.integer(1, 3)
    cells = [[draw.integer(0, data["n"] - 1), draw.integer(0, data["d"] - 1)] for _ in range(count)]
    extra = {"value": value, "cells": cells}
    if kind == "param":
        names = ["alpha", "tol"]
        if config["estimator"] in _RISK_MODELS:
            names.append("risk")
        if config["estimator"] in _RANKERS:
            names.append("margin")
        if config["estimator"] == "PartialAUCClassifier":
            names.append("fpr_range")
        extra["param"] = draw.choice(names)
    return _base_case("nan_inf", kind, config, data, **extra)


def build_feature_scale(draw):
    """``X * s`` (penalty rescaled), ``y * t`` (regression), or each column scaled (``alpha = 0``)."""
    kind = draw.choice(["uniform", "uniform", "uniform", "columns", "target"])
    if kind == "columns":
        config = draw_config(draw, need=("alpha_zero",))
        data = draw_data(draw, task_of(config["estimator"]), n=(40, 60), d=(2, 4))
        exponents = [draw.integer(-12, 12) for _ in range(data["d"])]
        return _base_case("feature_scale", kind, config, data, exponents=exponents)
    estimators = ("SpectralRiskRegressor", "RankADMMRegressor") if kind == "target" else ESTIMATORS
    config = draw_config(draw, estimators=estimators)
    if kind == "target" and config["params"].get("loss") == "huber":
        config["params"]["epsilon"] = 1.0
    data = draw_data(draw, task_of(config["estimator"]))
    exponent = draw.choice([-12, -9, -6, -3, 3, 6, 9, 12]) + draw.choice([0.0, 0.5])
    return _base_case("feature_scale", kind, config, data, exponent=exponent)


def build_weight_scale(draw):
    """``sample_weight * c`` for ``c`` from 1e-200 to 1e300, zero weights, extreme weight ratios."""
    kind = draw.choice(["constant", "random", "random", "zeros", "extreme_mix"])
    config = draw_config(draw, need=("weighted",) if draw.choice([True, True, True, False]) else ())
    data = draw_data(draw, task_of(config["estimator"]))
    exponent = draw.integer(-200, 300)
    return _base_case("weight_scale", kind, config, data, exponent=exponent,
                      weight_seed=draw.integer(0, 10_000), small_exponent=draw.integer(-200, -20),
                      big_exponent=draw.integer(0, 300))


def build_degenerate(draw):
    """One class, ``d > n``, duplicated rows, constant features, constant targets, two samples."""
    kind = draw.choice(["one_class", "one_class_weights", "d_gt_n", "d_gt_n", "duplicate_all",
                        "duplicate_some", "constant_feature", "constant_X", "constant_y", "two_samples",
                        "multiclass_singleton"])
    if kind in ("one_class", "one_class_weights", "multiclass_singleton"):
        estimators = tuple(e for e in ESTIMATORS if task_of(e) == "classification")
        need = ("weighted",) if kind == "one_class_weights" else ()
        config = draw_config(draw, estimators=estimators, need=need)
    elif kind == "constant_y":
        config = draw_config(draw, estimators=("SpectralRiskRegressor", "RankADMMRegressor"))
    elif kind == "duplicate_some":
        config = draw_config(draw, need=("weighted",))
    else:
        config = draw_config(draw)
    task = task_of(config["estimator"])
    if kind == "d_gt_n":
        data = draw_data(draw, task, n=(8, 16), d=(20, 60))
    elif kind == "two_samples":
        data = draw_data(draw, task, n=(2, 2), d=(1, 4))
    elif kind == "duplicate_all":
        # n a multiple of ten: the counts of TopK(k=0.3) and RankedRange(0.1, 0.6) scale with the copies
        data = draw_data(draw, task)
        data["n"] = draw.choice([30, 40, 50, 60])
    else:
        data = draw_data(draw, task)
    return _base_case("degenerate", kind, config, data, repeats=draw.integer(2, 3),
                      constant=draw.choice([0.0, 1.0, -3.5, 1e6, 1e-6]), column=draw.integer(0, 6),
                      subset_seed=draw.integer(0, 10_000))


INPUT_KINDS = ("fortran", "float32", "int", "list", "csr", "csc", "coo", "csr_array", "csr_explicit_zeros",
               "dataframe", "dask", "dask_uneven")


def build_input_kind(draw):
    """The same data as a Fortran array, float32, integers, a list, sparse matrices, a DataFrame or Dask."""
    kind = draw.choice(INPUT_KINDS)
    need = ("external",) if kind.startswith("dask") and draw.choice([True, True, False]) else ()
    config = draw_config(draw, need=need)
    data = draw_data(draw, task_of(config["estimator"]), classes=True)
    return _base_case("input_kind", kind, config, data)


def build_determinism(draw):
    """The same fit twice (and, in the probe, in a fresh process): identical arrays bit for bit."""
    kind = draw.choice(["twice", "twice", "refit", "random_state_none"])
    need = ("deterministic",) if kind == "random_state_none" else ()
    estimators = ESTIMATORS + (CV_ESTIMATORS if kind == "twice" else ())
    config = draw_config(draw, estimators=estimators, need=need)
    if kind == "random_state_none":
        config["params"].pop("random_state", None)
    data = draw_data(draw, task_of(config["estimator"]), classes=config["estimator"] not in CV_ESTIMATORS)
    return _base_case("determinism", kind, config, data, other_seed=draw.integer(0, 10_000))


STREAM_KINDS = ("clean", "weights_scale", "feature_scale", "nan_batch", "features_batch", "unknown_class",
                "no_classes", "dask_batch", "sparse", "after_fit", "one_class_batch", "tiny_batches")


def build_streams(draw):
    """``partial_fit`` over batches: clean, rescaled, bad batches (NaN, shape, labels), sparse, after fit."""
    kind = draw.choice(STREAM_KINDS)
    estimators = ESTIMATORS
    if kind in ("unknown_class", "no_classes", "one_class_batch"):
        estimators = tuple(e for e in ESTIMATORS if task_of(e) == "classification")
    config = draw_config(draw, estimators=estimators, need=("stream",))
    data = draw_data(draw, task_of(config["estimator"]), n=(60, 120))
    return _base_case("streams", kind, config, data, batches=draw.integer(2, 5), bad=draw.integer(0, 4),
                      exponent=draw.choice([-300, -200, -12, -6, 6, 12, 200, 300]),
                      value=draw.choice(["nan", "inf"]))


def build_solvers(draw):
    """Every estimator and solver on a small problem, valid or not (a refusal must name the solver)."""
    kind = draw.choice(["valid", "valid", "valid", "any_params"])
    if kind == "valid":
        config = draw_config(draw, estimators=ESTIMATORS + CV_ESTIMATORS)
        if config["solver"] in ("agd", "dca") and config["estimator"] in _RISK_MODELS:
            del config["params"]["max_iter"]  # the defaults, as a user runs them
    else:
        estimator = draw.choice(ESTIMATORS)
        solver = draw.choice(SOLVERS[estimator])
        other = draw_config(draw, estimators=(estimator,))
        params = dict(other["params"], solver=solver)
        config = {"estimator": estimator, "solver": solver, "params": params}
    data = draw_data(draw, task_of(config["estimator"]), classes=config["estimator"] not in CV_ESTIMATORS)
    return _base_case("solvers", kind, config, data)


#: What a ``conventions`` case checks: the linear model of ``decision_function``, several problems
#: in the CV estimators, folds of small classes, and ``n_iter_`` of every fit.
CONVENTION_KINDS = ("linear_model", "linear_model", "cv_targets", "small_folds", "n_iter")
#: The classifiers whose decision function is a Platt fit (the others are linear models by construction,
#: tests/test_conventions.py).
_CONVENTION_CLASSIFIERS = _RANKERS + CV_ESTIMATORS


def build_conventions(draw):
    """scikit-learn's conventions of linear classifiers, on drawn classifiers, targets and input kinds."""
    kind = draw.choice(CONVENTION_KINDS)
    if kind == "linear_model":
        estimator = draw.choice(_CONVENTION_CLASSIFIERS)
    else:
        estimator = draw.choice(CV_ESTIMATORS if kind != "n_iter" else CV_ESTIMATORS + _RANKERS)
    multilabel = estimator in _RANKERS + CV_ESTIMATORS
    target = draw.choice(["binary", "multiclass"] + (["multilabel"] if multilabel else []))
    if kind == "small_folds":
        target = "binary"
    spec = {"task": "classification", "n": draw.integer(*((10, 16) if kind == "small_folds" else (40, 90))),
            "d": draw.integer(1, 5), "seed": draw.integer(0, 10_000), "positive": draw.choice([0.3, 0.5])}
    rank_weight = draw.choice([0.0, 0.0, 0.2, 0.5])
    if estimator in CV_ESTIMATORS:  # a small grid; cv=5 for the folds of small classes
        folds = 5 if kind == "small_folds" else 3
        params = {"alphas": 2, "rank_weights": [0.0, rank_weight or 0.2], "cv": folds}
    else:
        params = {"rank_weight": rank_weight} if estimator in _RANKERS else {}
    config = {"estimator": estimator, "solver": "auto", "params": params}
    return {"area": "conventions", "kind": kind, "config": config, "target": target,
            "input": draw.choice(["dense", "sparse"]), "data": spec}


def _convention_data(case):
    """``(X, y)``: the case's targets (two or three classes, or two labels) on its Gaussian rows."""
    spec = case["data"]
    X, y = make_data(dict(spec, classes=3 if case["target"] == "multiclass" else 2))
    if case["target"] == "multilabel":
        other = np.random.default_rng(spec["seed"] + 1).normal(size=spec["n"]) + X[:, -1]
        y = np.column_stack([y, other > np.median(other)]).astype(np.int64)
    if case["input"] == "sparse":
        X = sp.csr_matrix(X)
    return X, y


def _linear_model_mismatch(est, X):
    """Why ``decision_function`` is not ``X @ coef_.T + intercept_`` (raveled for one column), or None."""
    got = np.asarray(est.decision_function(X), dtype=np.float64)
    want = np.asarray(X @ np.asarray(est.coef_).T, dtype=np.float64) + np.asarray(est.intercept_)
    want = want.ravel() if want.shape[1] == 1 else want
    if got.shape != want.shape:
        return f"shape {got.shape} vs X @ coef_.T + intercept_ {want.shape}"
    scale = max(1.0, float(np.max(np.abs(want))))
    if not np.allclose(got, want, rtol=1e-10, atol=1e-10 * scale):
        return f"largest difference {float(np.max(np.abs(got - want))):.3g}"
    return None


def run_conventions(case):
    """A fit that keeps scikit-learn's conventions, or a clear error where the base estimator refuses too."""
    X, y = _convention_data(case)
    fit = run_fit(make_estimator(case["config"]), X, y)
    name = case["config"]["estimator"]
    if fit.error is not None:
        if name in CV_ESTIMATORS:  # the search refuses only what its base estimator refuses
            import skrank

            base = run_fit(getattr(skrank, name[:-2])(), X, y)
            if base.error is None:
                return Outcome("bad", f"{name} refuses a target its base estimator fits",
                               _first_line(fit.error))
        return error_outcome(fit, ERROR_PATTERNS["shape"] + r"|cv|fold")
    est = fit.estimator
    if fit.runtime_warnings:
        return Outcome("bad", "a RuntimeWarning reached the user", fit.runtime_warnings[0])
    mismatch = _linear_model_mismatch(est, X)
    if mismatch is not None:
        return Outcome("bad", "decision_function is not X @ coef_.T + intercept_", mismatch)
    if hasattr(est, "ranking_coef_"):
        A = np.asarray(est.calibration_)[:, 0]
        if not (np.all(A > 0) and np.allclose(est.coef_, A[:, None] * est.ranking_coef_, rtol=1e-12)):
            return Outcome("bad", "coef_ is not the Platt slope times ranking_coef_", str(A))
    n_iter = np.asarray(est.n_iter_)
    # a fit that stopped at its start says so with a ConvergenceWarning (a failed first line search)
    if not np.all(n_iter >= 1) and not fit.convergence_warned:
        return Outcome("bad", "n_iter_ holds zeros", f"{int(np.sum(n_iter < 1))} of {n_iter.size}")
    return Outcome("ok", "conventions kept", warned=fit.convergence_warned)


def build_constant_model(draw):
    """A spectral-risk classifier on overlapping classes, 5-45% positives: the default or a tail risk."""
    kind = draw.choice(["default", "tail", "tail", "rank_admm", "multiclass"])
    if kind == "default":
        risk = None
    elif draw.boolean():
        risk = {"name": "Superquantile", "q": round(draw.uniform(0.8, 0.95), 3)}
    else:
        risk = {"name": "TopK", "k": round(draw.uniform(0.05, 0.2), 3)}
    solver, loss = "auto", "logistic"
    if kind == "rank_admm":
        solver = draw.choice(["auto", "admm"])
        loss = draw.choice(["logistic", "hinge"]) if solver == "auto" else "logistic"
    n = draw.integer(60, 200)
    data = {"task": "classification", "n": n, "d": draw.integer(2, 6), "seed": draw.integer(0, 10_000),
            "classes": 3 if kind == "multiclass" else 2, "positive": round(draw.uniform(0.05, 0.45), 3)}
    return {"area": "constant_model", "kind": kind, "risk": risk, "solver": solver, "loss": loss,
            "data": data}


def build_silent_wrong(draw):
    """Answers that were wrong without a word: tiny features with ``alpha=None``, ``objective_`` at
    tiny scores, SOTA-s's range between ``partial_fit`` calls, and SOTA-s ending above its start."""
    kind = draw.choice(["tiny_features", "objective_at_coef", "sota_new_range", "sota_above_start"])
    case = {"area": "silent_wrong", "kind": kind, "seed": draw.integer(0, 10_000),
            "config": {"estimator": draw.choice(["PartialAUCClassifier", "AveragePrecisionClassifier"]),
                       "solver": "auto", "params": {}}}
    if kind == "tiny_features":
        case["scale"] = 10.0 ** draw.integer(-8, -5)
    if kind == "objective_at_coef":
        case["config"]["estimator"] = "PartialAUCClassifier"  # a rank term that ignores the intercept
        case["scale"] = 10.0 ** draw.integer(-12, -4)
    if kind.startswith("sota"):
        case["config"] = {"estimator": "PartialAUCClassifier", "solver": "sota-s",
                          "params": {"solver": "sota-s", "fpr_range": [0, 0.3], "tpr_min": 0.5}}
        case["change"] = draw.choice([{"tpr_min": 0.0}, {"fpr_range": [0, 1.0]}, {"tpr_min": 0.8}])
    return case


MESSAGE_KINDS = ("mixed_labels", "mixed_labels_metric", "sparse_multilabel", "sparse_multilabel_metric",
                 "two_valued_multilabel", "score_matrix_metric", "region_metric", "region_estimator")
#: The ways of naming a two-way region: each alone, both agreeing, both disagreeing, a range that starts
#: above 0 (refused with a floor, the one-way partial AUC without), neither.
REGION_MODES = ("fpr_max", "fpr_range", "both", "disagree", "shifted", "neither")
_METRICS = ("partial_auc_score", "two_way_partial_auc_score", "rank_risk_score")
_SPARSE = {"csr": sp.csr_matrix, "csc": sp.csc_matrix, "coo": sp.coo_matrix, "csr_array": sp.csr_array}


def build_messages(draw):
    """Labels mixing strings and numbers, sparse or -1/+1 multi-label ``y``, a score matrix, region names."""
    kind = draw.choice(MESSAGE_KINDS)
    data = {"task": "classification", "n": draw.integer(30, 60), "d": draw.integer(2, 4),
            "seed": draw.integer(0, 10_000), "classes": 2, "positive": draw.choice([0.3, 0.5]),
            "labels": draw.integer(2, 3)}
    extra = {"container": draw.choice(["list", "object", "series"]), "number": draw.choice([0, 1, -1, 2.5]),
             "string": draw.choice(["a", "yes", "1"]), "sparse": draw.choice(sorted(_SPARSE)),
             "values": draw.choice([[-1, 1], [-1.0, 1.0], [0, 2], [1, 2]]), "columns": draw.integer(2, 3),
             "average": draw.choice(["macro", "micro", None]), "mode": draw.choice(REGION_MODES),
             "tpr_min": draw.choice([0.0, 0.3, 0.5]), "fpr_max": draw.choice([0.2, 0.5, 1.0]),
             "scorer": draw.boolean()}
    if kind == "mixed_labels":
        classifiers = tuple(e for e in ESTIMATORS if task_of(e) == "classification") + CV_ESTIMATORS
        estimator = draw.choice(classifiers)
        config = {"estimator": estimator, "solver": "auto",
                  "params": _draw_params(draw, estimator, "auto", ()) if estimator in CV_ESTIMATORS else {}}
    elif kind in ("sparse_multilabel", "two_valued_multilabel"):
        config = draw_config(draw, estimators=_RANKERS)
    elif kind == "region_estimator":
        estimator = draw.choice(("PartialAUCClassifier", "PartialAUCClassifier", "PartialAUCClassifierCV"))
        params = ({"alphas": 2, "rank_weights": [0.05], "cv": 2} if estimator in CV_ESTIMATORS
                  else {"alpha": draw.choice([0.01, 0.05])})
        config = {"estimator": estimator, "solver": "auto", "params": params}
    else:
        metrics = _METRICS if kind in ("mixed_labels_metric", "score_matrix_metric") else _METRICS[:2]
        if kind == "region_metric":
            metrics = _METRICS[1:2]
        config = {"estimator": draw.choice(metrics), "solver": "n/a", "params": {}}
    return _base_case("messages", kind, config, data, **extra)


BUILDERS = {
    "nan_inf": build_nan_inf,
    "feature_scale": build_feature_scale,
    "weight_scale": build_weight_scale,
    "degenerate": build_degenerate,
    "input_kind": build_input_kind,
    "determinism": build_determinism,
    "streams": build_streams,
    "solvers": build_solvers,
    "conventions": build_conventions,
    "constant_model": build_constant_model,
    "silent_wrong": build_silent_wrong,
    "messages": build_messages,
}


def build_case(area, draw):
    """One case of ``area`` from a drawer."""
    return BUILDERS[area](draw)


def generate_cases(counts, seed=0):
    """The probe's cases: ``counts[area]`` cases of each area, each from its own seeded drawer.

    Case ``i`` of an area depends only on ``(seed, area, i)``, so a case id
    names the same case whatever the counts.
    """
    cases = []
    for a, area in enumerate(AREAS):
        for i in range(counts.get(area, 0)):
            case = build_case(area, NumpyDraw([seed, a, i]))
            case["id"] = f"{area}-{i:04d}"
            cases.append(case)
    return cases


def case_by_id(case_id, seed=0):
    """The case of the probe's sweep named ``case_id`` (such as ``"streams-0012"``)."""
    area, index = case_id.rsplit("-", 1)
    case = build_case(area, NumpyDraw([seed, AREAS.index(area), int(index)]))
    case["id"] = case_id
    return case


def case_json(case):
    """The case as one line of JSON."""
    return json.dumps(case, sort_keys=True)


# --------------------------------------------------------------------------- runners
def _nonfinite(value):
    return {"nan": np.nan, "inf": np.inf, "-inf": -np.inf}[value]


def run_nan_inf(case):
    """A clear error naming the non-finite input, never a fit."""
    config, kind = case["config"], case["kind"]
    X, y = make_data(case["data"])
    value = _nonfinite(case["value"])
    est = make_estimator(config)
    if kind == "param":
        return _run_bad_param(case, X, y, value)
    if kind == "predict":
        fit = run_fit(est, X, y)
        if fit.error is not None:
            return check_reference(fit, config)
        Xbad = X.copy()
        for i, j in case["cells"]:
            Xbad[i, j] = value
        method = "decision_function" if hasattr(est, "decision_function") else "predict"
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("error", RuntimeWarning)
                out = getattr(est, method)(Xbad)
        except Exception as exc:
            fake = Fit(estimator=est, error=exc,
                       error_text="".join(traceback.format_exception(type(exc), exc, exc.__traceback__)[-3:]))
            return error_outcome(fake, _NONFINITE_X)
        return Outcome("bad", "invalid input accepted silently", f"{method} returned {np.ravel(out)[:3]}...")
    sample_weight = None
    if kind in ("X", "X_sparse", "X_dask"):
        X = X.copy()
        for i, j in case["cells"]:
            X[i, j] = value
        pattern = _NONFINITE_X
        if kind == "X_sparse":
            X = sp.csr_matrix(X)
        elif kind == "X_dask":
            import dask.array as da

            X = da.from_array(X, chunks=(max(2, X.shape[0] // 3), X.shape[1]))
            pattern = pattern + "|" + ERROR_PATTERNS["external"]
    elif kind == "y":
        y = np.asarray(y, dtype=np.float64).copy()
        for i, _ in case["cells"]:
            y[i] = value
        pattern = r"(nan|infinit|finite).*\by\b|\by\b.*(nan|infinit|finite)"
    else:
        sample_weight = np.ones(X.shape[0])
        for i, _ in case["cells"]:
            sample_weight[i] = value
        pattern = (r"sample_weight.*(nan|infinit|finite|negative|does not take)"
                   r"|(nan|infinit|finite).*sample_weight")
    fit = run_fit(est, X, y, sample_weight)
    return judged(fit, config, None, None, pattern=pattern, expect_error=True)


def _run_bad_param(case, X, y, value):
    config = case["config"]
    name = case["param"]
    if name == "risk":
        risk = dict(config["params"]["risk"])
        keys = [k for k in risk if k != "name"]
        if not keys:
            risk = {"name": "Superquantile", "q": 0.8}
            keys = ["q"]
        risk[keys[0]] = value
        override, pattern = {"risk": risk}, rf"\b{keys[0]}\b|risk"
    elif name == "fpr_range":
        override, pattern = {"fpr_range": [0.0, value]}, r"fpr_range"
    else:
        override, pattern = {name: value}, rf"\b{name}\b"
    est = make_estimator(config, **override)
    fit = run_fit(est, X, y)
    # tol=inf (stop at once) and alpha=inf (w = 0) are meaningful; NaN never is
    meaningful = np.isposinf(value) and name in ("tol", "alpha")
    return judged(fit, config, None, None, pattern=pattern, expect_error=not meaningful)


def run_feature_scale(case):
    """The fit on rescaled data against the unscaled fit of the same problem."""
    config, kind = case["config"], case["kind"]
    X, y = make_data(case["data"])
    pattern = ERROR_PATTERNS["scale"]
    if kind == "columns":
        scales = 10.0 ** np.asarray(case["exponents"], dtype=np.float64)
        reference = run_fit(make_estimator(config), X, y)
        fit = run_fit(make_estimator(config), X * scales, y)
        problem = check_reference(reference, config, X, y)
        if problem is not None:
            return problem
        return judged(fit, config, X * scales, y, pattern=pattern, reference=reference)
    if kind == "target":
        t = 10.0 ** case["exponent"]
        loss = config["params"]["loss"]
        degree = 1 if loss == "absolute" else 2
        scaled = rescaled_config(config, t ** (degree - 1), t ** (degree - 2))
        if loss == "huber":
            scaled["params"]["epsilon"] = config["params"].get("epsilon", 1.0) * t
        reference = run_fit(make_estimator(config), X, y)
        problem = check_reference(reference, config, X, y)
        if problem is not None:
            return problem
        fit = run_fit(make_estimator(scaled), X, y * t)
        return judged(fit, scaled, X, y * t, pattern=pattern, reference=reference, factor=t ** degree)
    s = 10.0 ** case["exponent"]
    scaled = rescaled_config(config, s, s * s)
    reference = run_fit(make_estimator(config), X, y)
    problem = check_reference(reference, config, X, y)
    if problem is not None:
        return problem
    fit = run_fit(make_estimator(scaled), X * s, y)
    return judged(fit, scaled, X * s, y, pattern=pattern, reference=reference)


def _takes_weights(config):
    return config["solver"] in _WEIGHTED.get(config["estimator"], ())


def run_weight_scale(case):
    """``sample_weight`` rescaled, zero or extreme against the fit on the weights' ratios."""
    config, kind = case["config"], case["kind"]
    X, y = make_data(case["data"])
    n = X.shape[0]
    rng = np.random.default_rng(case["weight_seed"])
    pattern = ERROR_PATTERNS["sample_weight"]
    c = 10.0 ** case["exponent"]
    ref_config = config
    if kind == "constant":
        # equal weights c: the unweighted problem (stochastic solvers: weights 2, their weighted path)
        ref_weight = 2.0 * np.ones(n) if resolved_kind(config, None) == "stochastic" else None
        X_ref, y_ref, weight = X, y, c * np.ones(n)
    elif kind == "random":
        ref_weight = rng.uniform(0.5, 2.0, size=n)
        X_ref, y_ref, weight = X, y, c * ref_weight
    elif kind == "zeros":
        keep = _keep_both_classes(rng.random(n) > 0.3, y, config)
        ref_weight = rng.uniform(0.5, 2.0, size=n)
        weight = np.where(keep, ref_weight, 0.0) * c
        X_ref, y_ref, ref_weight = X[keep], y[keep], ref_weight[keep]
    else:
        # weights 10^big on most rows, 10^small on the others: negligible beside them (ratio >= 1e20)
        keep = _keep_both_classes(rng.random(n) > 0.3, y, config)
        big, small = 10.0 ** case["big_exponent"], 10.0 ** case["small_exponent"]
        weight = np.where(keep, big, small)
        X_ref, y_ref, ref_weight = X[keep], y[keep], None
        if resolved_kind(config, None) == "stochastic":
            ref_weight = 2.0 * np.ones(int(keep.sum()))
        ref_config = _negligible_rows_reference(config, weight)
    reference = run_fit(make_estimator(ref_config), X_ref, y_ref, ref_weight)
    fit = run_fit(make_estimator(config), X, y, weight)
    if fit.error is not None:
        return error_outcome(fit, pattern)
    if not _takes_weights(config):
        return Outcome("bad", "sample_weight accepted by a solver documented not to take it",
                       describe(config))
    problem = check_reference(reference, ref_config, X_ref, y_ref, ref_weight)
    if problem is not None:
        return problem
    return judged(fit, config, X, y, weight, pattern=pattern, reference=reference)


def _negligible_rows_reference(config, weight):
    """The reference config of the kept rows when the others have negligible weights.

    The same config, except for ``TopK`` with ``k`` a fraction: a fraction
    counts samples, ``floor(k n)`` of the ``n`` of positive weight
    (doc/sample_weights.rst), and a weight of 1e-200 beside 1e300 is one of
    them (unless its ratio to the largest is below the smallest double,
    ``2^-1074``, where it is no weight).  The weighted fit's risk is then
    the mean of the top share ``s = max(floor(k n), 1) / n`` of the weight,
    held by the kept rows: the superquantile at level ``1 - s`` of them.
    """
    _, exponent = np.frexp(np.max(weight))
    n = int(np.count_nonzero(np.ldexp(np.asarray(weight, dtype=np.float64), -exponent) > 0.0))
    return _top_share_reference(config, n)


def _top_share_reference(config, n):
    """``config`` with a fractional ``TopK(k)`` replaced by the superquantile of its share of ``n`` samples.

    A fraction counts samples, so the top share of ``TopK(k)`` is
    ``s = max(floor(k n), 1) / n`` of the ``n`` samples it sees; on other
    rows carrying the same distribution (weighted rows for repeated ones)
    the same problem is the superquantile at level ``1 - s``.  Other risks
    are returned as they are.
    """
    risk = config["params"].get("risk")
    if not (isinstance(risk, dict) and risk.get("name") == "TopK" and not isinstance(risk["k"], int)):
        return config
    share = max(int(np.floor(risk["k"] * n + 1e-9)), 1) / n
    return dict(config, params=dict(config["params"], risk={"name": "Superquantile", "q": 1.0 - share}))


def _keep_both_classes(keep, y, config):
    keep = keep.copy()
    if task_of(config["estimator"]) == "classification":
        for c in np.unique(y):
            rows = np.flatnonzero(y == c)
            keep[rows[:2]] = True
    keep[:2] = True
    return keep


def run_degenerate(case):
    """Degenerate data: a clear error (one class) or a fit against its reference."""
    config, kind = case["config"], case["kind"]
    X, y = make_data(case["data"])
    est = make_estimator(config)
    n, d = X.shape
    rng = np.random.default_rng(case["subset_seed"])
    pattern = ERROR_PATTERNS["shape"]
    if kind == "one_class":
        fit = run_fit(est, X, np.full(n, y[0]))
        return judged(fit, config, None, None, pattern=ERROR_PATTERNS["class"], expect_error=True)
    if kind == "one_class_weights":
        weight = np.where(y == y[0], 1.0, 0.0)
        fit = run_fit(est, X, y, weight)
        return judged(fit, config, None, None, pattern=ERROR_PATTERNS["class"], expect_error=True)
    if kind == "multiclass_singleton":
        y = y.copy()
        y[int(rng.integers(n))] = 7  # a class of one sample
        fit = run_fit(est, X, y)
        return judged(fit, config, X, y, pattern=pattern)
    if kind in ("d_gt_n", "two_samples", "constant_y"):
        if kind == "constant_y":
            y = np.full(n, float(y[0]))
        fit = run_fit(est, X, y)
        if fit.error is not None:
            return error_outcome(fit, pattern)
        optimum = optimum_of(X, y, config)
        return judged(fit, config, X, y, pattern=pattern, reference=optimum, rtol_table=OPTIMUM_RTOL,
                      optimum=True, label="optimum")
    if kind == "duplicate_all":
        reps = case["repeats"]
        reference = run_fit(make_estimator(config), X, y)
        fit = run_fit(est, np.tile(X, (reps, 1)), np.tile(y, reps))
        problem = check_reference(reference, config, X, y)
        if problem is not None:
            return problem
        return judged(fit, config, np.tile(X, (reps, 1)), np.tile(y, reps), pattern=pattern,
                      reference=reference, rtol_table=OPTIMUM_RTOL)
    if kind == "duplicate_some":
        counts = rng.integers(1, case["repeats"] + 1, size=n)
        rows = np.repeat(np.arange(n), counts)
        # a fractional count takes its share of the repeated rows (doc/sample_weights.rst)
        ref_config = _top_share_reference(config, rows.shape[0])
        reference = run_fit(make_estimator(ref_config), X, y, counts.astype(np.float64))
        fit = run_fit(est, X[rows], y[rows])
        problem = check_reference(reference, ref_config, X, y, counts.astype(np.float64))
        if problem is not None:
            return problem
        return judged(fit, config, X[rows], y[rows], pattern=pattern, reference=reference,
                      rtol_table=OPTIMUM_RTOL)
    if kind == "constant_feature":
        value = case["constant"] if config["params"].get("fit_intercept", True) else 0.0
        column = min(case["column"], d)
        X_more = np.insert(X, column, value, axis=1)
        reference = run_fit(make_estimator(config), X, y)
        fit = run_fit(est, X_more, y)
        problem = check_reference(reference, config, X, y)
        if problem is not None:
            return problem
        return judged(fit, config, X_more, y, pattern=pattern, reference=reference)
    # constant_X: every column constant, the same problem as X = 0
    values = rng.normal(size=d) * (case["constant"] if case["constant"] else 1.0)
    if not config["params"].get("fit_intercept", True):
        values[:] = 0.0
    X_const = np.tile(values, (n, 1))
    reference = run_fit(make_estimator(config), np.zeros((n, d)), y)
    fit = run_fit(est, X_const, y)
    if fit.error is not None:
        return error_outcome(fit, pattern)
    problem = check_reference(reference, config, np.zeros((n, d)), y)
    if problem is not None:
        return problem
    return judged(fit, config, X_const, y, pattern=pattern, reference=reference, rtol_table=OPTIMUM_RTOL)


def as_kind(X, kind):
    """``X`` (float64, C order) as the input kind ``kind``, and the float64 array it stands for."""
    if kind == "fortran":
        return np.asfortranarray(X), X
    if kind == "float32":
        X32 = X.astype(np.float32)
        return X32, X32.astype(np.float64)
    if kind == "int":
        Xi = np.round(3 * X).astype(np.int64)
        return Xi, Xi.astype(np.float64)
    if kind == "list":
        return X.tolist(), X
    sparse_kinds = {"csr": sp.csr_matrix, "csc": sp.csc_matrix, "coo": sp.coo_matrix,
                    "csr_array": sp.csr_array}
    if kind in sparse_kinds or kind == "csr_explicit_zeros":
        Xs = np.where(np.abs(X) < 0.6, 0.0, X)  # about half zeros
        if kind == "csr_explicit_zeros":
            M = sp.csr_matrix(Xs)
            data = np.concatenate([M.data, np.zeros(3)])
            rows = np.concatenate([M.tocoo().row, np.arange(3) % X.shape[0]])
            cols = np.concatenate([M.tocoo().col, np.arange(3) % X.shape[1]])
            M = sp.csr_matrix((data, (rows, cols)), shape=X.shape)  # duplicates summed: 0 added stays stored
            return M, Xs
        return sparse_kinds[kind](Xs), Xs
    if kind == "dataframe":
        import pandas as pd

        return pd.DataFrame(X, columns=[f"f{j}" for j in range(X.shape[1])]), X
    import dask.array as da

    n = X.shape[0]
    rows = max(2, n // 3) + (1 if kind == "dask_uneven" else 0)
    return da.from_array(X, chunks=(rows, X.shape[1])), X


def run_input_kind(case):
    """Another input kind against the dense float64 fit: the same objective, or a clear refusal."""
    config, kind = case["config"], case["kind"]
    X, y = make_data(case["data"])
    X_kind, X_ref = as_kind(X, kind)
    reference = run_fit(make_estimator(config), X_ref, y)
    fit = run_fit(make_estimator(config), X_kind, y)
    pattern = ERROR_PATTERNS["external"] if kind.startswith("dask") else r"sparse|solver|dtype|memory"
    if fit.error is not None:
        if reference.error is not None:
            return error_outcome(fit, pattern + "|" + ERROR_PATTERNS["shape"])
        return error_outcome(fit, pattern)
    problem = check_reference(reference, config, X_ref, y)
    if problem is not None:
        return problem
    outcome = judged(fit, config, X_ref, y, pattern=pattern, reference=reference)
    if outcome.status != "ok":
        return outcome
    return _compare_predictions(fit.estimator, reference.estimator, X_kind, X_ref, outcome)


def _compare_predictions(est, ref, X_kind, X_ref, outcome):
    method = "decision_function" if hasattr(ref, "decision_function") else "predict"
    try:
        got = getattr(est, method)(X_kind)
        got = np.asarray(got.compute() if hasattr(got, "compute") else got, dtype=np.float64)
    except Exception as exc:
        return Outcome("bad", f"{method} fails on the input kind it was fitted on: {type(exc).__name__}",
                       _first_line(exc))
    want = np.asarray(getattr(ref, method)(X_ref), dtype=np.float64)
    if got.shape != want.shape or not np.all(np.isfinite(got)):
        return Outcome("bad", f"{method} shape or values wrong on this input kind",
                       f"{got.shape} vs {want.shape}")
    return outcome


def run_determinism(case):
    """Two fits of the same problem: the same arrays bit for bit (fresh objects, refit, no seed)."""
    config, kind = case["config"], case["kind"]
    X, y = make_data(case["data"])
    first = run_fit(make_estimator(config), X, y)
    if kind == "refit":
        est = make_estimator(config)
        other = make_data(dict(case["data"], seed=case["other_seed"]))
        run_fit(est, *other)
        second = run_fit(est, X, y)
    else:
        second = run_fit(make_estimator(config), X, y)
    if first.error is not None:
        outcome = error_outcome(first, ERROR_PATTERNS["shape"])
        if second.error is None or type(second.error) is not type(first.error):
            return Outcome("bad", "non-deterministic: one fit raised, the other did not",
                           outcome.cause)
        return outcome
    problem = sanity(first, config, X, y)
    if problem is not None:
        return problem
    if second.error is not None:
        return Outcome("bad", "non-deterministic: the second fit raised", _first_line(second.error))
    a, b = fingerprint(first.estimator), fingerprint(second.estimator)
    if a != b:
        diff = {k: float(np.max(np.abs(v - _arrays(second.estimator)[k])))
                for k, v in _arrays(first.estimator).items()}
        what = {"refit": "a refit after another fit differs from a fresh fit",
                "random_state_none": "a deterministic solver differs between two fits without random_state"}
        return Outcome("bad", "non-deterministic: " + what.get(kind, "two fits of one problem differ"),
                       f"max abs differences {diff}")
    return Outcome("ok", "", "", first.convergence_warned, fingerprint=a)


def fresh_fingerprint(case):
    """The fingerprint of a determinism case's first fit (for the check in another process)."""
    X, y = make_data(case["data"])
    fit = run_fit(make_estimator(case["config"]), X, y)
    return "" if fit.error is not None else fingerprint(fit.estimator)


# --- streams
def _stream_batches(case, X, y):
    n = X.shape[0]
    k = case["batches"]
    if case["kind"] == "tiny_batches":
        edges = [0] + list(range(10, 16)) + [n]  # a first batch of ten rows, then batches of one row
    else:
        edges = np.linspace(0, n, k + 1).astype(int).tolist()
    return [(X[a:b], y[a:b]) for a, b in zip(edges[:-1], edges[1:]) if b > a]


def _stream(config, batches, classes, weights=None, est=None):
    """``partial_fit`` over the batches; ``(fit, coefs after each call)``."""
    est = make_estimator(config) if est is None else est
    coefs = []
    fit = Fit(estimator=est)
    for i, (Xb, yb) in enumerate(batches):
        kwargs = {}
        if classes is not None:
            kwargs["classes"] = classes
        w = None if weights is None else weights[i]
        step = run_fit(est, Xb, yb, w, method="partial_fit", **kwargs)
        fit.warnings += step.warnings
        if step.error is not None:
            fit.error, fit.error_text = step.error, step.error_text
            return fit, coefs
        # the stream's solution: the ranking direction where a Platt slope is folded into coef_ (that
        # slope is refitted on each batch, and Platt's smoothed targets depend on the batch's total weight)
        coefs.append(np.array(getattr(est, "ranking_coef_", est.coef_), dtype=np.float64, copy=True))
    return fit, coefs


def _stream_sane(fit, coefs):
    if fit.error is not None:
        return error_outcome(fit, r"batch|class|feature|sample")
    for i, c in enumerate(coefs):
        if not np.all(np.isfinite(c)):
            return Outcome("bad", "non-finite coef_ after partial_fit", f"after call {i}: {c}")
    if not np.all(np.isfinite(np.asarray(fit.estimator.intercept_, dtype=np.float64))):
        return Outcome("bad", "non-finite intercept_ after partial_fit", str(fit.estimator.intercept_))
    if fit.runtime_warnings:
        return Outcome("bad", "RuntimeWarning leaked", _first_line(fit.runtime_warnings[0]))
    return None


def _same(a, b, rtol):
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return a.shape == b.shape and bool(np.all(np.abs(a - b) <= rtol * np.maximum(np.abs(a), np.abs(b)) + 1e-12
                                              * max(1.0, float(np.max(np.abs(b))) if b.size else 1.0)))


def run_streams(case):
    """``partial_fit`` over a stream of batches (see :data:`STREAM_KINDS`)."""
    config, kind = case["config"], case["kind"]
    X, y = make_data(case["data"])
    classifier = task_of(config["estimator"]) == "classification"
    classes = np.unique(y) if classifier else None
    batches = _stream_batches(case, X, y)
    clean, coefs = _stream(config, batches, classes)
    problem = _stream_sane(clean, coefs)
    if problem is not None:
        if kind != "clean":
            problem.cause = "clean stream: " + problem.cause
        return problem
    if kind in ("clean", "tiny_batches"):
        again, coefs2 = _stream(config, batches, classes)
        if again.error is not None or not all(np.array_equal(a, b) for a, b in zip(coefs, coefs2)):
            return Outcome("bad", "non-deterministic: the same stream twice differs", "")
        return Outcome("ok", "", "", fingerprint=fingerprint(clean.estimator))
    if kind == "weights_scale":
        rng = np.random.default_rng(case["bad"])
        base = [rng.uniform(0.5, 2.0, size=b[0].shape[0]) for b in batches]
        c = 10.0 ** case["exponent"]
        ref, ref_coefs = _stream(config, batches, classes, base)
        fit, fit_coefs = _stream(config, batches, classes, [c * w for w in base])
        if fit.error is not None:
            return error_outcome(fit, ERROR_PATTERNS["sample_weight"])
        problem = _stream_sane(ref, ref_coefs) or _stream_sane(fit, fit_coefs)
        if problem is not None:
            return problem
        if not _same(fit_coefs[-1], ref_coefs[-1], 1e-6):
            return Outcome("bad", "stream: sample_weight * c changes coef_",
                           f"c=1e{case['exponent']}: {fit_coefs[-1].ravel()[:3]} "
                           f"vs {ref_coefs[-1].ravel()[:3]}")
        return Outcome("ok")
    if kind == "feature_scale":
        s = 10.0 ** max(-12, min(12, case["exponent"]))
        scaled = rescaled_config(config, s, s * s)
        fit, fit_coefs = _stream(scaled, [(Xb * s, yb) for Xb, yb in batches], classes)
        if fit.error is not None:
            return error_outcome(fit, ERROR_PATTERNS["scale"])
        problem = _stream_sane(fit, fit_coefs)
        if problem is not None:
            return problem
        scores = X @ np.atleast_2d(coefs[-1]).T
        scores_scaled = (X * s) @ np.atleast_2d(fit_coefs[-1]).T
        if not _same(scores_scaled, scores, 1e-6):
            return Outcome("bad", "stream: X * s (alpha * s^2) does not give coef_ / s",
                           f"s={s:g}: scores {scores.ravel()[:3]} vs {scores_scaled.ravel()[:3]}")
        return Outcome("ok")
    if kind in ("nan_batch", "features_batch", "unknown_class", "dask_batch"):
        j = case["bad"] % len(batches)
        if kind == "features_batch":
            j = 1 + case["bad"] % (len(batches) - 1)  # the first batch sets n_features_in_
        Xb, yb = batches[j]
        if kind == "nan_batch":
            Xb = Xb.copy()
            Xb[0, 0] = _nonfinite(case["value"])
            pattern = _NONFINITE_X
        elif kind == "features_batch":
            Xb = np.hstack([Xb, np.ones((Xb.shape[0], 1))])
            pattern = ERROR_PATTERNS["feature"]
        elif kind == "unknown_class":
            yb = yb.copy()
            yb[0] = 99
            pattern = ERROR_PATTERNS["label"]
        else:
            import dask.array as da

            Xb = da.from_array(Xb, chunks=(max(1, Xb.shape[0] // 2), Xb.shape[1]))
            pattern = ERROR_PATTERNS["external"]
        est = make_estimator(config)
        kwargs = {"classes": classes} if classifier else {}
        before = None
        for i, (Xi, yi) in enumerate(batches):
            if i == j:
                before = np.array(est.coef_, copy=True) if hasattr(est, "coef_") else None
                bad = run_fit(est, Xb, yb, method="partial_fit", **kwargs)
                if bad.error is None:
                    return Outcome("bad", "stream: invalid batch accepted silently", kind)
                outcome = error_outcome(bad, pattern)
                if outcome.status != "error":
                    return outcome
                after = np.array(est.coef_, copy=True) if hasattr(est, "coef_") else None
                changed = (before is None) != (after is None) or (
                    before is not None and not np.array_equal(before, after))
                if changed:
                    return Outcome("bad", "stream: a rejected batch changed coef_", kind)
            step = run_fit(est, Xi, yi, method="partial_fit", **kwargs)
            if step.error is not None:
                return Outcome("bad", f"stream: partial_fit fails after a rejected batch: "
                               f"{type(step.error).__name__}", _first_line(step.error))
        solution = np.asarray(getattr(est, "ranking_coef_", est.coef_))  # as _stream records it
        if not np.array_equal(solution, coefs[-1]):
            return Outcome("bad", "stream: a rejected batch changed the stream's state",
                           f"{np.ravel(solution)[:3]} vs {np.ravel(coefs[-1])[:3]}")
        return outcome
    if kind == "no_classes":
        est = make_estimator(config)
        fit = run_fit(est, *batches[0], method="partial_fit")
        return judged(fit, config, None, None, pattern=ERROR_PATTERNS["classes"], expect_error=True)
    if kind == "sparse":
        fit, fit_coefs = _stream(config, [(sp.csr_matrix(Xb), yb) for Xb, yb in batches], classes)
        problem = _stream_sane(fit, fit_coefs)
        if problem is not None:
            return problem
        if not _same(fit_coefs[-1], coefs[-1], 1e-8):
            return Outcome("bad", "stream: sparse batches differ from dense ones",
                           f"{fit_coefs[-1].ravel()[:3]} vs {coefs[-1].ravel()[:3]}")
        return Outcome("ok")
    if kind == "after_fit":
        est = make_estimator(config)
        first = run_fit(est, X, y)
        if first.error is not None:
            return error_outcome(first, ERROR_PATTERNS["shape"])
        fit, fit_coefs = _stream(config, batches, None, est=est)
        return _stream_sane(fit, fit_coefs) or Outcome("ok")
    # one_class_batch: a batch of one class in the middle, the classes given
    j = 1 % len(batches)
    Xb, yb = batches[j]
    one = yb == yb[0]
    mixed = batches[:j] + [(Xb[one], yb[one])] + batches[j + 1:]
    fit, fit_coefs = _stream(config, mixed, classes)
    return _stream_sane(fit, fit_coefs) or Outcome("ok")


def run_solvers(case):
    """A small problem for each estimator and solver: its optimum, a clear refusal, or a clean fit."""
    config = case["config"]
    X, y = make_data(case["data"])
    fit = run_fit(make_estimator(config), X, y)
    pattern = ERROR_PATTERNS["solver"] if case["kind"] == "any_params" else ERROR_PATTERNS["solver"] + "|" + \
        ERROR_PATTERNS["shape"]
    if fit.error is not None:
        return error_outcome(fit, pattern)
    optimum = optimum_of(X, y, config)
    return judged(fit, config, X, y, pattern=pattern, reference=optimum, rtol_table=OPTIMUM_RTOL,
                  optimum=True, label="optimum")


def _constant_problems(estimator, X):
    """The labels of the problems whose scores ``X coef`` are constant (to 1e-6, a margin no loss sees)."""
    coef = np.atleast_2d(estimator.coef_)
    labels = estimator.classes_ if coef.shape[0] == len(estimator.classes_) else estimator.classes_[1:]
    return [label.item() for j, label in enumerate(labels) if np.ptp(X @ coef[j]) <= 1e-6]


def run_constant_model(case):
    """A constant optimum warns (naming the class and the fix), a ranking fit does not, the default ranks."""
    from skrank.estimators import RankADMMClassifier, SpectralRiskClassifier

    X, y = make_data(case["data"])
    params = {} if case["risk"] is None else {"risk": make_risk(case["risk"])}
    if case["kind"] == "rank_admm":
        estimator = RankADMMClassifier(solver=case["solver"], loss=case["loss"], **params)
    else:
        estimator = SpectralRiskClassifier(**params)
    fit = run_fit(estimator, X, y)
    if fit.error is not None:
        return error_outcome(fit, ERROR_PATTERNS["shape"])
    constant = _constant_problems(estimator, X)
    warned = [str(w.message) for w in fit.warnings if w.category.__name__ == "ConstantOptimumWarning"]
    detail = f"constant problems {constant}; warnings {warned}"
    if fit.convergence_warned:
        return Outcome("ok", "not converged (ConvergenceWarning)", detail, True)
    if constant and not warned:
        return Outcome("bad", "silent constant classifier: coef_ zero without a warning", detail)
    if warned and not constant:
        return Outcome("bad", "constant-optimum warning on a fit that ranks", detail)
    if warned:
        message = warned[0]
        named = len(constant) == len(np.atleast_2d(estimator.coef_)) or all(
            repr(label) in message for label in constant)
        if not (named and "risk='exponential'" in message and "q=" in message):
            return Outcome("bad", "constant-optimum warning without the class or the fix", detail)
    if case["kind"] == "default" and constant:
        return Outcome("ok", "the default's optimum is constant here, and it warns", detail)
    return Outcome("ok", "constant, warned" if constant else "ranks", detail)


def _silent_wrong_data(seed, informative=True):
    from sklearn.datasets import make_classification

    if informative:
        # balanced classes (no flipped labels): the intercept's gradient is 0 at w = 0
        return make_classification(200, 5, n_informative=3, n_redundant=0, n_clusters_per_class=1,
                                   class_sep=2.0, flip_y=0.0, random_state=seed)
    rng = np.random.default_rng(seed)
    return rng.standard_normal((300, 5)), (rng.random(300) < 0.3).astype(int)


def _quiet(call):
    """``call()`` and whether it raised a ConvergenceWarning."""
    from sklearn.exceptions import ConvergenceWarning

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = call()
    return out, any(issubclass(w.category, ConvergenceWarning) for w in caught)


def run_silent_wrong(case):
    """OK when the answer is right or says it is not (a ConvergenceWarning or a clear error)."""
    import skrank

    kind, seed = case["kind"], case["seed"]
    Est = getattr(skrank, case["config"]["estimator"])
    if kind == "tiny_features":
        # rank_weight=0 is LogisticRegression(C=1), which scikit-learn fits independently
        from sklearn.linear_model import LogisticRegression
        from sklearn.metrics import roc_auc_score

        X, y = _silent_wrong_data(seed)
        X = X * case["scale"]
        fit, warned = _quiet(lambda: Est(rank_weight=0.0).fit(X, y))
        reference = LogisticRegression(C=1.0, tol=1e-14, max_iter=100_000).fit(X, y)
        # the ranking X coef_ (the Platt map's offset would round scores of 1e-16 to ties)
        auc, expected = (roc_auc_score(y, X @ np.ravel(model.coef_)) for model in (fit, reference))
        if warned or abs(auc - expected) <= 1e-3:
            return Outcome("ok", "ranks as scikit-learn's fit, or warned", f"AUC {auc:.6f}", warned=warned)
        return Outcome("bad", "stopped short of the optimum silently",
                       f"training AUC {auc:.6f} against {expected:.6f} (scikit-learn)")
    if kind == "objective_at_coef":
        from skrank.datafits.logistic_anchor import LogisticAnchoredObjective

        X, y = _silent_wrong_data(seed)
        X = X * case["scale"]
        rng = np.random.default_rng(seed)
        theta = np.append(rng.standard_normal(X.shape[1]) * 1e-10, 0.2 + rng.random())
        ypm = np.where(y == 1, 1.0, -1.0)
        if Est is skrank.PartialAUCClassifier:
            rank = skrank.datafits.partial_auc.PartialAUCObjective(
                X, ypm, (0.05, 0.5), skrank.pairwise_losses.get_pairwise_loss("smooth_step", 1e-21), 0.0)
        else:
            rank = skrank.datafits.average_precision.AveragePrecisionObjective(
                X, ypm, skrank.pairwise_losses.get_pairwise_loss("squared_hinge", 0.5), 0.0)
        objective = LogisticAnchoredObjective(rank, X, ypm, 0.05, 5e-3)
        reported, value = objective.value_and_grad(theta)[0], objective.value(theta)
        if abs(reported - value) <= REEVALUATION_RTOL * max(1.0, abs(value)):
            return Outcome("ok", "the solver's F is F at its point")
        return Outcome("bad", "reported objective is not F at the coefficients",
                       f"{reported} against {value}")
    if kind == "sota_new_range":
        X, y = _silent_wrong_data(seed)
        change = {k: tuple(v) if isinstance(v, list) else v for k, v in case["change"].items()}
        coefs = []
        for changed in (False, True):
            params = dict(case["config"]["params"], random_state=seed)
            est = make_estimator(dict(case["config"], params=params))
            _quiet(lambda: est.partial_fit(X[:100], y[:100], classes=[0, 1]))
            if changed:
                est.set_params(**change)
            try:
                _quiet(lambda: est.partial_fit(X[100:], y[100:]))
            except ValueError as exc:
                if any(name in str(exc) for name in change):
                    return Outcome("error", "clear error naming the parameter", str(exc))
                return Outcome("bad", "error not naming the changed parameter", str(exc))
            coefs.append(np.asarray(est.coef_).copy())
        if np.array_equal(coefs[0], coefs[1]):
            return Outcome("bad", "the stream ignored the new range", repr(change))
        return Outcome("ok", "the stream took the new range")
    # sota_above_start: labels independent of X, from w = 0
    from skrank.solvers.stochastic.sota import sota_s

    X, y = _silent_wrong_data(seed, informative=False)
    loss = skrank.pairwise_losses.get_pairwise_loss("squared_hinge", 1.0)
    ypm = np.where(y == 1, 1.0, -1.0)
    objective = skrank.datafits.partial_auc.PartialAUCObjective(X, ypm, (0, 0.3), loss, 1e-4, tpr_min=0.5)
    start = objective.value(np.zeros(X.shape[1]))
    result = sota_s(objective, objective.penalty, random_state=seed, max_iter=30)
    end = objective.value(result.coef)
    if end <= start * (1 + 1e-12) and (result.converged or result.info.get("kept_start") or end < start):
        return Outcome("ok", "at or below the start", f"F {end:.6g}, start {start:.6g}",
                       warned=not result.converged)
    return Outcome("bad", "ended above its start", f"F {end:.6g} against {start:.6g} at the start")


def make_multilabel(spec):
    """``(X, Y)``: rows as :func:`make_data`, an indicator of 0 and 1 with ``spec["labels"]`` columns.

    Each column thresholds its own noisy linear score; the first two rows
    are all 0 and all 1, so that every label holds both values.
    """
    rng = np.random.default_rng(spec["seed"])
    X = rng.normal(size=(spec["n"], spec["d"]))
    scores = X @ rng.normal(size=(spec["d"], spec["labels"])) + rng.normal(size=(spec["n"], spec["labels"]))
    Y = (scores > np.quantile(scores, 1.0 - spec["positive"], axis=0)).astype(np.int64)
    Y[:2] = [[0] * spec["labels"], [1] * spec["labels"]]
    return X, Y


def _attempt(function, *args, **kwargs):
    """``function(*args, **kwargs)`` as a :class:`Fit`: its value (as ``estimator``), error, warnings."""
    fit = Fit()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            fit.estimator = function(*args, **kwargs)
        except TimeoutError:
            raise
        except Exception as exc:  # the verdict classifies it
            fit.error = exc
            fit.error_text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)[-4:])
    fit.warnings = list(caught)
    return fit


def _mixed(y, case):
    """The binary labels ``y`` with 0 as ``case["number"]`` and 1 as ``case["string"]``, in its container."""
    labels = [case["number"] if v == 0 else case["string"] for v in y]
    if case["container"] == "list":
        return labels
    if case["container"] == "series":
        import pandas as pd

        return pd.Series(labels, dtype=object)
    return np.array(labels, dtype=object)


def _metric_call(name, y, s, **kwargs):
    from skrank import metrics

    if name == "rank_risk_score":
        return metrics.rank_risk_score(y, s, loss="logistic", **kwargs)
    if name == "two_way_partial_auc_score":
        kwargs.setdefault("tpr_min", 0.3)
        kwargs.setdefault("fpr_max", 0.5)
    return getattr(metrics, name)(y, s, **kwargs)


def _region_kwargs(case):
    """The region of ``case`` in the words of its mode, and whether it is valid."""
    a, b, mode = case["tpr_min"], case["fpr_max"], case["mode"]
    start = 0.1 if b > 0.1 else 0.0
    words = {"fpr_max": {"fpr_max": b}, "fpr_range": {"fpr_range": (0.0, b)},
             "both": {"fpr_max": b, "fpr_range": (0.0, b)},
             "disagree": {"fpr_max": b, "fpr_range": (0.0, b / 2)},
             "shifted": {"fpr_range": (start, b)}, "neither": {}}[mode]
    return dict(words, tpr_min=a)


def _region_pattern(case):
    """What the error of an invalid region must name, or None for a valid one (for the metric)."""
    mode = case["mode"]
    if mode == "disagree":
        return r"fpr_range.*fpr_max.*disagree"
    if mode == "shifted" and case["tpr_min"] > 0.0:
        return r"tpr_min.*fpr_range"
    if mode == "neither":
        return r"fpr_max.*fpr_range"
    return None


def _refused(fit, pattern):
    """A clear error matching ``pattern``, or bad: an unclear error, or the invalid input accepted."""
    if fit.error is None:
        return Outcome("bad", "invalid input accepted", f"returned {fit.estimator!r}"[:300])
    return error_outcome(fit, pattern)


def _same_outcome(fit, expected, label):
    if fit.error is not None:
        return Outcome("bad", f"refused a valid {label}", f"{type(fit.error).__name__}: {fit.error}")
    if fit.runtime_warnings:
        return Outcome("bad", "RuntimeWarning leaked", "; ".join(fit.runtime_warnings)[:500])
    got = fit.estimator
    if not np.array_equal(np.asarray(got), np.asarray(expected)):
        return Outcome("bad", f"{label} differs from its reference", f"{got!r} vs {expected!r}"[:500])
    return Outcome("ok", f"{label} as its reference")


def _fitted(config, X, y, **overrides):
    """The fit of ``config`` on ``(X, y)`` (all warnings recorded), as a :class:`Fit`."""
    return _attempt(lambda: make_estimator(config, **overrides).fit(X, y))


def _predictions_of(fit, X):
    est = fit.estimator
    return np.concatenate([np.asarray(est.coef_).ravel(), np.asarray(est.decision_function(X)).ravel()])


def run_messages(case):
    """The case's input: a clear error that names it, or the same answer as its plainer form."""
    kind, config, spec = case["kind"], case["config"], case["data"]
    if kind in ("mixed_labels", "mixed_labels_metric", "score_matrix_metric"):
        X, y = make_data(spec)
        if kind == "mixed_labels":
            fit = _fitted(config, X, _mixed(y, case))
            pattern = r"\by\b.*mix.*string.*number"
        elif kind == "mixed_labels_metric":
            fit = _attempt(_metric_call, config["estimator"], _mixed(y, case), X[:, 0])
            pattern = r"\by_true\b.*mix.*string.*number"
        else:
            scores = np.column_stack([X[:, j % X.shape[1]] for j in range(case["columns"])])
            fit = _attempt(_metric_call, config["estimator"], y, scores)
            name = "y_pred" if config["estimator"] == "rank_risk_score" else "y_score"
            pattern = rf"\b{name}\b.*shape"
        return _refused(fit, pattern)
    if kind in ("sparse_multilabel", "two_valued_multilabel", "sparse_multilabel_metric"):
        X, Y = make_multilabel(spec)
        if kind == "sparse_multilabel_metric":
            S = X @ np.random.default_rng(spec["seed"]).normal(size=(spec["d"], spec["labels"]))
            expected = _attempt(_metric_call, config["estimator"], Y, S, average=case["average"])
            fit = _attempt(_metric_call, config["estimator"], _SPARSE[case["sparse"]](Y), S,
                           average=case["average"])
            if expected.error is not None:
                return Outcome("bad", "probe failure: the dense reference failed", str(expected.error))
            return _same_outcome(fit, expected.estimator, "score of a sparse y_true")
        low, high = case["values"]
        given = _SPARSE[case["sparse"]](Y) if kind == "sparse_multilabel" else np.where(Y == 1, high, low)
        reference, fit = _fitted(config, X, Y), _fitted(config, X, given)
        if reference.error is not None:  # a refusal of the configuration: the other form must refuse it too
            if fit.error is None or str(fit.error) != str(reference.error):
                return Outcome("bad", "refused as an indicator of 0 and 1 only", str(reference.error)[:300])
            return error_outcome(reference, r".")
        if kind == "sparse_multilabel":
            if fit.error is not None:  # a refusal must ask for a dense y
                return error_outcome(fit, r"dense|toarray")
            same = np.array_equal(_predictions_of(fit, X), _predictions_of(reference, X)) and np.array_equal(
                fit.estimator.predict(X), reference.estimator.predict(X))
            return Outcome("ok", "the dense fit") if same else Outcome("bad", "a sparse y fits otherwise")
        if fit.error is not None:
            return error_outcome(fit, r"\by\b.*(0 and 1|indicator)")
        predicted = fit.estimator.predict(X)
        expected = np.where(reference.estimator.predict(X) == 1, high, low)
        if not np.array_equal(_predictions_of(fit, X), _predictions_of(reference, X)):
            return Outcome("bad", "another indicator fits otherwise")
        if not np.array_equal(predicted, expected) or predicted.dtype != given.dtype:
            return Outcome("bad", "predict answers outside y's values",
                           f"predict gave {np.unique(predicted).tolist()} ({predicted.dtype}) for y of "
                           f"{[low, high]}")
        if fit.estimator.score(X, given) != reference.estimator.score(X, Y):
            return Outcome("bad", "score differs from the indicator's")
        return Outcome("ok", "predicts in y's values")
    # the region in other words
    X, y = make_data(spec)
    region = _region_kwargs(case)
    pattern = _region_pattern(case)
    a, b = case["tpr_min"], case["fpr_max"]
    if kind == "region_metric":
        s = X @ np.random.default_rng(spec["seed"]).normal(size=spec["d"])
        if case["scorer"]:
            from sklearn.linear_model import LogisticRegression

            from skrank.metrics import make_two_way_partial_auc_scorer

            model = LogisticRegression().fit(X, y)
            s = model.decision_function(X)
            fit = _attempt(lambda: make_two_way_partial_auc_scorer(**region)(model, X, y))
        else:
            from skrank.metrics import two_way_partial_auc_score

            fit = _attempt(two_way_partial_auc_score, y, s, **region)
        if pattern is not None:
            return _refused(fit, pattern)
        if case["mode"] == "shifted":  # no floor: the one-way partial AUC over the range
            expected = _metric_call("partial_auc_score", y, s, fpr_range=region["fpr_range"])
        else:
            expected = _metric_call("two_way_partial_auc_score", y, s, tpr_min=a, fpr_max=b)
        return _same_outcome(fit, expected, "score of the region")
    # the estimator: its plain form is fpr_range=(0, b) (the default range when the mode names neither)
    if pattern is not None and case["mode"] != "neither":
        return _refused(_fitted(config, X, y, **region), pattern)
    if case["mode"] == "neither":
        plain = {"tpr_min": a, "fpr_range": (0.0, 0.5) if a > 0.0 else (0.05, 0.5)}
    elif case["mode"] == "shifted":
        plain = {"tpr_min": a, "fpr_range": region["fpr_range"]}
    else:
        plain = {"tpr_min": a, "fpr_range": (0.0, b)}
    reference = _fitted(config, X, y, **plain)
    fit = _fitted(config, X, y, **region)
    if reference.error is not None:
        if fit.error is None or str(fit.error) != str(reference.error):
            return Outcome("bad", "refused in one form only", f"{reference.error} / {fit.error}"[:300])
        return error_outcome(fit, ERROR_PATTERNS["shape"])
    if fit.error is not None:
        return Outcome("bad", "refused a valid region", f"{type(fit.error).__name__}: {fit.error}")
    if not np.array_equal(_predictions_of(fit, X), _predictions_of(reference, X)):
        return Outcome("bad", "the region in other words fits otherwise")
    return Outcome("ok", "the fit of fpr_range=(0, fpr_max)")


RUNNERS = {
    "nan_inf": run_nan_inf,
    "feature_scale": run_feature_scale,
    "weight_scale": run_weight_scale,
    "degenerate": run_degenerate,
    "input_kind": run_input_kind,
    "determinism": run_determinism,
    "streams": run_streams,
    "solvers": run_solvers,
    "conventions": run_conventions,
    "constant_model": run_constant_model,
    "silent_wrong": run_silent_wrong,
    "messages": run_messages,
}


def run_case(case):
    """Run one case and return its :class:`Outcome` (a failure of the probe itself is reported as such)."""
    start = time.perf_counter()
    try:
        with np.errstate(divide="warn", over="warn", invalid="warn", under="ignore"):
            outcome = RUNNERS[case["area"]](case)
    except TimeoutError as exc:
        outcome = Outcome("bad", f"hang: {exc}")
    except Exception as exc:  # a bug of the probe, not of skrank: reported, never hidden
        outcome = Outcome("bad", f"probe failure: {type(exc).__name__}", traceback.format_exc()[-1500:])
    outcome.seconds = time.perf_counter() - start
    return outcome


def reproduction(case):
    """A one-line reproduction of the case with the probe script."""
    return f"OMP_NUM_THREADS=1 .venv/bin/python benchmarks/probe_robustness.py --case {case['id']}"
