"""Multi-label targets: one ranking per label, as scikit-learn's multi-label classifiers fit them."""

import numpy as np
import pytest
import scipy.sparse as sp
import sklearn
from scipy.special import expit
from sklearn.base import clone
from sklearn.datasets import make_multilabel_classification
from sklearn.model_selection import GridSearchCV
from sklearn.multioutput import MultiOutputClassifier

from skrank import AveragePrecisionClassifier, PartialAUCClassifier
from skrank.estimators import (
    AveragePrecisionClassifierCV,
    PartialAUCClassifierCV,
    RankADMMClassifier,
    SpectralRiskClassifier,
)
from skrank.metrics import make_partial_auc_scorer, partial_auc_score

ESTIMATORS = [PartialAUCClassifier, AveragePrecisionClassifier]


@pytest.fixture(scope="module")
def labelled():
    X, Y = make_multilabel_classification(n_samples=240, n_features=6, n_classes=3, random_state=1)
    return X, Y


@pytest.mark.parametrize("Estimator", ESTIMATORS)
@pytest.mark.parametrize("weighted", [False, True])
def test_each_label_is_the_binary_fit_of_its_column(Estimator, weighted, labelled):
    X, Y = labelled
    w = np.random.default_rng(0).uniform(0.5, 2.0, size=X.shape[0]) if weighted else None
    model = Estimator().fit(X, Y, sample_weight=w)
    assert model.coef_.shape == (3, X.shape[1])
    np.testing.assert_array_equal(model.classes_, [0, 1, 2])
    assert model.multilabel_
    scores = model.decision_function(X)
    assert scores.shape == (X.shape[0], 3)
    for j in range(3):
        binary = Estimator().fit(X, Y[:, j], sample_weight=w)
        np.testing.assert_allclose(scores[:, j], binary.decision_function(X), rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(model.predict(X), (scores > 0).astype(int))
    np.testing.assert_allclose(model.predict_proba(X), expit(scores))


@pytest.mark.parametrize("Estimator", ESTIMATORS)
def test_a_grid_search_scores_the_labels_by_their_mean(Estimator, labelled):
    X, Y = labelled
    scorer = make_partial_auc_scorer((0.0, 0.3))
    search = GridSearchCV(Estimator(), {"alpha": [1e-3, 1e-1]}, scoring=scorer, cv=3).fit(X, Y)
    best = search.best_estimator_
    assert scorer(best, X, Y) == pytest.approx(
        partial_auc_score(Y, best.decision_function(X), fpr_range=(0.0, 0.3)))


@pytest.mark.parametrize("Estimator", ESTIMATORS)
def test_multilabel_misuse_is_refused_with_the_reason(Estimator, labelled):
    X, Y = labelled
    with pytest.raises(ValueError, match="class_weight is not supported with a multi-label y"):
        Estimator(class_weight="balanced").fit(X, Y)
    one_valued = Y.copy()
    one_valued[:, 2] = 1
    with pytest.raises(ValueError, match="label 2 holds only"):
        Estimator().fit(X, one_valued)
    three_valued = Y.copy()
    three_valued[0, 0] = 2
    with pytest.raises(ValueError, match="multi-label indicator"):
        Estimator().fit(X, three_valued)


@pytest.mark.parametrize("Estimator", ESTIMATORS)
def test_a_sparse_indicator_fits_as_the_dense_one(Estimator, labelled):
    X, Y = labelled
    dense = Estimator().fit(X, Y)
    for sparse in (sp.csr_matrix(Y), sp.csc_matrix(Y), sp.csr_array(Y)):
        fitted = Estimator().fit(X, sparse)
        assert fitted.multilabel_
        np.testing.assert_array_equal(fitted.coef_, dense.coef_)
        np.testing.assert_array_equal(fitted.predict(X), dense.predict(X))


@pytest.mark.parametrize("Estimator", ESTIMATORS)
@pytest.mark.parametrize("values", [(-1, 1), (-1.0, 1.0), (0, 2)])
def test_an_indicator_of_other_values_predicts_in_them(Estimator, values, labelled):
    # as scikit-learn's MultiOutputClassifier does (OneVsRestClassifier answers 0 and 1, so that its
    # score against the y it was given is wrong): the larger value is "on", and predict says it
    X, Y = labelled
    low, high = values
    given = np.where(Y == 1, high, low)
    indicator = Estimator().fit(X, Y)
    fitted = Estimator().fit(X, given)
    np.testing.assert_array_equal(fitted.coef_, indicator.coef_)
    predicted = fitted.predict(X)
    assert predicted.dtype == given.dtype
    np.testing.assert_array_equal(predicted, np.where(indicator.predict(X) == 1, high, low))
    assert fitted.score(X, given) == indicator.score(X, Y) > 0.5
    reference = MultiOutputClassifier(Estimator()).fit(X, given)
    np.testing.assert_array_equal(predicted, reference.predict(X))


def test_labels_mixing_strings_and_numbers_are_refused_by_every_classifier(labelled):
    X, _ = labelled
    mixed = [0, "a"] * (X.shape[0] // 2)  # NumPy would read the list as the strings '0' and 'a'
    for estimator in (PartialAUCClassifier(), AveragePrecisionClassifier(), SpectralRiskClassifier(),
                      RankADMMClassifier(), PartialAUCClassifierCV(alphas=2, rank_weights=(0.05,), cv=2),
                      AveragePrecisionClassifierCV(alphas=2, rank_weights=(0.2,), cv=2)):
        for y in (mixed, np.array(mixed, dtype=object)):
            with pytest.raises(ValueError, match=r"y mixes label types \(string and number\), .* 'a' and 0"):
                clone(estimator).fit(X, y)
    stream = PartialAUCClassifier(solver="ppd-sg", fpr_range=(0.0, 1.0), loss="squared")
    with pytest.raises(ValueError, match=r"classes mixes label types"):
        clone(stream).partial_fit(X, np.array(mixed, dtype=object), classes=np.array([0, "a"], dtype=object))
    with pytest.raises(ValueError, match=r"y mixes label types"):
        clone(stream).partial_fit(X, np.array(mixed, dtype=object), classes=["0", "a"])


def test_a_stream_takes_class_labels_only(labelled):
    X, Y = labelled
    with pytest.raises(ValueError, match="partial_fit takes class labels"):
        PartialAUCClassifier(solver="ppd-sg", fpr_range=(0.0, 1.0)).partial_fit(X, Y, classes=[0, 1])


def test_estimators_without_multilabel_targets_refuse_them(labelled):
    X, Y = labelled
    with pytest.raises(ValueError, match="1d"):
        SpectralRiskClassifier().fit(X, Y)


# --- a multi-label y with an X where it lives (Dask, array API) ----------------------------------------
EXTERNAL = [
    PartialAUCClassifier(solver="lbfgs", tol=1e-10),
    PartialAUCClassifier(fpr_range=(0, 0.5), tpr_min=0.5, solver="lbfgs", tol=1e-10),  # two-way
    AveragePrecisionClassifier(tol=1e-10),
]
EXTERNAL_IDS = ["pauc", "pauc-two-way", "ap"]


def _assert_same_fit(fitted, plain, as_numpy=np.asarray):
    assert fitted.multilabel_ and fitted._solver == plain._solver
    np.testing.assert_array_equal(as_numpy(fitted.classes_), plain.classes_)
    np.testing.assert_allclose(as_numpy(fitted.ranking_coef_), plain.ranking_coef_, rtol=1e-9, atol=1e-10)
    # the intercepts and slopes of the Platt fits on the scores move by up to ~1e-8 where the scores'
    # last digits do (sums in another order), as in the single-label external fits; coef_ is A w
    np.testing.assert_allclose(as_numpy(fitted.coef_), plain.coef_, rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(as_numpy(fitted.intercept_), plain.intercept_, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(as_numpy(fitted.calibration_), plain.calibration_, rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(as_numpy(fitted.objective_), plain.objective_, rtol=1e-12, atol=1e-14)


def _assert_same_outputs(method, got, expected, scores):
    assert got.shape == expected.shape and got.dtype == expected.dtype, method
    if method == "predict":
        clear = np.abs(scores) > 1e-6  # a score at zero may fall either way
        np.testing.assert_array_equal(got[clear], expected[clear])
    else:
        np.testing.assert_allclose(got, expected, rtol=1e-7, atol=1e-9, err_msg=method)


@pytest.mark.parametrize("estimator", EXTERNAL, ids=EXTERNAL_IDS)
@pytest.mark.parametrize("dask_y", [False, True])
def test_a_dask_fit_of_a_multilabel_y_equals_the_numpy_fit(estimator, dask_y, labelled):
    da = pytest.importorskip("dask.array")
    X, Y = labelled
    w = np.random.default_rng(0).integers(0, 3, size=X.shape[0]).astype(float)  # zeros drop rows
    plain = clone(estimator).fit(X, Y, sample_weight=w)
    Xd = da.from_array(X, chunks=(97, X.shape[1]))  # an uneven last chunk
    chunked = clone(estimator).fit(Xd, da.from_array(Y, chunks=(97, 3)) if dask_y else Y, sample_weight=w)
    _assert_same_fit(chunked, plain)
    outputs = {"decision_function": (X.shape[0], 3), "predict": (X.shape[0], 3),
               "predict_proba": (X.shape[0], 3), "predict_log_proba": (X.shape[0], 3)}
    for method, shape in outputs.items():
        lazy = getattr(chunked, method)(Xd)
        assert isinstance(lazy, da.Array) and lazy.shape == shape, method  # lazy, as single-label
        _assert_same_outputs(method, lazy.compute(), getattr(plain, method)(X), plain.decision_function(X))


@pytest.mark.parametrize("estimator", EXTERNAL, ids=EXTERNAL_IDS)
@pytest.mark.parametrize("device_y", [False, True])
def test_an_array_api_fit_of_a_multilabel_y_equals_the_numpy_fit(estimator, device_y, labelled):
    xp = pytest.importorskip("array_api_strict")
    from skrank.backends.array_api_design import to_numpy

    X, Y = labelled
    device = xp.Device("device1")  # not the default device: results must stay where X is

    def on_device(a):
        return xp.asarray(np.asarray(a), device=device)

    plain = clone(estimator).fit(X, Y)
    with sklearn.config_context(array_api_dispatch=True):
        placed = clone(estimator).fit(on_device(X), on_device(Y) if device_y else Y)
        _assert_same_fit(placed, plain, to_numpy)
        assert isinstance(placed.coef_, type(on_device([0.0]))) and placed.coef_.device == device
        for method in ("decision_function", "predict", "predict_proba", "predict_log_proba"):
            result = getattr(placed, method)(on_device(X))
            assert isinstance(result, type(on_device([0.0]))) and result.device == device, method
            assert tuple(result.shape) == (X.shape[0], 3), method
            assert method != "predict" or result.dtype == xp.int64
            expected = getattr(plain, method)(X)
            _assert_same_outputs(method, to_numpy(result), expected, plain.decision_function(X))


def test_an_external_x_refuses_a_multilabel_y_of_the_wrong_rows_or_values(labelled):
    da = pytest.importorskip("dask.array")
    X, Y = labelled
    Xd = da.from_array(X, chunks=(97, X.shape[1]))
    with pytest.raises(ValueError, match=r"multi-label, a matrix of 240 rows .*got shape \(239, 3\)"):
        PartialAUCClassifier().fit(Xd, Y[:-1])
    three_valued = Y.copy()
    three_valued[0, 0] = 2
    with pytest.raises(ValueError, match="multi-label indicator"):
        AveragePrecisionClassifier().fit(Xd, three_valued)
    one_valued = Y.copy()
    one_valued[:, 2] = 1
    with pytest.raises(ValueError, match="label 2 holds only"):
        PartialAUCClassifier().fit(Xd, one_valued)
    with pytest.raises(ValueError, match="class_weight is not supported with a multi-label y"):
        PartialAUCClassifier(class_weight="balanced").fit(Xd, Y)
    with pytest.raises(ValueError, match="y must be a vector of length 240"):  # single-label estimators
        SpectralRiskClassifier().fit(Xd, Y)


def test_an_external_x_takes_a_sparse_or_a_minus_one_indicator(labelled):
    da = pytest.importorskip("dask.array")
    xp = pytest.importorskip("array_api_strict")
    from skrank.backends.array_api_design import to_numpy

    X, Y = labelled
    given = 2 * Y - 1
    plain = PartialAUCClassifier(solver="lbfgs", tol=1e-10).fit(X, given)
    scores = plain.decision_function(X)
    clear = np.abs(scores) > 1e-6  # a score at zero may fall either way
    Xd = da.from_array(X, chunks=(97, X.shape[1]))
    for y in (given, da.from_array(given, chunks=(97, 3))):
        predicted = clone(plain).fit(Xd, y).predict(Xd)
        assert isinstance(predicted, da.Array)
        np.testing.assert_array_equal(predicted.compute()[clear], plain.predict(X)[clear])
    from_sparse = clone(plain).fit(Xd, sp.csr_matrix(Y)).predict(Xd).compute()
    np.testing.assert_array_equal(from_sparse[clear], (scores > 0).astype(int)[clear])
    device = xp.Device("device1")
    with sklearn.config_context(array_api_dispatch=True):
        placed = clone(plain).fit(xp.asarray(X, device=device), xp.asarray(given, device=device))
        predicted = placed.predict(xp.asarray(X, device=device))
        assert predicted.device == device and predicted.dtype == xp.int64
        np.testing.assert_array_equal(to_numpy(predicted)[clear], plain.predict(X)[clear])
