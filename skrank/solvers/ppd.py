"""PPD-SG and PPD-AdaGrad for the full-AUC square loss (seed 001).

Liu, Yuan, Ying and Yang, "Stochastic AUC Maximization with Deep Neural
Networks" (ICLR 2020), Algorithms 2-4, for a linear score ``h = w.x`` (no
sigmoid; an intercept cancels in pairs).  The pairwise objective

    P(w) = mean_{i positive, j negative} (c - h_i + h_j)^2

equals ``c^2 + min_{a,b} max_dual E F(w, a, b, dual; z) / (p (1 - p))``
(Proposition 1, with the margin ``c`` in place of the paper's 1), where
``p`` is the positive share and, per sample ``z = (x, y)``,

    F = (1-p)(h - a)^2 1[y=1] + p (h - b)^2 1[y=-1]
        + 2 (c + dual)(p h 1[y=-1] - (1-p) h 1[y=1]) - p (1-p) dual^2.

The solvers take stochastic gradient steps on the single-sample form
``F / (p (1 - p)) + alpha ||w||^2 / 2`` (descent in ``v = (w, a, b)``,
ascent in ``dual``), so that its saddle point in ``w`` minimises
:class:`~skrank.partial_auc_objective.PartialAUCObjective` with
``fpr_range=(0, 1)`` and the squared loss.  Stage ``k`` restarts from the
previous stage's average ``v_0`` with a proximal term
``||v - v_0||^2 / (2 gamma)`` and the dual reset to its closed-form optimum
``mean negative score - mean positive score`` at the averaged ``w``,
computed on the whole training set (the batch-setting choice ``m_k = n``
of spec 001 section 2.2).  Stage lengths grow as ``T_k = T0 3^k`` and the
step shrinks by 3 per stage (the paper's experiments).  The paper's
``dual`` is called ``alpha`` there; ``alpha`` here is the l2 strength.

PPD-AdaGrad replaces the inner loop by dual averaging with AdaGrad's
diagonal scaling anchored at the stage start (Algorithm 3):
``u = u_0 - eta G_sum / (delta + sqrt(S2))``.  With ``class_ratio="online"``
``p`` and ``p (1 - p)`` are estimated from the samples drawn before the
current mini-batch (Algorithm 4; one half before the first).

Step sizes are in units of ``1 / L`` with ``L = 2 mean ||x||^2 / (p (1-p))
* min(p, 1-p)`` approximating the curvature in ``w``; this makes the
defaults independent of the feature scale.
"""

import time

import numpy as np
import scipy.sparse as sp
from numba import njit

from ._outer import OuterLoop
from ._sampling import _uniform, state_from_random_state


@njit(cache=True)
def _ppd_stage(X, y, w, ab, dual, n_steps, eta, inv_gamma, batch, p_known, margin, alpha,
               state, adagrad, delta, online, counts):
    """One stage from ``(w, ab, dual)``; returns the averages of ``w`` and ``(a, b)``.

    ``w`` (d,), ``ab`` (2,) are the stage start ``v_0`` (left unchanged);
    ``counts`` (2,) holds the positives and negatives drawn so far (online
    ratio); ``y`` is in {0, 1}.
    """
    n, d = X.shape
    v = w.copy()
    a = ab[0]
    b = ab[1]
    du = dual
    w_sum = np.zeros(d)
    a_sum = 0.0
    b_sum = 0.0
    gw = np.empty(d)
    # AdaGrad accumulators over w, a, b, dual
    G = np.zeros(d + 3)
    S2 = np.zeros(d + 3)
    idx = np.empty(batch, dtype=np.int64)
    for t in range(n_steps):
        for f in range(d):
            w_sum[f] += v[f]
        a_sum += a
        b_sum += b
        if online:
            seen = counts[0] + counts[1]
            p = counts[0] / seen if seen > 0 else 0.5
            if p <= 0.0 or p >= 1.0:
                p = 0.5
        else:
            p = p_known
        q = p * (1.0 - p)
        for f in range(d):
            gw[f] = 0.0
        ga = 0.0
        gb = 0.0
        gd = 0.0
        for r in range(batch):
            i = int(_uniform(state) * n)
            if i >= n:
                i = n - 1
            idx[r] = i
            row = X[i]
            h = 0.0
            for f in range(d):
                h += row[f] * v[f]
            if y[i] == 1:
                s = 2.0 * (1.0 - p) * (h - a) - 2.0 * (1.0 - p) * (margin + du)
                ga += -2.0 * (1.0 - p) * (h - a)
                gd += -2.0 * (1.0 - p) * h - 2.0 * q * du
            else:
                s = 2.0 * p * (h - b) + 2.0 * p * (margin + du)
                gb += -2.0 * p * (h - b)
                gd += 2.0 * p * h - 2.0 * q * du
            for f in range(d):
                gw[f] += s * row[f]
        if online:
            for r in range(batch):
                if y[idx[r]] == 1:
                    counts[0] += 1.0
                else:
                    counts[1] += 1.0
        scale = 1.0 / (batch * q)
        if adagrad:
            for f in range(d):
                g = gw[f] * scale + alpha * v[f] + inv_gamma * (v[f] - w[f])
                G[f] += g
                S2[f] += g * g
                v[f] = w[f] - eta * G[f] / (delta + np.sqrt(S2[f]))
            g = ga * scale + inv_gamma * (a - ab[0])
            G[d] += g
            S2[d] += g * g
            a = ab[0] - eta * G[d] / (delta + np.sqrt(S2[d]))
            g = gb * scale + inv_gamma * (b - ab[1])
            G[d + 1] += g
            S2[d + 1] += g * g
            b = ab[1] - eta * G[d + 1] / (delta + np.sqrt(S2[d + 1]))
            g = -gd * scale
            G[d + 2] += g
            S2[d + 2] += g * g
            du = dual - eta * G[d + 2] / (delta + np.sqrt(S2[d + 2]))
        else:
            for f in range(d):
                v[f] -= eta * (gw[f] * scale + alpha * v[f] + inv_gamma * (v[f] - w[f]))
            a -= eta * (ga * scale + inv_gamma * (a - ab[0]))
            b -= eta * (gb * scale + inv_gamma * (b - ab[1]))
            du += eta * gd * scale
    inv = 1.0 / max(n_steps, 1)
    return w_sum * inv, a_sum * inv, b_sum * inv


def _closed_form_dual(X, y, w):
    """``argmax_dual f(w, ., dual)``: mean negative minus mean positive score (Prop. 1)."""
    h = X @ w
    return float(h[y == 0].mean() - h[y == 1].mean())


def _ppd(objective, coef_init, max_iter, tol, batch_size, step, gamma, inner_iter0,
         class_ratio, delta, random_state, verbose, adagrad):
    start = time.perf_counter()
    Xp, Xn = objective.X_pos, objective.X_neg
    X = sp.vstack([Xp, Xn]).toarray() if sp.issparse(Xp) else np.vstack([Xp, Xn])
    X = np.ascontiguousarray(X, dtype=np.float64)
    y = np.concatenate([np.ones(Xp.shape[0]), np.zeros(Xn.shape[0])]).astype(np.int64)
    n = X.shape[0]
    p = Xp.shape[0] / n
    L = 2.0 * float(np.einsum("ij,ij->", X, X)) / n * min(p, 1.0 - p) / (p * (1.0 - p))
    L = max(L, 1e-12)
    state = state_from_random_state(random_state)
    batch = int(min(batch_size, n))
    w = np.array(coef_init, dtype=np.float64)
    h = X @ w
    ab = np.array([h[y == 1].mean(), h[y == 0].mean()])
    counts = np.zeros(2)
    loop = OuterLoop(w, objective.value(w), tol, verbose, "ppd-adagrad" if adagrad else "ppd-sg")
    steps_total = 0
    T0 = inner_iter0 if inner_iter0 is not None else max(1, n // batch)
    best_ab = ab.copy()
    for k in range(max_iter):
        T = int(T0 * 3**k)
        eta = step / (L * 3**k)
        dual = _closed_form_dual(X, y, w)
        w, a, b = _ppd_stage(X, y, w, ab, dual, T, eta, 1.0 / (gamma / L), batch, p,
                             objective.loss.margin, objective.alpha, state, adagrad,
                             delta, class_ratio == "online", counts)
        ab = np.array([a, b])
        steps_total += T
        previous_best = loop.best_F
        stop = loop.step(w, objective.value(w), f"steps {T:7d}")
        if loop.best_F < previous_best:
            best_ab = ab.copy()
        elif not loop.F <= previous_best * (1.0 + 1e-3) + 1e-12:
            # safeguard (not in the paper): a stage that raised F restarts the
            # next one from the best average with half the step
            step *= 0.5
            w, ab = loop.restart_from_best(), best_ab.copy()
            continue
        if stop:
            break
    return loop.result({"passes": steps_total * batch / n + len(loop.history),
                        "time": time.perf_counter() - start})


_DOC_PARAMS = """
    Parameters
    ----------
    objective : skrank.partial_auc_objective.PartialAUCObjective
        With ``fpr_range=(0, 1)`` and the squared loss (not checked here).
    coef_init : ndarray of shape (d,)
        Start ``w``; ``a`` and ``b`` start at the class means of its scores.
    max_iter : int, default=6
        Number of stages ``K``.
    tol : float, default=1e-4
        Stop when the exact ``F`` changes by at most ``tol * max(1, |F|)``
        over a stage.
    batch_size : int, default=64
        Samples per stochastic gradient (drawn uniformly with replacement).
    step : float, default={step}
        Initial step ``eta_0`` in units of ``1 / L`` (module docstring);
        divided by 3 at each stage.
    gamma : float, default=1000.0
        Proximal parameter, in units of ``1 / L``.  The step and ``gamma``
        defaults were the best of a small grid on four standardised tables;
        a stage that raises ``F`` by more than 0.1% is undone and the step
        halved (a safeguard the paper does not have).
    inner_iter0 : int or None, default=None
        ``T0`` of ``T_k = T0 3^k``; None means one epoch, ``n // batch_size``.
    class_ratio : {{"known", "online"}}, default="known"
        Use the training set's positive share, or Algorithm 4's running
        estimate.
    random_state : int, RandomState, Generator or None
    verbose : int, default=0

    Returns
    -------
    SolverResult
        ``coef`` is the ``w``-part of the stage average of lowest exact
        ``F`` (the last stage's unless ``F`` rose); ``objective_history``
        holds ``F`` at the start, after each stage and at the returned
        point; ``info`` has ``passes`` and ``time``.
"""


def ppd_sg(objective, *, coef_init, max_iter=6, tol=1e-4, batch_size=64, step=10.0, gamma=1000.0,
           inner_iter0=None, class_ratio="known", random_state=None, verbose=0):
    return _ppd(objective, coef_init, max_iter, tol, batch_size, step, gamma, inner_iter0,
                class_ratio, 0.0, random_state, verbose, adagrad=False)


def ppd_adagrad(objective, *, coef_init, max_iter=6, tol=1e-4, batch_size=64, step=40.0,
                gamma=1000.0, delta=1e-3, inner_iter0=None, class_ratio="known",
                random_state=None, verbose=0):
    return _ppd(objective, coef_init, max_iter, tol, batch_size, step, gamma, inner_iter0,
                class_ratio, delta, random_state, verbose, adagrad=True)


ppd_sg.__doc__ = """PPD-SG (Algorithm 2): proximal primal-dual stochastic gradient in stages.
""" + _DOC_PARAMS.format(step=10.0)
ppd_adagrad.__doc__ = """PPD-AdaGrad (Algorithm 3): stages of AdaGrad dual averaging.

    ``delta`` (default 1e-3) is the constant added to the root of the
    squared-gradient sums; the paper leaves its value open.
""" + _DOC_PARAMS.format(step=40.0)
