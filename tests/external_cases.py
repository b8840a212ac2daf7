"""The fits every external backend (Dask, array API) must reproduce: estimators, full-batch solvers, data.

Shared by ``test_dask.py`` and ``test_array_api.py``: each fits these on its
backend and compares with the NumPy fit.
"""

import numpy as np

from skrank import AveragePrecisionClassifier, PartialAUCClassifier
from skrank.estimators import (
    RankADMMClassifier,
    RankADMMRegressor,
    SpectralRiskClassifier,
    SpectralRiskRegressor,
)
from skrank.risks import Extremile, Superquantile


def data(task, n=1003, d=6, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    f = X @ rng.normal(size=d)
    if task == "classification":
        return X, (f + rng.normal(size=n) > 0.3).astype(int)
    return X, f + rng.standard_t(3, size=n)


ESTIMATORS = [
    (RankADMMClassifier(risk=Superquantile(q=0.6), tol=1e-10), "classification", "newton"),
    (RankADMMClassifier(risk=Superquantile(q=0.6), loss="hinge", tol=1e-10), "classification", "ipm"),
    (RankADMMRegressor(risk=Extremile(r=2.0), tol=1e-10), "regression", "newton"),
    (RankADMMRegressor(risk=Superquantile(q=0.5), loss="absolute", tol=1e-10), "regression", "ipm"),
    (SpectralRiskClassifier(risk=Superquantile(q=0.5), tol=1e-10), "classification", "newton"),
    (SpectralRiskRegressor(tol=1e-10), "regression", "newton"),
]
IDS = [f"{type(e).__name__}-{s}" for e, _, s in ESTIMATORS]


RANKERS = [
    (PartialAUCClassifier(solver="lbfgs", tol=1e-10), "lbfgs"),
    (PartialAUCClassifier(loss="logistic", fpr_range=(0.1, 0.6), tol=1e-10), "lbfgs"),
    (PartialAUCClassifier(fpr_range=(0.0, 1.0), loss="squared", rank_weight=1.0), "exact"),
    (PartialAUCClassifier(solver="lbfgs", fpr_range=(0.0, 1.0), loss="squared", tol=1e-10), "lbfgs"),
    (AveragePrecisionClassifier(tol=1e-10), "lbfgs"),
    (AveragePrecisionClassifier(loss="logistic", tol=1e-10), "lbfgs"),
]
RANKER_IDS = [f"{type(e).__name__}-{e.solver}-{e.loss}-{s}" for e, s in RANKERS]
