"""benchmarks/scale.py and benchmarks/rank_step.py run end to end on small sizes."""

import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("dask.array")
BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


def _rows(out):
    return [[c.strip() for c in line.strip("|").split("|")] for line in out.splitlines()
            if line.startswith("| ") and line[2:3].isdigit()], out


def _table(script, *args):
    out = subprocess.run([sys.executable, str(BENCHMARKS / script), *args], capture_output=True, text=True,
                         check=True, timeout=600).stdout
    return _rows(out)


def _table_here(script, monkeypatch, capsys, *args):
    """:func:`_table` run as ``__main__`` in this process, whose imports are paid already.

    The benchmarks' folder goes first on ``sys.path``, as for ``python benchmarks/SCRIPT``, so that
    the script imports its sibling modules (``_memory``).
    """
    import runpy

    monkeypatch.syspath_prepend(str(BENCHMARKS))
    monkeypatch.setattr(sys, "argv", [str(BENCHMARKS / script), *args])
    capsys.readouterr()
    runpy.run_path(str(BENCHMARKS / script), run_name="__main__")
    return _rows(capsys.readouterr().out)


@pytest.mark.parametrize("data", [pytest.param("classification", marks=pytest.mark.slow), "regression",
                                  pytest.param("real:hmda", marks=pytest.mark.slow)])
def test_scale_benchmark_fits_every_backend_to_the_numpy_optimum(data, monkeypatch, capsys):
    # one run is the command line in a fresh interpreter; the other data run in this process (a
    # fresh interpreter spends most of such a small run importing)
    args = ("--sizes", "3e3", "--data", data, "--gpu")
    if data == "classification":
        rows, out = _table("scale.py", *args)
    else:
        rows, out = _table_here("scale.py", monkeypatch, capsys, *args)
    gpu = [] if "no CuPy with a GPU here" in out else ["cupy"]
    assert [row[1] for row in rows] == ["numpy", "dask", *gpu, "dask-lazy"]
    assert all(row[-1] == "yes" for row in rows)  # certified
    # both fits certified within tol=1e-7 (relative) of the optimum: so within that of each other
    assert all(float(row[9]) <= 1e-7 for row in rows[1:])
    assert all(0.0 <= float(row[6].rstrip("%")) <= 100.0 for row in rows)  # host share
    assert "command: OMP_NUM_THREADS=1 python benchmarks/scale.py --sizes '3e3'" in out


def test_rank_step_benchmark_agrees_both_ways():
    rows, out = _table("rank_step.py", "--sizes", "2e4", "--bracket", "1000", "--repeats", "1")
    assert len(rows) == 1
    assert float(rows[0][5]) < 1e-12  # the threshold form's value equals the sorted one
    assert "command:" in out


@pytest.mark.slow
def test_scale_benchmark_splits_the_driver_memory_from_the_workers(monkeypatch, capsys):
    # --driver-memory: the driver's RSS growth during each fit, and the cluster workers' RSS (in this
    # process: a fresh interpreter would add its imports to the cluster's start)
    pytest.importorskip("distributed")
    pytest.importorskip("psutil")
    rows, out = _table_here("scale.py", monkeypatch, capsys, "--sizes", "5e2", "--backends", "numpy,cluster",
                            "--driver-memory")
    assert "| driver RSS growth MiB | workers' peak MiB | workers' RSS before MiB |" in out
    assert [row[1] for row in rows] == ["numpy", "cluster"]
    assert all(len(row) == 15 and row[-1] == "yes" for row in rows)  # certified
    assert all(float(row[8]) >= 0.0 for row in rows)  # the driver's RSS growth
    assert rows[0][9:11] == ["-", "-"]  # no workers off the cluster
    assert float(rows[1][9]) >= float(rows[1][10]) > 0.0  # the workers' peak, their RSS before the fit
    assert float(rows[1][12]) <= 1e-7  # the gap to numpy
    assert out.rstrip().endswith("--backends numpy,cluster --driver-memory")
