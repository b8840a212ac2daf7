"""The driving process's memory against the rows, for every default estimator and spectral risk on Dask.

Each estimator fits a lazy ``n x 20`` array drawn chunk by chunk on the
workers of a ``LocalCluster`` of 2 worker processes of one thread each (the
labels computed there too, ``X`` and ``y`` never gathered), for each ``n``
of ``--rows``.  Per fit the table gives the path the fit took (``workers``:
its vectors of length ``n`` kept on the workers; ``gathered``: brought into
the driving process), the peak growth of the driving process's resident
memory over its value before the fit (sampled every 10 ms), the seconds and
the number of chunks.  ``--gathered`` adds, for comparison, the default
``SpectralRiskClassifier()`` forced onto the gathered path
(``SKRANK_NEWTON_GATHER=1``).  With ``--plot FIGURE`` the growth against
``n`` is drawn (matplotlib).

Usage (from the repository root)::

    OMP_NUM_THREADS=1 python benchmarks/dask_memory_curve.py --rows 1e5,3e5,1e6 --chunk-mb 8 --gathered \\
        --plot doc/images/dask_memory.png
    python benchmarks/dask_memory_curve.py --table TABLE --plot doc/images/dask_memory.png   # redraw
"""

import argparse
import os
import sys
import time

from _memory import PeakMemory
from dask_ranking_memory import data

_D = 20


def estimators():
    """The fits measured: a name and a factory each."""
    from skrank.estimators import AveragePrecisionClassifier as AP
    from skrank.estimators import PartialAUCClassifier, RankADMMClassifier, SpectralRiskClassifier
    from skrank.risks import ERM, ExponentialSpectral, Extremile, Superquantile, TopK

    fits = {"RankADMMClassifier()": RankADMMClassifier,
            "SpectralRiskClassifier()": SpectralRiskClassifier,
            "PartialAUCClassifier()": PartialAUCClassifier,
            "PartialAUCClassifier(tpr_min=0.5)": lambda: PartialAUCClassifier(tpr_min=0.5),
            "AveragePrecisionClassifier()": AP}
    for risk in (ERM(), Superquantile(q=0.5), Extremile(r=2.0), ExponentialSpectral(rho=2.0), TopK(k=0.4)):
        fits[f"SpectralRiskClassifier(risk={risk!r})"] = lambda risk=risk: SpectralRiskClassifier(risk=risk)
    return fits


class PathRecorder:
    """Records whether the fits in its block keep their vectors on the workers or gather them."""

    def __enter__(self):
        from skrank.datafits import worker_ranking
        from skrank.datafits.smoothed_rank_risk import SmoothedRankRisk

        self.paths, self._patched = set(), []
        newton_init = SmoothedRankRisk.__init__
        ranking_init = worker_ranking.WorkerAnchoredObjective.__init__

        def newton(datafit, *args, **kwargs):
            newton_init(datafit, *args, **kwargs)
            self.paths.add("workers" if datafit.design.keeps_vectors_apart else "gathered")

        def ranking(objective, *args, **kwargs):
            ranking_init(objective, *args, **kwargs)
            self.paths.add("workers")

        for owner, name, value in ((SmoothedRankRisk, "__init__", newton),
                                   (worker_ranking.WorkerAnchoredObjective, "__init__", ranking)):
            self._patched.append((owner, name, getattr(owner, name)))
            setattr(owner, name, value)
        return self

    def __exit__(self, *exc):
        for owner, name, value in self._patched:
            setattr(owner, name, value)

    @property
    def path(self):
        # a ranking fit that never made a worker objective evaluated its vectors in the driving process
        return "/".join(sorted(self.paths)) or "gathered"


def measure(name, factory, X, y, gathered=False):
    """One fit: its path, the driver's peak RSS growth in MiB and the seconds."""
    os.environ["SKRANK_NEWTON_GATHER"] = "1" if gathered else ""
    try:
        with PathRecorder() as recorder, PeakMemory() as memory:
            start = time.perf_counter()
            factory().fit(X, y)
            seconds = time.perf_counter() - start
    finally:
        os.environ["SKRANK_NEWTON_GATHER"] = ""
    return recorder.path, (memory.peak - memory.before) / 2**20, seconds


def plot(rows, figure):
    """Driver growth against ``n``, one line per fit."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7.5, 4.5))
    colours = plt.get_cmap("tab20").colors
    for i, label in enumerate(dict.fromkeys(row[0] for row in rows)):
        points = sorted((row[2], row[5]) for row in rows if row[0] == label)
        ax.plot([p[0] for p in points], [max(p[1], 1.0) for p in points], marker="o", label=label,
                color=colours[i % len(colours)], linestyle="--" if "gathered" in label else "-")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel(f"rows n ({_D} columns)")
    ax.set_ylabel("driving process's RSS growth (MiB)")
    ax.legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(figure, dpi=110)


def read_table(path):
    """The rows of a table this script printed (to draw its figure again)."""
    rows = []
    for line in open(path):
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) == 7 and cells[2][:1].isdigit():
            rows.append((cells[0], cells[1], float(cells[2]), int(cells[3]), float(cells[4]), float(cells[5]),
                         float(cells[6])))
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", default="1e5,3e5,1e6", help="numbers of rows, comma-separated")
    parser.add_argument("--chunk-mb", type=float, default=8.0)
    parser.add_argument("--fits", default="", help="substrings of the fits' names to keep, comma-separated")
    parser.add_argument("--gathered", action="store_true", help="add SpectralRiskClassifier() gathered")
    parser.add_argument("--plot", default="", help="write the figure there")
    parser.add_argument("--table", default="", help="draw the figure from this printed table; fit nothing")
    args = parser.parse_args()
    if args.table:
        plot(read_table(args.table), args.plot)
        return 0
    import distributed

    chosen = [(name, factory) for name, factory in estimators().items()
              if not args.fits or any(part in name for part in args.fits.split(","))]
    if args.gathered:
        chosen.append(("SpectralRiskClassifier() gathered", estimators()["SpectralRiskClassifier()"]))
    print(f"# OMP_NUM_THREADS=1 python benchmarks/dask_memory_curve.py --rows {args.rows} "
          f"--chunk-mb {args.chunk_mb:g}" + (" --gathered" if args.gathered else ""))
    print("| fit | path | n | chunks | chunk MB | driver RSS growth (MiB) | seconds |")
    rows = []
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=":0") as cluster, distributed.Client(cluster):
        small = data(4000, _D, 1000)
        for name, factory in chosen:  # the modules and kernels loaded before the measurements
            measure(name, factory, *small, gathered=name.endswith("gathered"))
        for n in (int(float(value)) for value in args.rows.split(",")):
            X, y = data(n, _D, max(1, int(args.chunk_mb * 2**20 / (8 * _D))))
            for name, factory in chosen:
                path, growth, seconds = measure(name, factory, X, y, gathered=name.endswith("gathered"))
                rows.append((name, path, n, X.numblocks[0], args.chunk_mb, growth, seconds))
                print(f"| {name} | {path} | {n:.0e} | {X.numblocks[0]} | {args.chunk_mb:g} | {growth:.1f} "
                      f"| {seconds:.1f} |", flush=True)
    if args.plot:
        plot(rows, args.plot)
    return 0


if __name__ == "__main__":
    sys.exit(main())
