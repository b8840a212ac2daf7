"""Products with the design ``[X, 1]`` of a linear model, dense or sparse, without copying ``X``."""

import numpy as np
import scipy.sparse as sp
from scipy.special import expit

from ..kernels.gram import csr_weighted_gram
from ..kernels.pava import losses_and_keys
from ..losses import conjugate_in

#: Entries of ``X`` gathered per block when a weighted Gram matrix is formed.
CHUNK_ENTRIES = 1 << 20
#: ... of a NumPy ``X``: a block of 512 KiB stays in the cache between its product and the one after
#: (and its copy is reused from the allocator's free memory), four times faster than 8 MiB blocks at
#: 15000 x 12.
HOST_CHUNK_ENTRIES = 1 << 16


class Design:
    """The design ``[X, 1]`` (the column of ones only when ``fit_intercept``).

    Parameters
    ----------
    X : {ndarray, sparse matrix} of shape (n, d)
        float64 data, used as given.
    fit_intercept : bool
        Whether ``theta`` ends with an intercept.
    """

    def __init__(self, X, fit_intercept):
        self.X = X
        self.sparse = sp.issparse(X)
        self.n, self.d = X.shape
        self.fit_intercept = bool(fit_intercept)
        self.p = self.d + self.fit_intercept
        #: Products ``[X, 1] theta`` or ``[X, 1]^T r`` computed so far.
        self.passes = 0
        self._gram, self._h, self._updates = None, None, 0

    def split(self, theta):
        """``(w, b)`` from ``theta``."""
        return theta[: self.d], (float(theta[self.d]) if self.fit_intercept else 0.0)

    def matvec(self, theta):
        """``[X, 1] theta``, a new vector (the callers may write over it)."""
        self.passes += 1
        f = self._times(np.ascontiguousarray(theta[: self.d], dtype=np.float64))
        if self.fit_intercept:
            f += theta[self.d]
        return f

    def rmatvec(self, r):
        """``[X, 1]^T r``."""
        self.passes += 1
        r = np.asarray(r, dtype=np.float64)
        g = self._transposed_times(r)
        return np.append(g, r.sum()) if self.fit_intercept else g

    #: Whether the design's ``n``-vectors (:meth:`native_matvec`, :meth:`native_rmatvec`) are NumPy
    #: arrays on the host, for which the compiled kernels of the ``n``-vector arithmetic apply; else
    #: they are arrays of :attr:`xp` on ``X``'s device.
    vectors_on_host = True
    #: The namespace of the design's ``n``-vectors (NumPy here).
    xp = np

    #: Whether a fit's ``n``-vectors stay apart from this process, where ``X``'s chunks are computed: the
    #: design that a fit keeps them with (:meth:`keeping_vectors_for`) does; :meth:`vectors_on_workers`
    #: says whether they can.
    keeps_vectors_apart = False

    def keeping_vectors_for(self, risk, penalty):
        """The design of a fit of ``risk`` with ``penalty`` (here ``self``: the vectors in memory).

        A Dask design returns its form that keeps them on the workers where
        that fits the problem and pays (``DaskDesign.keeping_vectors_for``).
        """
        return self

    def vectors_on_workers(self):
        """Whether ``n``-vectors can stay where ``X``'s chunks are computed, apart from this process.

        True for a Dask ``X`` computed by a ``dask.distributed`` client's
        workers (:meth:`skrank.backends.dask_design.DaskDesign.vectors_on_workers`);
        the fits whose arithmetic has a form on the workers then keep their
        vectors of length ``n`` there.  False here: the vectors are in memory.
        """
        return False

    def native_matvec(self, theta):
        """``[X, 1] theta`` as an ``n``-vector of :attr:`xp`, where ``X`` lives (here :meth:`matvec`)."""
        return self.matvec(theta)

    def native_rmatvec(self, r):
        """``[X, 1]^T r`` on the host for an ``n``-vector ``r`` of :attr:`xp` (here :meth:`rmatvec`)."""
        return self.rmatvec(r)

    def to_host(self, v):
        """The ``n``-vector ``v`` of :attr:`xp` as a writable NumPy array (here ``v`` itself)."""
        return v

    to_native = keep = to_host

    def rerooted(self, *vectors):
        """The kept ``vectors`` held without the record of how they were made (here as they are).

        One vector, or a tuple of several.
        """
        return vectors if len(vectors) > 1 else vectors[0]

    def rerooted_and_sums(self, vectors, pairs):
        """``(vectors, sums)``: :meth:`rerooted` of the kept ``vectors`` (a tuple) and
        :meth:`sums_of_products` of ``pairs``, together (one round trip where the vectors are apart)."""
        return tuple(vectors), self.sums_of_products(*pairs)

    def sigmoid(self, z):
        """The logistic sigmoid of the ``n``-vector ``z`` of :attr:`xp`, in :attr:`xp`."""
        return expit(z)

    def take(self, v, idx):
        """The entries ``idx`` (NumPy integers) of the ``n``-vector ``v`` of :attr:`xp`, on the host."""
        return v[idx]

    def native_gram(self, h, slack=0.0):
        """:meth:`gram` of the weights ``h``, an ``n``-vector of :attr:`xp` (here :meth:`gram`)."""
        return self.gram(h, slack)

    # -- the n-vector work of a fit.  Its "kept" vectors are where the rank step reads them: NumPy ones
    # here (kept_matvec, kept_rmatvec, kept_gram: matvec, rmatvec, weighted_gram); keep (computed and
    # held) and rerooted (held without the record of how it was made) return them as they are

    def vector(self, v, function=np.asarray):
        """``function(v)`` as a kept ``n``-vector (``v``: array-like)."""
        return function(np.asarray(v, dtype=np.float64))

    def constant(self, value):
        """A kept ``n``-vector of ``value`` (here a read-only view of one number)."""
        return np.broadcast_to(float(value), self.n)

    def extremes(self, v):
        """``(min v, max v)`` of a kept ``n``-vector."""
        return float(np.min(v)), float(np.max(v))

    def kept_losses(self, loss, t):
        """``l(t)`` for kept loss arguments ``t``."""
        return loss.value(t)

    def affine(self, theta, scale, shift=None):
        """``scale ([X, 1] theta) + shift`` (None: no shift) as an ``n``-vector of :attr:`xp`."""
        t = self.matvec(theta)
        t *= scale
        if shift is not None:
            t += shift
        return t

    def loss_values(self, loss, t):
        """``l(t)`` for loss arguments ``t`` of :attr:`xp`."""
        return loss.value(t)

    def loss_derivatives(self, loss, t):
        """``(l(t), l'(t), l''(t))`` for loss arguments ``t`` of :attr:`xp`."""
        return loss.derivatives(t)

    def loss_curvature(self, loss, t, first=None):
        """``l''(t)`` alone for loss arguments ``t`` of :attr:`xp` (from ``first = l'(t)`` where it can)."""
        if first is not None and loss.curvature_from_slope:
            return loss.curvature_of_slope(first)
        return self.loss_second_derivative(loss, t)

    def loss_second_derivative(self, loss, t):
        """``l''(t)`` computed from ``t`` of :attr:`xp`, without ``l`` and ``l'`` where the design can."""
        return loss.second_derivative(t)

    def losses_and_keys(self, loss, t, mu, center, known=None):
        """``(t, l(t), l'(t), keys)`` with ``keys = mu center + l(t)`` kept (``center``: an ``n``-vector).

        ``t`` is returned as the fit holds it from then on.  ``known``:
        ``(l(t), l'(t))`` already computed at ``t`` (then only the keys are).
        """
        if known is not None:
            value, d1 = known
            return t, value, d1, mu * center + value
        n = t.size
        value, d1, keys = np.empty(n), np.empty(n), np.empty(n)
        losses_and_keys(t, loss.code, loss.param, mu, center, value, d1, keys)
        return t, value, d1, keys

    def sums_of_products(self, *pairs):
        """``a . b`` for each pair of ``n``-vectors of :attr:`xp`, as floats."""
        return tuple(float(a @ b) for a, b in pairs)

    def kept_and_sums(self, v, *pairs):
        """``(v, sums)``: the ``n``-vector ``v`` of :attr:`xp` and :meth:`sums_of_products` of ``pairs``
        (which may read ``v``); where ``v`` is lazy, it is computed and kept in the same round trip."""
        return v, self.sums_of_products(*pairs)

    #: What :meth:`step_products` made for :meth:`dual_value` with its ``r`` (its ``signed``), where the
    #: design makes it in that pass; else None.
    last_signed = None

    def dual_value(self, q, a, s, c, loss, conjugate, on_host=False, signed=None):
        """``sum_i q_i (a_i c_i - l*(a_i)) - R*(-z)`` with ``z = X^T (s q a)``, ``a`` first made feasible.

        ``a`` is shrunk toward 0 on the side of the excess of
        ``sum_i s_i q_i a_i`` (the intercept's slope, which must vanish) and
        then by the scale that ``conjugate(z)`` returns with ``R*(-z)``
        (that of an l1 part alone).  ``c`` None: no shift.  The vectors are
        of :attr:`xp`, or NumPy ones with ``on_host``.  ``signed``: the
        :attr:`last_signed` of a :meth:`step_products` whose ``r`` was ``s q
        a``, which spares the product with ``X`` where the design makes it
        (ignored here).
        """
        native = not (on_host or self.vectors_on_host)
        xp = self.xp if native else np
        u = s * q * a
        if self.fit_intercept:
            excess = float(xp.sum(u))
            side = u > 0.0 if excess > 0.0 else u < 0.0
            total = float(xp.sum(u[side]))
            if total != 0.0:
                shrink = max(1.0 - excess / total, 0.0)
                a = xp.where(side, a * shrink, a)
                u = xp.where(side, u * shrink, u)
        scale, conjugate_penalty = conjugate((self.native_rmatvec if native else self.rmatvec)(u)[: self.d])
        a = a * scale
        conj = conjugate_in(xp, loss, a) if native else loss.conjugate(a)
        return float(q @ (-conj if c is None else a * c - conj)) - conjugate_penalty

    def _times(self, w):
        """``X w``, a new writable NumPy vector (where ``X`` lives, for the designs of other arrays)."""
        return np.asarray(self.X @ w, dtype=np.float64).ravel()

    def _transposed_times(self, r):
        """``X^T r`` as a NumPy vector."""
        return np.asarray(self.X.T @ r, dtype=np.float64).ravel()

    def column_rms(self, row_weight=None):
        """The root mean square of each column of ``X``, under the rows' weights.

        ``sqrt(sum_i p_i x_ij^2)`` with ``p`` the rows' weights normalised
        to sum to one (``1/n`` for None): rescaling a column by ``c``
        rescales its entry by ``|c|``, and the scale of the weights does not
        matter.  One pass over ``X``.

        Parameters
        ----------
        row_weight : ndarray of shape (n,), default=None
            Nonnegative weights of the rows, with a positive finite sum;
            None for equal weights.

        Returns
        -------
        ndarray of shape (d,)
            Infinite where the squares overflow.
        """
        if row_weight is None:
            p = np.full(self.n, 1.0 / self.n)
        else:
            v = np.asarray(row_weight, dtype=np.float64)
            p = v / v.sum()
        with np.errstate(over="ignore", invalid="ignore"):
            return np.sqrt(self._squared_column_sums(p))

    def _squared_column_sums(self, p):
        """``(X * X)^T p``, a block of rows at a time."""
        self.passes += 1
        if self.sparse:
            X = self.X.tocsr()
            # the squares share the structure of X: only the values are copied
            squares = sp.csr_matrix((np.square(X.data, dtype=np.float64), X.indices, X.indptr), shape=X.shape)
            return np.asarray(squares.T @ p, dtype=np.float64).ravel()
        out = np.zeros(self.d)
        step = max(1, HOST_CHUNK_ENTRIES // max(self.d, 1))
        for a in range(0, self.n, step):
            chunk = np.asarray(self.X[a:a + step], dtype=np.float64)
            out += (chunk * chunk).T @ p[a:a + step]
        return out

    def rows(self, idx):
        """The rows ``idx`` of ``[X, 1]`` as a dense array."""
        Xi = self.X[idx].toarray() if self.sparse else np.take(np.asarray(self.X), idx, axis=0)
        return np.hstack([Xi, np.ones((len(idx), 1))]) if self.fit_intercept else Xi

    def gram(self, h, slack=0.0):
        """``[X, 1]^T diag(h) [X, 1]`` for ``h >= 0``, up to a relative ``slack`` per row.

        Rows with ``h == 0`` are skipped.  When few weights changed by more
        than ``slack`` (relative) since they were last used, the last matrix
        is updated with those rows only, and recomputed after
        :attr:`max_updates` updates.  The result ``G`` then satisfies
        ``(1 - slack) G <= [X, 1]^T diag(h) [X, 1] <= (1 + slack) G``.
        ``slack = 0`` (exact) still saves work for losses with a piecewise
        constant ``l''`` (squared, Huber, squared hinge).
        """
        h = np.asarray(h, dtype=np.float64)
        changed = self._gram_plan(h, slack)
        if changed is None:
            return self._gram_reset(h, self.weighted_gram(h))
        return self._gram_update(h, changed, lambda a, b: self.rows(changed[a:b]))

    def _gram_plan(self, h, slack):
        """The rows whose weight moved by more than ``slack`` when :meth:`gram` updates, None to recompute."""
        if self._gram is None or self._updates >= self.max_updates:
            return None
        changed = np.flatnonzero(np.abs(h - self._h) > slack * self._h)
        if changed.size <= min(0.25 * max(np.count_nonzero(h), 1), self.max_update_rows):
            return changed
        return None

    def _gram_update(self, h, changed, rows_between):
        """The last Gram matrix with the weights of the rows ``changed`` moved to ``h``.

        ``rows_between(a, b)``: the rows of ``changed[a:b]``, taken a block
        at a time (as many entries as :meth:`weighted_gram`'s blocks).
        """
        step = max(1, HOST_CHUNK_ENTRIES // self.p)
        for a in range(0, changed.size, step):
            part = changed[a:a + step]
            rows = rows_between(a, a + part.size)
            self._gram += (rows.T * (h[part] - self._h[part])) @ rows
        if changed.size:
            self._h[changed] = h[changed]
            self._updates += 1
        return self._gram.copy()

    def _gram_reset(self, h, G):
        """Keep ``G``, the Gram matrix of the weights ``h``, for the updates of :meth:`gram`."""
        self._gram, self._h, self._updates = G, h.copy(), 0
        return G.copy()

    #: Low-rank updates of :meth:`gram` before a full recomputation.
    max_updates = 20
    #: Most rows gathered for one update of :meth:`gram` (beyond, it is recomputed).
    max_update_rows = np.inf

    #: Whether :meth:`step_products` reads ``X`` once for all its products (else once per product).
    fuses_products = False

    def step_products(self, r, h, slack, block=None):
        """What one Newton step needs from ``X``: ``([X, 1]^T r, gram(h, slack), G_block, P)``.

        ``block``: None, or ``(h_block, M)`` with ``G_block =
        weighted_gram(h_block)`` and ``P = M [X, 1]`` (None without it).
        One product after the other here; a design whose passes are costly
        (:attr:`fuses_products`) computes them in one pass.
        """
        g, H = self.native_rmatvec(r), self.native_gram(h, slack)
        if block is None:
            return g, H, None, None
        return g, H, self.weighted_gram(block[0]), self.left_product(block[1])

    def left_product(self, M):
        """``M [X, 1]`` as a dense array, for a sparse ``M`` with ``n`` columns."""
        self.passes += 1
        P = M @ self.X
        P = P.toarray() if sp.issparse(P) else np.asarray(P)
        return np.hstack([P, np.asarray(M.sum(axis=1))]) if self.fit_intercept else P

    def weighted_gram(self, h):
        """``[X, 1]^T diag(h) [X, 1]`` for ``h >= 0``, computed afresh."""
        G = np.zeros((self.p, self.p))
        self.passes += 1
        if self.sparse and self.X.format == "csr":  # the rows' pairs of entries, compiled
            X = self.X
            return csr_weighted_gram(X.indptr, X.indices, X.data, np.asarray(h, dtype=np.float64), self.d,
                                     self.fit_intercept, G)
        nz = np.flatnonzero(h > 0.0)
        root = np.sqrt(h[nz])
        if self.sparse:
            Xs = sp.csr_matrix(self.X[nz].multiply(root[:, None]))
            G[: self.d, : self.d] = (Xs.T @ Xs).toarray()
            if self.fit_intercept:
                G[: self.d, self.d] = G[self.d, : self.d] = np.asarray(Xs.T @ root).ravel()
                G[self.d, self.d] = root @ root
            return G
        d = self.d
        every = nz.size == self.n  # then chunks are slices, not gathered rows
        step = max(1, HOST_CHUNK_ENTRIES // max(self.p, 1))
        for a in range(0, nz.size, step):
            # np.take gathers rows several times faster than fancy indexing
            chunk = self.X[a:a + step] if every else np.take(self.X, nz[a:a + step], axis=0)
            r = root[a:a + step]
            rows = chunk * r[:, None]
            # NumPy's product of a matrix's transpose with itself is BLAS's syrk on the C-ordered rows
            # (scipy's dsyrk copies them to Fortran order first)
            G[:d, :d] += rows.T @ rows
            if self.fit_intercept:
                G[:d, d] += rows.T @ r
        if self.fit_intercept:
            G[d, :d] = G[:d, d]
            G[d, d] = root @ root
        return G

    @property
    def gathers_blocks(self):
        """Whether :meth:`block_gram` forms the pooled blocks' scatter here (a NumPy ``X``).

        Else the callers form it from a weighted Gram matrix of the members
        and a product with a sparse block-indicator matrix.
        """
        return not self.sparse and isinstance(self.X, np.ndarray)

    def block_gram(self, idx, a, indptr, mass):
        """``sum_B sum_{i in B} m_i (g_i - g_B)(g_i - g_B)^T`` of the rows ``g_i [x_i, 1]``.

        The blocks' members ``idx``, block by block (block ``b`` at
        ``idx[indptr[b]:indptr[b + 1]]``), with ``a = m_i g_i`` and the
        masses ``mass`` (an ``n``-vector); ``g_B = S_B / m(B)`` with the
        block sums ``S_B = sum_B m_i g_i [x_i, 1]``.  Computed as
        ``sum_i m_i g_i^2 [x_i, 1][x_i, 1]^T - sum_B S_B S_B^T / m(B)``
        from the members' rows, gathered once (the block sums by runs).
        Where :attr:`gathers_blocks`.
        """
        self.passes += 1
        first = indptr[:-1]
        m = np.asarray(mass, dtype=np.float64)[idx]
        root = np.sqrt(m)
        v = a / root  # sqrt(m_i) g_i
        d = self.d
        W = np.take(self.X, idx, axis=0)
        W *= v[:, None]
        G = np.empty((self.p, self.p))
        G[:d, :d] = W.T @ W
        if self.fit_intercept:
            G[:d, d] = W.T @ v
            G[d, d] = v @ v
        # the block sums over the runs, each divided by sqrt(m(B))
        scale = 1.0 / np.sqrt(np.add.reduceat(m, first))
        W *= root[:, None]
        S = np.add.reduceat(W, first, axis=0) * scale[:, None]
        G[:d, :d] -= S.T @ S
        if self.fit_intercept:
            S1 = np.add.reduceat(a, first) * scale
            G[:d, d] -= S.T @ S1
            G[d, :d] = G[:d, d]
            G[d, d] -= S1 @ S1
        return G

    def kept_gram(self, h):
        return self.weighted_gram(h)

    kept_matvec, kept_rmatvec = matvec, rmatvec
