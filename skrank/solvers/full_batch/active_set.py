"""An active-set finish of the certified Newton fits: Newton's method on the tied losses of the exact risk.

At a minimiser of ``F(theta) = sum_i sigma_i l_(i)(theta) + R(w)`` the
losses fall into blocks of tied values; the weights ``q_B`` of a block
``B`` that holds the ranks ``r, ..., r + |B| - 1`` lie in the permutahedron
of ``sigma_r, ..., sigma_{r + |B| - 1}``, and every other loss has the
weight ``w_i`` of its rank.  With the blocks fixed, the minimiser solves

``min_{theta, tau} sum_{i not tied} w_i l_i(theta) + sum_B S_B tau_B + R(w)``
subject to ``l_i(theta) = tau_B`` for ``i`` in ``B``,

(``S_B`` the sum of the block's rank weights), a smooth problem whose
Lagrange multipliers are the tied losses' weights.  Its optimality system
is solved by Newton's method (sequential quadratic programming, one
symmetric linear system of ``p + |T| + #blocks`` unknowns a step); after
each step a block whose weights leave its permutahedron is split, and the
losses on the wrong side of a block's value join it, as in a primal-dual
active-set (semismooth Newton) method.
The blocks come from the pooled blocks of the proximal point iterations'
last projection (:mod:`.newton`).

The result is certified as the proximal point iterations' are: ``F(theta)``
against the Fenchel dual bound (:meth:`SmoothedRankRisk.dual_bound`) at
the projection onto ``P(sigma)`` of the weights found, so that a wrong
guess of the blocks costs time, never the certificate.
"""

import numpy as np
import scipy.linalg

from ...datafits.smoothed_risk import pooled_projection

#: An attempt is made once the pooled members changed by at most this share since the last outer
#: iteration (the blocks settle) ...
_SETTLED = 0.05
#: ... and the estimated gap of the proximal point iterations is below this share of F.
_ATTEMPT_GAP = 1e-3
#: Most Newton steps on the optimality system per attempt (the blocks updated after each), and the
#: step, relative to the coefficients, that ends them when the blocks stay.
_ROUNDS = 30
_SMALL_STEP = 1e-10
#: A loss is off its block's value when it differs by more than this share of the largest loss.
_TIE_TOL = 1e-10
#: Relative regularisation of the tied weights' diagonal block (rows of ``X`` that repeat).
_DUAL_RIDGE = 1e-12


class ActiveSetFinish:
    """The active-set finish of one fit, tried at the proximal point iterations' outer iterations.

    Parameters
    ----------
    problem : skrank.datafits.smoothed_rank_risk.SmoothedRankRisk
    sigma : ndarray of shape (n,)
        The risk's rank weights, ascending (:meth:`SmoothedRankRisk.active_set_weights`).
    """

    def __init__(self, problem, sigma):
        self.problem, self.sigma = problem, sigma
        self._tried, self._members = None, -1
        #: Attempts made and attempts certified (for the result's ``info``).
        self.attempts = self.finished = 0

    @classmethod
    def for_problem(cls, problem):
        """The finish of ``problem``, or None where it does not support one."""
        sigma = problem.active_set_weights()
        return None if sigma is None else cls(problem, sigma)

    def certifies(self, run, tol):
        """Try the finish from the iterations ``run``'s state; on a certified gap, ``run`` ends there.

        Returns whether ``run`` is now certified.  An attempt is made when
        the pooled blocks of the last projection are few, settled (their
        members changed little since the last outer iteration) and differ
        from those of the last attempt, and the estimated gap is small; an
        uncertified one leaves ``run`` as it was, with the dual bound of the
        weights found kept when larger.
        """
        pooled = run.state["pooled"]
        members = int(np.sum(pooled.size))
        settled = abs(members - self._members) <= _SETTLED * members
        self._members = members
        # more tied losses than coefficients is not generic (and makes the optimality system singular)
        if members == 0 or members > self.problem.design.p or not settled:
            return False
        key = (members, pooled.size.size, int(np.sum(pooled.order[pooled.start])))
        if key == self._tried or not run.last_gap <= _ATTEMPT_GAP * abs(run.history[-1]):
            return False
        self._tried = key
        self.attempts += 1
        found = self.solve(run.theta, run.state)
        if found is None:
            return False
        F, theta, gap, q = found
        if F < run.best[0] or gap <= tol * abs(F):
            run.best = (F, theta, gap, q)
        if run.best[2] <= tol * abs(run.best[0]):
            run.certified = True
            self.finished += 1
            run.history.append(run.best[0])
        return run.certified

    def solve(self, theta, state):
        """``(F, theta, certified gap, weights)`` of the finish from ``theta`` and its state, or None.

        Each round is one Newton step on the optimality system of the
        current blocks, after which the blocks are split and joined; the
        rounds end once the blocks stay and the step is negligible.
        """
        w, blocks = self.blocks_from(state)
        if not blocks:
            return None
        # the tied losses' weights so far (the mean of their block's rank weights when they join)
        q = np.zeros(w.size)
        for members, sigma_B in blocks:
            q[members] = sigma_B.mean()
        for _ in range(_ROUNDS):
            solved = tied_newton_step(self.problem, theta, w, q, blocks)
            if solved is None:
                return None
            theta, q_tied, small = solved
            weights = w.copy()
            for (members, _), q_B in zip(blocks, q_tied):
                weights[members] = q_B
            q = weights
            w, blocks, split = split_blocks(w, blocks, q_tied)
            losses = self.problem.loss_values(self.problem.native_arguments(theta))
            w, blocks, joined = join_blocks(w, blocks, losses, self.problem.design.p)
            if blocks is None or not blocks or (small and not (split or joined)):
                break
            for members, sigma_B in blocks:
                fresh = members[q[members] == w[members]]  # joined: not a tied weight yet
                q[fresh] = sigma_B.mean()
        return certify(self.problem, theta, weights)

    def blocks_from(self, state):
        """The fixed weights (0 on the tied losses) and the blocks ``(members, sigma_B)`` of a state.

        A pooled block of constant rank weights needs no tie: its members
        take those weights.
        """
        design = self.problem.design
        order, start, size = state["pooled"]
        w = np.array(design.to_host(state["q"]), dtype=np.float64)
        blocks = []
        for a, k in zip(start, size):
            members, sigma_B = order[a:a + k], self.sigma[a:a + k]
            if sigma_B[0] == sigma_B[-1]:
                w[members] = sigma_B
                continue
            w[members] = 0.0
            blocks.append((members, sigma_B))
        return w, blocks


def tied_newton_step(problem, theta, w, q, blocks):
    """One Newton step on the optimality system of the tied problem: ``(theta, [q_B], small)``, or None.

    The unknowns are ``theta``, the tied losses' weights ``q`` and the
    blocks' values ``tau``; the step solves::

        [ H  J^T   0 ] [d theta]   [-g     ]
        [ J  -eps -E ] [q      ] = [-l_T   ]
        [ 0  -E^T  0 ] [tau    ]   [-S     ]

    with ``H`` the Hessian of the Lagrangian in ``theta`` (the tied losses
    weighted by the current ``q``), ``J`` the tied losses' gradients,
    ``E`` the blocks' indicator, ``g`` the gradient of the untied part and
    ``eps`` a tiny ridge that shares the weight of repeated rows.
    ``small``: whether the step is negligible.  None when it is not
    finite.
    """
    design, penalty = problem.design, problem.penalty
    sizes = np.array([m.size for m, _ in blocks], dtype=np.int64)
    members = np.concatenate([m for m, _ in blocks])
    totals = np.array([s.sum() for _, s in blocks])
    p, k, nb = design.p, members.size, len(blocks)
    t = problem.native_arguments(theta)
    value, d1, d2 = problem.loss_derivatives(t)
    u = w.copy()
    u[members] = q[members]
    g = design.rmatvec(problem.s * w * d1) + penalty.reg * theta
    H = design.gram(np.maximum(u, 0.0) * d2)
    H[np.diag_indices_from(H)] += penalty.reg
    J = (d1[members] * np.asarray(problem.s)[members])[:, None] * design.rows(members)
    scale = max(float(np.abs(H).max()), 1e-300)
    K = np.zeros((p + k + nb, p + k + nb))
    K[:p, :p] = H
    K[:p, p:p + k] = J.T
    K[p:p + k, :p] = J
    K[p:p + k, p:p + k] = -_DUAL_RIDGE * scale * np.eye(k)
    K[p + np.arange(k), p + k + np.repeat(np.arange(nb), sizes)] = -1.0
    K[p + k:, p:p + k] = K[p:p + k, p + k:].T
    rhs = np.concatenate([-g, -value[members], -totals])
    try:
        x = scipy.linalg.solve(K, rhs, assume_a="sym", check_finite=False)
    except (np.linalg.LinAlgError, ValueError):
        return None
    if not np.all(np.isfinite(x)):
        return None
    step = x[:p]
    theta = theta + step
    small = np.max(np.abs(step)) <= _SMALL_STEP * (1.0 + np.max(np.abs(theta)))
    starts = np.concatenate(([0], np.cumsum(sizes)))
    return theta, [x[p + a:p + b] for a, b in zip(starts[:-1], starts[1:])], small


def in_permutahedron(q, sigma, rtol=1e-9):
    """Whether ``q`` lies in the permutahedron of ``sigma`` (equal sums assumed), to ``rtol`` of the sum."""
    top_q = np.cumsum(np.sort(q)[::-1])
    top_sigma = np.cumsum(np.sort(sigma)[::-1])
    return bool(np.all(top_q <= top_sigma + rtol * max(float(np.abs(sigma).sum()), 1e-300)))


def split_blocks(w, blocks, q_tied):
    """Take out of the blocks the losses whose weights leave the permutahedron: ``(w, blocks, any taken)``.

    A weight below the smallest of its block's rank weights (above the
    largest) sends its loss out of the block with one of its lowest
    (highest) rank weights; the
    more violating half of them leave at once (a primal-dual active-set
    step, damped).  A block whose weights lie within those bounds but not
    in its permutahedron is split along the pooled blocks of their
    projection onto it (:func:`pooled_projection`, ascending weights
    taking ascending ranks).  A part of constant rank weights leaves the
    ties, its members weighted by their ranks.
    """
    w = w.copy()
    kept, split = [], False
    for (members, sigma_B), q_B in zip(blocks, q_tied):
        low, high = sigma_B[0], sigma_B[-1]
        excess = np.maximum(low - q_B, q_B - high)
        outside = np.flatnonzero(excess > 1e-9 * high)
        if outside.size:
            split = True
            leaving = outside[np.argsort(-excess[outside])[: max(1, outside.size // 2)]]
            below = leaving[q_B[leaving] < low]
            above = leaving[q_B[leaving] > high]
            n_below, n_above = below.size, above.size
            # the lowest weights leave with the lowest rank weights, the highest with the highest
            w[members[below[np.argsort(q_B[below])]]] = sigma_B[:n_below]
            w[members[above[np.argsort(q_B[above])]]] = sigma_B[sigma_B.size - n_above:]
            stay = np.ones(members.size, dtype=bool)
            stay[leaving] = False
            parts = [(members[stay], sigma_B[n_below: sigma_B.size - n_above])]
        elif in_permutahedron(q_B, sigma_B):
            kept.append((members, sigma_B))
            continue
        else:
            split = True
            order = np.argsort(q_B, kind="stable")
            starts = np.empty(q_B.size + 1, dtype=np.int64)
            n_parts = pooled_projection(q_B.copy(), order, np.ascontiguousarray(sigma_B), 1.0, starts,
                                        np.ones(1))
            parts = [(members[order[lo:hi]], sigma_B[lo:hi])
                     for lo, hi in zip(starts[:n_parts], starts[1:n_parts + 1])]
        for part, sigma_part in parts:
            if sigma_part.size and sigma_part[0] == sigma_part[-1]:
                w[part] = sigma_part
            elif sigma_part.size:
                kept.append((part, sigma_part))
    return w, kept, split


def join_blocks(w, blocks, losses, most):
    """Add to the blocks the untied losses on the wrong side of their value: ``(w, blocks, any added)``.

    An untied loss whose weight is at most the smallest of a block's rank
    weights must not exceed the block's value ``tau_B`` (the mean of its
    members' losses), one whose weight is at least the largest must not
    fall below it, and one in between must equal it; else it joins the
    block, its weight with it, the nearer half of them at once, as long
    as the blocks hold at most ``most`` losses in all.  ``blocks`` is None
    when a loss should join and there is no room (the blocks are then far
    from the optimum's).
    """
    w = w.copy()
    untied = np.ones(losses.size, dtype=bool)
    for members, _ in blocks:
        untied[members] = False
    room = most - int(np.count_nonzero(~untied))
    tol = _TIE_TOL * max(float(np.max(np.abs(losses))), 1e-300)
    grown, added = [], 0
    for members, sigma_B in blocks:
        tau = float(np.mean(losses[members]))
        low, high = sigma_B[0], sigma_B[-1]
        wrong = untied & (((w <= low) & (losses > tau + tol)) | ((w >= high) & (losses < tau - tol))
                          | ((w > low) & (w < high) & (np.abs(losses - tau) > tol)))
        joining = np.flatnonzero(wrong)
        distance = np.abs(losses[joining] - tau)
        if joining.size and room <= 0:
            return w, None, True
        joining = joining[np.argsort(distance)[: min(max(1, joining.size // 2), room)]]
        added += joining.size
        room -= joining.size
        if joining.size:
            members = np.concatenate([members, joining])
            sigma_B = np.sort(np.concatenate([sigma_B, w[joining]]))
            w[joining] = 0.0
            untied[joining] = False
        grown.append((members, sigma_B))
    return w, grown, added > 0


def certify(problem, theta, weights):
    """``(F(theta), theta, certified gap, q)``: the dual bound at the projection of ``weights`` onto ``P``.

    The bound is kept by the problem when it is the largest so far; ``q``
    is the largest bound's weights.
    """
    keys = np.array(weights, dtype=np.float64)
    q, _ = problem.rank_step.restarted_from(keys).project(keys, 1.0)
    t = problem.native_arguments(theta)
    _, slope, _ = problem.loss_derivatives(t)
    problem.record_dual(problem.dual_bound(q, slope), q)
    F = problem.objective(theta)
    return F, theta, max(F - problem.best_dual, 0.0), problem.best_dual_weights
