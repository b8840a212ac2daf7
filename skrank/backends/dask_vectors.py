"""The design of a Dask ``X`` whose fit keeps its vectors of length ``n`` on the workers.

:class:`WorkerDesign` does a fit's ``n``-vector work (loss arguments,
losses, slopes, keys, masses, rank weights, the centre) on Dask arrays
chunked like ``X``'s rows and persisted where the chunks are computed (the
workers of a ``dask.distributed`` cluster); the driving process receives
``O(d^2)`` numbers per step.  A Newton step is one fused graph
(:meth:`WorkerDesign.step_products`); the kept vectors are re-rooted
(:func:`~skrank.backends.dask_design.rerooted`), those of a step together,
so that the scheduler's record does not grow with the steps.  The
reductions come back in the submissions that keep the vectors they read
(:func:`~skrank.backends.dask_design.persist_and_fetch`).
"""

import functools

import numpy as np

from ..kernels.pava import losses_and_keys
from .dask_design import (
    DaskDesign,
    bordered_gram,
    is_dask_array,
    persist,
    persist_and_fetch,
    rerooted,
    rerooted_and_fetched,
    summed,
    summed_task,
    weighted_gram,
)


def _losses_block(t, center, code, param, mu):
    """One chunk's ``(l, l', keys)`` as three columns (:func:`skrank.losses.losses_and_keys`)."""
    n = t.shape[0]
    out = np.empty((3, n))
    center = np.broadcast_to(np.asarray(center, dtype=np.float64), (n,))
    losses_and_keys(t, code, param, mu, np.ascontiguousarray(center), out[0], out[1], out[2])
    return out.T


def _derivative(t, loss, k):
    """The ``k``-th of ``(l, l', l'')`` at one chunk's ``t``."""
    return loss.derivatives(t)[k]


def _gram_change(X, delta, fit_intercept):
    """``[X, 1]^T diag(delta) [X, 1]`` for weights ``delta`` of any sign."""
    weighted = X * delta[:, None]
    G = X.T @ weighted
    return bordered_gram(G, weighted.sum(axis=0), delta.sum()) if fit_intercept else G


def _step_block(X, r, h, h_block, v, kept, slack, fit_intercept, with_rows=False):
    """One chunk's shares of :meth:`WorkerDesign.step_products`, and its kept Hessian weights.

    Returns ``(shares, h_kept, rows)``: ``shares = (g, dH, signed)`` or, with a
    block term, ``(g, dH, signed, G_B, S_B)``: ``g = [X, 1]^T r``; the
    weights ``h`` replace the ``kept`` ones only on the rows where they
    moved by more than ``slack`` (relative; all rows when ``kept`` is None),
    whose change of ``[X, 1]^T diag(h_kept) [X, 1]`` is ``dH``; ``signed``
    holds ``X^T r_+``, ``X^T r_-`` and ``sum r_+``, ``sum r_-`` (the
    positive and negative parts of ``r``, for :meth:`WorkerDesign.dual_value`);
    ``G_B = [X, 1]^T diag(h_block) [X, 1]`` and ``S_B = [X, 1]^T v``.
    With ``with_rows``, ``S_B`` is left out and ``rows`` are the rows
    ``v[:, None] [X, 1]``, which a reduction sums per pooled block; else
    ``rows`` is None.
    """
    X = np.asarray(X, dtype=np.float64)
    parts = np.stack([np.maximum(r, 0.0), np.minimum(r, 0.0)], axis=1)
    products = X.T @ parts
    signed = np.vstack([products, parts.sum(axis=0)])
    g = products[:, 0] + products[:, 1]  # X^T r from the same product
    if kept is None:
        dH, h_kept = weighted_gram(X, h, fit_intercept), h
    else:
        changed = np.flatnonzero(np.abs(h - kept) > slack * kept)
        dH = _gram_change(X[changed], h[changed] - kept[changed], fit_intercept)
        h_kept = kept.copy()
        h_kept[changed] = h[changed]
    if fit_intercept:
        g = np.append(g, r.sum())
    if h_block is None:
        return (g, dH, signed), h_kept, None
    if with_rows:
        rows = _rows_times(X, v, fit_intercept)
        return (g, dH, signed, weighted_gram(X, h_block, fit_intercept)), h_kept, rows
    S_block = X.T @ v
    if fit_intercept:
        S_block = np.append(S_block, v.sum())
    return (g, dH, signed, weighted_gram(X, h_block, fit_intercept), S_block), h_kept, None


def _rows_times(X, v, fit_intercept):
    """``v[:, None] [X, 1]`` of one chunk: the rows whose block sums make the pooled blocks' term."""
    rows = np.asarray(X, dtype=np.float64) * v[:, None]
    return np.hstack([rows, v[:, None]]) if fit_intercept else rows


def _dual_block(X, q, a, s, c, loss, side, shrink):
    """A chunk's ``X^T (s q a')`` and ``sum q (a' c - l*(a'))``, ``a' = a`` but ``shrink a`` on ``side``."""
    a, (value,) = _dual_share(q, a, s, c, loss, side, shrink, slopes=True)
    return np.asarray(X, dtype=np.float64).T @ (s * q * a), value


def _dual_share(q, a, s, c, loss, side, shrink, slopes=False):
    """A chunk's ``sum q (a' c - l*(a'))`` alone (:func:`_dual_block` without ``X``), as a tuple; with
    ``slopes``, ``(a', that tuple)``."""
    a = np.where(np.sign(s * q * a) == side, a * shrink, a)
    value = float(q @ (a * c - loss.conjugate(a)) if c is not None else -(q @ loss.conjugate(a)))
    return (a, (value,)) if slopes else (value,)


class WorkerDesign(DaskDesign):
    """:class:`DaskDesign` whose fit keeps its ``n``-vectors on the workers (see the module docstring).

    Its kept and native vectors are the same Dask arrays; the Hessian's
    weights per row are kept on the workers between steps, re-rooted with
    the next vectors that the fit re-roots (:meth:`rerooted`).

    Parameters
    ----------
    X : dask.array.Array of shape (n, d)
    fit_intercept : bool
    """

    keeps_vectors_apart = True
    vectors_on_host = False

    def __init__(self, X, fit_intercept):
        super().__init__(X, fit_intercept)
        self._rows = self.X.chunks[0]
        self._kept_h = None
        #: Whether ``_kept_h`` still has the lineage of the step that made it.
        self._kept_h_pending = False

    def keeping_vectors_for(self, risk, penalty):
        return self

    def to_host(self, v):
        return v

    to_native = to_host
    vector = DaskDesign.worker_vector
    native_matvec = DaskDesign.worker_matvec
    native_rmatvec = kept_rmatvec = DaskDesign.worker_rmatvec
    native_gram = kept_gram = DaskDesign.worker_gram

    def constant(self, value):
        import dask.array as da

        return da.full(self.n, float(value), chunks=(self._rows,))

    def keep(self, v):
        return persist(v)

    def affine(self, theta, scale, shift=None):
        """``scale ([X, 1] theta) + shift``, lazily: kept by what reads it (:meth:`losses_and_keys`,
        :meth:`kept_and_sums`)."""
        return self.worker_matvec(theta, scale, shift, kept=False)

    def rerooted(self, *vectors):
        """The kept ``vectors`` without their lineage (:meth:`rerooted_and_sums`)."""
        vectors, _ = self.rerooted_and_sums(vectors, [])
        return vectors if len(vectors) > 1 else vectors[0]

    def rerooted_and_sums(self, vectors, pairs):
        """The kept ``vectors`` without their lineage and ``a . b`` for each pair, in one submission.

        The kept Hessian weights of the last step are re-rooted with them.
        """
        pending = [self._kept_h] if self._kept_h_pending else []
        vectors, sums = rerooted_and_fetched(pending + list(vectors), [(a * b).sum() for a, b in pairs])
        if pending:
            self._kept_h, *vectors = vectors
            self._kept_h_pending = False
        return tuple(vectors), tuple(float(v) for v in sums)

    def kept_matvec(self, theta):
        return self.worker_matvec(theta, kept=False)

    def extremes(self, v):
        import dask

        return tuple(float(x) for x in dask.compute(v.min(), v.max()))

    def kept_losses(self, loss, t):
        return persist(t.map_blocks(loss.value, dtype=np.float64))

    loss_values = kept_losses

    def loss_derivatives(self, loss, t):
        """``(l, l', l'')`` at ``t``, lazily (computed with what uses them)."""
        return tuple(t.map_blocks(_derivative, loss=loss, k=k, dtype=np.float64) for k in range(3))

    def loss_second_derivative(self, loss, t):
        """``l''`` at ``t``, lazily."""
        return t.map_blocks(loss.second_derivative, dtype=np.float64)

    def losses_and_keys(self, loss, t, mu, center, known=None):
        """``(t, l, l', keys)`` persisted in one round trip (``center``: Dask, or a number).

        They keep their lineage: the fit re-roots those it holds on to
        (:meth:`rerooted`) with the rank step's weights.  ``known`` (the
        losses already computed at ``t``) is not used: the chunks compute
        them with the keys.
        """
        import dask.array as da

        args = [t, "i"] + ([center, "i"] if is_dask_array(center) else [float(center), None])
        columns = da.blockwise(_losses_block, "ij", *args, code=loss.code, param=loss.param, mu=mu,
                               new_axes={"j": 3}, dtype=np.float64, concatenate=True)
        return persist(t, columns[:, 0], columns[:, 1], columns[:, 2])

    def sums_of_products(self, *pairs):
        """``a . b`` for each pair of Dask ``n``-vectors, in one round trip."""
        import dask

        return tuple(float(v) for v in dask.compute(*[(a * b).sum() for a, b in pairs]))

    def kept_and_sums(self, v, *pairs):
        """``v`` persisted and ``a . b`` for each pair (which may read ``v``), in one round trip."""
        (v,), sums = persist_and_fetch([v], [(a * b).sum() for a, b in pairs])
        return v, tuple(float(x) for x in sums)

    def dual_value(self, q, a, s, c, loss, conjugate, on_host=False, signed=None):
        """:meth:`Design.dual_value` (of an l2 part: no scale): two round trips, one pass over ``X``.

        ``signed``: the products of the parts of ``u = s q a`` of each sign
        that :meth:`step_products` made with the same ``u`` (its ``r``):
        then ``X`` is not read again, and one round trip sums the rest.
        """
        import dask
        import dask.array as da

        if signed is not None:
            return self._dual_value_from(signed, q, a, s, c, loss, conjugate)
        side, shrink = 0.0, 1.0
        if self.fit_intercept:
            u = s * q * a
            excess, positive, negative = (float(v) for v in dask.compute(
                u.sum(), da.maximum(u, 0.0).sum(), da.minimum(u, 0.0).sum()))
            side, total = (1.0, positive) if excess > 0.0 else (-1.0, negative)
            if total != 0.0:
                shrink = max(1.0 - excess / total, 0.0)
        self.passes += 1
        z, value = self.worker_sum(_dual_block, q, a, s, c, loss=loss, side=side, shrink=shrink)
        return value - conjugate(z)[1]

    def _dual_value_from(self, signed, q, a, s, c, loss, conjugate):
        """:meth:`dual_value` from ``signed = [[X^T u_+, X^T u_-], [sum u_+, sum u_-]]``."""
        side, shrink = 0.0, 1.0
        products, (positive, negative) = signed[:-1], signed[-1]
        z = products[:, 0] + products[:, 1]
        if self.fit_intercept:
            excess = positive + negative
            side, total = (1.0, positive) if excess > 0.0 else (-1.0, negative)
            if total != 0.0:
                shrink = max(1.0 - excess / total, 0.0)
                z = products[:, 1] + shrink * products[:, 0] if side > 0.0 else (
                    products[:, 0] + shrink * products[:, 1])
        share = functools.partial(_dual_share, loss=loss, side=side, shrink=shrink)
        task = self._dask.delayed(share, pure=True)
        chunks = zip(*(([None] * len(self._rows)) if v is None else list(v.to_delayed().ravel())
                       for v in (q, a, s, c)))
        (value,) = summed([task(*chunk) for chunk in chunks])
        return value - conjugate(z)[1]

    def step_products(self, r, h, slack, block=None):
        """:meth:`Design.step_products` of Dask ``n``-vectors (lazy ones too) as one graph, one round trip.

        Each chunk adds the change of the kept Hessian weights that moved by
        more than ``slack`` (summed afresh every :attr:`Design.max_updates`
        steps).  ``block``: None or ``(h_block, (v, reduce))``: ``G_block =
        [X, 1]^T diag(h_block) [X, 1]`` and ``P = reduce(rows)`` (a delayed
        reduction) of the rows ``v[:, None] [X, 1]``, or ``[X, 1]^T v``.
        """
        import dask
        import dask.array as da

        if self._kept_h_pending:  # no vector re-rooted since the last step: its weights alone
            self._kept_h, self._kept_h_pending = rerooted(self._kept_h), False
        self.passes += 1
        reset = self._kept_h is None or self._updates >= self.max_updates
        kept = [None] * len(self._rows) if reset else list(self._kept_h.to_delayed().ravel())
        h_block, (v, reduce) = (None, (None, None)) if block is None else block
        # with a reduction of the rows v[:, None] [X, 1], each chunk's task makes its rows too: X read once
        task = dask.delayed(functools.partial(_step_block, slack=slack, fit_intercept=self.fit_intercept,
                                              with_rows=reduce is not None), pure=True, nout=3)
        chunks = self.worker_blocks(r, h, h_block, v)
        outputs = [task(*chunk, k) for chunk, k in zip(chunks, kept)]
        outer = None if reduce is None else reduce([out[2] for out in outputs])
        kept_h = da.concatenate([da.from_delayed(out[1], shape=(rows,), dtype=np.float64)
                                 for out, rows in zip(outputs, self._rows)])
        # the weights kept and the sums brought back in one submission; the weights are re-rooted with the
        # next vectors the fit re-roots
        fetched = [summed_task([out[0] for out in outputs])] + ([] if outer is None else [outer])
        (self._kept_h,), values = persist_and_fetch([kept_h], fetched)
        self._kept_h_pending = True
        sums, outer = values[0], (values[1] if outer is not None else None)
        self._gram = sums[1] if reset else self._gram + sums[1]
        self._updates = 0 if reset else self._updates + 1
        self.last_signed = sums[2]
        if block is None:
            return sums[0], self._gram.copy(), None, None
        return sums[0], self._gram.copy(), sums[3], sums[4] if reduce is None else outer
