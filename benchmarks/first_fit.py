"""The first fit of every default estimator in a fresh process: empty Numba cache, then warm.

Each row copies the package into a new folder (no bytecode, no Numba cache
anywhere it looks) and runs, in a new Python process, ``import skrank``
after NumPy and scikit-learn, then ``skrank.<estimator>(**params).fit`` on
a 300 x 6 synthetic table (``make_classification`` / ``make_regression``);
then a second process does the same with the cache the first one wrote.
Columns: the seconds of the import of NumPy and scikit-learn, the seconds
``import skrank`` adds to it, the first fit with the empty cache (Numba is
imported by the first fit, not by ``import skrank``), the two together,
the fit and the import in the second process; each the median of
``--repeat`` runs.

Run: ``python benchmarks/first_fit.py [--repeat 3] [--source FOLDER] [--all]``
"""

import argparse
import os
import statistics
import sys

from _first_fit import ROOT, first_fit

DEFAULTS = [
    ("RankADMMClassifier", {}),
    ("SpectralRiskClassifier", {}),
    ("PartialAUCClassifier", {}),
    ("AveragePrecisionClassifier", {}),
    ("SpectralRiskRegressor", {}),
    ("RankADMMRegressor", {}),
]

OTHERS = [
    ("RankADMMClassifier", {"risk": "superquantile", "penalty": "l1"}),
    ("RankADMMClassifier", {"loss": "hinge", "risk": "superquantile"}),
    ("RankADMMClassifier", {"loss": "hinge", "risk": "extremile"}),
    ("RankADMMClassifier", {"risk": "ranked_range"}),
    ("RankADMMRegressor", {"loss": "absolute"}),
    ("PartialAUCClassifierCV", {}),
    ("AveragePrecisionClassifierCV", {}),
]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="runs per row (medians shown)")
    parser.add_argument("--source", default=ROOT, help="folder holding the package to time")
    parser.add_argument("--all", action="store_true", help="also time non-default parameters")
    parser.add_argument("--rows", type=int, default=300)
    parser.add_argument("--features", type=int, default=6)
    args = parser.parse_args(argv)
    configs = DEFAULTS + (OTHERS if args.all else [])
    print(f"package: {os.path.abspath(args.source)}; table {args.rows} x {args.features}; "
          f"medians of {args.repeat} runs")
    print("| estimator | parameters | sklearn import s | skrank import s | first fit s "
          "| import + first fit s | second process fit s | second process import s |")
    print("|---|---|---|---|---|---|---|---|")
    for name, params in configs:
        runs = [first_fit(name, n_rows=args.rows, n_features=args.features, source=args.source,
                          **params) for _ in range(args.repeat)]
        for run in runs:
            run["total"] = run["import_cold"] + run["cold"]
        med = {key: statistics.median(run[key] for run in runs) for key in runs[0]}
        shown = ", ".join(f"{k}={v!r}" for k, v in params.items()) or "defaults"
        print(f"| {name} | {shown} | {med['sklearn']:.2f} | {med['import_cold']:.2f} "
              f"| {med['cold']:.2f} | {med['total']:.2f} | {med['warm']:.2f} "
              f"| {med['import_warm']:.2f} |", flush=True)
    print(f"\nreproduce: python benchmarks/first_fit.py {' '.join(sys.argv[1:])}".rstrip())


if __name__ == "__main__":
    main()
