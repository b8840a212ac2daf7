"""Tests of the PAVA family (skrank.kernels.pava) against independent references.

References: scikit-learn's isotonic regression, cvxpy (CLARABEL) for the
convex chain, rank and permutahedron problems, a brute force over orderings
for the nonconvex rank problems, and KKT conditions checked with loss
derivatives written here (not skrank's).
"""

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from scipy.special import expit
from sklearn.isotonic import isotonic_regression as sk_isotonic

from skrank.kernels.pava import (
    _zstep_sorted_impl,
    isotonic_regression,
    project_permutahedron,
    sorted_weighted_sum,
    zstep,
    zstep_even,
    zstep_sorted,
)
from skrank.losses import ABSOLUTE, HINGE, HUBER, LOGISTIC, SQUARED, SQUARED_HINGE, get_loss

MONOTONE = [LOGISTIC, HINGE, SQUARED_HINGE]
EVEN = [SQUARED, ABSOLUTE, HUBER]
NAMES = {
    LOGISTIC: "logistic",
    HINGE: "hinge",
    SQUARED_HINGE: "squared_hinge",
    SQUARED: "squared",
    ABSOLUTE: "absolute",
    HUBER: "huber",
}
HUBER_EPS = 0.7
FAST = settings(deadline=None, max_examples=400)


def run_property(check, sweep_size, examples, *strategies, **named_strategies):
    """Run ``check`` on Hypothesis's draws of the strategies, ``examples`` of them with ``--sweep full``.

    ``make test`` (``--sweep fast``) draws a quarter of them.
    """
    examples = examples if sweep_size == "full" else examples // 4
    settings(deadline=None, max_examples=examples)(given(*strategies, **named_strategies)(check))()


# --------------------------------------------------------------------------------------
# Independent references
# --------------------------------------------------------------------------------------
def ref_loss(code, t, p=HUBER_EPS):
    t = np.asarray(t, dtype=float)
    if code == LOGISTIC:
        return np.logaddexp(0.0, t)
    if code == HINGE:
        return np.maximum(1.0 + t, 0.0)
    if code == SQUARED_HINGE:
        return np.maximum(1.0 + t, 0.0) ** 2
    if code == SQUARED:
        return t**2 / 2
    if code == ABSOLUTE:
        return np.abs(t)
    return np.where(np.abs(t) <= p, t**2 / 2, p * (np.abs(t) - p / 2))


def ref_subgradient(code, t, p=HUBER_EPS):
    """Interval (lo, hi) of the subdifferential of the loss at the scalar t."""
    if code == LOGISTIC:
        s = expit(t)
        return s, s
    if code == HINGE:
        return float(t > -1.0), float(t >= -1.0)
    if code == SQUARED_HINGE:
        g = 2.0 * max(1.0 + t, 0.0)
        return g, g
    if code == SQUARED:
        return t, t
    if code == ABSOLUTE:
        return (np.sign(t), np.sign(t)) if t != 0 else (-1.0, 1.0)
    g = min(max(t, -p), p)
    return g, g


def param_of(code):
    return HUBER_EPS if code == HUBER else 0.0


def chain_objective(z, m, sigma, code, rho):
    return float(sigma @ ref_loss(code, z, param_of(code)) + rho / 2 * np.sum((z - m) ** 2))


def rank_objective(z, m, sigma, code, rho):
    losses = np.sort(ref_loss(code, z, param_of(code)))
    return float(sigma @ losses + rho / 2 * np.sum((z - m) ** 2))


def make_sigma(kind, n, rng):
    if kind == "monotone":
        return np.sort(rng.uniform(0, 2, n))
    if kind == "range":  # ranked range: zeros, constant, zeros
        lo, hi = n // 4, max(n // 4 + 1, (3 * n) // 4)
        s = np.zeros(n)
        s[lo:hi] = 3.0
        return s
    s = rng.uniform(0, 3, n)
    s[rng.uniform(size=n) < 0.3] = 0.0
    return s


def assert_chain_kkt(z, a, sigma, code, rho, rtol=1e-9):
    """KKT conditions of min sum sigma_i l(z_i) + rho/2 (z_i - a_i)^2, z nondecreasing.

    With multipliers mu_j >= 0 on z_j <= z_{j+1}: mu_j = -(prefix sum of the
    chosen subgradients g_i), so inside every run of equal values we need
    g_i in [lo_i, hi_i] with prefix sums <= 0 and total 0.  The smallest
    attainable prefix sum is max(L_j, -H_{>j}) (lo first, raise from the end).
    """
    n = z.shape[0]
    assert np.all(np.isfinite(z))
    assert np.all(np.diff(z) >= 0)
    p = param_of(code)
    i = 0
    while i < n:
        j = i
        while j + 1 < n and z[j + 1] == z[i]:
            j += 1
        v = z[i]
        lo, hi = ref_subgradient(code, v, p)
        s, ab = sigma[i : j + 1], a[i : j + 1]
        g_lo = s * lo + rho * (v - ab)
        g_hi = s * hi + rho * (v - ab)
        tol = rtol * (1.0 + np.sum(s * max(abs(lo), abs(hi))) + rho * np.sum(abs(v) + np.abs(ab)))
        L, H = np.cumsum(g_lo), np.cumsum(g_hi)
        assert L[-1] <= tol and H[-1] >= -tol, (i, j, L[-1], H[-1], tol)
        assert np.all(np.maximum(L[:-1], -(H[-1] - H[:-1])) <= tol), (i, j)
        i = j + 1


# --------------------------------------------------------------------------------------
# isotonic_regression
# --------------------------------------------------------------------------------------
@pytest.mark.parametrize("n", [1, 2, 17, 500])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("increasing", [True, False])
@pytest.mark.parametrize("ties", [False, True])
def test_isotonic_matches_sklearn(n, weighted, increasing, ties):
    rng = np.random.default_rng(n)
    y = rng.normal(size=n) + np.linspace(0, 2, n)
    if ties:
        y = np.round(y * 2) / 2
    w = rng.uniform(0.05, 3, n) if weighted else None
    ours = isotonic_regression(y, sample_weight=w, increasing=increasing)
    ref = sk_isotonic(y, sample_weight=w, increasing=increasing)
    assert ours.dtype == np.float64 and ours.shape == (n,)
    np.testing.assert_allclose(ours, ref, rtol=0, atol=1e-12)


def _isotonic_matches_sklearn(y, data, increasing):
    w = data.draw(hnp.arrays(np.float64, y.shape[0], elements=st.floats(1e-3, 1e3)))
    ours = isotonic_regression(y, sample_weight=w, increasing=increasing)
    ref = sk_isotonic(y, sample_weight=w, increasing=increasing)
    np.testing.assert_allclose(ours, ref, rtol=1e-12, atol=1e-12 * (1 + np.abs(y).max()))


def test_isotonic_matches_sklearn_property(sweep_size):
    run_property(_isotonic_matches_sklearn, sweep_size, 600,
                 y=hnp.arrays(np.float64, st.integers(1, 60), elements=st.floats(-1e3, 1e3)),
                 data=st.data(), increasing=st.booleans())


def test_isotonic_zero_weights_are_optimal():
    rng = np.random.default_rng(3)
    y = rng.normal(size=60)
    w = rng.uniform(0.5, 2, 60)
    w[rng.uniform(size=60) < 0.4] = 0.0
    w[:3] = 0.0
    u = isotonic_regression(y, w)
    assert np.all(np.isfinite(u)) and np.all(np.diff(u) >= 0)
    pos = w > 0
    ref = sk_isotonic(y[pos], sample_weight=w[pos])
    np.testing.assert_allclose(u[pos], ref, atol=1e-12)


# --------------------------------------------------------------------------------------
# zstep_sorted: chain-constrained prox (Xiao et al. 2023, problem (10))
# --------------------------------------------------------------------------------------
@pytest.mark.parametrize("code", MONOTONE)
@pytest.mark.parametrize("kind", ["monotone", "range", "random"])
@pytest.mark.parametrize("n, seed", [(7, 0), (40, 1)])
def test_zstep_sorted_matches_cvxpy(code, kind, n, seed, referee):
    cp = referee.cp
    rng = np.random.default_rng(seed)
    m = np.sort(rng.normal(scale=2.0, size=n))
    sigma = make_sigma(kind, n, rng)
    rho = 0.3
    z_var = cp.Variable(n)
    f_ref = referee.solve(
        sigma @ referee.loss(code, z_var, HUBER_EPS) + rho / 2 * cp.sum_squares(z_var - m),
        [cp.diff(z_var) >= 0], tol=1e-10,
    )
    for method in ("stack", "sweep"):
        z = zstep_sorted(m, sigma, code, 0.0, rho, method=method)
        assert np.all(np.diff(z) >= 0)
        f = chain_objective(z, m, sigma, code, rho)
        assert abs(f - f_ref) <= 1e-8 * max(1.0, abs(f_ref)), (method, f, f_ref)
        np.testing.assert_allclose(z, z_var.value, atol=1e-5)
    if n == 40:  # the example exercises pooling, otherwise it would prove little
        assert np.unique(z).size < n


@pytest.mark.parametrize("code", MONOTONE + EVEN)
@pytest.mark.parametrize("method", ["stack", "sweep"])
def test_erm_is_elementwise_prox(code, method):
    rng = np.random.default_rng(code)
    m = rng.normal(scale=3, size=300)
    rho, s = 0.05, 0.01
    sigma = np.full(300, s)
    prox = get_loss(NAMES[code], epsilon=HUBER_EPS).prox
    z = zstep_sorted(np.sort(m), sigma, code, param_of(code), rho, method=method)
    np.testing.assert_allclose(z, prox(np.sort(m), s / rho), rtol=1e-13, atol=1e-13)
    if code in MONOTONE:
        z = zstep(m, sigma, code, 0.0, rho, method=method)
        np.testing.assert_allclose(z, prox(m, s / rho), rtol=1e-13, atol=1e-13)


@st.composite
def chain_problems(draw, codes, max_n=40, sort=True):
    n = draw(st.integers(1, max_n))
    m = draw(hnp.arrays(np.float64, n, elements=st.floats(-30, 30)))
    if sort:
        m = np.sort(m)
    kind = draw(st.sampled_from(["monotone", "range", "random", "zero", "constant"]))
    if kind == "zero":
        sigma = np.zeros(n)
    elif kind == "constant":
        sigma = np.full(n, draw(st.floats(0.0, 5.0)))
    elif kind == "range":
        lo = draw(st.integers(0, n - 1))
        hi = draw(st.integers(lo + 1, n))
        sigma = np.zeros(n)
        sigma[lo:hi] = draw(st.floats(0.01, 5.0))
    else:
        sigma = draw(hnp.arrays(np.float64, n, elements=st.floats(0.0, 5.0)))
        if kind == "monotone":
            sigma = np.sort(sigma)
    rho = 10.0 ** draw(st.floats(-4, 3))
    code = draw(st.sampled_from(codes))
    return m, sigma, rho, code


def _zstep_sorted_kkt(problem):
    m, sigma, rho, code = problem
    z_stack = zstep_sorted(m, sigma, code, param_of(code), rho, method="stack")
    z_sweep = zstep_sorted(m, sigma, code, param_of(code), rho, method="sweep")
    assert_chain_kkt(z_stack, m, sigma, code, rho)
    assert_chain_kkt(z_sweep, m, sigma, code, rho)
    scale = 1.0 + np.abs(m).max() + sigma.max() / rho
    np.testing.assert_allclose(z_stack, z_sweep, rtol=0, atol=1e-9 * scale)


def test_zstep_sorted_kkt_property(sweep_size):
    run_property(_zstep_sorted_kkt, sweep_size, 1500, chain_problems(MONOTONE + EVEN))


@FAST
@given(chain_problems(MONOTONE, sort=False))
def test_zstep_is_sorted_solve_scattered(problem):
    m, sigma, rho, code = problem
    z = zstep(m, sigma, code, 0.0, rho)
    perm = np.argsort(m, kind="stable")
    expected = np.empty_like(m)
    expected[perm] = zstep_sorted(m[perm], sigma, code, 0.0, rho)
    np.testing.assert_array_equal(z, expected)
    # co-monotone with m
    assert np.all(np.diff(z[perm]) >= 0)


@pytest.mark.parametrize("code", MONOTONE)
@pytest.mark.parametrize("method", ["stack", "sweep"])
def test_zstep_unsorted_matches_cvxpy_rank_problem(code, method, referee):
    cp = referee.cp
    # Convex (nondecreasing sigma) rank-weighted problem on unsorted m.
    rng = np.random.default_rng(10 + code)
    n = 25
    m = rng.normal(scale=2.0, size=n)
    sigma = np.sort(rng.uniform(0, 2, n))
    sigma[: n // 2] = 0.0  # superquantile-like
    rho = 0.2
    z_var = cp.Variable(n)
    rank_term = referee.rank_term(referee.loss(code, z_var, HUBER_EPS), sigma)[0]
    f_ref = referee.solve(rank_term + rho / 2 * cp.sum_squares(z_var - m), [], tol=1e-10)
    z = zstep(m, sigma, code, 0.0, rho, method=method)
    f = rank_objective(z, m, sigma, code, rho)
    assert abs(f - f_ref) <= 1e-8 * max(1.0, abs(f_ref)), (f, f_ref)


def _brute_force_rank_problem(referee, m, sigma, code, rho, signs=None):
    """min over z of sum_i sigma_i l(z)_[i] + rho/2 ||z - m||^2 for ANY sigma >= 0.

    For each ordering pi of the samples, impose l(z_pi1) <= ... <= l(z_pin) through a
    convex chain (on z for nondecreasing losses, on |z| with fixed signs for even
    ones) and solve with cvxpy; the best ordering is the global optimum.
    """
    cp = referee.cp
    n = m.shape[0]
    best = np.inf
    for pi in itertools.permutations(range(n)):
        for sg in signs if signs is not None else [None]:
            z = cp.Variable(n)
            if sg is None:
                terms = referee.loss(code, z[list(pi)], HUBER_EPS)
                cons = [cp.diff(z[list(pi)]) >= 0]
                obj = sigma @ terms + rho / 2 * cp.sum_squares(z - m)
            else:  # z = sg * u, u >= 0 sorted along pi
                u = z
                cons = [u >= 0, cp.diff(u[list(pi)]) >= 0]
                obj = sigma @ referee.loss(code, u[list(pi)], HUBER_EPS) + rho / 2 * cp.sum_squares(
                    cp.multiply(sg, u) - m
                )
            best = min(best, referee.solve(obj, cons, tol=1e-10))
    return best


@pytest.mark.parametrize("code", [LOGISTIC, HINGE])
def test_zstep_nonconvex_ranked_range_is_global(code, referee):
    # Non-monotone weights: the rank problem is nonconvex, yet sort + PAVA is exact.
    rng = np.random.default_rng(5)
    m = rng.normal(scale=2.0, size=4)
    sigma = np.array([0.0, 2.5, 2.5, 0.0])
    rho = 0.3
    f_ref = _brute_force_rank_problem(referee, m, sigma, code, rho)
    for method in ("stack", "sweep"):
        z = zstep(m, sigma, code, 0.0, rho, method=method)
        assert abs(rank_objective(z, m, sigma, code, rho) - f_ref) <= 1e-8 * max(1, abs(f_ref))


def test_zero_weights_give_mean_m_blocks():
    rng = np.random.default_rng(2)
    m = rng.normal(size=50)
    for method in ("stack", "sweep"):
        np.testing.assert_array_equal(zstep(m, np.zeros(50), LOGISTIC, 0.0, 1.0, method=method), m)
    # zeros in the middle of positive weights: the zero-weight entries sit between
    # their neighbours' values or are pooled with them.
    m = np.sort(m)
    sigma = np.ones(50)
    sigma[20:30] = 0.0
    for method in ("stack", "sweep"):
        z = zstep_sorted(m, sigma, HINGE, 0.0, 0.5, method=method)
        assert_chain_kkt(z, m, sigma, HINGE, 0.5)


@pytest.mark.parametrize("code", MONOTONE)
def test_tiny_rho_is_robust(code):
    rng = np.random.default_rng(4)
    n = 3000
    m = np.sort(rng.normal(scale=5, size=n))
    sigma = np.zeros(n)
    sigma[int(0.8 * n) :] = 1.0 / (n - int(0.8 * n))
    for rho in (1e-7, 1e-5):
        z_stack = zstep_sorted(m, sigma, code, 0.0, rho)
        z_sweep = zstep_sorted(m, sigma, code, 0.0, rho, method="sweep")
        assert_chain_kkt(z_stack, m, sigma, code, rho)
        np.testing.assert_allclose(z_stack, z_sweep, rtol=1e-10, atol=1e-10)
    # huge inputs stay finite
    z = zstep(np.array([-1e6, 1e6, 0.0]), np.array([0.0, 1.0, 1.0]), code, 0.0, 1e-7)
    assert np.all(np.isfinite(z))


def test_logistic_prox_hard_case_through_pava():
    # An instance where a prox that lets Newton bounce inside its bracket ends far
    # from the root (v = 2.869, c = 33.1): the pooled solution must still be KKT.
    m = np.array(
        [-4.18493247, -1.82917146, 0.2452365, 0.2839626, 2.61352239, 2.6977986, 2.86935794]
    )
    sigma = np.array([2.86898792, 0.0, 0.0, 0.0, 2.52516029, 1.30237468, 0.3647115])
    rho = 0.01101048269752703
    for method in ("stack", "sweep"):
        assert_chain_kkt(zstep_sorted(m, sigma, LOGISTIC, 0.0, rho, method=method), m, sigma,
                         LOGISTIC, rho)


# --------------------------------------------------------------------------------------
# zstep_even (regression losses)
# --------------------------------------------------------------------------------------
@pytest.mark.parametrize("code", EVEN)
@pytest.mark.parametrize("method", ["stack", "sweep"])
def test_zstep_even_matches_cvxpy(code, method, referee):
    cp = referee.cp
    rng = np.random.default_rng(20 + code)
    n = 30
    m = rng.normal(scale=2.0, size=n)
    m[3] = 0.0
    sigma = np.sort(rng.uniform(0, 3, n))
    sigma[: n // 3] = 0.0
    rho = 0.4
    z_var = cp.Variable(n)
    rank_term = referee.rank_term(referee.loss(code, z_var, HUBER_EPS), sigma)[0]
    f_ref = referee.solve(rank_term + rho / 2 * cp.sum_squares(z_var - m), [], tol=1e-10)
    z = zstep_even(m, sigma, code, param_of(code), rho, method=method)
    f = rank_objective(z, m, sigma, code, rho)
    assert abs(f - f_ref) <= 1e-8 * max(1.0, abs(f_ref)), (f, f_ref)
    np.testing.assert_allclose(z, z_var.value, atol=1e-5)


@pytest.mark.parametrize("code", EVEN)
def test_zstep_even_nonconvex_is_global(code, referee):
    # Non-monotone weights, n = 3: brute force over orderings and sign patterns.
    rng = np.random.default_rng(30 + code)
    m = rng.normal(scale=2.0, size=3)
    sigma = np.array([0.0, 3.0, 0.0])
    rho = 0.5
    signs = [np.array(s) for s in itertools.product([-1.0, 1.0], repeat=3)]
    f_ref = _brute_force_rank_problem(referee, m, sigma, code, rho, signs=signs)
    z = zstep_even(m, sigma, code, param_of(code), rho)
    assert abs(rank_objective(z, m, sigma, code, rho) - f_ref) <= 1e-8 * max(1, abs(f_ref))


def _zstep_even_kkt(problem):
    m, sigma, rho, code = problem
    for method in ("stack", "sweep"):
        z = zstep_even(m, sigma, code, param_of(code), rho, method=method)
        assert np.all(z * m >= 0)
        perm = np.argsort(np.abs(m), kind="stable")
        assert_chain_kkt(np.abs(z)[perm], np.abs(m)[perm], sigma, code, rho)


def test_zstep_even_kkt_property(sweep_size):
    run_property(_zstep_even_kkt, sweep_size, 600, chain_problems(EVEN, sort=False))


# --------------------------------------------------------------------------------------
# CPT / human-aligned two-piece weights (Xiao et al. 2023, eq. (4) and Appendix B.3)
# --------------------------------------------------------------------------------------
def cpt_weights(n, gamma=0.61, delta=0.69):
    def omega(p, e):
        return p**e / (p**e + (1 - p) ** e) ** (1 / e)

    i = np.arange(1, n + 1)
    sa = omega(i / n, delta) - omega((i - 1) / n, delta)
    sb = omega((n - i + 1) / n, gamma) - omega((n - i) / n, gamma)
    return sa, sb


def piece_minimiser(code, s_bar, m_bar, rho, side, b):
    """argmin of s_bar l(z) + rho/2 (z - m_bar)^2 over z <= b (side 'a') or z >= b ('b')."""
    d = lambda z: s_bar * ref_subgradient(code, z)[1] + rho * (z - m_bar)  # noqa: E731
    lo = m_bar - s_bar * ref_subgradient(code, m_bar)[1] / rho - 1.0
    hi = m_bar + 1.0
    for _ in range(200):  # smallest z with right-derivative >= 0
        mid = 0.5 * (lo + hi)
        if d(mid) >= 0:
            hi = mid
        else:
            lo = mid
    z = hi
    z = min(z, b) if side == "a" else max(z, b)
    return z, s_bar * float(ref_loss(code, z)) + rho / 2 * (z - m_bar) ** 2


@pytest.mark.parametrize("code", [LOGISTIC, HINGE])
@pytest.mark.parametrize("method", ["stack", "sweep"])
@pytest.mark.parametrize("weights", ["cpt", "random"])
@pytest.mark.parametrize("seed", range(4))
def test_cpt_returns_block_stationary_point(code, method, weights, seed):
    rng = np.random.default_rng(seed)
    n = 80
    m = np.sort(rng.normal(loc=-1.0, scale=3.0, size=n))
    threshold = float(np.quantile(m, rng.uniform(0.2, 0.8)))
    if weights == "cpt":
        sa, sb = cpt_weights(n)
        rho = [1e-3, 0.01][seed % 2]
    else:
        sa, sb = rng.uniform(0, 3, n), rng.uniform(0, 3, n)
        rho = [0.1, 1.0][seed % 2]
    z, ends = _zstep_sorted_impl(m, sa, code, 0.0, rho, sb, threshold, method)
    assert np.all(np.diff(z) >= 0) and ends[-1] == n
    starts = np.concatenate([[0], ends[:-1]])
    for s, e in zip(starts, ends):
        v = z[s]
        assert np.all(z[s:e] == v)
        c = e - s
        m_bar = m[s:e].mean()
        za, fa = piece_minimiser(code, sa[s:e].sum() / c, m_bar, rho, "a", threshold)
        zb, fb = piece_minimiser(code, sb[s:e].sum() / c, m_bar, rho, "b", threshold)
        tol = 1e-9 * (1 + abs(fa) + abs(fb))
        if fa < fb - tol:
            assert abs(v - za) <= 1e-8 * (1 + abs(za)), (s, e, v, za, zb, fa, fb)
        elif fb < fa - tol:
            assert abs(v - zb) <= 1e-8 * (1 + abs(zb)), (s, e, v, za, zb, fa, fb)
        else:
            assert min(abs(v - za), abs(v - zb)) <= 1e-8 * (1 + abs(v))


@pytest.mark.parametrize("method", ["stack", "sweep"])
def test_cpt_degenerate_cases_reduce_to_fixed_weights(method):
    rng = np.random.default_rng(7)
    n = 200
    m = np.sort(rng.normal(scale=3, size=n))
    sa, sb = cpt_weights(n)
    rho = 0.01
    fixed_a = zstep_sorted(m, sa, LOGISTIC, 0.0, rho, method=method)
    fixed_b = zstep_sorted(m, sb, LOGISTIC, 0.0, rho, method=method)
    np.testing.assert_allclose(
        zstep_sorted(m, sa, LOGISTIC, 0.0, rho, sigma_b=sa, threshold=0.3, method=method),
        fixed_a,
        atol=1e-12,
    )
    np.testing.assert_array_equal(
        zstep_sorted(m, sa, LOGISTIC, 0.0, rho, sigma_b=sb, threshold=np.inf, method=method),
        fixed_a,
    )
    np.testing.assert_array_equal(
        zstep_sorted(m, sa, LOGISTIC, 0.0, rho, sigma_b=sb, threshold=-np.inf, method=method),
        fixed_b,
    )
    # a very low (finite) threshold puts every block on piece b
    np.testing.assert_allclose(
        zstep_sorted(m, sa, LOGISTIC, 0.0, rho, sigma_b=sb, threshold=-1e9, method=method),
        fixed_b,
        atol=1e-12,
    )
    # unsorted wrapper, both methods produce finite nondecreasing-in-m results
    mu = rng.permutation(m)
    z = zstep(mu, sa, LOGISTIC, 0.0, rho, sigma_b=sb, threshold=-5.0, method=method)
    perm = np.argsort(mu, kind="stable")
    assert np.all(np.isfinite(z)) and np.all(np.diff(z[perm]) >= 0)


def reference_sweep(m, sa, sb, two_piece, threshold, code, rho):
    """Plain-Python Algorithm 2 of Xiao et al. 2023 (as in their code): every sweep merges all
    maximal strictly decreasing runs, then recomputes the merged blocks."""
    from skrank.kernels.pava import _block_value

    def value(s, e):
        return _block_value(
            code, 0.0, rho, float(e - s), sa[s:e].sum(), sb[s:e].sum(), m[s:e].sum(),
            two_piece, threshold,
        )

    blocks = [(i, i + 1) for i in range(m.shape[0])]
    vals = [value(*b) for b in blocks]
    while True:
        merged, i = [], 0
        while i < len(blocks):
            j = i
            while j + 1 < len(blocks) and vals[j] > vals[j + 1]:
                j += 1
            merged.append((blocks[i][0], blocks[j][1]))
            i = j + 1
        if len(merged) == len(blocks):
            return np.array([e for _, e in blocks]), np.array(vals)
        blocks = merged
        vals = [value(*b) for b in blocks]


@pytest.mark.parametrize("cpt", [False, True])
def test_sweep_kernel_follows_algorithm_2(cpt):
    # The O(n) sweep kernel (it revisits only the blocks merged by the previous
    # sweep) must take exactly the paper's merges, also where that differs from
    # the stack variant (nonconvex CPT case).
    n_differ = 0
    for seed in range(60):
        rng = np.random.default_rng(100 + seed)
        n = int(rng.integers(5, 40))
        m = np.sort(rng.normal(scale=3, size=n))
        sa = rng.uniform(0, 3, n)
        sb, threshold = (rng.uniform(0, 3, n), float(rng.normal())) if cpt else (sa, np.inf)
        rho = 10.0 ** rng.uniform(-2, 1)
        code = (LOGISTIC, HINGE)[seed % 2]
        ends_ref, vals_ref = reference_sweep(m, sa, sb, cpt, threshold, code, rho)
        b = sb if cpt else None
        z, ends = _zstep_sorted_impl(m, sa, code, 0.0, rho, b, threshold, "sweep")
        np.testing.assert_array_equal(ends, ends_ref)
        np.testing.assert_allclose(z[ends - 1], vals_ref, rtol=1e-12, atol=1e-12)
        z_stack = _zstep_sorted_impl(m, sa, code, 0.0, rho, b, threshold, "stack")[0]
        n_differ += not np.allclose(z, z_stack, rtol=0, atol=1e-9)
    assert n_differ > 0 if cpt else n_differ == 0


# --------------------------------------------------------------------------------------
# project_permutahedron (Ge and Jiang 2024, Algorithm 1 line 4)
# --------------------------------------------------------------------------------------
def _permutahedron_invariants(v, data):
    n = v.shape[0]
    sigma = data.draw(hnp.arrays(np.float64, n, elements=st.floats(0, 1)))
    lam = project_permutahedron(v, sigma)
    s = np.sort(sigma)
    tol = 1e-12 * (1 + np.abs(v).max() + s.max()) * n
    assert abs(lam.sum() - s.sum()) <= tol
    assert np.all(lam >= s[0] - tol) and np.all(lam <= s[-1] + tol)
    assert np.all(np.cumsum(np.sort(lam)) >= np.cumsum(s) - tol)  # majorisation
    # projection is co-monotone with v, and idempotent
    perm = np.argsort(v, kind="stable")
    assert np.all(np.diff(lam[perm]) >= -tol)
    np.testing.assert_allclose(project_permutahedron(lam, sigma), lam, atol=10 * tol)


def test_permutahedron_invariants(sweep_size):
    run_property(_permutahedron_invariants, sweep_size, 800,
                 v=hnp.arrays(np.float64, st.integers(1, 50), elements=st.floats(-10, 10)), data=st.data())


@settings(deadline=None, max_examples=40)
@given(
    v=hnp.arrays(np.float64, st.integers(1, 7), elements=st.floats(-3, 3)),
    data=st.data(),
)
def test_permutahedron_matches_cvxpy(v, data, referee):
    cp = referee.cp
    n = v.shape[0]
    s = np.sort(data.draw(hnp.arrays(np.float64, n, elements=st.floats(0, 1))))
    lam_var = cp.Variable(n)
    cons = [cp.sum(lam_var) == s.sum()]
    cons += [cp.sum_smallest(lam_var, k) >= s[:k].sum() for k in range(1, n)]
    # CLARABEL can end "optimal_inaccurate" on nearly degenerate s (entries of 1e-8 next to 0)
    f_ref = referee.solve(cp.sum_squares(lam_var - v), cons, tol=1e-10, inaccurate_ok=True)
    lam = project_permutahedron(v, s[::-1])  # sigma in any order
    # ours is exactly feasible (test_permutahedron_invariants); the interior-point
    # reference may sit ~1e-6 inside or outside the boundary
    f = np.sum((lam - v) ** 2)
    assert f <= f_ref + 1e-8 * (1 + f_ref)
    np.testing.assert_allclose(lam, lam_var.value, atol=1e-4)


def test_permutahedron_special_cases():
    v = np.array([3.0, -1.0, 0.5, 2.0])
    sigma = np.array([0.1, 0.2, 0.3, 0.4])
    # far away (large step): sigma re-sorted by v
    np.testing.assert_allclose(project_permutahedron(1e6 * v, sigma), [0.4, 0.1, 0.2, 0.3])
    # uniform sigma: constant
    np.testing.assert_allclose(project_permutahedron(v, np.full(4, 0.25)), 0.25, atol=1e-15)
    # a point of the permutahedron is its own projection
    np.testing.assert_allclose(project_permutahedron(sigma[::-1], sigma), sigma[::-1])


# --------------------------------------------------------------------------------------
# sorted_weighted_sum
# --------------------------------------------------------------------------------------
def test_sorted_weighted_sum():
    values = np.array([3.0, -1.0, 2.0])
    sigma = np.array([0.0, 0.5, 1.0])
    assert sorted_weighted_sum(values, sigma) == pytest.approx(0.5 * 2.0 + 1.0 * 3.0)
    with pytest.raises(ValueError, match="length"):
        sorted_weighted_sum(values, sigma[:2])


# --------------------------------------------------------------------------------------
# Input validation
# --------------------------------------------------------------------------------------
M3 = np.array([0.0, 1.0, 2.0])
S3 = np.array([0.0, 0.5, 0.5])


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: zstep_sorted(M3, S3, LOGISTIC, 0.0, 0.0), "rho must be positive"),
        (lambda: zstep_sorted(M3, S3, LOGISTIC, 0.0, -1.0), "rho must be positive"),
        (lambda: zstep(M3, S3, LOGISTIC, 0.0, np.nan), "rho must be finite"),
        (lambda: zstep(M3, S3[:2], LOGISTIC, 0.0, 1.0), "sigma has length 2"),
        (lambda: zstep(M3, S3, LOGISTIC, 0.0, 1.0, sigma_b=S3[:2]), "sigma_b has length 2"),
        (lambda: zstep(np.array([0.0, np.nan, 1.0]), S3, LOGISTIC, 0.0, 1.0), "m contains NaN"),
        (lambda: zstep(M3, np.array([0.0, np.nan, 1.0]), HINGE, 0.0, 1.0), "sigma contains NaN"),
        (lambda: zstep(M3, -S3 - 1, HINGE, 0.0, 1.0), "sigma must be nonnegative"),
        (lambda: zstep(M3, S3, HINGE, 0.0, 1.0, threshold=np.nan), "threshold"),
        (lambda: zstep(M3, S3, HINGE, 0.0, 1.0, method="fast"), "method must be one of"),
        (lambda: zstep(M3, S3, SQUARED, 0.0, 1.0), "use zstep_even"),
        (lambda: zstep(M3, S3, 17, 0.0, 1.0), "loss_code=17"),
        (lambda: zstep_even(M3, S3, LOGISTIC, 0.0, 1.0), "use zstep for"),
        (lambda: zstep_even(M3, S3, HUBER, 0.0, 1.0), "epsilon"),
        (lambda: zstep_sorted(M3[::-1], S3, HINGE, 0.0, 1.0), "sorted in ascending order"),
        (lambda: zstep_sorted(M3.reshape(1, 3), S3, HINGE, 0.0, 1.0), "m must be a 1-D array"),
        (lambda: isotonic_regression([1.0, np.inf]), "y contains NaN or infinite"),
        (lambda: isotonic_regression([1.0, 2.0], [1.0]), "sample_weight has length 1"),
        (lambda: isotonic_regression([1.0, 2.0], [1.0, -1.0]), "sample_weight must be nonneg"),
        (lambda: project_permutahedron([1.0, 2.0], [1.0]), "sigma has length 1"),
        (lambda: project_permutahedron([1.0, np.nan], [1.0, 2.0]), "v contains NaN"),
    ],
)
def test_input_validation(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_empty_and_single_inputs():
    e = np.empty(0)
    assert isotonic_regression(e).shape == (0,)
    assert zstep(e, e, LOGISTIC, 0.0, 1.0).shape == (0,)
    assert zstep_even(e, e, SQUARED, 0.0, 1.0, method="sweep").shape == (0,)
    assert project_permutahedron(e, e).shape == (0,)
    z = zstep(np.array([0.3]), np.array([1.0]), HINGE, 0.0, 2.0)
    np.testing.assert_allclose(z, [0.3 - 0.5])


@pytest.mark.parametrize("even", [False, True])
def test_zstep_warm_order_matches_cold(even):
    # A warm order (the previous iterate's) changes only how the sort starts:
    # same z for a convex risk, and the order is updated to sort m.
    from skrank.losses import HUBER, LOGISTIC

    rng = np.random.default_rng(4)
    n = 500
    sigma = np.sort(rng.random(n))
    m_prev = rng.normal(size=n)
    m = m_prev + 0.01 * rng.normal(size=n)
    key = np.abs if even else (lambda v: v)
    order = np.argsort(key(m_prev), kind="stable")
    if even:
        cold = zstep_even(m, sigma, HUBER, 1.0, 2.0)
        warm = zstep_even(m, sigma, HUBER, 1.0, 2.0, order=order)
    else:
        cold = zstep(m, sigma, LOGISTIC, 0.0, 2.0)
        warm = zstep(m, sigma, LOGISTIC, 0.0, 2.0, order=order)
    np.testing.assert_allclose(warm, cold, rtol=1e-12, atol=1e-12)
    assert np.all(np.diff(key(m)[order]) >= 0)
    with pytest.raises(ValueError, match="order has shape"):
        zstep(m, sigma, LOGISTIC, 0.0, 2.0, order=order[:-1])
