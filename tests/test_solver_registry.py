"""The table of rank-risk solvers (skrank.solvers.registry) and the estimators that read it."""

import re
import warnings
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.base import clone

from skrank import AveragePrecisionClassifier, PartialAUCClassifier
from skrank.datafits.partial_auc import PartialAUCObjective
from skrank.datafits.rank_risk import RankRisk
from skrank.estimators import (
    AveragePrecisionClassifierCV,
    PartialAUCClassifierCV,
    RankADMMClassifier,
    RankADMMRegressor,
    SpectralRiskClassifier,
    SpectralRiskRegressor,
    rank_admm,
    spectral_risk,
)
from skrank.losses import get_loss
from skrank.pairwise_losses import get_pairwise_loss
from skrank.penalties import get_penalty
from skrank.risks import ERM, HumanAligned, RankedRange, Superquantile
from skrank.solvers import SolverResult
from skrank.solvers.registry import (
    ESTIMATORS,
    SOLVERS,
    auto_preference,
    choose_solver,
    doc_tables,
    solve,
    solvers_for,
    streaming_solvers,
)

RISKS = [ERM(), Superquantile(q=0.6), RankedRange(), HumanAligned()]
LOSSES = ["logistic", "hinge", "huber", "absolute"]
PENALTIES = [("l2", 0.1), ("l1", 0.05), ("l2", 0.0)]


@pytest.mark.parametrize("module, Est", [(rank_admm, rank_admm.RankADMMRegressor),
                                         (spectral_risk, spectral_risk.SpectralRiskRegressor)])
def test_every_estimator_solver_is_in_the_table(module, Est):
    for name in module._SOLVERS:
        if name == "auto":
            continue
        assert callable(SOLVERS[name].load())
    assert Est._AUTO and set(Est._AUTO) <= set(module._SOLVERS)


def _problem(loss):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(30, 3))
    f = X @ np.array([1.0, -1.0, 0.5])
    if loss.task == "classification":
        return X, np.where(f + rng.normal(size=30) > 0, 1.0, -1.0)
    return X, f + rng.normal(size=30)


@pytest.mark.parametrize("name", sorted(SOLVERS))
def test_a_solver_runs_on_what_the_table_says_it_fits(name):
    """The table is truthful: a problem it accepts runs; the others are refused with a reason."""
    info = SOLVERS[name]
    accepted = 0
    for risk in RISKS:
        for loss_name in LOSSES:
            loss = get_loss(loss_name)
            for pen_name, alpha in PENALTIES:
                penalty = get_penalty(pen_name, alpha)
                reason = info.unsupported(risk, loss, penalty)
                if reason is not None:
                    assert reason.startswith(f"solver={name!r} needs")
                    continue
                accepted += 1
                X, y = _problem(loss)
                designs = [X, sp.csr_matrix(X)] if accepted == 1 and info.sparse else [X]
                for design in designs:
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        result = info.load()(RankRisk(design, y, risk, loss), penalty, max_iter=2,
                                             **info.options)
                    assert isinstance(result, SolverResult)
                    assert np.all(np.isfinite(result.coef))
    assert accepted > 0


@pytest.mark.parametrize("name", [n for n in sorted(SOLVERS) if not SOLVERS[n].closed_form
                                  and SOLVERS[n].load().__code__.co_varnames[0] == "datafit"])
def test_a_weighted_datafit_runs_only_where_the_table_promises_weights(name):
    info = SOLVERS[name]
    loss = get_loss("squared_hinge" if name != "ipm" else "hinge")
    risk = RankedRange(0.1, 0.6) if name in ("dca", "agd") else Superquantile(0.5)
    X, y = _problem(loss)
    data = RankRisk(X, y, risk, loss, sample_weight=np.linspace(0.5, 1.5, X.shape[0]))
    penalty = get_penalty("l2", 0.1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if info.sample_weight:
            assert isinstance(info.load()(data, penalty, max_iter=2, **info.options), SolverResult)
        else:
            with pytest.raises(ValueError, match="does not take sample_weight"):
                info.load()(data, penalty, max_iter=2, **info.options)


def test_the_table_refuses_with_the_reason():
    logistic, hinge = get_loss("logistic"), get_loss("hinge")
    l2, none = get_penalty("l2", 0.1), get_penalty("l2", 0.0)
    assert "smooth loss" in SOLVERS["newton"].unsupported(ERM(), hinge, l2)
    assert "l2 part" in SOLVERS["newton"].unsupported(ERM(), get_loss("huber"), none)
    assert SOLVERS["newton"].unsupported(ERM(), get_loss("huber"), l2) is None
    assert "convex spectral" in SOLVERS["newton"].unsupported(RankedRange(), logistic, l2)
    assert "ranked-range" in SOLVERS["dca"].unsupported(Superquantile(), logistic, l2)
    assert "n only" in SOLVERS["prospect"].unsupported(HumanAligned(), logistic, l2)
    assert "strongly convex" in SOLVERS["sorel"].unsupported(ERM(), logistic, none)


def test_auto_takes_the_first_that_fits_and_a_refusal_names_one_that_does():
    logistic, hinge, l2 = get_loss("logistic"), get_loss("hinge"), get_penalty("l2", 0.1)
    assert choose_solver("auto", ("newton", "admm"), ERM(), logistic, l2).name == "newton"
    assert choose_solver("auto", ("newton", "admm"), ERM(), hinge, l2).name == "admm"
    assert choose_solver("auto", ("newton", "admm"), RankedRange(), logistic, l2).name == "admm"
    with pytest.raises(ValueError, match="smooth loss.*Use solver='admm'"):
        choose_solver("newton", ("newton", "admm"), ERM(), hinge, l2)
    assert choose_solver("dca", ("newton", "admm"), RankedRange(), hinge, l2).name == "dca"


# --- every estimator reads its solvers from the table --------------------------------------------
ALL = [RankADMMClassifier, RankADMMRegressor, SpectralRiskClassifier, SpectralRiskRegressor,
       PartialAUCClassifier, AveragePrecisionClassifier]
RANKERS = [PartialAUCClassifier, AveragePrecisionClassifier]


def _solver_options(constraints):
    # the current names: former ones are accepted as deprecated aliases
    (options,) = [c for c in constraints["solver"] if hasattr(c, "options")]
    return set(options.options) - set(options.deprecated)


@pytest.mark.parametrize("Est", ALL, ids=lambda e: e.__name__)
def test_the_solver_options_auto_and_streaming_solvers_are_the_tables(Est):
    table = solvers_for(Est.__name__)
    assert _solver_options(Est._parameter_constraints) == {"auto", *table}
    assert Est._AUTO == auto_preference(table)
    assert set(Est._STREAMING_SOLVERS) == set(streaming_solvers(table))
    for name in table:
        est = Est(solver=name)
        assert hasattr(est, "partial_fit") == table[name].streaming
        assert est.__sklearn_tags__().array_api_support == table[name].external


@pytest.mark.parametrize("Est", ALL + [PartialAUCClassifierCV, AveragePrecisionClassifierCV],
                         ids=lambda e: e.__name__)
def test_the_docstrings_list_the_tables_solvers(Est):
    base = getattr(Est, "_base_class", None) or Est
    (listed,) = re.findall(r"^ *solver : \{([^}]*)\}", Est.__doc__, flags=re.M)
    assert {name.strip().strip('"') for name in listed.split(",")} == {"auto", *solvers_for(base.__name__)}
    if base is not Est:
        assert _solver_options(Est._parameter_constraints) == _solver_options(base._parameter_constraints)


def test_the_docs_tables_are_the_registrys():
    # conventions.rst includes the tables that doc/conf.py writes from the registry at build time
    doc = Path(__file__).resolve().parents[1] / "doc"
    assert ".. include:: _generated/solver_tables.rst" in (doc / "conventions.rst").read_text()
    assert "doc_tables()" in (doc / "conf.py").read_text()
    tables = doc_tables()
    for name in ESTIMATORS:
        for solver in solvers_for(name):
            assert f"   * - ``{solver}``\n" in tables


def test_the_docs_tables_are_valid_restructuredtext():
    docutils_core = pytest.importorskip("docutils.core")
    # the tables parse as reStructuredText without a warning or an error
    settings = {"report_level": 2, "halt_level": 5, "warning_stream": False}
    doctree = docutils_core.publish_doctree(doc_tables(), settings_overrides=settings)
    messages = [node.astext() for node in doctree.findall() if node.tagname == "system_message"
                and int(node["level"]) >= 2]
    assert not messages, messages
    assert sum(node.tagname == "table" for node in doctree.findall()) == 3


def _ranking_problem(n=120):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(n, 3))
    y = (X @ np.array([1.0, -1.0, 0.5]) + rng.normal(size=n) > 0.8).astype(int)
    return X, y


def _ranking_params(Est, info):
    params = dict(solver=info.name, max_iter=2, random_state=0)
    if info.full_range:
        params.update(fpr_range=(0, 1), loss="squared")
    if info.from_zero:
        params.update(fpr_range=(0, 0.5))
    return params


@pytest.mark.parametrize("Est, name", [(Est, name) for Est in RANKERS for name in solvers_for(Est.__name__)],
                         ids=lambda v: getattr(v, "__name__", v))
def test_a_ranking_solver_takes_what_the_table_says(Est, name):
    """Weights, rank_weight < 1, link='sigmoid', a Dask X: each fits where the table says, else is refused."""
    da = pytest.importorskip("dask.array")
    info = solvers_for(Est.__name__)[name]
    X, y = _ranking_problem()
    est = Est(**_ranking_params(Est, info))
    weights = np.random.default_rng(1).integers(1, 4, size=y.size).astype(float)
    cases = [("does not take sample_weight", info.sample_weight, {}, dict(sample_weight=weights)),
             ("needs rank_weight=1.0", info.anchored, dict(rank_weight=0.5), {})]
    if Est is PartialAUCClassifier:
        cases.append(("needs link='identity'", info.anchored, dict(link="sigmoid", rank_weight=1.0), {}))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for message, takes, params, fit_params in cases:
            variant = clone(est).set_params(**params)
            if takes:
                variant.fit(X, y, **fit_params)
                assert variant._solver == name
            else:
                with pytest.raises(ValueError, match=f"solver={name!r} .*{re.escape(message)}.* Use solver="):
                    variant.fit(X, y, **fit_params)
        if info.sparse:
            assert clone(est).fit(sp.csr_matrix(X), y)._solver == name
        Xd = da.from_array(X, chunks=(40, 3))
        if info.external:
            assert clone(est).fit(Xd, y)._solver == name
        else:
            with pytest.raises(ValueError, match=f"solver={name!r} needs X in memory"):
                clone(est).fit(Xd, y)


def test_partial_auc_solvers_of_the_full_auc_name_the_range_and_the_loss():
    X, y = _ranking_problem()
    for name, info in solvers_for("PartialAUCClassifier").items():
        if not info.full_range:
            continue
        partial = r"needs fpr_range=\(0, 1\) \(got \(0.05, 0.5\)\)\. Use solver='lbfgs'\."
        with pytest.raises(ValueError, match=partial):
            PartialAUCClassifier(solver=name).fit(X, y)
        with pytest.raises(ValueError, match=r"needs loss='squared' \(got 'logistic'\)"):
            PartialAUCClassifier(solver=name, fpr_range=(0, 1), loss="logistic").fit(X, y)


def test_auto_takes_a_costly_only_solver_for_costly_problems_alone():
    solvers = solvers_for("PartialAUCClassifier")
    logistic, squared = get_pairwise_loss("logistic"), get_pairwise_loss("squared")
    order = auto_preference(solvers)
    assert order == ("exact", "agd-sbcd", "lbfgs")

    def auto(loss, **problem):
        return choose_solver("auto", order, None, loss, None, solvers=solvers, **problem).name

    partial = dict(fpr_range=(0.05, 0.5))
    assert auto(logistic, **partial) == "lbfgs"
    assert auto(logistic, costly=True, **partial) == "agd-sbcd"
    assert auto(logistic, costly=True, weighted=True, **partial) == "lbfgs"  # agd-sbcd takes no weights
    assert auto(logistic, costly=True, external="a Dask array", **partial) == "lbfgs"
    assert auto(logistic, costly=True, rank_weight=0.5, **partial) == "lbfgs"
    assert auto(squared, fpr_range=(0.0, 1.0)) == "exact"
    assert auto_preference(solvers_for("AveragePrecisionClassifier")) == ("soap", "lbfgs")


def test_the_rank_risk_rows_serve_their_estimators_only():
    assert set(SOLVERS) == set(solvers_for(("RankADMMClassifier", "SpectralRiskClassifier")))
    assert solvers_for("PartialAUCClassifier")["dca"].function == "splitting.pauc_dca:dca_partial_auc"
    assert SOLVERS["dca"].function == "splitting.dca:dca"  # one name, two estimators' solvers
    with pytest.raises(ValueError, match="no estimator"):
        solvers_for("LogisticRegression")


def test_a_former_solver_name_still_fits_with_a_future_warning():
    from skrank.estimators import RankADMMRegressor
    from skrank.solvers.registry import RENAMED

    assert all(new in SOLVERS and old not in SOLVERS for old, new in RENAMED.items())
    rng = np.random.default_rng(0)
    X = rng.normal(size=(80, 3))
    y = X @ np.array([1.0, -1.0, 0.5]) + 0.1 * rng.normal(size=80)
    new = RankADMMRegressor(solver="lsvrg-nu", max_iter=20, random_state=0).fit(X, y)
    with pytest.warns(FutureWarning, match="solver='lsvrg_nu' is now called solver='lsvrg-nu'"):
        old = RankADMMRegressor(solver="lsvrg_nu", max_iter=20, random_state=0).fit(X, y)
    np.testing.assert_array_equal(old.coef_, new.coef_)
    with pytest.raises(ValueError, match="lsvrg-nu"):
        RankADMMRegressor(solver="lsvrg-nuu").fit(X, y)


def test_solve_checks_what_the_row_needs_of_the_datafit_and_the_penalty():
    X, y = _problem(get_loss("logistic"))
    ranking = solvers_for("PartialAUCClassifier")
    objective = PartialAUCObjective(X, y, (0.0, 1.0), get_pairwise_loss("squared"), 0.1)
    exact = solve(ranking["exact"], objective, objective.penalty, coef_init=None, tol=1e-4)  # options ignored
    assert exact.converged and exact.objective == pytest.approx(objective.value(exact.coef))
    # a row asks its datafit for what it declares: a rank risk is not a partial-AUC objective
    with pytest.raises(TypeError, match=r"solver='exact' needs datafit\.positive, datafit\.fpr_range"):
        solve(ranking["exact"], RankRisk(X, y, ERM(), get_loss("logistic")), get_penalty("l2", 0.1))
    with pytest.raises(TypeError, match=r"solver='admm' needs datafit\.objective"):
        solve(SOLVERS["admm"], objective, objective.penalty)
    # the penalty of a datafit that holds its own is that one, no other
    with pytest.raises(TypeError, match=r"the l2 penalty of its datafit, alpha=0\.1; got l1=0\.0, l2=0\.2"):
        solve(ranking["lbfgs"], objective, get_penalty("l2", 0.2), coef_init=np.zeros(3))
