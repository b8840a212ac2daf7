"""verbose: one progress format for every solver, silent by default."""

import re
import warnings

import numpy as np
import pytest

from skrank import AveragePrecisionClassifier, PartialAUCClassifier
from skrank.estimators import RankADMMClassifier, RankADMMRegressor, SpectralRiskClassifier
from skrank.solvers.progress import Progress

_LINE = re.compile(r"^\[([\w-]+)\] [\w ]+ \d+(/\d+)?  F=\S+  [^=]+=\S+  \d+\.\d\d s")

CASES = [
    (RankADMMClassifier, dict(risk="superquantile"), "newton"),
    (RankADMMClassifier, dict(risk="superquantile", loss="hinge"), "ipm"),
    (RankADMMClassifier, dict(solver="admm", max_iter=50), "admm"),
    (RankADMMClassifier, dict(risk="ranked_range", solver="dca", max_iter=3), "dca"),
    (RankADMMClassifier, dict(risk="ranked_range", solver="agd", max_iter=2), "agd"),
    (RankADMMRegressor, dict(solver="sgd", max_iter=3), "sgd"),
    (RankADMMRegressor, dict(solver="lsvrg", max_iter=3), "lsvrg"),
    (SpectralRiskClassifier, dict(solver="sorel", max_iter=5), "sorel"),
    (SpectralRiskClassifier, dict(solver="prospect", max_iter=3), "prospect"),
    (PartialAUCClassifier, dict(), "lbfgs"),
    (PartialAUCClassifier, dict(solver="agd-sbcd", max_iter=2), "agd-sbcd"),
    (PartialAUCClassifier, dict(solver="ppd-sg", fpr_range=(0, 1), loss="squared", max_iter=2), "ppd-sg"),
    (AveragePrecisionClassifier, dict(solver="soap", max_iter=3), "soap"),
]


def _data(regression=False):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(150, 3))
    f = X @ np.array([1.0, -1.0, 0.5])
    return X, (f + rng.normal(size=150) if regression else (f + rng.normal(size=150) > 0.3).astype(int))


@pytest.mark.parametrize("Est, params, name", CASES, ids=[c[2] for c in CASES])
def test_every_solver_prints_progress_lines_and_a_summary(Est, params, name, capsys):
    X, y = _data(Est is RankADMMRegressor)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        Est(verbose=1, **params).fit(X, y)
        out = capsys.readouterr().out.splitlines()
        progress = [line for line in out if _LINE.match(line)]
        assert progress, out
        assert any(line.startswith(f"[{Est.__name__}] solver=") for line in out)
        Est(**params).fit(X, y)
        assert capsys.readouterr().out == ""


def test_verbose_one_prints_a_tenth_of_the_iterations_and_two_prints_all(capsys):
    for verbose, expected in ((1, [1, 10, 20, 30, 40, 50, 60, 70, 80, 90, 100]), (2, list(range(1, 101)))):
        progress = Progress("x", verbose, max_iter=100)
        for k in range(1, 101):
            progress(k, 1.0, 0.5)
        lines = capsys.readouterr().out.splitlines()
        assert [int(re.search(r"iteration (\d+)/", line).group(1)) for line in lines] == expected


@pytest.mark.parametrize("Est, module, stochastic", [
    (PartialAUCClassifier, "partial_auc", "agd-sbcd"),
    (AveragePrecisionClassifier, "average_precision", "soap"),
], ids=["agd-sbcd", "soap"])
def test_the_summary_names_the_solver_that_auto_ran(Est, module, stochastic, monkeypatch, capsys):
    """A costly pass moves "auto" from L-BFGS to a stochastic solver: the summary line says which ran."""
    import importlib

    X, y = _data()
    monkeypatch.setattr(importlib.import_module(f"skrank.estimators.{module}"), "_AUTO_MAX_LOGISTIC_PAIRS", 0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        clf = Est(loss="logistic", rank_weight=1.0, max_iter=2, random_state=0, verbose=1).fit(X, y)
    out = capsys.readouterr().out.splitlines()
    assert {_LINE.match(line).group(1) for line in out if _LINE.match(line)} == {stochastic}
    (summary,) = [line for line in out if line.startswith(f"[{Est.__name__}]")]
    assert summary.startswith(f"[{Est.__name__}] solver={stochastic!r} ")
    assert clf._solver == clf._solver_info[0]["solver"] == stochastic
    # without the costly pass "auto" keeps L-BFGS, and says so
    monkeypatch.undo()
    Est(loss="logistic", rank_weight=1.0, verbose=1).fit(X, y)
    assert f"[{Est.__name__}] solver='lbfgs' " in capsys.readouterr().out
