"""Submissions to the Dask scheduler per fit step, and a step's time in plain passes over ``X``.

On a ``LocalCluster`` of two worker processes (one thread each) this script
makes a lazy ``--n x --d`` float64 ``X`` (drawn chunk by chunk on the
workers, row chunks of ``--chunk-mb`` MB each) and counts every graph that
the driving process submits (``dask.compute``, ``dask.persist``,
``.compute()``, ``Client.compute`` and ``Client.persist`` all go through
``Client._graph_to_futures``) while it runs, per path:

* ``threshold project`` / ``sorted project``: one rank step's projection
  (:class:`skrank.datafits.rank_step.ThresholdRankStep`, the
  superquantile; :class:`skrank.backends.dask_rank.DaskSortedRankStep`,
  the exponential spectral risk) of persisted keys ``X w``;
* ``newton superquantile`` / ``newton extremile``: a certified Newton fit
  on the workers (``--steps`` Newton steps at most), per Newton step;
* ``pauc`` / ``pauc two-way`` / ``ap``: one value and gradient of the
  ranking classifiers' anchored objective on the workers
  (:class:`skrank.datafits.worker_ranking.WorkerAnchoredObjective`).

``plain s`` is one plain pass: ``r = X w`` persisted, then ``X^T r``
computed (median of three); ``ratio`` is a step's seconds over it.

    OMP_NUM_THREADS=1 PYTHONPATH=. python benchmarks/dask_round_trips.py --n 1e6 --chunk-mb 8 40
"""

import argparse
import sys
import time

import numpy as np


class Submissions:
    """Counts the graphs submitted to the scheduler by this process."""

    def __init__(self):
        import distributed

        self.count = 0
        self._client = distributed.Client
        self._original = distributed.Client._graph_to_futures

        def counted(client, *args, **kwargs):
            self.count += 1
            return self._original(client, *args, **kwargs)

        self._client._graph_to_futures = counted

    def close(self):
        self._client._graph_to_futures = self._original


def _block(block_id, rows, d):
    rng = np.random.default_rng([7, block_id[0]])
    return rng.standard_normal((rows, d))


def _data(n, d, mb):
    import dask.array as da

    rows = max(1, int(mb * 1e6 / (8 * d)))
    chunks = tuple(min(rows, n - c * rows) for c in range(-(-n // rows)))
    X = da.map_blocks(lambda block_id=None: _block(block_id, chunks[block_id[0]], d),
                      chunks=(chunks, (d,)), dtype=np.float64)
    y = X.map_blocks(lambda b: np.where(b @ np.linspace(-1, 1, d) + 0.5 * b[:, 0] ** 2 > 0.5, 1.0, -1.0),
                     drop_axis=1, dtype=np.float64)
    return X, y


def _plain(X):
    import dask

    w = np.linspace(-1.0, 1.0, X.shape[1])
    times = []
    for _ in range(3):
        start = time.perf_counter()
        (r,) = dask.persist(X @ w)
        dask.compute(X.T @ r)
        times.append(time.perf_counter() - start)
        del r
    return float(np.median(times))


def _timed(counter, run, per):
    """Submissions and seconds of ``run()`` (after one warm-up run), divided by ``per(result)``."""
    run()
    count = counter.count
    start = time.perf_counter()
    out = run()
    seconds = time.perf_counter() - start
    units = per(out)
    return (counter.count - count) / units, seconds / units


def _projections(X):
    import dask

    from skrank.backends.dask_rank import DaskSortedRankStep
    from skrank.datafits.rank_step import ThresholdRankStep
    from skrank.risks import ExponentialSpectral, Superquantile

    (keys,) = dask.persist(X @ np.linspace(-1.0, 1.0, X.shape[1]))
    n = X.shape[0]
    threshold = ThresholdRankStep(Superquantile(q=0.9), n)
    sorted_ = DaskSortedRankStep(ExponentialSpectral(rho=2.0))
    return [("threshold project", lambda: threshold.project(keys, 1e-3 * threshold.cap) and 1),
            ("sorted project", lambda: sorted_.project(keys, 0.1 * n) and 1)]


def _newton(X, y, steps, risk, loss):
    from skrank.datafits.rank_risk import RankRisk
    from skrank.losses import get_loss
    from skrank.penalties import get_penalty
    from skrank.solvers.full_batch.newton import smoothed_newton

    def run():
        res = smoothed_newton(RankRisk(X, y, risk, get_loss(loss)), get_penalty("l2", 1e-3), max_iter=steps,
                              tol=1e-9)
        return max(res.n_iter, 1)

    return run


def _ranking(X, y, term, rank_weight=0.5):
    from skrank.datafits.worker_ranking import WorkerAnchoredObjective

    objective = WorkerAnchoredObjective(term, X, y, rank_weight, 1e-3)
    theta = np.append(np.linspace(-0.5, 0.5, X.shape[1]), 0.1)

    def run():
        objective.value_and_grad(theta)
        return 1

    return run


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=float, default=1e6)
    parser.add_argument("--d", type=int, default=20)
    parser.add_argument("--chunk-mb", type=float, nargs="+", default=[8.0, 40.0])
    parser.add_argument("--steps", type=int, default=4, help="Newton steps of the fits, at most")
    parser.add_argument("--paths", default="threshold,sorted,newton,ranking")
    args = parser.parse_args(argv)
    import distributed

    from skrank.datafits.worker_ranking import AveragePrecisionTerm, PartialAUCTerm
    from skrank.pairwise_losses import get_pairwise_loss
    from skrank.risks import Extremile, Superquantile

    n, d = int(args.n), args.d
    paths = args.paths.split(",")
    rows = []
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=":0") as cluster, distributed.Client(cluster):
        counter = Submissions()
        for mb in args.chunk_mb:
            X, y = _data(n, d, mb)
            plain = _plain(X)
            cases = []
            if "threshold" in paths or "sorted" in paths:
                cases += [c for c in _projections(X) if c[0].split()[0] in paths]
            if "newton" in paths:
                import os

                os.environ["SKRANK_NEWTON_GATHER"] = "0"
                cases += [("newton superquantile",
                           _newton(X, y, args.steps, Superquantile(q=0.9), "logistic")),
                          ("newton extremile", _newton(X, y, args.steps, Extremile(r=2.0), "logistic"))]
            if "ranking" in paths:
                step = get_pairwise_loss("squared_hinge", 1.0)
                cases += [("pauc", _ranking(X, y, PartialAUCTerm(step, (0.0, 0.3)))),
                          ("pauc two-way", _ranking(X, y, PartialAUCTerm(step, (0.0, 0.3), tpr_min=0.5))),
                          ("ap", _ranking(X, y, AveragePrecisionTerm(step)))]
            for name, run in cases:
                count, seconds = _timed(counter, run, lambda units: units)
                rows.append((name, mb, X.numblocks[0], count, seconds, plain))
                print(f"{name:22s} {mb:5g} MB {X.numblocks[0]:4d} chunks  {count:6.1f} submissions  "
                      f"{seconds:7.2f} s  plain {plain:6.2f} s  ratio {seconds / plain:5.1f}", flush=True)
        counter.close()
    print()
    print(f"n x d = {n} x {d}")
    print("path | chunk MB | chunks | submissions per step | step s | plain pass s | step / plain")
    for name, mb, chunks, count, seconds, plain in rows:
        print(f"{name} | {mb:g} | {chunks} | {count:.1f} | {seconds:.2f} | {plain:.2f} | "
              f"{seconds / plain:.1f}")
    print("command: OMP_NUM_THREADS=1 PYTHONPATH=. python benchmarks/dask_round_trips.py "
          + " ".join(sys.argv[1:] if argv is None else argv))


if __name__ == "__main__":
    main()
