"""One table of the rank-risk solvers and what each fits.

The estimators of :mod:`skrank.estimators.rank_admm` and
:mod:`skrank.estimators.spectral_risk` check a problem against a solver's
entry before they call it, and ``solver="auto"`` takes the first entry of
the estimator's preference list that fits.  A solver states here, once,
which risks, losses and penalties it handles; no estimator repeats it.
"""

from dataclasses import dataclass, field
from importlib import import_module

#: What a solver's ``risks`` field accepts, and how to say it when a risk is refused.
_RISK_KINDS = {
    "any": (lambda risk: True, "any rank risk"),
    "convex": (lambda risk: risk.is_convex, "a convex spectral risk (nondecreasing rank weights)"),
    "fixed_weights": (lambda risk: not risk.depends_on_values,
                      "rank weights that depend on n only (not ranked-range or human-aligned risks)"),
    "ranked_range": (lambda risk: risk.difference_of_top_sums,
                     "a ranked-range risk (a difference of two convex top-k sums)"),
    "one_threshold": (lambda risk: risk.one_threshold,
                      "ERM, a superquantile or a top-k average (one level of rank weights)"),
}

#: What a solver's ``losses`` field accepts, and how to say it when a loss is refused.
_LOSS_KINDS = {
    "any": (lambda loss: True, "any loss"),
    "smooth": (lambda loss: loss.smooth, "a smooth loss"),
    "piecewise_linear": (lambda loss: len(loss.slopes) > 0,
                         "a piecewise-linear loss (hinge or absolute)"),
}


@dataclass(frozen=True)
class SolverInfo:
    """What one solver fits, and where its function lives.

    Parameters
    ----------
    name : str
        The estimators' name for it (``solver=name``).
    function : str
        ``"module:function"`` under :mod:`skrank.solvers`.
    risks : {"any", "convex", "fixed_weights", "ranked_range", "one_threshold"}
        The risks it minimises.
    losses : {"any", "smooth", "piecewise_linear"}, default="any"
        The losses it handles.
    curvature : bool, default=False
        Whether a smooth loss with linear pieces (Huber) needs an l2 part
        in the penalty (a Newton model needs curvature).
    strongly_convex : bool, default=False
        Whether it needs an l2 part in the penalty.
    penalized : bool, default=False
        Whether it needs a nonzero penalty.
    options : dict, default={}
        Keyword arguments always passed to the function (a variant of
        another solver).
    sample_weight : bool, default=False
        Whether it takes ``sample_weight`` (the risk of the weighted
        empirical distribution, :mod:`skrank.risks`).
    external : bool, default=False
        Whether it takes an external ``X``: a Dask array chunked by rows or
        an array of another array-API library such as CuPy (a full-batch
        solver whose products with ``X`` go through the design of
        :func:`skrank.solvers._external.make_design`).
    """

    name: str
    function: str
    risks: str
    losses: str = "any"
    curvature: bool = False
    strongly_convex: bool = False
    penalized: bool = False
    options: dict = field(default_factory=dict)
    sample_weight: bool = False
    external: bool = False

    def unsupported(self, risk, loss, penalty, weighted=False, external=None):
        """Why this solver cannot fit the problem, or None when it can.

        Parameters
        ----------
        risk : skrank.risks.BaseRisk
            The rank risk.
        loss : skrank.losses.Loss
            The loss.
        penalty : skrank.penalties.Penalty
            The penalty.
        weighted : bool, default=False
            Whether the fit has sample weights.
        external : str or None, default=None
            What ``X`` is when it is external (``"a Dask array"``, from
            :func:`skrank.solvers._external.external_kind`); None for data
            in memory.

        Returns
        -------
        str or None
            A sentence that names what is not supported, or None.
        """
        if weighted and not self.sample_weight:
            return f"solver={self.name!r} does not take sample_weight."
        if external and not self.external:
            return (f"solver={self.name!r} needs X in memory (a NumPy array or a SciPy sparse matrix), "
                    f"not {external}.")
        accepts, needs = _RISK_KINDS[self.risks]
        if not accepts(risk):
            return f"solver={self.name!r} needs {needs}; got {type(risk).__name__}."
        accepts, needs = _LOSS_KINDS[self.losses]
        if not accepts(loss):
            return f"solver={self.name!r} needs {needs}; got {loss.name!r}."
        if self.curvature and loss.linear_pieces and penalty.l2 == 0.0:
            return (f"solver={self.name!r} needs an l2 part in the penalty (alpha > 0) with the "
                    f"{loss.name!r} loss, whose linear pieces give its Newton model no curvature.")
        if self.strongly_convex and penalty.l2 == 0.0:
            return f"solver={self.name!r} needs a strongly convex penalty: an l2 part with alpha > 0."
        if self.penalized and penalty.l1 == 0.0 and penalty.l2 == 0.0:
            return f"solver={self.name!r} needs a penalty (alpha > 0): its certificate bounds by duality."
        return None

    def load(self):
        """The solver function, imported on first use.

        Returns
        -------
        callable
            ``f(X, y, risk, loss, penalty, **options)`` returning a
            :class:`skrank.solvers.SolverResult`.
        """
        module, function = self.function.split(":")
        return getattr(import_module(f"skrank.solvers.{module}"), function)


_TABLE = (
    SolverInfo("newton", "newton:smoothed_newton", "convex", losses="smooth", curvature=True,
               sample_weight=True, external=True),
    SolverInfo("ipm", "interior_point:interior_point", "one_threshold", losses="piecewise_linear",
               penalized=True, sample_weight=True, external=True),
    SolverInfo("admm", "admm:admm", "any"),
    SolverInfo("sorel", "sorel:sorel", "convex", losses="smooth", strongly_convex=True),
    SolverInfo("sgd", "sgd:sgd", "any", sample_weight=True),
    SolverInfo("lsvrg", "lsvrg:lsvrg", "any"),
    SolverInfo("lsvrg_nu", "lsvrg:lsvrg", "any", options={"sampling": "nonuniform"}),
    SolverInfo("prospect", "prospect:prospect", "fixed_weights"),
    SolverInfo("dca", "dca:dca", "ranked_range"),
    SolverInfo("agd", "sorr_agd:sorr_agd", "ranked_range"),
)

#: The rank-risk solvers by name.
SOLVERS = {info.name: info for info in _TABLE}


def choose_solver(requested, preference, risk, loss, penalty, weighted=False, external=None):
    """The solver an estimator runs: ``requested``, or for ``"auto"`` the first of ``preference`` that fits.

    Parameters
    ----------
    requested : str
        The estimator's ``solver`` parameter.
    preference : tuple of str
        The estimator's order of preference for ``"auto"``; its last entry
        must fit every problem the estimator accepts.
    risk, loss, penalty : objects
        The problem (see :meth:`SolverInfo.unsupported`).
    weighted : bool, default=False
        Whether the fit has sample weights.
    external : str or None, default=None
        What ``X`` is when it is external (see :meth:`SolverInfo.unsupported`).

    Returns
    -------
    SolverInfo
        The entry of the solver to run.

    Raises
    ------
    ValueError
        When the requested solver cannot fit the problem; the message names
        one that can.
    """
    if requested == "auto":
        for name in preference:
            if SOLVERS[name].unsupported(risk, loss, penalty, weighted, external) is None:
                return SOLVERS[name]
        if external:
            raise ValueError(
                f"no full-batch solver for {external} fits this problem: "
                + " ".join(SOLVERS[name].unsupported(risk, loss, penalty, weighted, external)
                           for name in preference if SOLVERS[name].external)
                + " Bring X into memory as a NumPy array to use the other solvers."
            )
        if weighted:
            exact = [name for name in preference if SOLVERS[name].sample_weight]
            others = [info.name for info in _TABLE if info.sample_weight and info.name not in exact
                      and info.unsupported(risk, loss, penalty, weighted) is None]
            hint = (f" solver={others[0]!r} takes sample weights for it (a stochastic baseline)."
                    if others else "")
            raise ValueError(
                f"sample_weight needs one of the solvers {exact}, and none of them fits this problem: "
                + " ".join(SOLVERS[name].unsupported(risk, loss, penalty, weighted) for name in exact)
                + hint
            )
        raise ValueError(f"no solver among {preference} fits this problem.")  # pragma: no cover
    info = SOLVERS[requested]
    reason = info.unsupported(risk, loss, penalty, weighted, external)
    if reason is not None:
        fits = [name for name in preference
                if SOLVERS[name].unsupported(risk, loss, penalty, weighted, external) is None]
        if not fits and weighted:
            fits = [other.name for other in _TABLE
                    if other.unsupported(risk, loss, penalty, weighted, external) is None]
        raise ValueError(f"{reason} Use solver={fits[0]!r}." if fits else reason)
    return info
