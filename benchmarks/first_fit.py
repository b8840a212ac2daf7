"""The first fit of every estimator in a fresh process: empty Numba cache, then warm.

Each row fits ``skrank.<estimator>(**params)`` on a 2,000 x 20 synthetic
table (``make_classification`` / ``make_regression``) in a new Python
process with a new Numba cache directory, then again in a second process
that finds the cache the first one wrote.  The goal is under 5 s with the
empty cache and under 0.5 s with the warm one.

Run: ``python benchmarks/first_fit.py``
"""


from _first_fit import first_fit

CONFIGS = [
    ("SpectralRiskClassifier", {}),
    ("SpectralRiskRegressor", {}),
    ("RankADMMClassifier", {}),
    ("RankADMMClassifier", {"risk": "superquantile", "penalty": "l1"}),
    ("RankADMMClassifier", {"loss": "hinge", "risk": "superquantile"}),
    ("RankADMMClassifier", {"loss": "hinge", "risk": "extremile"}),
    ("RankADMMClassifier", {"risk": "ranked_range"}),
    ("RankADMMRegressor", {}),
    ("RankADMMRegressor", {"loss": "absolute"}),
    ("PartialAUCClassifier", {"random_state": 0}),
    ("AveragePrecisionClassifier", {"random_state": 0}),
    ("PartialAUCClassifierCV", {}),
    ("AveragePrecisionClassifierCV", {}),
]


def main():
    print("| estimator | parameters | empty cache s | warm cache s | import s |")
    print("|---|---|---|---|---|")
    for name, params in CONFIGS:
        cold, warm, imported = first_fit(name, **params)
        shown = ", ".join(f"{k}={v!r}" for k, v in params.items() if k != "random_state") or "defaults"
        print(f"| {name} | {shown} | {cold} | {warm} | {imported} |", flush=True)
    print("\nreproduce: python benchmarks/first_fit.py")


if __name__ == "__main__":
    main()
