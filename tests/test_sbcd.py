"""The SBCD kernel of seed 000 and the solvers built on it: AGD-SBCD, DCA, proximal DCA."""

import numpy as np
import pytest

from skrank.datafits.partial_auc import PartialAUCObjective
from skrank.pairwise_losses import get_pairwise_loss
from skrank.solvers.splitting.pauc_dca import dca_partial_auc, prox_dca_partial_auc
from skrank.solvers.stochastic.sampling import seed_state
from skrank.solvers.stochastic.sbcd import agd_sbcd
from skrank.solvers.stochastic.sbcd_kernel import sbcd_steps


def _tiny(seed=0, n_pos=8, n_neg=12, d=3):
    rng = np.random.default_rng(seed)
    Xp = rng.normal(0.5, 1.0, size=(n_pos, d))
    Xn = rng.normal(-0.5, 1.0, size=(n_neg, d))
    return np.ascontiguousarray(Xp), np.ascontiguousarray(Xn)


def _run(Xp, Xn, v, center, lam, level_frac, T, eta, theta, prox, batch, loss, seed,
         average=True, xi=None, reg=0.0):
    xi = np.zeros_like(v) if xi is None else xi
    state = seed_state(np.random.default_rng(seed))
    perm_p = np.arange(Xp.shape[0], dtype=np.int64)
    perm_n = np.arange(Xn.shape[0], dtype=np.int64)
    out = sbcd_steps(Xp, Xn, v, center, xi, lam, level_frac, T, eta, theta, prox, reg, batch,
                     batch, loss.code, loss.shift, loss.scale, loss.is_monotone, state, perm_p,
                     perm_n, average, 0.0)
    return out, perm_p, perm_n


def _exact_prox(referee, Xp, Xn, w, level, mu, loss_name, margin=1.0):
    """argmin_v phi^l(v) + ||v - w||^2 / (2 mu), phi^l = f^l / (N+ N-), through the LP dual (12)."""
    cp = referee.cp
    n_pos, n_neg = len(Xp), len(Xn)
    v = cp.Variable(Xp.shape[1])
    lam = cp.Variable(n_pos)
    terms = []
    for i in range(n_pos):
        z = (Xp[i] - Xn) @ v
        s = cp.logistic(-z) if loss_name == "logistic" else cp.square(cp.pos(margin - z))
        terms.append(level * lam[i] + cp.sum(cp.pos(s - lam[i])))
    obj = cp.sum(cp.hstack(terms)) / (n_pos * n_neg) + cp.sum_squares(v - w) / (2 * mu)
    referee.solve(obj, inaccurate_ok=True, tol=1e-8)
    return v.value


@pytest.mark.parametrize("loss_name, mu", [("squared_hinge", 0.5), ("logistic", 2.0)])
@pytest.mark.parametrize("level", [3.0, 5.5])
def test_inner_loop_converges_to_the_exact_prox(level, loss_name, mu, referee):
    # eq. (13): SBCD's averaged iterate -> prox_{mu phi^l}(w), error O(1/sqrt(T)) (Prop. 4)
    Xp, Xn = _tiny()
    loss = get_pairwise_loss(loss_name)
    w = np.array([0.2, -0.1, 0.3])
    v_star = _exact_prox(referee, Xp, Xn, w, level, mu, loss_name)
    errors = []
    for T in (100, 1000, 10000, 100000):
        lam = np.ones(len(Xp))
        (v_avg, _, _), _, _ = _run(Xp, Xn, w.copy(), w, lam, level / len(Xn), T,
                                   3.0 / np.sqrt(T), 3.0 / np.sqrt(T), 1.0 / mu, 4, loss, 1)
        errors.append(np.linalg.norm(v_avg - v_star))
    assert errors[-1] < 0.2 * errors[0]
    assert errors[-1] < 0.5 * errors[1]
    # small next to how far the prox moves from w
    assert errors[-1] < 0.1 * np.linalg.norm(v_star - w)


@pytest.mark.parametrize("name", ["squared_hinge", "logistic", "squared"])
@pytest.mark.parametrize("average", [True, False])
@pytest.mark.parametrize("spread", [1.0, 1e4])
def test_one_kernel_step_equals_a_numpy_step(name, average, spread):
    # spread = 1e4: the block's scores span more than 1400, so the logistic
    # loss takes the unfactored path
    Xp, Xn = _tiny(3, 10, 15, 4)
    loss = get_pairwise_loss(name, margin=0.8)
    rng = np.random.default_rng(0)
    v0 = rng.normal(size=4) * spread
    center = rng.normal(size=4)
    xi = rng.normal(size=4) * 0.1
    lam0 = rng.uniform(0.0, 1.5, size=10)
    if spread == 1.0:  # (at large spread the reference's loss(z) > 0 underflows)
        lam0[:3] = 0.0  # threshold -inf for the logistic loss: every pair active
    eta, theta, prox, reg, level = 0.3, 0.2, 0.7, 0.05, 0.4
    v, lam = v0.copy(), lam0.copy()
    (v_out, lam_out, _), perm_p, perm_n = _run(Xp, Xn, v, center, lam, level, 1, eta, theta,
                                               prox, 6, loss, 5, average, xi, reg)
    I, J = perm_p[:6], perm_n[:6]
    assert len(set(I)) == 6 and len(set(J)) == 6  # without replacement
    Z = (Xp[I] @ v0)[:, None] - (Xn[J] @ v0)[None, :]
    span = np.ptp(np.r_[Xp[I] @ v0 - loss.shift, Xn[J] @ v0])
    assert (span > 1400.0) == (spread > 1.0)
    act = loss.value(Z) > lam0[I][:, None]
    D = loss.derivative(Z) * act
    G = (Xp[I].T @ D.sum(1) - Xn[J].T @ D.sum(0)) / 36
    v_ref = (v0 + eta * prox * center - eta * (G - xi + reg * v0)) / (1 + eta * prox)
    lam_ref = lam0.copy()
    lam_ref[I] = np.maximum(lam0[I] - theta * (level - act.mean(1)), 0.0)
    np.testing.assert_allclose(v, v_ref, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(lam, lam_ref, rtol=1e-12)
    if average:  # the average over t = 0 .. T-1 of one step is the start
        np.testing.assert_allclose(v_out, v0)
        np.testing.assert_allclose(lam_out, lam0)
    else:
        np.testing.assert_allclose(v_out, v_ref)


def test_lazy_average_of_lambda_equals_the_plain_average():
    Xp, Xn = _tiny(4)
    loss = get_pairwise_loss("logistic")
    w = np.array([0.3, 0.1, -0.2])
    lam = np.full(len(Xp), 0.5)
    (_, lam_avg, _), _, _ = _run(Xp, Xn, w.copy(), w, lam.copy(), 0.3, 57, 0.1, 0.2, 1.0, 3,
                                 loss, 9)
    # replay step by step with T = 1 calls sharing the generator and permutations
    state = seed_state(np.random.default_rng(9))
    perm_p = np.arange(len(Xp), dtype=np.int64)
    perm_n = np.arange(len(Xn), dtype=np.int64)
    v, lam_t, total = w.copy(), lam.copy(), np.zeros(len(Xp))
    for _ in range(57):
        total += lam_t
        sbcd_steps(Xp, Xn, v, w, np.zeros(3), lam_t, 0.3, 1, 0.1, 0.2, 1.0, 0.0, 3, 3,
                   loss.code, loss.shift, loss.scale, loss.is_monotone, state, perm_p, perm_n,
                   False, 0.0)
    np.testing.assert_allclose(lam_avg, total / 57, rtol=1e-12)


def _objective(seed=0, fpr=(0.05, 0.5), loss="squared_hinge"):
    from sklearn.datasets import make_classification
    from sklearn.preprocessing import StandardScaler

    X, y = make_classification(600, 10, n_informative=5, weights=[0.85], random_state=seed)
    X = StandardScaler().fit_transform(X)
    return PartialAUCObjective(X, np.where(y == 1, 1.0, -1.0), fpr, get_pairwise_loss(loss), 1e-3)


@pytest.mark.parametrize("solver", [agd_sbcd, dca_partial_auc, prox_dca_partial_auc])
@pytest.mark.parametrize("fpr", [(0.05, 0.5), (0.0, 0.3)])
def test_solvers_lower_F_and_are_deterministic(solver, fpr):
    obj = _objective(1, fpr)
    w0 = np.full(obj.X_pos.shape[1], 0.05)
    a = solver(obj, obj.penalty, coef_init=w0, max_iter=5, random_state=0)
    b = solver(obj, obj.penalty, coef_init=w0, max_iter=5, random_state=0)
    np.testing.assert_array_equal(a.coef, b.coef)
    assert a.objective < 0.95 * obj.value(w0)
    assert a.objective == pytest.approx(obj.value(a.coef), rel=1e-12)
    assert a.info["passes"] > 0


def test_agd_skips_the_m_call_when_fpr_min_is_zero():
    obj = _objective(2, (0.0, 0.4), "logistic")
    w0 = np.zeros(obj.X_pos.shape[1])
    res = agd_sbcd(obj, obj.penalty, coef_init=w0, max_iter=3, random_state=1)
    assert res.objective < obj.value(w0)
    assert np.all(np.isfinite(res.coef))


@pytest.mark.parametrize("solver", [agd_sbcd, dca_partial_auc, prox_dca_partial_auc])
def test_default_start_and_pass_count(solver):
    obj = _objective(3)
    res = solver(obj, obj.penalty, max_iter=2, tol=0.0, random_state=0)
    assert res.n_iter == 2
    assert res.objective < obj.value(np.zeros(obj.X_pos.shape[1]))
    I, J = min(64, obj.n_pos), min(64, obj.n_neg)
    steps = (2 if solver is agd_sbcd else 1) * sum(
        (50 if solver is agd_sbcd else 100) * (k + 1) ** 2 for k in range(2))
    # exact F at the start and after each outer iteration, the thresholds
    # (both levels for AGD), DCA's full subgradients of f^m
    full = 3 + 2 if solver is agd_sbcd else 3 + 1 + 2
    expected = steps * (I + J) / (obj.n_pos + obj.n_neg) + full
    assert res.info["passes"] == pytest.approx(expected)


def test_agd_safeguard_recovers_from_a_diverging_step():
    obj = _objective(1)
    w0 = np.full(obj.X_pos.shape[1], 0.05)
    F0 = obj.value(w0)
    # gamma / mu = 20 (the paper's grid) overshoots from the start
    res = agd_sbcd(obj, obj.penalty, coef_init=w0, max_iter=6, tol=0.0, mu=1000.0, gamma=20000.0,
                   random_state=0)
    assert np.max(res.objective_history) > F0  # a step did diverge ...
    assert res.info["gamma"] < 20000.0  # ... so gamma was halved
    assert res.objective < 0.8 * F0  # and the run still lowered F


@pytest.mark.parametrize("solver", [agd_sbcd, dca_partial_auc, prox_dca_partial_auc])
@pytest.mark.parametrize("scale", [1e-12, 1e12])
def test_steps_are_scale_covariant(solver, scale):
    # X * s with alpha * s^2: the same iterations, coef / s.  An absolute floor of 1e-12 on
    # the pair smoothness (and on ||delta||^2 of the start) froze every step at s = 1e-12
    ref_obj = _objective(4, (0.0, 0.3))
    X = np.vstack([ref_obj.X_pos, ref_obj.X_neg])
    y = np.r_[np.ones(ref_obj.n_pos), -np.ones(ref_obj.n_neg)]
    obj = PartialAUCObjective(X, y, (0.0, 0.3), get_pairwise_loss("squared_hinge"), 1e-2)
    scaled = PartialAUCObjective(X * scale, y, (0.0, 0.3), get_pairwise_loss("squared_hinge"),
                                 1e-2 * scale**2)
    ref = solver(obj, obj.penalty, max_iter=3, random_state=0)
    res = solver(scaled, scaled.penalty, max_iter=3, random_state=0)
    assert res.n_iter == ref.n_iter
    np.testing.assert_allclose(res.objective_history, ref.objective_history, rtol=1e-8)
    np.testing.assert_allclose(res.coef * scale, ref.coef, rtol=1e-6, atol=1e-9)
