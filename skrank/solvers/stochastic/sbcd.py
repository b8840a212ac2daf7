"""AGD-SBCD for the partial AUC over a false-positive-rate range.

Yao, Lin and Yang, "Large-scale Optimization of Partial AUC in a Range of
False Positive Rates" (NeurIPS 2022), Algorithms 1 and 2, for a linear
score.  The method, its units and the decisions where the paper is silent
or wrong are described in the user guide, :ref:`methods-agd-sbcd`.
"""

import time

import numpy as np
import scipy.sparse as sp

from .outer_loop import OuterLoop
from .sampling import state_from_random_state
from .sbcd_kernel import sbcd_steps


class PairSampler:
    """Dense class blocks, generator and permutations for the SBCD kernel.

    Parameters
    ----------
    objective : skrank.datafits.partial_auc.PartialAUCObjective
    batch_size : int
        Positives and negatives per block.
    random_state : int, RandomState, Generator or None
    """

    def __init__(self, objective, batch_size, random_state):
        def dense(A):
            A = A.toarray() if sp.issparse(A) else A
            return np.ascontiguousarray(A, dtype=np.float64)

        self.Xp = dense(objective.X_pos)
        self.Xn = dense(objective.X_neg)
        self.state = state_from_random_state(random_state)
        self.perm_pos = np.arange(self.Xp.shape[0], dtype=np.int64)
        self.perm_neg = np.arange(self.Xn.shape[0], dtype=np.int64)
        self.batch = int(batch_size)
        self.loss, self.objective = objective.loss, objective
        self.n_pos, self.n_neg = self.Xp.shape[0], self.Xn.shape[0]
        self.points_touched = 0
        # smoothness of one pair term, on average over pairs:
        # loss'' * mean ||x_i - x_j||^2 = loss'' * (E||x+||^2 + E||x-||^2 - 2 mu+.mu-).
        # No absolute floor: it scales like X^2, so that X * s (alpha * s^2) runs the same steps
        mean_sq = (np.einsum("ij,ij->", self.Xp, self.Xp) / self.n_pos
                   + np.einsum("ij,ij->", self.Xn, self.Xn) / self.n_neg
                   - 2.0 * float(self.Xp.mean(axis=0) @ self.Xn.mean(axis=0)))
        smoothness = self.loss.smoothness * mean_sq
        self.smoothness = float(smoothness) if np.isfinite(smoothness) and smoothness > 0 else 1.0
        self.full_passes = 0

    def default_start(self):
        """``w = delta / ||delta||^2``, ``delta`` the difference of the class means.

        The mean positive score then exceeds the mean negative score by one;
        ``w = 0`` would tie every score, and every pairwise loss.  Equal
        class means (``delta = 0``) start at ``w = 0``.
        """
        delta = self.Xp.mean(axis=0) - self.Xn.mean(axis=0)
        norm2 = float(delta @ delta)
        return delta / norm2 if norm2 > 0 else delta

    def run(self, v, center, xi, lam, level_frac, n_steps, eta, theta, prox, reg, average):
        """``n_steps`` kernel steps; see :func:`skrank.solvers.stochastic.sbcd_kernel.sbcd_steps`."""
        loss = self.loss
        out = sbcd_steps(
            self.Xp, self.Xn, v, center, xi, lam, float(level_frac), int(n_steps), float(eta),
            float(theta), float(prox), float(reg), self.batch, self.batch, loss.code, loss.shift,
            loss.scale, loss.is_monotone, self.state, self.perm_pos, self.perm_neg, bool(average), 0.0,
            loss.exp_factored,
        )
        self.points_touched += n_steps * (min(self.batch, self.n_pos) + min(self.batch, self.n_neg))
        return out

    @property
    def passes(self):
        """Data points touched divided by ``N+ + N-`` (our count of an epoch; the paper does
        not define it).

        The kernel's rows plus one per full pass counted in ``full_passes``
        (exact objective values, thresholds, full subgradients).
        """
        return self.points_touched / (self.n_pos + self.n_neg) + self.full_passes

    def value(self, w):
        """The exact objective at ``w`` (one full pass)."""
        self.full_passes += 1
        return self.objective.value(w)

    def initial_thresholds(self, w, level):
        """``lambda_i = loss(h_i - q_(ceil(l)))`` at ``w`` (one pass)."""
        self.full_passes += 1
        h_pos, h_neg = self.Xp @ w, self.Xn @ w
        k = min(max(int(np.ceil(level)), 1), self.n_neg)
        tau = np.partition(h_neg, self.n_neg - k)[self.n_neg - k]
        return np.maximum(self.loss.value(h_pos - tau), 0.0)


def inner_schedule(k, inner_iter0, step, L):
    """``(T, eta, theta)`` of outer iteration ``k``: ``T0 (k+1)^2``, ``c / ((k+1) L)``, ``c / (k+1)``."""
    return int(inner_iter0 * (k + 1) ** 2), step / ((k + 1) * L), step / (k + 1)


def agd_sbcd(datafit, penalty, *, coef_init=None, max_iter=10, tol=1e-4, batch_size=64, mu=30.0, gamma=60.0,
             step=1.0, inner_iter0=50, random_state=None, verbose=0):
    """Minimise the partial-AUC objective by AGD with SBCD inner loops.

    Parameters
    ----------
    datafit : skrank.datafits.partial_auc.PartialAUCObjective
        The objective on the training set: its two classes, loss, FPR range
        and l2 strength.
    penalty : skrank.penalties.Penalty
        The l2 penalty that ``datafit`` holds: ``penalty.l2`` is its ``alpha``.
    coef_init : ndarray of shape (d,), default=None
        Starting point ``w^(0)``; None starts from the class-mean
        difference ``delta / ||delta||^2`` (:meth:`PairSampler.default_start`).
    max_iter : int, default=10
        Outer iterations ``K``; the inner loops of iteration ``k`` take
        ``inner_iter0 (k+1)^2`` steps each, ``2 * 50 * 385 = 38,500`` steps
        in all for the defaults.
    tol : float, default=1e-4
        Stop when the exact ``F`` changes by at most ``tol * max(1, |F|)``
        over an outer iteration.
    batch_size : int, default=64
        Positives and negatives per block (``I = J``).
    mu, gamma : float, default=30, 60
        ``mu~`` and ``gamma~`` in normalised units, in units of ``1 / L``
        (the pair smoothness; user guide).
    step : float, default=1.0
        ``c`` of the step sizes ``eta~ = c / ((k+1) L)`` (primal) and
        ``theta~ = c / (k+1)`` (dual, in loss units).
    inner_iter0 : int, default=50
        ``T0`` of ``T_k = T0 (k+1)^2``.
    random_state : int, RandomState, Generator or None, default=None
        Seed of the in-kernel generator (the blocks and permutations).
    verbose : int, default=0
        Print one line per outer iteration (and one per restart from the
        best iterate) when positive.

    Returns
    -------
    SolverResult
        ``coef`` is the outer iterate of lowest exact ``F`` (usually the
        last, ``w^(K)``).  ``objective_history`` has the exact ``F`` at
        ``w^(0)`` and after each outer iteration, then at the returned
        point; ``stop_criterion`` is the last relative change
        ``|F_k - F_{k+1}| / max(1, |F_{k+1}|)``.  ``info`` has ``passes``
        (points touched / ``(N+ + N-)``: the sampled rows plus one pass per
        exact ``F`` and per threshold initialisation), ``time`` and
        ``gamma`` (the final ``gamma``, below the input when the safeguard
        fired).
    """
    datafit.check_unweighted("agd-sbcd")
    start = time.perf_counter()
    sampler = PairSampler(datafit, batch_size, random_state)
    low, high = datafit.fpr_range
    L = sampler.smoothness
    w = sampler.default_start() if coef_init is None else np.array(coef_init, dtype=np.float64)
    zeros = np.zeros_like(w)
    lam = _initial_thresholds(sampler, datafit, w)
    mu, gamma = mu / L, gamma / L
    F_start = sampler.value(w)
    loop = OuterLoop(w, F_start, tol, verbose, "agd-sbcd")
    for k in range(max_iter):
        T, eta, theta = inner_schedule(k, inner_iter0, step, L)
        # the SBCD estimates of prox_{mu phi^l}(w) at the levels n and m (the m-call only when low > 0)
        v = {}
        for level in (high, low) if low > 0 else (high,):
            v[level], lam[level], _ = sampler.run(w.copy(), w, zeros, lam[level], level, T, eta, theta,
                                                  1.0 / mu, 0.0, True)
        # a proximal gradient step on the smoothed (phi^n - phi^m) + width R (user guide)
        w = (w - gamma * (v.get(low, w) - v[high]) / mu) / (1.0 + gamma * (high - low) * penalty.l2)
        F = sampler.value(w)
        stop = loop.step(w, F, f"inner {T:6d}")
        if not F <= F_start:
            # the safeguard: back to the best iterate, gamma halved and the thresholds reset there
            gamma *= 0.5
            w = loop.restart_from_best()
            loop.converged = False
            lam = _initial_thresholds(sampler, datafit, w)
            loop.progress.note(f"F rose above its start: back to the best iterate, "
                               f"gamma halved to {gamma * L:.4g}")
            continue
        if stop:
            break
    return loop.result({"gamma": gamma * L, "passes": sampler.passes, "time": time.perf_counter() - start})


def _initial_thresholds(sampler, datafit, w):
    """The thresholds ``lambda`` of the levels ``n`` and, when ``m > 0``, ``m``, at ``w``."""
    alpha_fpr, beta_fpr = datafit.fpr_range
    lam = {beta_fpr: sampler.initial_thresholds(w, datafit.n)}
    if datafit.m > 0:
        lam[alpha_fpr] = sampler.initial_thresholds(w, datafit.m)
    return lam
