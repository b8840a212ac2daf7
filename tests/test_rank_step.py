"""The rank-step protocol of the smoothed rank risk (:mod:`skrank.datafits.rank_step`).

Each rank step answers ``project(keys, mu) -> (q, pooled)`` and
``risk_value(losses, pooled=None)``; the host's and the threshold form's
on Dask keys are checked against the projection onto the permutahedron
(:func:`skrank.kernels.pava.project_permutahedron`) and the risk's own
value.
"""

import numpy as np
import pytest

from skrank.backends.design import Design
from skrank.datafits.rank_step import HostRankStep, Pooled, ThresholdRankStep, rank_step_for
from skrank.kernels.pava import project_permutahedron
from skrank.risks import Extremile, Superquantile, TopK

N = 60


def _keys(seed):
    rng = np.random.default_rng(seed)
    return np.round(rng.normal(size=N), 1)  # ties among the keys


@pytest.mark.parametrize("mu", [1.0, 1e-2])
@pytest.mark.parametrize("risk", [Superquantile(q=0.7), Extremile(r=2.0)], ids=repr)
def test_host_step_projects_onto_the_permutahedron(risk, mu):
    step = rank_step_for(Design(np.zeros((N, 1)), True), risk, None, np.broadcast_to(1.0, N))
    assert isinstance(step, HostRankStep)
    sigma = np.sort(risk.weights(N))
    for seed in range(3):  # the warm order of the last projection carries over
        keys = _keys(seed)
        expected = project_permutahedron(keys / mu, sigma)
        q, pooled = step.project(keys.copy(), mu)
        np.testing.assert_allclose(q, expected, atol=1e-12)
        assert isinstance(pooled, Pooled) and np.all(pooled.size > 1)
        # the pooled blocks are runs of the order whose weights share one mean
        for start, size in zip(pooled.start, pooled.size):
            members = pooled.order[start:start + size]
            assert np.ptp(keys[members] - mu * q[members]) <= 1e-9
        losses = np.abs(keys)
        assert step.risk_value(losses) == pytest.approx(risk.value(losses), rel=1e-12)
        assert step.risk_value(losses, pooled) == pytest.approx(risk.value(losses), rel=1e-12)


def test_host_step_with_masses_is_the_step_of_repeated_rows():
    # integer masses: a row's weight is the sum of its copies' weights; the masses of mean 1 scale the
    # metric by N / sum(mass), as the smoothing mu of the copies' step
    rng = np.random.default_rng(4)
    risk, mass = Superquantile(q=0.6), rng.integers(1, 4, size=N).astype(float)
    keys, copies = rng.normal(size=N), mass.astype(int)
    scale = N / mass.sum()
    weighted = HostRankStep(risk, N, mass, mass * scale)
    repeated = HostRankStep(risk, copies.sum(), None, np.broadcast_to(1.0, copies.sum()))
    q, _ = weighted.project(keys.copy(), 1.0)
    q_rows, _ = repeated.project(np.repeat(keys, copies), 1.0 / scale)
    np.testing.assert_allclose(q, np.bincount(np.repeat(np.arange(N), copies), q_rows), atol=1e-12)
    losses = rng.random(N)
    assert weighted.risk_value(losses) == pytest.approx(risk.value(losses, mass), rel=1e-12)


@pytest.mark.parametrize("risk", [Superquantile(q=0.8), TopK(k=0.3), TopK(k=7)], ids=repr)
def test_threshold_step_on_dask_keys_equals_the_host_step(risk):
    da = pytest.importorskip("dask.array")
    dask = pytest.importorskip("dask")
    from skrank.backends.dask_vectors import WorkerDesign

    mu = 0.05
    # the design of a fit that keeps its vectors on the workers
    step = rank_step_for(WorkerDesign(da.zeros((N, 1), chunks=(17, 1)), True), risk, None, None)
    assert isinstance(step, ThresholdRankStep)
    host = HostRankStep(risk, N, None, np.broadcast_to(1.0, N))
    keys = np.random.default_rng(5).normal(size=N)
    with dask.config.set(scheduler="synchronous"):
        q, pooled = step.project(da.from_array(keys, chunks=17), mu)
        expected, _ = host.project(keys.copy(), mu)
        np.testing.assert_allclose(q.compute(), expected, atol=1e-12)
        cap = risk.threshold_level(N) / N
        free = int(np.count_nonzero((expected > 1e-12) & (expected < cap - 1e-12)))
        assert int(pooled.size.sum()) == (free if free > 1 else 0)
        losses = np.abs(keys)
        value = step.risk_value(da.from_array(losses, chunks=17))
    assert value == pytest.approx(risk.value(losses), rel=1e-9)
