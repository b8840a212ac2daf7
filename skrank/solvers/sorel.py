"""SOREL: stochastic optimisation of spectral risks (Ge and Jiang 2024), spec 003.

Practical version of Algorithm 1 (spec 003 section 2.3): one dual step per
pass, a proximal-point SVRG inner loop of ``ceil(n / batch_size)`` steps,
the last iterate as both the reference point and the next outer iterate.
"""

import time

import numpy as np

from ..objective import rank_objective
from ._result import SolverResult
from ._stepsize import (
    check_learning_rate,
    WeightedSampler,
    draw_uniform,
    make_rng,
    loss_arguments_dense,
    prepare_data,
    rank_weights,
    sample_smoothness,
    scalar_gradients,
    seed_numba,
    svrg_epoch,
    svrg_step_size,
)


_CAP_REFRESH = 50  # the dual step cap is refreshed at epochs 0, 1, 2, 4, 8, ... and every 50


def _refresh_cap(k):
    # The cap costs O(n d^2); refreshing it on a doubling schedule keeps its
    # cost a small fraction of the epochs while tracking the growing curvature.
    return k & (k - 1) == 0 or k % _CAP_REFRESH == 0


def _project(v, sigma):
    """Euclidean projection onto the permutahedron of ``sigma`` (spec 003 section 2.4)."""
    from .. import _pava

    if hasattr(_pava, "project_permutahedron"):
        return _pava.project_permutahedron(v, sigma)
    # Until the foundation's projection lands: the same recipe on its PAVA.
    perm = np.argsort(v, kind="stable")
    z = v[perm]
    out = np.empty_like(z)
    out[perm] = z - _pava.isotonic_regression(z - sigma, increasing=True)
    return out


def dual_smoothness(X, s, t, lam, loss, curvature, fit_intercept):
    """Lipschitz constant of the dual function's gradient at the current point.

    With the primal step solved exactly, the dual step is a gradient step on
    ``phi(lam) = min_w lam^T l(w) + g(w) + ||w - w_k||^2 / (2 tau)``, whose
    gradient ``l(w(lam))`` has Lipschitz constant ``||J H^{-1} J^T||`` with
    ``J = diag(s l'(t)) [X 1]`` and ``H = [X 1]^T diag(lam l''(t)) [X 1] + curvature I``
    (intercept: no ``curvature``).  Returned as the largest generalised
    eigenvalue of ``(J^T J, H)``, a ``(d+1) x (d+1)`` problem.
    """
    from scipy.linalg import eigh

    h = 1e-6 * (1.0 + np.abs(t))
    d2 = (loss.derivative(t + h) - loss.derivative(t - h)) / (2.0 * h)
    d1 = s * loss.derivative(t)
    Xt = np.hstack([X, np.ones((X.shape[0], 1))]) if fit_intercept else X
    p = Xt.shape[1]
    H = Xt.T @ ((np.maximum(lam, 0.0) * d2)[:, None] * Xt)
    reg = np.full(p, curvature)
    if fit_intercept:
        reg[-1] = 1e-12 * max(1.0, float(np.trace(H)))
    H[np.diag_indices(p)] += reg
    A = Xt.T @ ((d1 * d1)[:, None] * Xt)
    top = eigh(A, H, eigvals_only=True, subset_by_index=[p - 1, p - 1])
    return max(float(top[0]), 1e-300)


def sorel_dual_scale(losses, sigma):
    """Automatic dual scale ``C`` of SOREL (``eta_k = C mu (k+1)``).

    ``C`` plays the role of ``1/(8 G^2)`` in the theory (spec 003 section 3)
    and must scale like the inverse of the losses for the dual step
    ``lam + eta v`` to be invariant to the scale of the targets.  We use the
    gap between the risk and the smallest loss at the starting point,
    ``C = 0.4 / (R_sigma(l) - min_i l_i)``: about 0.4 to 0.5 on standardised
    targets, the upper end of the paper's stable grid values.  The growth
    of ``eta_k`` is then capped by :func:`dual_smoothness` (see :func:`sorel`).
    """
    spread = float(np.sort(losses) @ sigma - losses.min())
    return 0.4 / max(spread, 1e-12)


def sorel(
    X,
    y,
    risk,
    loss,
    penalty,
    *,
    fit_intercept=True,
    max_epochs=200,
    tol=1e-9,
    batch_size=1,
    learning_rate="auto",
    dual_scale="auto",
    tau_scale=20.0,
    random_state=None,
    coef_init=None,
    intercept_init=None,
    verbose=0,
    sampling="importance",
):
    """Minimise ``sum_i sigma_i l_(i) + penalty`` for a spectral risk with SOREL.

    Parameters
    ----------
    X : {ndarray, sparse matrix} of shape (n, d)
        Design; sparse input is densified.
    y : ndarray of shape (n,)
        Labels in {-1, +1} (classification losses) or targets (regression).
    risk : skrank.risks.BaseRisk
        A spectral risk (nondecreasing weights).
    loss : skrank.losses.Loss
        A smooth loss (SOREL's theory needs Lipschitz gradients).
    penalty : skrank.penalties.Penalty
        Must have ``l2 > 0`` (the strong convexity ``mu``); an l1 part is
        handled by its prox.
    fit_intercept : bool, default=True
        Fit an unpenalised intercept.
    max_epochs : int, default=200
        Outer iterations (one dual update and about one pass each).
    tol : float, default=1e-9
        Stop when the stopping criterion (see Notes) falls below ``tol``.
    batch_size : int, default=1
        Samples per stochastic step; ``ceil(n / batch_size)`` steps per epoch.
    learning_rate : "auto" or float, default="auto"
        Primal step; "auto" is :func:`skrank.solvers._stepsize.svrg_step_size`.
    dual_scale : "auto" or float, default="auto"
        ``C`` in the dual step ``eta_k = C mu (k + 1)``; "auto" is
        :func:`sorel_dual_scale` at the initial point.
    tau_scale : float, default=20.0
        Primal proximal parameter ``tau_k = tau_scale / (mu (k + 1))``
        (the paper's ``20 n / (k + 1)`` for ``mu = 1/n``).
    random_state : int, RandomState or None
        Seed of the sampled indices.
    coef_init, intercept_init : ndarray, float or None
        Starting point (zeros by default).
    verbose : int
        Print one line per epoch when positive.
    sampling : {"importance", "uniform"}, default="importance"
        How the inner loop draws samples: with probability proportional to
        ``lam_i L_i`` (the dual weight times the sample's smoothness, the
        unbiased importance-sampled SVRG estimator ``(lam_i / p_i)``) or
        uniformly as in the paper.  Importance sampling allows a step up to
        ``n sigma_n max L_i / Lbar`` times larger (see
        :func:`skrank.solvers._stepsize.svrg_step_size`).

    Returns
    -------
    SolverResult
        ``info`` holds ``lambda`` (final dual weights), ``times`` (cumulative
        seconds after each epoch, objective evaluation excluded), ``passes``
        (cumulative sample evaluations / n, spec 003 section 2.6),
        ``learning_rate``, ``dual_scale`` and ``criterion_history``.

    Notes
    -----
    Epoch ``k`` (spec 003 section 2.3, with ``mu`` the l2 strength)::

        v       = (1 + theta_k) l(w_k) - theta_k l(w_{k-1}),  theta_k = k / (k + 1)
        lam     = Proj_{Pi_sigma}(lam + eta_k v)
        w_{k+1} = SVRG on sum_i lam_i l_i(w) + penalty(w) + ||w - w_k||^2 / (2 tau_k)

    Automatic parameters (the paper tuned ``lr`` and ``C`` over grids):

    * the primal step ``lr`` is :func:`skrank.solvers._stepsize.svrg_step_size`, from the
      per-sample smoothness ``L_i = L_loss (||x_i||^2 + 1)`` and sigma;
    * the dual step is ``eta_k = min(C mu (k + 1), 1 / L_phi)``: the
      paper's linear growth with ``C`` from :func:`sorel_dual_scale`, capped
      by the inverse smoothness ``L_phi`` of the dual function
      (:func:`dual_smoothness`, refreshed at epochs 0, 1, 2, 4, 8, ... and every 50, at the current
      iterate).  Without the cap the growing ``eta_k`` ends in oscillation
      once it passes about ``1 / L_phi`` (spec 003 section 6, pitfall 6),
      at an epoch that depends on the data.

    The stopping criterion is the largest of (a) the relative change of the
    objective over the epoch, (b) the norm of the Lagrangian's gradient
    ``X^T (lam * s l'(t)) + mu w`` at the new point, relative to its value at
    the start, and (c) the dual residual ``||lam_{k+1} - lam_k||_1``.
    """
    rng = make_rng(random_state)
    seed_numba(rng)
    X, s, c, sqnorms = prepare_data(X, y, loss, fit_intercept)
    n, d = X.shape
    mu = float(penalty.l2)
    sigma = np.ascontiguousarray(risk.weights(n), dtype=np.float64)
    batch_size = int(min(max(batch_size, 1), n))
    steps = -(-n // batch_size)
    lr = check_learning_rate(learning_rate)
    smooth = sample_smoothness(loss, sqnorms)
    if lr is None:
        lr = svrg_step_size(smooth, sigma, batch_size, sampling)

    w = np.zeros(d) if coef_init is None else np.array(coef_init, dtype=np.float64).ravel()
    b = np.array([0.0 if (intercept_init is None or not fit_intercept) else float(intercept_init)])
    t = loss_arguments_dense(X, s, c, w, b[0], np.empty(n))
    losses = loss.value(t)
    losses_prev = losses.copy()
    lam = rank_weights(risk, losses)
    auto_dual = isinstance(dual_scale, str)
    C = sorel_dual_scale(losses, sigma) if auto_dual else float(dual_scale)

    gref = np.empty(n)
    work = np.empty(d)
    sampler = WeightedSampler(n)
    idx = np.empty(steps * batch_size, dtype=np.int64)
    history = [risk.value(losses) + penalty.value(w)]
    times, passes, crits = [0.0], [0.0], []
    elapsed = 0.0
    grad0 = None
    converged = False
    crit = np.inf
    k = 0
    eta_cap = np.inf
    for k in range(max_epochs):
        start = time.perf_counter()
        theta = k / (k + 1.0)
        inv_tau = mu * (k + 1.0) / tau_scale
        if _refresh_cap(k):
            eta_cap = 1.0 / dual_smoothness(X, s, t, lam, loss, mu + inv_tau, fit_intercept)
        if auto_dual:
            C = sorel_dual_scale(losses, sigma)
        eta = min(C * mu * (k + 1.0), eta_cap)
        v = (1.0 + theta) * losses - theta * losses_prev
        lam_new = _project(lam + eta * v, sigma)
        dual_res = float(np.abs(lam_new - lam).sum())
        lam = lam_new
        scalar_gradients(loss.code, loss.param, s, t, gref)
        lg = lam * gref
        gbar = X.T @ lg
        gbar_b = float(lg.sum()) if fit_intercept else 0.0
        grad_norm = float(np.sqrt(np.sum((gbar + mu * w) ** 2) + gbar_b**2))
        if grad0 is None:
            grad0 = max(grad_norm, 1e-300)
        if sampling == "importance":
            p = np.maximum(lam, 0.0) * smooth
            tot = p.sum()
            if tot > 0:
                sampler.draw(p, idx)
                # lam_i / p_i with p normalised: the weight of a drawn sample
                mult = np.divide(tot, smooth, out=np.zeros(n), where=p > 0)
            else:
                draw_uniform(n, idx)
                mult = n * lam
        else:
            draw_uniform(n, idx)
            mult = n * lam
        w_anchor = w.copy()
        svrg_epoch(
            X, s, c, loss.code, loss.param, w, b, gref, mult, gbar, gbar_b, idx,
            batch_size, lr, penalty.l1, mu, inv_tau, w_anchor, b[0], fit_intercept, work,
        )
        losses_prev = losses
        loss_arguments_dense(X, s, c, w, b[0], t)
        losses = loss.value(t)
        elapsed += time.perf_counter() - start
        obj = risk.value(losses) + penalty.value(w)
        if not np.isfinite(obj):
            history.append(obj)
            times.append(elapsed)
            passes.append(passes[-1] + 1.0 + steps * batch_size / n)
            crit = np.inf
            break
        rel_change = abs(history[-1] - obj) / max(abs(obj), 1e-300)
        history.append(obj)
        times.append(elapsed)
        # one full pass for the losses/reference gradients, one per sample drawn
        passes.append(passes[-1] + 1.0 + steps * batch_size / n)
        crit = max(rel_change, grad_norm / grad0, dual_res)
        crits.append(crit)
        if verbose:
            print(f"SOREL epoch {k + 1}: objective {obj:.10g}, criterion {crit:.3g}")
        if crit <= tol:
            converged = True
            break

    return SolverResult(
        coef=w,
        intercept=float(b[0]) if fit_intercept else 0.0,
        n_iter=k + 1,
        objective_history=np.asarray(history),
        stop_criterion=float(crit),
        converged=converged,
        info={
            "lambda": lam,
            "times": np.asarray(times),
            "passes": np.asarray(passes),
            "learning_rate": lr,
            "dual_scale": C,
            "criterion_history": np.asarray(crits),
        },
    )
