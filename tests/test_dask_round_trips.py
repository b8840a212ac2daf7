"""The graphs that the Dask fits submit to a ``dask.distributed`` scheduler per step.

Each submission (``dask.compute``, ``dask.persist``, ``.compute()``, all of
which go through ``Client._graph_to_futures``) is a round trip between the
driving process and the scheduler, and a point where the workers wait for
the driver: a rank step and a Newton step make their reductions in the
submissions that keep their vectors.  The counts are recorded per call of
the rank step's projection, per Newton step (its derivatives and its line
search) and per evaluation of the ranking classifiers' objective, during
small fits on a ``LocalCluster`` of two workers.
"""

import numpy as np
import pytest

from skrank.backends.dask_rank import DaskSortedRankStep
from skrank.datafits.rank_risk import RankRisk
from skrank.datafits.rank_step import ThresholdRankStep
from skrank.datafits.smoothed_rank_risk import SmoothedRankRisk
from skrank.datafits.worker_ranking import WorkerAnchoredObjective
from skrank.estimators import AveragePrecisionClassifier, PartialAUCClassifier
from skrank.losses import get_loss
from skrank.penalties import get_penalty
from skrank.risks import ExponentialSpectral, Extremile, Superquantile
from skrank.solvers.full_batch import newton
from skrank.solvers.full_batch.newton import smoothed_newton

dask = pytest.importorskip("dask")
da = pytest.importorskip("dask.array")
distributed = pytest.importorskip("distributed")

_N, _D, _CHUNK = 2_000, 4, 500


@pytest.fixture(scope="module")
def client():
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                                  dashboard_address=":0") as cluster, distributed.Client(cluster) as client:
        yield client


@pytest.fixture
def submissions(client, monkeypatch):
    """A function that makes ``owner.method`` record the graphs each of its calls submits."""
    box = dict(total=0)
    submit = distributed.Client._graph_to_futures

    def counted(self, *args, **kwargs):
        box["total"] += 1
        return submit(self, *args, **kwargs)

    monkeypatch.setattr(distributed.Client, "_graph_to_futures", counted)

    def record(owner, name):
        calls, method = [], getattr(owner, name)

        def recorded(self, *args, **kwargs):
            start = box["total"]
            out = method(self, *args, **kwargs)
            calls.append(box["total"] - start)
            return out

        monkeypatch.setattr(owner, name, recorded)
        return calls

    with dask.config.set(scheduler=client.get):
        yield record


def _data(seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((_N, _D))
    y = np.where(X @ np.linspace(-1.0, 1.0, _D) + rng.normal(size=_N) > 0.5, 1.0, -1.0)
    return X, y


def _newton_fit(risk):
    X, y = _data()
    return smoothed_newton(RankRisk(da.from_array(X, chunks=(_CHUNK, _D)), y, risk, get_loss("logistic")),
                           get_penalty("l2", 1e-2), tol=1e-10)


def test_a_threshold_projection_is_three_submissions(submissions, monkeypatch):
    # the sketch of the keys, the gather of the bracket, q kept with its free set counted
    monkeypatch.setenv("SKRANK_NEWTON_GATHER", "0")
    monkeypatch.setattr(ThresholdRankStep, "bracket", 1_000)  # the sketch's path at this size
    calls = submissions(ThresholdRankStep, "project")
    assert _newton_fit(Superquantile(q=0.8)).converged
    assert len(calls) >= 3 and max(calls) <= 3, calls


@pytest.mark.slow
def test_a_sorted_projection_is_four_submissions(submissions, monkeypatch):
    # the chunks sorted with their sample, the partitions with their counts, the PAVA stacks with their
    # summaries, q written back; a merge that needs longer summaries asks once more
    monkeypatch.setenv("SKRANK_NEWTON_GATHER", "0")
    calls = submissions(DaskSortedRankStep, "project")
    assert _newton_fit(ExponentialSpectral(rho=2.0)).converged
    assert len(calls) >= 3 and max(calls) <= 4, calls


@pytest.mark.parametrize("risk, step", [(Superquantile(q=0.8), ThresholdRankStep),
                                        (Extremile(r=2.0), DaskSortedRankStep)])
@pytest.mark.slow
def test_a_newton_step_submits_its_reductions_with_its_vectors(risk, step, submissions, monkeypatch):
    # the derivatives: the step's graph with its sums and the kept Hessian weights, one submission; the line
    # search: the direction's loss arguments with the first slope, then per trial the loss arguments and
    # losses, the projection, and the state re-rooted (the Hessian weights too) with its sums and slope
    monkeypatch.setenv("SKRANK_NEWTON_GATHER", "0")
    derivatives = submissions(SmoothedRankRisk, "derivatives")
    trials, projections = submissions(SmoothedRankRisk, "smoothed"), submissions(step, "project")
    steps, seen = submissions(newton._ProximalPoint, "newton_step"), []
    recorded = newton._ProximalPoint.newton_step

    def newton_step(self, *args, **kwargs):
        start, first = len(trials), len(projections)
        recorded(self, *args, **kwargs)
        seen.append((len(trials) - start, sum(projections[first:])))

    monkeypatch.setattr(newton._ProximalPoint, "newton_step", newton_step)
    assert _newton_fit(risk).converged
    assert len(steps) >= 2
    for total, (n_trials, projecting) in zip(steps, seen):
        assert n_trials >= 1 and total - projecting <= 1 + 2 * n_trials, (steps, seen)
    assert len(derivatives) >= 2 and max(derivatives) == 1, derivatives


@pytest.mark.parametrize("make", [PartialAUCClassifier, AveragePrecisionClassifier])
@pytest.mark.slow
def test_an_evaluation_of_the_ranking_objective_on_the_workers(make, submissions):
    # X w; the logistic term; the sort (two); the surrogate (partial AUC: four; average precision: five);
    # the gradient in the rows' order; [X, 1]^T of the derivatives
    calls = submissions(WorkerAnchoredObjective, "_data_term")
    X, y = _data(1)
    make().fit(da.from_array(X, chunks=(_CHUNK, _D)), da.from_array((y > 0).astype(int), chunks=_CHUNK))
    with_gradient = [c for c in calls if c > 2]
    assert with_gradient and max(with_gradient) <= (10 if make is PartialAUCClassifier else 11), calls
