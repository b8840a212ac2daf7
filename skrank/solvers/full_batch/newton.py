"""Certified full-batch fits of convex spectral risks with smooth losses: proximal Newton on the weights.

Minimises ``F(w, b) = sum_i sigma_i l(t)_(i) + R(w)`` for nondecreasing
``sigma`` and a loss with a continuous derivative by the proximal point
method on the rank weights (Rockafellar 1976, "Monotone operators and the
proximal point algorithm"), with Newton steps on the Moreau-smoothed risk,
and stops on a certified bound of ``F - F*``.  The method and its
certificate are described in the user guide, :ref:`methods-newton`.
"""

import time

import numpy as np

from ..progress import Progress
from ..result import SolverResult
from .setup import check_supported, starting_theta

#: ``mu`` at the start, in units of (objective at the start) / (n max sigma).
_MU_SCALE = 100.0
#: ... times this from a warm start, whose losses give the centre.
_MU_WARM = 1e-3
#: ``mu`` falls by ``_MU_DECREASE`` after an outer iteration that shrank the gap by less
#: than the factor ``_SLOW_OUTER``.
_MU_DECREASE = 0.2
_SLOW_OUTER = 0.3
#: Relative ridge of a Newton model without curvature in some direction.
_RIDGE = 1e-6
#: An inner solve ends when its model decrease is this fraction of the last certified gap.
_INNER_FRACTION = 0.1
#: Most projected-gradient steps on the dual weights when the Newton steps stall uncertified.
_DUAL_ASCENT_STEPS = 300
#: The decrement is computed exactly once the estimated gap is below this many times the tolerance.
_EXACT_DECREMENT = 100.0


def _line_search(problem, theta, step, F0, state0, mu, center, max_evals=12):
    """Step length along a descent direction of ``F_mu``: ``(alpha, F_mu, state)``.

    ``F_mu`` includes the penalty, its l1 part too.  Along ``theta + alpha
    step`` the loss arguments are ``t + alpha dt``
    (one product with ``X``), so that each trial costs one sort and one PAVA.
    ``F_mu`` is convex and differentiable along the line: the full step is
    taken when it satisfies the Armijo condition, otherwise the root of the
    directional derivative is bracketed and found by the Illinois variant of
    regula falsi.  Returns ``(0, F0, state0)`` when no trial lowers
    ``F_mu`` (rounding).  Only the state of the last trial is kept (each
    costs several vectors of length ``n``); the best one is evaluated again
    when it was not the last.
    """
    dt, slope0 = problem.along(step, state0)
    t0 = state0["t"]
    reg_step = problem.penalty.reg * step

    d_w = step[: problem.design.d]

    def l1_slope(alpha):
        # right derivative of l1 ||w + alpha d_w||_1 in alpha
        if problem.penalty.l1 == 0.0:
            return 0.0
        w = theta[: problem.design.d] + alpha * d_w
        return problem.penalty.l1 * float(np.sum(np.where(w != 0.0, np.sign(w) * d_w, np.abs(d_w))))

    def trial(alpha):
        F, st = problem.smoothed(theta + alpha * step, mu, center, t0 + alpha * dt, dt)
        slope = st["slope"] + float(reg_step @ (theta + alpha * step)) + l1_slope(alpha)
        return F, st, slope

    slope0 += float(reg_step @ theta) + l1_slope(0.0)
    lo, s_lo = 0.0, slope0
    hi, s_hi = None, None
    alpha, best, last = 1.0, None, None
    side = 0
    for _ in range(max_evals):
        last = None  # frees the previous trial's state before the next one
        F, st, slope = trial(alpha)
        last = (alpha, st)
        del st
        if F < F0 and F <= F0 + 1e-4 * alpha * slope0 and (best is None or F < best[1]):
            best = (alpha, F)
            if alpha == 1.0 or abs(slope) <= 0.1 * abs(slope0):
                break
        if slope < 0.0:
            lo, s_lo = alpha, slope
            if side == -1 and hi is not None:
                s_hi *= 0.5
            side = -1
        else:
            hi, s_hi = alpha, slope
            if side == 1:
                s_lo *= 0.5
            side = 1
        if hi is None:
            if best is not None:
                break  # still descending at the full step: take it
            alpha *= 2.0
            continue
        alpha = lo - s_lo * (hi - lo) / (s_hi - s_lo)
    if best is None:
        return 0.0, F0, state0
    alpha, F = best
    if last[0] == alpha:
        return alpha, F, last[1]
    last = None
    return alpha, F, problem.smoothed(theta + alpha * step, mu, center, t0 + alpha * dt)[1]


def _newton_fixed_weights(problem, theta, q, rel_tol, max_iter):
    """Newton's method on ``q . l(theta) + penalty(w)`` until the model decrease is ``rel_tol`` relative."""
    steps = 0
    t = problem.native_arguments(theta)
    while steps < max_iter:
        value, d1, d2 = problem.loss_derivatives(t)
        G = float(q @ value) + problem.penalty.value(theta)
        g = problem.gradient(theta, q, d1)
        step, decrease = problem.penalty.direction(problem.hessian(q, d2), g, theta)
        steps += 1
        if decrease <= rel_tol * abs(G):
            break
        alpha = 1.0
        while alpha >= 1e-10:
            trial = theta + alpha * step
            t_trial = problem.native_arguments(trial)
            trial_G = float(q @ problem.loss_values(t_trial)) + problem.penalty.value(trial)
            if trial_G <= G - 1e-4 * alpha * decrease:
                break
            alpha *= 0.5
        else:
            # no decrease along the model's step (a loss without curvature where the model is flat, such
            # as Huber's linear tails): leave the rest to the smoothed iterations, whose line search is exact
            break
        theta, t = trial, t_trial
    return theta, steps


def _zero_small_coefficients(problem, theta, F):
    """Set the coefficients below ``1e-5 (1 + max |w|)`` to zero when ``F`` does not rise.

    The proximal point iterates stop within the tolerance, not exactly on
    the zero set of the l1 term.
    """
    w = theta[: problem.design.d]
    small = np.abs(w) <= 1e-5 * (1.0 + np.abs(w).max())
    if not np.any(small & (w != 0.0)):
        return theta, F
    trial = theta.copy()
    trial[: problem.design.d][small] = 0.0
    F_trial = problem.objective(trial)
    return (trial, F_trial) if F_trial <= F else (theta, F)


def _n_pooled(pooled):
    """The number of pooled blocks of a rank step's record (``Pooled`` or ``PooledBlocks``)."""
    return pooled.n_pooled if hasattr(pooled, "n_pooled") else pooled.size.size


def _with_dual_gap(problem, best):
    """``best = (F, theta, gap, weights)`` with the gap of ``F`` to the largest dual bound found."""
    return best[:2] + (max(best[0] - problem.best_dual, 0.0), best[3])


class _ProximalPoint:
    """The proximal point iterations of one fit: the smoothing, its centre and the best point.

    Parameters
    ----------
    problem : skrank.datafits.smoothed_rank_risk.SmoothedRankRisk
    theta : ndarray of shape (p,)
        The start.
    warm : bool
        Whether ``theta`` is a warm start (its losses give the first centre, else the mean weight).
    max_iter : int
        Most Newton steps.
    progress : skrank.solvers.progress.Progress
    """

    def __init__(self, problem, theta, warm, max_iter, progress):
        self.problem, self.progress = problem, progress
        self.steps = 0
        center, top = problem.first_center(theta, warm)
        native_center = problem.design.to_native(center)  # the weights where the n-vectors live
        if not warm and problem.risk.is_mean and problem.newton_on_fixed_weights:
            # the mean risk is the problem (its weights are the centre): Newton's method on it; other risks
            # start at theta = 0, where the smoothing pools the tied losses
            theta, self.steps = _newton_fixed_weights(problem, theta, native_center, 1e-1, max_iter)
        t = problem.shared_arguments(theta)  # one product with X for F and F_mu, where it pays
        F = problem.objective(theta, t)
        self.history = [F]
        #: ``(F, theta, bound on F - F*, weights q)`` of the best certificate so far
        self.best = (F, theta.copy(), np.inf, center)
        self.mu = _MU_SCALE * max(abs(F), 1e-12) / max(problem.n * top, 1e-300)
        if warm:
            self.mu *= _MU_WARM
        self.outer, self.certified, self.warm = 0, False, warm
        self.inner_tol = 1e-2 * abs(F)
        self.last_gap = np.inf
        self.stalled, self.outer_stalls = False, 0
        self.theta, self.center = theta, native_center
        self.from_zero = not np.any(theta)
        self.F_mu, self.state = problem.smoothed(theta, self.mu, native_center, t)

    def outer_iteration(self, decrease_q, tol):
        """Certify the point, then move the centre (and maybe lower ``mu``); returns whether certified."""
        problem, state = self.problem, self.state
        self.outer_stalls = self.outer_stalls + 1 if self.stalled else 0
        self.stalled = False
        self.outer += 1
        F, gap, estimate = problem.certificate(self.theta, state, decrease_q)
        if problem.penalty.l2 > 0.0:
            # a duality gap: the lowest F found against the largest dual bound found so far; a cold start
            # is a candidate too (theta = 0 is the optimum where every loss ties there)
            if F < self.best[0] or (self.warm and not np.isfinite(self.best[2])):
                self.best = (F, self.theta.copy(), gap, state["q_host"])
            self.best = _with_dual_gap(problem, self.best)
            if self.outer == 1 and self.from_zero and not self.warm and F >= self.history[0]:
                # no iterate beat the start theta = 0: maybe the optimum
                self.check_zero(state["q_host"], tol)
        elif gap < self.best[2]:
            self.best = (F, self.theta.copy(), gap, state["q_host"])
        self.history.append(F)
        self.progress(self.steps, F, gap / max(abs(F), 1e-300),
                      f"outer={self.outer} mu={self.mu:.3g} pooled blocks={_n_pooled(state['pooled'])}")
        if self.best[2] <= tol * abs(self.best[0]):
            self.certified = True
            return True
        if estimate > _SLOW_OUTER * self.last_gap:
            self.mu *= _MU_DECREASE
        self.last_gap = estimate
        self.inner_tol = _INNER_FRACTION * min(estimate, gap)
        self.center = state["q"]
        # the same point: its loss arguments and losses are kept (X is not read), only the new centre's keys
        # are computed
        self.F_mu, self.state = problem.smoothed(self.theta, self.mu, self.center, state=state)
        return False

    def check_zero(self, q, tol):
        """Certify ``theta = 0`` (the problem's ``certify_zero``) from ``q``; returns whether certified."""
        problem = self.problem
        F0 = problem.certify_zero(q, tol)
        if F0 is not None and F0 <= self.best[0]:
            weights = q if problem.best_dual_weights is None else problem.best_dual_weights
            self.best = _with_dual_gap(problem, (F0, np.zeros_like(self.theta), np.inf, weights))
        self.certified = self.best[2] <= tol * abs(self.best[0])
        return self.certified

    def close_from_dual(self, tol):
        """The Newton steps stall in rounding: a last try to close the gap by the dual ascent.

        First ``theta = 0`` is checked (:meth:`check_zero`, where the losses
        tie there): the steps stall in the rounding of a degenerate optimum
        at 0 (every loss tied) from a warm start next to it, as from a cold
        start, whose first outer iteration checks it.
        """
        problem = self.problem
        if problem.penalty.l2 > 0.0 and self.check_zero(self.best[3], tol):
            return
        if problem.penalty.l2 > 0.0 and problem.dual_ascent(self.best[1], _DUAL_ASCENT_STEPS):
            self.best = _with_dual_gap(problem, self.best)
            self.certified = self.best[2] <= tol * abs(self.best[0])

    def newton_step(self, g, H, scatter, verbose):
        """A damped Newton step on ``F_mu`` from the model ``g``, ``H`` (+ ``scatter``, the block term)."""
        problem, theta = self.problem, self.theta
        if not problem.design.fuses_products:
            scatter = problem.block_scatter(self.state, self.mu)
        K = H if scatter is None else H + scatter
        step, decrease = problem.penalty.direction(K, g, theta)
        if not np.isfinite(decrease):  # directions without curvature: a small ridge
            ridge = _RIDGE * np.mean(np.diag(K)) * np.eye(K.shape[0])
            step, _ = problem.penalty.direction(K + ridge, g, theta)
        self.steps += 1
        alpha, self.F_mu, self.state = _line_search(problem, theta, step, self.F_mu, self.state, self.mu,
                                                    self.center)
        if alpha == 0.0:
            self.stalled = True
            return
        self.theta = theta + alpha * step
        if verbose > 1:
            self.progress.note(f"step {self.steps}: F_mu={self.F_mu:.12g} alpha={alpha:.3g}")

    def result(self, start):
        """The :class:`SolverResult` of the best point (``start``: the fit's start time)."""
        problem, design = self.problem, self.problem.design
        F, theta, gap, weights = self.best
        if problem.best_dual_weights is not None:
            weights = problem.best_dual_weights  # the weights of the certificate's dual bound
        if problem.penalty.l1 > 0.0:
            theta, F = _zero_small_coefficients(problem, theta, F)
        if F != self.history[-1]:
            self.history.append(F)  # the returned point's objective comes last
        coef, intercept = design.split(theta)
        return SolverResult(
            coef=coef.copy(), intercept=intercept, n_iter=self.steps,
            objective_history=np.asarray(self.history), stop_criterion=gap / max(abs(F), 1e-300),
            converged=self.certified,
            info=dict(certified=self.certified, gap=gap, mu=self.mu, outer=self.outer,
                      weights=problem.exported_weights(weights),
                      passes=design.passes + problem.block_passes, time=time.perf_counter() - start),
        )


def smoothed_newton(datafit, penalty, *, coef_init=None, intercept_init=None, max_iter=200, tol=1e-9,
                    verbose=0):
    """Minimise a convex spectral risk with a smooth loss and a penalty, certified.

    Parameters
    ----------
    datafit : skrank.datafits.rank_risk.RankRisk
        The training set (``X``: ndarray or sparse matrix; ``y``: labels in
        {-1, +1} for classification, targets for regression), the risk
        (nondecreasing weights: ``risk.is_convex``), the loss (logistic,
        squared hinge, squared or Huber), whether to fit an intercept and
        the sample weights, under which the risk is that of the weighted
        empirical distribution (:mod:`skrank.risks`).
    penalty : skrank.penalties.Penalty
        An l2, l1 or elastic-net penalty; the Huber loss needs an l2 part.
    coef_init, intercept_init : ndarray and float, optional
        Starting point (zeros by default).
    max_iter : int, default=200
        Most Newton steps (and most outer iterations).
    tol : float, default=1e-9
        Stop when the certified bound on ``F - F*`` is at most ``tol * |F|``.
    verbose : int, default=0
        Print one line per outer iteration when positive, and one per
        Newton step when above 1.

    Returns
    -------
    SolverResult
        ``stop_criterion`` is the certified relative gap
        ``(F - F*) / |F|`` bound; ``converged`` is True when it is at most
        ``tol``; ``n_iter`` counts Newton steps and ``objective_history``
        holds ``F`` after each outer iteration.  ``info`` has
        ``certified``, ``gap`` (the absolute bound), ``mu`` (the last
        smoothing), ``outer``, ``weights`` (the rank weights ``q`` in
        ``P(sigma)`` of the certificate, per sample), ``passes`` (products with ``[X, 1]`` or its
        transpose, a weighted Gram matrix counted as one) and ``time``.
    """
    return _solve(datafit, penalty, False, coef_init=coef_init, intercept_init=intercept_init,
                  max_iter=max_iter, tol=tol, verbose=verbose)


def _solve(datafit, penalty, gathered, *, coef_init, intercept_init, max_iter, tol, verbose):
    """:func:`smoothed_newton`; ``gathered``: with the vectors of length ``n`` in this process."""
    start = time.perf_counter()
    check_supported("newton", datafit, penalty)
    # the vectors of length n on the workers where the design keeps them there, else gathered
    problem = datafit.smoothed(penalty, gathered)
    design = problem.design
    progress = Progress("newton", verbose, max_iter, unit="Newton step", criterion="certified gap")
    theta = starting_theta(design, coef_init, intercept_init)
    run = _ProximalPoint(problem, theta, coef_init is not None, max_iter, progress)
    # with an l2 part the certificate is a duality gap and the decrement only steers: far from the
    # tolerance the last Hessian estimates it, and a Gram matrix is formed only for a step (not where
    # a pass is costly)
    reuse = problem.penalty.l2 > 0.0 and not design.fuses_products
    H = None
    if run.warm and run.from_zero and problem.penalty.l2 > 0.0:
        run.check_zero(run.best[3], tol)  # a warm start at theta = 0, where the losses may tie (the centre)
    while (not run.certified and run.steps < max_iter and run.outer < max_iter
           and not problem.gather_to_finish):
        decrease_q = None
        far = run.last_gap > max(_EXACT_DECREMENT * tol, 1e-4) * abs(run.history[-1])
        if reuse and H is not None and far:
            g = problem.gradient(run.theta, run.state["q"], run.state["d1"])
            _, decrease_q = problem.penalty.direction(H, g, run.theta)
        if decrease_q is None or not (decrease_q <= run.inner_tol or run.stalled):
            # where a pass is costly the block term comes in the same one, though unused when the
            # inner solve ends here
            g, H, scatter = problem.derivatives(run.theta, run.state, run.mu, block=design.fuses_products)
            _, decrease_q = problem.penalty.direction(H, g, run.theta)
        if not (decrease_q <= run.inner_tol or run.stalled):
            run.newton_step(g, H, scatter, verbose)
        elif run.stalled and run.outer_stalls >= 2:
            run.close_from_dual(tol)  # rounding: no step lowers F_mu any more
            break
        elif run.outer_iteration(decrease_q, tol):
            break
    result = run.result(start)
    if problem.gather_to_finish and not result.converged:
        return _finished_gathered(datafit, penalty, result, max_iter=max_iter, tol=tol, verbose=verbose,
                                  progress=progress)
    return result


def _finished_gathered(datafit, penalty, result, *, max_iter, tol, verbose, progress):
    """``result`` of a fit on the workers, finished with its vectors gathered, from its coefficients.

    The Newton steps, the history and the passes of both fits add up.
    """
    progress.note("a check needs the losses in one place: the fit goes on with its vectors gathered")
    rest = _solve(datafit, penalty, True, coef_init=result.coef, intercept_init=result.intercept,
                  max_iter=max(max_iter - result.n_iter, 1), tol=tol, verbose=verbose)
    info = dict(rest.info, passes=result.info["passes"] + rest.info["passes"],
                time=result.info["time"] + rest.info["time"])
    return SolverResult(
        coef=rest.coef, intercept=rest.intercept, n_iter=result.n_iter + rest.n_iter,
        objective_history=np.concatenate([result.objective_history, rest.objective_history]),
        stop_criterion=rest.stop_criterion, converged=rest.converged, info=info)
