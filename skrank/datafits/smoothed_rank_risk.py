"""The Moreau-smoothed rank-risk objective of one fit: value, derivatives and certificates.

``F_mu(theta; center) = max_{q in P} q . l(t) - mu ||q - center||^2 / 2 + R(w)``
(in the metric of the masses), the smoothing of a convex spectral risk
that the certified Newton solver minimises by the proximal point method
(:mod:`skrank.solvers.full_batch.newton`, the user guide's
:ref:`methods-newton`).  :class:`SmoothedRankRisk` evaluates it, its
gradient, Hessian and the pooled blocks' term of its Newton model, the
exact objective and the certificates (a Fenchel dual bound, its ascent, the
check of ``theta = 0``).  Its ``n``-vector work is the design's: in this
process (NumPy), in ``X``'s array-API namespace (``design.vectors_on_host``)
or, for a Dask ``X`` whose fit keeps them apart
(``design.keeps_vectors_apart``), on the workers, each Newton step one
fused graph (:class:`skrank.backends.dask_vectors.WorkerDesign`).  The
rank step (:mod:`.rank_step`) runs where the design keeps the keys.
"""

import numpy as np
import scipy.linalg

from ..backends.dispatch import make_design
from .penalty_model import PenaltyModel
from .rank_step import rank_step_for

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


class SmoothedRankRisk:
    """A rank-risk datafit bound to its design and penalty: ``F``, ``F_mu`` and their derivatives.

    Parameters
    ----------
    datafit : skrank.datafits.rank_risk.RankRisk
        The data, a risk with nondecreasing weights, a smooth loss and the
        sample weights (the risk is that of the weighted empirical
        distribution).  Its design ``[X, 1]`` does the ``n``-vector work
        where it keeps them (``keeping_vectors_for``).
    penalty : skrank.penalties.Penalty
    gathered : bool, default=False
        Whether the vectors are gathered in this process even where the
        design could keep them apart.
    """

    #: Whether the fit needs a check this problem cannot make, and finishes with its vectors gathered.
    gather_to_finish = False

    def __init__(self, datafit, penalty, gathered=False):
        risk, loss, sample_weight = datafit.risk, datafit.loss, datafit.sample_weight
        design = datafit.design()
        if not gathered:
            design = design.keeping_vectors_for(risk, penalty)
        self.loss, self.design, self.risk = loss, design, risk
        self.penalty = PenaltyModel(penalty, design)
        self.best_dual, self.best_dual_weights = -np.inf, None
        #: The same design, whose kept Gram matrix is the block term's (:meth:`block_scatter`).
        self._block_design = None
        n = self.n = design.n
        # s, c, m: kept n-vectors (where the rank step reads them); c = 0 (classification) or s = 1
        # (regression), a view of one number in memory
        self._ones = design.constant(1.0)
        y = design.vector(datafit.y, np.negative)
        if loss.task == "classification":
            self.s, self.c = y, design.constant(0.0)
        else:
            self.s, self.c = self._ones, y
        self.mass, self.m = None, self._ones
        if sample_weight is not None:
            # masses of mean 1 (:mod:`skrank.datafits.smoothed_risk`); rank weights per order
            self.mass = design.vector(sample_weight)  # in the caller's units (counts)
            # an exact power of two brings the largest into [1/2, 1) (relative_weights)
            v = self.mass * np.ldexp(1.0, -int(np.frexp(design.extremes(self.mass)[1])[1]))
            # The rank weights are differences of the spectrum's integral at the ends of the cells
            # of mass, accurate to a few ulps of their sum: a share of the mass below 2^-52 is
            # not resolved by them, and as a mass it would make their rounding a huge weight per
            # unit of mass.  Such masses (zero ones included) are raised to that share.
            self.m = design.keep(np.maximum(v * (n / float(v.sum())), n * SMALLEST_SHARE))
        self.rank_step = rank_step_for(design, risk, self.mass, self.m)
        # s, c (None: no shift) and the masses (None: unit masses) as the design's native n-vectors
        self._s = design.to_native(self.s)
        self._c = None if loss.task == "classification" else design.to_native(self.c)
        self._m = None if self.mass is None else design.to_native(self.m)

    @property
    def newton_on_fixed_weights(self):
        """Whether the mean risk's cold fit starts by Newton's method on its fixed weights (in memory)."""
        return not self.design.keeps_vectors_apart

    def record_dual(self, value, q):
        """Keep ``value`` and its weights ``q`` when it is the largest dual bound so far."""
        if value > self.best_dual:
            self.best_dual, self.best_dual_weights = value, q

    def exported_weights(self, q):
        """The certificate's weights as the result gives them: ``q``; None where they are kept apart."""
        return None if self.design.keeps_vectors_apart else q

    def first_center(self, theta, warm):
        """The first centre and the largest rank weight per unit of mass (the rank step's)."""
        return self.rank_step.first_center(lambda: self._losses(theta), warm, self.n)

    def arguments(self, theta, shift=True):
        """The loss arguments ``s [X, 1] theta + c`` kept; without ``shift``, ``s [X, 1] theta``."""
        t = self.design.kept_matvec(theta)
        t *= self.s  # in place on a NumPy vector
        if shift:
            t += self.c
        return t

    def _losses(self, theta):
        """The losses at ``theta``, kept."""
        return self.design.kept_losses(self.loss, self.arguments(theta))

    def native_arguments(self, theta, shift=True):
        """:meth:`arguments` as an ``n``-vector where the design keeps them."""
        return self.design.affine(theta, self._s, self._c if shift else None)

    def loss_values(self, t):
        """``l(t)`` for loss arguments ``t`` of the design's namespace."""
        return self.design.loss_values(self.loss, t)

    def loss_derivatives(self, t):
        """``(l(t), l'(t), l''(t))`` for loss arguments ``t`` of the design's namespace."""
        return self.design.loss_derivatives(self.loss, t)

    def risk_value(self, losses, pooled=None):
        """``Omega(l)``, the (weighted) risk of the losses (``pooled``: a projection's record, a hint)."""
        return self.rank_step.risk_value(losses, pooled)

    def objective(self, theta, t=None):
        """The exact ``F(theta)`` (``t``: its loss arguments, a native ``n``-vector, where they are kept)."""
        losses = self._losses(theta) if t is None else self.design.to_host(self.loss_values(t))
        return self.risk_value(losses) + self.penalty.value(theta)

    def shared_arguments(self, theta):
        """:meth:`native_arguments` computed and kept, for both :meth:`objective` and :meth:`smoothed`.

        None where the design's native vectors live on a device and its
        kept ones on the host: there a second product with ``X`` costs less
        than bringing the vector to the host.
        """
        if not (self.design.vectors_on_host or self.design.keeps_vectors_apart):
            return None
        return self.design.kept_and_sums(self.native_arguments(theta))[0]

    def smoothed(self, theta, mu, center, t=None, dt=None, state=None):
        """``F_mu(theta; center)`` and what its derivatives need (``t``: the loss arguments at ``theta``).

        ``center``: an ``n``-vector, or one number per unit of mass.  With
        ``dt`` (:meth:`along`), the state's ``slope`` is ``q . (l' dt)``,
        summed with the objective's terms.  ``state``: a state at the same
        ``theta`` (of another ``mu`` or centre), whose loss arguments and
        losses are reused.
        """
        design = self.design
        known = None
        if state is not None:
            t, known = state["t"], (state["value"], state["d1"])
        elif t is None:
            t = self.native_arguments(theta)
        per_mass = center if self._m is None or np.ndim(center) == 0 else center / self._m
        t, value, d1, keys = design.losses_and_keys(self.loss, t, mu, per_mass, known)
        q_host, pooled = self.rank_step.project(keys, mu)
        q = design.to_native(q_host)
        diff = q - (center if self._m is None or np.ndim(center) > 0 else self._m * center)
        pairs = [(q, value), (diff, diff if self._m is None else diff / self._m)]
        # what the state keeps re-rooted together, with the sums
        (t, value, d1, q), sums = design.rerooted_and_sums(
            (t, value, d1, q), pairs + ([] if dt is None else [(q, d1 * dt)]))
        # l'' is not computed: only the accepted states need it (:meth:`curvature`)
        state = dict(t=t, value=value, d1=d1, q=q, q_host=q_host, pooled=pooled, weighted=sums[0],
                     slope=None if dt is None else sums[2])
        return sums[0] - 0.5 * mu * sums[1] + self.penalty.value(theta), state

    def along(self, step, state):
        """``(dt, slope)``: the loss arguments' change ``dt = s [X, 1] step``, kept, and the state's
        ``q . (l' dt)``, made together."""
        dt = self.native_arguments(step, shift=False)
        dt, (slope,) = self.design.kept_and_sums(dt, (state["q"], state["d1"] * dt))
        return dt, slope

    def curvature(self, state):
        """``l''(t)`` at the state's loss arguments (``l`` and ``l'`` are known already)."""
        return self.design.loss_curvature(self.loss, state["t"], state["d1"])

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
        q = state["q"]
        g, H, G_block, sums = self.design.step_products(self._s * q * state["d1"], q * self.curvature(state),
                                                        HESSIAN_SLACK, None if terms is None else terms[:2])
        # what the certificate's dual bound at this state takes from that pass, where the design makes it
        state["signed"] = self.design.last_signed
        g += self.penalty.reg * theta
        H[np.diag_indices_from(H)] += self.penalty.reg
        return g, H, None if terms is None else (G_block - terms[2](sums)) / mu

    def block_scatter(self, state, mu):
        """``(1/mu) sum_B sum_{i in B} m_i (g_i - g_B)(g_i - g_B)^T``, ``g_i = l'_i s_i [x_i, 1]``.

        ``g_B`` is the members' mean weighted by the masses ``m``.  Computed
        as ``sum_i m_i g_i g_i^T - sum_B S_B S_B^T / m(B)`` with the block
        sums ``S_B = sum_B m_i g_i``: for a NumPy ``X`` from the members'
        rows, gathered once (:meth:`Design.block_gram`); else a weighted
        Gram matrix of the members and one product with a sparse
        block-indicator matrix (the rank step's ``block_terms``), without
        gathering rows.  None without pooled blocks.
        """
        if self._block_design is None:
            self._block_design = make_design(self.design.X, self.design.fit_intercept)
        if self._block_design.gathers_blocks:
            members = self.rank_step.block_members(state["pooled"], self._slopes(state))
            return None if members is None else self._block_design.block_gram(*members, self.m) / mu
        terms = self._block_terms(state)
        if terms is None:
            return None
        h, indicator, finish = terms
        sums = self.design.left_product(indicator)
        # exact, but only the rows whose weight changed are added again (after a move of the centre: those
        # that joined or left the blocks)
        return (self._block_design.gram(h) - finish(sums)) / mu

    @property
    def block_passes(self):
        """The passes over ``X`` of the block term's Gram matrices (:meth:`block_scatter`)."""
        return 0 if self._block_design is None else self._block_design.passes

    def _slopes(self, state):
        """``slopes(idx)``: ``l'_i s_i`` at the state of the rows ``idx`` on the host, or of every row
        where the design keeps them (``idx`` None)."""
        d1 = state["d1"]
        return lambda idx: d1 * self._s if idx is None else self.design.take(d1, idx) * self.s[idx]

    def _block_terms(self, state):
        """The rank step's ``block_terms`` of the state's projection; None without pooled blocks."""
        return self.rank_step.block_terms(state["q"], state["pooled"], self._slopes(state))

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
        value, q = state["value"], state["q"]
        omega = self.risk_value(self.design.to_host(value), state["pooled"])  # the sorted losses' risk
        F = omega + self.penalty.value(theta)
        weighted = state["weighted"]  # q . l, summed with the state
        estimate = max(omega - weighted, 0.0) + decrease / (1.0 - HESSIAN_SLACK)
        if self.penalty.l2 > 0.0:
            self.record_dual(self.dual_bound(q, state["d1"], signed=state.get("signed")), state["q_host"])
            return F, max(F - self.best_dual, 0.0), estimate
        return F, estimate, estimate

    def dual_bound(self, q, slope, on_host=False, signed=None):
        """A lower bound on ``F*`` from the weights ``q`` in ``P(sigma)`` and the slopes ``a``.

        For every such ``q``, ``F* >= min_theta sum_i q_i l(t_i) + R(w)``,
        and by ``l(t) >= a t - l*(a)`` that minimum is at least
        ``sum_i q_i (a_i c_i - l*(a_i)) - R*(-z)`` with ``z = X^T (s q a)``,
        when ``sum_i s_i q_i a_i = 0`` (the intercept).  ``a`` is first made
        to satisfy this by shrinking the entries on the side of the excess
        toward 0 and, without an l2 part, to satisfy ``||z||_inf <= l1`` by
        shrinking all of it (0 lies in the domain of every loss's ``l*``):
        the design's ``dual_value``.
        ``R*(y) = sum_j (|y_j| - l1)_+^2 / (2 l2)`` with an l2 part.
        ``q`` and ``a`` are ``n``-vectors of the design's namespace, or
        kept ones with ``on_host`` (the dual ascent's, the zero check's).
        ``signed``: what :meth:`derivatives` at the same ``q`` and slopes
        kept of its pass over ``X`` for this bound (the design's
        ``last_signed``), or None.
        """
        s, c = (self.s, None if self._c is None else self.c) if on_host else (self._s, self._c)
        return self.design.dual_value(q, slope, s, c, self.loss, self.penalty.conjugate, on_host, signed)

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
        A^T)^-1``, one weighted Gram matrix, then two products with ``X``
        and one projection a step), from the weights ``q`` (kept ones).
        None when the losses do not tie at 0 or the penalty has no l2 part.
        """
        design, m = self.design, self.m
        zero = np.zeros(design.p)
        low, high = design.extremes(self.arguments(zero))
        if self.penalty.l2 == 0.0 or low != high:
            return None
        F0 = self.objective(zero)
        slope = float(self.loss.derivatives(np.array([low]))[1][0])
        sa = design.keep(slope * self.s)
        factor = ridged_cholesky(lambda: design.kept_gram(m * sa * sa))
        if factor is None:
            return F0
        rank_step = self.rank_step.restarted_from(q / m)

        def step(z, u):
            solved = scipy.linalg.cho_solve(factor, u, check_finite=False)
            keys = design.keep((z - m * sa * design.kept_matvec(solved)) / m)
            q_new, _ = rank_step.project(keys, 1.0)
            return q_new, design.kept_rmatvec(sa * q_new)

        zero_search(self, F0, q, design.kept_rmatvec(sa * q), tol, step,
                    lambda q_new: self.dual_bound(q_new, slope * self._ones, on_host=True))
        return F0

    def dual_ascent(self, theta, max_steps):
        """Raise the best dual bound by projected gradient ascent over ``q`` (slopes at ``theta``).

        The proximal point iterations move the weights slowly at a
        degenerate optimum (e.g. ``w = 0`` with every loss tied), where the
        Newton steps stall in rounding before the gap closes.  For fixed
        slopes ``a`` the bound ``q . (a c - l*(a)) - R*(-X^T (s q a))`` is
        concave in ``q``; it is maximised over ``P(sigma)`` by projected
        gradient steps (one sort and one PAVA each), starting from the best
        weights so far.  Returns whether the best bound rose.  The ascent
        needs the losses in one place: where the design keeps them apart,
        it marks the fit to be finished with its vectors gathered
        (:attr:`gather_to_finish`) and returns False.
        """
        if self.design.keeps_vectors_apart:
            self.gather_to_finish = True
            return False
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
            q, _ = self.rank_step.restarted_from(keys).project(keys, 1.0)
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
