"""The active-set walk of the piecewise-linear finish (hinge loss).

A primal active-set method that finds the face of the optimum near an ADMM
iterate, with the tie blocks held or released.  It is described in the
user guide, :ref:`methods-piecewise-linear-finish`.
"""

from typing import NamedTuple

import numpy as np
import scipy.linalg

from ._constants import (
    AT_KINK,
    FLAT,
    INTERIOR_FLOOR,
    NEAR_KINK,
    NUDGE,
    RELEASE_STEPS,
    RELEASE_STEPS_PER_PIECE,
    START_RANK,
    TAU_PIECES_MIN,
    TAU_PIECES_PER_SAMPLE,
    TAUS_PER_COEF,
    TINY,
    WALK_STEPS,
    WALK_STEPS_PER_PIECE,
    ZERO_COEF,
)
from ._faces import TieBlocks, project_onto_face
from .walk_kernel import WALK_OK, WALK_OUT_OF_STEPS, walk_loop


class _Taus(NamedTuple):
    """The released tie blocks: one ``tau`` per jump of ``sigma``, one piece per member and jump."""

    hi: np.ndarray  # per jump: its slope, the jump of sigma
    count: np.ndarray  # per jump: the block's ranks above it
    tau0: np.ndarray  # per jump: the starting tau, the block's loss
    below: np.ndarray  # per jump: the block's jumps below it, summed
    member: np.ndarray  # per piece: its sample
    jump: np.ndarray  # per piece: its jump
    released: np.ndarray  # per block: whether it is released


class _Face(NamedTuple):
    """The face the walk starts from, read from ``z``."""

    at_kink: np.ndarray  # per sample: on the kink
    blocks: TieBlocks  # the blocks of tied losses
    omega: np.ndarray  # per sample: the mean rank weight of its block (0 for zero losses)
    tied_sorted: np.ndarray  # per sorted position: held in its tie block
    tied: np.ndarray  # per sample: held in its tie block
    tie_i: np.ndarray  # the tie constraints t_i = t_r ...
    tie_r: np.ndarray  # ... with their representatives
    taus: _Taus  # the released blocks
    s_first: np.ndarray  # per released member: its block's lowest rank weight
    pts: np.ndarray  # the samples that are pieces
    hi_pts: np.ndarray  # their upper slopes


class _Model(NamedTuple):
    """The walk's problem in the unknowns ``y`` (``x = x0 + N y``) and the taus."""

    A: np.ndarray  # s [X, 1]
    x: np.ndarray  # x0, the point on the tie constraints
    N: np.ndarray  # the null space of the tie constraints
    q: np.ndarray  # gradient of the smooth part at y = 0
    Q: np.ndarray  # its Hessian
    R: np.ndarray  # rows of the pieces
    r0: np.ndarray  # their values at y = 0
    lo: np.ndarray  # their slopes below ...
    hi: np.ndarray  # ... and above the kink


def walk_face(fin, z, w, b, u=None, release=False):
    """Solve ``F`` near the face read from ``z`` by the primal active-set walk.

    Parameters
    ----------
    fin : PiecewiseLinearFinish
        The finish (hinge loss).
    z : ndarray of shape (n,)
        The loss arguments that give the face.
    w : ndarray of shape (d,)
        The coefficients to start from.
    b : float
        The intercept to start from.
    u : ndarray of shape (n,) or None, default=None
        An estimate of ``dOmega/dt``: the walk starts from the kink pieces
        whose estimated multiplier lies well inside its range.
    release : bool, default=False
        Release the tie blocks into tau pieces (see the user guide).

    Returns
    -------
    tuple or None
        ``(zc, w, b)``, the face found (for the face solve of the finish,
        which solves and certifies it) and the walk's point, or None:
        the walk failed, ran out of steps (``fin.walk_out_of_steps``), or
        with ``release`` no block is released (the walk would be the same).
    """
    face = _read_face(fin, np.asarray(z, dtype=np.float64), release)
    if face is None:
        return None
    model = _model(fin, face, w, b)
    if model is None:
        return None
    inW, y = _start(fin, face, model, w, u)
    P = model.R.shape[0]
    walk_max = WALK_STEPS + int(WALK_STEPS_PER_PIECE * P)
    if release:
        walk_max = RELEASE_STEPS + int(RELEASE_STEPS_PER_PIECE * P)
    code, y, inW, up, r = walk_loop(
        np.ascontiguousarray(model.R), model.r0, model.lo, model.hi, model.q,
        np.ascontiguousarray(model.Q), inW, y, walk_max, fin.penalty.l2 > 0.0,
    )
    if code != WALK_OK:
        # out of steps, or a working set turned numerically dependent
        fin.walk_out_of_steps = code == WALK_OUT_OF_STEPS
        return None
    return _end_face(fin, face, model, y, inW, up, r)


def _read_face(fin, z, release):
    """The blocks, kink points and pieces read from ``z`` (None: ``release`` releases nothing)."""
    n = z.shape[0]
    sigma = fin.sigma
    L = fin.loss.value(z)
    at_kink = np.abs(z - fin.kink) <= AT_KINK
    active = (L > 0.0) & ~at_kink
    blocks = TieBlocks(L)
    order, bid = blocks.order, blocks.bid
    act_sorted = active[order]
    omega = blocks.mean_weights(sigma, act_sorted)
    tied_sorted = act_sorted & ~blocks.flat(sigma)[bid] & (blocks.sizes()[bid] >= 2)
    taus = _release(fin, blocks, tied_sorted) if release else _no_taus(blocks)
    if release and not taus.hi.size:
        return None
    rel_sorted = tied_sorted & taus.released[bid]
    tied_sorted = tied_sorted & ~taus.released[bid]
    tied = np.zeros(n, dtype=bool)
    tied[order] = tied_sorted
    tie_i, tie_r = blocks.pairs(tied_sorted)
    n_zero = int(np.sum(~active))
    h0 = float(sigma[n_zero - 1]) if n_zero else 0.0
    hi_pt = np.where(active, omega, h0)
    # a released member weighs its block's lowest rank weight (the jumps
    # above it are the tau pieces' slopes)
    s_first = np.zeros(n)
    s_first[order[rel_sorted]] = sigma[blocks.starts[bid[rel_sorted]]]
    hi_pt[order[rel_sorted]] = s_first[order[rel_sorted]]
    pts = np.flatnonzero(~tied & (hi_pt > 0.0))
    return _Face(at_kink, blocks, omega, tied_sorted, tied, tie_i, tie_r, taus, s_first, pts,
                 hi_pt[pts])


def _no_taus(blocks):
    """No block released."""
    empty = np.zeros(0)
    index = np.zeros(0, dtype=np.int64)
    return _Taus(empty, empty, empty, empty, index, index, np.zeros(blocks.n_blocks, dtype=bool))


def _release(fin, blocks, tied_sorted):
    """The tie blocks released into tau pieces, within the budgets of pieces and taus."""
    n, d = fin.X.shape
    sigma = fin.sigma
    released = np.zeros(blocks.n_blocks, dtype=bool)
    budget = max(TAU_PIECES_MIN, int(TAU_PIECES_PER_SAMPLE * n))
    budget_tau = int(TAUS_PER_COEF * (d + int(fin.fit_intercept)))
    j_hi, j_cnt, j_tau0, j_below, member, jump = [], [], [], [], [], []
    for kb in np.unique(blocks.bid[tied_sorted]):
        s0, s1 = int(blocks.starts[kb]), int(blocks.stops[kb])
        ds = np.diff(sigma[s0:s1])
        jmp = np.flatnonzero(ds > FLAT * fin._sigma_total)
        if jmp.size * (s1 - s0) > budget or jmp.size > budget_tau:
            continue
        budget -= jmp.size * (s1 - s0)
        budget_tau -= jmp.size
        released[kb] = True
        below = np.concatenate([[0.0], np.cumsum(ds[jmp])[:-1]])
        for jj, j in enumerate(jmp):
            # the jump lies above block rank j: (s1 - s0 - 1 - j) ranks over it
            member.append(blocks.order[s0:s1])
            jump.append(np.full(s1 - s0, len(j_hi), dtype=np.int64))
            j_hi.append(float(ds[j]))
            j_cnt.append(float(s1 - s0 - 1 - j))
            j_tau0.append(float(blocks.sorted[s0]))
            j_below.append(float(below[jj]))
    if not j_hi:
        return _no_taus(blocks)
    return _Taus(np.array(j_hi), np.array(j_cnt), np.array(j_tau0), np.array(j_below),
                 np.concatenate(member), np.concatenate(jump), released)


def _model(fin, face, w, b):
    """The walk's model of ``F`` on the tie constraints of ``face`` (None: nothing to walk)."""
    d = fin.X.shape[1]
    A = fin._matrix(np.arange(d))
    p = A.shape[1]
    cc = fin.c
    l1, l2 = fin.penalty.l1, fin.penalty.l2
    taus, pts = face.taus, face.pts
    x = np.zeros(p)
    x[:d] = w
    if fin.fit_intercept:
        x[d] = b
    if face.tie_i.size:
        E = A[face.tie_i] - A[face.tie_r]
        N, x = project_onto_face(E, cc[face.tie_r] - cc[face.tie_i], x)
    else:
        N = np.eye(p)
    k0, nj = N.shape[1], taus.hi.size
    k = k0 + nj  # the walk's unknowns: y (x = x0 + N y), then the taus (tau0 + y)
    if k == 0:
        return None
    Hdiag = np.zeros(p)
    Hdiag[:d] = l2
    q = np.concatenate([N.T @ (A.T @ np.where(face.tied, face.omega, 0.0) + Hdiag * x),
                        taus.count * taus.hi])
    Q = np.zeros((k, k))
    Q[:k0, :k0] = N.T @ (Hdiag[:, None] * N)
    rows = [np.hstack([A[pts] @ N, np.zeros((pts.size, nj))])]
    r0 = [A[pts] @ x + cc[pts] + 1.0]
    lo = [np.zeros(pts.size)]
    hi = [face.hi_pts]
    if l1 > 0.0:
        rows.append(np.hstack([N[:d], np.zeros((d, nj))]))
        r0.append(x[:d].copy())
        lo.append(np.full(d, -l1))
        hi.append(np.full(d, l1))
    if nj:  # the tau pieces: r = 1 + t_i - tau_j
        Rt = np.zeros((taus.member.size, k))
        Rt[:, :k0] = A[taus.member] @ N
        Rt[np.arange(taus.member.size), k0 + taus.jump] = -1.0
        rows.append(Rt)
        r0.append(A[taus.member] @ x + cc[taus.member] + 1.0 - taus.tau0[taus.jump])
        lo.append(np.zeros(taus.member.size))
        hi.append(taus.hi[taus.jump])
    R = np.concatenate(rows)
    if R.shape[0] == 0:
        return None
    return _Model(A, x, N, q, Q, R, np.concatenate(r0), np.concatenate(lo), np.concatenate(hi))


def _start(fin, face, model, w, u):
    """The starting working set (a linearly independent set of pieces at their kink) and ``y``.

    The candidates are the kink points, the zero coordinates of ``w`` (l1)
    and the members of the released tie blocks.  With an estimate ``u`` of
    ``dOmega/dt`` those whose estimated multiplier lies well inside
    ``[lo, hi]`` come first: those at an end of their range are the
    likeliest to leave the kink (the z-step snaps the points near it onto
    it).
    """
    d = fin.X.shape[1]
    l1 = fin.penalty.l1
    taus, pts, R = face.taus, face.pts, model.R
    cand = np.concatenate(
        [face.at_kink[pts], (w == 0.0) if l1 > 0.0 else np.zeros(0, dtype=bool),
         np.ones(taus.member.size, dtype=bool)]
    )
    cand = np.flatnonzero(cand)
    inW = np.zeros(R.shape[0], dtype=bool)
    y = np.zeros(R.shape[1])
    if not cand.size:
        return inW, y
    Rc = R[cand].T
    if u is not None:
        u = np.asarray(u, dtype=np.float64)
        mu = np.concatenate([u[pts], -(model.A[:, :d].T @ u) if l1 > 0.0 else np.zeros(0)])
        if taus.hi.size:
            # a member's weight above its lowest rank weight fills its
            # block's jumps from the bottom
            ex = u[taus.member] - face.s_first[taus.member] - taus.below[taus.jump]
            mu = np.concatenate([mu, np.clip(ex, 0.0, taus.hi[taus.jump])])
        wt = _interior(mu[cand], model.lo[cand], model.hi[cand]) + INTERIOR_FLOOR
        Rc = Rc * (wt / np.maximum(np.linalg.norm(Rc, axis=0), TINY))
    _, Rq, piv = scipy.linalg.qr(Rc, mode="economic", pivoting=True)
    dg = np.abs(np.diag(Rq))
    rank = int(np.sum(dg > dg[0] * START_RANK)) if dg.size and dg[0] > 0 else 0
    Wi = cand[piv[:rank]]
    inW[Wi] = True
    y = -np.linalg.lstsq(R[Wi], model.r0[Wi], rcond=None)[0]
    return inW, y


def _interior(mu, lo, hi):
    """How far inside ``[lo, hi]`` (0 to 1/2) the estimated multipliers ``mu`` of start candidates lie.

    The multiplier of a kink point is its ``u_i``, that of a zero
    coordinate ``w_j`` (l1) is ``-(A^T u)_j``, that of a tau piece the
    member's weight above its block's lowest rank weight, filling the
    block's jumps from the bottom.
    """
    width = np.maximum(hi - lo, TINY)
    return np.clip(np.minimum(mu - lo, hi - mu) / width, 0.0, 0.5)


def _end_face(fin, face, model, y, inW, up, r):
    """``(zc, w, b)``: the face the walk ended on, for the face solve, and its point."""
    d = fin.X.shape[1]
    k0 = model.N.shape[1]
    xf = model.x + model.N @ y[:k0]
    wf = xf[:d].copy()
    bf = float(xf[d]) if fin.fit_intercept else 0.0
    t = model.A @ xf + fin.c
    zc = t.copy()
    pts, npt = face.pts, face.pts.size
    Wp, rp, upp = inW[:npt], r[:npt], up[:npt]
    if face.tie_i.size:
        blocks, tied_sorted = face.blocks, face.tied_sorted
        m = blocks.sizes(np.where(tied_sorted, t[blocks.order], 0.0))
        m /= np.maximum(blocks.sizes(tied_sorted), 1.0)
        zc[blocks.order[tied_sorted]] = m[blocks.bid[tied_sorted]]
    if face.taus.hi.size:
        off = model.R.shape[0] - face.taus.member.size
        _join_tau_blocks(zc, t, face.taus, inW[off:])
    zc[pts[Wp]] = fin.kink
    near = ~Wp & (np.abs(rp) <= NEAR_KINK)
    zc[pts[near]] = fin.kink + np.where(upp[near], NUDGE, -NUDGE)
    if fin.penalty.l1 > 0.0:
        Wc, uc = inW[npt:npt + d], up[npt:npt + d]
        wf[Wc] = 0.0
        tiny = ~Wc & (np.abs(wf) <= ZERO_COEF)
        wf[tiny] = np.where(uc[tiny], TINY, -TINY)
    return zc, wf, bf


def _join_tau_blocks(zc, t, taus, held):
    """Give the members held at a common tau their mean ``t`` in ``zc``: a tie block of the face.

    Members held at several taus join those blocks (a union-find over the
    pieces held).
    """
    root = np.arange(zc.shape[0])

    def find(i):
        while root[i] != i:
            root[i] = root[root[i]]
            i = root[i]
        return i

    head = {}
    for i, j in zip(taus.member[held].tolist(), taus.jump[held].tolist()):
        if j in head:
            ri, rj = find(i), find(head[j])
            if ri != rj:
                root[ri] = rj
        else:
            head[j] = i
    members = np.unique(taus.member[held])
    if members.size:
        comp = np.array([find(i) for i in members.tolist()])
        _, cid, csize = np.unique(comp, return_inverse=True, return_counts=True)
        cmean = np.bincount(cid, weights=t[members]) / csize
        grp = csize[cid] >= 2
        zc[members[grp]] = cmean[cid[grp]]
