"""The design ``[X, 1]`` of an array of another array-API library (CuPy...): products where X lives.

The full-batch solvers touch ``X`` only through the products of
:class:`skrank.backends.design.Design`.  Here each product runs in ``X``'s own
namespace and on its device (``X @ w``, ``X^T r``, weighted Gram matrices,
block sums), and only vectors of length ``n`` or ``d`` and ``d x d`` matrices
are copied to the host, where the rank step (a sort and a PAVA of ``n``
losses) runs.  ``X`` is never copied whole: the products that scale rows
work through blocks of rows, so the device holds ``X`` once, a block and a
few vectors of length ``n``.
"""

import numpy as np

from ..losses import derivatives_in, values_in
from .design import CHUNK_ENTRIES, Design

#: Entries of ``X`` scaled at once when a weighted Gram matrix or block sums are formed.
_BLOCK_ENTRIES = 1 << 22


def compat_module():
    """scikit-learn's vendored ``array_api_compat`` module, imported on first use."""
    from sklearn.externals import array_api_compat

    return array_api_compat


def array_api_namespace(X):
    """The array-API namespace of ``X`` when it is an array of a library other than NumPy and Dask, else None.

    Parameters
    ----------
    X : object

    Returns
    -------
    module or None
        The namespace (through ``array_api_compat``: CuPy's is wrapped).
    """
    if isinstance(X, np.ndarray) or type(X).__module__.split(".")[0] in ("numpy", "dask", "scipy"):
        return None
    if not (hasattr(X, "__array_namespace__") or hasattr(X, "__dlpack__")):
        return None
    compat = compat_module()
    if not compat.is_array_api_obj(X):
        return None
    return compat.array_namespace(X)


def namespace_name(xp):
    """The library's name (``"cupy"``, ``"array_api_strict"``...) for messages."""
    return xp.__name__.split(".")[-1] if xp.__name__.startswith("sklearn.externals") else \
        xp.__name__.split(".")[0]


def device_of(X):
    """The device of an array-API array."""
    return compat_module().device(X)


def to_numpy(a):
    """A NumPy copy on the host of an array of any array-API library (NumPy arrays pass through)."""
    if isinstance(a, (np.ndarray, np.generic, float, int)):
        return np.asarray(a)
    from sklearn.utils._array_api import _convert_to_numpy

    return _convert_to_numpy(a, compat_module().array_namespace(a))


def to_namespace(a, xp, device):
    """The NumPy array ``a`` as an array of ``xp`` on ``device``."""
    return xp.asarray(np.ascontiguousarray(a), device=device)


def check_array_api_array(X, xp):
    """A float64 2-D array of ``xp``, checked finite on its device.

    Parameters
    ----------
    X : array of the namespace ``xp``
    xp : module

    Returns
    -------
    array of ``xp``
    """
    if X.ndim != 2:
        raise ValueError(f"X must be a 2-D array, got {X.ndim} dimensions.")
    if X.dtype != xp.float64:
        if not xp.isdtype(X.dtype, ("real floating", "integral", "bool")):
            raise ValueError(f"X must hold real numbers, got dtype {X.dtype}.")
        X = xp.astype(X, xp.float64)
    if not bool(xp.all(xp.isfinite(X))):
        raise ValueError("Input X contains NaN or infinity.")
    return X


class ArrayAPIDesign(Design):
    """:class:`Design` of an array of another array-API library, computed on its device (module docstring).

    Parameters
    ----------
    X : array of shape (n, d)
        float64, of the namespace ``xp`` (see :func:`check_array_api_array`).
    fit_intercept : bool
    """

    #: At most this many rows are copied to the host by a Gram update (:meth:`Design.gram`).
    max_update_rows = 1 << 14

    def __init__(self, X, fit_intercept):
        self.xp = compat_module().array_namespace(X)
        self.device = device_of(X)
        super().__init__(X, fit_intercept)
        self.sparse = False
        self._step = max(1, _BLOCK_ENTRIES // max(self.d, 1))

    def _blocks(self):
        """``(start, stop)`` of the blocks of rows (stops in bounds: the standard leaves others open)."""
        return [(a, min(a + self._step, self.n)) for a in range(0, self.n, self._step)]

    def _on_device(self, a):
        return to_namespace(np.ascontiguousarray(a, dtype=np.float64), self.xp, self.device)

    def _times(self, w):
        # the host copy of a new product, or a view of it: copied only when the library lends it read-only
        return np.require(to_numpy(self.X @ self._on_device(w)), requirements="W")

    def _transposed_times(self, r):
        return to_numpy(self.X.T @ self._on_device(r))

    vectors_on_host = False

    def native_matvec(self, theta):
        """``[X, 1] theta``, an ``n``-vector of :attr:`xp` on ``X``'s device (nothing comes to the host)."""
        self.passes += 1
        theta = np.asarray(theta, dtype=np.float64)
        f = self._native_times(np.ascontiguousarray(theta[: self.d]))
        return f + float(theta[self.d]) if self.fit_intercept else f

    def native_rmatvec(self, r):
        """``[X, 1]^T r`` on the host for an ``n``-vector ``r`` of :attr:`xp`: ``d + 1`` numbers come back."""
        self.passes += 1
        g = self._native_transposed_times(r)
        return np.append(g, float(self.xp.sum(r))) if self.fit_intercept else g

    def _native_times(self, w):
        return self.X @ self._on_device(w)

    def _native_transposed_times(self, r):
        return to_numpy(self.X.T @ r)

    def to_host(self, v):
        return np.require(to_numpy(v), requirements="W")

    def affine(self, theta, scale, shift=None):
        t = self.native_matvec(theta) * scale
        return t if shift is None else t + shift

    def loss_values(self, loss, t):
        return values_in(self.xp, loss, t)

    def loss_derivatives(self, loss, t):
        return derivatives_in(self.xp, loss, t)

    def loss_second_derivative(self, loss, t):
        return self.loss_derivatives(loss, t)[2]

    def losses_and_keys(self, loss, t, mu, center, known=None):
        """``(t, l, l', keys)``: ``l``, ``l'`` on the device (or ``known``), the keys on the host."""
        value, d1 = known if known is not None else self.loss_derivatives(loss, t)[:2]
        return t, value, d1, self.to_host(mu * center + value)

    def to_native(self, v):
        return self._on_device(v)

    def sigmoid(self, z):
        return 1.0 / (1.0 + self.xp.exp(-z))

    def take(self, v, idx):
        xp = self.xp
        return to_numpy(xp.take(v, to_namespace(np.asarray(idx, dtype=np.int64), xp, self.device)))

    def _squared_column_sums(self, p):
        self.passes += 1
        xp = self.xp
        p = self._on_device(p)
        out = xp.zeros((self.d,), dtype=xp.float64, device=self.device)
        for a, b in self._blocks():
            block = self.X[a:b, :]
            out = out + (block * block).T @ p[a:b]
        return to_numpy(out)

    def rows(self, idx):
        """The rows ``idx`` of ``[X, 1]``, copied to the host (few rows: the Gram updates)."""
        xp = self.xp
        index = to_namespace(np.asarray(idx, dtype=np.int64), xp, self.device)
        Xi = to_numpy(xp.take(self.X, index, axis=0))
        return np.hstack([Xi, np.ones((len(idx), 1))]) if self.fit_intercept else Xi

    def weighted_gram(self, h):
        """``[X, 1]^T diag(h) [X, 1]`` for ``h >= 0``, summed over blocks of rows on the device.

        When some weights are zero (the members of the pooled blocks), only
        the others' indices and roots go to the device, where their rows are
        gathered a block at a time.
        """
        h = np.asarray(h, dtype=np.float64)
        rows = np.flatnonzero(h > 0.0)
        if rows.size == self.n:
            return self._gram_of_roots(self._on_device(np.sqrt(h)))
        return self._gram_of_rows(rows, np.sqrt(h[rows]))

    def _gram_of_rows(self, rows, root):
        """``sum_k root_k^2 [x_k, 1] [x_k, 1]^T`` over the rows ``rows`` (NumPy), gathered on the device."""
        self.passes += 1
        xp = self.xp
        index = to_namespace(rows.astype(np.int64), xp, self.device)
        root = self._on_device(root)
        G = xp.zeros((self.p, self.p), dtype=xp.float64, device=self.device)
        for a in range(0, rows.size, self._step):
            b = min(a + self._step, rows.size)
            r = root[a:b]
            block = xp.take(self.X, index[a:b], axis=0) * r[:, None]
            if self.fit_intercept:
                block = xp.concat([block, r[:, None]], axis=1)
            G = G + block.T @ block
        return to_numpy(G)

    def native_gram(self, h, slack=0.0):
        """:meth:`Design.gram` of weights ``h``, an ``n``-vector of :attr:`xp`: the plan runs on the device.

        The rows whose weight moved by more than ``slack`` (relative) are
        found on the device; an update gathers them there and brings them
        and their weights' changes to the host (partial vectors), a
        recomputation sums the blocks of rows scaled by ``sqrt(h)`` there.
        The kept weights stay on the device.
        """
        xp = self.xp
        moved = self._native_gram_plan(h, slack)
        if moved is None:
            G = self._gram_of_roots(xp.sqrt(h))
            self._gram, self._h, self._updates = G, h, 0
            return G.copy()
        index = xp.nonzero(moved)[0]
        count = index.shape[0]
        if count:
            change = h - self._h
            step = max(1, CHUNK_ENTRIES // self.p)  # rows gathered at once, as Design's updates
            for a in range(0, count, step):
                part = index[a:min(a + step, count)]
                rows = self._rows_at(part)
                self._gram += (rows.T * to_numpy(xp.take(change, part))) @ rows
            self._h = xp.where(moved, h, self._h)
            self._updates += 1
        return self._gram.copy()

    def _native_gram_plan(self, h, slack):
        """The mask of the rows to update (as :meth:`Design._gram_plan`), None to recompute."""
        if self._gram is None or self._updates >= self.max_updates:
            return None
        xp = self.xp
        moved = xp.abs(h - self._h) > slack * self._h
        count = int(xp.count_nonzero(moved))
        if count <= min(0.25 * max(int(xp.count_nonzero(h)), 1), self.max_update_rows):
            return moved
        return None

    def _rows_at(self, index):
        """The rows of ``[X, 1]`` at the indices ``index`` (an array of :attr:`xp`), on the host."""
        Xi = to_numpy(self.xp.take(self.X, index, axis=0))
        return np.hstack([Xi, np.ones((Xi.shape[0], 1))]) if self.fit_intercept else Xi

    def _gram_of_roots(self, root):
        """``[X, 1]^T diag(root^2) [X, 1]`` for ``root``, an ``n``-vector of :attr:`xp` (one pass)."""
        self.passes += 1
        xp = self.xp
        G = xp.zeros((self.p, self.p), dtype=xp.float64, device=self.device)
        for a, b in self._blocks():
            r = root[a:b]
            rows = self.X[a:b, :] * r[:, None]
            if self.fit_intercept:
                rows = xp.concat([rows, r[:, None]], axis=1)
            G = G + rows.T @ rows
        return to_numpy(G)

    def left_product(self, M):
        """``M [X, 1]`` for a sparse ``M`` with ``n`` columns: its rows' weighted sums of rows of ``X``.

        The nonzeros of each row of ``M`` (CSR order) are a segment; the
        weighted rows are summed per segment as differences of a cumulative
        sum within blocks of rows, on the device.
        """
        self.passes += 1
        xp = self.xp
        M = M.tocsr()
        M.sort_indices()
        k = M.shape[0]
        segment = np.repeat(np.arange(k), np.diff(M.indptr))
        out = np.zeros((k, self.d))
        for a in range(0, M.nnz, self._step):
            b = min(a + self._step, M.nnz)
            index = to_namespace(M.indices[a:b].astype(np.int64), xp, self.device)
            scaled = xp.take(self.X, index, axis=0) * self._on_device(M.data[a:b])[:, None]
            cumulative = xp.cumulative_sum(scaled, axis=0, include_initial=True)
            seg = segment[a:b]
            ends = np.flatnonzero(np.diff(seg, append=-1)) + 1  # past the last entry of each segment
            starts = np.concatenate([[0], ends[:-1]])
            # the segments' sums, differences taken on the device: a row per segment comes back
            ends_at = to_namespace(ends.astype(np.int64), xp, self.device)
            starts_at = to_namespace(starts.astype(np.int64), xp, self.device)
            sums = xp.take(cumulative, ends_at, axis=0) - xp.take(cumulative, starts_at, axis=0)
            out[seg[starts]] += to_numpy(sums)
        return np.hstack([out, np.asarray(M.sum(axis=1))]) if self.fit_intercept else out

    def class_moments(self, positive, sample_weight=None):
        """Means and covariances of the rows of ``X`` in each class, on the device.

        Two products per class: the weighted mean, then the weighted scatter
        about it, by blocks of rows (see
        :meth:`skrank.backends.dask_design.DaskDesign.class_moments` for the
        conventions).
        """
        self.passes += 1
        xp = self.xp
        positive = np.asarray(positive, dtype=bool)
        weight = np.ones(self.n) if sample_weight is None else np.asarray(sample_weight, dtype=np.float64)
        moments = []
        for rows in (positive, ~positive):
            p = np.where(rows, weight, 0.0)
            total = p.sum()
            if not total > 0.0:
                raise ValueError("a class has no rows of positive weight.")
            p_dev = self._on_device(p / total)
            mean = p_dev @ self.X
            scatter = xp.zeros((self.d, self.d), dtype=xp.float64, device=self.device)
            for a, b in self._blocks():
                centred = self.X[a:b, :] - mean[None, :]
                scatter = scatter + centred.T @ (centred * p_dev[a:b, None])
            moments.append((to_numpy(mean), to_numpy(scatter)))
        return tuple(moments)
