"""Certified fits of one-threshold risks with piecewise-linear losses.

A primal-dual interior-point method (Mehrotra's predictor-corrector) on the
threshold form of Rockafellar and Uryasev, "Optimization of Conditional
Value-at-Risk" (2000), for ERM, superquantile and top-k risks of the hinge
and absolute losses, certified by a Fenchel dual bound.  The method is
described in the user guide, :ref:`methods-interior-point`.
"""

import time

import numpy as np
import scipy.linalg

from ...datafits.penalty_model import PenaltyModel
from ...datafits.smoothed_risk import relative_weights
from ..progress import Progress
from ..result import SolverResult
from .setup import check_supported, starting_theta

#: Fraction of the distance to the boundary a step may cover.
_STEP_TO_BOUNDARY = 0.99
#: The iteration ends when the mean complementarity falls below this times |F| / n, or a
#: step below this length: no further progress is possible in double precision.
_SMALLEST_MU = 1e-15
_SMALLEST_STEP = 1e-12
#: Smallest share of the total weight a sample's level is given (:func:`_shares`).
_SMALLEST_SHARE = 2.0 ** -52


def _shares(sample_weight):
    """Each weight's share of the total, at least ``_SMALLEST_SHARE``.

    The shares come from the weights rescaled exactly, so that neither
    their sum overflows nor a share underflows for want of range.  The rank
    weights of the objective are differences of the spectrum's integral at
    the ends of the cells of mass, accurate to a few ulps of their sum: a
    share below ``2^-52`` (a weight 1e-200 beside 1e300, zero included) is
    not resolved by them, and as a level it would let the multipliers of its
    sample underflow to zero, leaving the Newton system 0 / 0.
    """
    v = relative_weights(sample_weight)
    return np.maximum(v / v.sum(), _SMALLEST_SHARE)


class _Program:
    """The quadratic program of one fit: its data, residuals and Newton steps."""

    def __init__(self, datafit, penalty):
        _, _, risk, loss, _, sample_weight = datafit.weighted()
        self.design = datafit.design()
        self.s, self.c = datafit.affine_map()
        self.loss, self.l1, self.l2 = loss, float(penalty.l1), float(penalty.l2)
        self.slopes = np.asarray(loss.slopes, dtype=np.float64)
        self.kink = float(loss.kink)
        n = self.s.size
        self.risk, self.sample_weight = risk, sample_weight
        v = np.ones(n) if sample_weight is None else np.asarray(sample_weight, dtype=np.float64)
        total = float(v.sum())
        self.kappa = float(risk.weights(n, sample_weight).sum())
        # the level c_i of each sample: its weight per unit times its share of the weight
        share = v / total if sample_weight is None else _shares(v)
        self.level = risk.threshold_level(total, sample_weight) * share
        # with the level at the mean weight everywhere (ERM) no threshold is needed
        self.has_tau = float(self.level.sum()) > self.kappa * (1.0 + 1e-12)
        self.d, self.p = self.design.d, self.design.p
        self.penalty = PenaltyModel(penalty, self.design)
        self.reg = self.penalty.reg

    # -- the objective and the certificate ---------------------------------
    def arguments(self, theta):
        return self.s * self.design.matvec(theta) + self.c

    def objective(self, theta, t=None):
        t = self.arguments(theta) if t is None else t
        return self.risk.value(self.loss.value(t), self.sample_weight) + self.penalty.value(theta)

    def dual_bound(self, v):
        """A lower bound on ``F*`` from the sample weights ``v`` (see the user guide)."""
        v = np.clip(v, -self.level, self.level)
        if self.slopes.min() >= 0.0:
            v = np.maximum(v, 0.0)
        total = float(np.abs(v).sum())
        if total > self.kappa:
            v = v * (self.kappa / total)
        sv = self.s * v
        if self.design.fit_intercept:
            excess = float(sv.sum())
            side = sv > 0.0 if excess > 0.0 else sv < 0.0
            mass = float(sv[side].sum())
            if mass != 0.0:
                sv[side] *= max(1.0 - excess / mass, 0.0)
        z = self.design.rmatvec(sv)[: self.d]
        base = float((sv / self.s) @ (self.c - self.kink))
        if self.l2 > 0.0:
            excess = np.maximum(np.abs(z) - self.l1, 0.0)
            return base - float(excess @ excess) / (2.0 * self.l2)
        largest = float(np.abs(z).max()) if z.size else 0.0
        if largest > self.l1:
            return base * self.l1 / largest if self.l1 > 0.0 else -np.inf
        return base

    # -- the interior-point iteration ---------------------------------------
    def start(self, theta):
        """A strictly interior starting point from ``theta``."""
        J = self.slopes.size
        t = self.arguments(theta)
        pieces = self.slopes[None, :] * (t - self.kink)[:, None]
        x = dict(theta=theta.copy(), tau=0.0, xi=np.maximum(pieces.max(axis=1), 0.0) + 1.0,
                 u=np.abs(theta[: self.d]) + 1.0)
        slack = dict(piece=x["xi"][:, None] - pieces + x["tau"], floor=x["xi"].copy(),
                     plus=x["u"] - theta[: self.d], minus=x["u"] + theta[: self.d])
        share = self.level / (J + 1)
        dual = dict(piece=np.repeat(share[:, None], J, axis=1), floor=share.copy(),
                    plus=np.full(self.d, 0.5 * self.l1 + 1e-3), minus=np.full(self.d, 0.5 * self.l1 + 1e-3))
        return x, slack, dual

    def _active(self, name):
        return name != "floor" or self.has_tau

    def _blocks(self):
        return [k for k in ("piece", "floor", "plus", "minus")
                if self._active(k) and (k in ("piece", "floor") or self.l1 > 0.0)]

    def residuals(self, x, slack, dual, t):
        """Stationarity ``r_d`` (per variable) and primal ``r_p`` (per constraint block)."""
        theta, w = x["theta"], x["theta"][: self.d]
        lam = dual["piece"]
        weights = lam @ self.slopes  # v_i
        r_theta = self.design.rmatvec(self.s * weights) + self.reg * theta
        r_xi = self.level - lam.sum(axis=1)
        if self.has_tau:
            r_xi = r_xi - dual["floor"]
        r_d = dict(theta=r_theta, xi=r_xi,
                   tau=self.kappa - float(lam.sum()) if self.has_tau else 0.0)
        pieces = self.slopes[None, :] * (t - self.kink)[:, None]
        tau = x["tau"] if self.has_tau else 0.0
        r_p = dict(piece=pieces - tau - x["xi"][:, None] + slack["piece"],
                   floor=-x["xi"] + slack["floor"])
        if self.l1 > 0.0:
            r_theta[: self.d] += dual["plus"] - dual["minus"]
            r_d["u"] = self.l1 - dual["plus"] - dual["minus"]
            r_p["plus"] = w - x["u"] + slack["plus"]
            r_p["minus"] = -w - x["u"] + slack["minus"]
        return r_d, r_p

    def factor(self, slack, dual):
        """Factor the reduced Newton matrix for the scaling ``D = Lambda / S``."""
        D = {k: dual[k] / slack[k] for k in self._blocks()}
        Dp = D["piece"]
        A0 = Dp.sum(axis=1)
        A1 = Dp @ self.slopes
        floor = D["floor"] if self.has_tau else np.zeros_like(A0)
        E = A0 + floor
        # h = A2 - A1^2 / E, written without cancellation:
        # A2 E - A1^2 = sum_{j<k} D_j D_k (a_j - a_k)^2 + floor A2
        cross = np.zeros_like(A0)
        for j in range(self.slopes.size):
            for k in range(j + 1, self.slopes.size):
                cross += Dp[:, j] * Dp[:, k] * (self.slopes[j] - self.slopes[k]) ** 2
        h = (cross + floor * (Dp @ self.slopes ** 2)) / E
        M = self.design.weighted_gram(h)
        M[np.diag_indices_from(M)] += self.reg
        if self.l1 > 0.0:
            U = D["plus"] + D["minus"]
            M[np.arange(self.d), np.arange(self.d)] += U - (D["minus"] - D["plus"]) ** 2 / U
        if self.has_tau:
            coupling = self.design.rmatvec(-self.s * A1 * floor / E)
            corner = float(np.sum(A0 * floor / E))
            M = np.block([[M, coupling[:, None]], [coupling[None, :], np.array([[corner]])]])
        scale = np.sqrt(np.maximum(np.diag(M), 1e-300))
        Ms = M / scale[:, None] / scale[None, :]
        Ms[np.diag_indices_from(Ms)] += 1e-13
        try:
            chol = scipy.linalg.cho_factor(Ms, check_finite=False)
        except np.linalg.LinAlgError:
            Ms[np.diag_indices_from(Ms)] += 1e-8
            chol = scipy.linalg.cho_factor(Ms, check_finite=False)
        return dict(D=D, A0=A0, A1=A1, E=E, chol=chol, scale=scale,
                    U=(D["plus"] + D["minus"]) if self.l1 > 0.0 else None)

    def step(self, fac, r_d, r_p, r_c, slack, dual):
        """The Newton step for the residuals ``r_d``, ``r_p`` and ``r_c`` (complementarity)."""
        D = fac["D"]
        # omega = D r_p - S^{-1} r_c per block; rhs = -r_d - G^T omega
        omega = {k: D[k] * r_p[k] - r_c[k] / slack[k] for k in self._blocks()}
        om = omega["piece"]
        rhs_xi = -r_d["xi"] + om.sum(axis=1)
        if self.has_tau:
            rhs_xi += omega["floor"]
        rhs_tau = -r_d["tau"] + float(om.sum())
        # eliminate xi (M_{theta xi_i} = -A1_i z_i, M_{tau xi_i} = A0_i) in the same product
        A0, A1, E = fac["A0"], fac["A1"], fac["E"]
        rhs_theta = -r_d["theta"] + self.design.rmatvec(self.s * (A1 * rhs_xi / E - om @ self.slopes))
        if self.l1 > 0.0:
            rhs_theta[: self.d] -= omega["plus"] - omega["minus"]
            rhs_u = -r_d["u"] + omega["plus"] + omega["minus"]
            rhs_theta[: self.d] -= (D["minus"] - D["plus"]) * rhs_u / fac["U"]
        rhs = rhs_theta
        if self.has_tau:
            rhs = np.append(rhs_theta, rhs_tau - float(np.sum(A0 * rhs_xi / E)))
        sol = scipy.linalg.cho_solve(fac["chol"], rhs / fac["scale"], check_finite=False) / fac["scale"]
        d_theta = sol[: self.p]
        d_tau = float(sol[self.p]) if self.has_tau else 0.0
        z_dtheta = self.s * self.design.matvec(d_theta)
        d_xi = (rhs_xi + A1 * z_dtheta - A0 * d_tau) / E
        step = dict(theta=d_theta, tau=d_tau, xi=d_xi)
        # G dx per block, then ds = -r_p - G dx and dlam = -S^{-1} (r_c + Lambda ds)
        g_dx = dict(piece=self.slopes[None, :] * z_dtheta[:, None] - d_tau - d_xi[:, None], floor=-d_xi)
        if self.l1 > 0.0:
            d_u = (rhs_u - (D["minus"] - D["plus"]) * d_theta[: self.d]) / fac["U"]
            step["u"] = d_u
            g_dx["plus"] = d_theta[: self.d] - d_u
            g_dx["minus"] = -d_theta[: self.d] - d_u
        d_slack = {k: -r_p[k] - g_dx[k] for k in self._blocks()}
        d_dual = {k: -(r_c[k] + dual[k] * d_slack[k]) / slack[k] for k in self._blocks()}
        return step, d_slack, d_dual, z_dtheta

    def max_step(self, slack, dual, d_slack, d_dual):
        """The largest ``alpha <= 1`` keeping slacks and multipliers nonnegative."""
        alpha = 1.0
        for k in self._blocks():
            for v, dv in ((slack[k], d_slack[k]), (dual[k], d_dual[k])):
                neg = dv < 0.0
                if np.any(neg):
                    alpha = min(alpha, float(np.min(-v[neg] / dv[neg])))
        return alpha

    def gap_measure(self, slack, dual):
        """The mean complementarity ``s . lambda / m`` over the active constraints."""
        blocks = self._blocks()
        total = sum(float(np.sum(slack[k] * dual[k])) for k in blocks)
        count = sum(slack[k].size for k in blocks)
        return total / count

    def iterate(self, x, slack, dual, t):
        """One predictor-corrector iteration from the point at loss arguments ``t``, made in place.

        Returns the mean complementarity before the step, the step length
        and the loss arguments after it.
        """
        r_d, r_p = self.residuals(x, slack, dual, t)
        mu = self.gap_measure(slack, dual)
        fac = self.factor(slack, dual)
        blocks = self._blocks()
        # predictor (affine scaling)
        r_c = {k: slack[k] * dual[k] for k in blocks}
        _, ds, dl, _ = self.step(fac, r_d, r_p, r_c, slack, dual)
        alpha = self.max_step(slack, dual, ds, dl)
        mu_aff = self.gap_measure({k: slack[k] + alpha * ds[k] for k in blocks},
                                  {k: dual[k] + alpha * dl[k] for k in blocks})
        centering = (mu_aff / mu) ** 3
        # corrector
        r_c = {k: slack[k] * dual[k] + ds[k] * dl[k] - centering * mu for k in blocks}
        dx, ds, dl, z_dtheta = self.step(fac, r_d, r_p, r_c, slack, dual)
        alpha = min(1.0, _STEP_TO_BOUNDARY * self.max_step(slack, dual, ds, dl))
        for k in dx:
            x[k] = x[k] + alpha * dx[k]
        for k in blocks:
            slack[k] = slack[k] + alpha * ds[k]
            dual[k] = dual[k] + alpha * dl[k]
        return mu, alpha, t + alpha * z_dtheta


def interior_point(datafit, penalty, *, coef_init=None, intercept_init=None, max_iter=100, tol=1e-9,
                   verbose=0):
    """Minimise a one-threshold risk of a piecewise-linear loss with a penalty, certified.

    Parameters
    ----------
    datafit : skrank.datafits.rank_risk.RankRisk
        The training set, the risk (ERM, a superquantile or a top-k average:
        ``risk.one_threshold``), the loss (hinge or absolute), whether to fit
        an intercept and the sample weights, under which the risk is that of
        the weighted empirical distribution (:mod:`skrank.risks`), whose
        threshold form has the level ``c v_i / sum v`` for sample ``i``.
    penalty : skrank.penalties.Penalty
        An l2, l1 or elastic-net penalty (not zero: the certificate's dual
        bound needs one).
    coef_init : ndarray of shape (d,), optional
        Starting coefficients (zeros by default).
    intercept_init : float, optional
        Starting intercept (0 by default).
    max_iter : int, default=100
        Most interior-point iterations.
    tol : float, default=1e-9
        Stop when the certified bound on ``F - F*`` is at most ``tol * |F|``.
    verbose : int, default=0
        Print one line per iteration when positive.

    Returns
    -------
    SolverResult
        ``stop_criterion`` is the certified relative gap; ``converged`` is
        True when it is at most ``tol``; ``n_iter`` counts iterations and
        ``objective_history`` holds ``F`` after each.  ``info`` has
        ``certified``, ``gap`` (the absolute bound), ``passes`` and ``time``.
    """
    start_time = time.perf_counter()
    check_supported("ipm", datafit, penalty)
    program = _Program(datafit, penalty)
    x, slack, dual = program.start(starting_theta(program.design, coef_init, intercept_init))
    progress = Progress("ipm", verbose, max_iter, criterion="certified gap")
    t = program.arguments(x["theta"])
    best = (program.objective(x["theta"], t), x["theta"].copy())
    best_dual = -np.inf
    history = [best[0]]
    certified, n_iter = False, 0
    for n_iter in range(1, max_iter + 1):
        mu, alpha, t = program.iterate(x, slack, dual, t)
        F = program.objective(x["theta"], t)
        if F < best[0]:
            best = (F, x["theta"].copy())
        best_dual = max(best_dual, program.dual_bound(dual["piece"] @ program.slopes))
        gap = max(best[0] - best_dual, 0.0)
        history.append(best[0])
        progress(n_iter, F, gap / max(abs(best[0]), 1e-300), f"mu={mu:.3g} step={alpha:.3g}")
        if gap <= tol * abs(best[0]):
            certified = True
            break
        if mu <= _SMALLEST_MU * max(abs(F), 1e-300) / program.s.size or alpha <= _SMALLEST_STEP:
            break  # the iterates have reached the boundary in floating point
    F, theta = best
    gap = max(F - best_dual, 0.0)
    coef, intercept = program.design.split(theta)
    return SolverResult(
        coef=coef.copy(), intercept=intercept, n_iter=n_iter,
        objective_history=np.asarray(history), stop_criterion=gap / max(abs(F), 1e-300),
        converged=certified,
        info=dict(certified=certified, gap=gap, passes=program.design.passes,
                  time=time.perf_counter() - start_time),
    )
