"""Certified full-batch fits of convex spectral risks with smooth losses: proximal Newton on the weights.

Minimises ``F(w, b) = sum_i sigma_i l(t)_(i) + R(w)`` for nondecreasing
``sigma`` and a loss with a continuous derivative by the proximal point
method on the rank weights (Rockafellar 1976, "Monotone operators and the
proximal point algorithm"), with Newton steps on the Moreau-smoothed risk,
and stops on a certified bound of ``F - F*``.  The method and its
certificate are described in the user guide, :ref:`methods-newton`.
"""

import time

import numpy as np
import scipy.linalg
import scipy.sparse as sp

from ...backends.dispatch import make_design
from ...datafits.partial_auc import resort_scores
from ...datafits.rank_risk import affine_map
from ...datafits.smoothed_risk import (
    losses_and_keys,
    pooled_projection,
    relative_weights,
)
from ...losses import conjugate_in, derivatives_in, values_in
from ..progress import Progress
from ..result import SolverResult
from .newton_base import HESSIAN_SLACK, ProblemBase, zero_search
from .newton_chunked import ChunkedProblem, chunked_supported
from .setup import starting_theta, supported_input

#: ``mu`` at the start, in units of (objective at the start) / (n max sigma).
_MU_SCALE = 100.0
#: ... times this from a warm start, whose losses give the centre.
_MU_WARM = 1e-3
#: ``mu`` falls by ``_MU_DECREASE`` after an outer iteration that shrank the gap by less
#: than the factor ``_SLOW_OUTER``.
_MU_DECREASE = 0.2
_SLOW_OUTER = 0.3
#: Relative ridge of a Newton model without curvature in some direction.
_RIDGE = 1e-6
#: Smallest share of the total mass a sample's mass is given (:class:`_Problem`).
_SMALLEST_SHARE = 2.0 ** -52
#: An inner solve ends when its model decrease is this fraction of the last certified gap.
_INNER_FRACTION = 0.1
#: Most projected-gradient steps on the dual weights when the Newton steps stall uncertified,
#: and the steps without a gain of a thousandth of the gap after which they stop.
_DUAL_ASCENT_STEPS = 300
_DUAL_ASCENT_PATIENCE = 20
#: The decrement is computed exactly once the estimated gap is below this many times the tolerance.
_EXACT_DECREMENT = 100.0


class _Problem(ProblemBase):
    """Data, weights and loss of one fit; evaluates ``F``, ``F_mu`` and their derivatives."""

    def __init__(self, X, y, risk, loss, penalty, fit_intercept, sample_weight=None):
        self.design = make_design(X, fit_intercept)
        #: The same design, whose kept Gram matrix is the block term's (:meth:`block_scatter`).
        self._block_design = None
        s, c = affine_map(y, loss.task)
        n = self.n = s.size
        # c = 0 (classification) or s = 1 (regression): a view of one number, not a vector
        if loss.task == "classification":
            self.s, self.c = s, np.broadcast_to(0.0, n)
        else:
            self.s, self.c = np.broadcast_to(1.0, n), c
        #: ``s`` where the design keeps its ``n``-vectors (:class:`_NativeProblem` moves it to ``X``'s device)
        self._s = self.s
        self.risk = risk
        if sample_weight is None:
            self.mass, self.m = None, np.broadcast_to(1.0, n)
            self.sigma = np.sort(np.asarray(risk.weights(n), dtype=np.float64))
        else:
            # masses of mean 1 (:mod:`skrank.datafits.smoothed_risk`); rank weights per order
            self.mass = np.asarray(sample_weight, dtype=np.float64)  # in the caller's units (counts)
            v = relative_weights(self.mass)
            # The rank weights are differences of the spectrum's integral at the ends of the cells
            # of mass, accurate to a few ulps of their sum: a share of the mass below 2^-52 is
            # not resolved by them, and as a mass it would make their rounding a huge weight per
            # unit of mass.  Such masses (zero ones included) are raised to that share.
            self.m = np.maximum(v * (n / v.sum()), n * _SMALLEST_SHARE)
            self.sigma = None
        self._set_penalty(loss, penalty)
        self._order = np.arange(n)
        self._starts = np.empty(n + 1, dtype=np.int64)

    def exported_weights(self, q):
        """The certificate's weights as the result gives them (here ``q`` itself)."""
        return q

    def first_center(self, theta, warm):
        """The centre of the first smoothing and the largest rank weight per unit of mass, at ``theta``.

        The centre is the mean weight (the weights of the mean risk) or, from a
        warm start, the rank weights of the losses at ``theta``, tied losses
        sharing their weights in proportion to their masses.
        """
        losses = self.loss.value(self.arguments(theta))
        order = np.argsort(losses, kind="stable")
        sigma = self.rank_weights(order)
        if warm:
            first = np.flatnonzero(np.r_[True, np.diff(losses[order]) != 0.0])
            mass = self.m[order]
            share = np.add.reduceat(sigma, first) / np.add.reduceat(mass, first)
            center = np.empty(order.size)
            center[order] = mass * np.repeat(share, np.diff(np.r_[first, order.size]))
        else:
            center = self.m * (sigma.sum() / order.size)
        return center, float(np.max(sigma / self.m[order]))

    def certify_zero(self, q, tol):
        """Raise the dual bound toward ``F(0)`` where every loss ties at ``theta = 0``; returns ``F(0)``.

        At ``theta = 0`` the risk's subdifferential is all of ``P(sigma)``:
        ``F(theta) >= F(0) + g(q).theta + R(w)`` for each ``q`` in it, with
        ``g(q) = [X, 1]^T (s q l'(0))``, so that ``F(0) - F* <= R*(-g_w(q))``
        when ``g_b(q) = 0`` (:meth:`_Problem.dual_bound`).  ``theta = 0`` is
        optimal exactly when ``P(sigma)`` meets the null space of
        ``A = [X, 1]^T diag(s l'(0))``: a point of both is sought by
        accelerated alternating projections (projected gradient steps of
        ``||A q||^2`` in the metric of ``(A diag(m) A^T)^-1``, one weighted
        Gram matrix, then two products with ``X``, one sort and one PAVA a
        step), from the weights ``q``.  It stops when the certified gap is
        below ``tol F(0)``, or when the estimated one ``||g||^2 / (2 l2)`` (the
        intercept's slope too, which must vanish) shrinks too slowly (``theta =
        0`` is not optimal).  None when the losses do not tie at 0 or the
        penalty has no l2 part.
        """
        design, m = self.design, self.m
        t = self.arguments(np.zeros(design.p))
        if self.l2 == 0.0 or np.ptp(t) != 0.0:
            return None
        F0 = self.objective(np.zeros(design.p))
        _, slope, _ = self.loss.derivatives(t)
        sa = self.s * slope
        try:
            G = np.array(design.weighted_gram(m * sa * sa), dtype=np.float64)  # a copy, the ridge added below
            # a ridge relative to each column's own scale, so that X * c (alpha c^2) takes the same steps
            diagonal = np.diag(G).copy()
            G[np.diag_indices_from(G)] += np.where(diagonal > 0.0, 1e-12 * diagonal, 1.0)
            factor = scipy.linalg.cho_factor(G, check_finite=False)
        except (np.linalg.LinAlgError, ValueError):
            return F0
        q = np.array(q, dtype=np.float64)
        order = np.argsort(q / m, kind="stable")

        def step(z, u):
            keys = (z - m * sa * design.matvec(scipy.linalg.cho_solve(factor, u, check_finite=False))) / m
            resort_scores(keys, order)
            q_new, _ = self.projection(keys, order, 1.0)
            return q_new, design.rmatvec(sa * q_new)

        zero_search(self, F0, q, design.rmatvec(sa * q), tol, step,
                    lambda q_new: self.host_dual_bound(q_new, slope))
        return F0

    def rank_weights(self, order):
        """The risk's weights of the losses sorted by ``order`` (ascending)."""
        if self.mass is None:
            return self.sigma
        return self.risk.weights(order.size, self.mass[order])

    def projection(self, keys, order, mu):
        """The weights ``q = proj_P(keys / mu)`` (:func:`pooled_projection`), ``order`` sorting ``keys``.

        ``q`` is written over ``keys``.  Returns ``q`` and the number of
        blocks, whose first positions are in ``self._starts``.
        """
        m = np.ones(1) if self.mass is None else self.m  # one mass of every sample: no vector of ones
        n_blocks = pooled_projection(keys, order, self.rank_weights(order), mu, self._starts, m)
        return keys, n_blocks

    def risk_value(self, losses, order=None):
        """``Omega(l)``, the (weighted) risk of the losses (``order``: a permutation nearly sorting them)."""
        if order is None:
            order = np.argsort(losses, kind="stable")
            return float(losses[order] @ self.rank_weights(order))
        order = order.copy()
        return float(resort_scores(losses, order) @ self.rank_weights(order))

    def arguments(self, theta, shift=True):
        """The loss arguments ``s [X, 1] theta + c``; without ``shift``, their change ``s [X, 1] theta``."""
        t = self.design.matvec(theta)
        t *= self.s
        if shift:
            t += self.c
        return t

    def objective(self, theta):
        return self.risk_value(self.loss.value(self.arguments(theta))) + self.penalty(theta)

    def smoothed(self, theta, mu, center, t=None):
        """``F_mu(theta; center)`` and what its derivatives need (``t``: the loss arguments at ``theta``)."""
        if t is None:
            t = self.arguments(theta)
        n = t.size
        value, d1, keys = np.empty(n), np.empty(n), np.empty(n)
        unit = self.mass is None  # unit masses: no divisions, no reordered copies
        losses_and_keys(t, self.loss.code, self.loss.param, mu, center if unit else center / self.m,
                        value, d1, keys)
        # the last order nearly sorts the keys: re-sorted from it in O(n) (insertion or radix sort)
        order = self._order.copy()
        resort_scores(keys, order)
        self._order = order
        q, nb = self.projection(keys, order, mu)
        diff = q - center
        omega = float(q @ value) - 0.5 * mu * float(diff @ (diff if unit else diff / self.m))
        # l'' is not computed: only the accepted states need it (:meth:`curvature`)
        state = dict(t=t, value=value, d1=d1, order=order, q=q, q_host=q, pooled=self._pooled(nb))
        return omega + self.penalty(theta), state

    def _pooled(self, n_blocks):
        """The pooled blocks only (first position, size) of the last projection: singletons need no record."""
        sizes = np.diff(self._starts[: n_blocks + 1])
        pooled = np.flatnonzero(sizes > 1)
        return self._starts[pooled], sizes[pooled]

    def loss_values(self, t):
        """``l(t)`` for loss arguments ``t`` of the design's namespace."""
        return self.loss.value(t)

    def loss_derivatives(self, t):
        """``(l(t), l'(t), l''(t))`` for loss arguments ``t`` of the design's namespace."""
        return self.loss.derivatives(t)

    def curvature(self, state):
        """``l''(t)`` at the state's loss arguments."""
        return self.loss_derivatives(state["t"])[2]

    def gradient(self, theta, q, d1):
        """``[X, 1]^T (s q l') + reg theta`` from ``n``-vectors of the design's namespace."""
        return self.design.native_rmatvec(self._s * q * d1) + self.reg * theta

    def hessian(self, q, d2):
        """Hessian of the ``q``-weighted problem, within a factor ``1 +- HESSIAN_SLACK``."""
        H = self.design.native_gram(q * d2, HESSIAN_SLACK)
        H[np.diag_indices_from(H)] += self.reg
        return H

    def derivatives(self, theta, state, mu, block):
        """Gradient and Hessian of ``F_mu`` at the state for its weights ``q``, and the block term.

        ``block``: whether to make :meth:`block_scatter` too (else None), in
        the same call to the design, :meth:`Design.step_products`: one
        pass over ``X`` where the design fuses its products.
        """
        terms = self._block_terms(state) if block else None
        q = state["q"]
        g, H, G_block, sums = self.design.step_products(
            self.s * q * state["d1"], q * self.curvature(state), HESSIAN_SLACK,
            None if terms is None else terms[:2])
        g += self.reg * theta
        H[np.diag_indices_from(H)] += self.reg
        return g, H, None if terms is None else self._scatter(G_block, sums, terms[2], mu)

    def block_scatter(self, state, mu):
        """``(1/mu) sum_B sum_{i in B} m_i (g_i - g_B)(g_i - g_B)^T``, ``g_i = l'_i s_i [x_i, 1]``.

        ``g_B`` is the members' mean weighted by the masses ``m``.  Computed
        as ``sum_i m_i g_i g_i^T - sum_B S_B S_B^T / m(B)`` with the block
        sums ``S_B = sum_B m_i g_i``: a weighted Gram matrix of the members
        and one product with a sparse block-indicator matrix, without
        gathering rows.  None without pooled blocks.
        """
        terms = self._block_terms(state)
        if terms is None:
            return None
        h, indicator, block_mass = terms
        sums = self.design.left_product(indicator)
        if self._block_design is None:
            self._block_design = make_design(self.design.X, self.design.fit_intercept)
        # exact, but only the rows whose weight changed are added again (after a move of the centre: those
        # that joined or left the blocks)
        return self._scatter(self._block_design.gram(h), sums, block_mass, mu)

    @property
    def block_passes(self):
        """The passes over ``X`` of the block term's Gram matrices (:meth:`block_scatter`)."""
        return 0 if self._block_design is None else self._block_design.passes

    def _block_terms(self, state):
        """``(h, M, m(B))`` of :meth:`block_scatter`: the members' weights ``m_i l'_i^2``, the sparse
        matrix of the block sums and the blocks' masses; None without pooled blocks."""
        block_start, size = state["pooled"]
        if size.size == 0:
            return None
        first = np.cumsum(size) - size
        pos = np.arange(size.sum()) - np.repeat(first - block_start, size)
        idx = state["order"][pos]
        coef = self.design.take(state["d1"], idx) * self.s[idx]
        mass = self.m[idx]
        h = np.zeros(self.s.size)
        h[idx] = mass * coef * coef
        # the members come block by block: the rows of the indicator, without a conversion from pairs
        indptr = np.concatenate(([0], np.cumsum(size)))
        indicator = sp.csr_matrix((mass * coef, idx, indptr), shape=(size.size, self.s.size))
        return h, indicator, np.add.reduceat(mass, first)

    @staticmethod
    def _scatter(G_block, sums, block_mass, mu):
        return (G_block - (sums.T / block_mass) @ sums) / mu

    def certificate(self, theta, state, decrease):
        """``(F(theta), bound on F(theta) - F*, estimate of F(theta) - F*)`` from the state's weights ``q``.

        With an l2 part in the penalty, the bound is a duality gap:
        ``F(theta)`` minus the largest Fenchel lower bound :meth:`dual_bound`
        found so far (at the weights ``q`` and the slopes ``l'(t)`` of each
        certificate).  Without one (the conjugate of an l1
        term alone is an indicator, which the slopes at an iterate violate
        slightly, and costs the bound a share of ``F`` as large as the
        violation) it is
        ``[Omega - q . l]`` plus the Newton model's estimate of the
        ``q``-weighted problem's gap: ``decrease`` (:meth:`direction`, with
        the Hessian of :meth:`hessian`, which is at least ``1 - slack``
        times the exact one) divided by ``1 - slack``: the estimate, returned
        too, which steers the inner solves (a duality gap from the slopes at
        ``theta`` sees only the penalty's curvature and is far larger than
        ``F(theta) - F*`` until the gradient is tiny).
        """
        value = state["value"]
        omega = self.risk_value(self.design.to_host(value), state["order"])  # the sorted losses' risk
        F = omega + self.penalty(theta)
        estimate = max(omega - float(state["q"] @ value), 0.0) + decrease / (1.0 - HESSIAN_SLACK)
        if self.l2 > 0.0:
            bound = self.dual_bound(state["q"], state["d1"])
            if bound > self.best_dual:
                self.best_dual, self.best_dual_weights = bound, state["q_host"]
            return F, max(F - self.best_dual, 0.0), estimate
        return F, estimate, estimate

    def dual_ascent(self, theta, max_steps):
        """Raise the best dual bound by projected gradient ascent over ``q`` (slopes at ``theta``).

        The proximal point iterations move the weights slowly at a
        degenerate optimum (e.g. ``w = 0`` with every loss tied), where the
        Newton steps stall in rounding before the gap closes.  For fixed
        slopes ``a`` the bound ``q . (a c - l*(a)) - R*(-X^T (s q a))`` is
        concave in ``q``; it is maximised over ``P(sigma)`` by projected
        gradient steps (one sort and one PAVA each), starting from the best
        weights so far.  Returns whether the best bound rose.
        """
        if self.best_dual_weights is None:
            return False
        design = self.design
        _, slope, _ = self.loss.derivatives(self.arguments(theta))
        e = slope * self.c - self.loss.conjugate(slope)
        sa = self.s * slope
        step = _dual_ascent_step(self, sa)
        if step is None:
            return False
        m = self.m
        q = np.array(self.best_dual_weights, dtype=np.float64)
        improved, since = False, 0
        F_theta = self.objective(theta)
        for _ in range(max_steps):
            z = design.rmatvec(sa * q)[: design.d]
            y = -z
            grad_conj = np.sign(y) * np.maximum(np.abs(y) - self.l1, 0.0) / self.l2
            coef = np.zeros(design.p)
            coef[: design.d] = grad_conj
            g = e + sa * design.matvec(coef)
            # ascent in the metric of the masses, then the projection onto P in that metric
            keys = (q + step * m * g) / m
            q, _ = self.projection(keys, np.argsort(keys, kind="stable"), 1.0)
            bound = self.host_dual_bound(q, slope)
            if bound > self.best_dual:
                gain = bound - self.best_dual
                self.best_dual, self.best_dual_weights = bound, q
                improved = True
                since = 0 if gain > 1e-3 * max(F_theta - self.best_dual, 1e-300) else since + 1
            else:
                since += 1
            if since >= _DUAL_ASCENT_PATIENCE:
                break  # no step closed a thousandth of the gap for a while
        return improved

    def dual_bound(self, q, slope):
        """A lower bound on ``F*`` from the weights ``q`` in ``P(sigma)`` and the slopes ``a``.

        For every such ``q``, ``F* >= min_theta sum_i q_i l(t_i) + R(w)``,
        and by ``l(t) >= a t - l*(a)`` that minimum is at least
        ``sum_i q_i (a_i c_i - l*(a_i)) - R*(-z)`` with ``z = X^T (s q a)``,
        when ``sum_i s_i q_i a_i = 0`` (the intercept).  ``a`` is first made
        to satisfy this by shrinking the entries on the side of the excess
        toward 0 and, without an l2 part, to satisfy ``||z||_inf <= l1`` by
        shrinking all of it (0 lies in the domain of every loss's ``l*``).
        ``R*(y) = sum_j (|y_j| - l1)_+^2 / (2 l2)`` with an l2 part.
        """
        a = np.array(slope, dtype=np.float64)
        u = self.s * q * a
        if self.design.fit_intercept:
            excess = float(u.sum())
            side = u > 0.0 if excess > 0.0 else u < 0.0
            total = float(u[side].sum())
            if total != 0.0:
                shrink = max(1.0 - excess / total, 0.0)
                a[side] *= shrink
                u[side] *= shrink
        scale, conjugate_penalty = self._penalty_conjugate(self.design.rmatvec(u)[: self.design.d])
        a *= scale
        return float(q @ (a * self.c - self.loss.conjugate(a))) - conjugate_penalty

    #: :meth:`dual_bound` of NumPy vectors ``q`` and slopes, whatever the design (the dual ascent's,
    #: the check of ``theta = 0``'s)
    host_dual_bound = dual_bound


class _NativeProblem(_Problem):
    """:class:`_Problem` whose ``n``-vectors live in ``X``'s namespace: only the rank step runs on the host.

    The loss arguments, the losses and their derivatives, the keys, the
    residuals and the Hessian's weights are arrays of the design's namespace
    on ``X``'s device (an :class:`~skrank.backends.array_api_design.ArrayAPIDesign`).
    Each evaluation of ``F_mu`` sends its keys to the host, where they are
    sorted and projected (PAVA), and brings the weights ``q`` back: one
    ``n``-vector each way; a certificate brings the losses down for the
    risk's sorted sum.  The dual ascent and the check of ``theta = 0`` run
    on the host, as in :class:`_Problem`.
    """

    @classmethod
    def of(cls, problem):
        """``problem`` itself when its design keeps its ``n``-vectors on the host, else its native twin."""
        if problem.design.vectors_on_host:
            return problem
        native = cls.__new__(cls)
        native.__dict__.update(problem.__dict__)
        design = problem.design
        native._s = design.to_native(np.ascontiguousarray(problem.s, dtype=np.float64))
        # classification: c = 0, no shift
        native._c = None if problem.loss.task == "classification" else design.to_native(problem.c)
        native._m = None if problem.mass is None else design.to_native(problem.m)
        return native

    def native_arguments(self, theta, shift=True):
        t = self.design.native_matvec(theta) * self._s
        return t + self._c if shift and self._c is not None else t

    def loss_values(self, t):
        return values_in(self.design.xp, self.loss, t)

    def loss_derivatives(self, t):
        return derivatives_in(self.design.xp, self.loss, t)

    def smoothed(self, theta, mu, center, t=None):
        design = self.design
        if t is None:
            t = self.native_arguments(theta)
        value, d1, _ = self.loss_derivatives(t)
        unit = self.mass is None
        keys = design.to_host(mu * (center if unit else center / self._m) + value)
        order = self._order.copy()
        resort_scores(keys, order)
        self._order = order
        q_host, nb = self.projection(keys, order, mu)
        q = design.to_native(q_host)
        diff = q - center
        omega = float(q @ value) - 0.5 * mu * float(diff @ (diff if unit else diff / self._m))
        state = dict(t=t, value=value, d1=d1, order=order, q=q, q_host=q_host, pooled=self._pooled(nb))
        return omega + self.penalty(theta), state

    def derivatives(self, theta, state, mu, block):
        terms = self._block_terms(state) if block else None
        g = self.gradient(theta, state["q"], state["d1"])
        H = self.hessian(state["q"], self.curvature(state))
        if terms is None:
            return g, H, None
        G_block, sums = self.design.weighted_gram(terms[0]), self.design.left_product(terms[1])
        return g, H, self._scatter(G_block, sums, terms[2], mu)

    def dual_bound(self, q, slope):
        xp, design = self.design.xp, self.design
        a = slope
        u = self._s * q * a
        if design.fit_intercept:
            excess = float(xp.sum(u))
            side = u > 0.0 if excess > 0.0 else u < 0.0
            total = float(xp.sum(u[side]))
            if total != 0.0:
                shrink = max(1.0 - excess / total, 0.0)
                a = xp.where(side, a * shrink, a)
                u = xp.where(side, u * shrink, u)
        scale, conjugate_penalty = self._penalty_conjugate(design.native_rmatvec(u)[: design.d])
        a = a * scale
        conjugate = conjugate_in(xp, self.loss, a)
        dual = -conjugate if self._c is None else a * self._c - conjugate
        return float(q @ dual) - conjugate_penalty


def _dual_ascent_step(problem, sa):
    """The step ``1/L`` of :meth:`_Problem.dual_ascent` (``sa = s a``), None when ``L = 0``.

    ``L`` is the largest eigenvalue of ``diag(m)^(1/2) A A^T diag(m)^(1/2) / l2``,
    ``A = diag(s a) X``, by 20 power iterations.
    """
    design = problem.design
    root_m = np.sqrt(problem.m)

    def operator(v):
        z = design.rmatvec(sa * root_m * v)
        z[design.d:] = 0.0  # the intercept is not penalised: not in R*
        return root_m * sa * design.matvec(z)

    v = np.random.default_rng(0).normal(size=sa.size)
    norm = 0.0
    for _ in range(20):
        v = operator(v)
        norm = float(np.linalg.norm(v))
        if norm == 0.0:
            return None
        v /= norm
    return problem.l2 / max(norm, 1e-300)


def _line_search(problem, theta, step, F0, state0, mu, center, max_evals=12):
    """Step length along a descent direction of ``F_mu``: ``(alpha, F_mu, state)``.

    ``F_mu`` includes the penalty, its l1 part too.  Along ``theta + alpha
    step`` the loss arguments are ``t + alpha dt``
    (one product with ``X``), so that each trial costs one sort and one PAVA.
    ``F_mu`` is convex and differentiable along the line: the full step is
    taken when it satisfies the Armijo condition, otherwise the root of the
    directional derivative is bracketed and found by the Illinois variant of
    regula falsi.  Returns ``(0, F0, state0)`` when no trial lowers
    ``F_mu`` (rounding).  Only the state of the last trial is kept (each
    costs several vectors of length ``n``); the best one is evaluated again
    when it was not the last.
    """
    dt = problem.native_arguments(step, shift=False)
    t0 = state0["t"]
    reg_step = problem.reg * step

    d_w = step[: problem.design.d]

    def l1_slope(alpha):
        # right derivative of l1 ||w + alpha d_w||_1 in alpha
        if problem.l1 == 0.0:
            return 0.0
        w = theta[: problem.design.d] + alpha * d_w
        return problem.l1 * float(np.sum(np.where(w != 0.0, np.sign(w) * d_w, np.abs(d_w))))

    def trial(alpha):
        F, st = problem.smoothed(theta + alpha * step, mu, center, t0 + alpha * dt)
        slope = (float(st["q"] @ (st["d1"] * dt)) + float(reg_step @ (theta + alpha * step))
                 + l1_slope(alpha))
        return F, st, slope

    slope0 = float(state0["q"] @ (state0["d1"] * dt)) + float(reg_step @ theta) + l1_slope(0.0)
    lo, s_lo = 0.0, slope0
    hi, s_hi = None, None
    alpha, best, last = 1.0, None, None
    side = 0
    for _ in range(max_evals):
        last = None  # frees the previous trial's state before the next one
        F, st, slope = trial(alpha)
        last = (alpha, st)
        del st
        if F < F0 and F <= F0 + 1e-4 * alpha * slope0 and (best is None or F < best[1]):
            best = (alpha, F)
            if alpha == 1.0 or abs(slope) <= 0.1 * abs(slope0):
                break
        if slope < 0.0:
            lo, s_lo = alpha, slope
            if side == -1 and hi is not None:
                s_hi *= 0.5
            side = -1
        else:
            hi, s_hi = alpha, slope
            if side == 1:
                s_lo *= 0.5
            side = 1
        if hi is None:
            if best is not None:
                break  # still descending at the full step: take it
            alpha *= 2.0
            continue
        alpha = lo - s_lo * (hi - lo) / (s_hi - s_lo)
    if best is None:
        return 0.0, F0, state0
    alpha, F = best
    if last[0] == alpha:
        return alpha, F, last[1]
    last = None
    return alpha, F, problem.smoothed(theta + alpha * step, mu, center, t0 + alpha * dt)[1]


def _newton_fixed_weights(problem, theta, q, rel_tol, max_iter):
    """Newton's method on ``q . l(theta) + penalty(w)`` until the model decrease is ``rel_tol`` relative."""
    steps = 0
    t = problem.native_arguments(theta)
    while steps < max_iter:
        value, d1, d2 = problem.loss_derivatives(t)
        G = float(q @ value) + problem.penalty(theta)
        g = problem.gradient(theta, q, d1)
        step, decrease = problem.direction(problem.hessian(q, d2), g, theta)
        steps += 1
        if decrease <= rel_tol * abs(G):
            break
        alpha = 1.0
        while alpha >= 1e-10:
            trial = theta + alpha * step
            t_trial = problem.native_arguments(trial)
            trial_G = float(q @ problem.loss_values(t_trial)) + problem.penalty(trial)
            if trial_G <= G - 1e-4 * alpha * decrease:
                break
            alpha *= 0.5
        else:
            # no decrease along the model's step (a loss without curvature where the model is flat, such
            # as Huber's linear tails): leave the rest to the smoothed iterations, whose line search is exact
            break
        theta, t = trial, t_trial
    return theta, steps


def _zero_small_coefficients(problem, theta, F):
    """Set the coefficients below ``1e-5 (1 + max |w|)`` to zero when ``F`` does not rise.

    The proximal point iterates stop within the tolerance, not exactly on
    the zero set of the l1 term.
    """
    w = theta[: problem.design.d]
    small = np.abs(w) <= 1e-5 * (1.0 + np.abs(w).max())
    if not np.any(small & (w != 0.0)):
        return theta, F
    trial = theta.copy()
    trial[: problem.design.d][small] = 0.0
    F_trial = problem.objective(trial)
    return (trial, F_trial) if F_trial <= F else (theta, F)


def _with_dual_gap(problem, best):
    """``best = (F, theta, gap, weights)`` with the gap of ``F`` to the largest dual bound found."""
    return best[:2] + (max(best[0] - problem.best_dual, 0.0), best[3])


class _ProximalPoint:
    """The proximal point iterations of one fit: the smoothing, its centre and the best point.

    Parameters
    ----------
    problem : _Problem
    theta : ndarray of shape (p,)
        The start.
    warm : bool
        Whether ``theta`` is a warm start (its losses give the first centre, else the mean weight).
    max_iter : int
        Most Newton steps.
    progress : skrank.solvers.progress.Progress
    """

    def __init__(self, problem, theta, warm, max_iter, progress):
        self.problem, self.progress = problem, progress
        self.steps = 0
        center, top = problem.first_center(theta, warm)
        native_center = problem.design.to_native(center)  # the weights where the n-vectors live
        if not warm and problem.risk.is_mean:
            # the mean risk is the problem (its weights are the centre): Newton's method on it; other risks
            # start at theta = 0, where the smoothing pools the tied losses
            theta, self.steps = _newton_fixed_weights(problem, theta, native_center, 1e-1, max_iter)
        F = problem.objective(theta)
        self.history = [F]
        #: ``(F, theta, bound on F - F*, weights q)`` of the best certificate so far
        self.best = (F, theta.copy(), np.inf, center)
        self.mu = _MU_SCALE * max(abs(F), 1e-12) / max(problem.n * top, 1e-300)
        if warm:
            self.mu *= _MU_WARM
        self.outer, self.certified, self.warm = 0, False, warm
        self.inner_tol = 1e-2 * abs(F)
        self.last_gap = np.inf
        self.stalled, self.outer_stalls = False, 0
        self.theta, self.center = theta, native_center
        self.from_zero = not np.any(theta)
        self.F_mu, self.state = problem.smoothed(theta, self.mu, native_center)

    def outer_iteration(self, decrease_q, tol):
        """Certify the point, then move the centre (and maybe lower ``mu``); returns whether certified."""
        problem, state = self.problem, self.state
        self.outer_stalls = self.outer_stalls + 1 if self.stalled else 0
        self.stalled = False
        self.outer += 1
        F, gap, estimate = problem.certificate(self.theta, state, decrease_q)
        if problem.l2 > 0.0:
            # a duality gap: the lowest F found against the largest dual bound found so far; a cold start
            # is a candidate too (theta = 0 is the optimum where every loss ties there)
            if F < self.best[0] or (self.warm and not np.isfinite(self.best[2])):
                self.best = (F, self.theta.copy(), gap, state["q_host"])
            self.best = _with_dual_gap(problem, self.best)
            if self.outer == 1 and self.from_zero and not self.warm and F >= self.history[0]:
                # no iterate beat the start theta = 0: maybe the optimum
                self.check_zero(state["q_host"], tol)
        elif gap < self.best[2]:
            self.best = (F, self.theta.copy(), gap, state["q_host"])
        self.history.append(F)
        self.progress(self.steps, F, gap / max(abs(F), 1e-300),
                      f"outer={self.outer} mu={self.mu:.3g} pooled blocks={state['pooled'][1].size}")
        if self.best[2] <= tol * abs(self.best[0]):
            self.certified = True
            return True
        if estimate > _SLOW_OUTER * self.last_gap:
            self.mu *= _MU_DECREASE
        self.last_gap = estimate
        self.inner_tol = _INNER_FRACTION * min(estimate, gap)
        self.center = state["q"]
        self.F_mu, self.state = problem.smoothed(self.theta, self.mu, self.center)
        return False

    def check_zero(self, q, tol):
        """Certify ``theta = 0`` (the problem's ``certify_zero``) from ``q``; returns whether certified."""
        problem = self.problem
        F0 = problem.certify_zero(q, tol)
        if F0 is not None and F0 <= self.best[0]:
            weights = q if problem.best_dual_weights is None else problem.best_dual_weights
            self.best = _with_dual_gap(problem, (F0, np.zeros_like(self.theta), np.inf, weights))
        self.certified = self.best[2] <= tol * abs(self.best[0])
        return self.certified

    def close_from_dual(self, tol):
        """The Newton steps stall in rounding: a last try to close the gap by :meth:`_Problem.dual_ascent`."""
        problem = self.problem
        if problem.l2 > 0.0 and problem.dual_ascent(self.best[1], _DUAL_ASCENT_STEPS):
            self.best = _with_dual_gap(problem, self.best)
            self.certified = self.best[2] <= tol * abs(self.best[0])

    def newton_step(self, g, H, scatter, verbose):
        """A damped Newton step on ``F_mu`` from the model ``g``, ``H`` (+ ``scatter``, the block term)."""
        problem, theta = self.problem, self.theta
        if not problem.design.fuses_products:
            scatter = problem.block_scatter(self.state, self.mu)
        K = H if scatter is None else H + scatter
        step, decrease = problem.direction(K, g, theta)
        if not np.isfinite(decrease):  # directions without curvature: a small ridge
            step, _ = problem.direction(K + _RIDGE * np.mean(np.diag(K)) * np.eye(K.shape[0]), g, theta)
        self.steps += 1
        alpha, self.F_mu, self.state = _line_search(problem, theta, step, self.F_mu, self.state, self.mu,
                                                    self.center)
        if alpha == 0.0:
            self.stalled = True
            return
        self.theta = theta + alpha * step
        if verbose > 1:
            self.progress.note(f"step {self.steps}: F_mu={self.F_mu:.12g} alpha={alpha:.3g}")

    def result(self, start):
        """The :class:`SolverResult` of the best point (``start``: the fit's start time)."""
        problem, design = self.problem, self.problem.design
        F, theta, gap, weights = self.best
        if problem.best_dual_weights is not None:
            weights = problem.best_dual_weights  # the weights of the certificate's dual bound
        if problem.l1 > 0.0:
            theta, F = _zero_small_coefficients(problem, theta, F)
        if F != self.history[-1]:
            self.history.append(F)  # the returned point's objective comes last
        coef, intercept = design.split(theta)
        return SolverResult(
            coef=coef.copy(), intercept=intercept, n_iter=self.steps,
            objective_history=np.asarray(self.history), stop_criterion=gap / max(abs(F), 1e-300),
            converged=self.certified,
            info=dict(certified=self.certified, gap=gap, mu=self.mu, outer=self.outer,
                      weights=problem.exported_weights(weights),
                      passes=design.passes + problem.block_passes, time=time.perf_counter() - start),
        )


def smoothed_newton(datafit, penalty, *, coef_init=None, intercept_init=None, max_iter=200, tol=1e-9,
                    verbose=0):
    """Minimise a convex spectral risk with a smooth loss and a penalty, certified.

    Parameters
    ----------
    datafit : skrank.datafits.rank_risk.RankRisk
        The training set (``X``: ndarray or sparse matrix; ``y``: labels in
        {-1, +1} for classification, targets for regression), the risk
        (nondecreasing weights: ``risk.is_convex``), the loss (logistic,
        squared hinge, squared or Huber), whether to fit an intercept and
        the sample weights, under which the risk is that of the weighted
        empirical distribution (:mod:`skrank.risks`).
    penalty : skrank.penalties.Penalty
        An l2, l1 or elastic-net penalty; the Huber loss needs an l2 part.
    coef_init, intercept_init : ndarray and float, optional
        Starting point (zeros by default).
    max_iter : int, default=200
        Most Newton steps (and most outer iterations).
    tol : float, default=1e-9
        Stop when the certified bound on ``F - F*`` is at most ``tol * |F|``.
    verbose : int, default=0
        Print one line per outer iteration when positive, and one per
        Newton step when above 1.

    Returns
    -------
    SolverResult
        ``stop_criterion`` is the certified relative gap
        ``(F - F*) / |F|`` bound; ``converged`` is True when it is at most
        ``tol``; ``n_iter`` counts Newton steps and ``objective_history``
        holds ``F`` after each outer iteration.  ``info`` has
        ``certified``, ``gap`` (the absolute bound), ``mu`` (the last
        smoothing), ``outer``, ``weights`` (the rank weights ``q`` in
        ``P(sigma)`` of the certificate, per sample), ``passes`` (products with ``[X, 1]`` or its
        transpose, a weighted Gram matrix counted as one) and ``time``.
    """
    start = time.perf_counter()
    X, y, risk, loss = datafit.problem
    X = supported_input("newton", X, risk, loss, penalty)
    # the vectors of length n on the workers where they can be (:mod:`.newton_chunked`), else gathered
    if chunked_supported(X, risk, loss, penalty, datafit.sample_weight, coef_init, intercept_init):
        problem = ChunkedProblem(X, y, risk, loss, penalty, datafit.fit_intercept)
    else:
        problem = _Problem(X, y, risk, loss, penalty, datafit.fit_intercept, datafit.sample_weight)
    problem = _NativeProblem.of(problem)  # n-vectors in X's namespace where X is an array-API array
    design = problem.design
    progress = Progress("newton", verbose, max_iter, unit="Newton step", criterion="certified gap")
    theta = starting_theta(design, coef_init, intercept_init)
    run = _ProximalPoint(problem, theta, coef_init is not None, max_iter, progress)
    # with an l2 part the certificate is a duality gap and the decrement only steers: far from the
    # tolerance the last Hessian estimates it, and a Gram matrix is formed only for a step (not where
    # a pass is costly)
    reuse = problem.l2 > 0.0 and not design.fuses_products
    H = None
    if run.warm and run.from_zero and problem.l2 > 0.0:
        run.check_zero(run.best[3], tol)  # a warm start at theta = 0, where the losses may tie (the centre)
    while (not run.certified and run.steps < max_iter and run.outer < max_iter
           and not problem.gather_to_finish):
        decrease_q = None
        far = run.last_gap > max(_EXACT_DECREMENT * tol, 1e-4) * abs(run.history[-1])
        if reuse and H is not None and far:
            g = problem.gradient(run.theta, run.state["q"], run.state["d1"])
            _, decrease_q = problem.direction(H, g, run.theta)
        if decrease_q is None or not (decrease_q <= run.inner_tol or run.stalled):
            # where a pass is costly the block term comes in the same one, though unused when the
            # inner solve ends here
            g, H, scatter = problem.derivatives(run.theta, run.state, run.mu, block=design.fuses_products)
            _, decrease_q = problem.direction(H, g, run.theta)
        if not (decrease_q <= run.inner_tol or run.stalled):
            run.newton_step(g, H, scatter, verbose)
        elif run.stalled and run.outer_stalls >= 2:
            run.close_from_dual(tol)  # rounding: no step lowers F_mu any more
            break
        elif run.outer_iteration(decrease_q, tol):
            break
    result = run.result(start)
    if problem.gather_to_finish and not result.converged:
        return _finished_gathered(datafit, penalty, result, max_iter=max_iter, tol=tol, verbose=verbose,
                                  progress=progress)
    return result


def _finished_gathered(datafit, penalty, result, *, max_iter, tol, verbose, progress):
    """``result`` of a chunked fit, finished on the gathered :class:`_Problem` from its coefficients.

    The Newton steps, the history and the passes of both fits add up.
    """
    progress.note("a check needs the losses in one place: the fit goes on with its vectors gathered")
    rest = smoothed_newton(datafit, penalty, coef_init=result.coef, intercept_init=result.intercept,
                           max_iter=max(max_iter - result.n_iter, 1), tol=tol, verbose=verbose)
    info = dict(rest.info, passes=result.info["passes"] + rest.info["passes"],
                time=result.info["time"] + rest.info["time"])
    return SolverResult(
        coef=rest.coef, intercept=rest.intercept, n_iter=result.n_iter + rest.n_iter,
        objective_history=np.concatenate([result.objective_history, rest.objective_history]),
        stop_criterion=rest.stop_criterion, converged=rest.converged, info=info)
