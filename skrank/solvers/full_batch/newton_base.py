"""What the Newton solver's problems share: the penalty's part of the model and the check of ``theta = 0``.

The gathered problem (:mod:`.newton`) and the chunked one (:mod:`.newton_chunked`) subclass
:class:`ProblemBase`; the solver, in :mod:`.newton`, chooses between them.
"""

import numpy as np
import scipy.linalg

from ...datafits.smoothed_risk import l1_newton_direction

#: A Gram matrix's row is recomputed when its weight moved by more than this (the certificate allows it).
HESSIAN_SLACK = 0.05
#: Coordinate-descent sweeps of one l1 Newton direction.
_CD_SWEEPS = 100
#: Most steps of :func:`zero_search`, and the factor by which the estimated gap must shrink
#: every ``_ZERO_WINDOW`` of them for the search to go on.
_ZERO_STEPS = 50
_ZERO_WINDOW = 10
_ZERO_SHRINK = 0.1


class ProblemBase:
    """The loss and the penalty of one fit: the penalty's value, its conjugate and the Newton direction."""

    #: Whether the fit needs a check this problem cannot make, and finishes on a gathered problem.
    gather_to_finish = False
    #: The passes over ``X`` of the block term's own Gram matrices.
    block_passes = 0

    def _set_penalty(self, loss, penalty):
        """The loss, the penalty's strengths and the ridge ``reg`` (none on the intercept)."""
        self.loss, self.l1, self.l2 = loss, float(penalty.l1), float(penalty.l2)
        self.reg = np.ones(self.design.p) * self.l2
        if self.design.fit_intercept:
            self.reg[-1] = 0.0
        #: The largest dual bound found so far (with an l2 part), and its weights ``q``.
        self.best_dual, self.best_dual_weights = -np.inf, None

    def native_arguments(self, theta, shift=True):
        """The loss arguments as an ``n``-vector of the design's namespace (here :meth:`arguments`)."""
        return self.arguments(theta, shift)

    def penalty(self, theta):
        w = theta[: self.design.d]
        return self.l1 * float(np.abs(w).sum()) + 0.5 * self.l2 * float(w @ w)

    def direction(self, K, g, theta):
        """Newton direction of the smooth part's model ``K``, ``g`` plus the l1 term.

        Returns ``(d, decrease)``: the minimiser of
        ``g.d + d^T K d / 2 + l1 (||w + d||_1 - ||w||_1)`` and minus its
        minimum (for ``l1 = 0``: ``d = -K^{-1} g``, the decrease is half the
        Newton decrement).
        """
        if self.l1 == 0.0:
            d = -_solve_spd(K, g)
            return d, -0.5 * float(g @ d)
        d, model = l1_newton_direction(K, g, theta, self.l1, self.design.d, _CD_SWEEPS, 1e-10)
        if np.isfinite(model):
            d, model = self._refine_l1_direction(K, g, theta, d, model)
        return d, -model

    def _refine_l1_direction(self, K, g, theta, d, model):
        """Solve the l1 model exactly on the sign pattern of coordinate descent's ``d``.

        Coordinate descent converges slowly on an ill-conditioned model (a
        block term of curvature ``1/mu``); with the zero set and the signs
        of ``w + d`` fixed, the model is a quadratic whose minimiser is one
        linear solve.  It is kept when its signs agree, the zero
        coordinates satisfy ``|g + K d| <= l1`` and the model is lower.
        """
        n_pen = self.design.d
        x = theta + d
        penalised = np.arange(theta.size) < n_pen
        zero = penalised & (x == 0.0)
        free = ~zero
        sign = np.where(penalised, np.sign(x), 0.0)
        trial = d.copy()
        trial[zero] = -theta[zero]
        rhs = -(g[free] + K[np.ix_(free, zero)] @ trial[zero] + self.l1 * sign[free])
        try:
            trial[free] = np.linalg.solve(K[np.ix_(free, free)], rhs)
        except np.linalg.LinAlgError:
            return d, model
        x_new = theta + trial
        if np.any(np.sign(x_new[free & penalised]) != sign[free & penalised]):
            return d, model
        slope = g + K @ trial
        if np.any(np.abs(slope[zero]) > self.l1 * (1.0 + 1e-12)):
            return d, model
        w_old, w_new = theta[:n_pen], x_new[:n_pen]
        trial_model = (float(g @ trial) + 0.5 * float(trial @ (K @ trial))
                       + self.l1 * float(np.abs(w_new).sum() - np.abs(w_old).sum()))
        return (trial, trial_model) if trial_model <= model else (d, model)

    def _penalty_conjugate(self, z):
        """``(scale, R*(-z))`` of :meth:`dual_bound`, ``z = X^T u``.

        Without an l2 part the penalty's conjugate is the indicator of
        ``|z| <= l1``: the slopes are scaled by ``scale`` into it (else 1).
        """
        if self.l2 > 0.0:
            excess = np.maximum(np.abs(z) - self.l1, 0.0)
            return 1.0, float(excess @ excess) / (2.0 * self.l2)
        largest = float(np.abs(z).max()) if z.size else 0.0
        return (self.l1 / largest if largest > self.l1 else 1.0), 0.0



def zero_search(problem, F0, q, u, tol, step, bound):
    """The accelerated alternating projections that check ``theta = 0``, from the weights ``q``.

    ``u = [X, 1]^T (s q l'(0))``; ``step(z, u)`` projects from the
    extrapolated weights ``z`` and returns ``(q_new, u_new)``;
    ``bound(q_new)`` is the dual bound of ``q_new``, kept in
    ``problem.best_dual`` when it is the largest.  Stops once the certified
    gap is below ``tol F0`` or the estimated one shrinks too slowly.
    """
    u_q, z, momentum = u, q, 1.0
    best, checkpoint = np.inf, float(u @ u) / (2.0 * problem.l2)
    for k in range(1, _ZERO_STEPS + 1):
        q_new, u_new = step(z, u)
        estimate = float(u_new @ u_new) / (2.0 * problem.l2)
        if estimate <= tol * abs(F0) and estimate < best:
            value = bound(q_new)
            if value > problem.best_dual:
                problem.best_dual, problem.best_dual_weights = value, q_new
            if F0 - problem.best_dual <= tol * abs(F0):
                return
        best = min(best, estimate)
        if k % _ZERO_WINDOW == 0:
            if best > _ZERO_SHRINK * checkpoint:
                return
            checkpoint = best
        next_momentum = 0.5 * (1.0 + np.sqrt(1.0 + 4.0 * momentum * momentum))
        beta = (momentum - 1.0) / next_momentum
        z = q_new + beta * (q_new - q)
        u = u_new + beta * (u_new - u_q)
        q, u_q, momentum = q_new, u_new, next_momentum


def _solve_spd(H, g):
    """``H^{-1} g`` for a symmetric positive semidefinite ``H`` (ridged if singular)."""
    try:
        return scipy.linalg.cho_solve(scipy.linalg.cho_factor(H, check_finite=False), g,
                                      check_finite=False)
    except (np.linalg.LinAlgError, ValueError):
        ridge = 1e-12 * max(float(np.trace(H)), 1e-300) + 1e-300
        return np.linalg.lstsq(H + ridge * np.eye(H.shape[0]), g, rcond=None)[0]
