"""The Newton solver's chunked path on a Dask ``X``: its vectors on the workers (``WorkerDesign``)."""

import numpy as np
import pytest

from skrank.backends import dask_design
from skrank.backends.dispatch import make_design
from skrank.datafits.rank_risk import RankRisk
from skrank.datafits.rank_step import ThresholdRankStep
from skrank.datafits.smoothed_rank_risk import SmoothedRankRisk
from skrank.estimators import RankADMMClassifier, RankADMMRegressor
from skrank.losses import get_loss
from skrank.penalties import Penalty
from skrank.risks import Extremile, Superquantile
from skrank.solvers.full_batch import newton

dask = pytest.importorskip("dask")
da = pytest.importorskip("dask.array")

_N, _D, _CHUNK = 20_000, 20, 5_000


def _data(task, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((_N, _D))
    f = X @ (10.0 * np.linspace(-1.0, 1.0, _D) / np.sqrt(_D))
    if task == "classification":
        return X, (f + rng.normal(size=_N) > 0.0).astype(int)
    return X, f + rng.standard_t(3, size=_N)


def _estimator(task, **kwargs):
    # both fits certified within 1e-10 of the optimum: within 1e-9 of each other, whatever their paths
    Est = RankADMMClassifier if task == "classification" else RankADMMRegressor
    return Est(**{"risk": Superquantile(q=0.8), "alpha": 1e-3, "tol": 1e-10, **kwargs})


@pytest.fixture(autouse=True)
def chunked(monkeypatch):
    """The chunked path wherever it fits (by default only on a cluster's workers, beyond a size)."""
    monkeypatch.setenv("SKRANK_NEWTON_GATHER", "0")


#: The paths of the problems the fits make: their vectors gathered in this process, or on the workers.
GATHERED, CHUNKED = "gathered", "on the workers"


@pytest.fixture
def problems(monkeypatch):
    """The paths of the problems the fits make."""
    made = []
    init = SmoothedRankRisk.__init__

    def record(self, *args, **kwargs):
        init(self, *args, **kwargs)
        made.append(CHUNKED if self.design.keeps_vectors_apart else GATHERED)

    monkeypatch.setattr(SmoothedRankRisk, "__init__", record)
    return made


@pytest.fixture
def large_results(monkeypatch):
    """Patches ``dask.compute``: the largest array among each call's results, per call."""
    import dask.base

    original = dask.base.compute
    largest = []

    def sizes(x):
        if isinstance(x, np.ndarray):
            yield x.size
        elif isinstance(x, (tuple, list)):
            for item in x:
                yield from sizes(item)

    def compute(*args, **kwargs):
        out = original(*args, **kwargs)
        largest.append(max(sizes(out), default=0))
        return out

    # dask.compute and the arrays' compute (float(), .compute()) both call dask.base.compute
    monkeypatch.setattr(dask.base, "compute", compute)
    monkeypatch.setattr(dask, "compute", compute)
    return largest


@pytest.mark.parametrize("task", ["classification", pytest.param("regression", marks=pytest.mark.slow)])
@pytest.mark.parametrize("fit_intercept", [pytest.param(True, marks=pytest.mark.slow), False])
def test_chunked_fit_equals_numpy_fit(task, fit_intercept, problems):
    X, y = _data(task)
    ref = _estimator(task, fit_intercept=fit_intercept).fit(X, y)
    with dask.config.set(scheduler="synchronous"):
        est = _estimator(task, fit_intercept=fit_intercept).fit(da.from_array(X, chunks=(_CHUNK, _D)), y)
    assert problems == [GATHERED, CHUNKED]
    assert est._last_result_info["certified"]
    assert abs(est.objective_ - ref.objective_) <= 1e-9 * abs(ref.objective_)
    np.testing.assert_allclose(est.coef_, ref.coef_, atol=1e-5 * np.abs(ref.coef_).max())


def test_chunked_fit_brings_no_vector_of_length_n(monkeypatch, large_results, problems):
    # every result is O(d^2) per chunk or the rank step's last round (at most `bracket` keys)
    monkeypatch.setattr(ThresholdRankStep, "bracket", 1_000)
    X, y = _data("classification")
    with dask.config.set(scheduler="synchronous"):
        est = _estimator("classification").fit(da.from_array(X, chunks=(_CHUNK, _D)), y)
    assert problems == [CHUNKED]
    assert est._last_result_info["certified"]
    assert len(large_results) > 10
    assert max(large_results) <= max(1_000, (_D + 1) ** 2) < _CHUNK


def test_gather_flag_forces_the_gathered_path(monkeypatch, large_results, problems):
    monkeypatch.setenv("SKRANK_NEWTON_GATHER", "1")
    X, y = _data("classification")
    with dask.config.set(scheduler="synchronous"):
        est = _estimator("classification").fit(da.from_array(X, chunks=(_CHUNK, _D)), y)
    assert problems == [GATHERED]
    assert est._last_result_info["certified"]
    assert max(large_results) >= _CHUNK  # the gathered path brings the chunks' scores


def _keeps_vectors_apart(X, risk, penalty):
    """The design's choice for a fit of ``risk`` with ``penalty`` on ``X`` (what it depends on)."""
    return make_design(X, True).keeping_vectors_for(risk, penalty).keeps_vectors_apart


@pytest.mark.parametrize("case", ["numpy", "l1", "no_l2", "risk"])
def test_unsupported_cases_take_the_gathered_path(case):
    from skrank.risks import HumanAligned

    X, _ = _data("classification")
    args = dict(X=da.from_array(X, chunks=(_CHUNK, _D)), risk=Superquantile(0.8),
                penalty=Penalty(l1=0.0, l2=1e-3))
    assert _keeps_vectors_apart(**args)
    changed = dict(numpy=dict(X=X), l1=dict(penalty=Penalty(l1=1e-3, l2=1e-3)),
                   no_l2=dict(penalty=Penalty(l1=1e-3, l2=0.0)), risk=dict(risk=HumanAligned()))[case]
    assert not _keeps_vectors_apart(**{**args, **changed})


@pytest.mark.parametrize("case", ["weights", "warm", "extremile", "huber"])
def test_weights_warm_starts_and_every_spectral_risk_take_the_chunked_path(case, problems):
    # the first Newton step of each fit: the path its problem takes
    X, y = _data("regression" if case == "huber" else "classification")
    y = y if case == "huber" else np.where(y == 1, 1.0, -1.0)
    weights = np.random.default_rng(1).uniform(0.5, 2.0, _N) if case == "weights" else None
    start = dict(coef_init=np.full(_D, 0.01), intercept_init=0.0) if case == "warm" else {}
    datafit = RankRisk(da.from_array(X, chunks=(_CHUNK, _D)), y, Extremile(2.0) if case == "extremile"
                       else Superquantile(0.8), get_loss("huber" if case == "huber" else "logistic"),
                       sample_weight=weights)
    with dask.config.set(scheduler="synchronous"):
        result = newton.smoothed_newton(datafit, Penalty(l1=0.0, l2=1e-3), max_iter=1, **start)
    assert result.n_iter == 1
    assert problems == [CHUNKED]


def _dask_targets(y):
    return da.from_array(y, chunks=3_000)  # not aligned with X's chunks: the fit realigns them


@pytest.mark.parametrize("task", ["classification", pytest.param("regression", marks=pytest.mark.slow)])
def test_dask_targets_stay_on_the_workers(task, monkeypatch, large_results, problems):
    monkeypatch.setattr(ThresholdRankStep, "bracket", 1_000)
    X, y = _data(task)
    if task == "classification":
        y = np.where(y == 1, "yes", "no")  # labels that are not numbers
    ref = _estimator(task).fit(X, y)
    with dask.config.set(scheduler="synchronous"):
        est = _estimator(task).fit(da.from_array(X, chunks=(_CHUNK, _D)), _dask_targets(y))
    assert problems == [GATHERED, CHUNKED]
    assert est._last_result_info["certified"]
    assert abs(est.objective_ - ref.objective_) <= 1e-9 * abs(ref.objective_)
    assert max(large_results) <= max(1_000, (_D + 1) ** 2) < _CHUNK
    if task == "classification":
        np.testing.assert_array_equal(est.classes_, ["no", "yes"])


@pytest.mark.slow
def test_dask_targets_of_three_classes_fit_one_vs_rest():
    # two of the three one-vs-rest problems have the optimum theta = 0 (they finish gathered)
    X, y = _data("classification")
    y = y + (X[:, 0] > 1.0)  # three classes
    ref = _estimator("classification").fit(X, y)
    with dask.config.set(scheduler="synchronous"):
        est = _estimator("classification").fit(da.from_array(X, chunks=(_CHUNK, _D)), _dask_targets(y))
    np.testing.assert_array_equal(est.classes_, [0, 1, 2])
    np.testing.assert_allclose(est.objective_, ref.objective_, rtol=1e-9)


def test_dask_targets_are_gathered_for_other_solvers():
    X, y = _data("classification")
    kwargs = dict(solver="ipm", loss="hinge")
    ref = _estimator("classification", **kwargs).fit(X, y)
    with dask.config.set(scheduler="synchronous"):
        est = _estimator("classification", **kwargs).fit(da.from_array(X, chunks=(_CHUNK, _D)),
                                                         _dask_targets(y))
    np.testing.assert_allclose(est.objective_, ref.objective_, rtol=1e-9)


def test_dask_targets_of_a_ranking_classifier_are_gathered():
    from skrank.estimators import PartialAUCClassifier

    X, y = _data("classification")
    ref = PartialAUCClassifier().fit(X, y)
    with dask.config.set(scheduler="synchronous"):
        est = PartialAUCClassifier().fit(da.from_array(X, chunks=(_CHUNK, _D)), _dask_targets(y))
    np.testing.assert_allclose(est.objective_, ref.objective_, rtol=1e-9)


@pytest.mark.parametrize("change, message", [
    (lambda y: y[:-1], "vector of length"),
    (lambda y: np.where(np.arange(y.size) == 7, np.nan, y), "NaN or infinity"),
])
def test_dask_targets_are_checked(change, message):
    X, y = _data("regression")
    with pytest.raises(ValueError, match=message):
        _estimator("regression").fit(da.from_array(X, chunks=(_CHUNK, _D)), _dask_targets(change(y)))


def test_dask_targets_of_one_class_are_refused():
    X, _ = _data("classification")
    with pytest.raises(ValueError, match="at least two classes"):
        _estimator("classification").fit(da.from_array(X, chunks=(_CHUNK, _D)), da.zeros(_N, chunks=_CHUNK))


def test_zero_optimum_is_certified_on_the_workers(monkeypatch, large_results, problems):
    # labels unrelated to X and a strong penalty: theta = 0 is optimal, certified by the zero check
    monkeypatch.setattr(ThresholdRankStep, "bracket", 1_000)
    rng = np.random.default_rng(3)
    X, y = rng.standard_normal((_N, _D)), rng.integers(0, 2, _N)
    ref = _estimator("classification", alpha=10.0).fit(X, y)
    assert ref._last_result_info["certified"] and not np.any(ref.coef_)
    with dask.config.set(scheduler="synchronous"):
        est = _estimator("classification", alpha=10.0).fit(da.from_array(X, chunks=(_CHUNK, _D)), y)
    assert problems == [GATHERED, CHUNKED]
    assert est._last_result_info["certified"] and not np.any(est.coef_)
    assert abs(est.objective_ - ref.objective_) <= 1e-9 * abs(ref.objective_)
    assert max(large_results) <= max(1_000, (_D + 1) ** 2) < _CHUNK


def test_a_stalled_fit_finishes_on_the_gathered_path(monkeypatch, problems):
    # the dual ascent needs the losses in one place: the fit goes on gathered from its best point
    X, y = _data("classification")
    ref = _estimator("classification").fit(X, y)
    calls = []
    original = newton._ProximalPoint.outer_iteration

    def stall_once(self, decrease_q, tol):
        if self.problem.design.keeps_vectors_apart and not calls:
            calls.append(1)
            self.problem.dual_ascent(self.theta, 1)  # as a stalled fit calls it
        return original(self, decrease_q, tol)

    monkeypatch.setattr(newton._ProximalPoint, "outer_iteration", stall_once)
    with dask.config.set(scheduler="synchronous"):
        est = _estimator("classification").fit(da.from_array(X, chunks=(_CHUNK, _D)), y)
    assert problems == [GATHERED, CHUNKED, GATHERED]
    assert est._last_result_info["certified"]
    assert abs(est.objective_ - ref.objective_) <= 1e-9 * abs(ref.objective_)


def test_shares_summed_on_the_workers_by_groups(monkeypatch):
    # 20 chunks summed 3 at a time, then 3 at a time again: the driver adds 3 shares
    monkeypatch.setattr(dask_design, "_FAN_IN", 3)
    received = []
    original = dask_design._add_all
    monkeypatch.setattr(dask_design, "_add_all", lambda *shares: received.append(len(shares))
                        or original(*shares))
    X, y = (v[:4_000] for v in _data("regression"))
    ref = _estimator("regression", tol=1e-7).fit(X, y)
    with dask.config.set(scheduler="synchronous"):
        est = _estimator("regression", tol=1e-7).fit(da.from_array(X, chunks=(200, _D)), y)
    assert est._last_result_info["certified"]  # both within 1e-7 of the optimum
    assert abs(est.objective_ - ref.objective_) <= 2e-7 * abs(ref.objective_)
    assert max(received) == 3


@pytest.mark.parametrize("rows, cluster, chunked_path", [(1_000, True, False), (10**6, True, True),
                                                          (10**6, False, False)])
def test_the_chunked_path_is_chosen_on_a_cluster_beyond_the_budget(monkeypatch, rows, cluster, chunked_path):
    monkeypatch.delenv("SKRANK_NEWTON_GATHER")
    monkeypatch.setattr(dask_design, "on_distributed_workers", lambda: cluster)
    X = da.zeros((rows, 3), chunks=(rows // 4, 3))
    assert _keeps_vectors_apart(X, Superquantile(0.8), Penalty(l1=0.0, l2=1e-3)) is chunked_path


def test_a_local_scheduler_is_not_a_cluster():
    with dask.config.set(scheduler="synchronous"):
        assert not dask_design.on_distributed_workers()


def test_a_distributed_client_computes_on_its_workers():
    distributed = pytest.importorskip("distributed")
    with distributed.Client(processes=False, n_workers=1, threads_per_worker=1, dashboard_address=":0"):
        assert dask_design.on_distributed_workers()
        with dask.config.set(scheduler="synchronous"):
            assert not dask_design.on_distributed_workers()


def test_no_task_of_the_fit_stays_in_the_scheduler_after_it():
    # a Dask array kept in the result would keep the fit's lineage (its tasks) in the scheduler
    distributed = pytest.importorskip("distributed")
    X, y = (v[:4_000] for v in _data("classification"))
    with distributed.Client(processes=False, n_workers=1, threads_per_worker=1,
                            dashboard_address=":0") as client:
        Xd, yd = dask.persist(da.from_array(X, chunks=(1_000, _D)), da.from_array(y, chunks=1_000))
        distributed.wait([Xd, yd])
        held = len(client.run_on_scheduler(lambda dask_scheduler: list(dask_scheduler.tasks)))
        est = _estimator("classification", tol=1e-4).fit(Xd, yd)
        assert est._last_result_info["certified"] and est._last_result_info["weights"] is None
        import gc

        gc.collect()
        left = len(client.run_on_scheduler(lambda dask_scheduler: list(dask_scheduler.tasks)))
    assert left == held
