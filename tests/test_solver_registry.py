"""The table of rank-risk solvers (skrank.solvers._registry) and the estimators that read it."""

import warnings

import numpy as np
import pytest

from skrank.estimators import rank_admm, spectral_risk
from skrank.losses import get_loss
from skrank.penalties import get_penalty
from skrank.risks import ERM, HumanAligned, RankedRange, Superquantile
from skrank.solvers import SolverResult
from skrank.solvers._registry import SOLVERS, choose_solver

RISKS = [ERM(), Superquantile(q=0.6), RankedRange(), HumanAligned()]
LOSSES = ["logistic", "hinge", "huber", "absolute"]
PENALTIES = [("l2", 0.1), ("l1", 0.05), ("l2", 0.0)]


@pytest.mark.parametrize("module", [rank_admm, spectral_risk])
def test_every_estimator_solver_is_in_the_table(module):
    for name in module._SOLVERS:
        if name == "auto":
            continue
        assert callable(SOLVERS[name].load())
    for name in module._AUTO:
        assert name in module._SOLVERS


def _problem(loss):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(30, 3))
    f = X @ np.array([1.0, -1.0, 0.5])
    if loss.task == "classification":
        return X, np.where(f + rng.normal(size=30) > 0, 1.0, -1.0)
    return X, f + rng.normal(size=30)


@pytest.mark.parametrize("name", sorted(SOLVERS))
def test_a_solver_runs_on_what_the_table_says_it_fits(name):
    """The table is truthful: a problem it accepts runs; the others are refused with a reason."""
    info = SOLVERS[name]
    accepted = 0
    for risk in RISKS:
        for loss_name in LOSSES:
            loss = get_loss(loss_name)
            for pen_name, alpha in PENALTIES:
                penalty = get_penalty(pen_name, alpha)
                reason = info.unsupported(risk, loss, penalty)
                if reason is not None:
                    assert reason.startswith(f"solver={name!r} needs")
                    continue
                accepted += 1
                X, y = _problem(loss)
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    result = info.load()(X, y, risk, loss, penalty, max_iter=2, **info.options)
                assert isinstance(result, SolverResult)
                assert np.all(np.isfinite(result.coef))
    assert accepted > 0


def test_the_table_refuses_with_the_reason():
    logistic, hinge = get_loss("logistic"), get_loss("hinge")
    l2, none = get_penalty("l2", 0.1), get_penalty("l2", 0.0)
    assert "smooth loss" in SOLVERS["newton"].unsupported(ERM(), hinge, l2)
    assert "l2 part" in SOLVERS["newton"].unsupported(ERM(), get_loss("huber"), none)
    assert SOLVERS["newton"].unsupported(ERM(), get_loss("huber"), l2) is None
    assert "convex spectral" in SOLVERS["newton"].unsupported(RankedRange(), logistic, l2)
    assert "ranked-range" in SOLVERS["dca"].unsupported(Superquantile(), logistic, l2)
    assert "n only" in SOLVERS["prospect"].unsupported(HumanAligned(), logistic, l2)
    assert "strongly convex" in SOLVERS["sorel"].unsupported(ERM(), logistic, none)


def test_auto_takes_the_first_that_fits_and_a_refusal_names_one_that_does():
    logistic, hinge, l2 = get_loss("logistic"), get_loss("hinge"), get_penalty("l2", 0.1)
    assert choose_solver("auto", ("newton", "admm"), ERM(), logistic, l2).name == "newton"
    assert choose_solver("auto", ("newton", "admm"), ERM(), hinge, l2).name == "admm"
    assert choose_solver("auto", ("newton", "admm"), RankedRange(), logistic, l2).name == "admm"
    with pytest.raises(ValueError, match="smooth loss.*Use solver='admm'"):
        choose_solver("newton", ("newton", "admm"), ERM(), hinge, l2)
    assert choose_solver("dca", ("newton", "admm"), RankedRange(), hinge, l2).name == "dca"
