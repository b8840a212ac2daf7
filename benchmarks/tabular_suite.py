"""The rank estimators against LogisticRegression at their own metric, on a suite of real tables.

Every table of ``skrank.datasets.load_suite("imbalanced")`` (36 real binary
tables, 2-27% positives; ``--quick``: its 5-table subset) is split
``--splits`` times into stratified 70/30 train and test parts (seeds 0,
1, ...).  Features are standardised on the training part
(``StandardScaler``; the sparse ``flights`` table is scaled by
``MaxAbsScaler`` and stays CSR).  On each split every estimator is fitted
on the training part and scored, on both parts, by the metric it is named
for:

==============================  ========================  ==========================
estimator                       metric                    reference
==============================  ========================  ==========================
``PartialAUCClassifier(r)``     pAUC over ``r``           ``LogisticRegression()``
``AveragePrecisionClassifier``  average precision         ``LogisticRegression()``
``...CV`` variants              the same                  ``LogisticRegressionCV``
                                                          scored by the same metric
==============================  ========================  ==========================

for ``r`` in (0, 0.1), (0, 0.3), (0.05, 0.5) and (0, 1) (AUROC), and
``PartialAUCClassifier(fpr_range=(0, b), tpr_min=a)`` scored by the two-way
partial AUC over TPR >= a and FPR <= b, for ``(a, b)`` = (0.5, 0.3) and
(0.7, 0.5) (``tpauc0503``, ``tpauc0705``).  A reference is fitted once per
split and scored by every metric.

Printed, per estimator: the mean paired difference of the held-out metric
to the reference with a 95% interval over the tables (a t interval on the
per-table means), the tables won, tied and lost (a table is won or lost
when the t interval of its paired differences over the splits excludes
0, tied otherwise), the worst table, the smallest difference of the
*training* metric, and the median and largest ratio of fit times (each
estimator is fitted once on a small problem before the timings, so that
they leave out the first fit of a process, which loads the compiled
kernels: ``benchmarks/first_fit.py`` measures that).  ``--per-table``
prints every table's line.  ``--json`` writes every number, ``--plot``
a figure of the per-table gains with their intervals.

``--cv-timing`` times the cross-validated estimators instead: on the
training part of the first split of each table, ``LogisticRegressionCV(Cs=10,
cv=5)`` scored by each ``-cv`` estimator's metric and the estimator itself
(the same five stratified folds), each fit ``--repeats`` times (the median
kept), and prints the seconds and their ratio per table.

Usage (from the repository root; one thread per process)::

    OMP_NUM_THREADS=1 python benchmarks/tabular_suite.py            # the whole suite
    OMP_NUM_THREADS=1 python benchmarks/tabular_suite.py --quick    # 5 small tables, 2 splits
    OMP_NUM_THREADS=1 python benchmarks/tabular_suite.py --estimators pauc03,pauc03-cv --per-table
    OMP_NUM_THREADS=1 python benchmarks/tabular_suite.py --jobs 2 --json out.json --plot gains.png
    OMP_NUM_THREADS=1 python benchmarks/tabular_suite.py --cv-timing --quick --tables breast_cancer,hmda
"""

import argparse
import json
import sys
import time
import warnings
from concurrent.futures import ProcessPoolExecutor

import numpy as np
import scipy.sparse as sp
from scipy import stats
from sklearn.linear_model import LogisticRegression, LogisticRegressionCV
from sklearn.metrics import average_precision_score, make_scorer
from sklearn.model_selection import StratifiedShuffleSplit
from sklearn.preprocessing import MaxAbsScaler, StandardScaler

from skrank.datasets import load_suite, suite_names
from skrank.metrics import (
    make_partial_auc_scorer,
    make_two_way_partial_auc_scorer,
    partial_auc_score,
    two_way_partial_auc_score,
)

RANGES = {"pauc01": (0.0, 0.1), "pauc03": (0.0, 0.3), "pauc0505": (0.05, 0.5), "auroc": (0.0, 1.0)}
#: two-way regions ``(tpr_min, fpr_max)``: the area where TPR >= tpr_min and FPR <= fpr_max
TWO_WAY = {"tpauc0503": (0.5, 0.3), "tpauc0705": (0.7, 0.5)}


def metric_of(key):
    """``(score(y, s), scorer)`` of one metric name."""
    if key == "ap":
        scorer = make_scorer(average_precision_score, response_method="decision_function")
        return average_precision_score, scorer
    if key in TWO_WAY:
        tpr_min, fpr_max = TWO_WAY[key]
        return ((lambda y, s: two_way_partial_auc_score(y, s, tpr_min=tpr_min, fpr_max=fpr_max)),
                make_two_way_partial_auc_scorer(tpr_min=tpr_min, fpr_max=fpr_max))
    fpr_range = RANGES[key]
    return (lambda y, s: partial_auc_score(y, s, fpr_range=fpr_range)), make_partial_auc_scorer(fpr_range)


def make_estimator(key, params):
    """The estimator called ``key``: ``<metric>`` (default) or ``<metric>-cv``, with extra ``params``."""
    import skrank.estimators

    metric, _, kind = key.partition("-")
    name = "AveragePrecisionClassifier" if metric == "ap" else "PartialAUCClassifier"
    cls = getattr(skrank.estimators, name + ("CV" if kind == "cv" else ""))
    if metric in TWO_WAY:
        tpr_min, fpr_max = TWO_WAY[metric]
        return cls(fpr_range=(0.0, fpr_max), tpr_min=tpr_min, **params)
    return cls(**params) if metric == "ap" else cls(fpr_range=RANGES[metric], **params)


def reference(kind, metric):
    if kind == "cv":
        return LogisticRegressionCV(Cs=10, cv=5, scoring=metric_of(metric)[1], max_iter=1000)
    return LogisticRegression(max_iter=1000)


def _scores(model, X):
    return np.asarray(model.decision_function(X), dtype=np.float64)


def run_table(args):
    """Every estimator and reference on every split of one table: a list of records."""
    from threadpoolctl import threadpool_limits

    name, X, y, estimators, params, n_splits = args
    warnings.simplefilter("ignore")
    with threadpool_limits(1):
        _warm_up(estimators, params)
        return _run_table(name, X, y, estimators, params, n_splits)


def _warm_up(estimators, params):
    """Fit every estimator once on a small problem, so that timings leave out the first fit.

    The first fit in a process loads (or compiles) the Numba kernels;
    ``benchmarks/first_fit.py`` measures that cost on its own.
    """
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 4))
    y = (X[:, 0] + rng.normal(size=300) > 1.0).astype(np.float64)
    for key in estimators:
        own = {p: (1.0 / len(y) if v == "1/n" else v) for p, v in params.items()}
        make_estimator(key, own).fit(X, y)


def _run_table(name, X, y, estimators, params, n_splits):
    records = []
    splitter = StratifiedShuffleSplit(n_splits=n_splits, test_size=0.3, random_state=0)
    for split, (train, test) in enumerate(splitter.split(np.zeros(len(y)), y)):
        scaler = MaxAbsScaler() if sp.issparse(X) else StandardScaler()
        X_train = scaler.fit_transform(X[train])
        X_test = scaler.transform(X[test])
        y_train, y_test = y[train], y[test]
        fitted = {}
        for key in estimators:
            metric, _, kind = key.partition("-")
            ref_key = ("ref-cv-" + metric) if kind == "cv" else "ref"
            for role, k in (("ref", ref_key), ("est", key)):
                if k in fitted:
                    continue
                own = {p: (1.0 / len(y_train) if v == "1/n" else v) for p, v in params.items()}
                model = (reference("cv" if k.startswith("ref-cv") else "", metric) if role == "ref"
                         else make_estimator(key, own))
                start = time.perf_counter()
                model.fit(X_train, y_train)
                fitted[k] = (model, time.perf_counter() - start)
            score = metric_of(metric)[0]
            row = dict(table=name, split=split, estimator=key, metric=metric)
            for role, k in (("ref", ref_key), ("est", key)):
                model, seconds = fitted[k]
                row[f"{role}_train"] = float(score(y_train, _scores(model, X_train)))
                row[f"{role}_test"] = float(score(y_test, _scores(model, X_test)))
                row[f"{role}_time"] = seconds
            records.append(row)
    return records


def _median_seconds(model, X, y, repeats):
    """The median over ``repeats`` fits of ``model`` on ``(X, y)``, in seconds."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        model.fit(X, y)
        times.append(time.perf_counter() - start)
    return float(np.median(times))


def cv_timing(name, X, y, estimators, params, repeats):
    """Seconds of ``LogisticRegressionCV`` and of each ``-cv`` estimator on the first split's training part.

    Both see the same five stratified folds (``cv=5``) and score by the
    estimator's metric.  Returns one record per estimator.
    """
    from threadpoolctl import threadpool_limits

    warnings.simplefilter("ignore")
    splitter = StratifiedShuffleSplit(n_splits=1, test_size=0.3, random_state=0)
    train, _ = next(splitter.split(np.zeros(len(y)), y))
    scaler = MaxAbsScaler() if sp.issparse(X) else StandardScaler()
    X_train, y_train = scaler.fit_transform(X[train]), y[train]
    records = []
    with threadpool_limits(1):
        _warm_up(estimators, params)
        for key in estimators:
            metric = key.partition("-")[0]
            own = {p: (1.0 / len(y_train) if v == "1/n" else v) for p, v in params.items()}
            ref = _median_seconds(reference("cv", metric), X_train, y_train, repeats)
            est = _median_seconds(make_estimator(key, own), X_train, y_train, repeats)
            records.append(dict(table=name, estimator=key, n_samples=int(X_train.shape[0]),
                                ref_seconds=ref, est_seconds=est, ratio=est / ref))
    return records


def print_cv_timing(records):
    keys = list(dict.fromkeys(r["estimator"] for r in records))
    head = f"{'table':<22} {'n':>7} {'LRCV s':>8} " + " ".join(f"{k + ' s':>13} {'x':>5}" for k in keys)
    print(head)
    print("-" * len(head))
    for table in dict.fromkeys(r["table"] for r in records):
        rows = {r["estimator"]: r for r in records if r["table"] == table}
        first = rows[keys[0]]
        cells = " ".join(f"{rows[k]['est_seconds']:>13.3f} {rows[k]['ratio']:>5.1f}" for k in keys)
        print(f"{table:<22} {first['n_samples']:>7} {first['ref_seconds']:>8.3f} {cells}")
    ratios = {k: [r["ratio"] for r in records if r["estimator"] == k] for k in keys}
    print(f"{'ratio median, max':<39} " + " ".join(
        f"{'':>13} {np.median(v):>5.1f}" for v in ratios.values()))
    print(f"{'':<39} " + " ".join(f"{'':>13} {max(v):>5.1f}" for v in ratios.values()))


def _load_tables(names, suite):
    """``(name, X, y)`` of the suite's tables named, in the suite's order."""
    return [(table.name, table.X, table.y) for table in load_suite(suite) if table.name in names]


def _interval(d):
    """Mean and 95% t interval of ``d`` (the mean three times when it has one value or no spread)."""
    d = np.asarray(d, dtype=np.float64)
    if d.size < 2 or np.all(d == d[0]):
        return float(d.mean()), float(d.mean()), float(d.mean())
    half = stats.t.ppf(0.975, d.size - 1) * d.std(ddof=1) / np.sqrt(d.size)
    return float(d.mean()), float(d.mean() - half), float(d.mean() + half)


def summarise(records):
    """Per estimator: per-table paired differences and the suite summary."""
    out = {}
    for key in dict.fromkeys(r["estimator"] for r in records):
        rows = [r for r in records if r["estimator"] == key]
        tables = list(dict.fromkeys(r["table"] for r in rows))
        per_table = []
        for t in tables:
            rt = [r for r in rows if r["table"] == t]
            test = [r["est_test"] - r["ref_test"] for r in rt]
            train = [r["est_train"] - r["ref_train"] for r in rt]
            mean, lo, hi = _interval(test)
            per_table.append(dict(
                table=t, gain=mean, low=lo, high=hi,
                outcome="win" if lo > 0 else ("loss" if hi < 0 else "tie"),
                train_gain=float(np.mean(train)),
                est_test=float(np.mean([r["est_test"] for r in rt])),
                ref_test=float(np.mean([r["ref_test"] for r in rt])),
                time_ratio=float(np.mean([r["est_time"] for r in rt]) / np.mean([r["ref_time"] for r in rt])),
            ))
        gains = [p["gain"] for p in per_table]
        mean, lo, hi = _interval(gains)
        outcomes = [p["outcome"] for p in per_table]
        worst = min(per_table, key=lambda p: p["gain"])
        out[key] = dict(
            per_table=per_table, gain=mean, low=lo, high=hi,
            wins=outcomes.count("win"), ties=outcomes.count("tie"), losses=outcomes.count("loss"),
            worst_table=worst["table"], worst_gain=worst["gain"],
            min_train_gain=min(p["train_gain"] for p in per_table),
            train_below=sum(p["train_gain"] < 0 for p in per_table),
            max_time_ratio=max(p["time_ratio"] for p in per_table),
            median_time_ratio=float(np.median([p["time_ratio"] for p in per_table])),
        )
    return out


def print_summary(summary, per_table=False):
    head = (f"{'estimator':<14} {'reference':<8} {'held-out gain [95% CI]':<30} {'W/T/L':<9} "
            f"{'worst table':<28} {'train: min gain (tables < 0)':<29} {'time x (median, max)'}")
    print(head)
    print("-" * len(head))
    for key, s in summary.items():
        ref = "LRCV" if key.endswith("-cv") else "LR"
        print(f"{key:<14} {ref:<8} {s['gain']:+.4f} [{s['low']:+.4f}, {s['high']:+.4f}]{'':<6} "
              f"{s['wins']}/{s['ties']}/{s['losses']:<5} {s['worst_table'][:18]:<18} {s['worst_gain']:+.4f}  "
              f"{s['min_train_gain']:+.4f} ({s['train_below']}){'':<17} "
              f"{s['median_time_ratio']:.1f}, {s['max_time_ratio']:.1f}")
        if per_table:
            for p in s["per_table"]:
                print(f"    {p['table']:<22} test {p['est_test']:.4f} vs {p['ref_test']:.4f}  "
                      f"gain {p['gain']:+.4f} "
                      f"[{p['low']:+.4f}, {p['high']:+.4f}] {p['outcome']:<4}  train {p['train_gain']:+.4f}  "
                      f"time x{p['time_ratio']:.1f}")


def plot(summary, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    keys = list(summary)
    height = 0.22 * len(summary[keys[0]]["per_table"]) + 1.5
    fig, axes = plt.subplots(1, len(keys), figsize=(2.6 * len(keys), height), sharey=True, squeeze=False)
    tables = [p["table"] for p in summary[keys[0]]["per_table"]]
    for ax, key in zip(axes[0], keys):
        by = {p["table"]: p for p in summary[key]["per_table"]}
        for i, t in enumerate(tables):
            p = by.get(t)
            if p is None:
                continue
            color = {"win": "tab:green", "loss": "tab:red", "tie": "tab:gray"}[p["outcome"]]
            ax.errorbar(p["gain"], i, xerr=[[p["gain"] - p["low"]], [p["high"] - p["gain"]]], fmt="o",
                        color=color, ms=3, lw=1)
        ax.axvline(0, color="k", lw=0.8)
        ref = "LRCV" if key.endswith("-cv") else "LR"
        ax.set_title(f"{key}\nvs {ref}", fontsize=9)
        ax.tick_params(labelsize=7)
    axes[0][0].set_yticks(range(len(tables)), tables)
    axes[0][0].invert_yaxis()
    fig.supxlabel("held-out metric minus the reference's (95% interval over splits)", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="the 5-table quick suite, 2 splits")
    parser.add_argument("--splits", type=int, default=None,
                        help="splits per table (default 5; 2 with --quick)")
    parser.add_argument("--tables", default=None, help="comma-separated table names (default: the suite)")
    parser.add_argument("--estimators", default="pauc01,pauc03,pauc0505,auroc,tpauc0503,tpauc0705,ap,"
                        "pauc01-cv,pauc03-cv,pauc0505-cv,ap-cv", help="comma-separated keys: <metric>[-cv], "
                        "metric in " + ", ".join(list(RANGES) + list(TWO_WAY) + ["ap"]))
    parser.add_argument("--params", default="{}", help="JSON dict of extra estimator parameters")
    parser.add_argument("--max-rows", type=int, default=None, help="subsample larger tables (stratified)")
    parser.add_argument("--jobs", type=int, default=1, help="tables fitted in parallel processes")
    parser.add_argument("--per-table", action="store_true")
    parser.add_argument("--json", default=None, help="write the records and the summary here")
    parser.add_argument("--plot", default=None, help="write the per-table gains figure here")
    parser.add_argument("--cv-timing", action="store_true",
                        help="time the -cv estimators against LogisticRegressionCV (no scores)")
    parser.add_argument("--repeats", type=int, default=3, help="fits per timing with --cv-timing (median)")
    args = parser.parse_args(argv)
    suite = "quick" if args.quick else "imbalanced"
    splits = args.splits or (2 if args.quick else 5)
    names = args.tables.split(",") if args.tables else list(suite_names(suite))
    if args.quick and args.tables:
        names = list(dict.fromkeys(list(suite_names("quick")) + names))
    estimators = args.estimators.split(",")
    params = json.loads(args.params)
    if args.cv_timing:
        estimators = [k for k in estimators if k.endswith("-cv")]
    jobs = []
    for name, X, y in _load_tables(names, "imbalanced" if args.tables else suite):
        if args.max_rows and X.shape[0] > args.max_rows:
            keep, _ = next(StratifiedShuffleSplit(n_splits=1, train_size=args.max_rows, random_state=0)
                           .split(np.zeros(len(y)), y))
            X, y = X[np.sort(keep)], y[np.sort(keep)]
        jobs.append((name, X, y, estimators, params, splits))
    start = time.perf_counter()
    if args.cv_timing:
        import skrank

        records = [r for name, X, y, *_ in jobs
                   for r in cv_timing(name, X, y, estimators, params, args.repeats)]
        print(f"{len(jobs)} tables, median of {args.repeats} fits, {time.perf_counter() - start:.0f} s; "
              f"skrank {skrank.__file__}; command: python {' '.join(sys.argv)}")
        print_cv_timing(records)
        if args.json:
            with open(args.json, "w") as f:
                json.dump(dict(records=records, params=params), f, indent=1)
        return records
    if args.jobs > 1:
        with ProcessPoolExecutor(args.jobs) as pool:
            results = list(pool.map(run_table, jobs))
    else:
        results = [run_table(job) for job in jobs]
    records = [r for table in results for r in table]
    summary = summarise(records)
    print(f"{len(jobs)} tables x {splits} splits, {time.perf_counter() - start:.0f} s; "
          f"params {params}; command: python {' '.join(sys.argv)}")
    print_summary(summary, args.per_table)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(records=records, summary=summary, params=params, splits=splits), f, indent=1)
    if args.plot:
        plot(summary, args.plot)
    return summary


if __name__ == "__main__":
    main()
