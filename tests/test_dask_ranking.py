"""The ranking classifiers' anchored fits on a Dask array computed by a cluster's workers.

On a ``dask.distributed`` client the default fits of ``PartialAUCClassifier``
(one-way and two-way) and ``AveragePrecisionClassifier`` keep their
vectors of length ``n`` on the workers
(:class:`skrank.datafits.worker_ranking.WorkerAnchoredObjective`).  Each fit
is checked against the in-memory fit of the same data (coefficients, the
objective to the solver's tolerance, the ranking of the decision function)
and every result that ``Client.gather`` hands to the driving process is
recorded: none is an array of the rows.  The training metric on sorted
partitions is checked against :mod:`skrank.metrics` with ties across
partitions.
"""

import numpy as np
import pytest

from skrank.estimators import AveragePrecisionClassifier, PartialAUCClassifier
from skrank.metrics import average_precision, region_area

da = pytest.importorskip("dask.array")
pytest.importorskip("distributed")  # the client fixture (conftest.py)

import skrank.backends.dask_rank as dask_rank  # noqa: E402
from skrank.datafits.worker_ranking import sorted_metric  # noqa: E402

N, D, CHUNK = 2400, 5, 300


@pytest.fixture
def gathered(client, monkeypatch):
    """Everything ``client.gather`` returns during the test."""
    record = []
    gather = client.gather

    def recording_gather(futures, *args, **kwargs):
        result = gather(futures, *args, **kwargs)
        record.append(result)
        return result

    monkeypatch.setattr(client, "gather", recording_gather)
    # several partitions of the sort, so that ties and offsets cross them
    monkeypatch.setattr(dask_rank, "_PARTITION_ROWS", 700)
    return record


def _sizes(obj):
    if isinstance(obj, np.ndarray):
        return [obj.size]
    if isinstance(obj, (list, tuple)):
        return [s for item in obj for s in _sizes(item)]
    if isinstance(obj, dict):
        return [s for item in obj.values() for s in _sizes(item)]
    return [1]


def _data(seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(N, D))
    y = np.where(X @ rng.normal(size=D) + rng.normal(size=N) > 0.7, 1, 0)
    return X, y


ESTIMATORS = [PartialAUCClassifier(), PartialAUCClassifier(tpr_min=0.5), AveragePrecisionClassifier()]


def _check_equal(fitted, reference, X):
    scale = np.abs(reference.coef_).max()
    assert np.allclose(fitted.coef_, reference.coef_, atol=1e-5 * scale, rtol=0)
    size = max(1.0, abs(reference.intercept_[0]))
    assert np.allclose(fitted.intercept_, reference.intercept_, atol=1e-5 * size)
    # the solver's tolerance, with room: the two fits take the same iterations, their sums in other orders
    size = max(1.0, abs(reference.objective_))
    assert abs(fitted.objective_ - reference.objective_) <= reference.tol * 1e-2 * size
    a, b = fitted.decision_function(X), reference.decision_function(X)
    assert np.array_equal(np.argsort(a, kind="stable"), np.argsort(b, kind="stable"))


#: The estimators, by id: ``make test`` fits the first on the workers, ``make test-slow`` the others.
ESTIMATOR_CASES = [pytest.param(e, id=i, marks=() if i == "pauc" else pytest.mark.slow)
                   for e, i in zip(ESTIMATORS, ["pauc", "pauc-two-way", "ap"])]


@pytest.mark.parametrize("estimator", ESTIMATOR_CASES)
def test_fit_on_workers_equals_in_memory_and_gathers_no_rows(estimator, gathered):
    X, y = _data()
    reference = estimator.__class__(**estimator.get_params()).fit(X, y)
    fitted = estimator.__class__(**estimator.get_params()).fit(da.from_array(X, chunks=(CHUNK, D)),
                                                             da.from_array(y, chunks=CHUNK))
    sizes = _sizes(gathered)
    assert gathered and max(sizes) < 100, max(sizes)
    _check_equal(fitted, reference, X)


@pytest.mark.parametrize("estimator", ESTIMATOR_CASES)
@pytest.mark.parametrize("weights", ["sample", pytest.param("balanced", marks=pytest.mark.slow)])
def test_weighted_fit_on_workers(estimator, weights, gathered):
    X, y = _data(1)
    params = estimator.get_params()
    sample_weight = None
    if weights == "sample":
        sample_weight = np.random.default_rng(2).uniform(0.2, 3.0, size=N)
    else:
        params["class_weight"] = "balanced"
    reference = estimator.__class__(**params).fit(X, y, sample_weight=sample_weight)
    gathered.clear()
    fitted = estimator.__class__(**params).fit(da.from_array(X, chunks=(CHUNK, D)), y,
                                               sample_weight=sample_weight)
    assert gathered and max(_sizes(gathered)) < 100
    _check_equal(fitted, reference, X)


def test_uncovered_loss_takes_the_gathered_path(gathered):
    """The logistic pairwise loss has no partitioned form: its fit gathers the scores, as before."""
    X, y = _data(3)
    params = dict(loss="logistic", fpr_range=(0.0, 0.3))
    reference = PartialAUCClassifier(**params).fit(X, y)
    fitted = PartialAUCClassifier(**params).fit(da.from_array(X, chunks=(CHUNK, D)),
                                                da.from_array(y, chunks=CHUNK))
    assert max(_sizes(gathered)) >= CHUNK  # the rows' scores came back
    assert np.allclose(fitted.coef_, reference.coef_, atol=1e-6 * np.abs(reference.coef_).max())


@pytest.mark.parametrize("ties", [False, True])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("region", [((0.0, 1.0), 0.0), ((0.05, 0.3), 0.0), ((0.0, 0.4), 0.5)])
def test_sorted_metric_matches_the_metrics(ties, weighted, region, client):
    rng = np.random.default_rng(4)
    n = 500
    h = rng.normal(size=n)
    if ties:
        h = np.round(h * 2.0) / 2.0  # few values: groups of ties across the chunks
    pos = rng.random(n) < 0.3
    w = rng.uniform(0.1, 2.0, size=n) if weighted else None
    order = np.lexsort((np.arange(n), h))
    chunks = (1, 40, 7, 100, 2, 150, 200)
    hd, yd = (da.from_array(a[order], chunks=(chunks,)) for a in (h, np.where(pos, 1.0, -1.0)))
    wd = None if w is None else da.from_array(w[order], chunks=(chunks,))
    fpr_range, tpr_min = region
    expected = region_area(pos, h, w, fpr_range=fpr_range, tpr_min=tpr_min)
    got = sorted_metric(hd, yd, wd, "roc", fpr_range, tpr_min)
    assert got == pytest.approx(expected, rel=1e-12, abs=1e-14)
    expected = average_precision(pos, h, w)
    assert sorted_metric(hd, yd, wd, "precision") == pytest.approx(expected, rel=1e-12)


def test_sort_by_key_orders_ties_by_row(client):
    keys = np.round(np.random.default_rng(5).normal(size=300))
    column = np.arange(300.0) * 2.0
    sorted_keys, rows, sorted_column = dask_rank.sort_by_key(da.from_array(keys, chunks=50),
                                                             da.from_array(column, chunks=50), n_partitions=4)
    order = np.lexsort((np.arange(300), keys))
    assert sorted_keys.numblocks[0] == 4
    assert np.array_equal(rows.compute(), order)
    assert np.array_equal(sorted_keys.compute(), keys[order])
    assert np.array_equal(sorted_column.compute(), column[order])


# one-vs-rest on Dask arrays: test_dask.py::test_ranking_dask_fit_one_vs_rest in ``make test``
@pytest.mark.slow
@pytest.mark.parametrize("estimator", [PartialAUCClassifier(), AveragePrecisionClassifier()],
                         ids=["pauc", "ap"])
def test_one_vs_rest_on_workers(estimator, gathered):
    rng = np.random.default_rng(6)
    X = rng.normal(size=(900, 4))
    y = np.argmax(X[:, :3] + rng.normal(size=(900, 3)), axis=1)
    reference = estimator.__class__().fit(X, y)
    gathered.clear()
    fitted = estimator.__class__().fit(da.from_array(X, chunks=(150, 4)), da.from_array(y, chunks=150))
    assert max(_sizes(gathered)) < 100
    assert np.array_equal(fitted.classes_, reference.classes_)
    assert np.allclose(fitted.coef_, reference.coef_, atol=1e-5 * np.abs(reference.coef_).max())
    assert np.allclose(fitted.objective_, reference.objective_, atol=1e-6)
    assert np.array_equal(fitted.predict(X), reference.predict(X))
