"""The rank step of a spectral risk on a Dask array of keys, where the keys live.

:class:`DaskSortedRankStep` computes the projection ``q = proj_P(keys / mu)``
onto the permutahedron of a risk's rank weights (with sample masses, its
base polytope in the masses' metric), and the risk's value
``Omega(l) = sum_i sigma_i l_(i)``, for keys chunked by rows on Dask
workers, without bringing any vector of length ``n`` to the driving
process.  The result equals the in-memory projection
(:func:`skrank.datafits.smoothed_risk.pooled_projection` after a stable
sort) up to rounding: the user guide's :ref:`methods-dask-rank` gives the
argument.  The steps:

1. **Sample sort.**  Each chunk is sorted by ``(key, row)``; a regular
   sample of each comes to the driver, whose quantiles are the splitters
   (pairs ``(key, row)``, so that ties are split deterministically, in the
   order of a stable sort); each chunk's rows move to the partition of
   their range with their masses and rows, never anything of ``X``.
2. **Offsets.**  A counting reduction gives each partition its rank offset
   and the shares of the mass below and above it, from which it makes its
   slice of the rank weights (:meth:`skrank.risks.BaseRisk.weights_slice`,
   :meth:`skrank.risks.BaseRisk.cell_weights`).
3. **PAVA by partitions.**  Each partition runs the pool-adjacent-violators
   stack of ``pooled_projection`` on its rows and sends the summaries
   (sum, mass, count) of its first and last few blocks to the driver,
   which goes on pooling across the boundaries; a partition whose
   summaries were too few for that is asked for more.
4. **Write.**  Each partition writes ``q`` with its corrected boundary
   blocks; the rows go back to the keys' chunks (a second shuffle).

The reductions that the driver needs come back in the submissions that
keep the results they read
(:func:`~skrank.backends.dask_design.persist_and_fetch`): the chunks
sorted with their sample, the partitions with their counts, the PAVA
stacks with their first summaries, then ``q`` written: four submissions to a
``dask.distributed`` scheduler (more only where a merge needs longer
summaries, or the sample weights are below the resolution of the largest).

The driver holds ``O(partitions x blocks summarised)`` numbers, the
splitters' sample (``O(partitions)`` per chunk) and, on demand, the pooled
blocks' masses and sums.
"""

import math
import operator
import uuid

import numpy as np

from .._jit import njit
from ..kernels.pava import block_moments, pool_adjacent_violators
from .dask_design import persist_and_fetch
from .worker_rank_step import WorkerRankStep

#: Sampled rows per partition, over all chunks (the splitters' accuracy: partitions within about
#: ``1 +- 1/sqrt(_OVERSAMPLE)`` of their mean size).
_OVERSAMPLE = 32
#: Rows per partition of the sort, by default (8 MB of keys): fewer partitions than chunks keep the
#: shuffles' pieces (chunks x partitions tasks) few.
_PARTITION_ROWS = 2**20
#: Blocks summarised at each end of a partition in the first merge (doubled for a partition that needs more).
_FIRST_SUMMARY = 16


# --------------------------------------------------------------------------- kernels


@njit(cache=True)
def _block_moments(u, m, sigma, starts, selected, su, ss):
    """``sum m u`` and ``sum sigma`` of the selected blocks, summed in the rows' order."""
    order = np.arange(u.shape[0])
    for t in range(selected.shape[0]):
        b = selected[t]
        su[t], ss[t], _ = block_moments(u, order, m, sigma, starts[b], starts[b + 1])


@njit(cache=True)
def _write_blocks(u, m, sigma, mu, starts, n_blocks, given_lo, given_hi, given_su, given_ss, given_mass,
                  given_id, first_id, q, ids, local_mass):
    """Write ``q`` of a partition's blocks, the blocks ``given_lo[k] .. given_hi[k] - 1`` with given sums.

    The given blocks are pooled with blocks of other partitions: their
    ``sum m u``, ``sum sigma`` and mass are the whole pooled block's.  The
    others are written as ``pooled_projection`` writes them.  ``ids`` gets
    each row's pooled block (``-1`` for a block of one row): the given
    ``given_id``, else ``first_id`` onwards; ``local_mass`` the masses of the
    latter.  Returns their number.
    """
    stride = 1 if m.shape[0] == u.shape[0] else 0
    order = np.arange(u.shape[0])
    k = 0
    b = 0
    n_local = 0
    while b < n_blocks:
        if k < given_lo.shape[0] and b == given_lo[k]:
            mean_u = given_su[k] / given_mass[k]
            mean_s = given_ss[k] / given_mass[k]
            for i in range(starts[b], starts[given_hi[k]]):
                q[i] = m[i * stride] * (mean_s + (u[i] - mean_u) / mu)
                ids[i] = given_id[k]
            b = given_hi[k]
            k += 1
            continue
        lo, hi = starts[b], starts[b + 1]
        if hi - lo == 1:
            q[lo] = sigma[lo]
            ids[lo] = -1
            b += 1
            continue
        mean_u, mean_s, mass = block_moments(u, order, m, sigma, lo, hi)
        mean_u /= mass
        mean_s /= mass
        for i in range(lo, hi):
            q[i] = m[i * stride] * (mean_s + (u[i] - mean_u) / mu)
            ids[i] = first_id + n_local
        local_mass[n_local] = mass
        n_local += 1
        b += 1
    return n_local


# --------------------------------------------------------------------------- tasks (run on the workers)


def _sort_chunk(offset, key, *columns):
    """A chunk's rows sorted by ``(key, row)``: ``(keys, rows, *columns)``."""
    key = np.asarray(key, dtype=np.float64)
    order = np.argsort(key)
    ordered = key[order]
    if np.any(ordered[1:] == ordered[:-1]):  # ties: in the rows' order (a stable sort)
        order = np.argsort(key, kind="stable")
    return (key[order], order + offset) + tuple(np.asarray(c, dtype=np.float64)[order] for c in columns)


def _sample(part, size):
    """``size`` rows spread evenly over a sorted chunk: their keys and rows."""
    key, row = part[0], part[1]
    if key.size == 0:
        return key, row
    pick = np.unique(np.linspace(0, key.size - 1, min(size, key.size)).round().astype(np.int64))
    return key[pick], row[pick]


def _cuts(key, row, split_key, split_row):
    """Where the sorted ``(key, row)`` pairs cross each splitter: before it, the pairs below it."""
    lo = np.searchsorted(key, split_key, side="left")
    hi = np.searchsorted(key, split_key, side="right")
    cut = lo.copy()
    for t in np.flatnonzero(hi > lo):  # ties with the splitter's key: the rows (ascending there) decide
        cut[t] = lo[t] + np.searchsorted(row[lo[t]:hi[t]], split_row[t], side="left")
    return np.concatenate(([0], cut, [key.size]))


def _split(part, split_key, split_row):
    """A sorted chunk cut into one piece per partition."""
    cut = _cuts(part[0], part[1], split_key, split_row)
    return tuple(tuple(col[cut[p]:cut[p + 1]] for col in part) for p in range(cut.size - 1))


def _gather(*pieces):
    """One partition from its pieces (in the chunks' order), sorted by ``(key, row)``."""
    columns = [np.concatenate([piece[c] for piece in pieces]) for c in range(len(pieces[0]))]
    order = np.argsort(columns[0], kind="stable")  # pieces in the rows' order: ties stay by row
    return tuple(col[order] for col in columns)


def _partition_stats(part, weighted, masses_apart):
    """``[count, non-finite keys, sum w, max w, min w, bad masses]`` of one partition."""
    key = part[0]
    stats = np.zeros(6)
    stats[0] = key.size
    stats[1] = key.size - np.count_nonzero(np.isfinite(key))
    if weighted and key.size:
        w = part[-1]
        stats[2], stats[3], stats[4] = np.sum(w), np.max(w), np.min(w)
        bad = ~(np.isfinite(w) & (w > 0.0))
        if masses_apart:
            bad |= ~(np.isfinite(part[2]) & (part[2] > 0.0))
        stats[5] = np.count_nonzero(bad)
    return stats


def _count_resolved(part, exponent):
    """The sample weights of one partition that are not 0 at the scale of the largest."""
    return int(np.count_nonzero(np.ldexp(part[-1], -exponent) > 0.0))


def _rank_weights(part, risk, cells):
    """The partition's slice of the rank weights, from its offsets ``cells``."""
    start, n = cells["start"], cells["n"]
    size = part[0].size
    if not cells["weighted"]:
        return risk.weights_slice(n, start, start + size)
    total = cells["total"]
    share = part[-1] / total
    below = np.cumsum(np.concatenate(([cells["below"]], share)))
    above = np.cumsum(np.concatenate(([cells["above"]], share[::-1])))[::-1]
    if start == 0:
        below[0], above[0] = 0.0, 1.0
    if start + size == n:
        below[-1], above[-1] = 1.0, 0.0
    return risk.cell_weights(share, below, above, total, cells["n_samples"])


def _masses_of(part, cells):
    return part[2] if cells["weighted"] else np.ones(1)


def _local_pava(part, risk, cells, mu):
    """The partition's rank weights and its PAVA stack."""
    sigma = np.ascontiguousarray(_rank_weights(part, risk, cells), dtype=np.float64)
    size = part[0].size
    starts = np.empty(size + 1, dtype=np.int64)
    sums, masses = np.empty(size), np.empty(size)
    nb = pool_adjacent_violators(part[0], np.arange(size), _masses_of(part, cells), sigma, mu, starts, sums,
                                 masses)
    return dict(sigma=sigma, starts=starts[: nb + 1], sums=sums[:nb], masses=masses[:nb], n_blocks=nb)


def _summary(part, local, cells, count):
    """The first and last ``count`` blocks' ``(sum, mass, size, sum m u, sum sigma)`` (all when few)."""
    nb = local["n_blocks"]
    starts = local["starts"]
    sizes = np.diff(starts)
    complete = nb <= 2 * count
    selected = np.arange(nb) if complete else np.concatenate((np.arange(count), np.arange(nb - count, nb)))
    su, ss = np.empty(selected.size), np.empty(selected.size)
    _block_moments(part[0], _masses_of(part, cells), local["sigma"], starts, selected, su, ss)
    table = np.stack((local["sums"][selected], local["masses"][selected], sizes[selected].astype(np.float64),
                      su, ss), axis=1)
    return dict(n_blocks=nb, complete=complete, index=selected, table=table,
                n_pooled=int(np.count_nonzero(sizes > 1)))


def _write(part, local, cells, mu, given, first_id):
    """``q`` and the pooled blocks' ids of a partition, in its sorted order, and its own pooled masses."""
    size = part[0].size
    q, ids, local_mass = np.empty(size), np.empty(size, dtype=np.int64), np.empty(size)
    n_local = _write_blocks(part[0], _masses_of(part, cells), local["sigma"], mu, local["starts"],
                            local["n_blocks"], given["lo"], given["hi"], given["su"], given["ss"],
                            given["mass"], given["id"], first_id, q, ids, local_mass)
    return part[1], q, ids, local_mass[:n_local]


def _to_chunks(written, ends):
    """A partition's rows cut by the keys' chunks (``ends``: each chunk's last row + 1)."""
    row, q, ids = written[:3]
    chunk = np.searchsorted(ends, row, side="right")
    if ends.size < 2**15:
        chunk = chunk.astype(np.int16)  # a stable sort of small integers is a radix sort
    order = np.argsort(chunk, kind="stable")
    cut = np.searchsorted(chunk[order], np.arange(ends.size + 1))
    row, q, ids = row[order], q[order], ids[order]
    return tuple((row[a:b], q[a:b], ids[a:b]) for a, b in zip(cut[:-1], cut[1:]))


def _assemble(offset, size, *pieces):
    """One chunk of ``q`` and of the block ids from the partitions' pieces."""
    q, ids = np.empty(size), np.empty(size, dtype=np.int64)
    for row, value, block in pieces:
        q[row - offset] = value
        ids[row - offset] = block
    return q, ids


def _partition_value(part, risk, cells):
    """``sum sigma_i l_(i)`` over one partition of sorted losses."""
    if part[0].size == 0:
        return 0.0
    return float(_rank_weights(part, risk, cells) @ part[0])


def _chunk_block_sums(ids, V):
    """One chunk's sums of the rows of ``V`` per pooled block: ``(blocks, sums)``."""
    V = np.asarray(V, dtype=np.float64).reshape(ids.shape[0], -1)
    member = np.flatnonzero(ids >= 0)
    block = ids[member]
    order = np.argsort(block, kind="stable")
    block = block[order]
    if block.size == 0:
        return block, np.zeros((0, V.shape[1]))
    first = np.flatnonzero(np.concatenate(([True], block[1:] != block[:-1])))
    return block[first], np.add.reduceat(V[member[order]], first, axis=0)


def _add_block_sums(*parts):
    """The sums per block of several ``(blocks, sums)`` of :func:`_chunk_block_sums`, added."""
    block = np.concatenate([p[0] for p in parts])
    sums = np.concatenate([p[1] for p in parts])
    if block.size == 0:
        return block, sums
    order = np.argsort(block, kind="stable")
    block, sums = block[order], sums[order]
    first = np.flatnonzero(np.concatenate(([True], block[1:] != block[:-1])))
    return block[first], np.add.reduceat(sums, first, axis=0)


def _masses_of_blocks(n_pooled, given_mass, given_id, first_ids, *local_masses):
    """The pooled blocks' masses from the partitions' own blocks and those the boundary merge gave."""
    mass = np.empty(n_pooled)
    for first, masses in zip(first_ids, local_masses):
        mass[first:first + masses.size] = masses
    mass[given_id] = given_mass
    return mass


def _outer_of_sums(part, block_mass):
    """``sum_B S_B S_B^T / m(B)`` of the blocks' sums ``S_B`` in ``part`` (``(blocks, sums)``)."""
    block, sums = part
    return (sums.T / block_mass[block]) @ sums


# --------------------------------------------------------------------------- the driver's side


def _lazy_blocks(array):
    """The delayed chunks of a 1-d Dask array."""
    return list(array.to_delayed().ravel())


def _check_chunks(name, array, keys):
    if array.ndim != 1 or array.shape[0] != keys.shape[0]:
        raise ValueError(f"{name} must be a 1-d Dask array of the keys' length {keys.shape[0]}, "
                         f"got shape {array.shape}.")
    if array.chunks != keys.chunks:
        array = array.rechunk(keys.chunks)
    return array


class _Sorted:
    """A 1-d Dask array's rows sorted into partitions of global ranges, with their offsets.

    ``parts``: one delayed ``(keys, rows, *columns)`` per partition, persisted;
    ``cells``: per partition, what its slice of the rank weights needs.
    """

    def __init__(self, keys, columns, n_partitions, weighted):
        from dask import delayed

        if any(np.isnan(c) for c in keys.chunks[0]):
            raise ValueError("the keys have unknown chunk sizes (NaN); call keys.compute_chunk_sizes() "
                             "first.")
        self.chunks = tuple(int(c) for c in keys.chunks[0])
        self.ends = np.cumsum(self.chunks)
        self.n = int(self.ends[-1])
        n_chunks = len(self.chunks)
        if n_partitions is None:
            n_partitions = min(n_chunks, math.ceil(self.n / _PARTITION_ROWS))
        n_parts = max(1, min(int(n_partitions), self.n))
        offsets = self.ends - np.asarray(self.chunks)
        name = _unique("sort")
        blocks = [keys.__dask_keys__()] + [c.__dask_keys__() for c in columns]
        tasks = {(name, i): (_sort_chunk, int(offsets[i])) + tuple(b[i] for b in blocks)
                 for i in range(n_chunks)}
        chunks = _tasks(name, tasks, list(tasks), [keys, *columns])
        # the splitters: quantiles of a regular sample of each sorted chunk, as (key, row) pairs, sampled
        # in the submission that sorts the chunks
        per_chunk = max(2, math.ceil(_OVERSAMPLE * n_parts / n_chunks))
        chunks, samples = persist_and_fetch(chunks, [delayed(_sample)(c, per_chunk) for c in chunks])
        sample_key = np.concatenate([s[0] for s in samples])
        sample_row = np.concatenate([s[1] for s in samples])
        order = np.lexsort((sample_row, sample_key))
        pick = (np.arange(1, n_parts) * sample_key.size) // n_parts
        split_key, split_row = sample_key[order][pick], sample_row[order][pick]
        # the shuffle: each chunk cut by the splitters, each partition gathered from its pieces
        name = _unique("partition")
        tasks = {(name, "cut", i): (_split, c.key, split_key, split_row) for i, c in enumerate(chunks)}
        tasks.update({(name, "piece", i, p): (operator.getitem, (name, "cut", i), p)
                      for i in range(n_chunks) for p in range(n_parts)})
        tasks.update({(name, p): (_gather,) + tuple((name, "piece", i, p) for i in range(n_chunks))
                      for p in range(n_parts)})
        parts = _tasks(name, tasks, [(name, p) for p in range(n_parts)], list(chunks))
        # the partitions kept and their counts brought back in one submission
        counted = [delayed(_partition_stats)(p, weighted, len(columns) == 2) for p in parts]
        self.parts, stats = persist_and_fetch(parts, counted)
        stats = np.array(stats)
        self.n_parts = n_parts
        self.counts = stats[:, 0].astype(np.int64)
        self.starts = np.concatenate(([0], np.cumsum(self.counts)))
        if stats[:, 1].sum() > 0:
            raise ValueError("the keys contain NaN or infinity.")
        self.cells = [dict(start=int(self.starts[p]), n=self.n, weighted=weighted) for p in range(n_parts)]
        if weighted:
            self._weighted_cells(stats)

    def _weighted_cells(self, stats):
        import dask
        from dask import delayed

        if stats[:, 5].sum() > 0:
            raise ValueError("the masses and sample weights must be positive and finite.")
        total = math.fsum(stats[:, 2])
        largest = stats[self.counts > 0, 3].max()
        _, exponent = np.frexp(largest)
        if np.ldexp(stats[self.counts > 0, 4].min(), -exponent) > 0.0:
            n_samples = self.n
        else:  # some weights are no weight at the scale of the largest (skrank.risks: n_positive)
            n_samples = sum(dask.compute(*[delayed(_count_resolved)(p, exponent) for p in self.parts]))
        shares = stats[:, 2] / total
        for p, cell in enumerate(self.cells):
            cell.update(total=total, n_samples=n_samples, below=math.fsum(shares[:p]),
                        above=math.fsum(shares[p + 1:]))
        self.total, self.n_samples = total, n_samples


def sort_by_key(keys, *columns, n_partitions=None):
    """The rows sorted by ``(key, row)`` on the workers, with their positions, as Dask arrays.

    The sample sort of :class:`DaskSortedRankStep` (:ref:`the rank step on
    Dask workers <methods-partitioned-surrogates>`): ascending keys over the
    chunks of the result (every key of a chunk at most every key of the
    next), tied keys in the order of their rows.  The driver receives a
    sample of the keys and a few numbers per partition.

    Parameters
    ----------
    keys : dask.array.Array of shape (n,)
        Finite keys, known chunk sizes.
    *columns : dask.array.Array of shape (n,)
        Values that travel with the keys (as float64), rechunked like them.
    n_partitions : int, default=None
        The number of partitions (chunks of the result); None for one per
        ``2**20`` keys, at most one per chunk of ``keys``.

    Returns
    -------
    sorted_keys : dask.array.Array of shape (n,)
        Persisted, chunked by partition.
    rows : dask.array.Array of int64 of shape (n,)
        The position of each sorted key in ``keys``.
    *sorted_columns : dask.array.Array of shape (n,)
        The columns in the same order.
    """
    import dask.array as da
    from dask.highlevelgraph import HighLevelGraph

    if keys.ndim != 1:
        raise ValueError(f"keys must be a 1-d Dask array, got {keys.ndim} dimensions.")
    keys = keys.astype(np.float64)
    columns = [_check_chunks("a column", c, keys) for c in columns]
    sorted_ = _Sorted(keys, columns, n_partitions, False)
    chunks = (tuple(int(c) for c in sorted_.counts),)
    arrays = []
    for k in range(2 + len(columns)):
        name = _unique(f"sorted-{k}")
        layer = {(name, p): (operator.getitem, part.key, k) for p, part in enumerate(sorted_.parts)}
        graph = HighLevelGraph.from_collections(name, layer, dependencies=list(sorted_.parts))
        arrays.append(da.Array(graph, name, chunks=chunks, dtype=np.int64 if k == 1 else np.float64))
    return tuple(arrays)


class PooledBlocks:
    """The pooled blocks of a :meth:`DaskSortedRankStep.project` (blocks of more than one row).

    Blocks are numbered in the ascending order of the keys.

    Attributes
    ----------
    n_pooled : int
        The number of pooled blocks.
    block_id : dask.array.Array of shape (n,), int64
        Each row's pooled block, ``-1`` for a row alone in its block;
        chunked like the keys, persisted.
    """

    def __init__(self, n_pooled, block_id, given_mass, given_id, local_masses, first_ids):
        self.n_pooled = n_pooled
        self.block_id = block_id
        self._given = (np.asarray(given_mass, dtype=np.float64), np.asarray(given_id, dtype=np.int64))
        self._local = (local_masses, first_ids)
        self._block_mass = None

    @property
    def block_mass(self):
        """ndarray of shape (n_pooled,): each pooled block's mass (its row count without masses)."""
        if self._block_mass is None:
            import dask

            local_masses, first_ids = self._local
            self._block_mass = _masses_of_blocks(self.n_pooled, *self._given, first_ids,
                                                 *dask.compute(*local_masses))
        return self._block_mass

    def block_sums(self, V):
        """The sums of the rows of ``V`` over each pooled block.

        Each chunk sums its rows per block; the partial sums are added in a
        tree on the workers, so that the driver receives each block's sum
        once (``n_pooled x k`` numbers).

        Parameters
        ----------
        V : dask.array.Array of shape (n,) or (n, k)
            Rows aligned with the keys (rechunked to their chunks if needed).

        Returns
        -------
        ndarray of shape (n_pooled, k)
            Row ``B``: the sum of the rows of block ``B``.
        """
        import dask

        block, sums = dask.compute(self._summed(V))[0]
        if block.size == self.n_pooled:  # every block has rows: in order already
            return sums
        out = np.zeros((self.n_pooled, sums.shape[1]))
        out[block] = sums
        return out

    def block_outer(self, V):
        """``sum_B S_B S_B^T / m(B)`` over the pooled blocks, ``S_B`` the sum of the rows of ``V`` over ``B``.

        The term of the pooled blocks in the Hessian of the Newton model
        (subtracted from the members' Gram matrix), made on a worker from
        the blocks' sums: the driver receives ``k x k`` numbers, and sends
        the blocks' masses.

        Parameters
        ----------
        V : dask.array.Array of shape (n,) or (n, k)
            Rows aligned with the keys.

        Returns
        -------
        ndarray of shape (k, k)
            The sum over the blocks.
        """
        import dask

        return dask.compute(self.outer_task(V))[0]

    def outer_task(self, V):
        """:meth:`block_outer` as a delayed value, to be computed with other reductions in one round trip.

        The blocks' masses are made in the same task from the partitions'
        (unless :attr:`block_mass` has them already).  ``V`` may also be the
        list of the delayed chunks of its rows, chunked like the keys (made
        by the tasks of another reduction, which read ``X`` once for both).
        """
        from dask import delayed

        if self._block_mass is not None:
            return delayed(_outer_of_sums)(self._summed(V), self._block_mass)
        local_masses, first_ids = self._local
        mass = delayed(_masses_of_blocks, pure=True)(self.n_pooled, *self._given, list(first_ids),
                                                     *local_masses)
        return delayed(_outer_of_sums)(self._summed(V), mass)

    def _summed(self, V):
        """The delayed ``(blocks, sums)`` of the rows of ``V``, added in a tree on the workers."""
        from dask import delayed

        ids = self.block_id
        if isinstance(V, list):  # the delayed chunks, chunked like the keys
            rows = V
        else:
            if V.ndim == 1:
                V = V[:, None]
            if V.shape[0] != ids.shape[0]:
                raise ValueError(f"V must have the keys' {ids.shape[0]} rows, got shape {V.shape}.")
            V = V.rechunk((ids.chunks[0], -1))
            rows = list(V.to_delayed().ravel())
        parts = [delayed(_chunk_block_sums)(i, v) for i, v in zip(_lazy_blocks(ids), rows)]
        while len(parts) > 1:  # a tree on the workers: each block's sum is made once
            parts = [delayed(_add_block_sums)(*parts[k:k + 4]) for k in range(0, len(parts), 4)]
        return parts[0]


class DaskSortedRankStep(WorkerRankStep):
    """The rank step of a spectral risk (projection and value) for keys on Dask workers.

    Parameters
    ----------
    risk : skrank.risks.BaseRisk
        A risk whose weights follow from the ranks or the cells of mass
        (every risk but the human-aligned one, whose weights depend on the
        loss values).
    masses : dask.array.Array of shape (n,), optional
        Positive masses of the samples, chunked like the keys: the metric
        of the projection (``m`` of
        :func:`skrank.datafits.smoothed_risk.pooled_projection`).  None: one
        for every sample.
    sample_weight : dask.array.Array of shape (n,), optional
        The sample weights whose cells of mass give the rank weights
        (``risk.weights(n, sample_weight[order])``); default ``masses``.
        Only with ``masses``.
    n_partitions : int, optional
        Partitions of the sort; default one per 2^20 keys (at most one per
        chunk).  The shuffles cost ``chunks x partitions`` small tasks.

    Notes
    -----
    The user guide's :ref:`methods-dask-rank` describes the steps and why
    the result is the in-memory projection.
    """

    def __init__(self, risk, masses=None, sample_weight=None, n_partitions=None):
        if risk.depends_on_values:
            raise ValueError(f"risk {risk!r} has weights that depend on the loss values: a sorted rank "
                             f"step needs weights given by the ranks (a spectral risk).")
        if sample_weight is not None and masses is None:
            raise ValueError("sample_weight needs masses: pass the masses of the projection's metric too.")
        if n_partitions is not None and not (isinstance(n_partitions, (int, np.integer))
                                             and n_partitions >= 1):
            raise ValueError(f"n_partitions must be a positive integer or None, got {n_partitions!r}.")
        self.risk = risk
        self.masses = masses
        self.sample_weight = sample_weight
        self.n_partitions = n_partitions

    def _columns(self, keys):
        """The columns that travel with the keys: ``[masses, sample_weight]``, the weights last."""
        if self.masses is None:
            return []
        columns = [_check_chunks("masses", self.masses, keys)]
        if self.sample_weight is not None and self.sample_weight is not self.masses:
            columns.append(_check_chunks("sample_weight", self.sample_weight, keys))
        return columns

    def _sorted(self, keys):
        if keys.ndim != 1:
            raise ValueError(f"keys must be a 1-d Dask array, got {keys.ndim} dimensions.")
        if keys.dtype != np.float64:
            keys = keys.astype(np.float64)
        sorted_ = _Sorted(keys, self._columns(keys), self.n_partitions, self.masses is not None)
        self._check_counts(sorted_)
        return sorted_

    def _check_counts(self, sorted_):
        """Raise on the driver what the workers' rank weights would raise (a count above ``n``, say)."""
        if self.masses is None:
            self.risk.weights_slice(sorted_.n, 0, 0)
        else:
            self.risk.cell_weights(np.zeros(0), np.zeros(1), np.ones(1), sorted_.total, sorted_.n_samples)

    def risk_value(self, losses, pooled=None):
        """``Omega(losses) = sum_i sigma_i l_(i)``, the (weighted) risk of the losses.

        Parameters
        ----------
        losses : dask.array.Array of shape (n,)
            The losses, chunked like the masses.
        pooled : object, optional
            Ignored (a projection's record).

        Returns
        -------
        float
            The risk, summed per partition and then exactly rounded.
        """
        import dask
        from dask import delayed

        sorted_ = self._sorted(losses)
        values = dask.compute(*[delayed(_partition_value)(p, self.risk, c)
                                for p, c in zip(sorted_.parts, sorted_.cells)])
        return math.fsum(values)

    def project(self, keys, mu):
        """``q = proj_P(keys / mu)`` where the keys live, and the pooled blocks.

        Parameters
        ----------
        keys : dask.array.Array of shape (n,)
            The point times ``mu``, chunked by rows.
        mu : float
            The smoothing, ``mu > 0``.

        Returns
        -------
        q : dask.array.Array of shape (n,)
            The projection in the keys' rows and chunks, persisted.
        pooled : PooledBlocks
            The pooled blocks of the projection's isotonic regression.
        """
        from dask import delayed

        mu = float(mu)
        if not (mu > 0.0 and np.isfinite(mu)):
            raise ValueError(f"mu must be positive and finite, got {mu}.")
        sorted_ = self._sorted(keys)
        locals_ = [delayed(_local_pava)(p, self.risk, c, mu) for p, c in zip(sorted_.parts, sorted_.cells)]
        # the stacks kept and their first summaries brought back in one submission
        locals_, summaries = persist_and_fetch(locals_, _summaries(sorted_, locals_, [_FIRST_SUMMARY]
                                                                   * sorted_.n_parts))
        merge = _merge_boundaries(sorted_, locals_, summaries)
        written = [delayed(_write)(p, loc, c, mu, merge.given[k], merge.first_id[k])
                   for k, (p, loc, c) in enumerate(zip(sorted_.parts, locals_, sorted_.cells))]
        q, ids, local_masses = _back_to_chunks(sorted_, written)
        pooled = PooledBlocks(merge.n_pooled, ids, merge.given_mass, merge.given_id, local_masses,
                              merge.first_id)
        return q, pooled


    def block_terms(self, q, pooled, slopes):
        """The pooled blocks' term of the Newton model ``(h_block, (v, reduce), finish)``, or None.

        ``h_block = m g^2``, ``v = m g`` (``g = slopes(None)``) on the pooled
        rows, 0 elsewhere; ``reduce`` makes ``sum_B S_B S_B^T / m(B)``
        (:meth:`PooledBlocks.outer_task`), which ``finish`` keeps.
        """
        if pooled.n_pooled == 0:
            return None
        inside = pooled.block_id >= 0
        member = inside.astype(np.float64) if self.masses is None else self.masses * inside
        coef = slopes(None)
        return member * coef * coef, (member * coef, pooled.outer_task), lambda outer: outer


def _back_to_chunks(sorted_, written):
    """``q`` and the block ids in the keys' rows and chunks, and the partitions' own pooled masses."""
    import dask
    import dask.array as da
    from dask.highlevelgraph import HighLevelGraph

    n_chunks, n_parts = len(sorted_.chunks), sorted_.n_parts
    offsets = sorted_.ends - np.asarray(sorted_.chunks)
    name = _unique("unshuffle")
    tasks = {(name, "cut", p): (_to_chunks, w.key, sorted_.ends) for p, w in enumerate(written)}
    tasks.update({(name, "piece", p, c): (operator.getitem, (name, "cut", p), c)
                  for p in range(n_parts) for c in range(n_chunks)})
    tasks.update({(name, "chunk", c): (_assemble, int(offsets[c]), sorted_.chunks[c])
                  + tuple((name, "piece", p, c) for p in range(n_parts)) for c in range(n_chunks)})
    graph = HighLevelGraph.from_collections(name, tasks, dependencies=list(written))
    arrays = []
    for k, dtype in enumerate((np.float64, np.int64)):
        out = f"{name}-{k}"
        layer = {(out, c): (operator.getitem, (name, "chunk", c), k) for c in range(n_chunks)}
        with_out = HighLevelGraph({**graph.layers, out: layer}, {**graph.dependencies, out: {name}})
        arrays.append(da.Array(with_out, out, chunks=(sorted_.chunks,), dtype=dtype))
    name_m = _unique("masses")
    local_masses = _tasks(name_m, {(name_m, p): (operator.getitem, w.key, 3) for p, w in enumerate(written)},
                          [(name_m, p) for p in range(n_parts)], list(written))
    q, ids, *local_masses = dask.persist(*arrays, *local_masses)
    return q, ids, local_masses


def _unique(what):
    return f"skrank-rank-{what}-{uuid.uuid4().hex}"


def _tasks(name, tasks, outputs, dependencies):
    """Delayed objects of the keys ``outputs`` of the graph ``tasks`` over the collections given."""
    from dask.delayed import Delayed
    from dask.highlevelgraph import HighLevelGraph

    graph = HighLevelGraph.from_collections(name, tasks, dependencies=dependencies)
    return [Delayed(key, graph, layer=name) for key in outputs]


# --------------------------------------------------------------------------- the merge across partitions


class _Merge:
    """The pooled blocks across partitions: per partition its given blocks and its first own block id."""

    def __init__(self, n_parts):
        self.given = [dict(lo=[], hi=[], su=[], ss=[], mass=[], id=[]) for _ in range(n_parts)]
        self.first_id = [0] * n_parts
        self.given_mass, self.given_id = [], []
        self.n_pooled = 0


class _NeedMore(Exception):
    """A partition's summaries ended before the pooling across its boundary did."""

    def __init__(self, partition):
        super().__init__(partition)
        self.partition = partition


# a stack entry: [sum, mass, size, sum m u, sum sigma, first (partition, block), last (partition, block)]
_MIDDLE = "middle"


def _violates(below, above):
    """Whether the block ``below`` has a mean at least that of the next block ``above`` (they pool)."""
    return below[0] * above[1] >= above[0] * below[1]


def _pooled_entry(below, above):
    return [below[0] + above[0], below[1] + above[1], below[2] + above[2], below[3] + above[3],
            below[4] + above[4], below[5], above[6]]


def _push(stack, entry):
    """Push one block, pooling it with the blocks below while they violate; whether it pooled."""
    pooled = False
    while stack:
        top = stack[-1]
        if top[0] is _MIDDLE:  # every summarised block above it pooled: its own last block is needed
            raise _NeedMore(top[1])
        if not _violates(top, entry):
            break
        stack.pop()
        entry = _pooled_entry(top, entry)
        pooled = True
    stack.append(entry)
    return pooled


def _stack_partition(stack, p, s):
    """Push partition ``p``'s blocks (summaries ``s``) on the global PAVA stack; may raise ``_NeedMore``."""
    entries = [list(row) + [(p, int(b)), (p, int(b))] for row, b in zip(s["table"], s["index"])]
    if s["complete"]:
        for entry in entries:
            _push(stack, entry)
        return
    count = len(entries) // 2
    settled = False
    for entry in entries[:count]:
        if settled:  # the blocks above one that did not pool keep their increasing means
            stack.append(entry)
        else:
            settled = not _push(stack, entry)
    if not settled:
        raise _NeedMore(p)
    known = sum(1 for row in s["table"] if row[2] > 1)
    stack.append([_MIDDLE, p, s["n_pooled"] - known])
    stack.extend(entries[count:])


def _stack_partitions(summaries):
    """The global PAVA stack from the partitions' summaries, or the partitions that must send more.

    After a partition that must send more, the stack starts afresh, so that
    one pass finds the others too (the final pass has none).
    """
    stack, more = [], set()
    for p, s in enumerate(summaries):
        if s["n_blocks"] == 0:
            continue
        try:
            _stack_partition(stack, p, s)
        except _NeedMore as need:
            more.add(need.partition)
            stack = []
    return stack, sorted(more)


def _number_blocks(stack, summaries, merge):
    """Number the pooled blocks in order and tell each partition its blocks pooled across a boundary."""
    next_id = 0
    for entry in stack:
        if entry[0] is _MIDDLE:
            if merge.first_id[entry[1]] is None:
                merge.first_id[entry[1]] = next_id
            next_id += entry[2]
            continue
        (p0, b0), (p1, b1) = entry[5], entry[6]
        if entry[2] > 1 and (p0, b0) == (p1, b1):  # a partition's own pooled block
            if merge.first_id[p0] is None:
                merge.first_id[p0] = next_id
            next_id += 1
            continue
        if (p0, b0) == (p1, b1):
            continue
        for p in range(p0, p1 + 1):
            nb = summaries[p]["n_blocks"]
            if nb == 0:
                continue
            given = merge.given[p]
            given["lo"].append(b0 if p == p0 else 0)
            given["hi"].append(b1 + 1 if p == p1 else nb)
            for key, value in zip(("su", "ss", "mass", "id"), (entry[3], entry[4], entry[1], next_id)):
                given[key].append(value)
        merge.given_mass.append(entry[1])
        merge.given_id.append(next_id)
        next_id += 1
    merge.n_pooled = next_id


def _summaries(sorted_, locals_, counts, which=None):
    """The delayed summaries (:func:`_summary`) of the partitions ``which`` (default all)."""
    from dask import delayed

    which = range(sorted_.n_parts) if which is None else which
    return [delayed(_summary)(sorted_.parts[p], locals_[p], sorted_.cells[p], counts[p]) for p in which]


def _merge_boundaries(sorted_, locals_, summaries):
    """Pool the partitions' blocks across their boundaries: a :class:`_Merge`.

    ``summaries``: every partition's first summary (of ``_FIRST_SUMMARY``
    blocks at each end); a partition whose summary is too short is asked
    for a longer one.
    """
    import dask

    counts = [_FIRST_SUMMARY] * sorted_.n_parts
    summaries = list(summaries)
    while True:
        stack, stale = _stack_partitions(summaries)
        if not stale:
            break
        for p in stale:
            counts[p] *= 4
        for p, s in zip(stale, dask.compute(*_summaries(sorted_, locals_, counts, stale))):
            summaries[p] = s
    merge = _Merge(sorted_.n_parts)
    merge.first_id = [None] * sorted_.n_parts
    _number_blocks(stack, summaries, merge)
    # a partition without pooled blocks of its own numbers none: any first id does
    merge.first_id = [0 if f is None else f for f in merge.first_id]
    for given in merge.given:
        for key in ("lo", "hi", "id"):
            given[key] = np.asarray(given[key], dtype=np.int64)
        for key in ("su", "ss", "mass"):
            given[key] = np.asarray(given[key], dtype=np.float64)
    return merge
