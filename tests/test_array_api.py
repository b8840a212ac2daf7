"""Full-batch fits on arrays of another array-API library equal the NumPy fits; X stays on its device.

``array_api_strict`` (the standard and nothing more, on a CPU with simulated
devices) runs the code path that CuPy runs on a GPU, so a NumPy-only shortcut
fails here without a GPU.  The CuPy tests at the end run only where CuPy and a
GPU are present.  ``tests/conftest.py`` sets ``SCIPY_ARRAY_API=1``, which
scikit-learn's array API dispatch needs.
"""

import numpy as np
import pytest
import sklearn
from external_cases import ESTIMATORS, IDS, RANKER_IDS, RANKERS, data
from sklearn.base import clone

from skrank import AveragePrecisionClassifier, PartialAUCClassifier
from skrank.backends.array_api_design import ArrayAPIDesign, to_numpy
from skrank.backends.design import Design
from skrank.estimators import RankADMMClassifier, RankADMMRegressor
from skrank.risks import Superquantile

xp = pytest.importorskip("array_api_strict")

DEVICE = xp.Device("device1")  # not the default device: results must stay where X is


@pytest.fixture(autouse=True)
def dispatch():
    with sklearn.config_context(array_api_dispatch=True):
        yield


def _on_device(a):
    return xp.asarray(np.asarray(a), device=DEVICE)


def _is_on_device(a):
    return isinstance(a, type(_on_device([0.0]))) and a.device == DEVICE


def _fit_both(estimator, task, **fit_params):
    X, y = data(task)
    plain = clone(estimator).fit(X, y, **fit_params)
    placed = clone(estimator).fit(_on_device(X), _on_device(y), **fit_params)
    return X, plain, placed


@pytest.mark.parametrize("estimator, task, solver", ESTIMATORS, ids=IDS)
def test_array_api_fit_equals_the_numpy_fit(estimator, task, solver):
    X, plain, placed = _fit_both(estimator, task)
    assert placed._solver == solver
    assert placed.objective_ == pytest.approx(plain.objective_, rel=1e-9)
    assert _is_on_device(placed.coef_)  # fitted arrays follow X (scikit-learn's array API convention)
    assert np.allclose(to_numpy(placed.coef_), plain.coef_, atol=1e-6)
    predicted = placed.predict(_on_device(X))
    assert _is_on_device(predicted)
    if task == "regression":
        assert np.allclose(to_numpy(predicted), plain.predict(X), atol=1e-5)
    else:
        clear = np.abs(plain.decision_function(X)) > 1e-5
        assert np.array_equal(to_numpy(predicted)[clear], plain.predict(X)[clear])
        decision = placed.decision_function(_on_device(X))
        assert _is_on_device(decision)
        assert np.allclose(to_numpy(decision), plain.decision_function(X), atol=1e-5)


@pytest.mark.parametrize("estimator, task, solver", ESTIMATORS[:2], ids=IDS[:2])
def test_array_api_fit_with_sample_weights(estimator, task, solver):
    weights = np.random.default_rng(1).integers(0, 4, size=1003).astype(float)  # zeros drop rows
    _, plain, placed = _fit_both(estimator, task, sample_weight=_on_device(weights))
    assert placed.objective_ == pytest.approx(plain.objective_, rel=1e-9)
    assert np.allclose(to_numpy(placed.coef_), plain.coef_, atol=1e-6)


@pytest.mark.parametrize("estimator, solver", RANKERS, ids=RANKER_IDS)
def test_ranking_array_api_fit_equals_the_numpy_fit(estimator, solver):
    X, plain, placed = _fit_both(estimator, "classification")
    if isinstance(estimator, PartialAUCClassifier):
        assert placed._solver == plain._solver == solver
    assert placed.objective_ == pytest.approx(plain.objective_, rel=1e-9)
    assert np.allclose(to_numpy(placed.coef_), plain.coef_, atol=1e-6)
    decision = placed.decision_function(_on_device(X))
    proba = placed.predict_proba(_on_device(X))
    assert _is_on_device(decision) and _is_on_device(proba)
    assert np.allclose(to_numpy(decision), plain.decision_function(X), atol=1e-5)
    assert np.allclose(to_numpy(proba), plain.predict_proba(X), atol=1e-5)


ANCHORED = [PartialAUCClassifier(link="sigmoid", tol=1e-10), PartialAUCClassifier(tol=1e-10),
            AveragePrecisionClassifier(tol=1e-10), AveragePrecisionClassifier(rank_weight=1.0, tol=1e-10)]
ANCHORED_IDS = ["partial_auc_sigmoid", "partial_auc", "average_precision", "average_precision_alone"]


@pytest.mark.parametrize("estimator", ANCHORED, ids=ANCHORED_IDS)
@pytest.mark.parametrize("weighted", [False, True], ids=["unweighted", "weighted"])
def test_anchored_fits_in_the_namespace_equal_the_numpy_fits(estimator, weighted):
    """The logistic terms, the surrogates' sigmoid and Platt's fit computed in X's namespace."""
    weights = np.random.default_rng(1).integers(0, 4, size=1003).astype(float) if weighted else None
    kwargs = {} if weights is None else {"sample_weight": weights}
    X, y = data("classification")
    plain = clone(estimator).fit(X, y, **kwargs)
    placed = clone(estimator).fit(_on_device(X), _on_device(y), **kwargs)
    assert placed.objective_ == pytest.approx(plain.objective_, rel=1e-9)
    assert np.allclose(to_numpy(placed.coef_), plain.coef_, atol=1e-6)
    assert np.allclose(to_numpy(placed.calibration_), plain.calibration_, rtol=1e-7, atol=1e-9)
    assert np.allclose(to_numpy(placed.intercept_), plain.intercept_, rtol=1e-7, atol=1e-9)


@pytest.mark.parametrize("weighted", [False, True], ids=["unweighted", "weighted"])
def test_platt_fit_in_the_namespace_equals_the_numpy_fit(weighted):
    from skrank.estimators._platt import fit_platt, platt_threshold

    rng = np.random.default_rng(3)
    s = rng.normal(size=400)
    y = np.where(s + rng.normal(size=400) > 0.5, 1.0, -1.0)
    v = rng.uniform(0.0, 3.0, size=400) if weighted else None
    placed_v = None if v is None else _on_device(v)
    assert fit_platt(_on_device(s), _on_device(y), sample_weight=placed_v) == pytest.approx(
        fit_platt(s, y, sample_weight=v), rel=1e-12)
    # scores that rank the classes backwards: the threshold puts every score on the majority's side
    intercept, calibration = platt_threshold(_on_device(-s), _on_device(y), placed_v)
    intercept_ref, calibration_ref = platt_threshold(-s, y, v)
    assert calibration[0] == calibration_ref[0] == 1.0
    assert intercept == calibration[1] == pytest.approx(intercept_ref, rel=1e-12)


@pytest.mark.parametrize("name", ["logistic", "squared_hinge", "squared", "huber", "hinge", "absolute"])
def test_losses_in_the_namespace_equal_the_kernels(name):
    """The losses, their derivatives and conjugates of the Newton fits, computed on X's device."""
    from skrank.losses import conjugate_in, derivatives_in, get_loss, values_in

    loss = get_loss(name, epsilon=0.7) if name == "huber" else get_loss(name)
    t = np.concatenate([np.linspace(-40.0, 40.0, 801), [-1.0, 0.0, 0.7, -0.7, 1.0]])
    a = np.concatenate([np.linspace(-1.5, 2.5, 401), [0.0, 1.0, -0.7, 0.7]])
    for got, ref in zip(derivatives_in(xp, loss, _on_device(t)), loss.derivatives(t)):
        assert _is_on_device(got)
        assert np.allclose(to_numpy(got), ref, rtol=1e-14, atol=1e-15)
    assert np.array_equal(to_numpy(values_in(xp, loss, _on_device(t))),
                          to_numpy(derivatives_in(xp, loss, _on_device(t))[0]))
    conjugate, ref = to_numpy(conjugate_in(xp, loss, _on_device(a))), loss.conjugate(a)
    assert np.array_equal(np.isinf(conjugate), np.isinf(ref))
    finite = np.isfinite(ref)
    assert np.allclose(conjugate[finite], ref[finite], rtol=1e-14, atol=1e-15)


def test_one_vs_rest_string_labels_and_probabilities():
    X, _ = data("classification")
    y = np.digitize(X @ np.linspace(-1.0, 1.0, 6), [-0.5, 0.5])  # three classes
    plain = RankADMMClassifier(tol=1e-10).fit(X, y)
    placed = RankADMMClassifier(tol=1e-10).fit(_on_device(X), _on_device(y))
    assert np.allclose(to_numpy(placed.objective_), plain.objective_, rtol=1e-9)
    assert np.array_equal(to_numpy(placed.predict(_on_device(X))), plain.predict(X))
    assert np.allclose(to_numpy(placed.predict_proba(_on_device(X))), plain.predict_proba(X), atol=1e-6)
    names = np.array(["low", "mid", "high"])[y]  # labels an array library cannot hold
    labelled = RankADMMClassifier(tol=1e-10).fit(_on_device(X), names)
    assert np.array_equal(labelled.predict(_on_device(X)), plain.predict(X).choose(["low", "mid", "high"]))


def test_warm_start_and_the_namespace_of_prediction():
    from sklearn.utils._array_api import move_estimator_to

    X, y = data("regression")
    placed = RankADMMRegressor(warm_start=True, tol=1e-10).fit(_on_device(X), _on_device(y))
    first = placed.n_iter_
    placed.fit(_on_device(X), _on_device(y))  # starts from the device's coef_
    assert placed.n_iter_ < first
    # as in scikit-learn: predict takes the namespace and device of the fit, or the estimator moves
    with pytest.raises(ValueError, match=r"RankADMMRegressor.predict\(\) must use the same namespace"):
        placed.predict(X)
    moved = move_estimator_to(placed, np, "cpu")
    assert isinstance(moved.coef_, np.ndarray)
    assert np.allclose(moved.predict(X), to_numpy(placed.predict(_on_device(X))), atol=1e-12)


def test_array_api_design_products_equal_numpy_products():
    """Every product of the design, on the device, against the in-memory design's."""
    import scipy.sparse as sp

    rng = np.random.default_rng(0)
    X = rng.normal(size=(257, 5))
    for fit_intercept in (False, True):
        plain, placed = Design(X, fit_intercept), ArrayAPIDesign(_on_device(X), fit_intercept)
        placed._step = 50  # several blocks of rows, an uneven last one
        theta, r, h = rng.normal(size=plain.p), rng.normal(size=257), rng.uniform(0, 2, size=257)
        assert np.allclose(placed.matvec(theta), plain.matvec(theta), rtol=1e-13, atol=1e-13)
        assert np.allclose(placed.rmatvec(r), plain.rmatvec(r), rtol=1e-13, atol=1e-12)
        assert np.allclose(placed.weighted_gram(h), plain.weighted_gram(h), rtol=1e-12, atol=1e-12)
        members = np.where(np.arange(257) % 3 == 0, h, 0.0)  # some rows weightless: only the others go
        assert np.allclose(placed.weighted_gram(members), plain.weighted_gram(members), rtol=1e-12,
                           atol=1e-12)
        idx = np.array([3, 250, 3, 17])
        assert np.array_equal(placed.rows(idx), plain.rows(idx))
        blocks = np.repeat(np.arange(60), rng.integers(1, 8, size=60))[:200]  # segments across blocks
        M = sp.csr_matrix((rng.normal(size=200), (blocks, rng.permutation(257)[:200])),
                          shape=(blocks.max() + 1, 257))
        assert np.allclose(placed.left_product(M), plain.left_product(M), rtol=1e-12, atol=1e-12)
        # the products whose n-vectors stay in X's namespace, and the moves of n-vectors between them
        scores = placed.native_matvec(theta)
        assert _is_on_device(scores)
        assert np.allclose(placed.to_host(scores), plain.native_matvec(theta), rtol=1e-13, atol=1e-13)
        assert np.allclose(placed.native_rmatvec(placed.to_native(r)), plain.native_rmatvec(r),
                           rtol=1e-13, atol=1e-12)
        assert np.allclose(placed.to_host(placed.sigmoid(placed.to_native(r))), plain.sigmoid(r), rtol=1e-14)
    positive = rng.random(257) < 0.3
    from skrank.datafits.square_auc import two_class_moments

    weights = rng.uniform(0.1, 2.0, size=257)
    for (mean, cov), (mean_ref, cov_ref) in zip(two_class_moments(_on_device(X + 50.0), positive, weights),
                                                two_class_moments(X + 50.0, positive, weights)):
        assert np.allclose(mean, mean_ref, rtol=1e-13)
        assert np.allclose(cov, cov_ref, rtol=1e-10, atol=1e-12)


def test_bad_array_api_input_is_refused():
    X, y = data("classification")
    bad = X.copy()
    bad[5, 2] = np.inf
    with pytest.raises(ValueError, match="NaN or infinity"):
        RankADMMClassifier().fit(_on_device(bad), y)
    with pytest.raises(ValueError, match="length"):
        RankADMMClassifier().fit(_on_device(X), y[:-1])
    with pytest.raises(ValueError, match="solver='admm' needs X in memory.*not a array_api_strict array.*"
                                         "Use solver='newton'"):
        RankADMMClassifier(solver="admm").fit(_on_device(X), y)
    with pytest.raises(ValueError, match="no full-batch solver for a array_api_strict array"):
        RankADMMClassifier(loss="hinge", risk="extremile").fit(_on_device(X), y)
    with pytest.raises(ValueError, match="partial_fit takes X in memory"):
        RankADMMClassifier(solver="sgd").partial_fit(_on_device(X), y, classes=[0, 1])
    fitted = RankADMMClassifier().fit(_on_device(X), y)
    with pytest.raises(ValueError, match="features"):
        fitted.predict(_on_device(X[:, :5]))
    with sklearn.config_context(array_api_dispatch=False):
        with pytest.raises(ValueError, match=r"array_api_dispatch=True.*SCIPY_ARRAY_API=1"):
            RankADMMClassifier().fit(_on_device(X), y)


def test_integer_and_float32_data_are_fitted_in_float64():
    X, y = data("classification")
    plain = RankADMMClassifier(risk=Superquantile(q=0.6), tol=1e-10).fit(X.astype(np.float32), y)
    placed = RankADMMClassifier(risk=Superquantile(q=0.6), tol=1e-10).fit(
        xp.asarray(X.astype(np.float32), device=DEVICE), y)
    assert placed.objective_ == pytest.approx(plain.objective_, rel=1e-9)


def _cupy():
    cupy = pytest.importorskip("cupy")
    try:
        if cupy.cuda.runtime.getDeviceCount() < 1:
            pytest.skip("no GPU")
    except Exception as error:  # no driver
        pytest.skip(f"no GPU: {error}")
    return cupy


@pytest.mark.parametrize("estimator, task, solver", ESTIMATORS, ids=IDS)
def test_cupy_fit_equals_the_numpy_fit(estimator, task, solver):
    cupy = _cupy()
    X, y = data(task)
    plain = clone(estimator).fit(X, y)
    placed = clone(estimator).fit(cupy.asarray(X), cupy.asarray(y))
    assert placed.objective_ == pytest.approx(plain.objective_, rel=1e-9)
    assert isinstance(placed.coef_, cupy.ndarray)
    assert np.allclose(cupy.asnumpy(placed.coef_), plain.coef_, atol=1e-6)
    assert isinstance(placed.predict(cupy.asarray(X)), cupy.ndarray)


@pytest.mark.parametrize("estimator, solver", RANKERS, ids=RANKER_IDS)
def test_cupy_ranking_fit_equals_the_numpy_fit(estimator, solver):
    cupy = _cupy()
    X, y = data("classification")
    plain = clone(estimator).fit(X, y)
    placed = clone(estimator).fit(cupy.asarray(X), y)  # NumPy labels with a CuPy X: copied as they are
    assert placed.objective_ == pytest.approx(plain.objective_, rel=1e-9)
    assert np.allclose(cupy.asnumpy(placed.decision_function(cupy.asarray(X))), plain.decision_function(X),
                       atol=1e-5)
