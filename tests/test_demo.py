"""The demo's table: its metrics against scikit-learn's, its winners and its legend."""

import numpy as np
import pytest
from sklearn.metrics import average_precision_score

from skrank import demo


def _row(dataset, model, **metrics):
    row = dict(dataset=dataset, n_train=70, n_test=30, n_features=3, positive_fraction=0.1, model=model,
               pauc=None, ap=None, cvar=None, rmse=None, fit_time=0.01, error=None)
    row.update(metrics)
    return row


def test_winners_follow_each_metrics_direction():
    rows = [
        _row("t", "a", pauc=0.60, ap=0.20, cvar=0.90),
        _row("t", "b", pauc=0.65, ap=0.20, cvar=0.95),
        _row("t", "c", pauc=0.55, ap=0.10, cvar=0.80),
        _row("u", "a", pauc=0.30, ap=0.50, cvar=1.0),
    ]
    winners = demo.best_models(rows)
    assert winners[("t", "pauc")] == ["b"]          # higher is better
    assert winners[("t", "cvar")] == ["c"]          # lower is better
    assert winners[("t", "ap")] == ["a", "b"]       # a tie names both
    assert winners[("u", "pauc")] == ["a"]
    assert ("t", "rmse") not in winners             # no value, no winner


def test_a_failed_fit_wins_nothing():
    rows = [_row("t", "a", pauc=0.6), _row("t", "b", pauc=0.9)]
    rows[1]["error"] = "ValueError: boom"
    assert demo.best_models(rows)[("t", "pauc")] == ["a"]


def test_table_stars_the_winners_and_names_them():
    rows = [_row("t", "first", pauc=0.60, cvar=0.9), _row("t", "second", pauc=0.65, cvar=0.8)]
    text = demo.format_table(rows)
    lines = text.splitlines()
    assert "(+)" in lines[0] and "(-)" in lines[0]
    second = next(line for line in lines if line.startswith("t ") and "second" in line)
    first = next(line for line in lines if line.startswith("t ") and "first" in line)
    assert "0.6500*" in second and "0.8*" in second
    assert "*" not in first
    assert lines[-1].strip() == "best: pAUC[.05,.5] second; CVaR.8 second"


def test_run_demo_scores_as_scikit_learn_does():
    from sklearn.linear_model import LogisticRegression

    models = [entry for entry in demo.MODELS if entry[0] in ("LogisticRegression", "PartialAUCClassifier")]
    rows, skipped = demo.run_demo(datasets=[("churn", "binary")], models=models)
    assert not skipped
    assert [r["model"] for r in rows] == ["LogisticRegression", "PartialAUCClassifier"]
    assert all(r["error"] is None for r in rows)
    X_train, X_test, y_train, y_test = demo._prepare("churn", "binary")
    reference = LogisticRegression(max_iter=2000).fit(X_train, y_train)
    expected = average_precision_score(y_test, reference.decision_function(X_test))
    assert rows[0]["ap"] == pytest.approx(expected, rel=1e-12)
    for r in rows:
        assert 0.0 <= r["pauc"] <= 1.0 and np.isfinite(r["cvar"]) and r["fit_time"] > 0.0


def test_no_warning_escapes_the_demo_and_a_cut_short_row_says_so(capsys):
    import warnings

    models = [entry for entry in demo.MODELS if entry[0] == demo.AGD_SBCD_LABEL]
    assert models, "the demo keeps its cut-short stochastic row"
    with warnings.catch_warnings(record=True) as escaped:
        warnings.simplefilter("always")
        rows, _ = demo.run_demo(datasets=[("lending_club", "binary")], models=models)
    assert not escaped, [str(w.message) for w in escaped]
    (row,) = rows
    assert row["error"] is None
    assert any(text.startswith("ConvergenceWarning: ") for text in row["warnings"])
    (note,) = [line for line in demo.warning_notes(rows) if "ConvergenceWarning" in line]
    assert note.startswith(f"{demo.AGD_SBCD_LABEL} on lending_club: ConvergenceWarning: ")


def test_warning_notes_name_each_models_tables_once():
    rows = [_row("t", "a"), _row("u", "a"), _row("t", "b")]
    rows[0]["warnings"] = ["UserWarning: w1"]
    rows[1]["warnings"] = ["UserWarning: w1", "ConvergenceWarning: w2"]
    assert demo.warning_notes(rows) == ["a on t, u: UserWarning: w1", "a on u: ConvergenceWarning: w2"]
