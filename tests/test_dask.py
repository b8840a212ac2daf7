"""Full-batch fits on Dask arrays chunked by rows equal the NumPy fits, without gathering X."""

import re
import tracemalloc

import numpy as np
import pytest
from external_cases import ESTIMATORS, IDS, RANKER_IDS, RANKERS
from external_cases import data as _data
from sklearn.base import clone

from skrank import AveragePrecisionClassifier, PartialAUCClassifier
from skrank.estimators import RankADMMClassifier
from skrank.risks import ERM

da = pytest.importorskip("dask.array")
dask = pytest.importorskip("dask")


def _fit_both(estimator, task, rows, **fit_params):
    X, y = _data(task)
    plain = clone(estimator).fit(X, y, **fit_params)
    Xd = da.from_array(X, chunks=(rows, X.shape[1]))
    chunked = clone(estimator).fit(Xd, da.from_array(y, chunks=rows), **fit_params)
    return X, Xd, plain, chunked


#: One chunk, an uneven last chunk, many chunks: ``make test`` runs the uneven chunks (several chunks
#: merged, the last one shorter), ``make test-slow`` the other two.
ROWS = [pytest.param(1003, marks=pytest.mark.slow), 250, pytest.param(97, marks=pytest.mark.slow)]


@pytest.mark.parametrize("estimator, task, solver", ESTIMATORS, ids=IDS)
@pytest.mark.parametrize("rows", ROWS)
def test_dask_fit_equals_the_numpy_fit(estimator, task, solver, rows):
    X, Xd, plain, chunked = _fit_both(estimator, task, rows)
    assert chunked._solver == solver
    assert chunked.objective_ == pytest.approx(plain.objective_, rel=1e-9)
    assert np.allclose(chunked.coef_, plain.coef_, atol=1e-6)
    predicted = chunked.predict(Xd)
    assert isinstance(predicted, da.Array)  # lazy
    # both fits are certified to tol: their points agree to about sqrt(tol)
    if task == "regression":
        assert np.allclose(predicted.compute(), plain.predict(X), atol=1e-5)
    else:
        clear = np.abs(plain.decision_function(X)) > 1e-5
        assert np.array_equal(predicted.compute()[clear], plain.predict(X)[clear])
        assert np.allclose(chunked.decision_function(Xd).compute(), plain.decision_function(X), atol=1e-5)


@pytest.mark.parametrize("estimator, task, solver", ESTIMATORS[:2], ids=IDS[:2])
def test_dask_fit_with_sample_weights(estimator, task, solver):
    weights = np.random.default_rng(1).integers(0, 4, size=1003).astype(float)
    _, _, plain, chunked = _fit_both(estimator, task, 250, sample_weight=weights)
    assert chunked.objective_ == pytest.approx(plain.objective_, rel=1e-9)
    assert np.allclose(chunked.coef_, plain.coef_, atol=1e-6)


@pytest.fixture(scope="module")
def local_cluster():
    """A two-worker ``LocalCluster`` and its client, shared by the module's cluster tests."""
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                                  dashboard_address=":0") as cluster, \
            distributed.Client(cluster, set_as_default=False) as client:
        yield client


def _cluster_cases():
    """Every estimator: ``make test`` fits the first (a ranker: the next test), the others are slow."""
    fast = {IDS[0]}
    cases = [(e, t, i) for (e, t, _), i in zip(ESTIMATORS, IDS)]
    cases += [(e, "classification", i) for (e, _), i in zip(RANKERS, RANKER_IDS)]
    return [pytest.param(e, t, id=i, marks=() if i in fast else pytest.mark.slow) for e, t, i in cases]


@pytest.mark.parametrize("estimator, task", _cluster_cases())
def test_dask_fit_on_a_two_worker_local_cluster(estimator, task, local_cluster):
    X, y = _data(task)
    plain = clone(estimator).fit(X, y)
    def transitions(dask_scheduler):
        return dask_scheduler.transition_counter

    before = local_cluster.run_on_scheduler(transitions)
    # two chunks, one per worker: each task of a pass is a round trip to the scheduler, so more chunks
    # only slow the test (uneven and many-chunk merges: test_dask_fit_equals_the_numpy_fit); the
    # closed-form fit makes one pass only, in five chunks so that its tasks pass the count below
    rows = 250 if plain._solver == "exact" else 502
    with local_cluster.as_current():
        chunked = clone(estimator).fit(da.from_array(X, chunks=(rows, 6)), y)
    assert local_cluster.run_on_scheduler(transitions) > before + 100  # the chunk tasks ran on the cluster
    assert chunked.objective_ == pytest.approx(plain.objective_, rel=1e-9)
    assert np.allclose(chunked.coef_, plain.coef_, atol=1e-6)


def test_column_chunks_are_merged_and_unknown_chunks_refused():
    X, y = _data("classification")
    plain = RankADMMClassifier().fit(X, y)
    by_columns = RankADMMClassifier().fit(da.from_array(X, chunks=(250, 2)), y)  # rechunked to whole rows
    assert np.allclose(by_columns.coef_, plain.coef_, atol=1e-9)
    Xd = da.from_array(X, chunks=(250, 6))
    unknown = Xd[da.from_array(y, chunks=250) >= 0]  # a Dask mask: NaN chunk sizes
    with pytest.raises(ValueError, match="compute_chunk_sizes"):
        RankADMMClassifier().fit(unknown, y)


def test_bad_dask_input_is_refused():
    X, y = _data("classification")
    Xd = da.from_array(X, chunks=(250, 6))
    bad = X.copy()
    bad[5, 2] = np.nan
    with pytest.raises(ValueError, match="NaN or infinity"):
        RankADMMClassifier().fit(da.from_array(bad, chunks=(250, 6)), y)
    with pytest.raises(ValueError, match="length"):
        RankADMMClassifier().fit(Xd, y[:-1])
    with pytest.raises(ValueError, match="solver='admm' needs X in memory.*Use solver='newton'"):
        RankADMMClassifier(solver="admm").fit(Xd, y)
    with pytest.raises(ValueError, match="no full-batch solver for a Dask array"):
        RankADMMClassifier(loss="hinge", risk="extremile").fit(Xd, y)
    fitted = RankADMMClassifier().fit(X, y)
    with pytest.raises(ValueError, match="features"):
        fitted.predict(da.from_array(X[:, :5], chunks=(250, 5)))


def _check_ranker(X, Xd, plain, chunked):
    assert chunked.objective_ == pytest.approx(plain.objective_, rel=1e-9)
    assert np.allclose(chunked.coef_, plain.coef_, atol=1e-6)
    decision = chunked.decision_function(Xd)
    predicted = chunked.predict(Xd)
    assert isinstance(decision, da.Array) and isinstance(predicted, da.Array)  # lazy
    expected = plain.decision_function(X)
    assert np.allclose(decision.compute(), expected, atol=1e-5)
    clear = np.abs(expected) > 1e-5
    assert np.array_equal(predicted.compute()[clear], plain.predict(X)[clear])


@pytest.mark.parametrize("estimator, solver", RANKERS, ids=RANKER_IDS)
@pytest.mark.parametrize("rows", ROWS)
def test_ranking_dask_fit_equals_the_numpy_fit(estimator, solver, rows):
    X, Xd, plain, chunked = _fit_both(estimator, "classification", rows)
    if isinstance(estimator, PartialAUCClassifier):
        assert chunked._solver == plain._solver == solver
    _check_ranker(X, Xd, plain, chunked)


@pytest.mark.parametrize("estimator, solver", RANKERS, ids=RANKER_IDS)
def test_ranking_dask_fit_with_sample_weights(estimator, solver):
    weights = np.random.default_rng(1).integers(0, 4, size=1003).astype(float)  # zeros drop rows
    X, Xd, plain, chunked = _fit_both(estimator, "classification", 97, sample_weight=weights)
    _check_ranker(X, Xd, plain, chunked)


@pytest.mark.parametrize("Est", [PartialAUCClassifier, AveragePrecisionClassifier])
def test_ranking_dask_fit_one_vs_rest(Est):
    X, _ = _data("classification")
    y = np.digitize(X @ np.linspace(-1.0, 1.0, 6), [-0.5, 0.5])  # three classes
    plain = Est(solver="lbfgs", tol=1e-10).fit(X, y)
    Xd = da.from_array(X, chunks=(250, 6))
    chunked = Est(solver="lbfgs", tol=1e-10).fit(Xd, y)
    assert np.allclose(chunked.objective_, plain.objective_, rtol=1e-9)
    assert np.allclose(chunked.coef_, plain.coef_, atol=1e-6)
    assert np.allclose(chunked.decision_function(Xd).compute(), plain.decision_function(X), atol=1e-5)
    assert np.array_equal(chunked.predict(Xd).compute(), plain.predict(X))


def test_auto_takes_a_full_batch_solver_for_a_dask_array(monkeypatch):
    """Where ``solver="auto"`` would take a stochastic solver in memory, a Dask X is fitted by L-BFGS."""
    from skrank.estimators import average_precision, partial_auc

    monkeypatch.setattr(partial_auc, "_AUTO_MAX_LOGISTIC_PAIRS", 0)
    monkeypatch.setattr(average_precision, "_AUTO_MAX_LOGISTIC_PAIRS", 0)
    X, y = _data("classification")
    Xd = da.from_array(X, chunks=(250, 6))
    for Est in (PartialAUCClassifier, AveragePrecisionClassifier):
        chunked = Est(loss="logistic", tol=1e-10, max_iter=500).fit(Xd, y)
        plain = Est(loss="logistic", solver="lbfgs", tol=1e-10).fit(X, y)
        assert chunked.objective_ == pytest.approx(plain.objective_, rel=1e-9)
        assert "message" in chunked._solver_info[0]  # L-BFGS's record


@pytest.mark.parametrize("estimator, use", [
    (PartialAUCClassifier(solver="agd-sbcd"), "Use solver='lbfgs', the full-batch solver"),
    (PartialAUCClassifier(solver="dca"), "Use solver='lbfgs'"),
    (PartialAUCClassifier(solver="prox-dca"), "Use solver='lbfgs'"),
    (PartialAUCClassifier(solver="ppd-sg", fpr_range=(0, 1), loss="squared"),
     "Use solver='exact' or solver='lbfgs', the full-batch solvers"),
    (PartialAUCClassifier(solver="ppd-adagrad", fpr_range=(0, 1), loss="squared"), "solver='exact'"),
    (AveragePrecisionClassifier(solver="soap"), "Use solver='lbfgs', the full-batch solver"),
], ids=repr)
def test_stochastic_ranking_solvers_refuse_a_dask_array(estimator, use):
    X, y = _data("classification")
    Xd = da.from_array(X, chunks=(250, 6))
    with pytest.raises(ValueError, match=f"solver={estimator.solver!r} needs X in memory.*{re.escape(use)}"):
        clone(estimator).fit(Xd, y)
    if estimator.solver in ("ppd-sg", "ppd-adagrad", "soap"):
        with pytest.raises(ValueError, match="partial_fit takes X in memory .*not a Dask array"):
            clone(estimator).partial_fit(Xd, y, classes=[0, 1])


@pytest.mark.slow
def test_ranking_dask_fit_on_a_two_worker_local_cluster():
    distributed = pytest.importorskip("distributed")
    X, y = _data("classification")
    weights = np.random.default_rng(3).uniform(0.5, 2.0, size=y.size)
    estimator = PartialAUCClassifier(solver="lbfgs", tol=1e-10)
    plain = clone(estimator).fit(X, y, sample_weight=weights)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                                  dashboard_address=":0") as cluster, distributed.Client(cluster):
        Xd = da.from_array(X, chunks=(502, 6))  # two chunks, one per worker
        chunked = clone(estimator).fit(Xd, y, sample_weight=weights)
        scores = chunked.decision_function(Xd).compute()
    assert chunked.objective_ == pytest.approx(plain.objective_, rel=1e-9)
    assert np.allclose(chunked.coef_, plain.coef_, atol=1e-6)
    assert np.allclose(scores, plain.decision_function(X), atol=1e-5)


@pytest.mark.parametrize("weighted", [False, True])
def test_chunked_class_moments_equal_the_in_memory_ones(weighted):
    from skrank.datafits.square_auc import class_moments, two_class_moments

    X, y = _data("classification")
    X = X + 50.0  # means far from zero: the chunks' scatters must be merged about the class means
    positive = y > 0
    positive[:97] = False  # the first chunk holds no positive
    weights = np.random.default_rng(2).uniform(0.0, 3.0, size=y.size) if weighted else None
    expected = [class_moments(X[rows], None if weights is None else weights[rows])
                for rows in (positive, ~positive)]
    for rows in (1003, 250, 97):
        chunked = two_class_moments(da.from_array(X, chunks=(rows, 6)), positive, weights)
        for (mean, cov), (mean_ref, cov_ref) in zip(chunked, expected):
            assert np.allclose(mean, mean_ref, rtol=1e-13, atol=0.0)
            assert np.allclose(cov, cov_ref, rtol=1e-11, atol=1e-13)


@pytest.mark.slow
def test_lazily_generated_data_is_never_gathered():
    """An out-of-core fit: the chunks are generated at each pass and dropped after it."""
    n, d, rows = 100_000, 200, 5_000
    X = da.random.RandomState(0).random_sample(size=(n, d), chunks=(rows, d)) - 0.5
    w_true = np.linspace(-1.0, 1.0, d)
    with dask.config.set(scheduler="threads"):
        y = ((X @ w_true).compute() + np.random.default_rng(0).normal(size=n) > 0).astype(int)
        # the kernels compile (or load from the cache) before the measurement, which is of the data
        RankADMMClassifier(risk=ERM()).fit(X[: 2 * rows], y[: 2 * rows])
        tracemalloc.start()
        try:
            clf = RankADMMClassifier(risk=ERM()).fit(X, y)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    size = n * d * 8
    assert peak < 0.4 * size, f"peak {peak / 2**20:.1f} MiB for a {size / 2**20:.0f} MiB array"
    assert np.corrcoef(clf.coef_.ravel(), w_true)[0, 1] > 0.9


def test_predict_proba_stays_lazy():
    X, y = _data("classification")
    plain = RankADMMClassifier().fit(X, y)
    proba = plain.predict_proba(da.from_array(X, chunks=(250, 6)))
    assert isinstance(proba, da.Array)
    assert np.allclose(proba.compute(), plain.predict_proba(X))


@pytest.mark.parametrize("fit_intercept", [False, True])
def test_fused_step_products_equal_the_separate_products(fit_intercept):
    """One pass of DaskDesign.step_products gives what Design's four products give, Gram updates too."""
    import scipy.sparse as sp

    from skrank.backends.dask_design import DaskDesign
    from skrank.backends.design import Design

    rng = np.random.default_rng(0)
    X = rng.normal(size=(1003, 6))
    plain, chunked = Design(X, fit_intercept), DaskDesign(da.from_array(X, chunks=(97, 6)), fit_intercept)
    h = rng.uniform(0.5, 2.0, size=1003)
    for call in range(3):
        r = rng.normal(size=1003)
        members = rng.permutation(1003)[:40]
        h_block = np.zeros(1003)
        h_block[members] = rng.uniform(0.1, 1.0, size=40)
        M = sp.csr_matrix((rng.normal(size=40), (np.repeat(np.arange(8), 5), members)), shape=(8, 1003))
        block = None if call == 2 else (h_block, M)
        passes = chunked.passes
        expected, got = plain.step_products(r, h, 0.05, block), chunked.step_products(r, h, 0.05, block)
        assert chunked.passes == passes + 1
        for a, b in zip(got, expected):
            assert (a is None and b is None) or np.allclose(a, b, rtol=1e-12, atol=1e-11)
        h = h.copy()
        h[rng.permutation(1003)[:30]] *= 2.0  # a few rows move: the next Gram matrix is an update
    assert chunked._updates == plain._updates == 2
