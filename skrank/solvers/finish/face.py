"""The ADMM's exact final step for the hinge and absolute losses: solve ``F`` on the face of an iterate.

Used by the ADMM (:mod:`skrank.solvers.admm`), whose z-step puts ``z`` exactly
on the tie structure of the solution.  (Smooth losses are finished by the
Newton method, :mod:`skrank.solvers.finish.newton`.)
"""

import numpy as np
import scipy.linalg

from . import FinishResult
from ._tolerances import (
    AT_KINK,
    FLAT,
    INTERIOR_FLOOR,
    NEAR_KINK,
    NUDGE,
    RANK,
    START_RANK,
    TINY,
    ZERO_COEF,
)
from .walk_kernel import WALK_OK, WALK_OUT_OF_STEPS, walk_loop


class Polisher:
    """Exact final step for convex spectral risks of the hinge and absolute losses.

    With the hinge loss (classification) or the absolute loss (regression),
    a convex spectral risk and an l1 / l2 / elastic-net penalty, ``F`` is
    piecewise quadratic and the ADMM converges slowly (linearly at best, with
    a poor rate) once it has found the right piece.  The z-step's PAVA puts
    ``z`` *exactly* on the structure of the solution: points at the kink of
    the loss (``z_i = -1`` for the hinge, ``0`` for the absolute loss) and
    blocks of equal losses.  On that face ``F`` is a quadratic (linear plus
    ``l2/2 ||w||^2``) subject to linear equalities:

    * ``t_i`` at the kink for every kink point;
    * equal losses inside every block of tied positive losses;
    * ``w_j = 0`` where the current ``w_j`` is zero (l1), the signs of the
      other coordinates fixed,

    each block of positive losses weighted by the sum of the rank weights
    ``sigma`` of the ranks it occupies.  One KKT system solves it.  The
    result is kept only if it does not increase ``F``, and it is certified
    optimal when the multipliers form a subgradient: with ``u`` the weights
    of the losses implied by the KKT solution (``A^T u + dR(w) = 0``),
    ``u in dOmega(t)`` means ``u`` in the polytope ``{u >= 0, u weakly
    submajorised by sigma}`` (``|u|`` for the absolute loss) and
    ``u.l_lin(t) = Omega(t)``; the l1 coordinates held at zero need
    ``|(A^T u)_j| <= l1``.  These are the three eps-KKT conditions of Xiao et
    al. 2023 (Theorem 1) with eps = 0 at ``z = t``, so a certified point is an exact optimum up to
    rounding.

    Ties are constraints only for blocks over whose ranks ``sigma`` varies
    (for ERM there are none).  A face that is over-determined (the z-step
    near convergence often puts more points on the kink than there are free
    unknowns) is not rejected: the point closest to it in least squares is
    solved for, and the active-set rounds of :meth:`__call__` move the kink
    points whose multipliers leave their range off the kink.

    For the absolute loss a tie is ``|t_i| = |t_r|``, linear once the signs
    ``beta = sign(t)`` are fixed: ``beta_i t_i = beta_r t_r``.

    When it runs (:func:`admm_loop`): after ``polish_first`` iterations and
    at every doubling, at ``max_iter``, and whenever the scaled KKT residual
    is below ``polish_crit`` and has fallen tenfold since the last attempt
    or ``polish_gap`` iterations (10, doubled after attempts in quick
    succession) have passed.  Only certified points stop the loop; at
    ``max_iter`` an uncertified polished point replaces the iterate when it
    lowers ``F``.

    Hinge loss: the z-step often puts more points on the kink than the face
    has free unknowns (always so when ``[X, 1]`` is rank deficient, e.g.
    redundant features, and typical with an l1 zero set), and the least-
    squares multipliers of such a face point at the wrong kink points, so
    that the rounds cycle.  The active-set walk of :meth:`_walk` resolves
    the kink points and the l1 zero set exactly before the face is solved;
    the rounds remain the fallback.

    The walk keeps the tie blocks read from ``z`` as constraints.  A block
    with a member too many (the z-step pools a sample into the block at a
    jump of ``sigma``) can fix every coefficient (e.g. ``p + 1`` tied
    samples force ``w = 0, b = 0``) or give a wrong face; when neither that
    walk nor the rounds certify, the walk runs once more with the blocks
    released: a block's part of the risk, ``sigma_first sum l_i + sum_j
    dsigma_j topsum_{c_j}(l)`` over the jumps ``j`` of ``sigma`` between its
    ranks, is written with one unknown ``tau_j`` per jump, ``topsum_c(l) =
    min_tau c tau + sum_i (l_i - tau)_+``, so that each member and jump is a
    piece ``(1 + t_i - tau_j)_+`` of slope ``[0, dsigma_j]``; the walk then
    finds the block's members (those held at ``tau_j``) itself.

    Known limit: as a primal active-set method the walk needs one step per
    change of the structure, so that from an early iterate it may run out
    of :attr:`walk_max` steps (the polish attempt then falls back to the
    rounds and usually fails to certify); at a degenerate vertex (many
    pieces at their kink, e.g. ``w = 0`` with every loss tied) it may
    cycle.  The absolute loss still uses the rounds only.
    """

    #: Largest size of the KKT system (unknowns plus constraints) attempted.
    max_system = 2500
    #: Most coefficients (features plus intercept) for which polishing is
    #: set up: a face solve costs O(n p^2 + p^3) against O(n min(n, p)) for
    #: one ADMM iteration, so beyond this the iterations are cheaper.
    max_features = 200

    def __init__(self, X, s, c, sigma, loss, penalty, fit_intercept):
        self.X, self.s, self.c = X, s, c
        self.sigma = np.asarray(sigma, dtype=np.float64)
        self.loss, self.penalty = loss, penalty
        self.fit_intercept = bool(fit_intercept)
        self.kink = loss.kink
        self.even = loss.even
        self._A, self._A_key = None, None
        self._sigma_cum = np.cumsum(np.sort(self.sigma)[::-1])
        self._sigma_asc_cum = np.cumsum(np.sort(self.sigma))
        #: Multiply-adds spent in Newton systems so far (``A N`` and ``(A N)^T D (A N)``
        #: over the rows of nonzero weight), for the callers' cost accounting.
        self.work = 0
        #: Steps of the active-set walk (:meth:`_walk`) so far.
        self.walk_steps = 0
        #: Whether the last walk stopped for want of steps.
        self.walk_out_of_steps = False

    @staticmethod
    def applies(risk, loss, framework):
        """Whether the polisher handles the problem: a convex risk of a loss with two linear
        pieces (hinge, absolute; the smooth losses are finished by the Newton method,
        :mod:`skrank.solvers.finish.newton`)."""
        return framework == "srm" and len(loss.slopes) == 2 and risk.is_convex

    def _signs(self, t):
        """``sign(t)`` (+1 at 0) for the even losses, whose ties are on ``|t|``; else ones."""
        return np.where(t >= 0.0, 1.0, -1.0) if self.even else np.ones_like(t)

    def _omega(self, t):
        return float(np.sort(self.loss.value(t)) @ self.sigma)

    def objective(self, w, b):
        f = np.asarray(self.X @ w).ravel() + b
        return self._omega(self.s * f + self.c) + self.penalty.value(w)

    #: Rounds of the active-set correction in :meth:`__call__`.
    max_rounds = 8

    def __call__(self, z, w, tol, b=0.0, u=None, rounds=None):
        """A :class:`FinishResult` or None.

        The face read from ``z`` is solved; then, as in a primal-dual active
        set method, kink points whose multiplier leaves ``[0, max sigma]``
        leave the kink (to the side the multiplier points to) and points
        whose polished ``t`` crossed the kink are put on it, and the face is
        solved again, for at most :attr:`max_rounds` rounds.  The best
        point by ``F`` is returned.  With the hinge loss the face found by
        the active-set walk of :meth:`_walk` is tried first; when it does
        not certify, the rounds start from ``z``, and when they do not
        either, the walk runs with the tie blocks released (unless the first
        walk ran out of steps: an early iterate).
        """
        best = None
        self.walk_out_of_steps = False
        if not self.even:  # the walk handles the monotone loss (hinge)
            best = self._walk_face(z, w, b, u, tol, False, best)
            if best is not None and best[1].certified:
                return best[1]
        best = self._rounds(z, w, tol, b, u, rounds, best)
        if not self.even and not self.walk_out_of_steps and (best is None or not best[1].certified):
            # last: the walk with z's tie blocks released into tau pieces
            # (not from an iterate so early that the first walk ran out of steps)
            best = self._walk_face(z, w, b, u, tol, True, best)
        return None if best is None else best[1]

    def _walk_face(self, z, w, b, u, tol, release, best):
        """The face found by :meth:`_walk`, solved: ``best`` (``(F, out)`` or None) updated."""
        walked = self._walk(z, w, b, u, release)
        if walked is None:
            return best
        out = self._face(walked[0], walked[1], tol, walked[2], u)
        if out is None:
            return best
        F = self.objective(out.coef, out.intercept)
        if out.certified or best is None or F < best[0]:
            return (F, out)
        return best

    def _rounds(self, z, w, tol, b, u, rounds, best):
        """The active-set rounds of :meth:`__call__` from ``z``: ``best`` (``(F, out)`` or None) updated."""
        zc = np.array(z, dtype=np.float64)
        side = np.sign(zc - self.kink) if not self.even else None
        top = float(self.sigma.max())
        if rounds is None:
            rounds = self.max_rounds
        best_res, stalled = np.inf, 0
        for _ in range(rounds):
            out = self._face(zc, w, tol, b, u)
            if out is None:
                break
            w_p, b_p, certified, res, t, lam = out
            F = self.objective(w_p, b_p)
            if best is None or F < best[0] or certified:
                best = (F, out)
            if certified:
                break
            if res > self.abort_factor * best_res:
                # the active-set moves are running away from the face: give up
                break
            if res < 0.5 * best_res:
                best_res, stalled = res, 0
            else:
                stalled += 1
                if stalled >= self.stall_rounds:
                    break  # no progress: the moves cycle
            u = -lam
            at_kink = np.abs(zc - self.kink) <= AT_KINK * max(1.0, abs(self.kink))
            mag = np.abs(u) if self.even else u
            new = t.copy()
            eps = NUDGE
            # Tie blocks of zc keep one common value (the mean of their polished
            # t); members whose loss weight lies outside the block's range of
            # rank weights leave it, downwards or upwards.
            L = self.loss.value(zc)
            order = np.argsort(L, kind="stable")
            Ls = L[order]
            brk = np.empty(L.size, dtype=bool)
            brk[0] = True
            np.not_equal(Ls[1:], Ls[:-1], out=brk[1:])
            bid_s = np.cumsum(brk) - 1
            nb = int(bid_s[-1]) + 1
            bid = np.empty_like(bid_s)
            bid[order] = bid_s
            active = (L > 0.0) & ~at_kink
            size = np.bincount(bid, weights=active, minlength=nb)
            flat = np.empty(L.size, dtype=bool)
            flat[order] = self._flat_blocks(brk)[bid_s]
            tied = active & (size[bid] >= 2) & ~flat
            if tied.any():
                # even losses tie magnitudes: work on |t| with the signs of zc
                sgn = self._signs(zc)
                mean_t = np.bincount(bid, weights=np.where(tied, sgn * t, 0.0), minlength=nb)
                mean_t = mean_t / np.maximum(size, 1.0)
                starts = np.flatnonzero(brk)
                stops = np.append(starts[1:], L.size)
                s_lo = self.sigma[starts][bid]
                s_hi = self.sigma[stops - 1][bid]
                val = mean_t[bid]
                new[tied] = (sgn * val)[tied]
                down = tied & (mag < s_lo - NUDGE * top)
                up = tied & (mag > s_hi + NUDGE * top)
                delta = eps * np.maximum(1.0, np.abs(val))
                new[down] = (sgn * (val - delta))[down]
                new[up] = (sgn * (val + delta))[up]
            if self.even:
                # absolute loss: |u| above the top weight leaves the kink
                leave = at_kink & (mag > top * (1 + NUDGE))
                new[at_kink] = self.kink
                new[leave] = self.kink + eps * np.sign(u[leave] + (u[leave] == 0))
            else:
                low = at_kink & (u < -FLAT * top)
                high = at_kink & (u > top * (1 + NUDGE))
                new[low] = self.kink - eps
                new[high] = self.kink + eps
                stay = at_kink & ~low & ~high
                new[stay] = self.kink
                crossed = ~at_kink & (np.sign(t - self.kink) != side)
                new[crossed] = self.kink
            w_next = w_p
            if np.array_equal(new, zc):
                break
            zc = new
            side = np.sign(zc - self.kink) if not self.even else None
            w, b = w_next, b_p
        return best

    #: The rounds stop when the residual exceeds this multiple of the best so far.
    abort_factor = 100.0
    #: ... or when it has not halved in this many rounds.
    stall_rounds = 4
    #: Most steps of the active-set walk of :meth:`_walk`: ``walk_max`` plus
    #: ``walk_max_per_row`` per piece (from an early iterate the walk needs
    #: about a step per fifth to half of the samples).
    walk_max = 1000
    walk_max_per_row = 0.25
    #: Most tau pieces of :meth:`_walk` (members times jumps of sigma, over the
    #: released tie blocks): ``walk_tie_pieces_per_row`` per sample, at least
    #: ``walk_tie_pieces_min``; the blocks beyond it stay constraints.
    walk_tie_pieces_per_row = 4.0
    walk_tie_pieces_min = 256
    #: Most taus of :meth:`_walk`, per coefficient (features plus intercept):
    #: the optimum's tie blocks need at most about one tie per coefficient, and
    #: each tau adds an unknown to every step of the walk.
    walk_taus_per_coef = 1.0
    #: Most steps of the walk with the tie blocks released (a last resort,
    #: meant for an iterate whose face is right but for a tie block: short).
    walk_max_release = 200
    walk_max_per_row_release = 0.05

    def _walk(self, z, w, b, u=None, release=False):
        """Hinge loss: solve ``F`` near the face read from ``z`` by a primal active-set walk.

        The tie blocks of ``z`` (over which ``sigma`` varies) stay
        constraints, eliminated through a null-space basis ``x = x0 + N y``;
        every other sample is a *piece* ``psi_i(r_i)``, ``r_i = 1 + t_i``,
        with slope ``lo_i = 0`` below the kink and ``hi_i`` above it (its
        rank weight if its loss is positive, else the weight ``sigma`` gives
        the first loss to leave zero), and with an l1 penalty every
        coordinate ``w_j`` is a piece ``r = w_j``, ``[lo, hi] = [-l1, l1]``.
        The model ``q.y + y^T Q y / 2 + sum_i psi_i(r_i)`` is convex and
        piecewise quadratic; it is minimised exactly by a primal active-set
        method: a working set ``W`` of pieces held at their kink (linearly
        independent rows: the z-step often puts more points on the kink
        than the face has free unknowns, e.g. for rank-deficient ``X``),
        equality-constrained Newton directions, exact line searches through
        the breakpoints (a piece where the minimum lies enters ``W``), and a
        piece of ``W`` whose multiplier leaves ``[lo, hi]`` leaving it to
        the side that multiplier points to.  Returns ``(zc, w, b)`` for
        :meth:`_face` (which solves and certifies the face so found), or
        None.

        ``release``: the tie blocks become tau pieces instead (see the class
        docstring; within :attr:`walk_taus_per_coef` and the piece budget,
        the others stay constraints), one unknown ``tau_j`` per jump after
        ``y``; a member weighs its block's lowest rank weight, and the
        members held at a common ``tau`` are a tie block of ``zc``.  None
        when no block is released (the walk would be the same).
        """
        n, d = self.X.shape
        sigma = self.sigma
        z = np.asarray(z, dtype=np.float64)
        L = self.loss.value(z)
        at_kink = np.abs(z - self.kink) <= AT_KINK
        active = (L > 0.0) & ~at_kink
        order = np.argsort(L, kind="stable")
        Ls = L[order]
        new_block = np.empty(n, dtype=bool)
        new_block[0] = True
        np.not_equal(Ls[1:], Ls[:-1], out=new_block[1:])
        bid = np.cumsum(new_block) - 1
        nb = int(bid[-1]) + 1
        block_sigma = np.bincount(bid, weights=sigma, minlength=nb)
        block_size = np.bincount(bid, minlength=nb)
        act_sorted = active[order]
        omega = np.zeros(n)
        omega[order] = np.where(act_sorted, block_sigma[bid] / block_size[bid], 0.0)
        tied_sorted = act_sorted & ~self._flat_blocks(new_block)[bid] & (block_size[bid] >= 2)
        # Tie blocks released into pieces (see the docstring): one variable
        # tau per jump of sigma between a block's ranks, one piece per member
        # and jump; the blocks beyond the budget stay constraints.
        total = float(self._sigma_asc_cum[-1])
        starts = np.flatnonzero(new_block)
        stops = np.append(starts[1:], n)
        released = np.zeros(nb, dtype=bool)
        budget = max(self.walk_tie_pieces_min, int(self.walk_tie_pieces_per_row * n))
        budget_tau = int(self.walk_taus_per_coef * (d + int(self.fit_intercept)))
        j_hi, j_cnt, j_tau0, j_below, pc_member, pc_jump = [], [], [], [], [], []
        for kb in np.unique(bid[tied_sorted]):
            s0, s1 = int(starts[kb]), int(stops[kb])
            ds = np.diff(sigma[s0:s1])
            jmp = np.flatnonzero(ds > FLAT * total)
            if not release or jmp.size * (s1 - s0) > budget or jmp.size > budget_tau:
                continue
            budget -= jmp.size * (s1 - s0)
            budget_tau -= jmp.size
            released[kb] = True
            below = np.concatenate([[0.0], np.cumsum(ds[jmp])[:-1]])
            for jj, j in enumerate(jmp):
                # the jump lies above block rank j: (s1 - s0 - 1 - j) ranks over it
                pc_member.append(order[s0:s1])
                pc_jump.append(np.full(s1 - s0, len(j_hi), dtype=np.int64))
                j_hi.append(float(ds[j]))
                j_cnt.append(float(s1 - s0 - 1 - j))
                j_tau0.append(float(Ls[s0]))
                j_below.append(float(below[jj]))
        nj = len(j_hi)
        if release and not nj:
            return None  # the same walk as with the blocks held
        j_hi, j_cnt = np.array(j_hi), np.array(j_cnt)
        j_tau0, j_below = np.array(j_tau0), np.array(j_below)
        pc_member = np.concatenate(pc_member) if nj else np.zeros(0, dtype=np.int64)
        pc_jump = np.concatenate(pc_jump) if nj else np.zeros(0, dtype=np.int64)
        rel_sorted = tied_sorted & released[bid]
        tied_sorted = tied_sorted & ~released[bid]
        tied = np.zeros(n, dtype=bool)
        tied[order] = tied_sorted
        pos = np.flatnonzero(tied_sorted)
        bb = bid[pos]
        first = np.empty(pos.size, dtype=bool)
        if pos.size:
            first[0] = True
            np.not_equal(bb[1:], bb[:-1], out=first[1:])
        rep = pos[first][np.cumsum(first) - 1]
        tie_i, tie_r = order[pos[~first]], order[rep[~first]]
        n_zero = int(np.sum(~active))
        h0 = float(sigma[n_zero - 1]) if n_zero else 0.0
        hi_pt = np.where(active, omega, h0)
        # a released member weighs its block's lowest rank weight (the jumps
        # above it are the tau pieces' slopes)
        s_first = np.zeros(n)
        s_first[order[rel_sorted]] = sigma[starts[bid[rel_sorted]]]
        hi_pt[order[rel_sorted]] = s_first[order[rel_sorted]]
        pts = np.flatnonzero(~tied & (hi_pt > 0.0))

        A = self._full_matrix()
        p = A.shape[1]
        cc = self.c
        l1, l2 = self.penalty.l1, self.penalty.l2
        x = np.zeros(p)
        x[:d] = w
        if self.fit_intercept:
            x[d] = b
        if tie_i.size:
            E = A[tie_i] - A[tie_r]
            e = cc[tie_r] - cc[tie_i]
            # the null space from the p x p triangle of E (U of E itself would be m x m)
            R = E if E.shape[0] <= p else np.linalg.qr(E, mode="r")
            _, S, Vt = np.linalg.svd(R, full_matrices=True)
            rank = int(np.sum(S > S[0] * RANK)) if S[0] > 0 else 0
            N = Vt[rank:].T
            x = x - scipy.linalg.lstsq(E, E @ x - e, cond=RANK, check_finite=False)[0]
        else:
            N = np.eye(p)
        k0 = N.shape[1]
        k = k0 + nj  # the walk's unknowns: y (x = x0 + N y), then the taus (tau0 + y)
        if k == 0:
            return None
        Hdiag = np.zeros(p)
        Hdiag[:d] = l2
        q = np.concatenate([N.T @ (A.T @ np.where(tied, omega, 0.0) + Hdiag * x), j_cnt * j_hi])
        Q = np.zeros((k, k))
        Q[:k0, :k0] = N.T @ (Hdiag[:, None] * N)
        rows = [np.hstack([A[pts] @ N, np.zeros((pts.size, nj))])]
        r0 = [A[pts] @ x + cc[pts] + 1.0]
        lo = [np.zeros(pts.size)]
        hi = [hi_pt[pts]]
        if l1 > 0.0:
            rows.append(np.hstack([N[:d], np.zeros((d, nj))]))
            r0.append(x[:d].copy())
            lo.append(np.full(d, -l1))
            hi.append(np.full(d, l1))
        off = sum(len(v) for v in r0)  # the tau pieces: r = 1 + t_i - tau_j
        if nj:
            Rt = np.zeros((pc_member.size, k))
            Rt[:, :k0] = A[pc_member] @ N
            Rt[np.arange(pc_member.size), k0 + pc_jump] = -1.0
            rows.append(Rt)
            r0.append(A[pc_member] @ x + cc[pc_member] + 1.0 - j_tau0[pc_jump])
            lo.append(np.zeros(pc_member.size))
            hi.append(j_hi[pc_jump])
        R = np.concatenate(rows)
        r0 = np.concatenate(r0)
        lo, hi = np.concatenate(lo), np.concatenate(hi)
        P = R.shape[0]
        if P == 0:
            return None
        # start: the pieces at their kink (kink points, zero coordinates of w,
        # the members of the released tie blocks), a linearly independent
        # subset of them held there
        cand = np.concatenate(
            [at_kink[pts], (w == 0.0) if l1 > 0.0 else np.zeros(0, dtype=bool),
             np.ones(pc_member.size, dtype=bool)]
        )
        cand = np.flatnonzero(cand)
        inW = np.zeros(P, dtype=bool)
        y = np.zeros(k)
        if cand.size:
            Rc = R[cand].T
            if u is not None:
                # prefer the pieces whose estimated multiplier lies well inside
                # [lo, hi]: those at an end of their range are the likeliest to
                # leave the kink (the z-step snaps the points near it onto it)
                u = np.asarray(u, dtype=np.float64)
                mu = np.concatenate([u[pts], -(A[:, :d].T @ u) if l1 > 0.0 else np.zeros(0)])
                if nj:
                    # a member's weight above its lowest rank weight fills its
                    # block's jumps from the bottom
                    ex = u[pc_member] - s_first[pc_member] - j_below[pc_jump]
                    mu = np.concatenate([mu, np.clip(ex, 0.0, j_hi[pc_jump])])
                wt = self._interior(mu[cand], lo[cand], hi[cand]) + INTERIOR_FLOOR
                Rc = Rc * (wt / np.maximum(np.linalg.norm(Rc, axis=0), TINY))
            _, Rq, piv = scipy.linalg.qr(Rc, mode="economic", pivoting=True)
            dg = np.abs(np.diag(Rq))
            rank = int(np.sum(dg > dg[0] * START_RANK)) if dg.size and dg[0] > 0 else 0
            Wi = cand[piv[:rank]]
            inW[Wi] = True
            y = -np.linalg.lstsq(R[Wi], r0[Wi], rcond=None)[0]
        walk_max = self.walk_max + int(self.walk_max_per_row * P)
        if release:
            walk_max = self.walk_max_release + int(self.walk_max_per_row_release * P)
        # the walk (a primal active-set method: Q-conjugate steps on the
        # working set's null space, exact line searches over the breakpoints)
        code, y, inW, up, r, steps = walk_loop(
            np.ascontiguousarray(R), r0, lo, hi, q, np.ascontiguousarray(Q), inW, y,
            walk_max, l2 > 0.0,
        )
        self.walk_steps += steps
        if code != WALK_OK:
            # out of steps, or a working set turned numerically dependent:
            # the caller falls back to the rounds
            self.walk_out_of_steps = code == WALK_OUT_OF_STEPS
            return None
        xf = x + N @ y[:k0]
        wf = xf[:d].copy()
        bf = float(xf[d]) if self.fit_intercept else 0.0
        t = A @ xf + cc
        zc = t.copy()
        npt = pts.size
        Wp, rp, upp = inW[:npt], r[:npt], up[:npt]
        if tie_i.size:
            m = np.bincount(bid, weights=np.where(tied_sorted, t[order], 0.0), minlength=nb)
            m /= np.maximum(np.bincount(bid, weights=tied_sorted, minlength=nb), 1.0)
            zc[order[tied_sorted]] = m[bid[tied_sorted]]
        if nj:
            # the members held at a common tau form a tie block of the face
            # (members held at several taus join those blocks)
            Wt = inW[off:]
            root = np.arange(n)

            def find(i):
                while root[i] != i:
                    root[i] = root[root[i]]
                    i = root[i]
                return i

            head = {}
            for i, j in zip(pc_member[Wt].tolist(), pc_jump[Wt].tolist()):
                if j in head:
                    ri, rj = find(i), find(head[j])
                    if ri != rj:
                        root[ri] = rj
                else:
                    head[j] = i
            held = np.unique(pc_member[Wt])
            if held.size:
                comp = np.array([find(i) for i in held.tolist()])
                _, cid, csize = np.unique(comp, return_inverse=True, return_counts=True)
                cmean = np.bincount(cid, weights=t[held]) / csize
                grp = csize[cid] >= 2
                zc[held[grp]] = cmean[cid[grp]]
        zc[pts[Wp]] = self.kink
        near = ~Wp & (np.abs(rp) <= NEAR_KINK)
        zc[pts[near]] = self.kink + np.where(upp[near], NUDGE, -NUDGE)
        if l1 > 0.0:
            Wc, uc = inW[npt:npt + d], up[npt:npt + d]
            wf[Wc] = 0.0
            tiny = ~Wc & (np.abs(wf) <= ZERO_COEF)
            wf[tiny] = np.where(uc[tiny], TINY, -TINY)
        return zc, wf, bf

    def _interior(self, mu, lo, hi):
        """How far inside ``[lo, hi]`` (0 to 1/2) the estimated multipliers ``mu`` of start candidates lie.

        The estimates come from ``u``, an estimate of ``dOmega/dt`` (see :meth:`_walk`):
        the multiplier of a kink point is its ``u_i``, that of a zero coordinate ``w_j``
        (l1) is ``-(A^T u)_j``, that of a tau piece the member's weight above its
        block's lowest rank weight, filling the block's jumps from the bottom.
        """
        width = np.maximum(hi - lo, TINY)
        return np.clip(np.minimum(mu - lo, hi - mu) / width, 0.0, 0.5)

    def snap(self, t, rel=RANK):
        """``t`` with near-ties made exact: a face for :meth:`__call__` read from a point.

        Loss arguments within ``rel`` (relative to the largest magnitude) of
        the kink are put on it, and runs of sorted losses whose consecutive
        gaps are within ``rel`` get their block's mean argument (mean
        magnitude, signs kept, for the even losses).  Used on a warm start,
        whose point may be an optimum found before.
        """
        t = np.array(t, dtype=np.float64)
        scale = max(1.0, float(np.max(np.abs(t)))) * rel
        t[np.abs(t - self.kink) <= scale] = self.kink
        sgn = self._signs(t)
        a = sgn * t
        order = np.argsort(a, kind="stable")
        As = a[order]
        brk = np.empty(t.size, dtype=bool)
        brk[0] = True
        np.greater(np.diff(As), scale, out=brk[1:])
        bid = np.cumsum(brk) - 1
        mean = np.bincount(bid, weights=As) / np.bincount(bid)
        a[order] = mean[bid]
        near = np.abs(a - sgn * self.kink) <= scale
        a[near] = (sgn * self.kink)[near]
        return sgn * a

    def _full_matrix(self):
        """``s [X, 1]`` over every feature (cached, shared with :meth:`_face`)."""
        d = self.X.shape[1]
        key = np.arange(d).tobytes()
        if self._A_key != key:
            Xd = self.X.toarray() if hasattr(self.X, "toarray") else np.asarray(self.X)
            A = np.empty((Xd.shape[0], d + int(self.fit_intercept)))
            A[:, :d] = Xd
            if self.fit_intercept:
                A[:, d] = 1.0
            A *= self.s[:, None]
            self._A, self._A_key = A, key
        return self._A

    def _flat_blocks(self, new_block):
        """Per block of the sorted order: is ``sigma`` constant over its ranks?"""
        starts = np.flatnonzero(new_block)
        spread = np.maximum.reduceat(self.sigma, starts) - np.minimum.reduceat(self.sigma, starts)
        return spread <= FLAT * float(self.sigma.max())

    def _face(self, z, w, tol, b=0.0, u_ref=None):
        """Solve ``F`` on the face read from ``z`` (see the class docstring).

        Vectorised: the constraints ``E x = e`` (ties, kink points) are
        built without Python loops and eliminated through a null-space basis
        of ``E`` (``x = x0 + N y``, ``x0`` the projection of the current point
        onto the face), so that the linear algebra is ``O((m + n) p^2)`` with
        ``p = d + 1`` however many constraints there are; the face objective
        is quadratic: one exact step.
        """
        n, d = self.X.shape
        sigma = self.sigma
        z = np.asarray(z, dtype=np.float64)
        L = self.loss.value(z)
        at_kink = np.abs(z - self.kink) <= AT_KINK * max(1.0, abs(self.kink))
        active = (L > 0.0) & ~at_kink
        beta = self._signs(z)
        # blocks of tied losses (contiguous in the ascending order)
        order = np.argsort(L, kind="stable")
        Ls = L[order]
        new_block = np.empty(n, dtype=bool)
        new_block[0] = True
        np.not_equal(Ls[1:], Ls[:-1], out=new_block[1:])
        bid = np.cumsum(new_block) - 1
        nb = int(bid[-1]) + 1
        block_sigma = np.bincount(bid, weights=sigma, minlength=nb)
        block_size = np.bincount(bid, minlength=nb)
        omega = np.zeros(n)
        act_sorted = active[order]
        omega[order] = np.where(act_sorted, block_sigma[bid] / block_size[bid], 0.0)
        # tie rows beta_i a_i - beta_r a_r (r: first active point of the block),
        # only for blocks over which sigma varies: where it is constant the
        # risk is linear in the block's losses and the tie is no constraint.
        pos = np.flatnonzero(act_sorted & ~self._flat_blocks(new_block)[bid])
        bb = bid[pos]
        first = np.empty(pos.size, dtype=bool)
        if pos.size:
            first[0] = True
            np.not_equal(bb[1:], bb[:-1], out=first[1:])
        rep = pos[first][np.cumsum(first) - 1]
        tie_i = order[pos[~first]]
        tie_r = order[rep[~first]]
        kinks = np.flatnonzero(at_kink)
        free_w = np.flatnonzero(w != 0.0) if self.penalty.l1 > 0.0 else np.arange(d)
        nw = free_w.size
        p = nw + int(self.fit_intercept)
        if p == 0:
            return None
        key = free_w.tobytes()
        if self._A_key == key:
            A = self._A
        else:
            Xd = self.X[:, free_w]
            Xd = Xd.toarray() if hasattr(Xd, "toarray") else np.asarray(Xd)
            A = np.empty((n, p))
            A[:, :nw] = Xd
            if self.fit_intercept:
                A[:, nw] = 1.0
            A *= self.s[:, None]
            self._A, self._A_key = A, key  # cached between attempts
        cc = self.c
        E = np.concatenate(
            [beta[tie_i, None] * A[tie_i] - beta[tie_r, None] * A[tie_r], A[kinks]]
        )
        if self.even:
            e_tie = beta[tie_r] * cc[tie_r] - beta[tie_i] * cc[tie_i]
        else:
            e_tie = cc[tie_r] - cc[tie_i]
        e = np.concatenate([e_tie, self.kink - cc[kinks]])
        m = E.shape[0]
        l1, l2 = self.penalty.l1, self.penalty.l2
        sign_w = np.sign(w[free_w])
        x = np.empty(p)
        x[:nw] = w[free_w]
        if self.fit_intercept:
            x[nw] = b
        Hdiag = np.zeros(p)
        Hdiag[:nw] = l2

        def grad(x):
            t = A @ x + cc
            g = A.T @ (omega * self._dloss(t, beta)) + Hdiag * x
            g[:nw] += l1 * sign_w
            return g, t

        # null space of E and the projection of x onto {E x = e}
        if m:
            R = E if m <= p else np.linalg.qr(E, mode="r")
            _, S, Vt = np.linalg.svd(R, full_matrices=True)
            rank = int(np.sum(S > S[0] * RANK)) if S.size and S[0] > 0 else 0
            N = Vt[rank:].T
            # Least-squares projection.  Near convergence the z-step often
            # puts more points on the kink than there are free unknowns, so
            # that E x = e is over-determined and inconsistent: the point
            # closest to the face is kept (not rejected), and the rounds of
            # __call__ then move the kink points whose multipliers leave
            # their range off the kink (as the KKT least-squares solve of
            # the earlier, loop-based version did).
            x = x - scipy.linalg.lstsq(E, E @ x - e, cond=RANK, check_finite=False)[0]
        else:
            N = np.eye(p)
        if N.shape[1]:
            g, _ = grad(x)
            Hr = N.T @ (Hdiag[:, None] * N)
            x = x - N @ np.linalg.lstsq(Hr, N.T @ g, rcond=None)[0]
        if not np.all(np.isfinite(x)):
            return None
        g, t = grad(x)
        c0 = omega * self._dloss(t, beta)
        cvec = c0.copy()
        if m:
            nu = scipy.linalg.lstsq(E.T, -g, cond=RANK, check_finite=False)[0]
            k = tie_i.size
            np.add.at(cvec, tie_i, nu[:k] * beta[tie_i])
            np.add.at(cvec, tie_r, -nu[:k] * beta[tie_r])
            cvec[kinks] += nu[k:]
        w_new = np.zeros(d)
        w_new[free_w] = x[:nw]
        b_new = float(x[-1]) if self.fit_intercept else 0.0
        f = np.asarray(self.X @ w_new).ravel() + b_new
        t = self.s * f + self.c
        residual = self._certificate(cvec, t, w_new)
        # The multipliers are not unique when the face has more constraints
        # than needed (e.g. a large tie block): among them, take the loss
        # weights closest to the estimate u_ref (the z-step's subgradient,
        # which lies in dOmega(z)); without one, start from the face's mean
        # weights c0 (the centre of each block's polytope) and alternate with
        # the box of the weights; then certify those.
        if residual > tol and m > p:
            # (with at most p independent constraints the multipliers are unique)
            alt = self._closest_weights(A, c0, g, beta, tie_i, tie_r, kinks, u_ref, t)
            if alt is not None:
                res_alt = self._certificate(alt, t, w_new)
                if res_alt < residual:
                    cvec, residual = alt, res_alt
        return FinishResult(w_new, b_new, residual <= tol, residual, t, -cvec)

    def _closest_weights(self, A, c0, g, beta, tie_i, tie_r, kinks, u_ref, t=None):
        """Loss weights ``c0 + v`` of the face closest to ``u_ref``.

        (``u_ref`` None: closest to ``c0``.)  ``v`` ranges over the multipliers of the face's constraints: any
        values on the kink points, and on each tie block (``tie_i`` with its
        representative ``tie_r``) any vector with ``sum beta_i v_i = 0``; it
        must make the point stationary, ``A^T v = -g``.  With ``P`` the
        orthogonal projector onto those ``v``: ``v = P (delta + A mu)``,
        ``delta = u_ref - c0``, ``(P A)^T (P A) mu = -g - (P A)^T delta``.
        """
        n = c0.shape[0]
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

        PA = proj(A)
        Kp = np.linalg.pinv(PA.T @ PA, rcond=FLAT)
        # (only without an estimate: alternating projections cost O(n p) each)
        box = u_ref is None and self.ap_rounds > 0 and not self.even and t is not None
        if box:
            # alternating projections onto the box 0 <= u <= (max sigma) l'(t)
            # that contains the loss weights (ends on the affine set)
            cap = float(self.sigma.max()) + 0.0 * c0
        for it in range(self.ap_rounds + 1 if box else 1):
            Pd = proj(delta)
            v = Pd + PA @ (Kp @ (-g - PA.T @ Pd))
            if not np.all(np.isfinite(v)):
                return None
            u = c0 + v
            if not box:
                break
            lo_v, hi_v = float(np.min(u)), float(np.min(cap - u))
            if min(lo_v, hi_v) >= 0.0:
                break
            delta = np.clip(u, 0.0, cap) - c0
        return u

    #: Alternating projections of :meth:`_closest_weights` (0: none).
    ap_rounds = 50

    def _dloss(self, t, beta):
        """The slope of the face's linear loss: 1 (hinge) or the sign ``beta`` (absolute)."""
        return beta

    def _certificate(self, u, t, w):
        """Scaled violation of ``u in dOmega(t)`` and of the penalty's condition.

        ``u`` is ``dOmega/dt`` (``-lambda``).  Hinge: ``u``
        nonnegative, weakly submajorised by ``sigma``, ``u.(1 + t) =
        Omega(t)``; absolute: the same on ``|u|`` with ``u.t``.
        """
        n = u.shape[0]
        total = 0.0
        mag = np.abs(u) if self.even else u
        neg = 0.0 if self.even else max(0.0, -float(u.min()))
        lin = u @ t if self.even else u @ (1.0 + t)
        excess = max(0.0, float(np.max(np.cumsum(np.sort(mag)[::-1]) - self._sigma_cum)))
        omega = self._omega(t)
        compl = abs(float(lin) - omega) / max(1.0, abs(omega))
        lam = -u
        sl = self.s * lam
        gw = np.asarray(self.X.T @ sl).ravel()
        gb = float(sl.sum()) if self.fit_intercept else 0.0
        pen = float(np.hypot(self.penalty.subgradient_distance(w, gw), gb))
        return max(n * neg, n * excess, n * total, compl, pen)
