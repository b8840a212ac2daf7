"""Identical rows merged into one of their summed weight before a certified fit: the same optimum."""

import numpy as np
import pytest
import scipy.sparse as sp

import skrank.estimators._fit_template as fit_template
from skrank.datafits.rank_risk import rank_objective
from skrank.estimators._repeated_rows import MIN_ROWS, merge_repeated_rows
from skrank.estimators.spectral_risk import SpectralRiskClassifier, SpectralRiskRegressor
from skrank.risks import ERM, ExponentialSpectral, Extremile, Superquantile, TopK


def _repeated(n=3000, n_distinct=400, d=5, seed=0):
    """Rows drawn with repetition from ``n_distinct`` rows of rounded features; labels of the rows."""
    rng = np.random.default_rng(seed)
    base = np.round(rng.normal(size=(n_distinct, d)), 1)
    X = base[rng.integers(n_distinct, size=n)]
    y = (X @ rng.normal(size=d) + rng.logistic(size=n) > 0).astype(float)
    return X, y


def _brute_force_groups(X, y):
    """The distinct rows of ``(X, y)`` and each row's index among them, by ``np.unique``."""
    Z = np.hstack([np.asarray(X.todense()) if sp.issparse(X) else X, y[:, None]])
    _, first, inverse = np.unique(Z, axis=0, return_index=True, return_inverse=True)
    return first, inverse.ravel()


@pytest.mark.parametrize("sparse", [False, True])
def test_merge_matches_the_distinct_rows(sparse):
    X, y = _repeated()
    y[::7] = 1.0 - y[::7]  # rows alike but for the label stay apart
    Xin = sp.csr_matrix(X) if sparse else X
    weight = np.random.default_rng(1).uniform(0.5, 2.0, size=y.size)
    merged = merge_repeated_rows(Xin, y, weight)
    assert merged is not None
    first, inverse = _brute_force_groups(X, y)
    assert merged.X.shape[0] == first.size
    # the same partition of the rows
    pairs = set(zip(merged.group.tolist(), inverse.tolist()))
    assert len(pairs) == first.size
    rows = np.asarray(merged.X.todense()) if sparse else merged.X
    np.testing.assert_array_equal(rows[merged.group], X)
    np.testing.assert_array_equal(merged.y[merged.group], y)
    np.testing.assert_allclose(merged.sample_weight, np.bincount(merged.group, weights=weight))
    # the distinct rows come in the order of their first occurrence
    assert np.all(np.diff([np.flatnonzero(merged.group == g)[0] for g in range(first.size)]) > 0)


def test_no_merge_without_repeats_or_on_few_rows():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(5000, 4))
    y = (rng.random(5000) > 0.5).astype(float)
    assert merge_repeated_rows(X, y) is None
    Xr, yr = _repeated(n=MIN_ROWS - 1)
    assert merge_repeated_rows(Xr, yr) is None
    # a few repeats (well over the distinct share that pays) are fitted as given
    X[:50] = X[50:100]
    y[:50] = y[50:100]
    assert merge_repeated_rows(X, y) is None


def test_a_sample_decides_without_hashing_every_row(monkeypatch):
    import skrank.estimators._repeated_rows as repeated_rows

    hashed = []
    hashes = repeated_rows._hashes

    def spy(X, y, rows, direction):
        hashed.append(X.shape[0] if rows is None else rows.size)
        return hashes(X, y, rows, direction)

    monkeypatch.setattr(repeated_rows, "_hashes", spy)
    rng = np.random.default_rng(7)
    X = rng.normal(size=(20000, 4))
    y = (rng.random(20000) > 0.5).astype(float)
    X[:1000], y[:1000] = X[1000:2000], y[1000:2000]  # 5% of the rows repeat others
    assert merge_repeated_rows(X, y) is None
    assert len(hashed) == 1 and hashed[0] < 20000  # the sample only
    X[:6000], y[:6000] = X[6000:12000], y[6000:12000]  # 30%: the merge pays
    hashed.clear()
    merged = merge_repeated_rows(X, y)
    assert merged is not None and merged.X.shape[0] == 14000
    assert hashed[-1] == 20000


def test_expanded_weights_share_a_merged_row_by_weight():
    X, y = _repeated(n=2500, n_distinct=100)
    weight = np.random.default_rng(2).uniform(0.5, 2.0, size=y.size)
    merged = merge_repeated_rows(X, y, weight)
    q = np.random.default_rng(3).random(merged.X.shape[0])
    per_row = merged.expanded(q, weight)
    np.testing.assert_allclose(np.bincount(merged.group, weights=per_row), q)
    np.testing.assert_allclose(per_row / weight, (q / merged.sample_weight)[merged.group])


def _spy(monkeypatch):
    """Record the shapes of the merged problems of the fits that follow."""
    shapes = []

    def spy(X, y, sample_weight=None):
        merged = merge_repeated_rows(X, y, sample_weight)
        shapes.append(None if merged is None else merged.X.shape[0])
        return merged

    monkeypatch.setattr(fit_template, "merge_repeated_rows", spy)
    return shapes


def _fit(monkeypatch, make, X, y, weight, merge):
    if not merge:
        monkeypatch.setattr(fit_template, "merge_repeated_rows", lambda *args: None)
    else:
        shapes = _spy(monkeypatch)
    model = make().fit(X, y, sample_weight=weight)
    if merge:
        assert shapes and shapes[0] is not None and shapes[0] < X.shape[0]  # the fit ran on merged rows
    return model


RISKS = [ExponentialSpectral(1.0), Superquantile(0.3), Extremile(1.5), ERM()]


@pytest.mark.filterwarnings("error::skrank.exceptions.ConstantOptimumWarning")
@pytest.mark.parametrize("risk", RISKS)
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("sparse", [False, True])
def test_classifier_on_merged_rows_has_the_same_optimum(monkeypatch, risk, weighted, sparse):
    X, y = _repeated()
    Xin = sp.csr_matrix(X) if sparse else X
    weight = np.random.default_rng(4).integers(1, 4, size=y.size).astype(float) if weighted else None

    def make():
        return SpectralRiskClassifier(risk=risk, tol=1e-9)

    plain = _fit(monkeypatch, make, Xin, y, weight, merge=False)
    monkeypatch.undo()
    merged = _fit(monkeypatch, make, Xin, y, weight, merge=True)
    assert plain._last_result_info["certified"] and merged._last_result_info["certified"]
    # the objective of the original rows at both fits: equal within the certified tolerance
    loss, penalty = merged._loss_obj, merged._penalty_obj
    yy = np.where(y > 0, 1.0, -1.0)
    F = [rank_objective(X, yy, m.coef_.ravel(), float(m.intercept_[0]), risk, loss, penalty, weight)
         for m in (plain, merged)]
    assert abs(F[1] - F[0]) <= 2e-9 * abs(F[0])
    assert F[1] == pytest.approx(merged.objective_, rel=1e-12)
    # strong convexity (alpha = 1e-3) bounds the coefficients' distance by the gaps
    bound = np.sqrt(2 * 2e-9 * abs(F[0]) / 1e-3)
    assert np.linalg.norm(merged.coef_ - plain.coef_) <= bound
    # the certificate's weights are per original row, of the same total
    q = merged._last_result_info["weights"]
    assert q.shape == (y.size,)
    assert q.sum() == pytest.approx(plain._last_result_info["weights"].sum(), rel=1e-12)


def test_regressor_on_merged_rows_has_the_same_optimum(monkeypatch):
    X, _ = _repeated()
    y = np.round(X[:, 0] - 0.5 * X[:, 1], 1)

    def make():
        return SpectralRiskRegressor(risk=Superquantile(0.7), tol=1e-9)

    plain = _fit(monkeypatch, make, X, y, None, merge=False)
    monkeypatch.undo()
    merged = _fit(monkeypatch, make, X, y, None, merge=True)
    F = [m.objective_ for m in (plain, merged)]
    assert abs(F[1] - F[0]) <= 2e-9 * abs(F[0])
    np.testing.assert_allclose(merged.coef_, plain.coef_, atol=np.sqrt(4e-9 * abs(F[0]) / 1e-3))


def test_a_stochastic_solver_fits_the_rows_as_given(monkeypatch):
    X, y = _repeated(n=2500)
    shapes = _spy(monkeypatch)
    SpectralRiskClassifier(solver="sgd", max_iter=2, random_state=0).fit(X, y)
    assert shapes == []


def test_a_risk_that_counts_samples_fits_the_rows_as_given(monkeypatch):
    # a fractional k takes floor(k n) of the n samples: merged rows would change the risk
    X, y = _repeated(n=2500)
    shapes = _spy(monkeypatch)
    SpectralRiskClassifier(risk=TopK(0.7)).fit(X, y)
    assert shapes == []
    assert not TopK(0.7).merges_repeats and Superquantile(0.5).merges_repeats
