"""The rank step of a spectral risk on Dask workers: the driving process's memory, and its time.

:class:`skrank.backends.dask_rank.DaskSortedRankStep` projects ``keys / mu``
onto the permutahedron of the risk's weights where the keys live (a sample
sort, PAVA per partition, the blocks merged across partitions from a few
numbers each).  On a ``LocalCluster`` of two worker processes (one thread
each) this script makes ``--n`` keys (standard normal, persisted on the
workers), chunked like a ``--n x --columns`` float64 ``X`` in row chunks of
each ``--chunk-mb`` (``--chunks-of keys``: the keys themselves in chunks of
that size), and prints per chunk size:

* ``project s``: seconds of one ``project`` (median of ``--repeats``,
  after one run that compiles the workers' kernels), ``q`` persisted on
  the workers; ``value s``: one ``risk_value`` of the keys;
* ``X @ w s``: one pass ``X @ w`` over the persisted ``X`` of the same row
  chunks, and the ratio of the two;
* ``driver MB``: the peak growth of the driving process's resident memory
  (RSS sampled every 2 ms by a thread, peak minus the RSS on entry, after
  a garbage collection) over the timed projections: what the driver holds
  of the ``n`` rows (nothing: splitters, block summaries, the graph);
* ``sums s`` and ``sums MB``: one ``block_sums(X)`` (the pooled blocks'
  sums of the rows of ``X``, ``pooled x columns`` numbers that the driver
  receives) and the driver's peak growth during it; ``outer s`` and
  ``outer MB`` the same for one ``block_outer(X)`` (``sum_B S_B S_B^T /
  m(B)``, made on a worker: ``columns x columns`` numbers come back);
* ``partitions`` and ``pooled``: the sort's partitions and the pooled
  blocks of the projection (``mu`` is ``--mu`` times ``n``: with keys of
  unit spread, the top of the exponential spectrum pools many rows).

    OMP_NUM_THREADS=1 python benchmarks/dask_rank_memory.py
    OMP_NUM_THREADS=1 python benchmarks/dask_rank_memory.py --chunks-of keys --chunk-mb 8
"""

import argparse
import logging
import math
import sys
import time

import numpy as np
from _memory import PeakMemory


def _median_seconds(run, repeats):
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return float(np.median(times))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=float, default=4e6)
    parser.add_argument("--columns", type=int, default=20)
    parser.add_argument("--chunk-mb", type=float, nargs="+", default=[8.0, 40.0])
    parser.add_argument("--chunks-of", choices=["X", "keys"], default="X")
    parser.add_argument("--mu", type=float, default=0.1,
                        help="the smoothing over n (keys of unit spread: many rows pooled)")
    parser.add_argument("--partitions", type=int, default=None, help="of the sort (default: the step's)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--weighted", action="store_true", help="with sample masses")
    args = parser.parse_args(argv)

    import distributed

    from skrank.backends.dask_rank import DaskSortedRankStep
    from skrank.risks import ExponentialSpectral

    n = int(args.n)
    mu = args.mu * n
    risk = ExponentialSpectral(rho=5.0)
    print(f"n = {n}, {risk!r}, mu = {args.mu:g} n, {'masses' if args.weighted else 'no masses'}; "
          f"2 worker processes x 1 thread; chunks of {args.chunks_of}")
    print("command: OMP_NUM_THREADS=1 python " + " ".join(["benchmarks/dask_rank_memory.py"] + sys.argv[1:]))
    header = (f"{'chunk MB':>9} {'rows/chunk':>10} {'chunks':>6} {'partitions':>10} {'project s':>10} "
              f"{'value s':>8} {'X @ w s':>8} {'ratio':>6} {'driver MB':>10} {'pooled':>8} "
              f"{'sums s':>7} {'sums MB':>8} {'outer s':>8} {'outer MB':>9}")
    cluster_options = dict(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0",
                           memory_limit="6GB", silence_logs=logging.CRITICAL)
    with distributed.LocalCluster(**cluster_options) as cluster, distributed.Client(cluster):
        print(header)
        for mb in args.chunk_mb:
            row_bytes = 8 * (args.columns if args.chunks_of == "X" else 1)
            rows = min(n, max(1, int(mb * 1e6 // row_bytes)))
            print(_one_size(DaskSortedRankStep, risk, n, rows, mu, args), flush=True)


def _one_size(step_class, risk, n, rows, mu, args):
    """One line of the table: keys and ``X`` in chunks of ``rows`` rows."""
    import dask.array as da
    import distributed

    from skrank.backends.dask_rank import _PARTITION_ROWS

    rng = da.random.default_rng(0)
    keys = rng.standard_normal(n, chunks=rows).persist()
    masses = rng.uniform(0.5, 2.0, n, chunks=rows).persist() if args.weighted else None
    X = da.random.default_rng(1).standard_normal((n, args.columns), chunks=(rows, args.columns)).persist()
    w = np.random.default_rng(2).standard_normal(args.columns)
    distributed.wait([keys, X] + ([masses] if masses is not None else []))
    step = step_class(risk, masses, n_partitions=args.partitions)
    step.project(keys, mu)  # compiles the kernels on the workers
    (X @ w).compute()
    holder = {}

    def project():
        holder["q"], holder["pooled"] = step.project(keys, mu)
        distributed.wait(holder["q"])

    with PeakMemory(every=0.002) as memory:
        seconds = _median_seconds(project, args.repeats)
        value_seconds = _median_seconds(lambda: step.risk_value(keys), 1)
    product = _median_seconds(lambda: (X @ w).compute(), args.repeats)
    with PeakMemory(every=0.002) as sums_memory:
        sums_seconds = _median_seconds(lambda: holder["pooled"].block_sums(X), 1)
    with PeakMemory(every=0.002) as outer_memory:
        outer_seconds = _median_seconds(lambda: holder["pooled"].block_outer(X), 1)
    n_chunks = len(keys.chunks[0])
    n_parts = min(n_chunks, math.ceil(n / _PARTITION_ROWS)) if args.partitions is None else args.partitions
    megabytes = rows * 8 * (args.columns if args.chunks_of == "X" else 1) / 1e6
    pooled = holder["pooled"].n_pooled
    return (f"{megabytes:9.0f} {rows:10d} {n_chunks:6d} {n_parts:10d} {seconds:10.2f} {value_seconds:8.2f} "
            f"{product:8.2f} {seconds / product:6.1f} {memory.growth / 1e6:10.1f} {pooled:8d} "
            f"{sums_seconds:7.2f} {sums_memory.growth / 1e6:8.1f} {outer_seconds:8.2f} "
            f"{outer_memory.growth / 1e6:9.1f}")


if __name__ == "__main__":
    main()
