"""The certified Newton fit on a ``dask.distributed`` client: every spectral risk's n-vectors on the workers.

Each fit on the client is compared with the in-memory fit of the same data
(both certified within ``1e-11``: their objectives agree within ``1e-9``),
and everything the client gathers into the driving process is recorded:
no array of length ``n`` may come back.
"""

import time

import numpy as np
import pytest

from skrank.datafits.rank_risk import RankRisk
from skrank.datafits.rank_step import ThresholdRankStep
from skrank.estimators import RankADMMClassifier, SpectralRiskClassifier, SpectralRiskRegressor
from skrank.losses import get_loss
from skrank.penalties import get_penalty
from skrank.risks import ERM, ExponentialSpectral, Extremile, Superquantile, TopK
from skrank.solvers.full_batch.newton import smoothed_newton

dask = pytest.importorskip("dask")
da = pytest.importorskip("dask.array")
pytest.importorskip("distributed")  # the client fixture (conftest.py)

_N, _D, _CHUNK = 2_000, 4, 1_000


def _data(seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((_N, _D))
    f = X @ np.linspace(-1.0, 1.0, _D)
    labels = np.where(f + rng.normal(size=_N) > 0.0, 1.0, -1.0)
    return X, labels, f + rng.standard_t(3, size=_N), rng.uniform(0.2, 2.0, _N)


def _arrays(results):
    """Every array or number in nested tuples, lists and dicts."""
    for item in results:
        if isinstance(item, (list, tuple)):
            yield from _arrays(item)
        elif isinstance(item, dict):
            yield from _arrays(list(item.values()))
        else:
            yield item


@pytest.fixture
def gathered(client, monkeypatch):
    """The sizes of the arrays that the client gathers into this process during the test."""
    monkeypatch.setenv("SKRANK_NEWTON_GATHER", "0")  # the chunked path on small data too
    # the threshold step's last round gathers at most this many keys (all of them at this size by default)
    monkeypatch.setattr(ThresholdRankStep, "bracket", 100)
    sizes = []
    gather = client.gather

    def recording_gather(futures, *args, **kwargs):
        result = gather(futures, *args, **kwargs)
        sizes.extend(np.size(a) for a in _arrays([result]))
        return result

    monkeypatch.setattr(client, "gather", recording_gather)
    with dask.config.set(scheduler=client.get):
        yield sizes


def _fits(risk, loss_name, weighted, warm=False):
    """The in-memory fit and the fit on the client of the same problem (certified within 1e-11)."""
    X, labels, targets, weights = _data()
    loss = get_loss(loss_name)
    y = labels if loss.task == "classification" else targets
    sample_weight = weights if weighted else None
    start = dict(coef_init=np.full(_D, 0.1), intercept_init=0.0) if warm else {}
    penalty = get_penalty("l2", 1e-2)
    ref = smoothed_newton(RankRisk(X, y, risk, loss, sample_weight=sample_weight), penalty, tol=1e-11,
                          **start)
    Xd = da.from_array(X, chunks=(_CHUNK, _D))
    wd = None if sample_weight is None else da.from_array(sample_weight, chunks=_CHUNK)
    res = smoothed_newton(RankRisk(Xd, y, risk, loss, sample_weight=wd), penalty, tol=1e-11, **start)
    return ref, res


def _assert_same_optimum(ref, res):
    assert ref.converged and res.converged and res.info["certified"]
    F_ref, F = ref.objective_history[-1], res.objective_history[-1]
    assert abs(F - F_ref) <= 1e-9 * abs(F_ref)
    np.testing.assert_allclose(res.coef, ref.coef, atol=1e-4)


@pytest.mark.parametrize("risk, loss, weighted", [
    pytest.param(ERM(), "logistic", True, marks=pytest.mark.slow),  # ERM: the default RankADMMClassifier
    pytest.param(Superquantile(q=0.7), "squared", True, marks=pytest.mark.slow),
    (Extremile(r=2.0), "squared_hinge", False),
    pytest.param(ExponentialSpectral(rho=2.0), "logistic", True, marks=pytest.mark.slow),
    pytest.param(TopK(k=300), "squared", False, marks=pytest.mark.slow),
    pytest.param(Superquantile(q=0.5), "huber", True, marks=pytest.mark.slow),
])
def test_every_spectral_risk_fits_on_the_workers(risk, loss, weighted, gathered):
    ref, res = _fits(risk, loss, weighted)
    _assert_same_optimum(ref, res)
    assert gathered and max(gathered) < _CHUNK


@pytest.mark.slow
def test_a_warm_start_fits_on_the_workers(gathered):
    ref, res = _fits(Extremile(r=2.0), "logistic", True, warm=True)
    _assert_same_optimum(ref, res)
    assert gathered and max(gathered) < _CHUNK


def test_the_gathered_path_brings_vectors_of_length_n(gathered, monkeypatch):
    # the recording sees what the gathered path brings (a chunk of a vector of length n at a time): the
    # check above is not vacuous
    monkeypatch.setenv("SKRANK_NEWTON_GATHER", "1")
    _fits(Extremile(r=2.0), "logistic", False)
    assert max(gathered) >= _CHUNK


def test_a_weighted_warm_fit_keeps_its_problem_on_the_workers(gathered, monkeypatch):
    # the path the fit's problem takes (its design), for sample weights and a warm start
    from skrank.datafits.smoothed_rank_risk import SmoothedRankRisk

    apart, init = [], SmoothedRankRisk.__init__

    def record(self, *args, **kwargs):
        init(self, *args, **kwargs)
        apart.append(self.design.keeps_vectors_apart)

    monkeypatch.setattr(SmoothedRankRisk, "__init__", record)
    X, labels, _, weights = _data()
    res = smoothed_newton(RankRisk(da.from_array(X, chunks=(_CHUNK, _D)), labels, Extremile(r=2.0),
                                   get_loss("logistic"), sample_weight=weights), get_penalty("l2", 1e-2),
                          coef_init=np.full(_D, 0.1), intercept_init=0.0, max_iter=2)
    assert res.n_iter == 2 and apart == [True]
    assert gathered and max(gathered) < _CHUNK


@pytest.mark.parametrize("make", [SpectralRiskClassifier, RankADMMClassifier,
                                  pytest.param(SpectralRiskRegressor, marks=pytest.mark.slow)])
def test_default_estimators_fit_on_the_workers(make, gathered):
    X, labels, targets, _ = _data(1)
    y = targets if make is SpectralRiskRegressor else (labels > 0).astype(int)
    ref = make().fit(X, y)
    est = make().fit(da.from_array(X, chunks=(_CHUNK, _D)), da.from_array(y, chunks=_CHUNK))
    np.testing.assert_allclose(est.coef_.ravel(), ref.coef_.ravel(), rtol=1e-4, atol=1e-5)
    assert gathered and max(gathered) < _CHUNK


@pytest.mark.slow
def test_the_scheduler_keeps_no_lineage_that_grows_with_the_steps(client, monkeypatch):
    # the kept vectors are re-rooted each step: the scheduler's tasks stay O(chunks), not O(chunks x steps)
    from skrank.solvers.full_batch import newton

    monkeypatch.setenv("SKRANK_NEWTON_GATHER", "0")
    X, labels, _, _ = _data()
    tasks, step = [], newton._ProximalPoint.newton_step

    def settled_count():
        # the scheduler forgets released tasks asynchronously: read the count once it stops moving
        counts = [len(client.cluster.scheduler.tasks)]
        for _ in range(100):
            time.sleep(0.02)
            counts.append(len(client.cluster.scheduler.tasks))
            if len(counts) >= 3 and counts[-1] == counts[-2] == counts[-3]:
                break
        return counts[-1]

    def counted(self, *args, **kwargs):
        step(self, *args, **kwargs)
        tasks.append(settled_count())

    monkeypatch.setattr(newton._ProximalPoint, "newton_step", counted)
    with dask.config.set(scheduler=client.get):
        res = smoothed_newton(RankRisk(da.from_array(X, chunks=(200, _D)), labels, Extremile(r=2.0),
                                       get_loss("logistic")), get_penalty("l2", 1e-3), tol=1e-9)
    assert res.converged and len(tasks) >= 5
    # the first steps add the kept vectors; from then on the count stays flat (growth would be linear)
    assert tasks[-1] <= 1.25 * tasks[len(tasks) // 3], tasks


def test_a_chunk_moved_since_who_has_is_taken_from_its_holder(monkeypatch):
    # the Active Memory Manager may drop the replica that ``who_has`` named before the re-rooting task runs
    # there: the task fetches the chunk from a worker that holds it (a gather through the worker's client,
    # from the task, waited for ever on a cluster of worker processes)
    import threading

    import distributed

    from skrank.backends.dask_design import rerooted

    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=":0") as cluster, distributed.Client(cluster) as client:
        first, second = sorted(client.scheduler_info()["workers"])
        values = np.arange(8.0)
        with dask.annotate(workers=[first], allow_other_workers=False):
            (x,) = dask.persist(da.from_array(values, chunks=2), optimize_graph=False)
        distributed.wait(x)
        who_has = client.who_has
        monkeypatch.setattr(client, "who_has", lambda futures, **kwargs: {
            key: (second,) for key in who_has(futures, **kwargs)})  # what a stale answer names
        out = {}
        with dask.config.set(scheduler=client.get):
            thread = threading.Thread(target=lambda: out.update(y=rerooted(x).compute()), daemon=True)
            thread.start()
            thread.join(60)
    assert "y" in out, "the re-rooting waited for ever"
    np.testing.assert_array_equal(out["y"], values)


#: The rows of the chunks of ``X`` computed by the test that counts them (in-process workers).
_READ_ROWS = []


def _counted_read(block):
    """``block``, its rows counted: a read of ``X``'s rows by some product."""
    import sys

    if block.shape[0]:  # not the empty block that makes the array's metadata
        # through the module: the function travels to the workers by value, its globals copied
        sys.modules[__name__]._READ_ROWS.append(block.shape[0])
    return block


@pytest.mark.parametrize("risk", [ERM(), Extremile(r=2.0),
                                  pytest.param(ExponentialSpectral(rho=2.0), marks=pytest.mark.slow)])
def test_a_newton_step_reads_x_twice(risk, client, monkeypatch):
    # a step reads X for the gradient with the Hessian (the pooled blocks' term and the certificate's products
    # in the same pass) and for the scores along the direction; a move of the centre reads it once more, for
    # the gradient at the new weights; the first point once.  Counted by the chunks actually computed, on the
    # workers of a distributed client: a product whose graph reads X twice counts twice.
    monkeypatch.setenv("SKRANK_NEWTON_GATHER", "0")
    X, labels, _, _ = _data()
    _READ_ROWS.clear()
    Xd = da.from_array(X, chunks=(_CHUNK // 2, _D)).map_blocks(_counted_read, dtype=np.float64)
    with dask.config.set(scheduler=client.get):
        res = smoothed_newton(RankRisk(Xd, labels, risk, get_loss("logistic")), get_penalty("l2", 1e-4),
                              tol=1e-10)
    assert res.converged and res.n_iter >= 3
    passes = sum(_READ_ROWS) / _N
    assert passes == res.info["passes"], (passes, res.info["passes"])  # every read is counted
    assert passes <= 2 * res.n_iter + res.info["outer"] + 1, (passes, res.n_iter, res.info["outer"])
