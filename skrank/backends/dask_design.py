"""The design ``[X, 1]`` of a Dask array chunked by rows: products computed where the chunks live.

Every product of :class:`skrank.backends.design.Design` is a sum or a
concatenation over row chunks, one task per chunk on Dask's current
scheduler, and only vectors of length ``n`` or ``d`` and ``d x d`` matrices
come back: ``X`` is never gathered, and a lazily generated array is
generated again chunk by chunk at each product (user guide, :doc:`scaling`).
"""

import functools
import os
import uuid

import numpy as np

from .design import Design

#: A fit's gathered vectors of length ``n`` (about 27 float64 ones in the driving process), in bytes per
#: row, and the size below which they are gathered on a cluster: there it is faster (1.5 to 3.6 times at
#: 10^6 to 10^4 rows on a 2-worker ``LocalCluster``, ``benchmarks/scale.py``) and its memory small.
_GATHERED_BYTES_PER_ROW = 27 * 8
_GATHER_BUDGET = 64 * 2**20


def is_dask_array(X):
    """Whether ``X`` is a ``dask.array.Array`` (without importing Dask)."""
    return type(X).__module__.split(".")[0] == "dask" and hasattr(X, "chunks")


def on_distributed_workers():
    """Whether Dask computes on a ``dask.distributed`` client's workers (else with a local scheduler)."""
    import dask

    try:
        from distributed import default_client
        client = default_client()
    except (ImportError, ValueError):  # no distributed, no client
        return False
    return dask.base.get_scheduler() == client.get


def check_dask_array(X):
    """A float64 Dask array of known row chunks and a single column chunk.

    Column chunks are merged (``X.rechunk({1: -1})``): the products need
    whole rows.  Unknown chunk sizes (NaN, e.g. after boolean indexing by a
    Dask mask) raise: ``X.compute_chunk_sizes()`` fixes them.

    Parameters
    ----------
    X : dask.array.Array
        The features, chunked by rows.

    Returns
    -------
    X : dask.array.Array
        Of float64, with whole rows in each chunk.
    """
    if X.ndim != 2:
        raise ValueError(f"X must be a 2-D Dask array, got {X.ndim} dimensions.")
    if any(np.isnan(size) for size in X.chunks[0]) or any(np.isnan(size) for size in X.chunks[1]):
        raise ValueError("X has unknown chunk sizes (NaN); call X.compute_chunk_sizes() first.")
    if len(X.chunks[1]) > 1:
        X = X.rechunk({1: -1})
    if X.dtype != np.float64:
        X = X.astype(np.float64)
    return X


def _finite_block(block):
    if not np.all(np.isfinite(block)):
        raise ValueError("Input X contains NaN or infinity.")
    return block


def finite_lazily(X):
    """``X`` whose chunks, when computed, raise a ValueError if they hold NaN or infinity.

    The check runs with whatever computes ``X`` (a prediction's scores,
    say), in the same pass: nothing is computed here, and the error is that
    of an in-memory ``X`` given to scikit-learn.

    Parameters
    ----------
    X : dask.array.Array
        The features.

    Returns
    -------
    X : dask.array.Array
        The same chunks, each checked by the task that computes it.
    """
    return X.map_blocks(_finite_block, dtype=X.dtype)


def _matvec(block, w):
    return np.asarray(block, dtype=np.float64) @ w


def _rmatvec(block, r):
    return np.asarray(block, dtype=np.float64).T @ r


def weighted_gram(block, h, fit_intercept):
    """One chunk's ``X^T diag(h) X`` (of ``[X, 1]`` with an intercept), from its rows of positive weight."""
    block = np.asarray(block, dtype=np.float64)
    if np.count_nonzero(h) < 0.5 * h.size:  # few weighted rows (a block term): those only
        keep = h > 0.0
        block, h = block[keep], h[keep]
    root = np.sqrt(h)
    rows = block * root[:, None]
    gram = rows.T @ rows
    return bordered_gram(gram, rows.T @ root, root @ root) if fit_intercept else gram


def bordered_gram(gram, column, corner):
    """``[[gram, column], [column^T, corner]]``: the Gram matrix of ``[X, 1]`` from that of ``X``."""
    d = gram.shape[0]
    out = np.empty((d + 1, d + 1))
    out[:d, :d] = gram
    out[:d, d] = out[d, :d] = column
    out[d, d] = corner
    return out


def _step_products(block, r, h, take, h_block, M, fit_intercept):
    """A chunk's share of :meth:`DaskDesign.step_products`, the chunk read once."""
    block = np.asarray(block, dtype=np.float64)
    gram = None if h is None else weighted_gram(block, h, fit_intercept)
    rows = None if take is None else block[take]
    if M is None:
        return block.T @ r, gram, rows, None, None
    return block.T @ r, gram, rows, weighted_gram(block, h_block, fit_intercept), np.asarray(M @ block)


def _squared_rmatvec(block, p):
    block = np.asarray(block, dtype=np.float64)
    return (block * block).T @ p


def _take(block, local):
    return np.asarray(block, dtype=np.float64)[local]


def _left_product(block, M):
    return np.asarray(M @ np.asarray(block, dtype=np.float64))


def _class_scatters(block, positive, weight):
    """``(total weight, mean, scatter about the mean)`` of the chunk's positives, then of its negatives."""
    block = np.asarray(block, dtype=np.float64)
    out = []
    for rows in (positive, ~positive):
        Xc = block[rows]
        v = None if weight is None else weight[rows]
        total = float(Xc.shape[0] if v is None else v.sum())
        if total == 0.0:
            out.append((0.0, np.zeros(block.shape[1]), np.zeros((block.shape[1], block.shape[1]))))
            continue
        mean = Xc.mean(axis=0) if v is None else (v @ Xc) / total
        centred = Xc - mean
        scatter = centred.T @ (centred if v is None else centred * v[:, None])
        out.append((total, mean, scatter))
    return out


def _merge_scatters(a, b):
    """The ``(total, mean, scatter)`` of two groups of rows from those of each.

    The pairwise update of Chan, Golub and LeVeque: the scatter about the
    merged mean adds ``delta delta' W_a W_b / W`` to the two scatters, with
    ``delta`` the difference of the means, so no chunk is ever uncentred.
    """
    (wa, ma, sa), (wb, mb, sb) = a, b
    if wb == 0.0:
        return a
    if wa == 0.0:
        return b
    total = wa + wb
    delta = mb - ma
    return total, ma + delta * (wb / total), sa + sb + np.outer(delta, delta * (wa * wb / total))


def persist(*arrays):
    """``dask.persist`` of the arrays: one array, or a tuple of several."""
    import dask

    out = dask.persist(*arrays)
    return out if len(out) > 1 else out[0]


def _chunks_to_workers(v, rows, function):
    """``function(v)`` as a Dask array chunked by ``rows``, persisted one chunk at a time.

    Each chunk is sent and stored before the next one is made: the
    driver's copies in flight (the chunk, its serialised task) are
    ``O(chunk)``, not ``O(n)`` as when the graph of the whole vector is sent.
    """
    import dask.array as da

    bounds = np.concatenate(([0], np.cumsum(rows)))
    pieces = []
    for a, b in zip(bounds[:-1], bounds[1:]):
        piece = persist(da.from_array(function(v[a:b]), chunks=-1))
        try:
            from distributed import futures_of, wait
        except ImportError:
            futures_of = None
        # on a local scheduler persist has computed the chunk: no futures to wait for
        futures = [] if futures_of is None else futures_of(piece)
        if futures:
            wait(futures)
        pieces.append(piece)
    return da.concatenate(pieces)


def _add(a, b):
    """Termwise sum of two tuples of arrays or numbers (a chunk's shares of a reduction)."""
    return tuple(x + y for x, y in zip(a, b))


def _add_all(*shares):
    return functools.reduce(_add, shares)


#: The shares summed by one task on the workers, before the driver sums what is left.
_FAN_IN = 16


def summed_task(shares):
    """The delayed termwise sum of the delayed ``shares`` (tuples), added by groups on the workers.

    Groups of ``_FAN_IN`` are summed on the workers until one is left:
    the driver receives ``O(d^2)`` numbers, not one share per chunk.
    """
    import dask

    add = dask.delayed(_add_all, pure=True)
    while len(shares) > 1:
        shares = [add(*shares[i:i + _FAN_IN]) for i in range(0, len(shares), _FAN_IN)]
    return shares[0]


def summed(shares, *others):
    """The termwise sum of the delayed ``shares`` (:func:`summed_task`), computed with the delayed
    ``others`` in one round trip (their values follow the sum when given)."""
    import dask

    out = dask.compute(summed_task(shares), *others)
    return out if others else out[0]


def _arguments_block(X, *vectors, w, b, scaled, shifted):
    """``s (X w + b) + c`` on one chunk; ``vectors``: its ``s`` if ``scaled``, its ``c`` if ``shifted``."""
    t = np.asarray(X, dtype=np.float64) @ w + b
    if scaled:
        t *= vectors[0]
    if shifted:
        t += vectors[-1]
    return t


def _gram_block(X, h, fit_intercept):
    """One chunk's ``[X, 1]^T diag(h) [X, 1]``, as a tuple (:meth:`DaskDesign.worker_sum`)."""
    return (weighted_gram(np.asarray(X, dtype=np.float64), h, fit_intercept),)


def _transposed_block(X, v, fit_intercept):
    """One chunk's ``[X, 1]^T v``, as a tuple."""
    u = np.asarray(X, dtype=np.float64).T @ v
    return (np.append(u, v.sum()) if fit_intercept else u,)


class DaskDesign(Design):
    """:class:`Design` of a Dask array chunked by rows (see the module docstring).

    Parameters
    ----------
    X : dask.array.Array of shape (n, d)
        From :func:`check_dask_array`.
    fit_intercept : bool
    """

    def __init__(self, X, fit_intercept):
        import dask

        self._dask = dask
        X = check_dask_array(X)
        super().__init__(X, fit_intercept)
        self.sparse = False
        self._blocks = list(X.to_delayed().ravel())
        self._bounds = np.concatenate([[0], np.cumsum(X.chunks[0])]).astype(np.int64)
        # the Gram updates gather their rows: at most one chunk's worth
        self.max_update_rows = int(max(X.chunks[0]))

    def _run(self, function, *per_block):
        """``function(block_c, *args_c)`` for every chunk ``c``, on the current scheduler."""
        delayed = self._dask.delayed(function, pure=False)
        tasks = [delayed(block, *(args[c] for args in per_block)) for c, block in enumerate(self._blocks)]
        return self._dask.compute(*tasks)

    def _slices(self, v):
        return [v[a:b] for a, b in zip(self._bounds[:-1], self._bounds[1:])]

    def _times(self, w):
        return np.concatenate(self._run(_matvec, [w] * len(self._blocks)))

    def _transposed_times(self, r):
        return np.sum(self._run(_rmatvec, self._slices(r)), axis=0)

    def _squared_column_sums(self, p):
        self.passes += 1
        return np.sum(self._run(_squared_rmatvec, self._slices(p)), axis=0)

    def _local(self, idx):
        """``(order, local)``: ``idx[order]`` ascending, ``local[c]`` its members in chunk ``c``, locally."""
        idx = np.asarray(idx, dtype=np.int64)
        order = np.argsort(idx, kind="stable")
        ordered = idx[order]
        cuts = np.searchsorted(ordered, self._bounds)
        return order, [ordered[cuts[c]:cuts[c + 1]] - self._bounds[c] for c in range(len(self._blocks))]

    def _gathered(self, order, parts):
        """The rows of the chunks' ``parts`` (in ascending order) back in the order of the index."""
        Xi = np.empty((order.size, self.d))
        Xi[order] = np.concatenate(parts, axis=0)
        return np.hstack([Xi, np.ones((order.size, 1))]) if self.fit_intercept else Xi

    def rows(self, idx):
        """The rows ``idx`` of ``[X, 1]``, gathered chunk by chunk (few rows: the Gram updates)."""
        order, local = self._local(idx)
        return self._gathered(order, self._run(_take, local))

    fuses_products = True

    def step_products(self, r, h, slack, block=None):
        """:meth:`Design.step_products` in one pass: each chunk makes its share of the four products.

        The Gram matrix of ``h`` is the last one updated with the rows
        whose weight moved, gathered in the same pass, when
        :meth:`Design.gram` would update it, else summed afresh.
        """
        self.passes += 1
        h = np.asarray(h, dtype=np.float64)
        changed = self._gram_plan(h, slack)
        chunks = len(self._blocks)
        if changed is None:
            weights, take, order = self._slices(h), [None] * chunks, None
        else:
            (order, take), weights = self._local(changed), [None] * chunks
        if block is None:
            h_block, M = [None] * chunks, [None] * chunks
        else:
            h_block, M = self._slices(np.asarray(block[0], dtype=np.float64)), block[1].tocsc()
            M = [M[:, a:b] for a, b in zip(self._bounds[:-1], self._bounds[1:])]
        parts = self._run(_step_products, self._slices(np.asarray(r, dtype=np.float64)), weights, take,
                          h_block, M, [self.fit_intercept] * chunks)
        g, grams, rows, block_grams, products = zip(*parts)
        g = np.sum(g, axis=0)
        if self.fit_intercept:
            g = np.append(g, np.sum(r))
        if changed is None:
            G = self._gram_reset(h, np.sum(grams, axis=0))
        else:
            gathered = self._gathered(order, rows) if changed.size else None
            G = self._gram_update(h, changed, lambda a, b: gathered[a:b])
        if block is None:
            return g, G, None, None
        P = np.sum(products, axis=0)
        if self.fit_intercept:
            P = np.hstack([P, np.asarray(block[1].sum(axis=1))])
        return g, G, np.sum(block_grams, axis=0), P

    def left_product(self, M):
        """``M [X, 1]`` for a sparse ``M`` with ``n`` columns (a dense ``k x p`` array)."""
        self.passes += 1
        M = M.tocsc()
        parts = [M[:, a:b] for a, b in zip(self._bounds[:-1], self._bounds[1:])]
        P = np.sum(self._run(_left_product, parts), axis=0)
        return np.hstack([P, np.asarray(M.sum(axis=1))]) if self.fit_intercept else P

    def class_moments(self, positive, sample_weight=None):
        """Means and covariances of the rows of ``X`` in each class, in one pass over the chunks.

        Each chunk returns its classes' total weights, means and scatter
        matrices about those means; they are merged pairwise
        (:func:`_merge_scatters`), as accurate as centring the whole class.

        Parameters
        ----------
        positive, sample_weight : ndarray of shape (n,)
            The rows of the first class (bool) and the rows' weights (or
            None), as in :func:`skrank.datafits.square_auc.two_class_moments`.

        Returns
        -------
        (mean, cov) of the positive rows, (mean, cov) of the others
            As :func:`skrank.datafits.square_auc.class_moments`:
            ``mean = sum_i p_i x_i`` and ``cov = sum_i p_i (x_i - mean)(x_i - mean)'``
            with ``p`` the rows' weights normalised over their class.
        """
        self.passes += 1
        positive = np.asarray(positive, dtype=bool)
        weights = [None] * len(self._blocks) if sample_weight is None else self._slices(
            np.asarray(sample_weight, dtype=np.float64))
        parts = self._run(_class_scatters, self._slices(positive), weights)
        moments = []
        for k in range(2):
            total, mean, scatter = functools.reduce(_merge_scatters, [part[k] for part in parts])
            if total == 0.0:
                raise ValueError("a class has no rows of positive weight.")
            moments.append((mean, scatter / total))
        return tuple(moments)

    def weighted_gram(self, h):
        """``[X, 1]^T diag(h) [X, 1]`` for ``h >= 0``, the chunks' matrices summed."""
        self.passes += 1
        h = np.asarray(h, dtype=np.float64)
        flags = [self.fit_intercept] * len(self._blocks)
        return np.sum(self._run(weighted_gram, self._slices(h), flags), axis=0)

    def keeping_vectors_for(self, risk, penalty):
        """:class:`~skrank.backends.dask_vectors.WorkerDesign` where the fit keeps its vectors on the workers.

        A spectral ``risk`` (weights given by the ranks) with a ``penalty``
        with an l2 part and no l1 part (an l1 certificate needs the losses
        in one place) can; it pays (saves the driver's memory for more round
        trips) on a ``dask.distributed`` client's workers beyond
        ``_GATHER_BUDGET`` bytes of gathered vectors.  ``SKRANK_NEWTON_GATHER``
        overrides: ``"1"`` gathers, ``"0"`` keeps them apart wherever the fit
        can.  Else ``self``: the vectors are gathered.
        """
        forced = os.environ.get("SKRANK_NEWTON_GATHER", "")
        fits = (forced in ("", "0") and not risk.depends_on_values and float(penalty.l1) == 0.0
                and float(penalty.l2) > 0.0)
        if fits and (forced == "0" or (self.n * _GATHERED_BYTES_PER_ROW > _GATHER_BUDGET
                                       and self.vectors_on_workers())):
            from .dask_vectors import WorkerDesign

            return WorkerDesign(self.X, self.fit_intercept)
        return self

    # -- products with n-vectors kept on the workers (Dask arrays chunked like X's rows) ----------
    def vectors_on_workers(self):
        """Whether the chunks are computed by a ``dask.distributed`` client's workers.

        There the ``n``-vectors of a fit (scores, labels, derivatives) can
        stay where they are made, the driving process receiving reductions
        only; with a local scheduler the chunks are computed in the driving
        process anyway.
        """
        return on_distributed_workers()

    def worker_vector(self, v, function=np.asarray):
        """``function(v)`` persisted on the workers, chunked like ``X``'s rows (``v``: NumPy or Dask)."""
        rows = self.X.chunks[0]
        if is_dask_array(v):  # made where v lives
            return persist(v.astype(np.float64).rechunk((rows,)).map_blocks(function))
        return _chunks_to_workers(np.asarray(v, dtype=np.float64), rows, function)

    def worker_blocks(self, *arrays):
        """Per chunk, the delayed blocks of ``X`` and of ``arrays`` (None stays None), aligned."""
        parts = [[None] * len(self._blocks) if a is None else list(a.to_delayed().ravel()) for a in arrays]
        return list(zip(self._blocks, *parts))

    def worker_sum(self, function, *arrays, **kwargs):
        """The sum over the chunks ``c`` of ``function(X_c, *arrays_c, **kwargs)`` (tuples, termwise)."""
        task = self._dask.delayed(functools.partial(function, **kwargs), pure=True)
        return summed([task(*blocks) for blocks in self.worker_blocks(*arrays)])

    def worker_matvec(self, theta, scale=None, shift=None, kept=True):
        """``scale ([X, 1] theta) + shift`` on the workers (None: none), persisted if ``kept``."""
        import dask.array as da

        self.passes += 1
        w, b = self.split(theta)
        args = [self.X, "ij"]
        for v in (scale, shift):
            if v is not None:
                args += [v, "i"]
        t = da.blockwise(functools.partial(_arguments_block, w=np.ascontiguousarray(w), b=b,
                                           scaled=scale is not None, shifted=shift is not None),
                         "i", *args, dtype=np.float64, concatenate=True)
        return persist(t) if kept else t

    def worker_rmatvec(self, v):
        """``[X, 1]^T v`` for ``v`` on the workers, summed there."""
        self.passes += 1
        return self.worker_sum(_transposed_block, v, fit_intercept=self.fit_intercept)[0]

    def worker_gram(self, h, slack=0.0):
        """``[X, 1]^T diag(h) [X, 1]`` for ``h >= 0`` on the workers, summed there (exactly: no ``slack``)."""
        self.passes += 1
        return self.worker_sum(_gram_block, h, fit_intercept=self.fit_intercept)[0]


class _Key:
    """A task key passed as a plain value (not substituted by the scheduler), and who held it."""

    def __init__(self, key, holders=()):
        self.key, self.holders = key, tuple(holders)


#: Rounds of asking the holders of a chunk (and then the scheduler) for it before :func:`_held` gives up.
_FETCH_ROUNDS = 20


def _held(key):
    """The data a worker holds under ``key.key``: a new task's result without a dependency.

    Where the worker no longer holds it (the Active Memory Manager dropped
    this replica since ``who_has``), it is fetched from another holder,
    worker to worker: the holders named in ``key``, then those the
    scheduler names.  (A ``gather`` through the worker's client from within
    the task waits for ever on a cluster of worker processes.)
    """
    from distributed import get_worker

    worker = get_worker()
    try:
        return worker.data[key.key]
    except KeyError:
        return _fetched(worker, key)


def _fetched(worker, key):
    """``key.key``'s data from another worker that holds it (:func:`_held`)."""
    import time

    from distributed.utils import sync
    from distributed.worker import get_data_from_worker

    holders = key.holders
    for attempt in range(_FETCH_ROUNDS):
        for address in (a for a in holders if a != worker.address):
            response = sync(worker.loop, get_data_from_worker, worker.rpc, [key.key], address,
                            who=worker.address)
            if response.get("status") == "OK" and key.key in response["data"]:
                return response["data"][key.key]
        time.sleep(0.01 * attempt)  # a holder busy, or the replica moving: ask the scheduler again
        holders = tuple(sync(worker.loop, worker.scheduler.who_has, keys=[key.key]).get(key.key, ()))
    raise KeyError(f"no worker holds {key.key!r} any more.")


def _worker_of(workers, key):
    """The workers the task ``key`` may run on (an annotation the scheduler evaluates per key): those
    of ``workers`` (a re-rooting task), else any ([])."""
    return workers.get(key, [])


def rerooted(*arrays):
    """The persisted ``arrays`` under new keys whose tasks have no dependencies, where their chunks are held.

    On a ``dask.distributed`` client the scheduler keeps the record of
    every task that a held result depends on (its lineage), so that a lost
    chunk can be computed again: a vector made from the last step's
    vectors, step after step, grows that record with the chunks times the
    steps.  Each chunk is taken over by a task that reads it on its worker
    (no copy; one submission for all the arrays, each task bound to a
    worker that holds its chunk), and the old keys are released with the
    arrays.  Elsewhere (a local scheduler: no lineage is kept) the arrays
    are returned.  One array, or a tuple of several.
    """
    out, _ = rerooted_and_fetched(arrays, [])
    return out if len(out) > 1 else out[0]


def rerooted_and_fetched(arrays, fetched):
    """:func:`rerooted` of the ``arrays`` and the values of the collections ``fetched``, in one submission.

    ``fetched`` (a few numbers each) may read the arrays as they were
    before.  Returns ``(arrays, values)``: a tuple of the re-rooted arrays
    and a list of the values, as ``dask.compute`` gives them.
    """
    import dask
    import dask.array as da

    try:
        from distributed import default_client, futures_of, wait

        client = default_client()
    except (ImportError, ValueError):
        client = None
    futures = [] if client is None else futures_of(list(arrays))
    if not futures or dask.base.get_scheduler() != client.get:
        return tuple(arrays), list(dask.compute(*fetched)) if fetched else []
    wait(futures)
    holders = client.who_has(futures)
    names = ["rerooted-" + uuid.uuid4().hex for _ in arrays]  # new keys: never one being released
    held, workers = [], {}
    take = dask.delayed(_held, pure=False)
    for name, array in zip(names, arrays):
        for key in dask.core.flatten(array.__dask_keys__()):
            new_key = (name,) + tuple(key[1:])
            held.append(take(_Key(key, holders[key]), dask_key_name=new_key))
            workers[new_key] = [sorted(holders[key])[0]]
    with dask.annotate(workers=functools.partial(_worker_of, workers), allow_other_workers=False):
        submitted = client.compute(held + list(fetched))
    new, values = submitted[:len(held)], submitted[len(held):]
    wait(new)  # before the old keys may be released
    out = tuple(da.Array({f.key: f for f in new if f.key[0] == name}, name, array.chunks, dtype=array.dtype)
                for name, array in zip(names, arrays))
    return out, client.gather(values)


def persist_and_fetch(kept, fetched):
    """Persist the collections ``kept`` and bring the values of ``fetched`` to the driver, in one submission.

    ``dask.persist`` of both, then, on a ``dask.distributed`` client, one
    ``gather`` of the futures of ``fetched`` (no second graph: a value
    comes back, nothing is computed again); on a local scheduler the
    persisted values are in memory already.

    Parameters
    ----------
    kept : sequence of dask collections
        Computed where they run and kept there.
    fetched : sequence of dask collections
        Computed and brought back (each a few numbers).

    Returns
    -------
    kept : list
        The persisted collections.
    values : list
        The values of ``fetched``, as ``dask.compute`` gives them.
    """
    import dask
    from dask.base import get_scheduler

    kept, fetched = list(kept), list(fetched)
    collections = kept + fetched
    if not collections:
        return [], []
    persisted = dask.persist(*collections)
    kept, fetched = list(persisted[:len(kept)]), list(persisted[len(kept):])
    client = getattr(get_scheduler(collections=collections), "__self__", None)
    if not (fetched and hasattr(client, "gather")):
        return kept, list(dask.compute(*fetched))
    from distributed import futures_of

    futures = {f.key: f for f in futures_of(fetched)}
    layouts = [c.__dask_keys__() for c in fetched]
    gathered = client.gather([_nested(keys, futures) for keys in layouts])
    return kept, [_finalized(c, values) for c, values in zip(fetched, gathered)]


def _nested(keys, futures):
    """The nested lists of keys ``keys`` with each key replaced by its future."""
    if isinstance(keys, list):
        return [_nested(k, futures) for k in keys]
    return futures[keys]


def _finalized(collection, values):
    finalize, args = collection.__dask_postcompute__()
    return finalize(values, *args)
