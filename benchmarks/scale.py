"""The superquantile classifier on NumPy and on Dask arrays, from 10^4 rows up.

For each size ``n x 100`` (synthetic, ``y = 1(x . w + noise > 0)``, ``x`` and the
noise standard normal, ``||w|| = 10 sqrt(1/3)``), ``RankADMMClassifier(risk=
Superquantile(q=0.8), alpha=1e-3)`` (the certified Newton method), and backend:

* ``numpy``: the array in memory;
* ``dask``: the same array as a Dask array in memory, chunked by rows (threaded scheduler);
* ``dask-lazy``: a Dask array whose chunks are generated at each pass
  (``dask.array.random``), never held whole: the out-of-core case;
* ``cluster``: ``dask`` on a ``dask.distributed.LocalCluster`` of 2 workers (``--cluster``).

Per fit: seconds, passes over the data (products with ``[X, 1]`` or its
transpose, a Gram matrix counted as one), seconds per pass, the ratio of a
pass to one plain ``X @ w`` plus ``X.T @ r`` on the same backend, the peak
of the memory allocated in this process during the fit (``tracemalloc``:
NumPy arrays and Dask's chunks in the threaded scheduler; the cluster's
workers are not counted), and the objective's relative gap to the NumPy fit.

    OMP_NUM_THREADS=1 python benchmarks/scale.py --sizes 1e4,1e5,1e6 [--cluster] [--lazy-only 1e7]
"""

import argparse
import time
import tracemalloc
import warnings

import numpy as np

from skrank.estimators import RankADMMClassifier
from skrank.risks import Superquantile

_D = 100
_CHUNK_ROWS = 50_000


def _lazy(n, seed=0):
    import dask.array as da

    rows = min(_CHUNK_ROWS, n)
    return da.random.RandomState(seed).standard_normal(size=(n, _D), chunks=(rows, _D))


def _labels(X, seed=0):
    # a clear signal: with noisier labels the superquantile at 0.8 drives w to 0 (every loss
    # log 2), a degenerate optimum that is no test of scale
    w = 10.0 * np.linspace(-1.0, 1.0, _D) / np.sqrt(_D)
    f = X @ w
    f = f.compute() if hasattr(f, "compute") else f
    return (f + np.random.default_rng(seed).normal(size=f.shape[0]) > 0.0).astype(int)


def _plain_pass(X):
    w, r = np.ones(X.shape[1]), np.ones(X.shape[0])
    start = time.perf_counter()
    if hasattr(X, "compute"):
        import dask
        import dask.array as da

        dask.compute(X @ w, X.T @ da.from_array(r, chunks=X.chunks[0]))
    else:
        X @ w, X.T @ r
    return time.perf_counter() - start


def _fit(X, y):
    est = RankADMMClassifier(risk=Superquantile(q=0.8), alpha=1e-3)
    tracemalloc.start()
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est.fit(X, y)
    seconds = time.perf_counter() - start
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return est, seconds, peak


def _row(n, backend, X, y, reference):
    est, seconds, peak = _fit(X, y)
    passes = int(est._last_result_info.get("passes", 0))
    per_pass = seconds / max(passes, 1)
    plain = _plain_pass(X)
    gap = "-" if reference is None else f"{abs(est.objective_ - reference) / abs(reference):.1e}"
    certified = "yes" if est._last_result_info.get("certified") else "no"
    print(f"| {n:.0e} | {backend} | {seconds:.2f} | {passes} | {per_pass:.3g} | {per_pass / plain:.2g} | "
          f"{peak / 2**20:.0f} | {n * _D * 8 / 2**20:.0f} | {gap} | {est.n_iter_} | {certified} |",
          flush=True)
    return est


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1e4,1e5,1e6")
    parser.add_argument("--cluster", action="store_true", help="add a 2-worker LocalCluster")
    parser.add_argument("--lazy-only", default="", help="sizes fitted out of core only (e.g. 1e7)")
    args = parser.parse_args()
    import dask
    import dask.array as da

    print("| n | backend | seconds | passes | s per pass | pass / plain pass | peak MiB | X MiB "
          "| gap to numpy | Newton steps | certified |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for n in [int(float(s)) for s in args.sizes.split(",") if s]:
        lazy = _lazy(n)
        X = lazy.compute()
        y = _labels(X)
        ref = _row(n, "numpy", X, y, None).objective_
        _row(n, "dask", da.from_array(X, chunks=(min(_CHUNK_ROWS, n), _D)), y, ref)
        del X
        with dask.config.set(scheduler="threads"):
            _row(n, "dask-lazy", lazy, y, ref)
        if args.cluster:
            from distributed import Client, LocalCluster

            with LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=None) as cluster, \
                    Client(cluster):
                _row(n, "cluster", lazy, y, ref)
    for n in [int(float(s)) for s in args.lazy_only.split(",") if s]:
        lazy = _lazy(n)
        with dask.config.set(scheduler="threads"):
            y = _labels(lazy)
            _row(n, "dask-lazy", lazy, y, None)
    command = "OMP_NUM_THREADS=1 python benchmarks/scale.py --sizes " + args.sizes
    command += " --cluster" if args.cluster else ""
    command += f" --lazy-only {args.lazy_only}" if args.lazy_only else ""
    print("\ncommand: " + command)


if __name__ == "__main__":
    main()
