"""The import layers of the package, and capabilities asked for instead of classes.

The tests read the syntax trees of ``skrank/`` (nothing is imported):

* every module imports only from its own layer of doc/architecture.rst and
  those below it;
* the modules of ``skrank/solvers/full_batch`` import nothing from a layer
  above the solvers, and their imports of one another (top level or inside
  a function) run one way: no circle;
* every solver of the table takes ``(datafit, penalty, *, ...)``, and
  doc/architecture.rst states that signature and lists the table's rows;
* outside the modules that define them, no code compares a risk's class
  (``isinstance`` with a concrete risk class, ``type(x) is ...``) or a loss's
  code (``x.code`` or a code constant of :mod:`skrank.losses` in a
  comparison): a solver asks the risk or the loss for what it declares;
  and what a risk or a loss declares holds of its weights or derivatives.
"""

import ast
import inspect
import pathlib
import re

import numpy as np
import pytest
from source_tree import import_source, module_names, package_of

from skrank.losses import CLASSIFICATION_LOSSES, REGRESSION_LOSSES, get_loss
from skrank.risks import ERM, ExponentialSpectral, Extremile, RankedRange, Superquantile, TopK
from skrank.solvers.registry import _TABLE

_ROOT = pathlib.Path(__file__).parents[1] / "skrank"
_FULL_BATCH = "skrank.solvers.full_batch"
#: The layers above the solvers' (doc/architecture.rst, "The layering rule").
_ABOVE_SOLVERS = ("skrank.estimators",)
#: The modules that define the risks and the losses (the pairwise losses are built on the codes).
_DEFINING = ("risks.py", "losses.py", "pairwise_losses.py")


def _modules():
    """Dotted name of each module of ``skrank/`` and its path."""
    return module_names(_ROOT)


def _imported(name, path, modules):
    """The skrank modules the module ``name`` imports, anywhere in its file."""
    package = package_of(name, path)
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = import_source(node, package) or ""
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names if f"{base}.{alias.name}" in modules)
    return {m for m in found if m in modules and m != name}


def _cycle(graph):
    """One circle of the directed ``graph`` (a list of its nodes), or None."""
    state = {}

    def visit(node, path):
        state[node] = "open"
        for child in sorted(graph[node]):
            if state.get(child) == "open":
                return path[path.index(child):] + [child]
            if child not in state:
                found = visit(child, path + [child])
                if found:
                    return found
        state[node] = "done"
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node, [node])
            if found:
                return found
    return None


def test_full_batch_solvers_import_down_and_without_circles():
    modules = _modules()
    solvers = {name: path for name, path in modules.items() if name.startswith(_FULL_BATCH + ".")}
    assert f"{_FULL_BATCH}.newton" in solvers and f"{_FULL_BATCH}.setup" in solvers
    graph = {}
    for name, path in solvers.items():
        imported = _imported(name, path, modules)
        upward = sorted(m for m in imported if m.startswith(_ABOVE_SOLVERS))
        assert not upward, f"{name} imports from a layer above the solvers: {upward}"
        graph[name] = {m for m in imported if m in solvers}
    assert _cycle(graph) is None, f"a circle of imports: {' -> '.join(_cycle(graph))}"


#: The layers of doc/architecture.rst ("The layering rule"), lowest first; a module not named here is
#: of the vocabulary's layer (losses, risks, penalties, metrics, datasets, kernels, _jit), but the
#: package's front (``skrank/__init__.py``) and the demo, which sit above the estimators.
_LAYERS = ("skrank.backends", "skrank.datafits", "skrank.solvers", "skrank.estimators")
_FRONT = ("skrank", "skrank.demo")
_LAYERING_LINE = "vocabulary, kernels, _jit  ->  backends  ->  datafits  ->  solvers  ->  estimators"


def _layer(name):
    if name in _FRONT:
        return len(_LAYERS) + 1
    inside = [k + 1 for k, prefix in enumerate(_LAYERS) if name == prefix or name.startswith(prefix + ".")]
    return inside[0] if inside else 0


def _upward_imports(modules):
    """``"importer -> imported"`` for each import of a module of a higher layer."""
    return sorted(f"{name} -> {m}" for name, path in modules.items()
                  for m in _imported(name, path, modules) if _layer(m) > _layer(name))


def test_every_module_imports_only_its_layer_and_those_below(tmp_path):
    assert _LAYERING_LINE in (_ROOT.parent / "doc" / "architecture.rst").read_text()
    modules = _modules()
    assert _upward_imports(modules) == []
    # the scan sees an upward import: a backend module that imported a solver
    probe = tmp_path / "probe.py"
    probe.write_text("from ..solvers import registry\n")
    found = _upward_imports(dict(modules, **{"skrank.backends.probe": probe}))
    assert found == ["skrank.backends.probe -> skrank.solvers",
                     "skrank.backends.probe -> skrank.solvers.registry"]


def test_cycle_finds_a_circle():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set(), "c": {"a", "b"}}) is None


def _class_names(module):
    tree = ast.parse((_ROOT / module).read_text())
    return {node.name for node in tree.body if isinstance(node, ast.ClassDef)}


#: The concrete risk classes (an ``isinstance`` with the base class checks an input's kind, not a risk's).
_RISK_CLASSES = _class_names("risks.py") - {"BaseRisk"} | {"CVaR"}
_LOSS_CODES = {"LOGISTIC", "HINGE", "SQUARED_HINGE", "SQUARED", "ABSOLUTE", "HUBER", "SIGMOID"}


def _name(node):
    return node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else None


def _class_branches(tree):
    """``(line, source text)`` of each comparison of a risk's class or a loss's code in ``tree``."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and _name(node.func) == "isinstance" and len(node.args) == 2:
            kinds = node.args[1].elts if isinstance(node.args[1], ast.Tuple) else [node.args[1]]
            if any(_name(kind) in _RISK_CLASSES for kind in kinds):
                found.append(node)
        elif isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            for operand in operands:
                inner = operand.elts if isinstance(operand, ast.Tuple) else [operand]
                if any((isinstance(x, ast.Call) and _name(x.func) == "type")
                       or (isinstance(x, ast.Attribute) and x.attr == "code")
                       or (isinstance(x, ast.Attribute) and x.attr == "name"
                           and "loss" in str(_name(x.value)))
                       or _name(x) in _LOSS_CODES or _name(x) in _RISK_CLASSES for x in inner):
                    found.append(node)
                    break
    return [(node.lineno, ast.unparse(node)) for node in found]


def test_class_branches_finds_the_patterns():
    source = ("isinstance(problem.risk, ERM)\ntype(risk) is Superquantile\nloss.code in (LOGISTIC, SQUARED)\n"
              "isinstance(risk, (TopK, RankedRange))\nisinstance(risk, BaseRisk)\nrisk.is_mean\n"
              "loss.name == 'squared'\nself._loss.name in NAMES\nrisk.name == 'x'\n")
    assert [line for line, _ in _class_branches(ast.parse(source))] == [1, 2, 3, 4, 7, 8]


def test_no_code_branches_on_a_risk_class_or_a_loss_code_outside_their_modules():
    branches = []
    for path in sorted(_ROOT.rglob("*.py")):
        if path.parent == _ROOT and path.name in _DEFINING:
            continue
        branches += [f"{path.relative_to(_ROOT.parent)}:{line}: {text}"
                     for line, text in _class_branches(ast.parse(path.read_text()))]
    assert not branches, "ask the risk or the loss what it declares:\n" + "\n".join(branches)


_RISKS = [ERM(), Superquantile(q=0.0), Superquantile(q=0.3), Superquantile(q=0.95), Extremile(r=2.0),
          ExponentialSpectral(rho=3.0), TopK(k=5), TopK(k=0.3), RankedRange(m=2, k=9)]


@pytest.mark.parametrize("risk", _RISKS, ids=repr)
def test_a_risk_declares_only_what_its_weights_are(risk):
    """``is_mean``: the samples' shares of the weight; ``threshold_rank_step``: the capped simplex."""
    rng = np.random.default_rng(0)
    for n in (10, 41, 100):
        v = rng.uniform(0.1, 2.0, n)
        if risk.is_mean:
            np.testing.assert_allclose(risk.weights(n, v), v / v.sum(), rtol=1e-13)
        if risk.threshold_rank_step:
            assert risk.one_threshold
            w, cap = risk.weights(n), risk.threshold_level(n) / n
            # the weights of the sorted losses: 0 below the quantile, cap above, one in between
            assert abs(w.sum() - 1.0) <= 1e-12 and w.min() >= 0.0 and w.max() <= cap * (1.0 + 1e-12)
            assert np.count_nonzero((w > 1e-15) & (w < cap * (1.0 - 1e-12))) <= 1
            assert np.all(np.diff(w) >= -1e-15)


@pytest.mark.parametrize("name", CLASSIFICATION_LOSSES + REGRESSION_LOSSES)
def test_a_loss_is_twice_differentiable_exactly_where_its_derivatives_do_not_jump(name):
    loss = get_loss(name)
    t = np.linspace(-3.0, 3.0, 600_001)  # steps of 1e-5 across every kink (at -1, 0 and +-epsilon = 1)
    _, first, second = loss.derivatives(t)
    largest_jump = max(np.abs(np.diff(first)).max(), np.abs(np.diff(second)).max())
    assert (largest_jump < 1e-3) == loss.twice_differentiable, largest_jump


def test_every_solver_of_the_table_takes_a_datafit_and_a_penalty_as_the_doc_says():
    for info in _TABLE:
        parameters = list(inspect.signature(info.load()).parameters.values())
        assert [p.name for p in parameters[:2]] == ["datafit", "penalty"], info.function
        assert all(p.kind is p.POSITIONAL_OR_KEYWORD and p.default is p.empty for p in parameters[:2])
        assert all(p.kind in (p.KEYWORD_ONLY, p.VAR_KEYWORD) for p in parameters[2:]), info.function
    text = (_ROOT.parent / "doc" / "architecture.rst").read_text()
    assert "f(datafit, penalty, *, " in text
    listed = re.findall(r"^   \* ``([\w-]+)``: ``([\w.]+:\w+)``$", text, flags=re.MULTILINE)
    assert listed == [(info.name, info.function) for info in _TABLE]
