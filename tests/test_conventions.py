"""The conventions every estimator shares."""

import inspect

import pytest

import skrank

ESTIMATORS = ["SpectralRiskClassifier", "SpectralRiskRegressor", "RankADMMClassifier",
              "RankADMMRegressor", "PartialAUCClassifier", "AveragePrecisionClassifier"]


@pytest.mark.parametrize("name", ESTIMATORS)
def test_estimator_is_exported_with_a_keyword_only_constructor(name):
    assert name in skrank.__all__
    params = list(inspect.signature(getattr(skrank, name).__init__).parameters.values())[1:]
    assert params and all(p.kind is p.KEYWORD_ONLY for p in params)
    shared = {"max_iter", "tol", "alpha", "random_state", "warm_start", "verbose"}
    assert shared <= {p.name for p in params}
    assert "max_epochs" not in {p.name for p in params}


def test_api_reference_names_resolve_and_list_every_estimator():
    import importlib
    import pathlib
    import re

    text = (pathlib.Path(__file__).parents[1] / "doc" / "api.rst").read_text()
    names = re.findall(r"^\.\. auto(?:class|function):: (\S+)$", text, flags=re.M)
    for name in names:
        module, _, attr = name.rpartition(".")
        assert hasattr(importlib.import_module(module), attr), name
    assert {f"skrank.{e}" for e in ESTIMATORS} <= set(names)


@pytest.mark.parametrize("module", ["spectral_risk", "rank_admm", "partial_auc", "average_precision"])
def test_docstring_examples_run(module):
    import doctest
    import importlib

    result = doctest.testmod(importlib.import_module(f"skrank.estimators.{module}"))
    assert result.attempted > 0 and result.failed == 0
