"""What a superquantile buys on held-out data: the tail and the mean of the losses against q.

``SpectralRiskClassifier(risk=Superquantile(q))`` on the imbalanced suite
(logistic loss, against ``LogisticRegression()``) and
``SpectralRiskRegressor(risk=Superquantile(q))`` on the regression suite
(squared loss, against ``Ridge()``), for each ``q`` of ``--levels``.
Each table is split ``--splits`` times 70/30 (stratified for
classification; seeds 0, 1, ...), the features standardised on the training
part (and the regression target too).  On the test part, for the per-sample
losses of each model (the logistic loss of its decision function, or the
squared error):

* ``CVaR``: the mean of the worst ``1 - --tail`` fraction of the losses
  (default: the worst 20%, CVaR at 0.8);
* ``mean``: the mean loss.

Printed, for each ``q``: the geometric mean over tables of the ratios
``model / reference`` of each (below 1 is better), the tables where the
model's held-out CVaR is lower, and those where its mean loss is more than
10% higher.  ``--plot`` draws both ratios against ``q``.

``--classifiers`` compares instead the spectral classifiers' risks
(``--models``: the default ``SpectralRiskClassifier()``, which minimises
``ExponentialSpectral(rho=1)``, the superquantile at ``q = 0.8``, its
earlier default, and more) with ``LogisticRegression()`` on every table of the imbalanced
suite (the sparse ``flights`` table scaled by ``MaxAbsScaler``), paired
over the splits.  Printed per model: the geometric mean over tables of
the held-out CVaR ratio, the mean paired differences of the held-out area
under the ROC curve and accuracy with a 95% t interval over the tables and
the tables won, tied and lost (a table is won or lost when the t interval
of its paired differences over the splits excludes 0), and the tables
where the fit is the constant classifier (``coef_`` zero on a split).

Usage (from the repository root)::

    OMP_NUM_THREADS=1 python benchmarks/tabular_tail_risk.py
    OMP_NUM_THREADS=1 python benchmarks/tabular_tail_risk.py --quick
    OMP_NUM_THREADS=1 python benchmarks/tabular_tail_risk.py --quick --alpha None   # alpha = 1 / n
    OMP_NUM_THREADS=1 python benchmarks/tabular_tail_risk.py --plot tail.png --json tail.json
    OMP_NUM_THREADS=1 python benchmarks/tabular_tail_risk.py --classifiers --splits 3
"""

import argparse
import json
import os
import sys
import time
import warnings

import numpy as np
import scipy.sparse as sp
from scipy.special import log_expit
from sklearn.linear_model import LogisticRegression, Ridge
from sklearn.metrics import roc_auc_score
from sklearn.model_selection import ShuffleSplit, StratifiedShuffleSplit
from sklearn.preprocessing import MaxAbsScaler, StandardScaler

from skrank.datasets import load_suite
from skrank.estimators import SpectralRiskClassifier, SpectralRiskRegressor
from skrank.risks import ERM, ExponentialSpectral, Extremile, Superquantile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tabular_suite import _interval  # noqa: E402  (the paired intervals of the suite's tables)

#: The classifiers of ``--classifiers``: the risk each ``SpectralRiskClassifier`` minimises.
CLASSIFIERS = {
    "default": None,  # SpectralRiskClassifier(): ExponentialSpectral(rho=1)
    "cvar0.8": Superquantile(q=0.8),
    "cvar0.5": Superquantile(q=0.5),
    "exponential2": ExponentialSpectral(rho=2.0),
    "extremile2": Extremile(r=2.0),
    "erm": ERM(),
}


def tail_mean(losses, tail):
    """Mean of the largest ``1 - tail`` fraction of ``losses``."""
    s = np.sort(losses)[::-1]
    k = max(1, int(np.ceil((1.0 - tail) * s.size)))
    return float(s[:k].mean())


def _losses(task, model, X, y):
    if task == "binary":
        return -log_expit(np.where(y > 0, 1.0, -1.0) * model.decision_function(X))
    return (model.predict(X) - y) ** 2


def run_table(table, levels, splits, tail, max_rows, params):
    X, y, task = table.X, table.y, table.task
    if sp.issparse(X):
        return []
    splitter = (StratifiedShuffleSplit if task == "binary" else ShuffleSplit)(
        n_splits=splits, test_size=0.3, random_state=0)
    rows = []
    for split, (train, test) in enumerate(splitter.split(np.zeros(len(y)), y)):
        if max_rows and train.size > max_rows:
            train = np.random.RandomState(split).choice(train, max_rows, replace=False)
        scaler = StandardScaler().fit(X[train])
        X_train, X_test = scaler.transform(X[train]), scaler.transform(X[test])
        y_train, y_test = y[train], y[test]
        if task == "regression":
            mu, sd = y_train.mean(), y_train.std()
            y_train, y_test = (y_train - mu) / sd, (y_test - mu) / sd
        ref = (LogisticRegression(max_iter=1000) if task == "binary" else Ridge()).fit(X_train, y_train)
        ref_losses = _losses(task, ref, X_test, y_test)
        for q in levels:
            cls = SpectralRiskClassifier if task == "binary" else SpectralRiskRegressor
            kwargs = dict(params)
            if "alpha" in kwargs and kwargs["alpha"] is None:
                kwargs["alpha"] = 1.0 / X_train.shape[0]  # LogisticRegression(C=1)'s, Ridge(alpha=1)'s
            model = cls(risk=Superquantile(q=q), **kwargs).fit(X_train, y_train)
            losses = _losses(task, model, X_test, y_test)
            rows.append(dict(table=table.name, task=task, split=split, q=q,
                             cvar_ratio=tail_mean(losses, tail) / tail_mean(ref_losses, tail),
                             mean_ratio=float(losses.mean() / ref_losses.mean())))
    return rows


def run_classifiers(table, models, splits, tail, max_rows):
    """Each classifier of ``models`` and ``LogisticRegression()`` on every split of one table: records."""
    X, y = table.X, table.y
    splitter = StratifiedShuffleSplit(n_splits=splits, test_size=0.3, random_state=0)
    rows = []
    for split, (train, test) in enumerate(splitter.split(np.zeros(len(y)), y)):
        if max_rows and train.size > max_rows:
            train = np.random.RandomState(split).choice(train, max_rows, replace=False)
        scaler = (MaxAbsScaler() if sp.issparse(X) else StandardScaler()).fit(X[train])
        X_train, X_test = scaler.transform(X[train]), scaler.transform(X[test])
        y_train, y_test = y[train], y[test]
        ref = LogisticRegression(max_iter=1000).fit(X_train, y_train)
        ref_losses = _losses("binary", ref, X_test, y_test)
        ref_auc = roc_auc_score(y_test, ref.decision_function(X_test))
        ref_acc = ref.score(X_test, y_test)
        for key in models:
            risk = CLASSIFIERS[key]
            model = SpectralRiskClassifier() if risk is None else SpectralRiskClassifier(risk=risk)
            start = time.perf_counter()
            model.fit(X_train, y_train)
            seconds = time.perf_counter() - start
            losses = _losses("binary", model, X_test, y_test)
            rows.append(dict(table=table.name, model=key, split=split, seconds=seconds,
                             constant=bool(not np.any(model.coef_)),
                             cvar_ratio=tail_mean(losses, tail) / tail_mean(ref_losses, tail),
                             auc=float(roc_auc_score(y_test, model.decision_function(X_test))),
                             ref_auc=float(ref_auc), acc=float(model.score(X_test, y_test)),
                             ref_acc=float(ref_acc)))
    return rows


def _paired(rows, tables, metric):
    """Mean paired difference over the tables with its interval, and the tables won, tied and lost."""
    per_table, outcomes = [], []
    for t in tables:
        _, low, high = _interval([r[metric] - r["ref_" + metric] for r in rows if r["table"] == t])
        per_table.append(np.mean([r[metric] - r["ref_" + metric] for r in rows if r["table"] == t]))
        outcomes.append("win" if low > 0 else ("loss" if high < 0 else "tie"))
    mean, low, high = _interval(per_table)
    return dict(gain=mean, low=low, high=high, wins=outcomes.count("win"), ties=outcomes.count("tie"),
                losses=outcomes.count("loss"), per_table=[float(g) for g in per_table])


def summarise_classifiers(rows, models):
    """Per model: the held-out CVaR ratio, the paired AUC and accuracy differences, the constant fits."""
    out = {}
    for key in models:
        rs = [r for r in rows if r["model"] == key]
        tables = list(dict.fromkeys(r["table"] for r in rs))
        cvar = np.array([np.mean([r["cvar_ratio"] for r in rs if r["table"] == t]) for t in tables])
        out[key] = dict(
            tables=len(tables), cvar_ratio=float(np.exp(np.log(cvar).mean())),
            cvar_range=(float(cvar.min()), float(cvar.max())), cvar_lower=int((cvar < 1).sum()),
            auc=_paired(rs, tables, "auc"), acc=_paired(rs, tables, "acc"),
            constant=sorted({r["table"] for r in rs if r["constant"]}),
            median_seconds=float(np.median([r["seconds"] for r in rs])))
    return out


def print_classifiers(summary):
    head = (f"{'model':<13} {'tables':>6}  {'CVaR ratio (min, max)':<23} {'AUC - LR [95% CI]':<27} "
            f"{'W/T/L':<8} {'accuracy - LR [95% CI]':<27} {'W/T/L':<8} {'constant':>8}  fit s")
    print(head)
    print("-" * len(head))
    for key, s in summary.items():
        cells = []
        for metric in ("auc", "acc"):
            m = s[metric]
            cells.append(f"{m['gain']:+.4f} [{m['low']:+.4f}, {m['high']:+.4f}]  "
                         f"{m['wins']}/{m['ties']}/{m['losses']:<4}")
        print(f"{key:<13} {s['tables']:>6}  {s['cvar_ratio']:.3f} ({s['cvar_range'][0]:.2f}, "
              f"{s['cvar_range'][1]:.2f}){'':<5} {cells[0]}  {cells[1]}  {len(s['constant']):>6}  "
              f"{s['median_seconds']:.2f}")
    for key, s in summary.items():
        if s["constant"]:
            print(f"{key}: constant classifier on {', '.join(s['constant'])}")


def main_classifiers(args):
    models = args.models.split(",")
    unknown = [m for m in models if m not in CLASSIFIERS]
    if unknown:
        raise SystemExit(f"unknown --models {unknown}; choose among {list(CLASSIFIERS)}")
    splits = args.splits or 3
    tables = list(load_suite("quick" if args.quick else "imbalanced"))
    if args.tables:
        tables = [t for t in tables if t.name in args.tables.split(",")]
    warnings.simplefilter("ignore")
    start = time.perf_counter()
    rows = [r for t in tables for r in run_classifiers(t, models, splits, args.tail, args.max_rows)]
    summary = summarise_classifiers(rows, models)
    print(f"{len(tables)} tables x {splits} splits, {time.perf_counter() - start:.0f} s; "
          f"command: OMP_NUM_THREADS=1 python {' '.join(sys.argv)}")
    print(f"held-out CVaR {args.tail:g} of the logistic losses, AUC and accuracy of SpectralRiskClassifier("
          "risk=...) against LogisticRegression(), paired over the splits")
    print_classifiers(summary)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(rows=rows, summary=summary), f, indent=1)
    return summary


def summarise(rows, levels):
    out = {}
    for task in ("binary", "regression"):
        for q in levels:
            rs = [r for r in rows if r["task"] == task and r["q"] == q]
            if not rs:
                continue
            tables = list(dict.fromkeys(r["table"] for r in rs))
            cvar = np.array([np.mean([r["cvar_ratio"] for r in rs if r["table"] == t]) for t in tables])
            mean = np.array([np.mean([r["mean_ratio"] for r in rs if r["table"] == t]) for t in tables])
            out[f"{task} q={q}"] = dict(
                task=task, q=q, tables=len(tables),
                cvar_ratio=float(np.exp(np.log(cvar).mean())), mean_ratio=float(np.exp(np.log(mean).mean())),
                cvar_lower=int((cvar < 1).sum()), mean_worse_10=int((mean > 1.1).sum()),
                cvar_range=(float(cvar.min()), float(cvar.max())),
                mean_range=(float(mean.min()), float(mean.max())))
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true",
                        help="the quick suite and 3 regression tables, 2 splits")
    parser.add_argument("--levels", default="0.5,0.8,0.9", help="superquantile levels q")
    parser.add_argument("--tail", type=float, default=0.8, help="CVaR level of the held-out losses")
    parser.add_argument("--splits", type=int, default=None, help="splits per table (default 3)")
    parser.add_argument("--max-rows", type=int, default=20000, help="training rows at most (subsampled)")
    parser.add_argument("--alpha", default=None,
                        help="the estimators' alpha: a number, or None for 1 / n_samples (default: theirs)")
    parser.add_argument("--json", default=None)
    parser.add_argument("--plot", default=None)
    parser.add_argument("--classifiers", action="store_true",
                        help="compare the classifiers' risks of --models with LogisticRegression()")
    parser.add_argument("--models", default="default,cvar0.8,cvar0.5,exponential2,extremile2,erm",
                        help="with --classifiers: comma-separated keys among " + ", ".join(CLASSIFIERS))
    parser.add_argument("--tables", default=None, help="with --classifiers: comma-separated table names")
    args = parser.parse_args(argv)
    if args.classifiers:
        return main_classifiers(args)
    levels = [float(q) for q in args.levels.split(",")]
    splits = args.splits or (2 if args.quick else 3)
    tables = list(load_suite("quick" if args.quick else "imbalanced"))
    tables += load_suite("regression")[:3] if args.quick else load_suite("regression")
    warnings.simplefilter("ignore")
    start = time.perf_counter()
    params = {} if args.alpha is None else {"alpha": None if args.alpha == "None" else float(args.alpha)}
    rows = [r for t in tables for r in run_table(t, levels, splits, args.tail, args.max_rows, params)]
    summary = summarise(rows, levels)
    print(f"{len(tables)} tables x {splits} splits, {time.perf_counter() - start:.0f} s; "
          f"command: python {' '.join(sys.argv)}")
    print(f"{'model':<22} {'tables':>6}  {'CVaR ratio':>10} {'(min, max)':<16} {'mean ratio':>10} "
          f"{'(min, max)':<16} CVaR lower  mean +10%")
    for key, s in summary.items():
        print(f"{key:<22} {s['tables']:>6}  {s['cvar_ratio']:>10.3f} ({s['cvar_range'][0]:.2f}, "
              f"{s['cvar_range'][1]:.2f})   {s['mean_ratio']:>10.3f} ({s['mean_range'][0]:.2f}, "
              f"{s['mean_range'][1]:.2f})   {s['cvar_lower']:>5}  {s['mean_worse_10']:>8}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(rows=rows, summary=summary), f, indent=1)
    if args.plot:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, axes = plt.subplots(1, 2, figsize=(8, 3.2))
        for ax, task, ref in zip(axes, ("binary", "regression"), ("LogisticRegression", "Ridge")):
            qs = [s["q"] for s in summary.values() if s["task"] == task]
            ax.plot(qs, [s["cvar_ratio"] for s in summary.values() if s["task"] == task], "o-",
                    label=f"held-out CVaR {args.tail:g}")
            ax.plot(qs, [s["mean_ratio"] for s in summary.values() if s["task"] == task], "s--",
                    label="held-out mean loss")
            ax.axhline(1, color="k", lw=0.8)
            ax.set_xlabel("superquantile level q of the fit")
            ax.set_title(f"{task}: ratio to {ref}\n(geometric mean over tables)", fontsize=9)
            ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(args.plot, dpi=110)
    return summary


if __name__ == "__main__":
    main()
