"""Primal active-set walk over tie groups, for the smooth losses of the polisher.

The polisher (:class:`skrank.solvers._polish.Polisher`) solves ``F`` on a
face: the blocks of tied losses (and, with an l1 part, the zero set).  Read
from an approximate solution, that face is ambiguous near the jump of a
superquantile: samples that are not tied at the optimum have losses as close
to the quantile as those that are.  This walk finds the face instead, from
the approximate point ``(w, b)`` (used by
:meth:`skrank.solvers._polish.Polisher.from_iterate` after SOREL, and by the
ADMM for the smooth losses):

1. solve ``F`` on the current face (:meth:`Polisher._face`), ties given by
   the current groups, ranks by the current order of the losses;
2. move towards that solution until two samples on either side of a rank at
   which ``sigma`` jumps reach equal losses (a ratio test on the loss
   arguments, which are linear along the segment); they form, or join, a tie
   group, and the walk goes back to 1;
3. at the face solution, when a group's loss weights (the KKT multipliers,
   ``lambda_i = u_i / l'(t_i)``) leave the permutahedron of ``sigma`` over
   the group's ranks, the group is split at its most violated prefix
   inequality: the members of smallest weight form a group of the lower
   ranks.  Where the next step would undo the split at once (a degenerate
   face, whose multipliers are not unique), the next violated cut is tried.

With an l1 part the zero set moves too: a coefficient that would change
sign during a step is held at zero (an event of the ratio test), and at a
face solution a held coefficient whose smooth gradient exceeds the l1
strength is released with the sign that lowers ``F``.

Each face solve is exact for the squared loss and Newton's method otherwise.
The walk ends at a point whose KKT certificate holds (the optimum), or after
``max_steps`` face solves.  It is the standard primal active-set method for a
convex piecewise-smooth problem, with the pieces given by the order of the
losses; the ordering is monotone in ``u = sign(t) t`` for the even losses and
in ``t`` for the logistic loss, so the ratio test is linear in the step.
"""

import numpy as np
import scipy.linalg

from ..losses import SQUARED


def _snap(u, gid):
    """``u`` with every group set to its mean."""
    size = np.bincount(gid)
    mean = np.bincount(gid, weights=u) / np.maximum(size, 1)
    return mean[gid]


def _first_crossing(uo, do, go, jumps, window=32, budget=4096, max_pairs=1 << 20):
    """First ``s`` in ``(0, 1)`` at which the order across a jump of ``sigma`` changes.

    ``uo``, ``do``, ``go``: the key, its rate of change and the group of each
    sample, in ascending order of the key (groups contiguous).  At each
    rank ``k`` of ``jumps``, samples below and above ``k`` in different groups
    cross at ``s = (u_j - u_i) / (d_i - d_j)`` when ``d_i > d_j``.  Only the
    samples within ``width`` positions of ``k`` are paired (``width`` up to
    ``window``, at most ``budget`` pairs in all); the result is verified on
    all samples (prefix maxima against suffix minima: two lines cross at
    most once) and the width grows until it holds.  Returns ``(s, i, j)``
    with positions in the order, or ``(1.0, -1, -1)`` when nothing crosses
    before ``s = 1``, or ``(0.0, -2, -2)`` when more than ``max_pairs``
    pairs would be needed (keys crowded around a jump, e.g. every loss
    nearly tied): the caller gives up.
    """
    n = uo.shape[0]
    width = max(1, min(window, int(np.sqrt(budget / max(jumps.size, 1)))))
    while True:
        offs = np.arange(width)
        low = (jumps[:, None] - 1 - offs[None, :])  # (J, width): positions below k
        high = (jumps[:, None] + offs[None, :])     # positions at or above k
        low_ok, high_ok = low >= 0, high < n
        low, high = np.clip(low, 0, n - 1), np.clip(high, 0, n - 1)
        i = low[:, :, None]
        j = high[:, None, :]
        rate = do[i] - do[j]
        ok = (rate > 0.0) & (go[i] != go[j]) & low_ok[:, :, None] & high_ok[:, None, :]
        s = np.where(ok, np.maximum(uo[j] - uo[i], 0.0) / np.where(ok, rate, 1.0), np.inf)
        flat = int(np.argmin(s)) if s.size else 0
        s_best = min(float(s.flat[flat]), 1.0) if s.size else 1.0
        if width >= n:
            break
        at = uo + s_best * do
        pmax = np.maximum.accumulate(at)
        smin = np.minimum.accumulate(at[::-1])[::-1]
        scale = np.maximum(np.abs(pmax[jumps - 1]), 1e-300)
        if np.all(pmax[jumps - 1] <= smin[jumps] + 1e-12 * scale):
            break
        width *= 4
        if jumps.size * min(width, n) ** 2 > max_pairs:
            return 0.0, -2, -2
    if s.size == 0 or not np.isfinite(s.flat[flat]) or s.flat[flat] >= 1.0:
        return 1.0, -1, -1
    jj, a, c = np.unravel_index(flat, s.shape)
    return s_best, int(low[jj, a]), int(high[jj, c])


def tie_walk(polisher, t, w, b, tol, max_steps=None, max_work=None):
    """Walk from ``(w, b)`` (loss arguments ``t``) to the optimum's face; see the module docstring.

    Returns ``(w, b, certified, residual, t, lambda)`` as
    :meth:`Polisher._face` does, or None when the walk gives up: after
    ``max_steps`` face solves (default ``4 p + 16``), or once its
    multiply-adds (counted in ``polisher.work``) exceed ``max_work``.
    """
    P = polisher
    if not P.smooth:
        return None
    n = t.shape[0]
    sigma = P.sigma
    total = float(sigma.sum())
    jumps = np.flatnonzero(np.diff(sigma) > 1e-12 * max(total, 1e-300)) + 1
    if jumps.size == 0:
        return None
    A = _design(P)
    p = A.shape[1]
    if max_steps is None:
        max_steps = 4 * p + 16
    t = np.asarray(t, dtype=np.float64)
    x = np.append(w, b) if P.fit_intercept else np.array(w, dtype=np.float64)
    sgn = P._signs(t)
    # samples with equal rows of [A, c] (duplicates) have equal losses at every
    # point: they form one group from the start and are never split
    _, atom = np.unique(np.column_stack([A, P.c]), axis=0, return_inverse=True)
    atom = atom.ravel()
    gid = atom.copy()
    quad = _QuadraticFace(P, A) if P.loss.code == SQUARED else None
    keys = _Keys(P, A, sgn, x, sgn * t)
    undo = None
    # l1: coefficients at zero are held there, the others keep their sign
    d = P.X.shape[1]
    l1 = float(P.penalty.l1)
    held = np.zeros(p, dtype=bool)
    sign_w = np.zeros(p)
    if l1 > 0.0:
        held[:d] = x[:d] == 0.0
        sign_w[:d] = np.sign(x[:d])
    released = -1
    order = np.lexsort((gid, keys.u))
    stop_at = np.inf if max_work is None else P.work + max_work
    for _ in range(max_steps):
        if P.work > stop_at:
            return None
        # the tie rows' factorisation in the face solve: p^2 per tied sample
        P.work += int(np.count_nonzero(np.bincount(gid)[gid] >= 2)) * p * p
        # the order changes little per step: a stable sort from the last one is O(n)
        order = order[np.argsort(_snap(keys.u, gid)[order], kind="stable")]
        _dissolve_flat(gid, atom, order, sigma)
        if quad is not None:
            face = quad.solve(order, gid, sgn, x, held, l1 * sign_w)
            if face is None:
                return None
            x_f = face[0]
            live = keys.live(order, jumps, x, x_f, np.bincount(gid)[gid] >= 2)
            u_x, u_f = keys.at_current(live, x), keys.exact(live, x_f)
        else:
            out = P._face(sgn * _snap(keys.u, gid), x[:P.X.shape[1]], tol,
                          float(x[-1]) if P.fit_intercept else 0.0)
            if out is None or out[2]:
                return out
            x_f = np.append(out[0], out[1]) if P.fit_intercept else out[0]
            live = np.arange(n)
            u_x, u_f = _snap(keys.u, gid), sgn * out[4]
            P.work += n * p  # the loss arguments of the face solution
        # ratio test among the live samples, in the current order
        pos = np.empty(n, dtype=np.int64)
        pos[order] = np.arange(n)
        srt = np.argsort(pos[live], kind="stable")
        rows = live[srt]
        u0 = _snap_subset(u_x[srt], gid[rows])
        du = u_f[srt] - u0
        cut_at = np.unique(np.searchsorted(pos[rows], jumps))
        cut_at = cut_at[(cut_at > 0) & (cut_at < rows.size)]
        s, i, j = _first_crossing(u0, du, gid[rows], cut_at)
        if i == -2:
            return None
        if l1 > 0.0:
            # a free coefficient that reaches zero (its sign would change) is held there
            dx = x_f[:d] - x[:d]
            leave = (~held[:d]) & (np.sign(x_f[:d]) != sign_w[:d]) & (dx != 0.0)
            if leave.any():
                s_zero = np.where(leave, -x[:d] / np.where(leave, dx, 1.0), np.inf)
                jz = int(np.argmin(s_zero))
                if s_zero[jz] <= s:
                    if jz == released and s_zero[jz] <= 1e-12:
                        return None  # released and held again at once: give up
                    x = x + s_zero[jz] * (x_f - x)
                    x[jz] = 0.0
                    held[jz], sign_w[jz] = True, 0.0
                    keys.moved(rows, u0 + s_zero[jz] * du)
                    released = -1
                    continue
        if i >= 0:
            gi, gj = gid[rows[i]], gid[rows[j]]
            if undo is not None and {gi, gj} == undo[0] and s < 1e-6:
                # the split is undone at once (a degenerate face, whose
                # multipliers are not unique): try the next cut instead
                _, gid, u_saved, cuts = undo
                keys.restore(u_saved)
                if not cuts:
                    return None
                undo = _apply_cut(cuts, gid, keys.u)
                continue
            x = x + s * (x_f - x)
            keys.moved(rows, u0 + s * du)
            gid[gid == gj] = gi
            undo = None
            continue
        x = x_f
        keys.moved(rows, u_f[srt])
        order = order[np.argsort(_snap(keys.u, gid)[order], kind="stable")]
        if quad is not None:
            t_f = np.zeros(n)
            t_f[rows] = sgn[rows] * u_f[srt]
            grad = quad.gradient(face, t_f)
        else:
            t_f, grad = out[4], -np.asarray(out[5])
        if l1 > 0.0 and held.any():
            # a held coefficient whose smooth gradient exceeds l1 is released
            if quad is not None:
                t_full = A @ x + P.c
                g = A.T @ quad.gradient(face, t_full)
                P.work += 2 * n * p
            else:
                g = A.T @ grad
                P.work += n * p
            g[:d] += P.penalty.l2 * x[:d]
            excess = np.where(held, np.abs(g) - l1, -np.inf)
            jr = int(np.argmax(excess))
            if excess[jr] > 1e-9 * max(l1, float(np.max(np.abs(g)))):
                held[jr], sign_w[jr] = False, -np.sign(g[jr])
                released = jr
                continue
        cuts = _violated_cuts(P, gid, atom, grad, t_f, order)
        if not cuts:
            # no crossing and feasible weights: the KKT point of F (certified here)
            return quad.certify(face, tol) if quad is not None else out
        undo = _apply_cut(cuts, gid, keys.u)
    return None


def _snap_subset(u, g):
    """``u`` with the entries of equal ``g`` set to their mean."""
    _, inv = np.unique(g, return_inverse=True)
    return _snap(u, inv.ravel())


class _Keys:
    """The keys ``u_i = sign(t_i) t_i`` of the walk, exact only where they matter.

    A key moves by at most ``rho_i ||x - x_ref||`` (``rho_i`` the norm of
    ``a_i``) from its exact value at the reference point ``x_ref``.  The walk
    needs exact keys only for samples that may cross a jump of ``sigma``
    between the current point and the face solution (screened by these
    bounds) and for the members of tie groups; the others keep a stale key
    that the bounds place on the right side of every jump.  The reference is
    refreshed (one ``O(n p)`` evaluation) when more than a quarter of the
    samples would have to be evaluated.
    """

    def __init__(self, P, A, sgn, x, u):
        self.P, self.A, self.sgn = P, A, sgn
        self.rho = np.sqrt(np.einsum("ij,ij->i", A, A))
        self.x_ref, self.u_ref, self.u = np.array(x, dtype=np.float64), u.copy(), u.copy()
        self.fresh = np.ones(u.shape[0], dtype=bool)  # u exact at the current point
        self.radius = 0.0

    def at_current(self, rows, x):
        """Exact keys of ``rows`` at the current point ``x`` (evaluated where stale)."""
        stale = rows[~self.fresh[rows]]
        if stale.size:
            self.u[stale] = self.exact(stale, x)
            self.fresh[stale] = True
        return self.u[rows]

    def restore(self, u):
        """Keys saved before a cut (the point did not move; exact ones are evaluated again)."""
        self.u[:] = u
        self.fresh[:] = False

    def moved(self, rows, u):
        """The walk moved; ``u`` are the exact keys of ``rows`` at the new point."""
        self.fresh[:] = False
        self.u[rows] = u
        self.fresh[rows] = True

    def exact(self, rows, x):
        self.P.work += rows.size * self.A.shape[1]
        return self.sgn[rows] * (self.A[rows] @ x + self.P.c[rows])

    def live(self, order, jumps, x, x_f, keep):
        """Samples that may cross a jump on the segment ``[x, x_f]``, and those of ``keep``."""
        n = order.shape[0]
        for attempt in range(2):
            radius = max(self.radius, float(np.linalg.norm(x - self.x_ref)),
                         float(np.linalg.norm(x_f - self.x_ref)))
            lo = (self.u_ref - self.rho * radius)[order]
            hi = (self.u_ref + self.rho * radius)[order]
            top_below = np.maximum.accumulate(hi)  # over positions < k: top_below[k - 1]
            low_above = np.minimum.accumulate(lo[::-1])[::-1]  # over positions >= k
            at = np.arange(n)
            nxt = np.searchsorted(jumps, at, side="right")  # first jump above each position
            prv = nxt - 1  # last jump at or below it
            below = (nxt < jumps.size) & (hi >= low_above[jumps[np.minimum(nxt, jumps.size - 1)]])
            above = (prv >= 0) & (lo <= top_below[jumps[np.maximum(prv, 0)] - 1])
            live = order[below | above | keep[order]]
            if live.size <= n // 4 or attempt == 1:
                break
            # too many: exact keys at x, the bounds start again from there
            self.x_ref = np.array(x, dtype=np.float64)
            self.u_ref = self.exact(np.arange(n), x)
            self.u = self.u_ref.copy()
            self.fresh[:] = True
            self.radius = 0.0
        self.radius = radius
        return live


def _dissolve_flat(gid, atom, order, sigma):
    """Groups over whose ranks ``sigma`` is constant are no constraint: back to their atoms."""
    go = gid[order]
    start = np.flatnonzero(np.concatenate([[True], go[1:] != go[:-1]]))
    stop = np.append(start[1:], go.size)
    multi = stop - start >= 2
    start, stop = start[multi], stop[multi]
    flat = sigma[stop - 1] - sigma[start] <= 1e-12 * float(sigma.max())  # sigma is sorted
    for r, e in zip(start[flat], stop[flat]):
        members = order[r:e]
        gid[members] = atom[members]


def _apply_cut(cuts, gid, u):
    """Split off the members of ``cuts[0]`` (in place); the state to undo it, with the other cuts."""
    saved = (gid.copy(), u.copy(), cuts[1:])
    members = cuts[0]
    old = gid[members[0]]
    gid[members] = gid.max() + 1
    # just below the rest of their old group, so that the next face solve
    # ranks them there
    u[members] -= 1e-9 * np.maximum(1.0, np.abs(u[members]))
    return ({old, gid[members[0]]},) + saved


def _violated_cuts(P, gid, atom, grad, t, order, most=4):
    """Splits of tie groups whose loss weights leave the permutahedron, most violated first.

    ``grad`` is ``dOmega/dt`` at the face solution; the weights are
    ``grad / l'(t)``.  A group of ranks ``r .. r + m - 1`` needs the sum of
    any ``q`` of its weights at least the sum of ``sigma[r : r + q]`` (and
    then the other ``m - q`` at most that of the top ranks: the totals are
    equal).  Samples of one ``atom`` (duplicates) stay together: the cuts
    are those of the atoms in ascending order of their mean weight.  Returns
    up to ``most`` arrays of members: those below a violated cut, which are
    to go below the rest of their group.
    """
    weights = P._weights_from_gradient(grad, t)
    sigma = P.sigma
    go = gid[order]
    starts = np.flatnonzero(np.concatenate([[True], go[1:] != go[:-1]]))
    stops = np.append(starts[1:], go.size)
    multi = stops - starts >= 2
    found = []
    for r, e in zip(starts[multi], stops[multi]):
        members = order[r:e]
        _, inv = np.unique(atom[members], return_inverse=True)
        inv = inv.ravel()
        w_sum = np.bincount(inv, weights=weights[members])
        count = np.bincount(inv)
        if count.size < 2:
            continue
        srt = np.argsort(w_sum / count, kind="stable")
        cut = np.cumsum(count[srt])[:-1]  # ranks below each cut, within the group
        slack = np.cumsum(w_sum[srt])[:-1] - np.cumsum(sigma[r:e])[cut - 1]  # must be >= 0
        for q in np.flatnonzero(slack < -1e-9 * float(sigma.max())):
            found.append((slack[q], members[np.isin(inv, srt[: q + 1])]))
    found.sort(key=lambda f: f[0])
    return [f[1] for f in found[:most]]


def _design(P):
    """``A = s [X, 1]`` (dense; the intercept column only with ``fit_intercept``)."""
    n, d = P.X.shape
    X = P.X.toarray() if hasattr(P.X, "toarray") else np.asarray(P.X)
    A = np.empty((n, d + int(P.fit_intercept)))
    A[:, :d] = X
    if P.fit_intercept:
        A[:, d] = 1.0
    return A * P.s[:, None]


class _QuadraticFace:
    """Face solves for the squared loss with an l2 penalty, from groups given explicitly.

    The face problem is a quadratic: ``min 1/2 sum_i omega_i t_i^2 +
    l2/2 ||w||^2`` with ``t = A x + c``, ``x = (w, b)``, subject to
    ``sign(t_i) t_i = sign(t_r) t_r`` inside every group over whose ranks
    ``sigma`` varies (``r`` its first member); ``omega_i`` is the mean of
    ``sigma`` over the ranks of ``i``'s group.  ``G = A^T diag(omega) A`` and
    ``A^T (omega c)`` are kept between solves and updated for the samples
    whose ``omega`` changed (a walk step changes few), so a solve costs
    ``O(k p^2 + p^3)`` for ``k`` changed weights; the loss arguments are
    evaluated by the caller where it needs them, all of them only for the
    certificate.
    """

    def __init__(self, polisher, A):
        P = self.P = polisher
        n, d = P.X.shape
        self.p = A.shape[1]
        self.A = A
        self.D = np.zeros(self.p)
        self.D[:d] = P.penalty.l2
        self.omega = np.zeros(n)
        self.G = np.zeros((self.p, self.p))
        self.h = np.zeros(self.p)

    def _update(self, omega):
        A, c = self.A, self.P.c
        changed = np.flatnonzero(omega != self.omega)
        if changed.size > omega.shape[0] // 4:
            nz = np.flatnonzero(omega)
            An = A[nz]
            self.G = An.T @ (omega[nz, None] * An)
            self.h = An.T @ (omega[nz] * c[nz])
            self.P.work += nz.size * self.p * self.p
        elif changed.size:
            delta = omega[changed] - self.omega[changed]
            Ak = A[changed]
            self.G += Ak.T @ (delta[:, None] * Ak)
            self.h += Ak.T @ (delta * c[changed])
            self.P.work += changed.size * self.p * self.p
        self.omega = omega

    def gradient(self, face, t):
        """``dOmega/dt`` at the face solution, on the rows where ``t`` is given.

        ``omega t`` plus the ties' terms.
        """
        _, omega, tie_i, tie_r, nu = face
        grad = omega * t
        if nu is not None:
            sgn = self.sgn
            np.add.at(grad, tie_i, nu * sgn[tie_i])
            np.add.at(grad, tie_r, -nu * sgn[tie_r])
        return grad

    def certify(self, face, tol):
        """``(w, b, certified, residual, t, lambda)`` at the face solution, with its KKT certificate."""
        P, x = self.P, face[0]
        t = self.A @ x + P.c
        grad = self.gradient(face, t)
        d = P.X.shape[1]
        w = x[:d].copy()
        b = float(x[d]) if P.fit_intercept else 0.0
        residual = P._certificate(grad, t, w)
        P.work += 2 * t.shape[0] * self.p  # t = A x and the certificate's X^T lambda
        return w, b, residual <= tol, residual, t, -grad

    def solve(self, order, gid, sgn, x, held=None, lin=None):
        """``(x, omega, tie_i, tie_r, nu)``: the minimiser on the face of the groups ``gid``.

        ``order`` sorts the samples by loss, groups contiguous; ``x`` is the
        current point ``(w, b)``, projected onto the face first; ``nu`` are
        the multipliers of the tie rows ``sign(t_i) a_i - sign(t_r) a_r``.
        With an l1 part, the coordinates ``held`` stay at zero and ``lin``
        is the l1 term's gradient on the others (``l1 sign(w_j)``).
        """
        P, A, c = self.P, self.A, self.P.c
        self.sgn = sgn
        n = order.shape[0]
        sigma = P.sigma
        go = gid[order]
        start = np.concatenate([[True], go[1:] != go[:-1]])
        blk = np.cumsum(start) - 1
        size = np.bincount(blk)
        sig_sum = np.bincount(blk, weights=sigma)
        spread = np.maximum.reduceat(sigma, np.flatnonzero(start)) - np.minimum.reduceat(
            sigma, np.flatnonzero(start))
        omega = np.empty(n)
        omega[order] = (sig_sum / size)[blk]
        self._update(omega)
        tied = (size[blk] >= 2) & (spread[blk] > 1e-12 * float(sigma.max())) & ~start
        rep_pos = np.flatnonzero(start)[blk]
        tie_i, tie_r = order[tied], order[rep_pos[tied]]
        E = sgn[tie_i, None] * A[tie_i] - sgn[tie_r, None] * A[tie_r]
        e = sgn[tie_r] * c[tie_r] - sgn[tie_i] * c[tie_i]
        n_ties = E.shape[0]
        if held is not None and held.any():
            E = np.vstack([E, np.eye(self.p)[held]])
            e = np.concatenate([e, np.zeros(int(held.sum()))])
        if lin is None:
            lin = np.zeros(self.p)
        H = self.G + np.diag(self.D)
        x = np.array(x, dtype=np.float64)
        if E.shape[0]:
            x = x - scipy.linalg.lstsq(E, E @ x - e, cond=1e-10, check_finite=False)[0]
            R = E if E.shape[0] <= self.p else np.linalg.qr(E, mode="r")
            _, S, Vt = np.linalg.svd(R, full_matrices=True)
            rank = int(np.sum(S > S[0] * 1e-10)) if S.size and S[0] > 0 else 0
            N = Vt[rank:].T
        else:
            N = np.eye(self.p)
        if N.shape[1]:
            g = N.T @ (H @ x + self.h + lin)
            ev, U = np.linalg.eigh(N.T @ H @ N)
            flat = ev <= 1e-12 * max(float(ev[-1]), 0.0) + 1e-300
            gu = U.T @ g
            if np.linalg.norm(gu[flat]) > 1e-12 * max(1.0, float(np.linalg.norm(gu))):
                # no curvature along some directions of the face (l1 without l2,
                # few samples of nonzero weight) and a slope there: a ray, which
                # the walk's ratio test stops at the first event
                ray = N @ -(U[:, flat] @ gu[flat])
                x = x + ray * (1e3 * (1.0 + float(np.linalg.norm(x))) / float(np.linalg.norm(ray)))
            else:
                x = x - N @ (U[:, ~flat] @ (gu[~flat] / ev[~flat]))
        if not np.all(np.isfinite(x)):
            return None
        if held is not None:
            x[held] = 0.0  # exactly: the penalty's subgradient test reads w_j == 0
        nu = None
        if n_ties:
            # stationarity A^T (omega t) + D x + lin + E^T nu = 0 (the held rows' part unused)
            nu = scipy.linalg.lstsq(E.T, -(H @ x + self.h + lin), cond=1e-10,
                                    check_finite=False)[0][:n_ties]
        return x, omega, tie_i, tie_r, nu
