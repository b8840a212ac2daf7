"""One table of every solver, the estimators it serves and what each fits.

Every estimator reads its rows of :data:`_TABLE` (:func:`solvers_for`):
the ``solver`` options it validates, the order in which ``solver="auto"``
tries them (:func:`auto_preference`), the solvers with ``partial_fit``
(:func:`streaming_solvers`), the checks of a problem against a solver and
their errors (:meth:`SolverInfo.unsupported`, :func:`choose_solver`), and
the function it runs.  A solver states here, once, which risks, losses,
penalties, sample weights and kinds of ``X`` it handles; no estimator
repeats it, and the tables of ``doc/conventions.rst`` are generated from it
(:func:`doc_tables`, checked by the tests).
"""

import warnings
from dataclasses import dataclass, field
from importlib import import_module

#: The estimators of the table, under the names its rows give them.
RANK_ADMM = ("RankADMMClassifier", "RankADMMRegressor")
SPECTRAL_RISK = ("SpectralRiskClassifier", "SpectralRiskRegressor")
PARTIAL_AUC = ("PartialAUCClassifier",)
AVERAGE_PRECISION = ("AveragePrecisionClassifier",)
ESTIMATORS = RANK_ADMM + SPECTRAL_RISK + PARTIAL_AUC + AVERAGE_PRECISION

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
    "convex_pairwise": (lambda loss: loss.is_convex,
                        "a convex pairwise loss ('squared_hinge', 'logistic' or 'squared')"),
    "squared": (lambda loss: loss.is_full_quadratic, "the squared loss"),
}


@dataclass(frozen=True)
class SolverInfo:
    """What one solver fits, the estimators that offer it, and where its function lives.

    Parameters
    ----------
    name : str
        The estimators' name for it (``solver=name``).
    function : str
        ``"module:function"`` under :mod:`skrank.solvers`.
    estimators : tuple of str
        The estimators that offer it (class names, :data:`ESTIMATORS`).
    risks : {"any", "convex", "fixed_weights", "ranked_range", "one_threshold"}, default="any"
        The rank risks it minimises (the rank-risk estimators; the ranking
        classifiers' objective is their metric's surrogate).
    losses : {"any", "smooth", "piecewise_linear", "convex_pairwise", "squared"}, default="any"
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
        :func:`skrank.backends.dispatch.make_design`).
    dask_targets : bool, default=False
        Whether it takes the targets of a Dask ``X`` as a Dask array (it
        keeps them on the workers where it can); the others get them
        gathered.
    sparse : bool, default=True
        Whether it takes a SciPy sparse ``X``.
    stochastic : bool, default=False
        Whether it draws samples: it takes ``random_state`` (and the
        estimator's step and batch options).
    streaming : bool, default=False
        Whether it runs on batches of data: the estimators offer
        ``partial_fit`` with it.
    anchored : bool, default=False
        Whether it fits the ranking classifiers' objective mixed with the
        logistic loss (``rank_weight < 1``) and sigmoid scores
        (``link="sigmoid"``); the papers' solvers fit the rank surrogate of
        ``X w`` alone.
    full_range : bool, default=False
        Whether it needs ``fpr_range=(0, 1)`` with the squared loss (the
        full-AUC square loss).
    two_way : bool, default=False
        Whether it fits two-way partial-AUC ranges (``tpr_min > 0``).
    from_zero : bool, default=False
        Whether it needs ``fpr_range=(0, fpr_max)``.
    costly_only : bool, default=False
        Whether ``solver="auto"`` takes it only where one exact full-batch
        pass of the objective would be too costly (the estimator decides).
    closed_form : bool, default=False
        Whether it is a closed form, called with the datafit and the
        penalty alone (no start, ``max_iter`` nor ``tol``).
    datafit_needs : tuple of str, default=("weighted", "objective")
        The attributes it asks of its datafit (:func:`solve` checks them).
    l2_in_datafit : bool, default=False
        Whether its datafit holds the penalty: an l2 penalty of the
        datafit's ``alpha``, whose strength the solver reads from the
        penalty (the ranking classifiers' datafits).
    paper_start : bool, default=False
        Whether a fit that is not warm started leaves its start to it
        (``coef_init=None``: the start of its paper) rather than to the
        estimator's default start.
    default_loss : str or None, default=None
        The loss that ``loss=None`` means with it (its paper's); None for
        the estimator's own default.
    auto : int or None, default=None
        Its place in the order in which ``solver="auto"`` tries the
        solvers (lower first; the last must fit every problem the
        estimator accepts); None when ``"auto"`` never takes it.
    unit : str, default=""
        One unit of ``max_iter``.
    tol : str, default=""
        What ``tol`` bounds.
    merges_repeats : bool, default=False
        Whether its result depends on the objective alone (a deterministic
        solver that certifies the optimum of a convex objective), so that
        a fit may merge identical rows into one row of their summed weight
        where the datafit allows it (:mod:`skrank.estimators._repeated_rows`).
    """

    name: str
    function: str
    estimators: tuple = ()
    risks: str = "any"
    losses: str = "any"
    curvature: bool = False
    strongly_convex: bool = False
    penalized: bool = False
    options: dict = field(default_factory=dict)
    sample_weight: bool = False
    external: bool = False
    dask_targets: bool = False
    sparse: bool = True
    stochastic: bool = False
    streaming: bool = False
    anchored: bool = False
    full_range: bool = False
    two_way: bool = False
    from_zero: bool = False
    costly_only: bool = False
    closed_form: bool = False
    datafit_needs: tuple = ("weighted", "objective")
    l2_in_datafit: bool = False
    paper_start: bool = False
    default_loss: str = None
    auto: int = None
    unit: str = ""
    tol: str = ""
    merges_repeats: bool = False

    def unsupported(self, risk, loss, penalty, weighted=False, external=None, *, fpr_range=(0.0, 1.0),
                    rank_weight=1.0, link="identity", tpr_min=0.0):
        """Why this solver cannot fit the problem, or None when it can.

        Parameters
        ----------
        risk : skrank.risks.BaseRisk or None
            The rank risk (None for the ranking classifiers).
        loss : skrank.losses.Loss or skrank.pairwise_losses.PairwiseLoss
            The loss.
        penalty : skrank.penalties.Penalty or None
            The penalty (None for the ranking classifiers, whose l2 penalty
            every solver fits).
        weighted : bool, default=False
            Whether the fit has sample weights.
        external : str or None, default=None
            What ``X`` is when it is external (``"a Dask array"``, from
            :func:`skrank.backends.dispatch.external_kind`); None for data
            in memory.
        fpr_range : tuple of two floats, default=(0.0, 1.0)
            The partial-AUC range.
        rank_weight : float, default=1.0
            The ranking classifiers' weight of the rank surrogate against
            the logistic loss.
        link : {"identity", "sigmoid"}, default="identity"
            The scores the partial-AUC surrogate ranks.
        tpr_min : float, default=0.0
            The true-positive-rate floor of a two-way partial-AUC range.

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
        if not self.anchored and rank_weight < 1.0:
            also = " and link='identity'" if link == "sigmoid" else ""
            return (f"solver={self.name!r} minimises the rank surrogate alone and needs "
                    f"rank_weight=1.0{also}; rank_weight={rank_weight:g} mixes in the logistic loss, "
                    "which it does not fit.")
        if tpr_min > 0.0 and not self.two_way:
            return (f"solver={self.name!r} needs tpr_min=0 (a one-way range); tpr_min={tpr_min:g} asks for a "
                    "two-way range, which it does not fit.")
        if self.from_zero and fpr_range[0] > 0.0:
            return (f"solver={self.name!r} needs fpr_range=(0, fpr_max); got fpr_range={tuple(fpr_range)}.")
        if not self.anchored and link == "sigmoid":
            return (f"solver={self.name!r} ranks the linear scores X w and needs link='identity'; "
                    "link='sigmoid' ranks sigmoid(X w + b), which it does not fit.")
        if self.full_range:
            problems = []
            if tuple(fpr_range) != (0.0, 1.0):
                problems.append(f"fpr_range=(0, 1) (got {tuple(fpr_range)})")
            if not loss.is_full_quadratic:
                problems.append(f"loss='squared' (got {loss.name!r})")
            if problems:
                return (f"solver={self.name!r} minimises the full-AUC square loss and needs "
                        f"{' and '.join(problems)}.")
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
        """The solver function, imported on first use: ``f(datafit, penalty, **options)``.

        Returns
        -------
        callable
            Returns a :class:`skrank.solvers.SolverResult`.
        """
        module, function = self.function.split(":")
        return getattr(import_module(f"skrank.solvers.{module}"), function)


def solve(info, datafit, penalty, **options):
    """Run the solver of the row ``info`` on ``datafit`` and ``penalty``, after checking the row's needs.

    ``datafit`` must have the row's ``datafit_needs`` and, with
    ``l2_in_datafit``, ``penalty`` must be the l2 penalty of the datafit's
    ``alpha`` (``datafit.penalty``); a TypeError says what is missing.
    ``options`` are the solver's keywords (``coef_init``, ``max_iter``,
    ``tol``, ``verbose``, its own); the row's ``options`` are added, and a
    closed form takes none.  Returns a :class:`skrank.solvers.SolverResult`.
    """
    missing = [f"datafit.{name}" for name in info.datafit_needs if not hasattr(datafit, name)]
    missing += [f"penalty.{name}" for name in ("l1", "l2") if not hasattr(penalty, name)]
    if missing:
        raise TypeError(f"solver={info.name!r} needs {', '.join(missing)}; got a {type(datafit).__name__} "
                        f"and a {type(penalty).__name__}.")
    if info.l2_in_datafit and (penalty.l1 != 0.0 or penalty.l2 != datafit.alpha):
        raise TypeError(f"solver={info.name!r} needs the l2 penalty of its datafit, alpha={datafit.alpha!r}; "
                        f"got l1={penalty.l1!r}, l2={penalty.l2!r}.")
    return info.load()(datafit, penalty, **({} if info.closed_form else {**options, **info.options}))


_CERTIFIED_GAP = "the certified relative gap ``(F - F*) / |F|``"
_EPOCHS = "the relative change of ``F`` over each of the last five epochs"
_OUTER_CHANGE = "the change of the exact ``F`` over one outer iteration, relative to ``max(1, |F|)``"
#: What the partial-AUC solvers ask of their datafit (a PartialAUCObjective), which holds the l2 penalty.
_RANGE = dict(datafit_needs=("X", "positive", "fpr_range", "loss", "value"), l2_in_datafit=True)

_TABLE = (
    SolverInfo("newton", "full_batch.newton:smoothed_newton",
               RANK_ADMM + SPECTRAL_RISK, "convex", losses="smooth",
               curvature=True, sample_weight=True, external=True, dask_targets=True, auto=0,
               merges_repeats=True, unit="one Newton step", tol=_CERTIFIED_GAP),
    SolverInfo("ipm", "full_batch.interior_point:interior_point",
               RANK_ADMM, "one_threshold", losses="piecewise_linear",
               penalized=True, sample_weight=True, external=True, auto=1,
               unit="one interior-point iteration", tol=_CERTIFIED_GAP),
    SolverInfo("admm", "splitting.admm:admm", RANK_ADMM + SPECTRAL_RISK, "any", auto=2,
               unit="one ADMM iteration", tol="the scaled KKT residual"),
    SolverInfo("sorel", "stochastic.sorel:sorel",
               SPECTRAL_RISK, "convex", losses="smooth", strongly_convex=True,
               stochastic=True, unit="one outer iteration (about a pass)",
               tol="the relative change of ``F``, the Lagrangian's relative gradient, the relative dual gap"),
    SolverInfo("sgd", "stochastic.sgd:sgd",
               RANK_ADMM + SPECTRAL_RISK, "any", sample_weight=True, stochastic=True,
               streaming=True, unit="one epoch", tol=_EPOCHS),
    SolverInfo("lsvrg", "stochastic.lsvrg:lsvrg", RANK_ADMM + SPECTRAL_RISK, "any", stochastic=True,
               unit="one epoch", tol=_EPOCHS),
    SolverInfo("lsvrg-nu", "stochastic.lsvrg:lsvrg", RANK_ADMM, "any", options={"sampling": "nonuniform"},
               stochastic=True, unit="one epoch", tol=_EPOCHS),
    SolverInfo("prospect", "stochastic.prospect:prospect", SPECTRAL_RISK, "fixed_weights", stochastic=True,
               unit="one epoch", tol=_EPOCHS),
    SolverInfo("dca", "splitting.dca:dca", RANK_ADMM, "ranked_range", unit="one outer iteration",
               tol=("the larger of the decrease of ``F`` over one outer iteration, relative to "
                    "``|F|``, and the inner KKT residual")),
    SolverInfo("agd", "stochastic.sorr_agd:sorr_agd", RANK_ADMM, "ranked_range", stochastic=True,
               unit="one outer iteration",
               tol="the decrease of the best ``F`` over each of the last three outer iterations"),
    SolverInfo("lbfgs", "full_batch.lbfgs:lbfgs",
               PARTIAL_AUC + AVERAGE_PRECISION, sample_weight=True, external=True, anchored=True,
               datafit_needs=("value_and_grad",), l2_in_datafit=True, two_way=True, auto=2,
               unit="one L-BFGS iteration",
               tol="the largest gradient entry in units of the features' root mean squares, or a relative "
                   "decrease of ``F`` per iteration below ``tol / 1000``"),
    SolverInfo("exact", "full_batch.auc_closed_form:exact_square_auc",
               PARTIAL_AUC, losses="squared", sample_weight=True,
               external=True, full_range=True, closed_form=True, default_loss="squared", auto=0, **_RANGE,
               unit="none (a closed form)", tol="none (a closed form)"),
    SolverInfo("agd-sbcd", "stochastic.sbcd:agd_sbcd", PARTIAL_AUC, losses="convex_pairwise", stochastic=True,
               costly_only=True, default_loss="squared_hinge", auto=1, unit="one outer iteration", **_RANGE,
               tol=_OUTER_CHANGE),
    SolverInfo("dca", "splitting.pauc_dca:dca_partial_auc",
               PARTIAL_AUC, losses="convex_pairwise", stochastic=True,
               default_loss="squared_hinge", unit="one outer iteration", tol=_OUTER_CHANGE, **_RANGE),
    SolverInfo("prox-dca", "splitting.pauc_dca:prox_dca_partial_auc", PARTIAL_AUC, losses="convex_pairwise",
               stochastic=True, default_loss="squared_hinge", unit="one outer iteration", tol=_OUTER_CHANGE,
               **_RANGE),
    SolverInfo("ppd-sg", "stochastic.ppd:ppd_sg",
               PARTIAL_AUC, losses="squared", sample_weight=True, stochastic=True,
               streaming=True, full_range=True, paper_start=True, default_loss="squared", **_RANGE,
               unit="one stage (``1000 3^k`` steps)",
               tol="the change of the exact ``F`` over one stage, relative to ``|F|``"),
    SolverInfo("ppd-adagrad", "stochastic.ppd:ppd_adagrad", PARTIAL_AUC, losses="squared", sample_weight=True,
               stochastic=True, streaming=True, full_range=True, paper_start=True, default_loss="squared",
               **_RANGE, unit="one stage (``1000 3^k`` steps)",
               tol="the change of the exact ``F`` over one stage, relative to ``|F|``"),
    SolverInfo("sota-s", "stochastic.sota:sota_s",
               PARTIAL_AUC, losses="convex_pairwise", stochastic=True, streaming=True, two_way=True,
               from_zero=True, default_loss="squared_hinge", unit="one epoch (about a pass)", tol=_EPOCHS,
               **_RANGE),
    SolverInfo("soap", "stochastic.soap:soap",
               AVERAGE_PRECISION, sample_weight=True, stochastic=True, streaming=True,
               costly_only=True, auto=1, datafit_needs=("X", "y", "loss", "value"), l2_in_datafit=True,
               unit="one epoch",
               tol="the improvement of the best exact ``F`` over 5 epochs, relative to ``max(1, |F|)``"),
)


def solvers_for(estimator):
    """One estimator's rows of the table, by solver name, in the table's order.

    Parameters
    ----------
    estimator : str or tuple of str
        A name of :data:`ESTIMATORS`, or several (their rows, once each).

    Returns
    -------
    dict of str to SolverInfo
    """
    names = (estimator,) if isinstance(estimator, str) else tuple(estimator)
    unknown = [name for name in names if name not in ESTIMATORS]
    if unknown:
        raise ValueError(f"no estimator {unknown} in the solver table; its estimators are "
                         f"{list(ESTIMATORS)}.")
    return {info.name: info for info in _TABLE if set(info.estimators) & set(names)}


def auto_preference(solvers):
    """The order in which ``solver="auto"`` tries ``solvers`` (a :func:`solvers_for` dict).

    Returns
    -------
    tuple of str
    """
    return tuple(sorted((name for name, info in solvers.items() if info.auto is not None),
                        key=lambda name: solvers[name].auto))


def streaming_solvers(solvers):
    """The names of ``solvers`` (a :func:`solvers_for` dict) that run on batches, with ``partial_fit``.

    Returns
    -------
    tuple of str
    """
    return tuple(name for name, info in solvers.items() if info.streaming)


#: Former solver names, still accepted with a FutureWarning: the names follow one style, words joined
#: by hyphens, as scikit-learn's solvers are ("newton-cg").
RENAMED = {"lsvrg_nu": "lsvrg-nu"}


def renamed_for(solvers):
    """The former names of ``solvers`` (a :func:`solvers_for` dict), accepted as deprecated aliases.

    Returns
    -------
    set of str
    """
    return {old for old, new in RENAMED.items() if new in solvers}


def current_name(requested):
    """``requested``, or the current name of a former one (with a FutureWarning).

    Parameters
    ----------
    requested : str
        A ``solver`` parameter.

    Returns
    -------
    str
    """
    if requested not in RENAMED:
        return requested
    new = RENAMED[requested]
    warnings.warn(f"solver={requested!r} is now called solver={new!r}; the old name will be removed in a "
                  "later release.", FutureWarning, stacklevel=4)
    return new


#: The rank-risk solvers by name (the rows of the rank-risk estimators).
SOLVERS = solvers_for(RANK_ADMM + SPECTRAL_RISK)


def _use(names, external):
    """The sentence that names the solvers to use instead."""
    solvers = " or ".join(f"solver={name!r}" for name in names)
    if external:
        kind = "the full-batch solvers" if len(names) > 1 else "the full-batch solver"
        return f"Use {solvers}, {kind}, or bring X into memory as a NumPy array."
    return f"Use {solvers}."


def choose_solver(requested, preference, risk, loss, penalty, weighted=False, external=None, *, solvers=None,
                  costly=False, **problem):
    """The solver an estimator runs: ``requested``, or for ``"auto"`` the first of ``preference`` that fits.

    Parameters
    ----------
    requested : str
        The estimator's ``solver`` parameter.
    preference : tuple of str
        The estimator's order of preference for ``"auto"``
        (:func:`auto_preference`); its last entry must fit every problem
        the estimator accepts.
    risk, loss, penalty : objects
        The problem (see :meth:`SolverInfo.unsupported`).
    weighted : bool, default=False
        Whether the fit has sample weights.
    external : str or None, default=None
        What ``X`` is when it is external (see :meth:`SolverInfo.unsupported`).
    solvers : dict of str to SolverInfo or None, default=None
        The estimator's rows (:func:`solvers_for`); None for the rank-risk
        solvers, :data:`SOLVERS`.
    costly : bool, default=False
        Whether one exact full-batch pass of the objective would be too
        costly: ``"auto"`` then also takes the solvers marked
        ``costly_only``, which it otherwise passes over.
    **problem
        The ranking classifiers' ``fpr_range``, ``rank_weight``, ``link``
        and ``tpr_min`` (see :meth:`SolverInfo.unsupported`).

    Returns
    -------
    SolverInfo
        The entry of the solver to run.

    Raises
    ------
    ValueError
        When the requested solver cannot fit the problem; the message names
        the ones that can.
    """
    solvers = SOLVERS if solvers is None else solvers
    requested = current_name(requested)

    def reason(info):
        return info.unsupported(risk, loss, penalty, weighted, external, **problem)

    def fits_auto(name):
        info = solvers[name]
        return (costly or not info.costly_only) and reason(info) is None

    if requested == "auto":
        for name in preference:
            if fits_auto(name):
                return solvers[name]
        if external:
            raise ValueError(
                f"no full-batch solver for {external} fits this problem: "
                + " ".join(reason(solvers[name]) for name in preference if solvers[name].external)
                + " Bring X into memory as a NumPy array to use the other solvers."
            )
        if weighted:
            exact = [name for name in preference if solvers[name].sample_weight]
            others = [info.name for info in solvers.values() if info.sample_weight and info.name not in exact
                      and reason(info) is None]
            hint = (f" solver={others[0]!r} takes sample weights for it (a stochastic baseline)."
                    if others else "")
            raise ValueError(
                f"sample_weight needs one of the solvers {exact}, and none of them fits this problem: "
                + " ".join(reason(solvers[name]) for name in exact)
                + hint
            )
        raise ValueError(f"no solver among {preference} fits this problem.")  # pragma: no cover
    info = solvers[requested]
    refusal = reason(info)
    if refusal is not None:
        fits = [name for name in preference if fits_auto(name)]
        if not fits and weighted:
            fits = [other.name for other in solvers.values() if reason(other) is None]
        raise ValueError(f"{refusal} {_use(fits, external and not info.external)}" if fits else refusal)
    return info


# --- the tables of doc/conventions.rst ---------------------------------------------------------------
_YES, _NO = "yes", "--"

_GROUPS = (
    ("The rank-risk estimators", RANK_ADMM + SPECTRAL_RISK),
    ("The ranking classifiers", PARTIAL_AUC + AVERAGE_PRECISION),
)


def _estimator_names(info, group):
    """The estimators of ``group`` that offer the solver; a classifier and its regressor as ``Name*``."""
    served = [name for name in group if name in info.estimators]
    labels = []
    for name in served:
        label = f"``{name}``"
        for pair in (RANK_ADMM, SPECTRAL_RISK):
            if name in pair and set(pair) <= set(served):
                label = f"``{pair[0][:-len('Classifier')]}*``"
        if label not in labels:
            labels.append(label)
    return ", ".join(labels)


_ORDINALS = ("first", "second", "third", "fourth")


def _auto_text(info):
    """Where ``solver="auto"`` takes the solver (in the order of its first estimator)."""
    if info.auto is None:
        return _NO
    order = auto_preference(solvers_for(info.estimators[0]))
    if info.name == order[-1]:
        return "otherwise"
    place = _ORDINALS[order.index(info.name)]
    return f"{place}, where one exact pass is costly" if info.costly_only else f"{place}, where it fits"


def _penalty_text(info):
    """What the solver needs of the penalty, or "any"."""
    needs = []
    if info.strongly_convex:
        needs.append("an l2 part (``alpha > 0``)")
    elif info.curvature:
        needs.append("an l2 part with the Huber loss")
    if info.penalized:
        needs.append("``alpha > 0``")
    return ", ".join(needs) if needs else "any"


def _list_table(title, header, rows):
    """A reStructuredText ``list-table`` of ``rows`` under ``header``."""
    lines = [f".. list-table:: {title}", "   :header-rows: 1", ""]
    for row in [header] + rows:
        lines.append(f"   * - {row[0]}")
        lines.extend(f"     - {cell}" for cell in row[1:])
    return "\n".join(lines)


def doc_tables():
    """The tables of solvers in ``doc/conventions.rst``, as reStructuredText.

    A test checks that the page holds them as this function writes them
    (``print(doc_tables())`` to regenerate them).

    Returns
    -------
    str
    """
    def mark(flag):
        return _YES if flag else _NO

    tables = []
    for title, group in _GROUPS:
        ranking = group == PARTIAL_AUC + AVERAGE_PRECISION
        what = (["losses", "``fpr_range``", "``tpr_min > 0``", "``rank_weight < 1``, ``link='sigmoid'``"]
                if ranking
                else ["risks, losses", "penalty"])
        header = ["solver", "estimators", *what,
                  "``sample_weight``", "sparse ``X``", "Dask, array API ``X``", "``partial_fit``",
                  '``solver="auto"``']
        rows = []
        for info in solvers_for(group).values():
            losses = _LOSS_KINDS[info.losses][1]
            if ranking:
                full = ("(0, 1) only" if info.full_range else "(0, fpr_max) only" if info.from_zero
                        else "any" if PARTIAL_AUC[0] in info.estimators else _NO)
                what = [losses, full, mark(info.two_way), mark(info.anchored)]
            else:
                what = [f"{_RISK_KINDS[info.risks][1]}; {losses}", _penalty_text(info)]
            rows.append([f"``{info.name}``", _estimator_names(info, group), *what, mark(info.sample_weight),
                         mark(info.sparse), mark(info.external), mark(info.streaming), _auto_text(info)])
        tables.append(_list_table(f"{title}: what each solver fits", header, rows))
    rows = [[f"``{info.name}``", _estimator_names(info, ESTIMATORS), info.unit, info.tol] for info in _TABLE]
    tables.append(_list_table("One unit of ``max_iter`` and what ``tol`` bounds",
                              ["solver", "estimators", "one unit of ``max_iter``", "``tol`` bounds"], rows))
    return "\n\n".join(tables) + "\n"
