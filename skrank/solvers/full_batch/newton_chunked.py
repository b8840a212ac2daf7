"""The certified Newton solver on a Dask ``X`` whose vectors of length ``n`` stay on the workers.

:class:`ChunkedProblem` is :class:`skrank.datafits.smoothed_rank_risk.SmoothedRankRisk`'s twin for a
Dask array ``X`` chunked by rows: every convex spectral risk, with or without sample weights, cold or
warm, with an l2 penalty.  Every vector of length ``n`` (loss arguments, losses, slopes, keys, masses,
rank weights ``q``, the centre) is a Dask array chunked like ``X``'s rows and persisted where the
chunks are computed (the workers of a ``dask.distributed`` cluster); the process that drives the fit
receives only reductions: ``O(d^2)`` numbers per step, and the rank step's own (its splitters and
boundary summaries, or counting reductions).  The rank step
(:func:`~skrank.datafits.rank_step.rank_step_for` with ``keys_on_workers``) is the threshold form of
the capped simplex (:class:`~skrank.datafits.rank_step.ThresholdRankStep`: the superquantile without
sample weights, whose free set ``{0 < q < cap}`` is the one pooled block) or the sample sort and PAVA
of :class:`~skrank.backends.dask_rank.DaskSortedRankStep` (every other risk; the pooled blocks' term
of the Newton model from ``PooledBlocks.block_outer``).

The check that ``theta = 0`` is optimal (where no iterate beats the start)
runs here too (:meth:`ChunkedProblem.certify_zero`).  The dual ascent of a
fit whose Newton steps stall in rounding needs the losses in one place:
where it is needed, the chunked fit stops and the fit finishes on the
gathered path (:class:`~skrank.datafits.smoothed_rank_risk.SmoothedRankRisk`),
warm-started from the chunked fit's best point, so that it certifies as
that path does.  An l1 part takes the gathered path from the start;
``SKRANK_NEWTON_GATHER=1`` forces it.
"""

import functools
import os

import numpy as np
import scipy.linalg

from ...backends.dask_design import (
    bordered_gram,
    is_dask_array,
    on_distributed_workers,
    persist,
    rerooted,
    summed,
    weighted_gram,
)
from ...backends.design import Design
from ...backends.dispatch import make_design
from ...datafits.rank_step import rank_step_for
from ...datafits.smoothed_rank_risk import (
    HESSIAN_SLACK,
    SMALLEST_SHARE,
    DualRecord,
    ridged_cholesky,
    zero_search,
)
from ...datafits.smoothed_risk import losses_and_keys

#: The gathered path's vectors of length ``n`` (about 27 float64 ones in the driving process), in
#: bytes per row, and the size below which it is chosen on a cluster: there it is faster (1.5 to 3.6
#: times at 10^6 to 10^4 rows on a 2-worker ``LocalCluster``, ``benchmarks/scale.py``) and its memory small.
_GATHERED_BYTES_PER_ROW = 27 * 8
_GATHER_BUDGET = 64 * 2**20


def chunked_supported(X, risk, loss, penalty, sample_weight, coef_init, intercept_init):
    """Whether the fit takes :class:`ChunkedProblem`: it fits the problem, and it is the better path.

    The chunked path keeps the vectors of length ``n`` where the chunks
    are computed.  That saves the driving process's memory only when they
    are computed by a ``dask.distributed`` client's workers, and
    costs more round trips: it is chosen there, beyond
    ``_GATHER_BUDGET`` bytes of the gathered path's vectors.  The
    environment variable ``SKRANK_NEWTON_GATHER`` overrides the choice:
    ``"1"`` gathers, ``"0"`` takes the chunked path wherever it fits.

    Parameters
    ----------
    X : array-like of shape (n, d)
        The features: a Dask array is needed.
    risk, loss, penalty
        A spectral risk (weights given by the ranks), a loss, a penalty
        with an l2 part and no l1 part (the certificate of an l1 part is
        the gathered path's).
    sample_weight : array-like of shape (n,) or None
        NumPy or Dask sample weights, or None.
    coef_init, intercept_init : ndarray, float or None
        A warm start, or None.

    Returns
    -------
    bool
        True where the chunked path fits the problem and is chosen.
    """
    forced = os.environ.get("SKRANK_NEWTON_GATHER", "")
    if forced not in ("", "0"):
        return False
    fits = (is_dask_array(X) and not risk.depends_on_values and float(penalty.l1) == 0.0
            and float(penalty.l2) > 0.0)
    if not fits or forced == "0":
        return fits
    return X.shape[0] * _GATHERED_BYTES_PER_ROW > _GATHER_BUDGET and on_distributed_workers()


def _losses_block(t, center, code, param, mu):
    """One chunk's ``(l, l', keys)`` as three columns (:func:`losses_and_keys`)."""
    n = t.shape[0]
    out = np.empty((3, n))
    center = np.broadcast_to(np.asarray(center, dtype=np.float64), (n,))
    losses_and_keys(t, code, param, mu, np.ascontiguousarray(center), out[0], out[1], out[2])
    return out.T


def _gram_change(X, delta, fit_intercept):
    """``[X, 1]^T diag(delta) [X, 1]`` for weights ``delta`` of any sign."""
    weighted = X * delta[:, None]
    G = X.T @ weighted
    return bordered_gram(G, weighted.sum(axis=0), delta.sum()) if fit_intercept else G


def _step_block(X, t, d1, q, s, member, kept, loss, slack, fit_intercept):
    """One chunk's shares of the gradient's data part, the Hessian's change and the pooled rows' sums.

    Returns ``((g, dH, G_B, S_B), h_kept)``: ``g = [X, 1]^T (s q l')``; the
    Hessian's weights ``h = q l''`` replace the ``kept`` ones only on the
    rows where they moved by more than ``slack`` (relative; all rows when
    ``kept`` is None), whose change of ``[X, 1]^T diag(h_kept) [X, 1]`` is
    ``dH``; ``G_B = sum_i m_i g_i g_i^T`` and ``S_B = sum_i m_i g_i`` with
    ``g_i = l'_i s_i [x_i, 1]`` and ``m_i = member_i`` the mass of a row in
    a pooled block (0 for the others).
    """
    X = np.asarray(X, dtype=np.float64)
    coef = d1 if s is None else d1 * s
    r = q * coef
    g = X.T @ r
    h = q * loss.derivatives(t)[2]
    if kept is None:
        dH, h_kept = weighted_gram(X, h, fit_intercept), h
    else:
        changed = np.flatnonzero(np.abs(h - kept) > slack * kept)
        dH = _gram_change(X[changed], h[changed] - kept[changed], fit_intercept)
        h_kept = kept.copy()
        h_kept[changed] = h[changed]
    G_block = weighted_gram(X, member * coef * coef, fit_intercept)
    coef_block = member * coef
    S_block = X.T @ coef_block
    if fit_intercept:
        g, S_block = np.append(g, r.sum()), np.append(S_block, coef_block.sum())
    return (g, dH, G_block, S_block), h_kept


def _rows_times(X, v, fit_intercept):
    """``v[:, None] [X, 1]`` of one chunk: the rows whose block sums make the pooled blocks' term."""
    X = np.asarray(X, dtype=np.float64)
    rows = X * v[:, None]
    return np.hstack([rows, v[:, None]]) if fit_intercept else rows


def _away_block(X, z, sa, w, b):
    """One chunk's ``z - sa ([X, 1] (w, b))``: the zero check's step toward the null space."""
    return z - sa * (np.asarray(X, dtype=np.float64) @ w + b)


def _dual_block(X, q, a, s, c, loss, side, shrink):
    """A chunk's ``X^T (s q a')`` and ``sum q (a' c - l*(a'))``, ``a' = a`` but ``shrink a`` on ``side``."""
    u0 = q * a if s is None else s * q * a
    a = np.where(np.sign(u0) == side, a * shrink, a)
    u = q * a if s is None else s * q * a
    value = q @ (a * c - loss.conjugate(a)) if c is not None else -(q @ loss.conjugate(a))
    return np.asarray(X, dtype=np.float64).T @ u, float(value)


class ChunkedProblem(DualRecord):
    """The Newton problem whose vectors of length ``n`` are Dask arrays persisted on the workers.

    See the module docstring for the case it covers.  The states of
    :meth:`smoothed` hold persisted arrays, and their pooled record is the
    rank step's.  The products with ``X`` of vectors on the workers are
    the design's (``DaskDesign.worker_matvec``, ``worker_rmatvec``,
    ``worker_gram``, ``worker_sum``).

    Parameters
    ----------
    X : dask.array.Array of shape (n, d)
    y : ndarray or dask.array.Array of shape (n,)
    risk : skrank.risks.BaseRisk
        A convex spectral risk.
    loss : skrank.losses.Loss
    penalty : skrank.penalties.Penalty
        With an l2 part, without an l1 part.
    fit_intercept : bool
    sample_weight : ndarray or dask.array.Array of shape (n,), optional
    """

    #: Newton's method on the mean risk's fixed weights (``SmoothedRankRisk``'s first steps) is not
    #: made here: the proximal point iterations make it.
    newton_on_fixed_weights = False

    def __init__(self, X, y, risk, loss, penalty, fit_intercept, sample_weight=None):
        super().__init__(loss, penalty, make_design(X, fit_intercept))
        self._rows = self.design.X.chunks[0]
        self.n = y.shape[0]
        # affine_map: s = -y, c = 0 (classification) or s = 1, c = -y (regression)
        vector = self.design.worker_vector(y, np.negative)
        self.s, self.c = (vector, None) if loss.task == "classification" else (None, vector)
        self.risk = risk
        self.mass, self.m = None, None
        if sample_weight is not None:
            self.mass, self.m = self._masses(sample_weight)
        self.rank_step = rank_step_for(self.design, risk, self.mass, self.m, keys_on_workers=True)
        # the largest rank weight per unit of mass (of unit masses): the scale of the first smoothing
        self.top = float(getattr(self.rank_step, "cap", risk.weights_slice(self.n, self.n - 1, self.n)[0]))
        #: The Hessian's kept weights per row (persisted, chunked like ``X``), their Gram matrix and
        #: the updates since it was summed afresh (:meth:`derivatives`).
        self._kept_h, self._kept_gram, self._updates = None, None, 0

    def _masses(self, sample_weight):
        """The sample weights and the masses of the metric (``SmoothedRankRisk``'s), on the workers."""
        import dask

        weight = self.design.worker_vector(sample_weight, np.asarray)
        largest, total = (float(v) for v in dask.compute(weight.max(), weight.sum()))
        # relative_weights: an exact power of two brings the largest into [1/2, 1)
        scale = np.ldexp(1.0, -int(np.frexp(largest)[1]))
        m = persist(np.maximum(weight * (scale * self.n / (scale * total)), self.n * SMALLEST_SHARE))
        return weight, m

    def arguments(self, theta, shift=True):
        """``s [X, 1] theta + c`` (without ``shift``: ``s [X, 1] theta``), persisted, chunked like ``X``."""
        return self.design.worker_matvec(theta, self.s, self.c if shift else None)

    def objective(self, theta):
        losses = persist(self.arguments(theta).map_blocks(self.loss.value, dtype=np.float64))
        return self.rank_step.risk_value(losses) + self.penalty.value(theta)

    def first_center(self, theta, warm):
        """The first centre and the largest rank weight per unit of mass.

        Cold: the mean weight per unit of mass (a number).  Warm: the
        projection of the losses at ``theta`` at a tiny smoothing (within
        ``1e-9`` of their rank weights, tied losses sharing theirs), made on
        the workers.
        """
        if not warm:
            return 1.0 / self.n, self.top
        import dask

        losses = persist(self.arguments(theta).map_blocks(self.loss.value, dtype=np.float64))
        low, high = (float(v) for v in dask.compute(losses.min(), losses.max()))
        mu = 1e-9 * max(high - low, abs(high), 1e-300) / max(self.top, 1e-300)
        return self.rank_step.project(losses, mu)[0], self.top

    def _weights(self, center):
        """The centre's weights: a Dask array, or the number per unit of mass times the masses."""
        if hasattr(center, "chunks") or self.m is None:
            return center
        return self.m * float(center)

    def smoothed(self, theta, mu, center, t=None):
        """``F_mu(theta; center)`` and its state (``SmoothedRankRisk.smoothed``), where the chunks live.

        ``center``: a persisted Dask array, or one number (the mean weight per unit of mass).
        """
        import dask
        import dask.array as da

        t = self.arguments(theta) if t is None else t
        per_mass = center if self.m is None or not hasattr(center, "chunks") else center / self.m
        args = [t, "i"] + ([per_mass, "i"] if hasattr(per_mass, "chunks") else [float(per_mass), None])
        # t (a line search's t0 + alpha dt) persisted with its losses, in one round trip
        t, columns = persist(t, da.blockwise(_losses_block, "ij", *args, code=self.loss.code,
                                             param=self.loss.param, mu=mu, new_axes={"j": 3},
                                             dtype=np.float64, concatenate=True))
        # the kept vectors under new keys: no lineage that grows with the steps (:func:`rerooted`)
        t, columns = rerooted(t, columns)
        value, d1, keys = columns[:, 0], columns[:, 1], columns[:, 2]
        q, pooled = self.rank_step.project(keys, mu)
        q = rerooted(q)
        diff = q - self._weights(center)
        squared = diff * diff if self.m is None else diff * diff / self.m
        qv, dd = dask.compute((q * value).sum(), squared.sum())
        omega = float(qv) - 0.5 * mu * float(dd)
        state = dict(t=t, columns=columns, value=value, d1=d1, q=q, q_host=q, pooled=pooled)
        return omega + self.penalty.value(theta), state

    def _members(self, state):
        """The mass of each row in a pooled block (0 elsewhere), a Dask array; None without pooled blocks."""
        pooled = state["pooled"]
        if not hasattr(pooled, "block_outer"):  # the threshold step: the free set, unit masses
            if int(pooled.size.sum()) < 2:
                return None
            q = state["q"]
            return ((q > 0.0) & (q < self.rank_step.cap)).astype(np.float64)
        if pooled.n_pooled == 0:
            return None
        inside = pooled.block_id >= 0
        return inside.astype(np.float64) if self.m is None else self.m * inside

    def derivatives(self, theta, state, mu, block):
        """Gradient, Hessian and block term of ``F_mu``, summed over the chunks in one pass.

        The block term is ``(1/mu) [sum_B sum_{i in B} m_i g_i g_i^T - sum_B S_B S_B^T / m(B)]``,
        ``S_B = sum_B m_i g_i`` (``SmoothedRankRisk.block_scatter``): the
        members' Gram matrix comes in the step's pass, the blocks' sums'
        term from the rank step's record (``PooledBlocks.block_outer``; of
        the one free set of the threshold step, in the same pass).
        ``block`` is ignored.  The Hessian is that of
        ``SmoothedRankRisk.hessian``, within ``HESSIAN_SLACK``: each chunk
        adds the change of the rows whose weight moved by more than that,
        and it is summed afresh every ``Design.max_updates`` steps.
        """
        import dask
        import dask.array as da

        self.design.passes += 1
        reset = self._kept_h is None or self._updates >= Design.max_updates
        kept = [None] * len(self._rows) if reset else list(self._kept_h.to_delayed().ravel())
        task = dask.delayed(functools.partial(_step_block, loss=self.loss, slack=HESSIAN_SLACK,
                                              fit_intercept=self.design.fit_intercept), pure=True, nout=2)
        member = self._members(state)
        pooled_rows = member is not None
        if not pooled_rows:
            member = da.zeros(self.n, chunks=(self._rows,))
        blocks = self.design.worker_blocks(state["t"], state["d1"], state["q"], self.s, member)
        outputs = dask.persist(*[task(*chunk, h) for chunk, h in zip(blocks, kept)])
        pooled = state["pooled"]
        outer = None
        if pooled_rows and hasattr(pooled, "outer_task"):
            coef = state["d1"] if self.s is None else state["d1"] * self.s
            rows = da.blockwise(functools.partial(_rows_times, fit_intercept=self.design.fit_intercept), "ij",
                                self.design.X, "ij", member * coef, "i", dtype=np.float64, concatenate=True,
                                adjust_chunks={"j": self.design.p})
            outer = pooled.outer_task(rows)  # in the same round trip as the step's sums
        (g, dH, G_block, S_block), outer = summed([out[0] for out in outputs], outer)
        kept_h = da.concatenate([da.from_delayed(out[1], shape=(rows,), dtype=np.float64)
                                 for out, rows in zip(outputs, self._rows)])
        self._kept_h = rerooted(persist(kept_h))
        self._kept_gram = dH if reset else self._kept_gram + dH
        self._updates = 0 if reset else self._updates + 1
        H = self._kept_gram.copy()
        g += self.penalty.reg * theta
        H[np.diag_indices_from(H)] += self.penalty.reg
        if not pooled_rows:
            return g, H, None
        if outer is None:  # the threshold step's one free set
            outer = np.outer(S_block, S_block) / float(pooled.size.sum())
        return g, H, (G_block - outer) / mu

    def certificate(self, theta, state, decrease):
        """``SmoothedRankRisk.certificate`` by reductions over the chunks (the risk by its threshold form)."""
        value, q = state["value"], state["q"]
        omega = self.rank_step.risk_value(value)
        F = omega + self.penalty.value(theta)
        estimate = max(omega - float((q * value).sum()), 0.0) + decrease / (1.0 - HESSIAN_SLACK)
        self.record_dual(self.dual_bound(q, state["d1"]), q)
        return F, max(F - self.best_dual, 0.0), estimate

    def dual_bound(self, q, slope):
        """``SmoothedRankRisk.dual_bound`` (l2 only) in two reductions: the intercept's excess, one pass."""
        import dask
        import dask.array as da

        side, shrink = 0.0, 1.0
        if self.design.fit_intercept:
            u = q * slope if self.s is None else self.s * q * slope
            excess, positive, negative = dask.compute(u.sum(), da.maximum(u, 0.0).sum(),
                                                      da.minimum(u, 0.0).sum())
            side, total = (1.0, float(positive)) if excess > 0.0 else (-1.0, float(negative))
            if total != 0.0:
                shrink = max(1.0 - float(excess) / total, 0.0)
        self.design.passes += 1
        z, value = self.design.worker_sum(_dual_block, q, slope, self.s, self.c, loss=self.loss, side=side,
                                shrink=shrink)
        return value - self.penalty.conjugate(z)[1]  # an l2 part: no scale

    def exported_weights(self, q):
        """None: a Dask array of the weights would keep the fit's tasks in the scheduler after the fit."""
        return None

    def dual_ascent(self, theta, max_steps):
        """Not on the chunked path: marks the fit to be finished on the gathered path; returns False."""
        self.gather_to_finish = True
        return False

    def certify_zero(self, q, tol):
        """``SmoothedRankRisk.certify_zero`` with the vectors on the workers.

        The same accelerated alternating projections in the masses' metric:
        the rank step's projection, the products with ``[X, 1]`` by
        reductions over the chunks.
        """
        import dask
        import dask.array as da

        zero = np.zeros(self.design.p)
        t = self.arguments(zero)
        low, high = (float(v) for v in dask.compute(t.min(), t.max()))
        if self.penalty.l2 == 0.0 or low != high:
            return None
        F0 = self.objective(zero)
        slope = float(self.loss.derivatives(np.array([low]))[1][0])
        ones = da.ones(self.n, chunks=(self._rows,))
        sa = persist(slope * (ones if self.s is None else self.s))
        weight = sa * sa if self.m is None else self.m * sa * sa
        factor = ridged_cholesky(lambda: self.design.worker_gram(weight))
        if factor is None:
            return F0

        def transposed(v):
            return self.design.worker_rmatvec(sa * v)

        def step(z, u):
            w, b = self.design.split(scipy.linalg.cho_solve(factor, u, check_finite=False))
            self.design.passes += 1
            keys = persist(da.blockwise(functools.partial(_away_block, w=w, b=b), "i", self.design.X, "ij",
                                        z if self.m is None else z / self.m, "i", sa, "i", dtype=np.float64,
                                        concatenate=True))
            q_new = self.rank_step.project(keys, 1.0)[0]
            return q_new, transposed(q_new)

        zero_search(self, F0, q, transposed(q), tol, step,
                    lambda q_new: self.dual_bound(q_new, slope * ones))
        return F0
