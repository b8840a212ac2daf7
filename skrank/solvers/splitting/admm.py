"""Proximal ADMM with a PAVA z-step for rank-based objectives.

Xiao, Ge, Jiang and Yan, "A Unified Framework for Rank-based Loss
Minimization" (NeurIPS 2023), Algorithm 1, with the penalty schedules of
:class:`RhoSchedule` and restarts and trimming steps for non-convex risks.
The method, the stopping rule and the departures from the paper are
described in the user guide, :doc:`/rank_admm` and :ref:`methods-admm`.
"""

import time

import numpy as np

from ...backends.threads import blas_threads
from ...datafits.rank_risk import RankRisk, affine_map, rank_objective
from ...kernels.pava import zstep, zstep_even, zstep_sorted
from ...kernels.sorting import resort
from ...losses import loss_level
from ...risks import ERM, TopK
from ..finish import FinishSchedule, NewtonFinish, PiecewiseLinearFinish
from ..progress import Progress
from ..result import SolverResult
from ..stochastic.docs import fill_doc
from ..stochastic.weights import rank_weights
from .admm_wstep import WStep


# ------------------------------------------------------------------------------------
# rho schedules
# ------------------------------------------------------------------------------------
def _framework(risk):
    if risk.depends_on_values:
        return "ehrm"
    if not risk.is_convex:
        return "aorr"
    return "srm"


class RhoSchedule:
    """Penalty schedule of the ADMM.

    Parameters
    ----------
    rho : "paper", "table6", "adaptive" or float
        ``"table6"``: Table 6 of Xiao et al. 2023 (Appendix B.5) by kind of
        risk, with caps of our own; ``"paper"``: the same ramp from at
        least ``0.1/n``, switching to residual balancing once it
        overshoots; ``"adaptive"``: residual balancing from ``0.1/n``
        (``band``, ``max_changes``, ``far_band``, ``late_gap``); a float: a
        constant ``rho``.  For non-convex risks ``rho`` is also raised when
        the iterates cycle (``stall_window``, ``stall_progress``,
        ``max_raises``).  The schedules are described in the user guide,
        :ref:`methods-admm`.
    risk : skrank.risks.BaseRisk
    n, d : int
        Sample count and number of columns of the linear map.
    """

    def __init__(self, rho, risk, n, d):
        self.kind = rho if isinstance(rho, str) else "constant"
        self.framework = _framework(risk)
        self.balancing = self.kind == "adaptive"
        self.band = type(self).band
        # Residual balancing is allowed for this many iterations only, so that
        # the penalty is eventually constant and the usual ADMM convergence
        # theory applies (Boyd et al. 2011, section 3.4.1).
        self.n_changes = 0
        self.max_changes = 100
        # Non-convex risks: raise rho when the residuals stall (see update).
        self.raise_on_stall = self.kind in ("paper", "adaptive") and self.framework != "srm"
        self._crit = []
        self._obj = []
        self._window_best = np.inf
        self.n_raises = 0
        self.max_raises = 20
        self._last_change = -1
        self._late_gap = self.late_gap
        if self.kind == "constant":
            self.rho0 = float(rho)
            self.cap = np.inf
        elif self.kind == "adaptive":
            self.rho0 = 0.1 / n
            self.cap = np.inf
        else:
            self.rho0 = {"srm": 1e-5, "aorr": 2e-7, "ehrm": 1e-4}[self.framework]
            if self.kind == "paper":
                self.rho0 = max(self.rho0, self.rho0_scale / n)
            self.cap = (217.0 if self.framework == "srm" else 17.0) * d

    #: Ratio of the scaled residuals tolerated by residual balancing.
    band = 3.0
    #: After the first max_changes iterations of balancing (convex risks):
    #: ratio beyond which rho still changes, and the first least spacing of
    #: such late changes (doubled after each).
    far_band = 100.0
    #: "paper" starts at max(Table 6's rho_0, rho0_scale / n).
    rho0_scale = 0.1
    late_gap = 50

    #: Window (iterations) and least progress of the stall rule.
    stall_window = 100
    stall_progress = 0.99
    stall_factor = 2.0

    def _cycling(self, k, crit, objective):
        # True at the end of a window whose best residual is not below stall_progress times the
        # previous window's while the objective went up and down: the iterates cycle (user guide)
        self._crit.append(crit)
        self._obj.append(objective)
        W = self.stall_window
        if (k + 1) % W:
            return False
        best = min(self._crit[-W:])
        stalled = best > self.stall_progress * self._window_best
        self._window_best = best
        F = np.asarray(self._obj[-W:])
        rises = np.diff(F) > 1e-12 * np.maximum(np.abs(F[1:]), 1.0)
        return stalled and bool(rises.any())

    def update(self, k, rho, primal_abs, e_primal, e_dual, objective=np.nan):
        """``rho`` for iteration ``k + 1`` (0-based ``k`` just finished)."""
        if self.kind == "constant":
            return rho
        if self.kind == "stall" or (
            self.raise_on_stall and self.balancing and self.n_changes >= self.max_changes
        ):
            # Non-convex risks, once balancing is over: raise rho geometrically when the iterates
            # cycle, below the threshold of Wang, Yin and Zeng 2019 (user guide)
            self.kind = "stall"
            cycling = self._cycling(k, max(e_primal, e_dual), objective)
            if cycling and self.n_raises < self.max_raises:
                self.n_raises += 1
                return min(rho * self.stall_factor, self.cap)
            return rho
        if self.kind == "paper" and not self.balancing and e_dual > 10.0 * e_primal:
            # The ramp has overshot: from here on balance the residuals.
            self.balancing = True
        if self.balancing:
            if self.raise_on_stall:
                # Non-convex risks: balancing lasts max_changes iterations,
                # then the stall rule above takes over.
                if self.n_changes >= self.max_changes:
                    return rho
                self.n_changes += 1
                band = self.band
            else:
                # Convex risks: max_changes iterations of balancing in the
                # band, then changes only when the residuals are far apart
                # (more than far_band), at most once per window that doubles
                # after every such late change, so that rho is eventually
                # constant (Boyd et al. 2011, section 3.4.1).
                self.n_changes += 1
                if self.n_changes <= self.max_changes:
                    band = self.band
                elif k - self._last_change >= self._late_gap:
                    band = self.far_band
                else:
                    return rho
            if e_primal > band * e_dual:
                rho_new = rho * 2.0
            elif e_dual > band * e_primal:
                rho_new = rho / 2.0
            else:
                return rho
            if self.n_changes > self.max_changes and not self.raise_on_stall:
                self._late_gap *= 2
            self._last_change = k
            return min(max(rho_new, 1e-12), self.cap)
        if self.framework == "srm":
            return min(rho0_times(self.rho0, 1.2 ** (k + 1)), self.cap)
        if self.framework == "aorr":
            expo = min(max(0, (k + 1 - 7) // 3), 400)  # 5^400 > any cap; no overflow
            return min(rho0_times(self.rho0, 5.0**expo), self.cap)
        factor = 1.02 if primal_abs > 1e-2 else 1.07
        return min(rho * factor, self.cap)


def rho0_times(rho0, factor):
    """``rho0 * factor`` without overflow."""
    return rho0 * min(factor, 1e300)


# ------------------------------------------------------------------------------------
# z-step dispatch
# ------------------------------------------------------------------------------------
def reference_to_z(loss, reference):
    """The CPT reference point moved from loss space to z-space.

    ``l(z) <= reference`` holds exactly when ``z <= B_z`` (classification
    losses, nondecreasing) or ``|z| <= B_z`` (even regression losses).
    ``-inf`` when no argument has a loss that small.
    """
    return float(loss_level(loss.code, float(reference), loss.param))


def make_zstep(loss, sigma, sigma_b=None, threshold=np.inf, method="stack"):
    """``m, rho -> argmin_z sum_i sigma_i l(z)_(i) + rho/2 ||z - m||^2``.

    Classification losses use :func:`skrank.kernels.pava.zstep`; even regression
    losses :func:`skrank.kernels.pava.zstep_even`, whose docstring proves the
    reduction to magnitudes.  The same reduction holds for the two-piece CPT
    weights (the rank term still depends on the magnitudes only, and the
    block values stay nonnegative for a nonnegative threshold), so that case
    runs :func:`skrank.kernels.pava.zstep_sorted` on the sorted magnitudes.
    """
    code, param = loss.code, loss.param
    # the sort of each call starts from the previous call's order (nearly sorted)
    order = np.arange(len(sigma), dtype=np.int64)
    if loss.task == "classification":
        return lambda m, rho: zstep(m, sigma, code, param, rho, sigma_b, threshold, method, order)
    if sigma_b is None:
        return lambda m, rho: zstep_even(m, sigma, code, param, rho, method, order)

    def even_two_piece(m, rho):
        a = np.abs(m)
        perm = np.argsort(a, kind="stable")
        u_sorted = zstep_sorted(a[perm], sigma, code, param, rho, sigma_b, threshold, method)
        u = np.empty_like(u_sorted)
        u[perm] = u_sorted
        return np.where(m < 0.0, -u, u)

    return even_two_piece


def risk_pieces(risk, loss, n):
    """``(sigma, sigma_b, threshold)`` of a risk for the z-step."""
    if risk.depends_on_values:
        sigma_a, sigma_b = risk.weight_pieces(n)
        return sigma_a, sigma_b, reference_to_z(loss, risk.reference)
    return np.ascontiguousarray(risk.weights(n), dtype=np.float64), None, np.inf


def rank_subgradient(risk, loss, t):
    """``sigma_rank(i) l'(t_i)``: a subgradient of ``Omega`` at ``t``."""
    return rank_weights(risk, loss.value(t)) * loss.derivative(t)


# ------------------------------------------------------------------------------------
# the loop
# ------------------------------------------------------------------------------------
def _residual_units(X, fit_intercept):
    """The column offsets and units in which :func:`_penalty_residual` measures each coefficient.

    Those of :class:`skrank.solvers.stochastic.units.FeatureUnits`: the column means
    (with an intercept) and spreads.
    """
    from ..stochastic.units import FeatureUnits

    units = FeatureUnits(X, fit_intercept)
    return units.offset, units.unit


def _penalty_residual(X, s, lam, w, wstep, linear, units=None):
    """``dist(A^T (s lambda) + q, dg(w))`` with the intercept's row (Xiao et al. 2023, Theorem 1).

    Measured in the standardised coordinates ``v_j = u_j w_j``,
    ``b~ = b + m . w`` of :func:`_residual_units` (``units = (m, u)``,
    computed when None): the row of coefficient ``j`` is
    ``dist(g_j - m_j g_b, dg_j(w_j)) / u_j`` with ``g_b`` the intercept's.
    It is then the same for ``X`` and ``X`` with its columns rescaled (and
    the penalty rescaled to match), unlike the distance in the units of
    ``X``, in which a column of scale 1e-12 passes at any coefficient.
    """
    sl = s * lam
    gw = np.asarray(X.T @ sl).ravel()
    gb = float(sl.sum()) if wstep.fit_intercept else 0.0
    if linear is not None:
        gw = gw + linear[:-1]
        gb = gb + (float(linear[-1]) if wstep.fit_intercept else 0.0)
    offset, unit = _residual_units(X, wstep.fit_intercept) if units is None else units
    pen = wstep.penalty
    # the penalty of v: l1 / u_j and l2 / u_j^2 (a separable penalty of the same form)
    scaled = type(pen)(pen.l1 / unit, pen.l2 / (unit * unit))
    e_w = scaled.subgradient_distance(w * unit, (gw - offset * gb) / unit)
    return float(np.hypot(e_w, gb))


def _restandardised(out, finish, X, s, wstep, linear, units, tol):
    """A finish's result whose KKT certificate also holds in the units of :func:`_penalty_residual`.

    The piecewise-linear finish measures the penalty's condition in the
    units of ``X``; its certificate stands only if that condition, measured
    again per standardised coefficient, is at most ``tol`` too (the residual
    is then the larger of the two).  The Newton finish certifies a relative
    gap of ``F``, which no rescaling of the columns changes: kept as it is.
    """
    if out is None or not out.certified or out.lam is None or isinstance(finish, NewtonFinish):
        return out
    residual = max(float(out.residual), _penalty_residual(X, s, out.lam, out.coef, wstep, linear, units))
    return out._replace(certified=residual <= tol, residual=residual)


class _AdmmRun:
    """The iterates of one run of Algorithm 1 (:func:`admm_loop`) and what it records.

    Parameters
    ----------
    X, s, c, wstep, linear, objective, objective_t, finish, tol
        As in :func:`admm_loop`.
    coef_init, intercept_init : ndarray or None, float or None
        The start (zero by default).
    lam0 : callable
        ``t -> lambda^0``.
    rho0 : float
        The first penalty.
    """

    def __init__(self, X, s, c, wstep, linear, objective, objective_t, finish, tol, coef_init,
                 intercept_init, lam0, rho0):
        self.X, self.s, self.c, self.wstep, self.linear = X, s, c, wstep, linear
        self.objective, self.objective_t, self.finish, self.tol = objective, objective_t, finish, tol
        self.w = np.zeros(X.shape[1]) if coef_init is None else np.array(coef_init, dtype=np.float64)
        fit_intercept = wstep.fit_intercept
        self.b = 0.0 if (intercept_init is None or not fit_intercept) else float(intercept_init)
        self.t = s * (np.asarray(X @ self.w).ravel() + self.b) + c
        self.z, self.m_z = self.t, None
        self.lam = np.asarray(lam0(self.t), dtype=np.float64)
        self.rho = rho0
        self.sqrt_n = np.sqrt(X.shape[0])
        self.units = _residual_units(X, fit_intercept)
        # Exact l2 step in prediction space (O(n r) per iteration, w rebuilt at the end).
        self.fast = linear is None and objective_t is not None and wstep.fast_l2_available()
        #: ``(coeffs, v, rho)`` of the last fast step while its ``(w, b)`` is not rebuilt
        self._pending = None
        self.history, self.crit_history, self.rho_history = [], [], []
        self.crit = np.inf
        self.converged = self.finished = False
        self.inner_total = 0

    def step(self, k, zfun, relaxation, inner_max_iter):
        """Iteration ``k`` (0-based), recorded; returns ``(r_primal, e_primal, e_dual, e_pen)``."""
        rho, t, lam = self.rho, self.t, self.lam
        # 1. z-step (Xiao et al. 2023, section 3.2, problem (10))
        self.m_z = t - lam / rho
        z = zfun(self.m_z, rho)
        # Over-relaxation (Boyd et al. 2011, section 3.4.3) of the z-block.
        zr = z if relaxation == 1.0 else relaxation * z + (1.0 - relaxation) * t
        # 2. w-step (Xiao et al. 2023, Algorithm 1): target v with s (Xw + b) + c ~ z + lambda/rho
        f_new, pen_value = self._wstep(k, self.s * (zr + lam / rho - self.c), inner_max_iter)
        t_new = self.s * f_new + self.c
        # 3. dual step
        self.lam = lam + rho * (zr - t_new)
        # eps-KKT residuals (Xiao et al. 2023, Theorem 1): primal ||z - t||; dual
        # dist(-lambda, dOmega(z)) <= rho ||t_new - t_old|| (z-step optimality);
        # dist(A^T lambda + q, dg(w)) computed directly (0 for an exact w-step).
        r_primal = float(np.linalg.norm(z - t_new))
        r_dual = rho * float(np.linalg.norm(t_new - t))
        # Scaled residuals: z in margin units (RMS), lambda in units of 1/n.
        e_primal = r_primal / self.sqrt_n
        e_dual = r_dual * self.sqrt_n
        e_pen = self._penalty_residual(max(e_primal, e_dual))
        self.crit = max(e_primal, e_dual, e_pen)
        self.z, self.t = z, t_new
        F = self.objective_t(t_new, pen_value) if self.fast else self.objective(self.w, self.b)
        self.history.append(F)
        self.crit_history.append(self.crit)
        self.rho_history.append(rho)
        return r_primal, e_primal, e_dual, e_pen

    def _wstep(self, k, v, inner_max_iter):
        """The w-step to the target ``v``: ``X w + b`` and the penalty's value (fast step; else None)."""
        if self.fast:
            f_new, coeffs, pen_value = self.wstep.fast_l2(v, self.rho)
            self._pending = (coeffs, v, self.rho)
            return f_new, pen_value
        inner_tol = max(0.1 * self.tol, 1e-3 * min(self.crit, 1.0)) / self.sqrt_n
        if self.wstep.l1_solver == "smoothed":
            # sADMM Moreau parameter (Xiao et al. 2023, section 4; schedule of Appendix B.5)
            self.wstep.gamma = max(1e-5 * 0.9**k, 1e-9)
        self.w, self.b, n_inner = self.wstep.solve(
            v, self.rho, self.w, q=self.linear, tol=inner_tol, max_iter=inner_max_iter
        )
        self.inner_total += n_inner
        return np.asarray(self.X @ self.w).ravel() + self.b, None

    def _penalty_residual(self, e_other):
        """``e_pen`` after a step whose other two residuals are at most ``e_other``."""
        if self.fast:
            # The closed-form step is exact: dist(A^T lambda, dg(w)) = 0 up to
            # rounding; it is computed for real once the other two pass.
            if not e_other <= self.tol:
                return 0.0
            self.rebuild_coef()
        return _penalty_residual(self.X, self.s, self.lam, self.w, self.wstep, self.linear, self.units)

    def rebuild_coef(self):
        """Set ``(w, b)`` from the last fast step (:meth:`WStep.fast_coef`) when not done yet."""
        if self._pending is None:
            return
        coeffs, v, rho = self._pending
        self.w = self.wstep.fast_coef(coeffs)
        self.b = self.wstep.intercept_for(self.w, v, rho)
        self._pending = None

    def warm_finish(self):
        """One finish attempt at a warm start, kept only when certified."""
        # A warm start may sit on an optimum found before: one finish attempt
        # on the face its near-ties read (one round: cheap when it fails).
        out = self.finish(self.finish.snap(self.t), self.w, self.tol, self.b, rounds=1)
        F = self._adopt(out, last=False, certified_only=True)
        if F is not None:
            self.history.append(F)
            self.crit_history.append(self.crit)

    def finish_attempt(self, last):
        """A finish attempt at the iterate (``last``: the final iteration); returns whether it certified."""
        self.rebuild_coef()
        # rho (m - z) lies in dOmega(z) (the z-step's optimality condition):
        # the finish's estimate of the loss weights
        out = self.finish(self.z, self.w, self.tol, self.b, u=self.rho * (self.m_z - self.z))
        F = self._adopt(out, last)
        if F is not None:
            self.history[-1] = F
        return self.converged

    def _adopt(self, out, last, certified_only=False):
        """Move to a finish's point when :meth:`FinishSchedule.keep` accepts it; its ``F``, else None."""
        out = _restandardised(out, self.finish, self.X, self.s, self.wstep, self.linear, self.units, self.tol)
        if out is None or (certified_only and not out.certified):
            return None
        F = self.objective(out.coef, out.intercept)
        if not FinishSchedule.keep(F, self.objective(self.w, self.b), out.certified, last):
            return None
        self.w, self.b, self.z, self.t = out.coef, out.intercept, out.t, out.t
        if out.lam is not None:
            self.lam = out.lam
        self.finished = True
        if out.certified:
            self.crit, self.converged = out.residual, True
        return F

    def result(self, n_iter, attempts, start):
        """The :class:`SolverResult` of the run (``attempts``: finish attempts, ``start``: its start time)."""
        self.rebuild_coef()
        if self.history:
            # The recorded value of the returned point, evaluated from (w, b).
            self.history[-1] = self.objective(self.w, self.b)
        return SolverResult(
            coef=self.w,
            intercept=float(self.b),
            n_iter=n_iter,
            objective_history=np.asarray(self.history),
            stop_criterion=float(self.crit),
            converged=self.converged,
            info={
                "z": self.z,
                "lambda": self.lam,
                "rho": self.rho,
                "rho_history": np.asarray(self.rho_history),
                "kkt_history": np.asarray(self.crit_history),
                "inner_iterations": self.inner_total,
                "polish_attempts": attempts,
                "polished": self.finished,
                "time": time.perf_counter() - start,
            },
        )


def admm_loop(X, s, c, wstep, zfun, lam0, objective, schedule, *, linear=None, max_iter=300, tol=1e-6,
              coef_init=None, intercept_init=None, inner_max_iter=500, relaxation=1.0, objective_t=None,
              finish=None, finish_first=100, finish_crit=1e-3, verbose=0):
    """Algorithm 1 on ``min Omega(z) + g(w) - linear.(w, b)`` s.t. ``z = s (X w + b) + c``.

    Shared by :func:`admm` and the DCA solver (whose convex subproblems
    carry the linear term).  ``lam0`` is a callable ``t -> lambda^0``,
    ``objective`` a callable ``(w, b) -> float`` recorded per iteration.
    ``objective_t``, when given, is a callable ``(t, penalty_value) -> float``
    with the same value: it lets an l2 fit without linear term run the exact
    w-step in prediction space (:meth:`WStep.fast_l2`, ``O(n r)`` per
    iteration, two products with an n x r basis and no product with ``X``),
    rebuilding ``(w, b)`` only when the residuals pass and at the end.
    ``finish``, when given, is a
    :class:`skrank.solvers.finish.PiecewiseLinearFinish` (hinge and absolute
    losses) or a :class:`skrank.solvers.finish.NewtonFinish` (smooth ones), tried on a
    :class:`skrank.solvers.finish.FinishSchedule` (after ``finish_first``
    iterations, at every doubling of the iteration count and when the
    residual is below ``finish_crit``); it stops the loop when it certifies
    an exact optimum, and at the end it replaces the last iterate when it
    lowers ``F``.  The stopping rule is that of the user guide.

    Returns
    -------
    SolverResult
    """
    run = _AdmmRun(X, s, c, wstep, linear, objective, objective_t, finish, tol, coef_init, intercept_init,
                   lam0, schedule.rho0)
    schedule_finish = FinishSchedule(finish_first, crit_level=finish_crit)
    progress = Progress("admm", verbose, max_iter, criterion="KKT residual")
    start = time.perf_counter()
    k = 0
    if finish is not None and coef_init is not None and max_iter > 0:
        schedule_finish.attempts += 1
        run.warm_finish()
    for k in range(0 if run.converged else max_iter):
        r_primal, e_primal, e_dual, e_pen = run.step(k, zfun, relaxation, inner_max_iter)
        progress(k + 1, run.history[-1], run.crit, f"primal={e_primal:.2e} dual={e_dual:.2e} "
                 f"pen={e_pen:.2e} rho={run.rho:.3g}")
        if run.crit <= tol:
            run.converged = True
            break
        last = k + 1 == max_iter
        if finish is not None and schedule_finish.due(k + 1, last, run.crit):
            schedule_finish.attempted(k + 1, run.crit)
            if run.finish_attempt(last):
                break
        run.rho = schedule.update(k, run.rho, r_primal, e_primal, e_dual, run.history[-1])
    return run.result(k + 1 if max_iter > 0 else 0, schedule_finish.attempts, start)


@fill_doc
def admm(datafit, penalty, *, max_iter=300, tol=1e-6, rho="paper",
         zstep_method="stack", l1_solver="fista", coef_init=None, intercept_init=None, verbose=0,
         relaxation=1.0, polish=True, refine=True):
    """Minimise a rank-based objective by proximal ADMM with a PAVA z-step.

    Solves ``min_{w, b} sum_i sigma_i l(t)_(i) + penalty(w)`` with
    ``t = s (X w + b) + c`` (:func:`skrank.datafits.rank_risk.affine_map`), for any
    risk of :mod:`skrank.risks` (convex or not) and any loss of
    :mod:`skrank.losses` (Algorithm 1 of Xiao et al. 2023, with ``r = 0``).  The stopping
    rule, the differences from the paper and ``refine`` are described in the user guide,
    :doc:`/rank_admm` and :ref:`methods-admm`.

    Parameters
    ----------
    {datafit}
        Its risk: any risk of :mod:`skrank.risks`; the non-convex ones (ranked range,
        human-aligned) are handled as described under ``refine``.
        Its loss: any loss of :mod:`skrank.losses`; its proximal map enters the z-step.
    penalty : skrank.penalties.Penalty
        The penalty ``l1 ||w||_1 + l2/2 ||w||^2`` (l1, l2, elastic net or
        none), handled by the w-step: in closed form without an l1 part,
        else by ``l1_solver``.
    max_iter : int, default=300
        Maximum number of ADMM iterations (of all the runs together with ``refine``).
    tol : float, default=1e-6
        Stop when the scaled KKT residual ``max(e_primal, e_dual, e_pen)`` is at most ``tol``.
    rho : {"paper", "adaptive"} or float, default="paper"
        Penalty schedule, see :class:`RhoSchedule`.
    zstep_method : {"stack", "sweep"}, default="stack"
        PAVA variant of the z-step: the classic stack PAVA or the paper's
        run-merging sweep (Algorithm 2).
    l1_solver : {"fista", "smoothed"}, default="fista"
        w-step solver when the penalty has an l1 part: FISTA (exact up to a
        tolerance that tightens with the KKT residual) or the smoothed
        variant sADMM (Xiao et al. 2023, section 4), which returns the
        soft-thresholded point and is only approximately stationary.
    coef_init, intercept_init : ndarray of shape (d,), float, default=None
        Starting point (zero by default).
    verbose : int, default=0
        Print one line per iteration when positive.
    relaxation : float, default=1.0
        Over-relaxation factor of the z-block (1: none).
    polish : bool, default=True
        Try the exact finish of :mod:`skrank.solvers.finish` on convex
        spectral risks with at most 200 coefficients: ``F`` solved on the
        face the iterate identifies for the hinge and absolute losses
        (:class:`skrank.solvers.finish.PiecewiseLinearFinish`), the Newton
        method from the iterate for the smooth ones
        (:class:`skrank.solvers.finish.NewtonFinish`).  A certified finish
        ends the run; ``info["polished"]`` says whether one was kept.
    refine : bool, default=True
        Non-convex risks (ranked range, human-aligned) only; convex risks
        ignore it.  Run Algorithm 1 from the start and from the ERM fit,
        with restarts and trimming steps for a ranked range, and return the
        point of lowest ``F`` (user guide); ``max_iter`` bounds all
        the runs together.  ``False`` runs Algorithm 1 once from the start,
        as in the paper.

    Returns
    -------
    SolverResult
        ``stop_criterion`` is the final scaled KKT residual; ``info`` holds
        ``z``, ``lambda``, ``rho``, ``rho_history``, ``kkt_history``, ``inner_iterations``,
        ``polish_attempts``, ``polished`` and ``time`` (with ``refine`` on a non-convex risk:
        ``z``, ``lambda``, ``rho``, ``starts`` with the ``F`` reached from each start,
        ``source`` naming the step that gave the point, and ``time``).
    """
    X, y, risk, loss, fit_intercept = datafit.unweighted("admm")
    with blas_threads(X):
        return _admm(
            X, y, risk, loss, penalty, fit_intercept=fit_intercept, max_iter=max_iter,
            tol=tol, rho=rho, zstep_method=zstep_method, l1_solver=l1_solver,
            coef_init=coef_init, intercept_init=intercept_init, verbose=verbose,
            relaxation=relaxation, polish=polish, refine=refine,
        )


def _admm(
    X, y, risk, loss, penalty, *, fit_intercept, max_iter, tol, rho, zstep_method,
    l1_solver, coef_init, intercept_init, verbose, relaxation, polish, refine=False,
):
    n, d = X.shape
    s, c = affine_map(y, loss.task)
    sigma, sigma_b, threshold = risk_pieces(risk, loss, n)
    zfun = make_zstep(loss, sigma, sigma_b, threshold, zstep_method)
    wstep = WStep(X, penalty, fit_intercept, l1_solver)
    schedule = RhoSchedule(rho, risk, n, d + int(bool(fit_intercept)))

    def objective(w, b):
        return rank_objective(X, y, w, b, risk, loss, penalty)

    # the losses' order changes little per iteration: re-sorted from the last one
    sigma_obj = None if risk.depends_on_values else risk.weights(n)
    obj_order = np.arange(n, dtype=np.int64)

    def objective_t(t, penalty_value):
        if sigma_obj is None:
            return risk.value(loss.value(t)) + penalty_value
        return float(sigma_obj @ resort(loss.value(t), obj_order)) + penalty_value

    # the exact finish: face solves for the hinge and absolute losses, the
    # Newton method from the iterate for the smooth ones
    finisher = None
    if polish and sigma_b is None and d + int(bool(fit_intercept)) <= PiecewiseLinearFinish.max_features:
        if PiecewiseLinearFinish.applies(risk, loss, schedule.framework):
            finisher = PiecewiseLinearFinish(X, s, c, sigma, loss, penalty, fit_intercept)
        elif schedule.framework == "srm" and NewtonFinish.applies(risk, loss, penalty):
            finisher = NewtonFinish(RankRisk(X, y, risk, loss, fit_intercept=fit_intercept), penalty)

    nonconvex = refine and schedule.framework != "srm"

    def run(coef0, intercept0, n_iter=max_iter):
        return admm_loop(
            X,
            s,
            c,
            wstep,
            zfun,
            lambda t: -rank_subgradient(risk, loss, t),
            objective,
            RhoSchedule(rho, risk, n, d + int(bool(fit_intercept))),
            max_iter=n_iter,
            tol=tol,
            coef_init=coef0,
            intercept_init=intercept0,
            relaxation=relaxation,
            objective_t=objective_t,
            finish=finisher,
            finish_first=_finish_first(finisher, loss),
            verbose=verbose,
        )

    if not nonconvex:
        return run(coef_init, intercept_init)

    def convex_fit(X_, y_, risk_, coef0, intercept0, n_iter=max_iter):
        return _admm(
            X_, y_, risk_, loss, penalty, fit_intercept=fit_intercept, max_iter=n_iter,
            tol=tol, rho="paper", zstep_method=zstep_method, l1_solver=l1_solver,
            coef_init=coef0, intercept_init=intercept0, verbose=verbose,
            relaxation=relaxation, polish=polish,
        )

    def kkt(w, b, z, lam, rho_):
        return _kkt_residual(X, s, c, zfun, wstep, w, b, z, lam, rho_)

    return _nonconvex_admm(
        X, y, risk, loss, run, convex_fit, objective, kkt, coef_init, intercept_init,
        max_iter, tol, verbose,
    )


def _finish_first(finisher, loss):
    """Iteration of the first finish attempt.

    The hinge finish's walk costs a step per change of the kink set, but its
    steps are compiled and cheap (tens of microseconds for n = 2000,
    p = 51), so that walking from an early iterate costs less than the ADMM
    iterations that would shorten the walk.
    """
    if isinstance(finisher, PiecewiseLinearFinish) and not loss.even:
        return 50
    return 100


#: Most trimming steps after each ADMM segment (ranked range, ``refine=True``).
MAX_TRIM_STEPS = 20
#: Iterations of one ADMM segment (``refine=True``): Algorithm 1 is restarted
#: from its last iterate after each segment.
SEGMENT = 200


def _kkt_residual(X, s, c, zfun, wstep, w, b, z, lam, rho):
    """Scaled eps-KKT residual (Xiao et al. 2023, Theorem 1) at ``(w, b, z, lambda)``.

    ``max(e_primal, e_dual, e_pen)`` of the user guide, except that the
    dual condition ``-lambda in dOmega(z)`` is tested directly: ``z`` must
    be a fixed point of the z-step at ``z - lambda/rho`` (its optimality
    condition), ``e_dual = sqrt(n) rho ||zstep(z - lambda/rho) - z||``.
    """
    n = z.shape[0]
    t = s * (np.asarray(X @ w).ravel() + b) + c
    e_primal = float(np.linalg.norm(z - t)) / np.sqrt(n)
    e_dual = rho * float(np.linalg.norm(zfun(z - lam / rho, rho) - z)) * np.sqrt(n)
    e_pen = _penalty_residual(X, s, lam, w, wstep, None)
    return max(e_primal, e_dual, e_pen)


def _nonconvex_admm(
    X, y, risk, loss, run, convex_fit, objective, kkt, coef_init, intercept_init, max_iter,
    tol, verbose,
):
    """The ``refine`` strategy of :func:`admm` for the non-convex risks.

    ``run(coef, intercept, n_iter)`` is Algorithm 1 from a start;
    ``convex_fit(X, y, risk, coef, intercept, n_iter)`` the plain ADMM on a
    convex risk; ``kkt(w, b, z, lambda, rho)`` :func:`_kkt_residual`.
    ``max_iter`` bounds the iterations of all the runs together (the
    ERM fit, then half of what is left for the first start and the rest
    for the second), and ``n_iter`` counts them.
    """
    start = time.perf_counter()
    erm = convex_fit(X, y, ERM(), None, None, max_iter)
    n_iter = erm.n_iter
    s, c = affine_map(y, loss.task)
    history, candidates, starts, tried = [], [], {}, set()
    for name, (w, b) in (("start", (coef_init, intercept_init)),
                         ("erm", (erm.coef, erm.intercept))):
        # the first start gets half of the iterations left, the second all that remain
        budget = (max_iter - n_iter + 1) // 2 if name == "start" else max_iter - n_iter
        w = np.zeros(X.shape[1]) if w is None else np.asarray(w, dtype=np.float64)
        b = 0.0 if b is None else float(b)
        t = s * (np.asarray(X @ w).ravel() + b) + c
        # (F, source, w, b, z, lambda, rho, KKT residual or None: to compute);
        # the start itself is a candidate
        cand = [(objective(w, b), name, w, b, t, -rank_subgradient(risk, loss, t), 1.0, None)]
        # ranked range: segments of SEGMENT iterations, each followed by trimming
        segment = SEGMENT if risk.difference_of_top_sums else max(budget, 1)
        while budget > 0:
            res = run(w, b, min(segment, budget))
            n_iter += res.n_iter
            budget -= res.n_iter
            history.extend(res.objective_history)
            w, b, info = res.coef, res.intercept, res.info
            cand.append((res.objective, f"admm from {name}", w, b, info["z"], info["lambda"],
                         info["rho"], res.stop_criterion if res.converged else None))
            if risk.difference_of_top_sums and budget > 0:
                # trimming steps from this point, once per top-m set
                top = _top_set(loss.value(s * (np.asarray(X @ w).ravel() + b) + c), risk)
                if top not in tried:
                    tried.add(top)
                    steps, its = _trim_steps(X, y, risk, loss, w, b, res.objective, convex_fit,
                                             objective, budget)
                    n_iter += its
                    budget -= its
                    history.extend(st[0] for st in steps)
                    cand += [(st[0], f"trimming after admm from {name}") + st[1:] + (None,)
                             for st in steps]
            if res.converged or res.n_iter == 0:
                break
        starts[name] = min(c_[0] for c_ in cand)
        candidates += cand
        Progress("admm", verbose).note(f"non-convex: from {name}, F = {starts[name]:.10g}")
    F, source, w, b, z, lam, rho, crit = min(candidates, key=lambda c_: c_[0])
    if crit is None:
        # A z-step with rho < 1 can jump to a distant minimiser of the
        # non-convex Omega, which says nothing about stationarity at z (z in
        # margin units, lambda in units of 1/n; a fixed point at rho is one at
        # any larger rho).
        rho = max(rho, 1.0)
        crit = kkt(w, b, z, lam, rho)
    history.append(F)
    return SolverResult(
        coef=w,
        intercept=float(b),
        n_iter=n_iter,
        objective_history=np.asarray(history),
        stop_criterion=float(crit),
        converged=bool(crit <= tol),
        info={"z": z, "lambda": lam, "rho": rho, "starts": starts, "source": source,
              "time": time.perf_counter() - start},
    )


def _top_set(losses, risk):
    """Indices of the ``m`` largest losses of a ranked range (ties by index)."""
    m, _ = risk.counts(losses.shape[0])
    return tuple(np.sort(np.argsort(losses, kind="stable")[losses.shape[0] - m :]))


def _trim_steps(X, y, risk, loss, w, b, F, convex_fit, objective, budget):
    """Trimming (majorise-minimise) steps for a ranked range from ``(w, b)``.

    Returns the list of accepted steps ``(F, w, b, z, lambda, rho)``, with
    ``z`` and ``lambda`` extended to all samples (``z = t``, ``lambda = 0``
    on the trimmed ones), and the ADMM iterations spent, at most ``budget``.
    """
    n = X.shape[0]
    m, k = risk.counts(n)
    s, c = affine_map(y, loss.task)
    sub = TopK(k - m)  # weights 1/(k-m) on the k-m largest of n-m losses
    steps, n_iter, keep_old = [], 0, None
    for _ in range(MAX_TRIM_STEPS):
        if n_iter >= budget:
            break
        t = s * (np.asarray(X @ w).ravel() + b) + c
        keep = np.sort(np.argsort(loss.value(t), kind="stable")[: n - m])
        if keep_old is not None and np.array_equal(keep, keep_old):
            break
        keep_old = keep
        res = convex_fit(X[keep], y[keep], sub, w, b, budget - n_iter)
        n_iter += res.n_iter
        F_new = objective(res.coef, res.intercept)
        if not F_new < F:
            break
        w, b, F = res.coef, res.intercept, F_new
        z, lam = s * (np.asarray(X @ w).ravel() + b) + c, np.zeros(n)
        z[keep], lam[keep] = res.info["z"], res.info["lambda"]
        steps.append((F, w, b, z, lam, res.info["rho"]))
    return steps, n_iter
