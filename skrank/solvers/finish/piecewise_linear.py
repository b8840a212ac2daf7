"""The exact finish of the ADMM for the hinge and absolute losses: ``F`` solved on the face of an iterate.

Used by the ADMM (:mod:`skrank.solvers.splitting.admm`), whose z-step puts ``z`` exactly
on the tie structure of the solution.  (Smooth losses are finished by the
Newton method, :mod:`skrank.solvers.finish.newton`.)
"""

from typing import NamedTuple

import numpy as np
import scipy.linalg

from . import FinishResult
from ._constants import (
    AT_KINK,
    BOX_ROUNDS,
    FLAT,
    MAX_FEATURES,
    MAX_ROUNDS,
    NUDGE,
    RANK,
    ROUNDS_ABORT,
    ROUNDS_PROGRESS,
    ROUNDS_STALL,
)
from ._faces import TieBlocks, project_onto_face
from .walk import walk_face


class _FaceRows(NamedTuple):
    """The linear algebra of a face read from ``z``."""

    beta: np.ndarray  # per sample: the sign of its loss argument (even losses), else 1
    omega: np.ndarray  # per sample: the mean rank weight of its block (0 for zero losses)
    tie_i: np.ndarray  # the tie constraints beta_i t_i = beta_r t_r ...
    tie_r: np.ndarray  # ... with their representatives
    kinks: np.ndarray  # the samples held at the kink
    free_w: np.ndarray  # the free coefficients
    A: np.ndarray  # s [X[:, free_w], 1]
    E: np.ndarray  # the constraints E x = e: tie rows, then kink rows
    e: np.ndarray


class PiecewiseLinearFinish:
    """Exact finish for convex spectral risks of the hinge and absolute losses.

    Parameters
    ----------
    X : {ndarray, sparse matrix} of shape (n, d)
        Features.
    s, c : ndarray of shape (n,)
        The affine map of the loss arguments, ``t = s (X w + b) + c``
        (:func:`skrank.datafits.rank_risk.affine_map`).
    sigma : ndarray of shape (n,)
        The ascending rank weights of the risk.
    loss : skrank.losses.Loss
        The hinge or the absolute loss.
    penalty : skrank.penalties.Penalty
        The penalty (l1, l2, elastic net or none).
    fit_intercept : bool
        Whether the model has an intercept.

    Attributes
    ----------
    walk_out_of_steps : bool
        Whether the last walk stopped for want of steps.

    Notes
    -----
    The face, the certificate, the active-set rounds and the walk are
    described in the user guide, :ref:`methods-piecewise-linear-finish`.
    """

    #: Most coefficients (features plus intercept) for which the finish is set up.
    max_features = MAX_FEATURES

    def __init__(self, X, s, c, sigma, loss, penalty, fit_intercept):
        self.X, self.s, self.c = X, s, c
        self.sigma = np.asarray(sigma, dtype=np.float64)
        self.loss, self.penalty = loss, penalty
        self.fit_intercept = bool(fit_intercept)
        self.kink = loss.kink
        self.even = loss.even
        self._A, self._A_key = None, None
        self._sigma_cum = np.cumsum(np.sort(self.sigma)[::-1])
        self._sigma_total = float(np.cumsum(np.sort(self.sigma))[-1])
        self.walk_out_of_steps = False

    @staticmethod
    def applies(risk, loss, framework):
        """Whether the finish handles the problem.

        Parameters
        ----------
        risk : skrank.risks.BaseRisk
            The risk.
        loss : skrank.losses.Loss
            The loss.
        framework : str
            The ADMM's framework of the risk (``"srm"`` for spectral risks).

        Returns
        -------
        bool
            True for a convex spectral risk of a loss with two linear pieces
            (hinge, absolute); the smooth losses are finished by the Newton
            method (:mod:`skrank.solvers.finish.newton`).
        """
        return framework == "srm" and len(loss.slopes) == 2 and risk.is_convex

    def objective(self, w, b):
        """``F(w, b)``."""
        f = np.asarray(self.X @ w).ravel() + b
        return self._omega(self.s * f + self.c) + self.penalty.value(w)

    def __call__(self, z, w, tol, b=0.0, u=None, rounds=None):
        """The finish of the face read from ``z``: a :class:`FinishResult` or None.

        With the hinge loss the face found by the active-set walk
        (:func:`.walk.walk_face`) is tried first; when it does not certify,
        the active-set rounds (:meth:`_rounds`) start from ``z``, and when
        they do not either, the walk runs with the tie blocks released
        (unless the first walk ran out of steps: an early iterate).  The
        absolute loss has the rounds only.  The best point by ``F`` is
        returned.

        Parameters
        ----------
        z : ndarray of shape (n,)
            The loss arguments whose kink points and tie blocks give the face.
        w : ndarray of shape (d,)
            The current coefficients.
        tol : float
            The certificate's tolerance.
        b : float, default=0.0
            The current intercept.
        u : ndarray of shape (n,) or None, default=None
            An estimate of the loss weights ``dOmega/dt`` (the ADMM's z-step
            gives one).
        rounds : int or None, default=None
            Most rounds (None: :data:`_constants.MAX_ROUNDS`).

        Returns
        -------
        FinishResult or None
        """
        best = None
        self.walk_out_of_steps = False
        if not self.even:  # the walk handles the monotone loss (hinge)
            best = self._walked(z, w, b, u, tol, False, best)
            if best is not None and best[1].certified:
                return best[1]
        best = self._rounds(z, w, tol, b, u, rounds, best)
        if not self.even and not self.walk_out_of_steps and (best is None or not best[1].certified):
            best = self._walked(z, w, b, u, tol, True, best)
        return None if best is None else best[1]

    def snap(self, t, rel=RANK):
        """``t`` with near-ties made exact: a face for :meth:`__call__` read from a point.

        Loss arguments within ``rel`` (relative to the largest magnitude) of
        the kink are put on it, and runs of sorted losses whose consecutive
        gaps are within ``rel`` get their block's mean argument (mean
        magnitude, signs kept, for the even losses).  Used on a warm start,
        whose point may be an optimum found before.

        Parameters
        ----------
        t : ndarray of shape (n,)
            Loss arguments.
        rel : float, default=RANK
            The relative tolerance.

        Returns
        -------
        ndarray of shape (n,)
        """
        t = np.array(t, dtype=np.float64)
        scale = max(1.0, float(np.max(np.abs(t)))) * rel
        t[np.abs(t - self.kink) <= scale] = self.kink
        sgn = self._signs(t)
        a = sgn * t
        blocks = TieBlocks(a, gap=scale)
        mean = blocks.sizes(blocks.sorted) / blocks.sizes()
        a[blocks.order] = mean[blocks.bid]
        near = np.abs(a - sgn * self.kink) <= scale
        a[near] = (sgn * self.kink)[near]
        return sgn * a

    def _signs(self, t):
        """``sign(t)`` (+1 at 0) for the even losses, whose ties are on ``|t|``; else ones."""
        return np.where(t >= 0.0, 1.0, -1.0) if self.even else np.ones_like(t)

    def _omega(self, t):
        """The risk ``Omega(t)`` of the losses at ``t``."""
        return float(np.sort(self.loss.value(t)) @ self.sigma)

    def _at_kink(self, z):
        """Per sample: whether ``z`` lies on the kink."""
        return np.abs(z - self.kink) <= AT_KINK * max(1.0, abs(self.kink))

    def _matrix(self, free_w):
        """``s [X[:, free_w], 1]``, cached between the calls for the same ``free_w``."""
        key = free_w.tobytes()
        if self._A_key != key:
            n, nw = self.X.shape[0], free_w.size
            Xd = self.X[:, free_w]
            Xd = Xd.toarray() if hasattr(Xd, "toarray") else np.asarray(Xd)
            A = np.empty((n, nw + int(self.fit_intercept)))
            A[:, :nw] = Xd
            if self.fit_intercept:
                A[:, nw] = 1.0
            A *= self.s[:, None]
            self._A, self._A_key = A, key
        return self._A

    def _walked(self, z, w, b, u, tol, release, best):
        """The face found by the walk, solved: ``best`` (``(F, out)`` or None) updated."""
        walked = walk_face(self, z, w, b, u, release)
        if walked is None:
            return best
        out = self._solve_face(walked[0], walked[1], tol, walked[2], u)
        if out is None:
            return best
        F = self.objective(out.coef, out.intercept)
        if out.certified or best is None or F < best[0]:
            return (F, out)
        return best

    def _rounds(self, z, w, tol, b, u, rounds, best):
        """The active-set rounds from ``z``: ``best`` (``(F, out)`` or None) updated.

        As in a primal-dual active set method, the face read from ``z`` is
        solved; kink points whose multiplier leaves ``[0, max sigma]`` leave
        the kink (to the side the multiplier points to), points whose
        solved ``t`` crossed the kink are put on it (see
        :meth:`_moved_face`), and the face is solved again, for at most
        ``rounds`` rounds.
        """
        zc = np.array(z, dtype=np.float64)
        side = np.sign(zc - self.kink) if not self.even else None
        if rounds is None:
            rounds = MAX_ROUNDS
        best_res, stalled = np.inf, 0
        for _ in range(rounds):
            out = self._solve_face(zc, w, tol, b, u)
            if out is None:
                break
            F = self.objective(out.coef, out.intercept)
            if best is None or F < best[0] or out.certified:
                best = (F, out)
            if out.certified:
                break
            if out.residual > ROUNDS_ABORT * best_res:
                # the active-set moves are running away from the face: give up
                break
            if out.residual < ROUNDS_PROGRESS * best_res:
                best_res, stalled = out.residual, 0
            else:
                stalled += 1
                if stalled >= ROUNDS_STALL:
                    break  # no progress: the moves cycle
            u = -out.lam
            new = self._moved_face(zc, out.t, u, side)
            if np.array_equal(new, zc):
                break
            zc = new
            side = np.sign(zc - self.kink) if not self.even else None
            w, b = out.coef, out.intercept
        return best

    def _moved_face(self, zc, t, u, side):
        """The next round's face: the solved ``t`` with the kink points and tie members moved.

        Parameters
        ----------
        zc : ndarray of shape (n,)
            This round's face.
        t : ndarray of shape (n,)
            Its solution's loss arguments.
        u : ndarray of shape (n,)
            Its loss weights.
        side : ndarray of shape (n,) or None
            The side of the kink of each ``zc`` (None for the even losses).

        Returns
        -------
        ndarray of shape (n,)
        """
        top = float(self.sigma.max())
        at_kink = self._at_kink(zc)
        mag = np.abs(u) if self.even else u
        new = t.copy()
        self._move_tie_members(zc, t, mag, at_kink, new)
        if self.even:
            # absolute loss: |u| above the top weight leaves the kink
            leave = at_kink & (mag > top * (1 + NUDGE))
            new[at_kink] = self.kink
            new[leave] = self.kink + NUDGE * np.sign(u[leave] + (u[leave] == 0))
        else:
            low = at_kink & (u < -FLAT * top)
            high = at_kink & (u > top * (1 + NUDGE))
            new[low] = self.kink - NUDGE
            new[high] = self.kink + NUDGE
            stay = at_kink & ~low & ~high
            new[stay] = self.kink
            crossed = ~at_kink & (np.sign(t - self.kink) != side)
            new[crossed] = self.kink
        return new

    def _move_tie_members(self, zc, t, mag, at_kink, new):
        """Tie blocks of ``zc`` keep one value in ``new`` (the mean of their solved ``t``).

        Members whose loss weight ``mag`` lies outside the block's range of
        rank weights leave it, downwards or upwards; the even losses tie
        magnitudes, with the signs of ``zc``.
        """
        L = self.loss.value(zc)
        blocks = TieBlocks(L)
        bid = blocks.sample_bid()
        active = (L > 0.0) & ~at_kink
        size = np.bincount(bid, weights=active, minlength=blocks.n_blocks)
        flat = np.empty(L.size, dtype=bool)
        flat[blocks.order] = blocks.flat(self.sigma)[blocks.bid]
        tied = active & (size[bid] >= 2) & ~flat
        if not tied.any():
            return
        top = float(self.sigma.max())
        sgn = self._signs(zc)
        mean_t = np.bincount(bid, weights=np.where(tied, sgn * t, 0.0), minlength=blocks.n_blocks)
        val = (mean_t / np.maximum(size, 1.0))[bid]
        new[tied] = (sgn * val)[tied]
        down = tied & (mag < self.sigma[blocks.starts][bid] - NUDGE * top)
        up = tied & (mag > self.sigma[blocks.stops - 1][bid] + NUDGE * top)
        delta = NUDGE * np.maximum(1.0, np.abs(val))
        new[down] = (sgn * (val - delta))[down]
        new[up] = (sgn * (val + delta))[up]

    def _solve_face(self, z, w, tol, b=0.0, u_ref=None):
        """Solve ``F`` on the face read from ``z`` and certify the solution.

        The constraints ``E x = e`` (ties, kink points) are eliminated
        through a null-space basis of ``E`` (``x = x0 + N y``, ``x0`` the
        projection of the current point onto the face), so that the linear
        algebra is ``O((m + n) p^2)`` with ``p = d + 1`` however many
        constraints there are; the face objective is quadratic: one exact
        step.  Returns a :class:`FinishResult`, or None.
        """
        rows = self._face_rows(np.asarray(z, dtype=np.float64), w)
        if rows is None:
            return None
        x, g = self._face_point(rows, w, b)
        if x is None:
            return None
        c0, cvec = self._face_weights(rows, g)
        nw = rows.free_w.size
        w_new = np.zeros(self.X.shape[1])
        w_new[rows.free_w] = x[:nw]
        b_new = float(x[-1]) if self.fit_intercept else 0.0
        f = np.asarray(self.X @ w_new).ravel() + b_new
        t = self.s * f + self.c
        residual = self._certificate(cvec, t, w_new)
        # The multipliers are not unique when the face has more constraints
        # than needed (e.g. a large tie block; with at most p independent
        # constraints they are): among them, take the loss weights closest
        # to the estimate u_ref (the z-step's subgradient, which lies in
        # dOmega(z)); without one, start from the face's mean weights c0
        # (the centre of each block's polytope) and alternate with the box
        # of the weights; then certify those.
        if residual > tol and rows.E.shape[0] > x.shape[0]:
            alt = self._closest_weights(rows, c0, g, u_ref, t)
            if alt is not None:
                res_alt = self._certificate(alt, t, w_new)
                if res_alt < residual:
                    cvec, residual = alt, res_alt
        return FinishResult(w_new, b_new, residual <= tol, residual, t, -cvec)

    def _face_rows(self, z, w):
        """The face read from ``z`` (kink points, tie blocks, l1 zeros of ``w``); None if nothing is free."""
        d = self.X.shape[1]
        L = self.loss.value(z)
        at_kink = self._at_kink(z)
        active = (L > 0.0) & ~at_kink
        beta = self._signs(z)
        blocks = TieBlocks(L)
        act_sorted = active[blocks.order]
        omega = blocks.mean_weights(self.sigma, act_sorted)
        # ties only for blocks over which sigma varies: where it is constant
        # the risk is linear in the block's losses and the tie is no constraint
        tie_i, tie_r = blocks.pairs(act_sorted & ~blocks.flat(self.sigma)[blocks.bid])
        kinks = np.flatnonzero(at_kink)
        free_w = np.flatnonzero(w != 0.0) if self.penalty.l1 > 0.0 else np.arange(d)
        if free_w.size + int(self.fit_intercept) == 0:
            return None
        A = self._matrix(free_w)
        cc = self.c
        E = np.concatenate(
            [beta[tie_i, None] * A[tie_i] - beta[tie_r, None] * A[tie_r], A[kinks]]
        )
        if self.even:
            e_tie = beta[tie_r] * cc[tie_r] - beta[tie_i] * cc[tie_i]
        else:
            e_tie = cc[tie_r] - cc[tie_i]
        e = np.concatenate([e_tie, self.kink - cc[kinks]])
        return _FaceRows(beta, omega, tie_i, tie_r, kinks, free_w, A, E, e)

    def _face_point(self, rows, w, b):
        """The minimiser ``x`` of ``F`` on the face and the gradient ``g`` there (None, None: not finite)."""
        A, free_w = rows.A, rows.free_w
        nw, p = free_w.size, A.shape[1]
        l1, l2 = self.penalty.l1, self.penalty.l2
        sign_w = np.sign(w[free_w])
        x = np.empty(p)
        x[:nw] = w[free_w]
        if self.fit_intercept:
            x[nw] = b
        Hdiag = np.zeros(p)
        Hdiag[:nw] = l2

        def grad(x):
            g = A.T @ (rows.omega * rows.beta) + Hdiag * x
            g[:nw] += l1 * sign_w
            return g

        if rows.E.shape[0]:
            # Near convergence the z-step often puts more points on the kink
            # than there are free unknowns, so that E x = e is inconsistent:
            # the point closest to the face is kept (not rejected), and the
            # rounds then move the kink points whose multipliers leave their
            # range off the kink.
            N, x = project_onto_face(rows.E, rows.e, x)
        else:
            N = np.eye(p)
        if N.shape[1]:
            Hr = N.T @ (Hdiag[:, None] * N)
            x = x - N @ np.linalg.lstsq(Hr, N.T @ grad(x), rcond=None)[0]
        if not np.all(np.isfinite(x)):
            return None, None
        return x, grad(x)

    def _face_weights(self, rows, g):
        """The face's mean loss weights ``c0`` and its least-squares loss weights (``dOmega/dt``)."""
        c0 = rows.omega * rows.beta
        cvec = c0.copy()
        if rows.E.shape[0]:
            nu = scipy.linalg.lstsq(rows.E.T, -g, cond=RANK, check_finite=False)[0]
            tie_i, tie_r, beta = rows.tie_i, rows.tie_r, rows.beta
            k = tie_i.size
            np.add.at(cvec, tie_i, nu[:k] * beta[tie_i])
            np.add.at(cvec, tie_r, -nu[:k] * beta[tie_r])
            cvec[rows.kinks] += nu[k:]
        return c0, cvec

    def _closest_weights(self, rows, c0, g, u_ref, t):
        """Loss weights ``c0 + v`` of the face closest to ``u_ref`` (None: closest to ``c0``).

        ``v`` ranges over the multipliers of the face's constraints: any
        values on the kink points, and on each tie block (``tie_i`` with its
        representative ``tie_r``) any vector with ``sum beta_i v_i = 0``; it
        must make the point stationary, ``A^T v = -g``.  With ``P`` the
        orthogonal projector onto those ``v``: ``v = P (delta + A mu)``,
        ``delta = u_ref - c0``, ``(P A)^T (P A) mu = -g - (P A)^T delta``.
        Without ``u_ref``, alternating projections onto the box ``0 <= u <=
        max sigma`` that holds the loss weights follow (ending on the affine
        set).
        """
        n = c0.shape[0]
        beta, kinks, tie_i, tie_r = rows.beta, rows.kinks, rows.tie_i, rows.tie_r
        delta = np.zeros(n) if u_ref is None else np.asarray(u_ref, dtype=np.float64) - c0
        grp = np.full(n, -1, dtype=np.int64)
        nb = 0
        if tie_i.size:
            reps = np.unique(tie_r)
            nb = reps.size
            grp[reps] = np.arange(nb)
            grp[tie_i] = np.searchsorted(reps, tie_r)
        sel = np.flatnonzero(grp >= 0)
        cnt = np.bincount(grp[sel], minlength=nb).astype(np.float64)

        def proj(V):
            out = np.zeros_like(V)
            out[kinks] = V[kinks]
            if sel.size:
                bv = beta[sel, None] * V[sel].reshape(sel.size, -1)
                sums = np.zeros((nb, bv.shape[1]))
                np.add.at(sums, grp[sel], bv)
                mean = sums / cnt[:, None]
                out[sel] = (V[sel].reshape(sel.size, -1) - beta[sel, None] * mean[grp[sel]]).reshape(
                    V[sel].shape
                )
            return out

        PA = proj(rows.A)
        Kp = np.linalg.pinv(PA.T @ PA, rcond=FLAT)
        # (only without an estimate: alternating projections cost O(n p) each)
        box = u_ref is None and BOX_ROUNDS > 0 and not self.even
        cap = float(self.sigma.max()) + 0.0 * c0
        for _ in range(BOX_ROUNDS + 1 if box else 1):
            Pd = proj(delta)
            v = Pd + PA @ (Kp @ (-g - PA.T @ Pd))
            if not np.all(np.isfinite(v)):
                return None
            u = c0 + v
            if not box:
                break
            if min(float(np.min(u)), float(np.min(cap - u))) >= 0.0:
                break
            delta = np.clip(u, 0.0, cap) - c0
        return u

    def _certificate(self, u, t, w):
        """Scaled violation of ``u in dOmega(t)`` and of the penalty's condition.

        ``u`` is ``dOmega/dt`` (``-lambda``).  Hinge: ``u`` nonnegative,
        weakly submajorised by ``sigma``, ``u.(1 + t) = Omega(t)``;
        absolute: the same on ``|u|`` with ``u.t``.
        """
        n = u.shape[0]
        mag = np.abs(u) if self.even else u
        neg = 0.0 if self.even else max(0.0, -float(u.min()))
        lin = u @ t if self.even else u @ (1.0 + t)
        excess = max(0.0, float(np.max(np.cumsum(np.sort(mag)[::-1]) - self._sigma_cum)))
        omega = self._omega(t)
        compl = abs(float(lin) - omega) / max(1.0, abs(omega))
        sl = self.s * -u
        gw = np.asarray(self.X.T @ sl).ravel()
        gb = float(sl.sum()) if self.fit_intercept else 0.0
        pen = float(np.hypot(self.penalty.subgradient_distance(w, gw), gb))
        return max(n * neg, n * excess, compl, pen)
