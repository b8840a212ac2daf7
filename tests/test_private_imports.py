"""Imports of private names across the modules of skrank stay few.

A name that starts with one underscore is private to the module that
defines it.  :func:`private_imports` reads every module of ``skrank/`` (its
syntax tree, nothing is imported) and lists each use of another skrank
module's private name:

* ``from X import _name`` (top level or inside a function, relative or
  absolute), where ``X`` is a skrank module other than the importing one;
* ``M._name`` where ``M`` is a skrank module bound by ``from P import M`` or
  ``import X as M``.

Dunder names (``__version__``) and private names of other libraries
(scikit-learn's, Numba's) are not counted.  ``LIMIT`` is the count the
tree has reached; it may only go down.  Run this file as a script to print
the list.
"""

import ast
import pathlib
import sys

from source_tree import import_source, module_names, package_of

LIMIT = 8

_SKRANK = pathlib.Path(__file__).parents[1] / "skrank"


def _is_private(name):
    return name.startswith("_") and not name.startswith("__")


def private_imports(root=_SKRANK):
    """Uses of a private name of one module of ``root`` by another.

    Parameters
    ----------
    root : pathlib.Path
        The package directory.

    Returns
    -------
    list of tuple
        ``(importing module, defining module, name, line)``, one per use.
    """
    modules = module_names(root)
    found = []
    for name, path in modules.items():
        package = package_of(name, path)
        tree = ast.parse(path.read_text(), filename=str(path))
        bound = {}  # local name -> skrank module
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                source = import_source(node, package)
                for alias in node.names:
                    if f"{source}.{alias.name}" in modules:
                        bound[alias.asname or alias.name] = f"{source}.{alias.name}"
                    if _is_private(alias.name) and source in modules and source != name:
                        found.append((name, source, alias.name, node.lineno))
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.asname and alias.name in modules:
                        bound[alias.asname] = alias.name
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                    and _is_private(node.attr) and bound.get(node.value.id, name) != name):
                found.append((name, bound[node.value.id], node.attr, node.lineno))
    return found


def test_scan_counts_private_names_of_other_modules(tmp_path):
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("__version__ = '1'\n")
    (pkg / "a.py").write_text("_x = 1\ny = 2\n__all__ = []\n")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "sub" / "b.py").write_text(
        "import numpy as np\n"
        "from sklearn.utils import _safe_indexing\n"  # another library's: not counted
        "from .. import a\n"
        "from ..a import _x, y\n"  # counted
        "import pkg.a as aa\n"
        "from pkg import __version__\n"  # dunder: not counted
        "_z = 3\n"
        "def f():\n"
        "    from pkg.a import _x as x2\n"  # counted
        "    return a._x + aa._x + a.y + np._private\n"  # two counted
    )
    (pkg / "sub" / "c.py").write_text("from .b import _z\nfrom .c import _w\n_w = 1\n")  # the first counted
    found = private_imports(pkg)
    assert sorted(found) == [
        ("pkg.sub.b", "pkg.a", "_x", 4),
        ("pkg.sub.b", "pkg.a", "_x", 9),
        ("pkg.sub.b", "pkg.a", "_x", 10),
        ("pkg.sub.b", "pkg.a", "_x", 10),
        ("pkg.sub.c", "pkg.sub.b", "_z", 1),
    ]


def test_private_imports_across_modules_stay_few():
    found = private_imports()
    listing = "\n".join(f"{a} <- {b}.{n} (line {line})" for a, b, n, line in found)
    assert len(found) <= LIMIT, f"{len(found)} private imports across modules, limit {LIMIT}:\n{listing}"


if __name__ == "__main__":
    root = pathlib.Path(sys.argv[1]) if len(sys.argv) > 1 else _SKRANK
    rows = private_imports(root)
    for importer, source, name, line in sorted(rows):
        print(f"{importer}:{line} <- {source}.{name}")
    print(len(rows))
