"""The driving process's memory while the ranking classifiers fit a Dask array on a cluster.

Fits ``PartialAUCClassifier()``, ``PartialAUCClassifier(tpr_min=0.5)`` and
``AveragePrecisionClassifier()`` on a lazy ``n x d`` array generated on the
workers of a ``LocalCluster`` of worker processes (``y`` computed there
too), and prints, per estimator and chunk size, the growth of the driving
process's RSS over its RSS before the fit (sampled every 10 ms by a
thread) and the seconds of the fit.

Usage::

    OMP_NUM_THREADS=1 python benchmarks/dask_ranking_memory.py --n 4e6 --d 20 --chunk-mb 8,40
"""

import argparse
import time

import numpy as np
from _memory import PeakMemory


def _block(block_id, rows, d, seed):
    rng = np.random.default_rng([seed, block_id[0]])
    return rng.standard_normal((rows, d))


def _labels(block, direction):
    rng = np.random.default_rng(int(abs(block[0, 0]) * 1e6) % 2**32)
    return np.where(block @ direction + rng.standard_normal(block.shape[0]) > 1.0, 1, 0)


def data(n, d, rows, seed=0):
    """A lazy ``X`` drawn chunk by chunk and its labels, both computed where the chunks are."""
    import dask.array as da

    n_chunks = -(-n // rows)
    chunks = tuple(min(rows, n - c * rows) for c in range(n_chunks))
    X = da.map_blocks(lambda block_id=None: _block(block_id, chunks[block_id[0]], d, seed),
                      chunks=(chunks, (d,)), dtype=np.float64)
    direction = np.linspace(-1.0, 1.0, d)
    y = X.map_blocks(_labels, direction, drop_axis=1, dtype=np.int64)
    return X, y


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=float, default=4e6)
    parser.add_argument("--d", type=int, default=20)
    parser.add_argument("--chunk-mb", default="8,40", help="chunk sizes of X in MB, comma-separated")
    parser.add_argument("--estimators", default="pauc,pauc2,ap")
    args = parser.parse_args()
    import distributed

    from skrank.estimators import AveragePrecisionClassifier, PartialAUCClassifier

    make = {"pauc": ("PartialAUCClassifier()", PartialAUCClassifier),
            "pauc2": ("PartialAUCClassifier(tpr_min=0.5)", lambda: PartialAUCClassifier(tpr_min=0.5)),
            "ap": ("AveragePrecisionClassifier()", AveragePrecisionClassifier)}
    n, d = int(args.n), args.d
    rows_out = []
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=":0") as cluster, distributed.Client(cluster):
        for mb in (float(m) for m in args.chunk_mb.split(",")):
            rows = max(1, int(mb * 1e6 / (8 * d)))
            X, y = data(n, d, rows)
            for key in args.estimators.split(","):
                label, factory = make[key]
                estimator = factory()
                start = time.perf_counter()
                with PeakMemory() as memory:
                    estimator.fit(X, y)
                seconds = time.perf_counter() - start
                rows_out.append((label, mb, X.numblocks[0], memory.growth / 2**20, seconds,
                                 estimator.n_iter_))
                growth = memory.growth / 2**20
                print(f"{label:36s} {mb:5g} MB  {X.numblocks[0]:4d} chunks  driver +{growth:7.1f} MiB  "
                      f"{seconds:8.1f} s  {estimator.n_iter_} iterations", flush=True)
    print()
    print(f"n x d = {n} x {d}")
    print("estimator | chunk MB | chunks | driver RSS growth (MiB) | seconds | iterations")
    for row in rows_out:
        print(f"{row[0]} | {row[1]:g} | {row[2]} | {row[3]:.1f} | {row[4]:.1f} | {row[5]}")


if __name__ == "__main__":
    main()
