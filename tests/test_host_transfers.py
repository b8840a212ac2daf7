"""The host transfers of ``n``-vectors in a certified Newton fit of an array-API ``X``, counted.

A fit on an array of another array-API library (``array_api_strict`` here,
CuPy on a GPU) computes the products with ``X`` in ``X``'s namespace
(:class:`skrank.backends.array_api_design.ArrayAPIDesign`) and the rest on
the host: every conversion between the namespaces goes through
``to_numpy`` (to the host) or ``to_namespace`` (to ``X``'s device).  The
tests wrap those where they are looked up (nothing in ``skrank`` is
edited), note which product of the design made each conversion, and cut
the fit into the solver's phases (:mod:`skrank.solvers.full_batch.newton`):
the start (``_ProximalPoint.__init__``), each Newton step (one iteration of
the solver's loop that ends in ``newton_step``: the derivatives, the block
term and the line search) and each outer iteration (one that ends in
``outer_iteration``: the derivatives, the certificate and the new centre).

Today's ``n``-vector transfers, which the counts below pin (an ``n``-vector
has length ``n``; a partial one has between ``d + 2`` and ``n`` rows):

To the host, one per evaluation of the scores, ``Design.matvec`` ->
``ArrayAPIDesign._times`` (the scores ``[X, 1] theta``, for the losses, the
keys of the PAVA and the line search's trials on the host):

* before the solver: the labels ``y`` (``arrays.to_host`` in the estimator's ``fit``);
* the start: three, ``_first_center`` (the losses at ``theta``),
  ``_ProximalPoint.__init__``'s ``objective`` and ``smoothed`` (each
  evaluates ``s [X, 1] theta + c`` afresh);
* a Newton step: exactly one, the direction's scores ``dt = s [X, 1] step``
  of ``_line_search`` (its trials are ``t + alpha dt``, on the host);
* an outer iteration: exactly one, ``smoothed`` at the new centre (which
  evaluates the scores at ``theta`` again), none in the one that certifies
  and stops.

To ``X``'s device, one per product with a vector of weights:

* ``Design.rmatvec`` -> ``_transposed_times`` (a residual ``s q l'``): the
  gradient in ``step_products``, the gradient of the test that reuses the
  last Hessian (``smoothed_newton``) and, per outer iteration, the dual
  bound's ``X^T (s q a)`` (``_Problem.dual_bound``): at most two per Newton
  step, three per outer iteration;
* ``ArrayAPIDesign.weighted_gram`` (``sqrt`` of the Hessian's weights
  ``q l''``, or of the block term's ``m l'^2``) when ``Design.gram``
  recomputes the Gram matrix instead of updating it: at most two per Newton
  step (the Hessian's and the block term's), one per outer iteration;
* ``ArrayAPIDesign.left_product`` (the block sums of the pooled members):
  their row indices and weights, one partial vector each (``n``-vectors
  when every sample is pooled, as from ``theta = 0``), and their rows'
  cumulative sums back to the host (a partial ``(members + 1) x d`` matrix),
  per Newton step.

Partial vectors also travel with the Gram updates (``ArrayAPIDesign.rows``:
the indices of the rows whose weight moved, then those rows back), at most
once each way per Gram matrix updated.  Nothing else: no ``n``-vector
crosses between the namespaces outside the design's products while the
solver runs.
"""

import numpy as np
import pytest
import sklearn

import skrank.backends.array_api_design as aad
import skrank.backends.arrays as arrays_module
import skrank.datafits.logistic_anchor as logistic_anchor
import skrank.estimators._base as base_module
import skrank.estimators._platt as platt
import skrank.solvers.full_batch.newton as newton
from skrank import AveragePrecisionClassifier, PartialAUCClassifier, SpectralRiskClassifier
from skrank.estimators import RankADMMClassifier

xp = pytest.importorskip("array_api_strict")

DEVICE = xp.Device("device1")
N, D = 3000, 8
#: The design's methods that convert vectors, by the name each conversion is put down to.
PRODUCTS = ("_times", "_transposed_times", "weighted_gram", "left_product", "rows", "class_moments",
            "_squared_column_sums", "_native_times", "_native_transposed_times", "to_host", "to_native")
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
            if event[0] == "end":
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

    for module in (aad, arrays_module, base_module):
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

    problem = vars(newton._Problem)["__init__"]

    def solver_starts(*args, **kwargs):
        rec.events.append(("end", "before"))  # the estimator's conversions before the solver's
        return problem(*args, **kwargs)

    monkeypatch.setattr(newton._Problem, "__init__", solver_starts)
    return rec


def _fit(estimator, rec):
    X, y = _data()
    rec.recording = True
    with sklearn.config_context(array_api_dispatch=True):
        estimator.fit(xp.asarray(X, device=DEVICE), xp.asarray(y, device=DEVICE))
    rec.recording = False
    assert estimator._solver == "newton"
    return estimator


ESTIMATORS = [RankADMMClassifier(risk="superquantile"), SpectralRiskClassifier()]
IDS = ["rank_admm_superquantile", "spectral_risk"]


def _counts(phase_counts, direction, kind=None, where=None):
    return sum(c for (dn, k, w), c in phase_counts.items()
               if dn == direction and kind in (None, k) and where in (None, w))


@pytest.mark.parametrize("estimator", ESTIMATORS, ids=IDS)
def test_newton_fit_moves_one_score_vector_to_the_host_per_step(estimator, recorder):
    """Per phase of the solver, the ``n``-vectors to the host are exactly those of the module docstring."""
    est = _fit(estimator, recorder)
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
        to_host = _counts(counts, "host", "n")
        if name == "start":
            assert counts.get(("host", "n", "_times"), 0) == to_host == 3, counts
            assert _counts(counts, "device") == 0, counts
        elif name == "step":
            assert counts.get(("host", "n", "_times"), 0) == to_host == 1, counts
        elif name == "outer":
            assert to_host == counts.get(("host", "n", "_times"), 0) <= 1, counts
        elif name == "after":
            assert _counts(counts, "host") + _counts(counts, "device") == 0, counts
    # every outer iteration but the last (which certifies and returns) evaluates the scores again
    outer_host = [_counts(c, "host", "n") for name, c in phases if name == "outer"]
    assert outer_host == [1] * (outers - 1) + [0]
    total_host = sum(_counts(c, "host", "n") for name, c in phases if name != "before")
    assert total_host == 3 + steps + outers - 1


@pytest.mark.parametrize("estimator", ESTIMATORS, ids=IDS)
def test_newton_fit_moves_n_vectors_only_in_the_design_products(estimator, recorder):
    """Bounds per phase of each product's conversions to ``X``'s device (module docstring), and none else."""
    est = _fit(estimator, recorder)
    phases = recorder.phases()
    # per phase: the most conversions of each (direction, where), n-vectors and partial ones together
    bounds = {
        "step": {("host", "_times"): 1, ("device", "_transposed_times"): 2, ("device", "weighted_gram"): 2,
                 ("device", "left_product"): 2, ("host", "left_product"): 1,
                 ("device", "rows"): 2, ("host", "rows"): 2},
        "outer": {("host", "_times"): 1, ("device", "_transposed_times"): 3, ("device", "weighted_gram"): 1,
                  ("device", "rows"): 1, ("host", "rows"): 1},
        "start": {("host", "_times"): 3},
        "after": {},
    }
    seen = {}
    for name, counts in phases:
        if name == "before":  # the estimator's checks: y (and sample weights) to the host, once
            assert counts == {("host", "n", "outside"): 1}, counts
            continue
        merged = {}
        for (direction, kind, where), c in counts.items():
            merged[direction, where] = merged.get((direction, where), 0) + c
            seen[direction, kind, where] = seen.get((direction, kind, where), 0) + c
        for key, c in merged.items():
            assert c <= bounds[name].get(key, 0), (name, key, c, counts)
    # no n-vector crosses outside the design's products once the solver runs
    assert not any(where == "outside" for (_, _, where) in seen)
    # each pass over X moves at most one n-vector (a Gram update's rows are not a pass)
    n_vectors = sum(c for (_, kind, _), c in seen.items() if kind == "n")
    assert n_vectors <= est._last_result_info["passes"]
    # and the products that take or return an n-vector move exactly one each way
    assert seen[("host", "n", "_times")] == 3 + est.n_iter_ + est._last_result_info["outer"] - 1
    assert seen[("device", "n", "_transposed_times")] >= est.n_iter_


def test_host_share_benchmark_runs_quick_and_puts_the_functions_back(capsys):
    """``benchmarks/host_share.py --quick``: its counts agree with the ones above, its shares add up."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "benchmarks" / "host_share.py"
    spec = importlib.util.spec_from_file_location("host_share", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    originals = (aad.to_numpy, aad.to_namespace, vars(aad.ArrayAPIDesign)["_times"], newton.pooled_projection)
    results = bench.main(["--quick"])
    out = capsys.readouterr().out
    assert "command: OMP_NUM_THREADS=1 python benchmarks/host_share.py --quick" in out
    assert originals == (aad.to_numpy, aad.to_namespace, vars(aad.ArrayAPIDesign)["_times"],
                         newton.pooled_projection)
    assert [r["solver"] for r in results] == ["newton", "newton", "lbfgs", "lbfgs"]
    for r in results:
        assert r["gap"] <= 1e-9  # the array-API fit is the NumPy fit
        shares = r["x"] + r["rank"] + r["copies"] + r["pxp"] + r["host_n"]
        assert 0.9 <= shares <= 1.0 + 1e-9, r
        assert r["rank"] > 0.0 and r["x"] > 0.0 and r["passes"] > 0
        ledger = r["ledger"]
        if r["solver"] == "newton":
            # one score vector per step, plus the start's and the outer iterations' (test above)
            assert 1.0 < r["to_host"] < 3.0, r
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
    X, y = _data()
    rec.recording = True
    with sklearn.config_context(array_api_dispatch=True):
        estimator.fit(xp.asarray(X, device=DEVICE), xp.asarray(y, device=DEVICE))
    rec.recording = False
    assert estimator._solver == "lbfgs"
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
