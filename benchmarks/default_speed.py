"""Every estimator's default fit against LogisticRegression's (or Ridge's) time, table by table.

The fit-time goal of skrank is that a default fit costs at most a few times
scikit-learn's plain linear model on the same data.  On every table of
``skrank.datasets.load_suite("imbalanced")`` (binary; against
``LogisticRegression()``) and ``load_suite("regression")`` (against
``Ridge()``), with features standardised (``MaxAbsScaler`` for sparse
tables) and at most ``--max-rows`` rows (a stratified subsample), each
estimator is fitted with its defaults ``--repeats`` times, interleaved
with the reference, and the ratio of the median fit times is printed.

Every estimator is fitted once on a small problem first, so that the ratios
leave out the first fit of a process (which loads the compiled kernels;
``benchmarks/first_fit.py`` measures it).  These machines are noisy: compare
ratios from one run.

Usage (from the repository root; one thread per process)::

    OMP_NUM_THREADS=1 python benchmarks/default_speed.py
    OMP_NUM_THREADS=1 python benchmarks/default_speed.py --estimators RankADMMClassifier --per-table
    OMP_NUM_THREADS=1 python benchmarks/default_speed.py --quick --set alpha=None
    OMP_NUM_THREADS=1 python benchmarks/default_speed.py --write-docs   # the docs' fit-time figures

``--write-docs`` writes the summary of the run for the docs' pages to
include, one sentence to ``doc/fit_times_sentence.inc`` and a table to
``doc/fit_times.inc``, and puts the same sentence between the
``fit-times`` markers of ``README.md``, so that every fit-time figure the
project states comes from one run.
"""

import argparse
import functools
import pathlib
import re
import sys
import time
import warnings

import numpy as np
import scipy.sparse as sp
from sklearn.linear_model import LogisticRegression, Ridge
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import MaxAbsScaler, StandardScaler

import skrank.estimators as estimators
from skrank.datasets import load_suite

CLASSIFIERS = ("PartialAUCClassifier", "AveragePrecisionClassifier", "SpectralRiskClassifier",
               "RankADMMClassifier")
REGRESSORS = ("SpectralRiskRegressor", "RankADMMRegressor")


def prepare(table, max_rows, seed=0):
    """Standardised features and the target of one table, subsampled to ``max_rows``."""
    X, y = table.X, table.y
    if X.shape[0] > max_rows:
        stratify = y if table.task == "binary" else None
        X, _, y, _ = train_test_split(X, y, train_size=max_rows, random_state=seed, stratify=stratify)
    X = MaxAbsScaler().fit_transform(X) if sp.issparse(X) else StandardScaler().fit_transform(X)
    return X, y


def fit_time(make, X, y):
    """Seconds of one fit, warnings silenced."""
    model = make()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        start = time.perf_counter()
        model.fit(X, y)
    return time.perf_counter() - start


def warm_up(names):
    """One small fit of every estimator (compiles or loads the kernels)."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 5))
    y = (X[:, 0] + rng.normal(size=200) > 0).astype(float)
    for name in names:
        fit_time(getattr(estimators, name), X, y if "Classifier" in name else X[:, 0])


def ratios_on(table, names, reference, repeats, max_rows):
    """``{name: (median time, median time / reference's)}`` on one table."""
    X, y = prepare(table, max_rows)
    times = {name: [] for name in (*names, "reference")}
    for _ in range(repeats):
        times["reference"].append(fit_time(reference, X, y))
        for name in names:
            times[name].append(fit_time(getattr(estimators, name), X, y))
    ref = float(np.median(times["reference"]))
    return X.shape, ref, {name: (float(np.median(times[name])), float(np.median(times[name])) / ref)
                          for name in names}


ROOT = pathlib.Path(__file__).resolve().parents[1]
#: The generated fragments of the docs (the summary sentence; the table) and the README's markers.
SENTENCE_FRAGMENT = ROOT / "doc" / "fit_times_sentence.inc"
TABLE_FRAGMENT = ROOT / "doc" / "fit_times.inc"
README_MARKERS = ("<!-- fit-times: written by benchmarks/default_speed.py --write-docs -->",
                  "<!-- /fit-times -->")


def summary_sentence(worst, tables):
    """One sentence of the classifiers' median and largest ratios to LogisticRegression's fit time."""
    rows = {name: rows for name, rows in worst.items() if name in CLASSIFIERS}
    medians = [float(np.median([r for r, _ in values])) for values in rows.values()]
    ratio, table, name = max((*max(values), name) for name, values in rows.items())
    return (f"On the {tables} tables of the imbalanced suite, a default fit of each classifier takes a "
            f"median {min(medians):.1f} to {max(medians):.1f} times LogisticRegression's time, and at most "
            f"{ratio:.1f} times ({name} on {table}).")


def summary_table(worst, references):
    """The run's figures as a reStructuredText table: median and largest ratio, tables over 5x."""
    header = ("estimator", "against", "median ratio", "largest (table)", "tables over 5x")
    body = []
    for name, rows in worst.items():
        values = np.array([r for r, _ in rows])
        top = max(rows)
        over = sorted((t for r, t in rows if r > 5.0))
        over_cell = f"{len(over)}" + (f" ({', '.join(over)})" if over else "")
        body.append((f"``{name}``", f"``{references[name]}()``", f"{np.median(values):.1f}x",
                     f"{top[0]:.1f}x (``{top[1]}``)", over_cell))
    widths = [max(len(row[i]) for row in (header, *body)) for i in range(len(header))]
    rule = "  ".join("=" * w for w in widths)
    lines = [rule, "  ".join(h.ljust(w) for h, w in zip(header, widths)).rstrip(), rule]
    lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in body]
    return "\n".join(lines + [rule])


def write_docs(worst, references, tables, command):
    """Write the run's sentence and table to the docs' fragments and its sentence into the README."""
    sentence = summary_sentence(worst, tables)
    SENTENCE_FRAGMENT.write_text(sentence + "\n")
    TABLE_FRAGMENT.write_text(f"{summary_table(worst, references)}\n\nCommand::\n\n    {command}\n")
    readme = (ROOT / "README.md").read_text()
    start, end = README_MARKERS
    pattern = re.compile(re.escape(start) + ".*?" + re.escape(end), flags=re.S)
    if not pattern.search(readme):
        raise SystemExit(f"README.md lacks the markers {start} ... {end}")
    (ROOT / "README.md").write_text(pattern.sub(lambda _: f"{start}\n{sentence}\n{end}", readme))
    print(f"wrote {SENTENCE_FRAGMENT.relative_to(ROOT)}, {TABLE_FRAGMENT.relative_to(ROOT)} and README.md's "
          "fit-time sentence")


def _literal(text):
    """``None``, a number or the string itself."""
    if text == "None":
        return None
    try:
        return float(text) if any(c in text for c in ".e") else int(text)
    except ValueError:
        return text


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--estimators", default=",".join(CLASSIFIERS + REGRESSORS))
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--max-rows", type=int, default=50_000)
    parser.add_argument("--goal", type=float, default=5.0, help="the largest ratio allowed (5)")
    parser.add_argument("--per-table", action="store_true")
    parser.add_argument("--quick", action="store_true", help="the quick suite, and 5 regression tables")
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                        help="a parameter for every estimator, e.g. --set alpha=None (repeatable)")
    parser.add_argument("--write-docs", action="store_true",
                        help="write the summary to doc/fit_times.inc and README.md (a full run only)")
    args = parser.parse_args(argv)
    names = args.estimators.split(",")
    params = {key: _literal(value) for key, value in (item.split("=", 1) for item in args.set)}
    if params:
        for name in names:
            setattr(estimators, name, functools.partial(getattr(estimators, name), **params))
    if args.write_docs and (args.quick or params or set(names) != set(CLASSIFIERS + REGRESSORS)):
        raise SystemExit("--write-docs summarises a full run of every estimator with its defaults")
    warm_up(names)
    worst, references, counted = {}, {}, 0
    binary = "quick" if args.quick else "imbalanced"
    groups = ((binary, CLASSIFIERS, LogisticRegression), ("regression", REGRESSORS, Ridge))
    for suite, group, reference in groups:
        chosen = [name for name in names if name in group]
        if not chosen:
            continue
        tables = load_suite(suite)
        if group is CLASSIFIERS:
            counted = len(tables[:5] if args.quick else tables)
        references.update({name: reference.__name__ for name in chosen})
        for table in tables[:5] if args.quick else tables:
            shape, ref, result = ratios_on(table, chosen, reference, args.repeats, args.max_rows)
            if args.per_table:
                cells = "  ".join(f"{name[:14]:>14} {ratio:5.1f}x" for name, (_, ratio) in result.items())
                print(f"{table.name:<24} {shape[0]:>7} x {shape[1]:<4} ref {ref * 1e3:8.1f} ms  {cells}",
                      flush=True)
            for name, (_, ratio) in result.items():
                worst.setdefault(name, []).append((ratio, table.name))
    print(f"\n{'estimator':<28} {'tables':>6} {'median':>7} {'max':>7}  worst table      over {args.goal:g}x")
    for name, rows in worst.items():
        values = np.array([r for r, _ in rows])
        top = max(rows)
        over = [t for r, t in rows if r > args.goal]
        print(f"{name:<28} {len(rows):>6} {np.median(values):6.1f}x {top[0]:6.1f}x  {top[1]:<16} "
              f"{len(over)} {', '.join(over[:6])}")
    given = sys.argv[1:] if argv is None else argv
    command = "OMP_NUM_THREADS=1 python benchmarks/default_speed.py " + " ".join(given)
    print("\nreproduce: " + command)
    if args.write_docs:
        write_docs(worst, references, counted, command.strip())


if __name__ == "__main__":
    main()
