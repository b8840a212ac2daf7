"""What bounds the Newton solver's time against LogisticRegression / Ridge.

For each table, with the settings of ``benchmarks/real_tables.py``
(``Superquantile(q=0.5)``, ``alpha=1e-3``, standardised features and
regression targets, ``LogisticRegression(max_iter=10000)`` / ``Ridge()``):
the spectral-risk fit (certified Newton), its Newton
steps, the seconds of one weighted Gram matrix ``X' diag(h) X`` (the cost of
each step's Hessian) and of one pass ``X w`` plus ``X' r``, and the seconds
of scikit-learn's reference on the same data.  ``floor`` is steps times one
Gram matrix: the time of the Hessians alone, a lower bound of the fit that a
faster line search or PAVA would not remove.

    OMP_NUM_THREADS=1 python benchmarks/newton_bound.py [--tables hmda,ames,...]
"""

import argparse
import time
import warnings

import numpy as np
from sklearn.linear_model import LogisticRegression, Ridge
from sklearn.preprocessing import StandardScaler

from skrank.datasets import load_tabular
from skrank.estimators import SpectralRiskClassifier, SpectralRiskRegressor
from skrank.risks import Superquantile


def _best(fn, repeat=5):
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tables", default="hmda,credit,churn,caravan,lending_club,wage,ames,diamonds")
    args = parser.parse_args()
    print("| table | n x d | Newton s | steps | Gram s | pass s | floor = steps x Gram | reference s "
          "| ratio | floor / reference |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name in args.tables.split(","):
        X, y = load_tabular(name)
        X = X.toarray() if hasattr(X, "toarray") else np.asarray(X, dtype=float)
        X = StandardScaler().fit_transform(X)
        classification = len(np.unique(y)) == 2
        params = dict(risk=Superquantile(q=0.5), alpha=1e-3)
        if classification:
            est, ref = SpectralRiskClassifier(**params), LogisticRegression(max_iter=10_000)
        else:
            y = (y - np.mean(y)) / np.std(y)
            est, ref = SpectralRiskRegressor(**params), Ridge()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            est.fit(X, y)  # compiled and warm
            fit_s = _best(lambda: est.fit(X, y), 3)
            ref_s = _best(lambda: ref.fit(X, y), 3)
        Xb = np.hstack([X, np.ones((X.shape[0], 1))])
        h = np.random.default_rng(0).random(X.shape[0])
        gram_s = _best(lambda: Xb.T @ (Xb * h[:, None]))
        w, r = np.ones(Xb.shape[1]), np.ones(X.shape[0])
        pass_s = _best(lambda: (Xb @ w, Xb.T @ r))
        steps = int(est.n_iter_)
        floor = steps * gram_s
        print(f"| {name} | {X.shape[0]} x {X.shape[1]} | {fit_s:.3g} | {steps} | {gram_s:.2g} | "
              f"{pass_s:.2g} | {floor:.3g} | {ref_s:.3g} | {fit_s / ref_s:.3g} | {floor / ref_s:.3g} |",
              flush=True)
    print("\ncommand: OMP_NUM_THREADS=1 python benchmarks/newton_bound.py --tables " + args.tables)


if __name__ == "__main__":
    main()
