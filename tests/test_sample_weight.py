"""Sample weights: the risk of the weighted empirical distribution (skrank.risks).

Checked against repeated and dropped rows, a quadrature of the weighted
quantile function, cvxpy's optimum of the weighted threshold form, and
scikit-learn's class weights.
"""

import warnings

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.utils.class_weight import compute_sample_weight

from skrank.datafits.rank_risk import RankRisk
from skrank.estimators import (
    RankADMMClassifier,
    RankADMMRegressor,
    SpectralRiskClassifier,
    SpectralRiskRegressor,
)
from skrank.losses import get_loss
from skrank.penalties import get_penalty
from skrank.risks import (
    ERM,
    ExponentialSpectral,
    Extremile,
    HumanAligned,
    RankedRange,
    Superquantile,
    TopK,
)
from skrank.solvers.full_batch.interior_point import interior_point
from skrank.solvers.full_batch.newton import smoothed_newton

ALL_RISKS = [ERM(), Superquantile(q=0.7), Extremile(r=2.5), ExponentialSpectral(rho=3.0), TopK(k=0.3),
             TopK(k=4), RankedRange(m=0.1, k=0.6), RankedRange(m=2, k=7), HumanAligned(reference=0.2)]
SPECTRAL = [ERM(), Superquantile(q=0.7), Extremile(r=2.5), ExponentialSpectral(rho=3.0)]
#: Counts given as fractions: ``floor(f n)`` of the samples, whatever the scale of the weights.
FRACTIONS = [TopK(k=0.3), RankedRange(m=0.1, k=0.6), RankedRange(m=0.25, k=0.75)]
#: The risks whose weighted value is that of the repeated rows for any integer weights.
REPEATABLE = [risk for risk in ALL_RISKS if risk not in FRACTIONS]


def _losses_and_counts(seed=0, n=13):
    rng = np.random.default_rng(seed)
    losses = np.round(rng.normal(size=n), 1)  # ties too
    counts = rng.integers(0, 4, size=n)
    counts[0] = 2
    return losses, counts


@pytest.mark.parametrize("risk", REPEATABLE, ids=lambda r: repr(r))
def test_integer_weights_are_repeated_rows(risk):
    losses, counts = _losses_and_counts()
    repeated = risk.value(np.repeat(losses, counts))
    assert risk.value(losses, counts.astype(float)) == pytest.approx(repeated, rel=1e-12, abs=1e-14)


@pytest.mark.parametrize("risk", ALL_RISKS, ids=lambda r: repr(r))
def test_zero_weights_are_dropped_rows(risk):
    losses, counts = _losses_and_counts()
    kept = counts > 0
    assert risk.value(losses, np.where(kept, 1.0, 0.0)) == pytest.approx(risk.value(losses[kept]), abs=1e-14)
    heavy = risk.value(losses[kept], np.full(kept.sum(), 3.5))
    assert risk.value(losses, np.where(kept, 3.5, 0.0)) == pytest.approx(heavy, abs=1e-14)


@pytest.mark.parametrize("risk", FRACTIONS, ids=lambda r: repr(r))
@pytest.mark.parametrize("scale", [1e-300, 1e-120, 1e-3, 7.3, 1e120, 1e300])
def test_fractional_counts_depend_only_on_the_ratios_of_the_weights(risk, scale):
    losses, counts = _losses_and_counts(2)
    w = counts + 0.5
    assert risk.value(losses, scale * w) == pytest.approx(risk.value(losses, w), rel=1e-13)
    # uniform weights of any scale: the unweighted risk
    assert risk.value(losses, np.full(losses.size, scale)) == pytest.approx(risk.value(losses), rel=1e-13)


def test_fractional_top_k_is_the_superquantile_of_its_share_of_the_samples():
    losses, counts = _losses_and_counts(2)
    w = counts + 0.5
    n = losses.size  # floor(0.3 * 13) = 3 of the 13 samples: the top 3/13 of the weight
    superquantile = Superquantile(q=1 - 3 / n).value(losses, w)
    assert TopK(k=0.3).value(losses, w) == pytest.approx(superquantile, rel=1e-13)


@pytest.mark.parametrize("risk", FRACTIONS, ids=lambda r: repr(r))
def test_fractional_counts_are_repeated_rows_when_both_take_the_same_share(risk):
    # floor(f n) / n = floor(f 2n) / (2n) for these fractions of n = 20 samples: the same share
    losses = np.round(np.random.default_rng(4).normal(size=20), 1)
    counts = np.where(np.arange(20) % 2 == 0, 1, 3)
    n, total = 20, int(counts.sum())
    for fraction in (risk.k, getattr(risk, "m", risk.k)):
        assert np.floor(fraction * n) / n == np.floor(fraction * total) / total
    repeated = risk.value(np.repeat(losses, counts))
    assert risk.value(losses, counts.astype(float)) == pytest.approx(repeated, rel=1e-12)


@pytest.mark.parametrize("risk", [TopK(k=4), RankedRange(m=2, k=7)], ids=repr)
def test_integer_counts_are_units_of_weight(risk):
    losses, counts = _losses_and_counts()
    # a million times the weights is a million copies of each row: the k units lie in the largest loss
    assert risk.value(losses, 1e6 * counts) == pytest.approx(losses[counts > 0].max(), rel=1e-12)


@pytest.mark.parametrize("risk", [TopK(k=4), RankedRange(m=2, k=7), RankedRange(m=0.1, k=7)], ids=repr)
def test_integer_counts_beyond_the_total_weight_name_sample_weight(risk):
    losses, counts = _losses_and_counts()
    with pytest.raises(ValueError, match=r"total sample_weight.*fractions? in \(0, 1\)"):
        risk.value(losses, 1e-3 * counts)


def test_top_k_of_huge_weights_keeps_its_weight():
    # one unit of weight among 1e300: the share 1e-300 is far below the resolution of 1 - C_i
    losses = np.array([0.3, 2.0, -1.0, 0.5])
    assert TopK(k=1).value(losses, np.full(4, 1e300)) == pytest.approx(2.0, rel=1e-12)
    assert RankedRange(m=1, k=2).value(losses, np.full(4, 1e300)) == pytest.approx(2.0, rel=1e-12)


@pytest.mark.parametrize("risk", ALL_RISKS, ids=lambda r: type(r).__name__)
def test_unit_weights_change_nothing(risk):
    losses, _ = _losses_and_counts(1)
    n = losses.size
    assert risk.value(losses, np.ones(n)) == pytest.approx(risk.value(losses), abs=1e-14)
    sorted_losses = np.sort(losses)
    assert np.allclose(risk._weights_for(sorted_losses, np.ones(n)), risk._weights_for(sorted_losses),
                       atol=1e-15)


@pytest.mark.parametrize("risk", SPECTRAL, ids=lambda r: type(r).__name__)
def test_spectral_risks_ignore_the_scale_of_the_weights(risk):
    losses, counts = _losses_and_counts(2)
    w = counts + 0.5
    assert risk.value(losses, 7.3 * w) == pytest.approx(risk.value(losses, w), rel=1e-13)


def _quantile_quadrature(losses, weights, spectrum, m=400_000):
    """``int_0^1 spectrum(u) F^{-1}(u) du`` by the midpoint rule, ``F`` the weighted distribution."""
    order = np.argsort(losses)
    cum = np.cumsum(weights[order]) / weights.sum()
    u = (np.arange(m) + 0.5) / m
    quantile = losses[order][np.minimum(np.searchsorted(cum, u, side="left"), losses.size - 1)]
    return float(np.mean(spectrum(u) * quantile))


@pytest.mark.parametrize(
    "risk, spectrum",
    [
        (ERM(), lambda u: np.ones_like(u)),
        (Superquantile(q=0.7), lambda u: (u >= 0.7) / 0.3),
        (Extremile(r=2.5), lambda u: 2.5 * u**1.5),
        (ExponentialSpectral(rho=3.0), lambda u: 3.0 * np.exp(3.0 * u) / np.expm1(3.0)),
    ],
    ids=lambda v: type(v).__name__,
)
def test_weighted_value_is_the_integral_of_the_weighted_quantile_function(risk, spectrum):
    rng = np.random.default_rng(3)
    losses = rng.normal(size=9)
    weights = rng.uniform(0.1, 2.0, size=9)
    assert risk.value(losses, weights) == pytest.approx(
        _quantile_quadrature(losses, weights, spectrum), abs=2e-5)


@pytest.mark.parametrize(
    "weights, message",
    [
        (np.array([1.0, -1.0, 1.0]), "nonnegative"),
        (np.array([1.0, np.nan, 1.0]), "NaN"),
        (np.array([1.0, 1.0]), "shape"),
        (np.zeros(3), "sums to zero"),
    ],
)
def test_risk_rejects_bad_weights(weights, message):
    with pytest.raises(ValueError, match=message):
        Superquantile(q=0.5).value(np.array([0.1, 0.2, 0.3]), weights)


# -- the solvers -----------------------------------------------------------------------------------


def _data(task, n=90, d=4, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    f = X @ rng.normal(size=d)
    noise = rng.standard_t(3, n)
    y = np.where(f + noise > 0, 1.0, -1.0) if task == "classification" else f + noise
    counts = rng.integers(0, 4, size=n)
    counts[:3] = 1
    return X, y, counts


SOLVER_CASES = [
    (smoothed_newton, "logistic", Superquantile(q=0.6)),
    (smoothed_newton, "squared", Extremile(r=2.0)),
    (smoothed_newton, "squared", TopK(k=37)),  # 37 of the 125 units of weight (repeated rows)
    (interior_point, "hinge", Superquantile(q=0.6)),
    (interior_point, "absolute", TopK(k=37)),
    (interior_point, "hinge", ERM()),
]


@pytest.mark.parametrize("solver, loss_name, risk", SOLVER_CASES,
                         ids=lambda v: getattr(v, "__name__", None) or str(v))
@pytest.mark.parametrize("penalty", [get_penalty("l2", 1e-2), get_penalty("elasticnet", 2e-2, 0.5)],
                         ids=["l2", "elasticnet"])
def test_weighted_solvers_fit_repeated_rows(solver, loss_name, risk, penalty):
    loss = get_loss(loss_name)
    X, y, counts = _data(loss.task)
    kept = counts > 0
    repeated = solver(RankRisk(np.repeat(X, counts, 0), np.repeat(y, counts), risk, loss), penalty, tol=1e-9)
    weighted = solver(RankRisk(X[kept], y[kept], risk, loss, sample_weight=counts[kept].astype(float)),
                      penalty, tol=1e-9)
    assert repeated.converged and weighted.converged
    assert weighted.objective == pytest.approx(repeated.objective, rel=1e-8)
    assert np.allclose(weighted.coef, repeated.coef, atol=1e-4)


@pytest.mark.parametrize("loss_name", ["logistic", "hinge"])
def test_weighted_superquantile_fit_reaches_cvxpy(loss_name, referee):
    cp = referee.cp
    loss = get_loss(loss_name)
    X, y, _ = _data("classification", n=70, seed=4)
    weights = np.random.default_rng(5).uniform(0.2, 3.0, size=y.size)
    q, alpha = 0.6, 1e-2
    w, b, tau = cp.Variable(X.shape[1]), cp.Variable(), cp.Variable()
    t = cp.multiply(-y, X @ w + b)
    p = weights / weights.sum()
    objective = tau + p @ cp.pos(referee.loss(loss, t) - tau) / (1 - q) + 0.5 * alpha * cp.sum_squares(w)
    referee.solve(objective, inaccurate_ok=True, tol=1e-10)
    clf = RankADMMClassifier(loss=loss_name, risk=Superquantile(q=q), alpha=alpha, tol=1e-10)
    clf.fit(X, np.where(y > 0, 1, 0), sample_weight=weights)
    F_cvx = Superquantile(q=q).value(loss.value(-y * (X @ w.value + b.value)), weights) \
        + 0.5 * alpha * float(w.value @ w.value)
    assert clf.objective_ <= F_cvx + 1e-8 * abs(F_cvx)
    assert clf.objective_ >= F_cvx - 1e-6 * abs(F_cvx)  # cvxpy's point is optimal to its tolerance


# -- the estimators --------------------------------------------------------------------------------

ESTIMATORS = [
    (RankADMMClassifier(risk=Superquantile(q=0.6), tol=1e-10), "classification"),
    (RankADMMClassifier(risk=Superquantile(q=0.6), loss="hinge", tol=1e-10), "classification"),
    (RankADMMRegressor(risk=Extremile(r=2.0), tol=1e-10), "regression"),
    (RankADMMRegressor(risk=TopK(k=40), loss="absolute", tol=1e-10), "regression"),
    (SpectralRiskClassifier(risk=ExponentialSpectral(rho=2.0), tol=1e-10), "classification"),
    (SpectralRiskRegressor(risk=Superquantile(q=0.5), tol=1e-10), "regression"),
]


@pytest.mark.parametrize("estimator, task", ESTIMATORS, ids=lambda v: v if isinstance(v, str) else repr(v))
def test_estimator_weights_equal_repeated_and_dropped_rows(estimator, task):
    X, y, counts = _data(task, seed=6)
    repeated = clone(estimator).fit(np.repeat(X, counts, 0), np.repeat(y, counts))
    weighted = clone(estimator).fit(X, y, sample_weight=counts)
    assert weighted.objective_ == pytest.approx(repeated.objective_, rel=1e-8)
    assert np.allclose(weighted.coef_, repeated.coef_, atol=1e-4)
    unit = clone(estimator).fit(X, y, sample_weight=np.ones(y.size))
    plain = clone(estimator).fit(X, y)
    assert np.array_equal(unit.coef_, plain.coef_)


def test_class_weight_balanced_is_the_matching_sample_weight():
    X, y, _ = _data("classification", seed=7)
    y = (X[:, 0] > 0.7).astype(int)  # imbalanced
    for Est in (RankADMMClassifier, SpectralRiskClassifier):
        by_class = Est(risk=Superquantile(q=0.5), class_weight="balanced").fit(X, y)
        balanced = compute_sample_weight("balanced", y)
        by_sample = Est(risk=Superquantile(q=0.5)).fit(X, y, sample_weight=balanced)
        assert np.allclose(by_class.coef_, by_sample.coef_, atol=1e-12)
        plain = Est(risk=Superquantile(q=0.5)).fit(X, y)
        assert not np.allclose(by_class.coef_, plain.coef_, atol=1e-3)  # the weights matter here
    weights = {0: 1.0, 1: 3.0}
    by_dict = RankADMMClassifier(class_weight=weights).fit(X, y)
    by_sample = RankADMMClassifier().fit(X, y, sample_weight=np.where(y == 1, 3.0, 1.0))
    assert np.allclose(by_dict.coef_, by_sample.coef_, atol=1e-12)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(sample_weight=-np.ones(90)), "Negative values"),
        (dict(sample_weight=np.full(90, np.inf)), "infinity"),
        (dict(sample_weight=np.ones(89)), "89"),
        (dict(sample_weight=np.zeros(90)), "non-zero"),
    ],
)
def test_estimators_reject_bad_weights(kwargs, message):
    X, y, _ = _data("classification")
    with pytest.raises(ValueError, match=message):
        RankADMMClassifier().fit(X, y, **kwargs)


def test_weights_that_leave_one_class_are_refused():
    X, y, _ = _data("classification")
    with pytest.raises(ValueError, match="positive weight"):
        RankADMMClassifier().fit(X, y, sample_weight=(y > 0).astype(float))


def test_class_weight_naming_an_unknown_class_is_refused():
    X, y, _ = _data("classification")
    with pytest.raises(ValueError, match="not in y"):
        RankADMMClassifier(class_weight={-1: 1.0, 1: 2.0, 5: 1.0}).fit(X, y)


def test_solvers_without_weights_are_refused_by_name():
    X, y, counts = _data("classification")
    with pytest.raises(ValueError, match="solver='admm' does not take sample_weight. Use solver='newton'"):
        RankADMMClassifier(solver="admm").fit(X, y, sample_weight=counts)
    with pytest.raises(ValueError, match="sample_weight needs one of the solvers"):
        RankADMMClassifier(risk=RankedRange()).fit(X, y, sample_weight=counts)
    with pytest.raises(ValueError, match="does not take sample_weight"):
        SpectralRiskClassifier(solver="sorel").fit(X, y, sample_weight=counts)


@pytest.mark.slow  # builds the stochastic kernels; test_constant_optimum, test_verbose fit sorel unweighted
def test_a_solver_without_weights_fits_unweighted_rows():
    X, y, _ = _data("classification")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        SpectralRiskClassifier(solver="sorel", max_iter=2).fit(X, y)


def test_rank_risk_score_and_scorer_take_weights():
    from skrank.metrics import make_rank_risk_scorer, rank_risk_score

    X, y, counts = _data("regression", seed=8)
    pred = X @ np.ones(X.shape[1])
    risk = Superquantile(q=0.7)
    repeated = rank_risk_score(np.repeat(y, counts), np.repeat(pred, counts), risk=risk)
    assert rank_risk_score(y, pred, risk=risk, sample_weight=counts) == pytest.approx(repeated, rel=1e-12)
    reg = RankADMMRegressor(risk=risk).fit(X, y)
    scorer = make_rank_risk_scorer(risk)
    assert scorer(reg, X, y, sample_weight=counts) == pytest.approx(
        -rank_risk_score(y, reg.predict(X), risk=risk, sample_weight=counts))
    with pytest.raises(ValueError, match="inconsistent"):
        rank_risk_score(y, pred, risk=risk, sample_weight=counts[:-1])


def test_refusal_for_a_ranked_range_names_the_stochastic_solver():
    X, y, counts = _data("classification")
    with pytest.raises(ValueError, match="solver='dca' does not take sample_weight. Use solver='sgd'"):
        RankADMMClassifier(risk=RankedRange(), solver="dca").fit(X, y, sample_weight=counts)


@pytest.mark.parametrize("Est", [RankADMMRegressor, SpectralRiskRegressor])
def test_integer_count_beyond_the_total_weight_is_refused_by_name_before_solving(Est):
    X, y, _ = _data("regression")
    message = r"TopK\(k=5\) counts k in units of sample weight.*sample_weight is 0\.009 < k = 5.*fraction"
    with pytest.raises(ValueError, match=message):
        Est(risk=TopK(k=5)).fit(X, y, sample_weight=np.full(90, 1e-4))


@pytest.mark.parametrize("estimator", [RankADMMRegressor(risk=TopK(k=0.3), tol=1e-10),
                                       RankADMMRegressor(risk=TopK(k=0.3), loss="absolute", tol=1e-10),
                                       SpectralRiskRegressor(risk=TopK(k=0.3), tol=1e-10)], ids=repr)
def test_fractional_top_k_ignores_the_scale_of_the_weights(estimator):
    X, y, counts = _data("regression", seed=2)
    kept = counts > 0
    plain = clone(estimator).fit(X, y)
    ratios = clone(estimator).fit(X[kept], y[kept], sample_weight=counts[kept] + 0.5)
    for scale in (1e-150, 1e150):
        uniform = clone(estimator).fit(X, y, sample_weight=np.full(y.size, scale))
        assert uniform.objective_ == pytest.approx(plain.objective_, rel=1e-7)
        assert np.allclose(uniform.coef_, plain.coef_, atol=1e-4)
        scaled = clone(estimator).fit(X[kept], y[kept], sample_weight=scale * (counts[kept] + 0.5))
        assert scaled.objective_ == pytest.approx(ratios.objective_, rel=1e-7)


def test_integer_count_above_the_rows_within_the_weight_is_the_repeated_rows():
    X, y, counts = _data("regression", n=16, seed=3)  # 14 rows of positive weight, 29 units
    k = 20
    assert (counts > 0).sum() < k <= counts.sum()
    for est in (RankADMMRegressor(risk=TopK(k=k), tol=1e-10),
                RankADMMRegressor(risk=TopK(k=k), loss="absolute", tol=1e-10)):
        repeated = clone(est).fit(np.repeat(X, counts, 0), np.repeat(y, counts))
        weighted = clone(est).fit(X, y, sample_weight=counts)
        assert weighted.objective_ == pytest.approx(repeated.objective_, rel=1e-7)
