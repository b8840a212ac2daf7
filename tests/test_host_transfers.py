"""The host transfers of ``n``-vectors in the fits of an array-API ``X``, counted.

A fit on an array of another array-API library (``array_api_strict`` here,
CuPy on a GPU) computes the products with ``X`` and the arithmetic on
vectors of length ``n`` in ``X``'s namespace
(:class:`skrank.backends.array_api_design.ArrayAPIDesign`); only the rank
step (sorts, PAVAs, the surrogates' sorted sums) runs on the host.  Every
conversion between the namespaces goes through ``to_numpy`` (to the host) or
``to_namespace`` (to ``X``'s device).  The tests wrap those where they are
looked up (nothing in ``skrank`` is edited), note which method of the design
made each conversion, count the rank steps (``HostRankStep.project``) and cut
the fit into the solver's phases (:mod:`skrank.solvers.full_batch.newton`):
the start (``_ProximalPoint.__init__``), each Newton step (one iteration of
the solver's loop that ends in ``newton_step``: the derivatives, the block
term and the line search) and each outer iteration (one that ends in
``outer_iteration``: the derivatives, the certificate and the new centre).

The certified Newton method's ``n``-vector transfers, which the counts below
pin (an ``n``-vector has length ``n``; a partial one has between ``d + 2``
and ``n`` rows):

* each evaluation of ``F_mu`` (a rank step: the start's, each trial of the
  line search, the new centre's): its keys to the host (``to_host``) and
  its weights ``q`` back (``to_native``), one each;
* each certificate: the losses to the host, for the risk's sorted sum;
* the start: the losses' signs and the first centre to ``X``'s device, and
  the scores twice to the host (``_times``: the first centre's and the
  start's objective, each sorted there);
* before the solver: the labels ``y`` (``arrays.to_host`` in the estimator's ``fit``).

The residuals ``s q l'`` and the Hessian's weights ``q l''`` never leave
``X``'s device.  Partial vectors travel with the block term of the pooled
members (their indices and slopes, ``take``; their block sums,
``left_product``; the Gram matrix of their weights: their indices and
roots when recomputed, ``_gram_of_rows``, an ``n``-vector when every sample
is pooled, ``weighted_gram``, or their rows when updated, ``rows``) and
with the updates of the Hessian's Gram matrix (the rows whose weight moved
and those weights' changes, ``_rows_at`` and ``native_gram``), at most once
each per Newton step.

The L-BFGS fits of the ranking classifiers (the tests at the end) move no
``n``-vector per evaluation of the logistic start, and one each way (the
rank step's keys and weights) per evaluation of the rank term.
"""

import numpy as np
import pytest
import sklearn

import skrank.backends.array_api_design as aad
import skrank.backends.arrays as arrays_module
import skrank.datafits.logistic_anchor as logistic_anchor
import skrank.datafits.rank_step as rank_step
import skrank.estimators._fit_template as fit_template
import skrank.estimators._input_checks as input_checks
import skrank.estimators._platt as platt
import skrank.estimators._streams as streams
import skrank.estimators._tasks as tasks
import skrank.solvers.full_batch.newton as newton
from skrank import AveragePrecisionClassifier, PartialAUCClassifier, SpectralRiskClassifier
from skrank.datafits.rank_step import HostRankStep
from skrank.datafits.smoothed_rank_risk import SmoothedRankRisk
from skrank.estimators import RankADMMClassifier

xp = pytest.importorskip("array_api_strict")

DEVICE = xp.Device("device1")
N, D = 3000, 8
#: The design's methods that convert vectors, by the name each conversion is put down to.
PRODUCTS = ("_times", "_transposed_times", "weighted_gram", "left_product", "rows", "class_moments",
            "_squared_column_sums", "_native_times", "_native_transposed_times", "to_host", "to_native",
            "take", "native_gram", "_rows_at", "_gram_of_roots", "_gram_of_rows")
#: The key under which a phase counts its rank steps (calls of ``HostRankStep.project``).
RANK_STEP = ("rank", "steps", "")
#: The solver's phases, by the method that ends each (its name is the phase's).
PHASES = {"__init__": "start", "newton_step": "step", "outer_iteration": "outer",
          "close_from_dual": "dual ascent", "check_zero": "zero check"}


def _data(seed=0):
    # a clear signal (as benchmarks/scale.py): theta = 0 is far from optimal and the fit certifies
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((N, D))
    y = (X @ np.linspace(-3.0, 3.0, D) + rng.standard_normal(N) > 0.0).astype(np.int64)
    return X, y


class Recorder:
    """The conversions of one fit, in order, with the phases' ends between them."""

    def __init__(self):
        self.events = []  # ("copy", direction, kind, where) or ("end", phase)
        self.where = []  # the design's products running now, innermost last
        self.recording = False

    def copy(self, direction, a):
        if not self.recording:
            return
        shape = tuple(np.shape(a))
        length = shape[0] if shape else 1
        kind = "n" if len(shape) == 1 and length == N else "part" if length > D + 1 else "small"
        if kind != "small":
            self.events.append(("copy", direction, kind, self.where[-1] if self.where else "outside"))

    def phases(self):
        """``[(phase, {(direction, kind, where): count})]``: the conversions before each phase's end.

        The first entry is ``("before", ...)``: the estimator's conversions
        before the solver, up to the end of the start, which is the second.
        """
        out, current = [], {}
        for event in self.events:
            if event[0] == "rank":
                current[RANK_STEP] = current.get(RANK_STEP, 0) + 1
            elif event[0] == "end":
                out.append((event[1], current))
                current = {}
            else:
                current[event[1:]] = current.get(event[1:], 0) + 1
        out.append(("after", current))
        return out


@pytest.fixture
def recorder(monkeypatch):
    rec = Recorder()
    to_numpy, to_namespace = aad.to_numpy, aad.to_namespace

    def host(a):
        if not isinstance(a, (np.ndarray, np.generic, float, int)):  # NumPy passes through: no copy
            rec.copy("host", a)
        return to_numpy(a)

    def device(a, *args, **kwargs):
        rec.copy("device", a)
        return to_namespace(a, *args, **kwargs)

    for module in (aad, arrays_module, fit_template, input_checks, streams, tasks):
        monkeypatch.setattr(module, "to_numpy", host)
        if hasattr(module, "to_namespace"):
            monkeypatch.setattr(module, "to_namespace", device)

    def product(name, method):
        def run(*args, **kwargs):
            rec.where.append(name)
            try:
                return method(*args, **kwargs)
            finally:
                rec.where.pop()
        return run

    for name in PRODUCTS:
        monkeypatch.setattr(aad.ArrayAPIDesign, name, product(name, vars(aad.ArrayAPIDesign)[name]))

    def phase(name, method):
        def run(*args, **kwargs):
            try:
                return method(*args, **kwargs)
            finally:
                rec.events.append(("end", PHASES[name]))
        return run

    for name in PHASES:
        monkeypatch.setattr(newton._ProximalPoint, name, phase(name, vars(newton._ProximalPoint)[name]))

    problem = vars(SmoothedRankRisk)["__init__"]

    def solver_starts(*args, **kwargs):
        rec.events.append(("end", "before"))  # the estimator's conversions before the solver's
        return problem(*args, **kwargs)

    monkeypatch.setattr(SmoothedRankRisk, "__init__", solver_starts)
    projection = vars(HostRankStep)["project"]

    def rank_step(*args, **kwargs):
        rec.events.append(("rank",))
        return projection(*args, **kwargs)

    monkeypatch.setattr(HostRankStep, "project", rank_step)
    return rec


def _fit(estimator, rec, solver="newton"):
    """``estimator`` fitted on the device data with ``rec`` recording; it must have taken ``solver``."""
    X, y = _data()
    rec.recording = True
    with sklearn.config_context(array_api_dispatch=True):
        estimator.fit(xp.asarray(X, device=DEVICE), xp.asarray(y, device=DEVICE))
    rec.recording = False
    assert estimator._solver == solver
    return estimator


#: The superquantile, whose pooled blocks of tied losses these counts were written for (the
#: classifier's default ExponentialSpectral(rho=1) pools other blocks, with up to 4 partial products
#: per step on this data).
ESTIMATORS = [RankADMMClassifier(risk="superquantile"), SpectralRiskClassifier(risk="superquantile")]
IDS = ["rank_admm_superquantile", "spectral_risk"]


def _counts(phase_counts, direction, kind=None, where=None):
    return sum(c for (dn, k, w), c in phase_counts.items()
               if dn == direction and kind in (None, k) and where in (None, w))


def _ranks(counts):
    """The rank steps (sorts and PAVAs of ``n`` keys: calls of ``HostRankStep.project``) of a phase."""
    return counts.get(RANK_STEP, 0)


@pytest.mark.parametrize("estimator", ESTIMATORS, ids=IDS)
def test_newton_fit_moves_one_n_vector_each_way_per_rank_step(estimator, recorder):
    """Per phase of the solver, the ``n``-vectors that cross are those of the module docstring."""
    _check_newton_phases(_fit(estimator, recorder), recorder)


def test_newton_transfer_check_fails_on_an_extra_transfer(recorder, monkeypatch):
    """A gradient whose residuals make a round trip through the host fails the check."""
    gradient = SmoothedRankRisk.gradient  # on native vectors

    def round_trip(self, theta, q, d1):
        q = self.design.to_native(self.design.to_host(q))
        return gradient(self, theta, q, d1)

    monkeypatch.setattr(SmoothedRankRisk, "gradient", round_trip)
    with pytest.raises(AssertionError, match=r"^\{.*\('host', 'n', 'to_host'\)"):
        _check_newton_phases(_fit(RankADMMClassifier(risk="superquantile"), recorder), recorder)


def _check_newton_phases(est, recorder):
    """The pins of :func:`test_newton_fit_moves_one_n_vector_each_way_per_rank_step`."""
    info = est._last_result_info
    assert info["certified"]
    phases = recorder.phases()
    names = [name for name, _ in phases]
    assert "dual ascent" not in names and "zero check" not in names  # this fit needs neither
    steps = names.count("step")
    outers = names.count("outer")
    assert steps == est.n_iter_ >= 3 and outers == info["outer"] >= 2
    assert names[:2] == ["before", "start"]
    for name, counts in phases:
        if name == "before":
            continue
        ranks, keys = _ranks(counts), counts.get(("host", "n", "to_host"), 0)
        weights = counts.get(("device", "n", "to_native"), 0)
        if name == "start":
            # the losses' signs and the first centre sent once; the scores of the first centre's and
            # the start's objective (a sort each, on the host); one F_mu
            assert ranks == 1 and keys == 1 and weights == 3, counts
            assert counts.get(("host", "n", "_times"), 0) == 2, counts
        elif name == "step":
            # each trial of the line search: its keys down, its weights back
            assert ranks >= 1 and keys == weights == ranks, counts
        elif name == "outer":
            # the certificate's losses down for the risk's sorted sum, then F_mu at the new centre
            assert keys == ranks + 1 and weights == ranks, counts
        else:
            assert _counts(counts, "host") + _counts(counts, "device") == 0, counts
        if name != "start":
            assert counts.get(("host", "n", "_times"), 0) == 0, counts
        # the residuals and the Hessian's weights stay on X's device
        assert _counts(counts, "device", "n", "_transposed_times") == 0, counts
    # every outer iteration but the last (which certifies and returns) evaluates F_mu at the new centre
    assert [_ranks(c) for name, c in phases if name == "outer"] == [1] * (outers - 1) + [0]


@pytest.mark.parametrize("estimator", ESTIMATORS, ids=IDS)
def test_newton_fit_moves_n_vectors_only_for_the_rank_step_and_the_block_term(estimator, recorder):
    """Bounds per phase of every other conversion (module docstring), and none outside the design."""
    est = _fit(estimator, recorder)
    phases = recorder.phases()
    # per phase: the most conversions of each (direction, where), n-vectors and partial ones together
    bounds = {
        "step": {("device", "weighted_gram"): 1, ("device", "_gram_of_rows"): 2,
                 ("device", "left_product"): 2, ("host", "left_product"): 1,
                 ("device", "take"): 1, ("host", "take"): 1, ("device", "rows"): 1, ("host", "rows"): 1,
                 ("host", "_rows_at"): 1, ("host", "native_gram"): 1},
        "outer": {("host", "_rows_at"): 1, ("host", "native_gram"): 1},
        "start": {("host", "_times"): 2},
        "after": {},
    }
    seen = {}
    for name, counts in phases:
        if name == "before":  # the estimator's checks: y (and sample weights) to the host, once
            assert counts == {("host", "n", "outside"): 1}, counts
            continue
        merged = {}
        for (direction, kind, where), c in counts.items():
            if (direction, kind, where) == RANK_STEP or where in ("to_host", "to_native"):
                continue  # the rank step's keys and weights: the test above
            merged[direction, where] = merged.get((direction, where), 0) + c
            seen[direction, kind, where] = seen.get((direction, kind, where), 0) + c
        for key, c in merged.items():
            assert c <= bounds[name].get(key, 0), (name, key, c, counts)
    assert not any(where == "outside" for (_, _, where) in seen)
    # the scores come to the host twice, before the first F_mu; the residuals never
    assert seen[("host", "n", "_times")] == 2
    assert not any(where in ("_times", "_transposed_times") for (_, _, where) in seen if where != "_times")
    assert est._last_result_info["passes"] >= est.n_iter_


def test_host_share_benchmark_runs_quick_and_puts_the_functions_back(capsys):
    """``benchmarks/host_share.py --quick``: its counts agree with the ones above, its shares add up."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "benchmarks" / "host_share.py"
    spec = importlib.util.spec_from_file_location("host_share", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    originals = (aad.to_numpy, aad.to_namespace, vars(aad.ArrayAPIDesign)["_times"],
                 rank_step.pooled_projection)
    results = bench.main(["--quick"])
    out = capsys.readouterr().out
    assert "command: OMP_NUM_THREADS=1 python benchmarks/host_share.py --quick" in out
    assert originals == (aad.to_numpy, aad.to_namespace, vars(aad.ArrayAPIDesign)["_times"],
                         rank_step.pooled_projection)
    assert [r["solver"] for r in results] == ["newton", "newton", "lbfgs", "lbfgs"]
    for r in results:
        assert r["gap"] <= 1e-9  # the array-API fit is the NumPy fit
        shares = r["x"] + r["rank"] + r["copies"] + r["pxp"] + r["host_n"]
        assert 0.9 <= shares <= 1.0 + 1e-9, r
        assert r["rank"] > 0.0 and r["x"] > 0.0 and r["passes"] > 0
        ledger = r["ledger"]
        if r["solver"] == "newton":
            # the keys of each trial of the line search, the certificates' losses, the start's scores
            # (tests above): n-vectors to the host only for a sort
            assert 1.0 < r["to_host"] < 5.0, r
            assert {where for direction, kind, _, _, where in ledger.transfers
                    if direction == "host" and kind == "n"} <= {"to_host", "_times", "take", ""}, r
        else:
            # L-BFGS: the scores of the logistic start's evaluations stay in X's namespace; those of the
            # rank term's go to the host and their weights come back (test below), nothing partial
            assert ledger.calls.get("_times", 0) + ledger.calls["_native_times"] == r["iterations"], r
            assert 0.0 < r["to_host"] < 1.0 and 0.0 < r["to_device"] < 1.0, r
            assert r["partial"] == 0.0
        # every n-vector sent to X's device is sent by one of the design's products
        assert all(where for direction, kind, _, _, where in ledger.transfers
                   if direction == "device" and kind == "n"), r


LBFGS_ESTIMATORS = [PartialAUCClassifier(), PartialAUCClassifier(link="sigmoid"),
                    AveragePrecisionClassifier()]
LBFGS_IDS = ["partial_auc", "partial_auc_sigmoid", "average_precision"]


@pytest.fixture
def evaluations(recorder, monkeypatch):
    """The recorder with each evaluation of the anchored objective and Platt's fit as phases of their own.

    An evaluation's phase is named by its terms: ``"logistic"`` (``rank_weight
    = 0``: the logistic start), ``"mixed"`` (``0 < rank_weight < 1``) or
    ``"value"`` (no gradient); ``"between"`` holds what comes before it.
    """
    data_term = vars(logistic_anchor.LogisticAnchoredObjective)["_data_term"]

    def evaluation(self, theta, gradient):
        recorder.events.append(("end", "between"))
        try:
            return data_term(self, theta, gradient)
        finally:
            kind = "value" if not gradient else "logistic" if self.rank_weight == 0.0 else "mixed"
            recorder.events.append(("end", kind))

    fit_platt = platt.fit_platt

    def platt_fit(*args, **kwargs):
        recorder.events.append(("end", "between"))
        try:
            return fit_platt(*args, **kwargs)
        finally:
            recorder.events.append(("end", "platt"))

    monkeypatch.setattr(logistic_anchor.LogisticAnchoredObjective, "_data_term", evaluation)
    monkeypatch.setattr(platt, "fit_platt", platt_fit)
    return recorder


def _fit_lbfgs(estimator, rec):
    _fit(estimator, rec, solver="lbfgs")
    return rec.phases()


def _check_lbfgs_phases(phases):
    """The ``n``-vector moves of an anchored L-BFGS fit and its Platt fit, pinned.

    * an evaluation of the logistic start: none (its scores, losses and
      derivatives stay in ``X``'s namespace);
    * an evaluation of the mixed objective: the rank step's keys to the
      host (``to_host``) and their weights back (``to_native``), once each;
    * Platt's fit: none (the scores stay on ``X``'s device, where the
      labels are sent once, before it);
    * between the evaluations: at most three ``n``-vectors each way (the
      labels and the row weights sent once, the scores of the
      training-metric rule and of the margin to the host).
    """
    kinds = [name for name, _ in phases]
    assert kinds.count("logistic") >= 3 and kinds.count("mixed") >= 1 and kinds.count("platt") == 1, kinds
    for name, counts in phases:
        moved = {key: c for key, c in counts.items() if key[1] == "n"}
        if name in ("logistic", "platt"):
            assert moved == {}, (name, counts)
        elif name == "mixed":
            assert moved == {("host", "n", "to_host"): 1, ("device", "n", "to_native"): 1}, (name, counts)
        else:
            assert _counts(counts, "host", "n") <= 3 and _counts(counts, "device", "n") <= 3, (name, counts)
        assert _counts(counts, "host", "part") + _counts(counts, "device", "part") == 0, (name, counts)


@pytest.mark.parametrize("estimator", LBFGS_ESTIMATORS, ids=LBFGS_IDS)
def test_lbfgs_fit_moves_only_the_rank_steps_keys_and_weights(estimator, evaluations):
    """Per evaluation, the ``n``-vectors that cross are those of :func:`_check_lbfgs_phases`."""
    _check_lbfgs_phases(_fit_lbfgs(estimator, evaluations))


def test_lbfgs_transfer_check_fails_on_an_extra_transfer(evaluations, monkeypatch):
    """A logistic evaluation that brings its derivatives to the host and back fails the check."""
    terms = logistic_anchor.logistic_terms

    def round_trip(xp_, z, sign, weight, gradient):
        value, dz = terms(xp_, z, sign, weight, gradient)
        if dz is not None:
            dz = aad.to_namespace(aad.to_numpy(dz), xp_, DEVICE)
        return value, dz

    monkeypatch.setattr(logistic_anchor, "logistic_terms", round_trip)
    with pytest.raises(AssertionError, match=r"^\('logistic', \{\('host', 'n', 'outside'\): 1"):
        _check_lbfgs_phases(_fit_lbfgs(PartialAUCClassifier(), evaluations))
