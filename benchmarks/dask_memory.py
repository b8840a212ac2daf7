"""The driving process's memory and the time per Newton step of the certified fits on a Dask cluster.

A lazy ``n x 20`` standard normal array, generated chunk by chunk on the
workers of a ``LocalCluster`` of 2 worker processes of one thread each, is
fitted by ``RankADMMClassifier()``, ``SpectralRiskClassifier()`` and
``SpectralRiskClassifier(risk=...)`` for each spectral risk; the labels are
computed on the workers from their chunks.  Per fit the table gives the
peak growth of this process's resident memory (sampled every 10 ms by a
thread, from a baseline taken after a garbage collection), the fit's time,
its Newton steps, the compute/persist calls sent to the scheduler
(round trips), the passes over ``X`` (products with ``[X, 1]`` or its
transpose, a weighted Gram matrix counted as one) per Newton step, and the
time per Newton step against one plain pass ``X w`` plus ``X^T r`` over the
same lazy array (the mean of one pass just before the fit and one just after).

Usage::

    python benchmarks/dask_memory.py [--rows 4e6] [--chunk-mb 8,40] [--fits default,erm,...]
"""

import argparse
import sys
import time

import numpy as np
from _memory import PeakMemory

_D = 20
_FITS = ("admm", "default", "erm", "superquantile", "extremile", "exponential", "topk")


def _estimator(name):
    from skrank.estimators import RankADMMClassifier, SpectralRiskClassifier
    from skrank.risks import ERM, ExponentialSpectral, Extremile, Superquantile, TopK

    risks = dict(erm=ERM(), superquantile=Superquantile(q=0.5), extremile=Extremile(r=2.0),
                 exponential=ExponentialSpectral(rho=2.0), topk=TopK(k=0.2))
    if name == "admm":
        return RankADMMClassifier()
    if name == "default":
        return SpectralRiskClassifier()
    return SpectralRiskClassifier(risk=risks[name])


class _RoundTrips:
    """Counts the graphs the client sends to the scheduler (each ``compute``, ``persist``, ``gather``)."""

    def __init__(self):
        import distributed

        self.count, self._client_class = 0, distributed.Client
        self._original = distributed.Client._graph_to_futures

    def __enter__(self):
        original = self._original

        def counted(client, *args, **kwargs):
            self.count += 1
            return original(client, *args, **kwargs)

        self._client_class._graph_to_futures = counted
        return self

    def __exit__(self, *exc):
        self._client_class._graph_to_futures = self._original


def _data(n, chunk_mb):
    import dask.array as da

    rows = max(int(chunk_mb * 2**20 / (8 * _D)), 1)
    X = da.random.RandomState(0).standard_normal(size=(n, _D), chunks=(rows, _D))
    w = 10.0 * np.linspace(-1.0, 1.0, _D) / np.sqrt(_D)

    def labels(x, block_info=None):
        rng = np.random.default_rng([block_info[0]["chunk-location"][0], 2])
        return (x @ w + rng.normal(size=x.shape[0]) > 0.0).astype(np.int64)

    return X, X.map_blocks(labels, drop_axis=1, dtype=np.int64)


def _plain_pass(X):
    import dask
    import dask.array as da

    start = time.perf_counter()
    dask.compute(X @ np.ones(X.shape[1]), X.T @ da.ones(X.shape[0], chunks=X.chunks[0]))
    return time.perf_counter() - start


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=float, default=4e6)
    parser.add_argument("--chunk-mb", default="8,40", help="chunk sizes of X in MB, comma-separated")
    parser.add_argument("--fits", default=",".join(_FITS), help=f"of {', '.join(_FITS)}")
    args = parser.parse_args()
    from distributed import Client, LocalCluster

    n = int(args.rows)
    print(f"# python benchmarks/dask_memory.py --rows {args.rows:g} --chunk-mb {args.chunk_mb} "
          f"--fits {args.fits}")
    print(f"{'fit':<14}{'chunk MB':>9}{'driver MB':>11}{'fit s':>8}{'steps':>7}{'trips':>7}"
          f"{'passes':>8}{'s/step':>8}{'pass s':>8}{'ratio':>7}")
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0") as cluster, \
            Client(cluster):
        for chunk_mb in (float(c) for c in args.chunk_mb.split(",")):
            X, y = _data(n, chunk_mb)
            _plain_pass(X)  # the workers warmed up
            for name in args.fits.split(","):
                est = _estimator(name)
                before = _plain_pass(X)
                with PeakMemory() as memory, _RoundTrips() as trips:
                    start = time.perf_counter()
                    est.fit(X, y)
                    seconds = time.perf_counter() - start
                # on a shared machine the load moves: the plain pass is measured on both sides of the fit
                plain = 0.5 * (before + _plain_pass(X))
                steps = max(int(np.sum(est.n_iter_)), 1)
                passes = int(getattr(est, "_last_result_info", {}).get("passes", 0))
                growth = (memory.peak - memory.before) / 2**20
                print(f"{name:<14}{chunk_mb:>9g}{growth:>11.0f}{seconds:>8.1f}{steps:>7d}{trips.count:>7d}"
                      f"{passes / steps:>8.1f}{seconds / steps:>8.2f}{plain:>8.2f}"
                      f"{seconds / steps / plain:>7.1f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
