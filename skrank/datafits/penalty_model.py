"""The penalty's part of a model of ``theta = (w, b)``: value, conjugate and the l1 Newton direction."""

import numpy as np
from scipy.linalg.lapack import dpotrf, dpotrs

from .smoothed_risk import l1_newton_direction

#: Coordinate-descent sweeps of one l1 Newton direction.
_CD_SWEEPS = 100


class PenaltyModel:
    """A penalty on the first ``d`` of ``p`` coefficients (the intercept, last, is not penalised).

    Parameters
    ----------
    penalty : skrank.penalties.Penalty
        Its ``l1`` and ``l2`` strengths.
    design : skrank.backends.design.Design
        Gives ``d``, ``p`` and ``fit_intercept``.
    """

    def __init__(self, penalty, design):
        self.l1, self.l2, self.d = float(penalty.l1), float(penalty.l2), design.d
        #: The ridge of the smooth part per coefficient: ``l2``, none on the intercept.
        self.reg = np.ones(design.p) * self.l2
        if design.fit_intercept:
            self.reg[-1] = 0.0

    def value(self, theta):
        """``l1 ||w||_1 + l2 ||w||^2 / 2``."""
        w = theta[: self.d]
        return self.l1 * float(np.abs(w).sum()) + 0.5 * self.l2 * float(w @ w)

    def direction(self, K, g, theta):
        """Newton direction of the smooth part's model ``K``, ``g`` plus the l1 term.

        Returns ``(d, decrease)``: the minimiser of
        ``g.d + d^T K d / 2 + l1 (||w + d||_1 - ||w||_1)`` and minus its
        minimum (for ``l1 = 0``: ``d = -K^{-1} g``, the decrease is half the
        Newton decrement).
        """
        if self.l1 == 0.0:
            d = -solve_spd(K, g)
            return d, -0.5 * float(g @ d)
        d, model = l1_newton_direction(K, g, theta, self.l1, self.d, _CD_SWEEPS, 1e-10)
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
        x = theta + d
        penalised = np.arange(theta.size) < self.d
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
        w_old, w_new = theta[: self.d], x_new[: self.d]
        trial_model = (float(g @ trial) + 0.5 * float(trial @ (K @ trial))
                       + self.l1 * float(np.abs(w_new).sum() - np.abs(w_old).sum()))
        return (trial, trial_model) if trial_model <= model else (d, model)

    def conjugate(self, z):
        """``(scale, R*(-z))`` for the slopes ``z = X^T u`` of a dual bound.

        Without an l2 part the penalty's conjugate is the indicator of
        ``|z| <= l1``: the slopes are scaled by ``scale`` into it (else 1).
        """
        if self.l2 > 0.0:
            excess = np.maximum(np.abs(z) - self.l1, 0.0)
            return 1.0, float(excess @ excess) / (2.0 * self.l2)
        largest = float(np.abs(z).max()) if z.size else 0.0
        return (self.l1 / largest if largest > self.l1 else 1.0), 0.0

    def conjugate_gradient(self, y):
        """The gradient of ``R*`` at ``y`` (an l2 part needed): ``soft_threshold(y, l1) / l2``."""
        return np.sign(y) * np.maximum(np.abs(y) - self.l1, 0.0) / self.l2


def solve_spd(H, g):
    """``H^{-1} g`` for a symmetric positive semidefinite ``H`` (ridged if singular).

    LAPACK's Cholesky factorisation and solve are called directly: a Newton
    step makes several of these small solves, and the checks of
    :func:`scipy.linalg.cho_factor` cost more than the solve itself below
    about 50 coefficients.
    """
    factor, info = dpotrf(H, lower=0, clean=0, overwrite_a=0)
    if info == 0:
        x, info = dpotrs(factor, g, lower=0)
        if info == 0:
            return x
    ridge = 1e-12 * max(float(np.trace(H)), 1e-300) + 1e-300
    return np.linalg.lstsq(H + ridge * np.eye(H.shape[0]), g, rcond=None)[0]
