"""benchmarks/real_tables.py runs end to end on a tiny synthetic table."""

import importlib.util
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "real_tables.py"


def _load_benchmark():
    spec = importlib.util.spec_from_file_location("real_tables_benchmark", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_real_tables_quick_tiny_table(capsys):
    bench = _load_benchmark()
    rows = bench.main(["--quick", "--tables", "clf-600x5",
                       "--estimators", "SpectralRiskClassifier", "--budget", "60"])
    assert [r["estimator"] for r in rows] == ["LogisticRegression", "SpectralRiskClassifier"]
    assert not any("error" in r for r in rows)
    fit = rows[1]
    assert (fit["n"], fit["d"]) == (600, 5)
    assert fit["seconds"] > 0 and fit["ratio_value"] > 0
    assert fit["conv"] in ("yes", "no") and fit["cert"] in ("yes", "no")
    assert float(fit["objective_"]) > 0
    out = capsys.readouterr().out
    assert "| table | n | d | estimator |" in out
    assert "| clf-600x5 | 600 | 5 | SpectralRiskClassifier |" in out
