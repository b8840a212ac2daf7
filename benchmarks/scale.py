"""A certified superquantile fit on NumPy, Dask and GPU (CuPy) arrays, from 10^4 rows up.

Data (``--data``), ``n`` rows:

* ``classification`` (default): ``n x 100`` synthetic (``--columns`` other than 100; chunks of
  50,000 rows, 40 MB, or of 40 MB for fewer columns),
  ``y = 1(x . w + noise > 0)``, ``x`` and the noise standard normal, ``||w|| = 10 sqrt(1/3)``;
* ``regression``: the same ``x``, ``y = x . w + noise`` with Student-t(3) noise;
* ``real:NAME``: a curated real table of :mod:`skrank.datasets` (``real:lending_club``,
  9,857 x 114), standardised and replicated to ``n`` rows: each row a random row of
  the table plus Gaussian noise of standard deviation 0.1 per column, its label
  the row's.

The fit is ``RankADMMClassifier`` or ``RankADMMRegressor`` with
``risk=Superquantile(q=0.8), alpha=1e-3`` (the certified Newton method), on
each backend:

* ``numpy``: the array in memory;
* ``dask``: the same array as a Dask array in memory, chunked by rows (threaded scheduler);
* ``dask-lazy``: a Dask array whose chunks are generated at each pass, never
  held whole: the out-of-core case;
* ``cluster``: ``dask-lazy`` on a ``dask.distributed.LocalCluster`` of 2 worker processes of one
  thread each (``--cluster``, or ``cluster`` in ``--backends``): the chunks are generated on the
  workers, and only vectors of length ``n`` or ``d`` travel to and from this process (the driver,
  which runs the cluster's scheduler too);
* ``cupy``: the array on a GPU, with scikit-learn's array API dispatch
  (``--gpu``; skipped, with a line that says so, without CuPy and a GPU).

Per fit: seconds; passes over the data (products with ``[X, 1]`` or its
transpose, a Gram matrix counted as one); seconds per pass; the ratio of a
pass to one plain ``X @ w`` plus ``X.T @ r`` on the same backend; the share
of the fit spent outside the products with ``X`` (the rank steps, sorts and
PAVAs of ``n`` losses, and the vector arithmetic, all on the host: what a
faster backend for ``X`` cannot speed up); the peak of the memory allocated
in this process during the fit (``tracemalloc``: NumPy arrays and Dask's
chunks in the threaded scheduler; neither the cluster's workers nor the GPU
are counted); the objective's relative gap to the NumPy fit; Newton steps;
whether the fit certified its optimality.

With ``--driver-memory``, three more columns split the memory between the
driver and the cluster's workers: the growth of this process's resident
memory during the fit (RSS sampled every 10 ms by a thread, its peak minus
the RSS just before the fit: what ``tracemalloc`` sees plus what it does
not, such as the interpreter's free lists and the scheduler's messages;
``tracemalloc`` is then off, its ``peak MiB`` a ``-``, since its records
of each live allocation would count in the RSS); the peak of the summed RSS of the cluster's worker processes
during the fit, and their summed RSS just before it (``-`` off the
cluster).  ``X`` is then not held in memory unless a backend needs it
(``numpy``, ``dask`` or ``cupy``), and the ``cluster`` rows take ``y`` as a
lazy Dask array that the workers compute from their chunks, so that
``--backends cluster --driver-memory`` fits sizes beyond this machine's
memory with neither ``X`` nor ``y`` in the driver.

    OMP_NUM_THREADS=1 python benchmarks/scale.py --sizes 1e4,1e5,1e6 [--data regression]
        [--backends numpy,dask,dask-lazy,cluster] [--cluster] [--gpu] [--lazy-only 1e7]
        [--driver-memory] [--columns 100]
"""

import os

os.environ.setdefault("SCIPY_ARRAY_API", "1")  # for scikit-learn's array API dispatch (--gpu)

import argparse  # noqa: E402
import functools  # noqa: E402
import time  # noqa: E402
import tracemalloc  # noqa: E402
import warnings  # noqa: E402

import numpy as np  # noqa: E402
from _memory import PeakMemory  # noqa: E402

from skrank.backends.array_api_design import ArrayAPIDesign  # noqa: E402
from skrank.backends.dask_design import DaskDesign  # noqa: E402
from skrank.backends.design import Design  # noqa: E402
from skrank.estimators import RankADMMClassifier, RankADMMRegressor  # noqa: E402
from skrank.risks import Superquantile  # noqa: E402

_D = 100
_CHUNK_ROWS = 50_000  # 40 MB chunks of 100 columns
_PRODUCTS = ("matvec", "rmatvec", "weighted_gram", "left_product", "rows", "class_moments", "step_products")
_product_seconds = [0.0]
_depth = [0]


def _timed(method):
    @functools.wraps(method)
    def run(*args, **kwargs):
        _depth[0] += 1
        start = time.perf_counter()
        try:
            return method(*args, **kwargs)
        finally:
            _depth[0] -= 1
            if _depth[0] == 0:  # the outermost product (step_products calls the others)
                _product_seconds[0] += time.perf_counter() - start
    return run


for _cls in (Design, DaskDesign, ArrayAPIDesign):
    for _name in _PRODUCTS:
        if _name in vars(_cls):
            setattr(_cls, _name, _timed(vars(_cls)[_name]))


class _Synthetic:
    """Standard normal rows generated chunk by chunk; labels from a fixed ``w``."""

    def __init__(self, task, columns=_D):
        self.task = task
        self.columns = columns

    def lazy(self, n, seed=0):
        import dask.array as da

        rows = min(_CHUNK_ROWS * max(_D // self.columns, 1), n)  # chunks of 40 MB or more
        return da.random.RandomState(seed).standard_normal(size=(n, self.columns),
                                                          chunks=(rows, self.columns))

    def labels(self, X, seed=0):
        """The targets of the lazy ``X``, a Dask array computed chunk by chunk (noise seeded per chunk)."""
        # a clear signal: with noisier labels the superquantile at 0.8 drives w to 0 (every loss
        # log 2), a degenerate optimum that is no test of scale
        w = 10.0 * np.linspace(-1.0, 1.0, self.columns) / np.sqrt(self.columns)

        def block(x, block_info=None):
            rng = np.random.default_rng([seed, block_info[0]["chunk-location"][0], 2])
            f = x @ w
            if self.task == "regression":
                return f + rng.standard_t(3, size=f.shape[0])
            return (f + rng.normal(size=f.shape[0]) > 0.0).astype(np.int64)

        dtype = np.float64 if self.task == "regression" else np.int64
        return X.map_blocks(block, drop_axis=1, dtype=dtype)


class _Replicated:
    """A real table replicated: random rows plus noise, generated chunk by chunk from a seed per chunk."""

    def __init__(self, name):
        from sklearn.preprocessing import StandardScaler

        from skrank.datasets import list_tabular, load_tabular

        X, y = load_tabular(name, sparse=False)
        self.base = StandardScaler().fit_transform(X)
        self.target = y
        self.task = {e["name"]: e["task"] for e in list_tabular()}[name]
        self.task = "regression" if self.task == "regression" else "classification"
        self.columns = X.shape[1]

    def _rows(self, block_id, size, seed):
        return np.random.default_rng([seed, block_id]).integers(0, self.base.shape[0], size=size)

    def lazy(self, n, seed=0):
        import dask.array as da

        rows = min(_CHUNK_ROWS, n)
        chunks = (tuple(min(rows, n - a) for a in range(0, n, rows)), (self.columns,))

        def block(block_info=None):
            (a, b), _ = block_info[None]["array-location"]
            index = self._rows(block_info[None]["chunk-location"][0], b - a, seed)
            noise = np.random.default_rng([seed, block_info[None]["chunk-location"][0], 1])
            return self.base[index] + 0.1 * noise.standard_normal((b - a, self.columns))

        return da.map_blocks(block, chunks=chunks, dtype=np.float64)

    def labels(self, X, seed=0):
        """The targets of the lazy ``X``: each generated row's label, a Dask array chunked like ``X``."""

        def block(x, block_info=None):
            return self.target[self._rows(block_info[0]["chunk-location"][0], x.shape[0], seed)]

        return X.map_blocks(block, drop_axis=1, dtype=self.target.dtype)


def _estimator(task):
    Est = RankADMMRegressor if task == "regression" else RankADMMClassifier
    return Est(risk=Superquantile(q=0.8), alpha=1e-3)


def _gpu():
    """CuPy when it and a GPU are present, else None."""
    try:
        import cupy

        return cupy if cupy.cuda.runtime.getDeviceCount() > 0 else None
    except Exception:  # no CuPy, no driver
        return None


def _plain_pass(X):
    w, r = np.ones(X.shape[1]), None if hasattr(X, "compute") else np.ones(X.shape[0])
    start = time.perf_counter()
    if hasattr(X, "compute"):
        import dask
        import dask.array as da

        dask.compute(X @ w, X.T @ da.ones(X.shape[0], chunks=X.chunks[0]))
    elif isinstance(X, np.ndarray):
        X @ w, X.T @ r
    else:  # CuPy
        import cupy

        cupy.asarray(X @ cupy.asarray(w)), X.T @ cupy.asarray(r)
        cupy.cuda.Device().synchronize()
    return time.perf_counter() - start


def _fit(est, X, y, memory=None):
    """``(est, seconds, tracemalloc peak)`` of ``est.fit(X, y)``, within ``memory`` (a ``PeakMemory``)."""
    import contextlib

    with memory if memory is not None else contextlib.nullcontext():
        # tracemalloc's own records (one per live allocation) would count in the RSS measured
        est, seconds, peak = _traced_fit(est, X, y, trace=memory is None)
    return est, seconds, peak


def _traced_fit(est, X, y, trace=True):
    """``(est, seconds, tracemalloc peak)`` of ``est.fit(X, y)``; the peak None without ``trace``."""
    import sklearn

    if trace:
        tracemalloc.start()
    _product_seconds[0] = 0.0
    start = time.perf_counter()
    with warnings.catch_warnings(), sklearn.config_context(array_api_dispatch=not hasattr(X, "compute")
                                                           and not isinstance(X, np.ndarray)):
        warnings.simplefilter("ignore")
        est.fit(X, y)
    seconds = time.perf_counter() - start
    if not trace:
        return est, seconds, None
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return est, seconds, peak


def _row(n, backend, X, y, task, reference, memory=None):
    """Fit, print the table's row; ``memory``: a :class:`PeakMemory` (``--driver-memory``), else None."""
    est, seconds, peak = _fit(_estimator(task), X, y, memory)
    host = 1.0 - _product_seconds[0] / seconds
    passes = int(est._last_result_info.get("passes", 0))
    per_pass = seconds / max(passes, 1)
    plain = _plain_pass(X)
    gap = "-" if reference is None else f"{abs(est.objective_ - reference) / abs(reference):.1e}"
    certified = "yes" if est._last_result_info.get("certified") else "no"
    split = ""
    if memory is not None:
        workers = ("-", "-") if not memory._workers else (f"{memory.workers_peak / 2**20:.0f}",
                                                          f"{memory.workers_before / 2**20:.0f}")
        split = f"{(memory.peak - memory.before) / 2**20:.0f} | {workers[0]} | {workers[1]} | "
    traced = "-" if peak is None else f"{peak / 2**20:.0f}"
    print(f"| {n:.0e} | {backend} | {seconds:.2f} | {passes} | {per_pass:.3g} | {per_pass / plain:.2g} | "
          f"{host:.0%} | {traced} | {split}{n * X.shape[1] * 8 / 2**20:.0f} | {gap} | "
          f"{est.n_iter_} | {certified} |", flush=True)
    return est


def _cluster_row(n, lazy, y, task, ref, driver_memory):
    """The ``cluster`` row: ``lazy`` fitted on a LocalCluster of 2 worker processes of one thread."""
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0") as cluster, \
            Client(cluster) as client:
        memory = PeakMemory(client.run(os.getpid).values()) if driver_memory else None
        _row(n, "cluster", lazy, y, task, ref, memory)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1e4,1e5,1e6")
    parser.add_argument("--data", default="classification",
                        help="classification, regression or real:NAME (a table of skrank.datasets)")
    parser.add_argument("--columns", type=int, default=_D, help="features of the synthetic data")
    parser.add_argument("--backends", default="numpy,dask,dask-lazy",
                        help="of numpy, dask, dask-lazy, cluster (numpy is the reference of the gaps)")
    parser.add_argument("--cluster", action="store_true",
                        help="add a 2-worker LocalCluster (backend cluster)")
    parser.add_argument("--gpu", action="store_true", help="add CuPy on the GPU, where there is one")
    parser.add_argument("--lazy-only", default="",
                        help="sizes fitted out of core only (e.g. 1e7): dask-lazy and cluster, those chosen")
    parser.add_argument("--driver-memory", action="store_true",
                        help="add the driver's RSS growth and the workers' RSS; X not held unless needed")
    args = parser.parse_args()
    import dask
    import dask.array as da

    backends = args.backends.split(",")
    cluster = args.cluster or "cluster" in backends
    memory = (lambda: PeakMemory()) if args.driver_memory else (lambda: None)
    source = (_Replicated(args.data[5:]) if args.data.startswith("real:")
              else _Synthetic(args.data, args.columns))
    cupy = _gpu() if args.gpu else None
    warm = source.lazy(2_000)  # kernels compiled before the timings (first_fit.py times that)
    _fit(_estimator(source.task), warm.compute(), source.labels(warm).compute())
    if args.gpu and cupy is None:
        print("(--gpu: no CuPy with a GPU here; the cupy rows are left out)\n")
    split = ("driver RSS growth MiB | workers' peak MiB | workers' RSS before MiB | " if args.driver_memory
             else "")
    print("| n | backend | seconds | passes | s per pass | pass / plain pass | host share | peak MiB | "
          f"{split}X MiB | gap to numpy | Newton steps | certified |")
    print("|---" * (12 + 3 * args.driver_memory) + "|")
    in_memory = not args.driver_memory or bool({"numpy", "dask"} & set(backends)) or cupy is not None
    for n in [int(float(s)) for s in args.sizes.split(",") if s]:
        lazy = source.lazy(n)
        labels = source.labels(lazy)  # lazy: the cluster's workers compute them from their chunks
        with dask.config.set(scheduler="threads"):
            y = labels.compute() if in_memory or "dask-lazy" in backends else None
        X = lazy.compute() if in_memory else None
        ref = _row(n, "numpy", X, y, source.task, None, memory()).objective_ if "numpy" in backends else None
        if "dask" in backends:
            _row(n, "dask", da.from_array(X, chunks=(min(_CHUNK_ROWS, n), X.shape[1])), y, source.task, ref,
                 memory())
        if cupy is not None:
            _row(n, "cupy", cupy.asarray(X), y, source.task, ref, memory())
        del X
        if "dask-lazy" in backends:
            with dask.config.set(scheduler="threads"):
                _row(n, "dask-lazy", lazy, y, source.task, ref, memory())
        if cluster:
            _cluster_row(n, lazy, labels, source.task, ref, args.driver_memory)
    for n in [int(float(s)) for s in args.lazy_only.split(",") if s]:
        lazy = source.lazy(n)
        labels = source.labels(lazy)
        if "dask-lazy" in backends:
            with dask.config.set(scheduler="threads"):
                _row(n, "dask-lazy", lazy, labels.compute(), source.task, None, memory())
        if cluster:
            _cluster_row(n, lazy, labels, source.task, None, args.driver_memory)
    command = (f"OMP_NUM_THREADS=1 python benchmarks/scale.py --sizes '{args.sizes}' --data {args.data} "
               f"--backends {args.backends}")
    command += f" --columns {args.columns}" if args.columns != _D else ""
    command += " --cluster" if args.cluster else ""
    command += " --gpu" if args.gpu else ""
    command += f" --lazy-only {args.lazy_only}" if args.lazy_only else ""
    command += " --driver-memory" if args.driver_memory else ""
    print("\ncommand: " + command)

if __name__ == "__main__":
    main()
