"""The certified Newton solver on a Dask ``X`` whose vectors of length ``n`` stay on the workers.

:class:`ChunkedProblem` is :class:`skrank.datafits.smoothed_rank_risk.SmoothedRankRisk`'s twin for a
Dask array ``X`` chunked by rows, for a risk with ``threshold_rank_step`` (the superquantile) without
sample weights, a loss with ``twice_differentiable`` (logistic or squared) and an l2 penalty.  Every
vector of length ``n`` (loss arguments, losses, slopes, keys, rank weights ``q``, the centre) is a
Dask array chunked like ``X``'s rows and persisted where the chunks are computed (the workers of a
``dask.distributed`` cluster); the process that drives the fit receives only reductions: ``O(d^2)``
numbers per chunk, and the rank step's counting reductions
(:func:`skrank.datafits.threshold_projection.capped_threshold_dask`: ``O(chunks x candidates)`` per
round and at most ``bracket`` keys in its last one).  The rank step
(:class:`~skrank.datafits.rank_step.ThresholdRankStep`) is the threshold form of the capped simplex:
no sort, no PAVA, no order.  Its free set ``{0 < q < cap}`` is the one pooled block whose block term
enters the Newton model.

The check that ``theta = 0`` is optimal (where no iterate beats the start)
runs here too (:meth:`ChunkedProblem.certify_zero`).  The dual ascent of a
fit whose Newton steps stall in rounding needs the losses in one place:
where it is needed, the chunked fit stops and the fit finishes on the
gathered path (:class:`~skrank.datafits.smoothed_rank_risk.SmoothedRankRisk`),
warm-started from the chunked fit's best point, so that it certifies as
that path does.  Warm starts, sample weights, other risks and an l1 part
take the gathered path from the start; ``SKRANK_NEWTON_GATHER=1`` forces it.
"""

import functools
import os

import numpy as np
import scipy.linalg

from ...backends.dask_design import bordered_gram, is_dask_array, persist, summed, weighted_gram
from ...backends.design import Design
from ...backends.dispatch import make_design
from ...datafits.rank_step import rank_step_for
from ...datafits.smoothed_rank_risk import HESSIAN_SLACK, DualRecord, ridged_cholesky, zero_search
from ...datafits.smoothed_risk import losses_and_keys

#: The gathered path's vectors of length ``n`` (about 27 float64 ones in the driving process), in
#: bytes per row, and the size below which it is chosen on a cluster: there it is faster (1.5 to 3.6
#: times at 10^6 to 10^4 rows on a 2-worker ``LocalCluster``, ``benchmarks/scale.py``) and its memory small.
_GATHERED_BYTES_PER_ROW = 27 * 8
_GATHER_BUDGET = 64 * 2**20


def _on_distributed_workers():
    """Whether Dask computes on a ``dask.distributed`` client's workers (else with a local scheduler)."""
    import dask

    try:
        from distributed import default_client
        client = default_client()
    except (ImportError, ValueError):  # no distributed, no client
        return False
    return dask.base.get_scheduler() == client.get


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
        A risk with ``threshold_rank_step``, a ``twice_differentiable`` loss, an l2 penalty alone.
    sample_weight : array-like of shape (n,) or None
        None is needed.
    coef_init, intercept_init : ndarray, float or None
        None is needed (a cold start).

    Returns
    -------
    bool
        True where the chunked path fits the problem and is chosen.
    """
    forced = os.environ.get("SKRANK_NEWTON_GATHER", "")
    if forced not in ("", "0"):
        return False
    fits = (is_dask_array(X) and risk.threshold_rank_step and sample_weight is None
            and loss.twice_differentiable and float(penalty.l1) == 0.0 and float(penalty.l2) > 0.0
            and coef_init is None and intercept_init is None)
    if not fits or forced == "0":
        return fits
    return X.shape[0] * _GATHERED_BYTES_PER_ROW > _GATHER_BUDGET and _on_distributed_workers()


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


def _step_block(X, t, d1, q, s, kept, loss, cap, slack, fit_intercept):
    """One chunk's shares of the gradient's data part, the Hessian's change and the free block's sums.

    Returns ``((g, dH, G_F, S_F), h_kept)``: ``g = [X, 1]^T (s q l')``; the
    Hessian's weights ``h = q l''`` replace the ``kept`` ones only on the
    rows where they moved by more than ``slack`` (relative; all rows when
    ``kept`` is None), whose change of ``[X, 1]^T diag(h_kept) [X, 1]`` is
    ``dH``; ``G_F = sum_F g_i g_i^T`` and ``S_F = sum_F g_i`` with
    ``g_i = l'_i s_i [x_i, 1]`` and ``F`` the chunk's members of the free set.
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
    free = (q > 0.0) & (q < cap)
    G_free = weighted_gram(X, np.where(free, coef * coef, 0.0), fit_intercept)
    coef_free = np.where(free, coef, 0.0)
    S_free = X.T @ coef_free
    if fit_intercept:
        g, S_free = np.append(g, r.sum()), np.append(S_free, coef_free.sum())
    return (g, dH, G_free, S_free), h_kept


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
    :meth:`smoothed` hold persisted arrays, and their pooled record the
    size of the free set (no order).  The products with ``X`` of vectors on
    the workers are the design's (``DaskDesign.worker_matvec``,
    ``worker_rmatvec``, ``worker_gram``, ``worker_sum``).

    Parameters
    ----------
    X : dask.array.Array of shape (n, d)
    y : ndarray or dask.array.Array of shape (n,)
    risk : skrank.risks.BaseRisk
        With ``threshold_rank_step`` (the superquantile).
    loss : skrank.losses.Loss
        With ``twice_differentiable`` (logistic or squared).
    penalty : skrank.penalties.Penalty
        l2 only.
    fit_intercept : bool
    """

    def __init__(self, X, y, risk, loss, penalty, fit_intercept):
        super().__init__(loss, penalty, make_design(X, fit_intercept))
        self._rows = self.design.X.chunks[0]
        self.n = y.shape[0]
        # affine_map: s = -y, c = 0 (classification) or s = 1, c = -y (regression)
        vector = self.design.worker_vector(y, np.negative)
        self.s, self.c = (vector, None) if loss.task == "classification" else (None, vector)
        self.risk, self.mass = risk, None
        self.rank_step = rank_step_for(self.design, risk, None, None, keys_on_workers=True)
        self.cap, self.total = self.rank_step.cap, self.rank_step.total
        #: The Hessian's kept weights per row (persisted, chunked like ``X``), their Gram matrix and
        #: the updates since it was summed afresh (:meth:`derivatives`).
        self._kept_h, self._kept_gram, self._updates = None, None, 0

    def arguments(self, theta, shift=True):
        """``s [X, 1] theta + c`` (without ``shift``: ``s [X, 1] theta``), persisted, chunked like ``X``."""
        return self.design.worker_matvec(theta, self.s, self.c if shift else None)

    def objective(self, theta):
        losses = persist(self.arguments(theta).map_blocks(self.loss.value, dtype=np.float64))
        return self.rank_step.risk_value(losses) + self.penalty.value(theta)

    def first_center(self, theta, warm):
        """The mean weight ``total / n`` (a number) and the cap; warm starts take the gathered path."""
        if warm:
            raise NotImplementedError("the chunked Newton path starts cold only")
        return self.total / self.n, self.cap

    def smoothed(self, theta, mu, center, t=None):
        """``F_mu(theta; center)`` and its state (``SmoothedRankRisk.smoothed``), by the threshold form.

        ``center``: a persisted Dask array, or one number (the mean weight).
        """
        import dask
        import dask.array as da

        t = self.arguments(theta) if t is None else persist(t)
        args = [t, "i"] + ([center, "i"] if hasattr(center, "chunks") else [float(center), None])
        columns = persist(da.blockwise(_losses_block, "ij", *args, code=self.loss.code,
                                        param=self.loss.param, mu=mu, new_axes={"j": 3},
                                        dtype=np.float64, concatenate=True))
        value, d1, keys = columns[:, 0], columns[:, 1], columns[:, 2]
        q, pooled = self.rank_step.project(keys, mu)
        diff = q - center
        qv, dd = dask.compute((q * value).sum(), (diff * diff).sum())
        omega = float(qv) - 0.5 * mu * float(dd)
        state = dict(t=t, columns=columns, value=value, d1=d1, q=q, q_host=q, pooled=pooled)
        return omega + self.penalty.value(theta), state

    def derivatives(self, theta, state, mu, block):
        """Gradient, Hessian and block term of ``F_mu``, summed over the chunks in one pass.

        The block term of the free set ``F`` is
        ``(1/mu) [sum_F g_i g_i^T - S_F S_F^T / |F|]``, ``S_F = sum_F g_i``.
        ``block`` is ignored: the block term comes in the same pass (None
        when ``|F| < 2``).  The Hessian
        is that of ``SmoothedRankRisk.hessian``, within ``HESSIAN_SLACK``: each
        chunk adds the change of the rows whose weight moved by more than
        that, and it is summed afresh every ``Design.max_updates`` steps.
        """
        import dask
        import dask.array as da

        self.design.passes += 1
        reset = self._kept_h is None or self._updates >= Design.max_updates
        kept = [None] * len(self._rows) if reset else list(self._kept_h.to_delayed().ravel())
        task = dask.delayed(functools.partial(_step_block, loss=self.loss, cap=self.cap, slack=HESSIAN_SLACK,
                                              fit_intercept=self.design.fit_intercept), pure=True, nout=2)
        blocks = self.design.worker_blocks(state["t"], state["d1"], state["q"], self.s)
        outputs = dask.persist(*[task(*chunk, h) for chunk, h in zip(blocks, kept)])
        g, dH, G_free, S_free = summed([out[0] for out in outputs])
        self._kept_h = da.concatenate([da.from_delayed(out[1], shape=(rows,), dtype=np.float64)
                                       for out, rows in zip(outputs, self._rows)])
        self._kept_gram = dH if reset else self._kept_gram + dH
        self._updates = 0 if reset else self._updates + 1
        H = self._kept_gram.copy()
        g += self.penalty.reg * theta
        H[np.diag_indices_from(H)] += self.penalty.reg
        n_free = int(state["pooled"].size.sum())
        scatter = None if n_free < 2 else (G_free - np.outer(S_free, S_free) / n_free) / mu
        return g, H, scatter

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

        The same accelerated alternating projections, with unit masses:
        the projection onto the capped simplex by its threshold, the
        products with ``[X, 1]`` by reductions over the chunks.
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
        factor = ridged_cholesky(lambda: self.design.worker_gram(sa * sa))
        if factor is None:
            return F0

        def transposed(v):
            return self.design.worker_rmatvec(sa * v)

        def step(z, u):
            w, b = self.design.split(scipy.linalg.cho_solve(factor, u, check_finite=False))
            self.design.passes += 1
            keys = persist(da.blockwise(functools.partial(_away_block, w=w, b=b), "i", self.design.X, "ij",
                                         z, "i", sa, "i", dtype=np.float64, concatenate=True))
            q_new = self.rank_step.project(keys, 1.0)[0]
            return q_new, transposed(q_new)

        zero_search(self, F0, q, transposed(q), tol, step,
                     lambda q_new: self.dual_bound(q_new, slope * ones))
        return F0
