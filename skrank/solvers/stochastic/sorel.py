"""SOREL: stochastic optimisation of spectral risks.

Ge and Jiang, "SOREL: A Stochastic Algorithm for Spectral Risks
Minimization" (2024), the practical version of Algorithm 1: one dual step
per epoch and a proximal SVRG inner loop, run by the compiled epochs of
:mod:`skrank.solvers.stochastic.sorel_kernel`, with automatic steps and an
exact finish.  The method is described in the user guide,
:ref:`methods-sorel`; the paper's own schedules are :func:`sorel_paper`.
"""

import time

import numpy as np

from ..finish import FinishSchedule, NewtonFinish
from ..progress import Progress
from ..result import SolverResult
from .docs import fill_doc
from .epochs import StandardisedStart
from .sampling import make_rng, seed_state
from .sorel_kernel import sorel_epochs
from .sorel_paper import sorel_paper
from .steps import sample_smoothness, svrg_step_size
from .svrg import loss_arguments_dense
from .weights import rank_weights

__all__ = ["dual_smoothness", "sorel", "sorel_dual_scale", "sorel_paper"]

# the primal curvature used by the dual step cap is refreshed at k = 2^j - 1 and every 16 epochs
_H_PERIOD = 16
_CHUNK_SECONDS = 2e-3  # target length of one kernel call (several epochs)
# Multiple of svrg_step_size's 1 / (3 (Lbar / B + Lbar)) for the automatic
# importance-sampled primal step (still below SVRG's 1 / (4 Lbar / 3) bound
# for B = 1).  Against the paper's C x lr grid (benchmarks/spectral_risk.py
# --paper-grid) 1.75 reaches 1e-8 within 100 passes on the same 11 of the 15
# Figure 2 settings as the tuned grid, for seeds 0, 1 and 2; 1.0 leaves energy
# ESRM/extremile at ~150 passes, 2.0 loses power CVaR.
_LR_IMPORTANCE_FACTOR = 1.75
# The exact finish (see the user guide) counts as optimal when the Newton method
# certifies a relative gap below _FINISH_TOL.
_FINISH_FIRST = 16  # also tried after 16 epochs, then every _FINISH_GROWTH-fold epochs
_FINISH_GROWTH = 2.0
_FINISH_COST = 1  # the least budget of an attempt, in passes per coefficient
_FINISH_TOL = 1e-8


def dual_smoothness(X, s, t, lam, loss, curvature, fit_intercept):
    """Lipschitz constant of the dual function's gradient at the current point (all samples).

    With the primal step solved exactly, the dual step is a gradient step on
    ``phi(lam) = min_w lam^T l(w) + g(w) + ||w - w_k||^2 / (2 tau)``, whose
    gradient ``l(w(lam))`` has Lipschitz constant ``||J H^{-1} J^T||`` with
    ``J = diag(s l'(t)) [X 1]`` and ``H = [X 1]^T diag(lam l''(t)) [X 1] + curvature I``
    (intercept: no ``curvature``).  Returned as the largest generalised
    eigenvalue of ``(J^T J, H)``, a ``(d+1) x (d+1)`` problem.  The solver
    uses the cheaper restriction of this constant to the current face of the
    permutahedron (:func:`skrank.solvers.stochastic.sorel_kernel._face_smoothness`);
    this global one is an upper bound kept for diagnostics.
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
    """Automatic dual scale ``C`` of SOREL: the first dual step is ``eta_0 = C mu``.

    ``C`` plays the role of ``1/(8 G^2)`` in the theory (Ge and Jiang 2024, Theorem 1)
    and must scale like the inverse of the losses for the dual step
    ``lam + eta v`` to be invariant to the scale of the targets.  We use the
    gap between the risk and the smallest loss at the starting point,
    ``C = 0.4 / (R_sigma(l) - min_i l_i)``: about 0.4 to 0.5 on standardised
    targets, the upper end of the paper's stable grid values.
    """
    spread = float(np.sort(losses) @ sigma - losses.min())
    return 0.4 / max(spread, 1e-12)


@fill_doc
def sorel(datafit, penalty, *, max_iter=200, tol=1e-9, batch_size=1,
          learning_rate="auto", dual_scale="auto", tau_scale=20.0, dual_growth=2.0, dual_safety=0.5,
          random_state=None, coef_init=None, intercept_init=None, verbose=0, sampling="importance",
          polish=True):
    """Minimise ``sum_i sigma_i l_(i) + penalty`` for a spectral risk with SOREL.

    Parameters
    ----------
    {datafit}
        Its risk: a spectral risk (nondecreasing weights).
        Its loss: a smooth loss (SOREL's theory needs Lipschitz gradients).
    penalty : skrank.penalties.Penalty
        Must have ``l2 > 0`` (the strong convexity ``mu``); an l1 part is
        handled by its prox.
    max_iter : int, default=200
        Outer iterations (one dual update and about one pass each).
    tol : float, default=1e-9
        Stop when the stopping criterion (user guide) falls below ``tol``.
    batch_size : int, default=1
        Samples per stochastic step; ``ceil(n / batch_size)`` steps per epoch.
    learning_rate : "auto" or float, default="auto"
        Primal step; "auto" is :func:`skrank.solvers.stochastic.steps.svrg_step_size`
        {scale_free}  One smaller than the automatic step divides the criterion
        by their ratio (a step too small to move the iterate must not pass for convergence).
    dual_scale : "auto" or float, default="auto"
        ``C`` of the dual step.  "auto": ``C`` from :func:`sorel_dual_scale`
        sets the first step ``eta_0 = C mu``, which then grows by
        ``dual_growth`` per epoch up to the face cap (user guide).  A float
        gives the paper's schedule ``eta_k = C mu (k + 1)``, also capped.
    tau_scale : float, default=20.0
        Primal proximal parameter ``tau_k = tau_scale / (mu (k + 1))``
        (the paper's ``20 n / (k + 1)`` for ``mu = 1/n``).
    dual_growth : float, default=2.0
        Growth factor of the automatic dual step per epoch.
    dual_safety : float, default=0.5
        The dual step is at most ``dual_safety / L_F`` (user guide).
    {seed_start_verbose}
    sampling : {"importance", "uniform"}, default="importance"
        How the inner loop draws samples: with probability proportional to
        ``lam_i L_i`` (the dual weight times the sample's smoothness, the
        unbiased importance-sampled SVRG estimator ``(lam_i / p_i)``, which
        never touches samples of zero weight) or uniformly as in the paper.
    polish : bool, default=True
        Try the exact finish of :class:`skrank.solvers.finish.NewtonFinish`
        (problems the Newton method fits, at most
        ``NewtonFinish.max_features`` coefficients; user guide).

    Returns
    -------
    SolverResult
        ``info`` holds ``lambda`` (final dual weights), ``times`` (cumulative
        seconds after each epoch, a kernel call's time split evenly over its
        epochs), ``passes`` (cumulative sample evaluations / n, our convention),
        ``learning_rate``, ``dual_scale``, ``dual_steps`` (``eta_k``) and ``criterion_history``.
    """
    X, y, risk, loss, fit_intercept = datafit.unweighted("sorel")
    rng = make_rng(random_state)
    if sampling not in ("importance", "uniform"):
        raise ValueError(f"sampling must be 'importance' or 'uniform', got {sampling!r}.")
    data = StandardisedStart(X, y, loss, fit_intercept, learning_rate, batch_size, coef_init, intercept_init,
                             per_feature=False)
    sigma = np.ascontiguousarray(risk.weights(data.X.shape[0]), dtype=np.float64)
    lr, fraction = _primal_step(data, loss, sigma, sampling)
    t = loss_arguments_dense(data.X, data.s, data.c, data.w, data.b[0], np.empty(data.X.shape[0]))
    losses = loss.value(t)
    auto_dual = isinstance(dual_scale, str)
    C = sorel_dual_scale(losses, sigma) if auto_dual else float(dual_scale)
    ipar = np.array([1, data.batch, int(bool(fit_intercept)), int(sampling == "importance"),
                     int(auto_dual), _H_PERIOD, int(bool(np.all(data.s == 1.0)))], dtype=np.int64)
    fpar = np.array([lr, *_penalty_strengths(data.units, penalty), float(tau_scale), float(tol) * fraction, C,
                     float(dual_growth), float(dual_safety)])
    run = _SorelRun(data, sigma, loss, t, losses, rank_weights(risk, losses), ipar, fpar,
                    risk.value(losses) + penalty.value(data.w0), seed_state(rng), max_iter)
    newton = polish and run.p <= NewtonFinish.max_features and NewtonFinish.applies(risk, loss, penalty)
    finisher = NewtonFinish(datafit, penalty) if newton else None
    done, finished = _run_epochs(run, finisher, data.units, max_iter, verbose)
    return run.result(done, finisher, finished, data.units, fraction, lr, C)


def _penalty_strengths(units, penalty):
    """``(l1, mu)``: the penalty's strengths in SOREL's units (one unit for every column)."""
    l1_units, l2_units = units.penalty(penalty)
    d = units.unit.shape[0]
    l1 = float(l1_units[0]) if d else float(penalty.l1)
    mu = float(l2_units[0]) if d else float(penalty.l2)
    return l1, mu


def _primal_step(data, loss, sigma, sampling):
    """``(lr, fraction)``: SOREL's primal step and its ratio to the automatic one (at most 1)."""

    def auto_step(sq):
        step = svrg_step_size(sample_smoothness(loss, sq), sigma, data.batch, sampling)
        return step * _LR_IMPORTANCE_FACTOR if sampling == "importance" else step

    lr, fraction = data.step(auto_step)
    return lr, min(fraction, 1.0)


class _SorelRun:
    """The arrays :func:`sorel_epochs` works in, and the histories of a SOREL run.

    ``data`` is the :class:`StandardisedStart` (its ``w`` and ``b`` are
    updated in place); ``ipar`` and ``fpar`` are the kernel's integer and
    float parameters; ``obj0`` is ``F`` at the start and ``rng_state`` the
    generator's state.
    """

    def __init__(self, data, sigma, loss, t, losses, lam, ipar, fpar, obj0, rng_state, max_iter):
        X = data.X
        n, d = X.shape
        batch_size = int(ipar[1])
        self.p = d + int(ipar[2])
        self.X, self.s, self.c, self.sigma, self.loss = X, data.s, data.c, sigma, loss
        self.smooth = np.ascontiguousarray(sample_smoothness(loss, data.sqnorms))
        self.w, self.b, self.t, self.losses, self.lam = data.w, data.b, t, losses, lam
        self.losses_prev = losses.copy()
        self.perm_l = np.argsort(losses, kind="stable")
        self.perm_z = self.perm_l.copy()
        self.ipar, self.fpar, self.rng_state = ipar, fpar, rng_state
        C, mu = fpar[5], fpar[2]
        self.state = np.array([0.0, C * mu, np.inf, 0.0, obj0, 0.0, -1.0, 0.0])
        self.hist = np.full(max_iter + 1, np.nan)
        self.hist[0] = obj0
        self.crits, self.etas = np.full(max_iter, np.nan), np.full(max_iter, np.nan)
        self.times = np.zeros(max_iter + 1)
        #: one full pass + one per sample drawn
        self.per_epoch_passes = 1.0 + -(-n // batch_size) * batch_size / n
        p = self.p
        self.scratch = dict(
            H=np.zeros((p, p)), work_n=np.empty(n), work_n2=np.empty(n),
            gref=np.empty(n), mult=np.empty(n), prob=np.empty(n), packed=np.empty(n, dtype=np.int64),
            small=np.empty(n, dtype=np.int64), large=np.empty(n, dtype=np.int64),
            idx=np.empty(batch_size, dtype=np.int64), gbar=np.empty(d), cst=np.empty(d),
            y_work=np.empty(p), M=np.empty((p, p)), A=np.empty((p, p)), dlam=np.zeros(n),
            z_sorted=np.empty(n), pav_wy=np.empty(n), pav_end=np.empty(n, dtype=np.int64),
            rows=np.empty((n, p)),
        )

    @property
    def running(self):
        """Whether the kernel has neither converged nor diverged."""
        return self.state[5] == 0.0

    def epochs(self, count):
        """Run up to ``count`` epochs in one kernel call; returns ``(epochs run, seconds)``."""
        self.ipar[0] = count
        start = time.perf_counter()
        ran = sorel_epochs(
            self.X, self.s, self.c, self.sigma, self.smooth, self.loss.code, self.loss.param, self.w, self.b,
            self.t, self.losses, self.losses_prev, self.lam, self.perm_z, self.perm_l, self.ipar, self.fpar,
            self.state, self.rng_state, self.hist, self.crits, self.etas, **self.scratch,
        )
        return ran, time.perf_counter() - start

    def result(self, k, finisher, finished, units, fraction, lr, C):
        """The :class:`SolverResult` after ``k`` epochs (see :func:`sorel`)."""
        n = self.X.shape[0]
        passes = self.per_epoch_passes * np.arange(k + 1, dtype=np.float64)
        if finisher is not None and k > 0:
            passes[k] += finisher.work / (2 * n * self.p)  # one pass: n sample gradients, 2 n p multiply-adds
        crits = self.crits
        if fraction < 1.0:
            crits[:k] = crits[:k] / fraction if fraction > 0 else np.where(crits[:k] == 0.0, 0.0, np.inf)
        coef, intercept = units.to_original(self.w, self.b[0])
        return SolverResult(
            coef=coef,
            intercept=intercept if bool(self.ipar[2]) else 0.0,
            n_iter=k,
            objective_history=self.hist[: k + 1].copy(),
            stop_criterion=float(crits[k - 1]) if k > 0 else np.inf,
            converged=bool(self.state[5] == 1.0),
            info={
                "lambda": self.lam,
                "times": self.times[: k + 1].copy(),
                "passes": passes,
                "polished": finished,
                "learning_rate": lr,
                "dual_scale": C,
                "dual_steps": self.etas[:k].copy(),
                "criterion_history": crits[:k].copy(),
            },
        )


def _run_epochs(run, finisher, units, max_iter, verbose):
    """SOREL's epochs in kernel calls of about ``_CHUNK_SECONDS``, with the finish attempts.

    Returns the number of epochs run and whether a finish attempt ended the run.
    """
    # Ties hold at the optimum where sigma is flat next to a jump (CVaR, top-k):
    # there the dual is slow and the finish pays off before the end.
    steps_sigma = np.diff(run.sigma)
    early_finish = bool(np.any(steps_sigma <= 1e-12 * run.sigma[-1]) and np.any(steps_sigma > 0))
    schedule = FinishSchedule(_FINISH_FIRST if early_finish else None, _FINISH_GROWTH)
    elapsed, done, chunk, finished = 0.0, 0, 1, False
    progress = Progress("sorel", verbose, max_iter, unit="epoch")
    while done < max_iter and run.running:
        count = min(chunk, max_iter - done)
        if finisher is not None and done < schedule.next < np.inf:
            count = int(min(count, schedule.next - done))  # stop at the next attempt
        ran, seconds = run.epochs(count)
        run.times[done + 1: done + ran + 1] = elapsed + seconds * np.arange(1, ran + 1) / ran
        elapsed += seconds
        for k in range(done, done + ran):
            progress(k + 1, run.hist[k + 1], run.crits[k], f"dual step={run.etas[k]:.3g}")
        done += ran
        # aim at ~2 ms per call: Python's overhead stays negligible, times stay fine-grained
        per_epoch = seconds / max(ran, 1)
        chunk = 1 if verbose > 1 else int(min(max(1, _CHUNK_SECONDS / max(per_epoch, 1e-9)), 2 * chunk, 1024))
        if finisher is not None and run.running:
            seconds, finished = _attempt_finish(run, finisher, units, schedule, done, max_iter)
            if seconds is not None:
                elapsed += seconds
                run.times[done] = elapsed
    return done, finished


def _attempt_finish(run, finisher, units, schedule, done, max_iter):
    """Try the exact finish after ``done`` epochs when it is due and affordable.

    Attempts come at the end, and after 16 epochs and every doubling (see
    the user guide); their work stays below half of SOREL's own: an
    attempt may spend what is left of that budget, and starts only when it
    is at least ``_FINISH_COST p`` passes.  Returns ``(seconds, finished)``
    (``seconds`` None without an attempt).
    """
    n, p = run.X.shape[0], run.p
    budget = 0.5 * run.per_epoch_passes * done - finisher.work / (2 * n * p)
    if not (budget >= _FINISH_COST * p and schedule.due(done, done >= max_iter)):
        return None, False
    schedule.attempted(done)
    start = time.perf_counter()
    kept, finished = _try_finish(finisher, units, run.w, run.b, run.hist[done],
                                 done >= max_iter, max_work=budget * 2 * n * p)
    seconds = time.perf_counter() - start
    if kept:
        run.hist[done] = finisher.objective(*units.to_original(run.w, run.b[0]))
    if finished:
        run.state[5] = 1.0
        run.crits[done - 1] = 0.0
    return seconds, finished


def _try_finish(finisher, units, w, b, objective, last, max_work=None):
    """Run ``finisher.from_iterate`` at ``(w, b)``; on success overwrite ``w``, ``b``.

    ``(w, b)`` are in the units of ``units`` (a
    :class:`skrank.solvers.stochastic.units.FeatureUnits`), the finisher's in those
    of ``X``.  A certified point is kept when it does not raise ``F``; at
    the last epoch (``last``) an uncertified one is kept when it lowers
    ``F``.  ``max_work`` caps the attempt's multiply-adds.  Returns
    ``(kept, certified)``.
    """
    w_o, b_o = units.to_original(w, b[0])
    out = finisher.from_iterate(None, w_o, b_o, _FINISH_TOL, max_work=max_work)
    if out is None:
        return False, False
    w_p, b_p, certified = out.coef, out.intercept, bool(out.certified)
    if FinishSchedule.keep(finisher.objective(w_p, b_p), objective, certified, last):
        w[:], b[0] = units.to_internal(w_p, b_p)
        return True, certified
    return False, False

