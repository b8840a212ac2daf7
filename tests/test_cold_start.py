"""What a fresh process loads: ``import skrank`` without Numba, kernels built on first use, small fits.

``benchmarks/first_fit.py`` times the import and the first fit; these tests
check what they load: Numba and the solvers' modules are imported when a fit
needs them, a kernel is built on its first call, and a small fit compiles no
radix sort (NumPy's stable sort gives the same order).
"""

import importlib.util
import itertools
import json
import os
import pickle
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import skrank
from skrank import _jit
from skrank.datafits import partial_auc
from skrank.datafits.partial_auc import negative_rank_weights, range_loss_and_score_gradients
from skrank.pairwise_losses import get_pairwise_loss

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(skrank.__file__)))


def _run(code):
    """The JSON that ``code`` prints, run in a fresh interpreter on this copy of the package."""
    env = dict(os.environ, PYTHONPATH=ROOT)
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


def test_import_loads_neither_numba_nor_the_solvers():
    loaded = _run("""
        import json, sys
        import skrank
        print(json.dumps(sorted(m for m in sys.modules if m.split(".")[0] in ("numba", "llvmlite")
                                or m in ("skrank.solvers.stochastic.soap", "skrank.datafits.worker_ranking",
                                         "skrank.backends.dask_rank", "skrank._numba_cache"))))
    """)
    assert loaded == []


@pytest.mark.skipif(os.environ.get("NUMBA_DISABLE_JIT", "0") != "0", reason="Numba JIT disabled")
def test_small_default_fits_build_only_the_kernels_they_run():
    # every default estimator on 300 rows: no radix sort is built, and a kernel no fit calls stays unbuilt
    report = _run("""
        import json
        import skrank
        from sklearn.datasets import make_classification, make_regression
        from skrank._jit import LazyKernel
        from skrank.datafits import partial_auc
        from skrank.kernels import sorting
        X, y = make_classification(300, 6, weights=[0.9], random_state=0)
        Xr, yr = make_regression(300, 6, noise=10.0, random_state=0)
        for name in ("RankADMMClassifier", "SpectralRiskClassifier", "PartialAUCClassifier",
                     "AveragePrecisionClassifier"):
            getattr(skrank, name)().fit(X, y)
        for name in ("SpectralRiskRegressor", "RankADMMRegressor"):
            getattr(skrank, name)().fit(Xr, yr)
        kernels = {"_resort_keys": partial_auc._resort_keys, "_radix_sort": partial_auc._radix_sort,
                   "_range_radix_sort": partial_auc._range_radix_sort,
                   "_resorted_quadratic_sums": partial_auc._resorted_quadratic_sums,
                   "sort_keyed": sorting.sort_keyed}
        print(json.dumps({k: isinstance(v, LazyKernel) for k, v in kernels.items()}))
    """)
    assert all(report.values()), report


@pytest.mark.parametrize("n", [300, 1500])
@pytest.mark.parametrize("weighted", [False, True])
def test_partial_auc_sums_are_the_same_with_numpys_sorts_and_the_compiled_ones(monkeypatch, n, weighted):
    # the one compiled call (re-sorts and sums) against NumPy's sorts and the sums' kernel, bit for bit
    rng = np.random.default_rng(n)
    n_pos = n // 5
    h_pos, h_neg = rng.normal(0.5, 1.0, n_pos), rng.normal(size=n - n_pos)
    omega = negative_rank_weights(h_neg.size, (0.05, 0.5))
    pos_weight = rng.uniform(0.5, 2.0, n_pos) if weighted else None
    loss = get_pairwise_loss("squared_hinge", margin=1.0)
    start = (np.argsort(-h_neg + 0.1 * rng.normal(size=h_neg.size), kind="stable"),
             np.argsort(h_pos + 0.1 * rng.normal(size=n_pos), kind="stable"))
    results = []
    for compiled_from in (0, 10**9):
        monkeypatch.setattr(partial_auc, "COMPILED_SORT_FROM", compiled_from)
        orders = tuple(o.copy() for o in start)
        total, g_pos, g_neg = range_loss_and_score_gradients(h_pos, h_neg, omega, loss, orders, pos_weight)
        results.append((total, g_pos, g_neg, *orders))
    for compiled, numpy_sorted in zip(*results):
        np.testing.assert_array_equal(compiled, numpy_sorted)


KERNELS = textwrap.dedent(
    """
    import numpy as np

    from skrank._jit import njit


    @njit(cache=True, inline="always")
    def _twice(x):
        return 2.0 * x


    @njit(cache=True)
    def _cube(x):
        return x * x * x


    @njit(cache=True)
    def total(values, f):
        out = 0.0
        for v in values:
            out += _twice(v) + _cube(v) + f(v)
        return out
    """
)

_NUMBER = itertools.count()


def _load(path):
    spec = importlib.util.spec_from_file_location(f"_skrank_lazy_kernels_{next(_NUMBER)}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.skipif(os.environ.get("NUMBA_DISABLE_JIT", "0") != "0", reason="Numba JIT disabled")
def test_a_kernel_is_built_on_first_use_with_its_callees_and_arguments(tmp_path):
    from numba.core.dispatcher import Dispatcher

    path = tmp_path / "kernels.py"
    path.write_text(KERNELS)
    module = _load(path)
    lazy = module.total
    assert all(isinstance(getattr(module, name), _jit.LazyKernel) for name in ("_twice", "_cube", "total"))
    assert "not loaded" in repr(lazy) and lazy.__name__ == "total" and lazy.__doc__ is None
    # a lazy kernel as an argument, a callee inlined, a callee called: all built by the first call
    assert lazy(np.arange(3.0), module._cube) == 2.0 * 3 + 2 * 9.0
    assert all(isinstance(getattr(module, name), Dispatcher) for name in ("_twice", "_cube", "total"))
    assert "compiled" in repr(lazy) and lazy.dispatcher() is module.total
    assert len(lazy.signatures) == 1 and lazy.py_func.__name__ == "total"
    copy = pickle.loads(pickle.dumps(lazy))
    assert copy(np.ones(2), module._cube) == 8.0
    with pytest.raises(AttributeError):
        lazy.__no_such_attribute__  # noqa: B018


@pytest.mark.skipif(os.environ.get("NUMBA_DISABLE_JIT", "0") != "0", reason="Numba JIT disabled")
def test_every_method_of_a_loss_builds_one_kernel_and_its_callees():
    # Loss.value, .derivative, .derivatives and losses_and_keys share loss_derivatives_upto2: a fit
    # compiles one array kernel of losses.py (its scalar callees with it), and no other
    built = _run("""
        import json
        import numpy as np
        from skrank import losses
        from skrank._jit import LazyKernel
        from skrank.kernels import pava
        t = np.linspace(-2.0, 2.0, 5)
        loss = losses.get_loss("logistic")
        loss.value(t), loss.derivative(t), loss.derivatives(t)
        value, d1, keys = np.empty(5), np.empty(5), np.empty(5)
        pava.losses_and_keys(t, loss.code, loss.param, 0.5, np.ones(5), value, d1, keys)
        print(json.dumps([name for module in (losses, pava) for name, obj in vars(module).items()
                          if hasattr(obj, "py_func") and not isinstance(obj, LazyKernel)]))
    """)
    # with an empty cache the scalar callees are built too; with a warm one, the array kernel alone
    callees = {"loss_value", "loss_derivative", "loss_value_and_derivative", "loss_second_derivative",
               "stable_sigmoid"}
    assert "loss_derivatives_upto2" in built and set(built) <= callees | {"loss_derivatives_upto2"}, built


@pytest.mark.parametrize("name", ["logistic", "hinge", "squared_hinge", "squared", "absolute", "huber"])
def test_one_loss_kernel_gives_the_scalar_kernels_values_bit_for_bit(name):
    # each part that loss_derivatives_upto2 fills (alone or with others), and the keys of losses_and_keys,
    # against the scalar kernels called one entry at a time
    from skrank.kernels.pava import losses_and_keys
    from skrank.losses import (
        get_loss,
        loss_derivative,
        loss_second_derivative,
        loss_value,
        loss_value_and_derivative,
    )

    loss = get_loss(name, epsilon=0.7)
    rng = np.random.default_rng(0)
    t = np.concatenate([rng.normal(scale=3.0, size=200), [-1.0, 0.0, 0.7, -0.7, 1e6, -1e6]])
    code, param = loss.code, loss.param
    value = np.array([loss_value(code, x, param) for x in t])
    pairs = np.array([loss_value_and_derivative(code, x, param) for x in t])
    first = np.array([loss_derivative(code, x, param) for x in t])
    second = np.array([loss_second_derivative(code, x, param) for x in t])
    np.testing.assert_array_equal(loss.value(t), value)
    np.testing.assert_array_equal(loss.derivative(t), first)
    np.testing.assert_array_equal(loss.second_derivative(t), second)
    for got, expected in zip(loss.derivatives(t), (pairs[:, 0], pairs[:, 1], second)):
        np.testing.assert_array_equal(got, expected)
    center = rng.normal(size=t.size)
    value_k, d1_k, keys = np.empty(t.size), np.empty(t.size), np.empty(t.size)
    losses_and_keys(t, code, param, 0.3, center, value_k, d1_k, keys)
    np.testing.assert_array_equal(value_k, pairs[:, 0])
    np.testing.assert_array_equal(d1_k, pairs[:, 1])
    np.testing.assert_array_equal(keys, [0.3 * c + v for c, v in zip(center.tolist(), pairs[:, 0].tolist())])
