"""The Moreau-smoothed rank-risk objective of one fit: value, derivatives and certificates.

``F_mu(theta; center) = max_{q in P} q . l(t) - mu ||q - center||^2 / 2 + R(w)``
(in the metric of the masses), the smoothing of a convex spectral risk
that the certified Newton solver minimises by the proximal point method
(:mod:`skrank.solvers.full_batch.newton`, the user guide's
:ref:`methods-newton`).  :class:`SmoothedRankRisk` evaluates it, its
gradient, Hessian and the pooled blocks' term of its Newton model, the
exact objective and the certificates (a Fenchel dual bound, its ascent, the
check of ``theta = 0``).  Where the design keeps its ``n``-vectors (on the
host, or in ``X``'s array-API namespace: ``design.vectors_on_host``) is the
design's business; only the rank step (:mod:`.rank_step`) runs on the host.
"""

import numpy as np
import scipy.linalg
import scipy.sparse as sp

from ..backends.dispatch import make_design
from ..losses import conjugate_in, derivatives_in, values_in
from .penalty_model import PenaltyModel
from .rank_step import rank_step_for
from .smoothed_risk import losses_and_keys, relative_weights

#: A Gram matrix's row is recomputed when its weight moved by more than this (the certificate allows it).
HESSIAN_SLACK = 0.05
#: Smallest share of the total mass a sample's mass is given.
SMALLEST_SHARE = 2.0 ** -52
#: Most steps of :func:`zero_search`, and the factor by which the estimated gap must shrink
#: every ``_ZERO_WINDOW`` of them for the search to go on.
_ZERO_STEPS = 50
_ZERO_WINDOW = 10
_ZERO_SHRINK = 0.1
#: The dual ascent stops after this many steps without a gain of a thousandth of the gap.
_DUAL_ASCENT_PATIENCE = 20


class DualRecord:
    """The largest dual bound found so far (with an l2 part) and its weights ``q``."""

    #: Whether the fit needs a check this problem cannot make, and finishes with its vectors gathered.
    gather_to_finish = False
    #: The passes over ``X`` of the block term's own Gram matrices.
    block_passes = 0
    #: Whether the mean risk's cold fit starts by Newton's method on its fixed weights.
    newton_on_fixed_weights = True

    def __init__(self, loss, penalty, design):
        self.loss, self.design = loss, design
        self.penalty = PenaltyModel(penalty, design)
        self.best_dual, self.best_dual_weights = -np.inf, None

    def record_dual(self, value, q):
        """Keep ``value`` and its weights ``q`` when it is the largest dual bound so far."""
        if value > self.best_dual:
            self.best_dual, self.best_dual_weights = value, q

    def native_arguments(self, theta, shift=True):
        """The loss arguments as an ``n``-vector where the design keeps them (here :meth:`arguments`)."""
        return self.arguments(theta, shift)


class SmoothedRankRisk(DualRecord):
    """A rank-risk datafit bound to its design and penalty: ``F``, ``F_mu`` and their derivatives.

    Parameters
    ----------
    datafit : skrank.datafits.rank_risk.RankRisk
        The data, a risk with nondecreasing weights, a smooth loss and the
        sample weights (the risk is that of the weighted empirical
        distribution).  Its design ``[X, 1]`` keeps the ``n``-vectors where
        it says (``vectors_on_host``, ``to_native``, ``to_host``, ``xp``).
    penalty : skrank.penalties.Penalty
    """

    def __init__(self, datafit, penalty):
        risk, loss, sample_weight = datafit.risk, datafit.loss, datafit.sample_weight
        design = datafit.design()
        super().__init__(loss, penalty, design)
        #: The same design, whose kept Gram matrix is the block term's (:meth:`block_scatter`).
        self._block_design = None
        s, c = datafit.affine_map()
        n = self.n = s.size
        # c = 0 (classification) or s = 1 (regression): a view of one number, not a vector
        if loss.task == "classification":
            self.s, self.c = s, np.broadcast_to(0.0, n)
        else:
            self.s, self.c = np.broadcast_to(1.0, n), c
        self.risk = risk
        if sample_weight is None:
            self.mass, self.m = None, np.broadcast_to(1.0, n)
        else:
            # masses of mean 1 (:mod:`skrank.datafits.smoothed_risk`); rank weights per order
            self.mass = np.asarray(sample_weight, dtype=np.float64)  # in the caller's units (counts)
            v = relative_weights(self.mass)
            # The rank weights are differences of the spectrum's integral at the ends of the cells
            # of mass, accurate to a few ulps of their sum: a share of the mass below 2^-52 is
            # not resolved by them, and as a mass it would make their rounding a huge weight per
            # unit of mass.  Such masses (zero ones included) are raised to that share.
            self.m = np.maximum(v * (n / v.sum()), n * SMALLEST_SHARE)
        self.rank_step = rank_step_for(design, risk, self.mass, self.m)
        # s, c (None: no shift) and the masses where the design keeps its n-vectors
        self._s = self.s if design.vectors_on_host else design.to_native(np.ascontiguousarray(self.s))
        self._c = None if loss.task == "classification" else design.to_native(self.c)
        self._m = None if self.mass is None else design.to_native(self.m)

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
        sigma = self.rank_step.weights(order)
        if warm:
            first = np.flatnonzero(np.r_[True, np.diff(losses[order]) != 0.0])
            mass = self.m[order]
            share = np.add.reduceat(sigma, first) / np.add.reduceat(mass, first)
            center = np.empty(order.size)
            center[order] = mass * np.repeat(share, np.diff(np.r_[first, order.size]))
        else:
            center = self.m * (sigma.sum() / order.size)
        return center, float(np.max(sigma / self.m[order]))

    def arguments(self, theta, shift=True):
        """The loss arguments ``s [X, 1] theta + c`` on the host; without ``shift``, ``s [X, 1] theta``."""
        t = self.design.matvec(theta)
        t *= self.s
        if shift:
            t += self.c
        return t

    def native_arguments(self, theta, shift=True):
        """:meth:`arguments` as an ``n``-vector where the design keeps them."""
        if self.design.vectors_on_host:
            return self.arguments(theta, shift)
        t = self.design.native_matvec(theta) * self._s
        return t + self._c if shift and self._c is not None else t

    def loss_values(self, t):
        """``l(t)`` for loss arguments ``t`` of the design's namespace."""
        return self.loss.value(t) if self.design.vectors_on_host else values_in(self.design.xp, self.loss, t)

    def loss_derivatives(self, t):
        """``(l(t), l'(t), l''(t))`` for loss arguments ``t`` of the design's namespace."""
        on_host = self.design.vectors_on_host
        return self.loss.derivatives(t) if on_host else derivatives_in(self.design.xp, self.loss, t)

    def risk_value(self, losses, pooled=None):
        """``Omega(l)``, the (weighted) risk of the losses (``pooled``: a projection's record, a hint)."""
        return self.rank_step.risk_value(losses, pooled)

    def objective(self, theta):
        """The exact ``F(theta)``."""
        return self.risk_value(self.loss.value(self.arguments(theta))) + self.penalty.value(theta)

    def _losses_and_keys(self, t, mu, center):
        """``(l, l', keys)`` at ``t``, ``keys = mu center / m + l`` on the host."""
        unit = self.mass is None  # unit masses: no divisions, no reordered copies
        if not self.design.vectors_on_host:
            value, d1, _ = self.loss_derivatives(t)
            return value, d1, self.design.to_host(mu * (center if unit else center / self._m) + value)
        n = t.size
        value, d1, keys = np.empty(n), np.empty(n), np.empty(n)
        losses_and_keys(t, self.loss.code, self.loss.param, mu, center if unit else center / self.m,
                        value, d1, keys)
        return value, d1, keys

    def smoothed(self, theta, mu, center, t=None):
        """``F_mu(theta; center)`` and what its derivatives need (``t``: the loss arguments at ``theta``)."""
        if t is None:
            t = self.native_arguments(theta)
        value, d1, keys = self._losses_and_keys(t, mu, center)
        q_host, pooled = self.rank_step.project(keys, mu)
        q = self.design.to_native(q_host)
        diff = q - center
        omega = float(q @ value) - 0.5 * mu * float(diff @ (diff if self.mass is None else diff / self._m))
        # l'' is not computed: only the accepted states need it (:meth:`curvature`)
        state = dict(t=t, value=value, d1=d1, q=q, q_host=q_host, pooled=pooled)
        return omega + self.penalty.value(theta), state

    def curvature(self, state):
        """``l''(t)`` at the state's loss arguments."""
        return self.loss_derivatives(state["t"])[2]

    def gradient(self, theta, q, d1):
        """``[X, 1]^T (s q l') + reg theta`` from ``n``-vectors of the design's namespace."""
        return self.design.native_rmatvec(self._s * q * d1) + self.penalty.reg * theta

    def hessian(self, q, d2):
        """Hessian of the ``q``-weighted problem, within a factor ``1 +- HESSIAN_SLACK``."""
        H = self.design.native_gram(q * d2, HESSIAN_SLACK)
        H[np.diag_indices_from(H)] += self.penalty.reg
        return H

    def derivatives(self, theta, state, mu, block):
        """Gradient and Hessian of ``F_mu`` at the state for its weights ``q``, and the block term.

        ``block``: whether to make :meth:`block_scatter` too (else None), in
        the same call to the design, :meth:`Design.step_products`: one
        pass over ``X`` where the design fuses its products.
        """
        terms = self._block_terms(state) if block else None
        q, design = state["q"], self.design
        if not design.vectors_on_host:
            g, H = self.gradient(theta, q, state["d1"]), self.hessian(q, self.curvature(state))
            if terms is None:
                return g, H, None
            return g, H, _scatter(design.weighted_gram(terms[0]), design.left_product(terms[1]), terms[2], mu)
        g, H, G_block, sums = design.step_products(self.s * q * state["d1"], q * self.curvature(state),
                                                   HESSIAN_SLACK, None if terms is None else terms[:2])
        g += self.penalty.reg * theta
        H[np.diag_indices_from(H)] += self.penalty.reg
        return g, H, None if terms is None else _scatter(G_block, sums, terms[2], mu)

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
        return _scatter(self._block_design.gram(h), sums, block_mass, mu)

    @property
    def block_passes(self):
        """The passes over ``X`` of the block term's Gram matrices (:meth:`block_scatter`)."""
        return 0 if self._block_design is None else self._block_design.passes

    def _block_terms(self, state):
        """``(h, M, m(B))`` of :meth:`block_scatter`: the members' weights ``m_i l'_i^2``, the sparse
        matrix of the block sums and the blocks' masses; None without pooled blocks."""
        order, block_start, size = state["pooled"]
        if size.size == 0:
            return None
        first = np.cumsum(size) - size
        pos = np.arange(size.sum()) - np.repeat(first - block_start, size)
        idx = order[pos]
        coef = self.design.take(state["d1"], idx) * self.s[idx]
        mass = self.m[idx]
        h = np.zeros(self.s.size)
        h[idx] = mass * coef * coef
        # the members come block by block: the rows of the indicator, without a conversion from pairs
        indptr = np.concatenate(([0], np.cumsum(size)))
        indicator = sp.csr_matrix((mass * coef, idx, indptr), shape=(size.size, self.s.size))
        return h, indicator, np.add.reduceat(mass, first)

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
        ``q``-weighted problem's gap: ``decrease`` (the penalty's
        ``direction``, with the Hessian of :meth:`hessian`, which is at least
        ``1 - slack`` times the exact one) divided by ``1 - slack``: the
        estimate, returned too, which steers the inner solves (a duality gap
        from the slopes at ``theta`` sees only the penalty's curvature and is
        far larger than ``F(theta) - F*`` until the gradient is tiny).
        """
        value = state["value"]
        omega = self.risk_value(self.design.to_host(value), state["pooled"])  # the sorted losses' risk
        F = omega + self.penalty.value(theta)
        estimate = max(omega - float(state["q"] @ value), 0.0) + decrease / (1.0 - HESSIAN_SLACK)
        if self.penalty.l2 > 0.0:
            self.record_dual(self.dual_bound(state["q"], state["d1"]), state["q_host"])
            return F, max(F - self.best_dual, 0.0), estimate
        return F, estimate, estimate

    def dual_bound(self, q, slope, on_host=False):
        """A lower bound on ``F*`` from the weights ``q`` in ``P(sigma)`` and the slopes ``a``.

        For every such ``q``, ``F* >= min_theta sum_i q_i l(t_i) + R(w)``,
        and by ``l(t) >= a t - l*(a)`` that minimum is at least
        ``sum_i q_i (a_i c_i - l*(a_i)) - R*(-z)`` with ``z = X^T (s q a)``,
        when ``sum_i s_i q_i a_i = 0`` (the intercept).  ``a`` is first made
        to satisfy this by shrinking the entries on the side of the excess
        toward 0 and, without an l2 part, to satisfy ``||z||_inf <= l1`` by
        shrinking all of it (0 lies in the domain of every loss's ``l*``).
        ``R*(y) = sum_j (|y_j| - l1)_+^2 / (2 l2)`` with an l2 part.
        ``q`` and ``a`` are ``n``-vectors of the design's namespace, or
        NumPy ones with ``on_host`` (the dual ascent's, the zero check's).
        """
        design = self.design
        native = not (on_host or design.vectors_on_host)
        xp = design.xp if native else np
        s, c = (self._s, self._c) if native else (self.s, None if self._c is None else self.c)
        a = slope
        u = s * q * a
        if design.fit_intercept:
            excess = float(xp.sum(u))
            side = u > 0.0 if excess > 0.0 else u < 0.0
            total = float(xp.sum(u[side]))
            if total != 0.0:
                shrink = max(1.0 - excess / total, 0.0)
                a = xp.where(side, a * shrink, a)
                u = xp.where(side, u * shrink, u)
        rmatvec = design.native_rmatvec if native else design.rmatvec
        scale, conjugate_penalty = self.penalty.conjugate(rmatvec(u)[: design.d])
        a = a * scale
        conjugate = conjugate_in(xp, self.loss, a) if native else self.loss.conjugate(a)
        return float(q @ (-conjugate if c is None else a * c - conjugate)) - conjugate_penalty

    def certify_zero(self, q, tol):
        """Raise the dual bound toward ``F(0)`` where every loss ties at ``theta = 0``; returns ``F(0)``.

        At ``theta = 0`` the risk's subdifferential is all of ``P(sigma)``:
        ``F(theta) >= F(0) + g(q).theta + R(w)`` for each ``q`` in it, with
        ``g(q) = [X, 1]^T (s q l'(0))``, so that ``F(0) - F* <= R*(-g_w(q))``
        when ``g_b(q) = 0`` (:meth:`dual_bound`).  ``theta = 0`` is
        optimal exactly when ``P(sigma)`` meets the null space of
        ``A = [X, 1]^T diag(s l'(0))``: a point of both is sought by
        accelerated alternating projections (:func:`zero_search`: projected
        gradient steps of ``||A q||^2`` in the metric of ``(A diag(m)
        A^T)^-1``, one weighted Gram matrix, then two products with ``X``,
        one sort and one PAVA a step), from the weights ``q``.  None when the
        losses do not tie at 0 or the penalty has no l2 part.
        """
        design, m = self.design, self.m
        t = self.arguments(np.zeros(design.p))
        if self.penalty.l2 == 0.0 or np.ptp(t) != 0.0:
            return None
        F0 = self.objective(np.zeros(design.p))
        _, slope, _ = self.loss.derivatives(t)
        sa = self.s * slope
        factor = ridged_cholesky(lambda: design.weighted_gram(m * sa * sa))
        if factor is None:
            return F0
        q = np.array(q, dtype=np.float64)
        rank_step = self.rank_step.restarted(np.argsort(q / m, kind="stable"))

        def step(z, u):
            keys = (z - m * sa * design.matvec(scipy.linalg.cho_solve(factor, u, check_finite=False))) / m
            q_new, _ = rank_step.project(keys, 1.0)
            return q_new, design.rmatvec(sa * q_new)

        zero_search(self, F0, q, design.rmatvec(sa * q), tol, step,
                    lambda q_new: self.dual_bound(q_new, slope, on_host=True))
        return F0

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
        design, m = self.design, self.m
        _, slope, _ = self.loss.derivatives(self.arguments(theta))
        e = slope * self.c - self.loss.conjugate(slope)
        sa = self.s * slope
        step = _dual_ascent_step(self, sa)
        if step is None:
            return False
        q = np.array(self.best_dual_weights, dtype=np.float64)
        improved, since = False, 0
        F_theta = self.objective(theta)
        for _ in range(max_steps):
            coef = np.zeros(design.p)
            coef[: design.d] = self.penalty.conjugate_gradient(-design.rmatvec(sa * q)[: design.d])
            # ascent in the metric of the masses, then the projection onto P in that metric
            keys = (q + step * m * (e + sa * design.matvec(coef))) / m
            q, _ = self.rank_step.restarted(np.argsort(keys, kind="stable")).project(keys, 1.0)
            bound = self.dual_bound(q, slope, on_host=True)
            gain = bound - self.best_dual
            if gain > 0.0:
                improved = True
                since = 0 if gain > 1e-3 * max(F_theta - self.best_dual, 1e-300) else since + 1
                self.record_dual(bound, q)
            else:
                since += 1
            if since >= _DUAL_ASCENT_PATIENCE:
                break  # no step closed a thousandth of the gap for a while
        return improved


def _scatter(G_block, sums, block_mass, mu):
    """The block term ``(G_block - sum_B S_B S_B^T / m(B)) / mu``."""
    return (G_block - (sums.T / block_mass) @ sums) / mu


def ridged_cholesky(gram):
    """The Cholesky factor of ``gram()`` with a ridge relative to each column's scale; None if it fails.

    The ridge is ``1e-12`` times each diagonal entry (1 where it is 0), so
    that ``X * c`` takes the same steps as ``X``.
    """
    try:
        G = np.array(gram(), dtype=np.float64)  # a copy, the ridge added below
        diagonal = np.diag(G).copy()
        G[np.diag_indices_from(G)] += np.where(diagonal > 0.0, 1e-12 * diagonal, 1.0)
        return scipy.linalg.cho_factor(G, check_finite=False)
    except (np.linalg.LinAlgError, ValueError):
        return None


def _dual_ascent_step(problem, sa):
    """The step ``1/L`` of :meth:`SmoothedRankRisk.dual_ascent` (``sa = s a``), None when ``L = 0``.

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
    return problem.penalty.l2 / max(norm, 1e-300)


def zero_search(problem, F0, q, u, tol, step, bound):
    """The accelerated alternating projections that check ``theta = 0``, from the weights ``q``.

    ``u = [X, 1]^T (s q l'(0))``; ``step(z, u)`` projects from the
    extrapolated weights ``z`` and returns ``(q_new, u_new)``;
    ``bound(q_new)`` is the dual bound of ``q_new``, kept by
    ``problem.record_dual`` when it is the largest.  Stops once the
    certified gap is below ``tol F0`` or the estimated one
    ``||u||^2 / (2 l2)`` (the intercept's slope too, which must vanish)
    shrinks too slowly (``theta = 0`` is not optimal).
    """
    l2 = problem.penalty.l2
    u_q, z, momentum = u, q, 1.0
    best, checkpoint = np.inf, float(u @ u) / (2.0 * l2)
    for k in range(1, _ZERO_STEPS + 1):
        q_new, u_new = step(z, u)
        estimate = float(u_new @ u_new) / (2.0 * l2)
        if estimate <= tol * abs(F0) and estimate < best:
            problem.record_dual(bound(q_new), q_new)
            if F0 - problem.best_dual <= tol * abs(F0):
                return
        best = min(best, estimate)
        if k % _ZERO_WINDOW == 0:
            if best > _ZERO_SHRINK * checkpoint:
                return
            checkpoint = best
        next_momentum = 0.5 * (1.0 + np.sqrt(1.0 + 4.0 * momentum * momentum))
        beta = (momentum - 1.0) / next_momentum
        z = q_new + beta * (q_new - q)
        u = u_new + beta * (u_new - u_q)
        q, u_q, momentum = q_new, u_new, next_momentum
