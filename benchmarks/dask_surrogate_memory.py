"""The driving process's memory for one value and gradient of the rank surrogates on a Dask cluster.

A ``LocalCluster`` of worker processes holds ``n`` scores, sorted ascending
over their chunks and generated on the workers (chunk ``k`` holds sorted
uniform draws in ``[k, k + 1)``), their labels (a share ``--positives`` of
positives) and, with ``--weights``, sample weights.  One evaluation of each
surrogate on the partitions (:mod:`skrank.datafits.partitioned_surrogates`),
its gradient left persisted on the workers, is timed, and the driving
process's resident memory is sampled every 5 ms: the table gives its peak
growth over the memory before the call.  With ``--gathered`` the same
evaluation on the scores gathered into the driving process
(:class:`skrank.datafits.partial_auc.PartialAUCObjective` and
:class:`skrank.datafits.average_precision.AveragePrecisionObjective`'s
in-memory path) is measured after it, for comparison.

Run (about a minute at the default size on two cores)::

    OMP_NUM_THREADS=1 PYTHONPATH=. python benchmarks/dask_surrogate_memory.py --rows 4000000 --gathered
"""

import argparse
import sys
import time

import numpy as np
from _memory import PeakMemory


def _scores(block_info=None):
    info = block_info[None]
    k = info["chunk-location"][0]
    size = info["chunk-shape"][0]
    rng = np.random.default_rng(k)
    return k + np.sort(rng.random(size))


def _labels(block_info=None, positives=0.2):
    info = block_info[None]
    rng = np.random.default_rng(10_000 + info["chunk-location"][0])
    return np.where(rng.random(info["chunk-shape"][0]) < positives, 1.0, -1.0)


def _weights(block_info=None):
    info = block_info[None]
    rng = np.random.default_rng(20_000 + info["chunk-location"][0])
    return rng.random(info["chunk-shape"][0]) * 2.0


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=4_000_000)
    parser.add_argument("--chunks", type=int, default=16, help="number of row chunks")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--positives", type=float, default=0.2)
    parser.add_argument("--weights", action="store_true", help="with sample weights")
    parser.add_argument("--gathered", action="store_true", help="also measure the gathered evaluation")
    args = parser.parse_args(argv)

    import dask
    import dask.array as da
    import distributed

    from skrank.datafits.partitioned_surrogates import average_precision_terms, partial_auc_terms
    from skrank.pairwise_losses import get_pairwise_loss

    n = args.rows
    size = -(-n // args.chunks)
    chunks = ((size,) * (n // size) + ((n % size,) if n % size else ()),)
    step = get_pairwise_loss("smooth_step", 0.5)
    hinge = get_pairwise_loss("squared_hinge", 0.5)
    print(f"n = {n}, {len(chunks[0])} chunks, {args.workers} worker processes, "
          f"{'weighted' if args.weights else 'unweighted'}")
    print(f"{'evaluation':48s} {'seconds':>8s} {'driver peak MB':>15s}")
    with distributed.LocalCluster(n_workers=args.workers, threads_per_worker=1, processes=True,
                                  dashboard_address=":0") as cluster, distributed.Client(cluster):
        h = da.map_blocks(_scores, chunks=chunks, dtype=np.float64)
        y = da.map_blocks(_labels, chunks=chunks, dtype=np.float64, positives=args.positives)
        w = da.map_blocks(_weights, chunks=chunks, dtype=np.float64) if args.weights else None
        h, y = dask.persist(h, y)
        if w is not None:
            (w,) = dask.persist(w)
        cases = [
            ("partial AUC, smooth step, fpr (0.05, 0.3)",
             lambda: partial_auc_terms(h, y, step, (0.05, 0.3), sample_weight=w)),
            ("two-way partial AUC, smooth step, tpr_min 0.5",
             lambda: partial_auc_terms(h, y, step, (0.0, 0.3), tpr_min=0.5, sample_weight=w)),
            ("average precision, squared hinge (sigmoid scores)",
             lambda: average_precision_terms(_sigmoid(h), y, hinge, w)),
        ]
        for name, evaluate in cases:
            evaluate()  # first call: imports and compilation out of the measure
            with PeakMemory(every=0.005) as rss:
                start = time.perf_counter()
                value, g = evaluate()
                seconds = time.perf_counter() - start
            del g
            print(f"{name:48s} {seconds:8.2f} {rss.growth / 2**20:15.1f}")
        if args.gathered:
            _gathered(h, y, w, step, hinge)
    print("command: OMP_NUM_THREADS=1 PYTHONPATH=. python benchmarks/dask_surrogate_memory.py "
          + " ".join(sys.argv[1:] if argv is None else argv))


def _sigmoid(h):
    """Scores in (0, 1), in the order of ``h`` (whose chunk ``k`` lies in ``[k, k + 1)``)."""
    k = len(h.chunks[0])
    return 1.0 / (1.0 + np.exp(-(h - 0.5 * k) / (0.125 * k)))


def _gathered(h, y, w, step, hinge):
    """The same evaluations with the scores, labels and weights gathered into this process."""
    from skrank.datafits.average_precision import ap_surrogate_and_score_gradients
    from skrank.datafits.partial_auc import PartialAUCObjective

    with PeakMemory(every=0.005) as rss:
        start = time.perf_counter()
        hv, yv = h.compute(), y.compute()
        wv = None if w is None else w.compute()
        objective = PartialAUCObjective(np.zeros((hv.shape[0], 1)), yv, (0.05, 0.3), step, 0.0,
                                        sample_weight=wv)
        objective.linear_terms(hv)
        seconds = time.perf_counter() - start
    print(f"{'gathered: partial AUC, smooth step':48s} {seconds:8.2f} {rss.growth / 2**20:15.1f}")
    del objective
    with PeakMemory(every=0.005) as rss:
        start = time.perf_counter()
        hv = _sigmoid(h).compute()
        ap_surrogate_and_score_gradients(hv, yv, hinge, wv)
        seconds = time.perf_counter() - start
    print(f"{'gathered: average precision, squared hinge':48s} {seconds:8.2f} {rss.growth / 2**20:15.1f}")


if __name__ == "__main__":
    main()
