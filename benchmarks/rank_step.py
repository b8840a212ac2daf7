"""The superquantile's rank step on losses held in Dask chunks: gathered and sorted, or by its threshold form.

A full-batch fit on a Dask array needs, at each evaluation, the risk of the
``n`` losses and their rank weights.  Two ways, for the superquantile at
``q`` (the mean of the ``k = (1 - q) n`` largest losses):

* ``gather``: the losses come to the client (``n`` values) and are sorted
  there (``np.argsort``), as the solvers do today: the value is the mean of
  the last ``k``, the weights ``1/k`` on them;
* ``threshold``: the threshold form of Rockafellar and Uryasev (2000),
  ``min_t t + sum_i (l_i - t)_+ / k``, whose minimiser is the ``k``-th
  largest loss: it is found where the losses live, by bisection on ``t``
  with one counting reduction over the chunks per step, until at most
  ``--bracket`` losses lie in the bracket; those are gathered and the
  threshold is exact.  The value is one more reduction; the weights are the
  mask ``l > t`` (plus a share at ties), never gathered.

Both give the same value (printed: their relative difference).  Per size:
seconds of each way (median of ``--repeats``) and the number of reductions
of the threshold form.

With ``--projection``, the smoothed rank step of the certified Newton
solver instead: the weights ``q = proj_P(keys / mu)`` of the
superquantile's permutahedron for the keys ``losses + mu center``
(``center = 1/n``; ``mu`` from ``--mu``: ``mu cap`` is ``--mu`` times the
losses' spread over ``n``, so that about ``--mu`` keys are free), two ways:

* ``gather+PAVA``: the keys come to the client, are sorted and projected by
  :func:`skrank.datafits.smoothed_risk.pooled_projection` (as the solver
  does today);
* ``threshold``: :func:`skrank.datafits.threshold_projection.capped_threshold_dask`
  (batched counting reductions, ``--candidates`` per round, the last
  ``--bracket`` breakpoints gathered), then ``q`` where the keys live and
  ``q . losses`` and the free set's count by per-chunk reductions
  (:func:`~skrank.datafits.threshold_projection.capped_projection`).

Printed: seconds of each (median of ``--repeats``), the rounds
(``compute`` calls of the threshold), the distinct keys gathered at the
end, the free set's size and the largest difference of ``q . losses``
relative to its value.

    OMP_NUM_THREADS=1 python benchmarks/rank_step.py --sizes 1e6,1e7
    OMP_NUM_THREADS=1 python benchmarks/rank_step.py --sizes 1e6,1e7 --projection
"""

import argparse
import time

import numpy as np


def _losses(n, rows=50_000, seed=0):
    import dask.array as da

    # logistic losses of random margins, as a fit's losses would be: generated where they live
    margins = da.random.RandomState(seed).standard_normal(size=n, chunks=rows)
    return da.logaddexp(0.0, -margins).persist()


def gather(losses, k):
    """The mean of the ``k`` largest losses, the losses gathered and sorted on the client."""
    values = losses.compute()
    order = np.argsort(values, kind="stable")
    return float(values[order[-k:]].mean()), 1


def threshold(losses, k, bracket):
    """The same mean by the threshold form: bisection by counting reductions, then the bracket gathered."""
    import dask

    lo, hi = dask.compute(losses.min(), losses.max())
    reductions = 1
    while True:
        mid = 0.5 * (lo + hi)
        above, inside = dask.compute((losses > mid).sum(), ((losses > lo) & (losses <= hi)).sum())
        reductions += 1
        if inside <= bracket or mid in (lo, hi):
            break
        if above >= k:
            lo = mid
        else:
            hi = mid
    # the k-th largest lies in [lo, hi]: gather the losses there and finish on the client
    candidates = losses[(losses >= lo) & (losses <= hi)].compute()
    larger = int(dask.compute((losses > hi).sum())[0])
    t = np.sort(candidates)[::-1][k - larger - 1]
    excess = float(dask.compute(da_positive_part_sum(losses, t))[0])
    return float(t + excess / k), reductions + 2


def da_positive_part_sum(losses, t):
    import dask.array as da

    return da.maximum(losses - t, 0.0).sum()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1e6,1e7")
    parser.add_argument("--q", type=float, default=0.8)
    parser.add_argument("--bracket", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--projection", action="store_true",
                        help="time the smoothed rank step (the projection) instead of the value")
    parser.add_argument("--mu", type=float, default=1.0,
                        help="with --projection: mu cap in units of the losses' spread / n")
    parser.add_argument("--candidates", type=int, default=64, help="with --projection: taus per round")
    args = parser.parse_args()
    if args.projection:
        return projection_main(args)
    import dask

    print("| n | gather s | threshold s | threshold / gather | reductions | relative difference |")
    print("|---|---|---|---|---|---|")
    with dask.config.set(scheduler="threads"):
        for n in [int(float(s)) for s in args.sizes.split(",")]:
            losses = _losses(n)
            k = int(np.ceil((1.0 - args.q) * n))
            times = {}
            for name, run in (("gather", lambda: gather(losses, k)),
                              ("threshold", lambda: threshold(losses, k, args.bracket))):
                seconds = []
                for _ in range(args.repeats):
                    start = time.perf_counter()
                    value, reductions = run()
                    seconds.append(time.perf_counter() - start)
                times[name] = (float(np.median(seconds)), value, reductions)
            (g, vg, _), (t, vt, r) = times["gather"], times["threshold"]
            print(f"| {n:.0e} | {g:.3f} | {t:.3f} | {t / g:.1f} | {r} | {abs(vt - vg) / abs(vg):.1e} |",
                  flush=True)
    print(f"\ncommand: OMP_NUM_THREADS=1 python benchmarks/rank_step.py --sizes {args.sizes} --q {args.q} "
          f"--bracket {args.bracket} --repeats {args.repeats}")


def projection_gather(keys, losses, mu, q_level):
    """``q . losses`` and the free set's size, the keys gathered, sorted and projected by PAVA."""
    import dask

    from skrank.datafits.smoothed_risk import pooled_projection
    from skrank.risks import Superquantile

    k, values = dask.compute(keys, losses)
    n = k.size
    order = np.argsort(k, kind="stable")
    starts = np.empty(n + 1, dtype=np.int64)
    nb = pooled_projection(k, order, Superquantile(q_level).weights(n), mu, starts, np.ones(1))
    sizes = np.diff(starts[: nb + 1])
    return float(k @ values), int(sizes[sizes > 1].sum()), 1, n


def projection_threshold(keys, losses, mu, q_level, bracket, candidates):
    """The same by the threshold form: counting reductions, then ``q`` and the sums where the keys live."""
    import dask

    from skrank.datafits.threshold_projection import capped_projection, capped_threshold_dask

    n = keys.shape[0]
    cap = 1.0 / ((1.0 - q_level) * n)
    tau = capped_threshold_dask(keys, mu, cap, 1.0, bracket=bracket, candidates=candidates)
    q, _, stats = capped_projection(keys, mu, cap, tau)
    value, count = dask.compute((q * losses).sum(), stats["count"])
    return float(value), int(count), tau.rounds + 1, tau.gathered


def projection_main(args):
    import dask

    from skrank.datafits.smoothed_risk import pooled_projection

    # the PAVA's compilation (or cache load) is not the rank step's time
    pooled_projection(np.zeros(2), np.arange(2), np.full(2, 0.5), 1.0, np.empty(3, dtype=np.int64),
                      np.ones(1))

    print("| n | gather+PAVA s | threshold s | threshold / gather | rounds | gathered | free (PAVA pooled) | "
          "relative difference |")
    print("|---|---|---|---|---|---|---|---|")
    with dask.config.set(scheduler="threads"):
        for n in [int(float(s)) for s in args.sizes.split(",")]:
            losses = _losses(n)
            low, high = dask.compute(losses.min(), losses.max())
            mu = args.mu * (high - low) * (1.0 - args.q)  # mu cap = --mu spread / n: ~ --mu free keys
            keys = (losses + mu / n).persist()  # mu center + losses, center = 1/n
            times = {}
            for name, run in (("gather", lambda: projection_gather(keys, losses, mu, args.q)),
                              ("threshold", lambda: projection_threshold(keys, losses, mu, args.q,
                                                                         args.bracket, args.candidates))):
                seconds = []
                for _ in range(args.repeats):
                    start = time.perf_counter()
                    out = run()
                    seconds.append(time.perf_counter() - start)
                times[name] = (float(np.median(seconds)), *out)
            (g, vg, fg, _, _), (t, vt, ft, r, gathered) = times["gather"], times["threshold"]
            print(f"| {n:.0e} | {g:.3f} | {t:.3f} | {t / g:.2f} | {r} | {gathered} | {ft} ({fg}) | "
                  f"{abs(vt - vg) / abs(vg):.1e} |", flush=True)
    print(f"\ncommand: OMP_NUM_THREADS=1 python benchmarks/rank_step.py --sizes {args.sizes} --q {args.q} "
          f"--bracket {args.bracket} --repeats {args.repeats} --projection --mu {args.mu} "
          f"--candidates {args.candidates}")


if __name__ == "__main__":
    main()
