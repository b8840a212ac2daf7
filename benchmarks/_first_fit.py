"""The first fit of an estimator in a fresh Python process, with an empty and a warm Numba cache.

The package is copied into a new temporary folder (no ``__pycache__``, so no
bytecode and no Numba cache next to the sources, and cache folders keyed by
a path no earlier run used) and ``NUMBA_CACHE_DIR`` points at a new empty
folder: nothing compiled by an earlier run is found.  A first process
imports scikit-learn, then skrank, then fits; a second process does the same
with the bytecode and the Numba cache the first one wrote.
"""

import os
import shutil
import subprocess
import sys
import tempfile
import textwrap

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

_CODE = textwrap.dedent("""
    import time
    t0 = time.perf_counter()
    import numpy as np
    import sklearn.linear_model
    from sklearn.datasets import make_classification, make_regression
    t1 = time.perf_counter()
    import skrank
    t2 = time.perf_counter()
    if NAME.endswith("Regressor"):
        X, y = make_regression(N_ROWS, N_FEATURES, noise=10.0, random_state=0)
    else:
        X, y = make_classification(N_ROWS, N_FEATURES, n_informative=N_FEATURES // 2,
                                   weights=[0.9], random_state=0)
    t3 = time.perf_counter()
    getattr(skrank, NAME)(**PARAMS).fit(X, y)
    print(f"{time.perf_counter() - t3:.3f} {t2 - t1:.3f} {t1 - t0:.3f}")
""")


def _run(src, env, cwd):
    done = subprocess.run([sys.executable, "-c", src], env=env, cwd=cwd, capture_output=True,
                          text=True)
    if done.returncode != 0:
        raise RuntimeError(f"the fit failed in a fresh process:\n{done.stderr}")
    return [float(value) for value in done.stdout.split()[-3:]]


def fresh_copy(folder, source=ROOT):
    """Copy the package ``skrank`` of ``source`` into ``folder``, leaving out every ``__pycache__``."""
    shutil.copytree(os.path.join(source, "skrank"), os.path.join(folder, "skrank"),
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "*.nbi", "*.nbc"))


def first_fit(name, n_rows=300, n_features=6, source=ROOT, **params):
    """Seconds of ``skrank.<name>(**params).fit`` in two fresh processes on a fresh copy.

    Parameters
    ----------
    name : str
        The estimator's name in ``skrank``.
    n_rows, n_features : int
        The shape of the synthetic table (``make_classification`` or
        ``make_regression``, seeded).
    source : str
        The folder that holds the package ``skrank`` to copy.
    **params
        The estimator's parameters.

    Returns
    -------
    dict
        ``cold`` and ``warm``: the fit's seconds in the first process (empty
        Numba cache, no bytecode) and in the second (the cache the first
        wrote); ``import_cold`` and ``import_warm``: the seconds ``import
        skrank`` took after scikit-learn was imported; ``sklearn``: the
        seconds of the import of NumPy and scikit-learn before it, in the
        first process.
    """
    src = (_CODE.replace("NAME", repr(name)).replace("PARAMS", repr(params))
           .replace("N_ROWS", str(n_rows)).replace("N_FEATURES", str(n_features)))
    with tempfile.TemporaryDirectory() as work:
        copy, cache = os.path.join(work, "src"), os.path.join(work, "numba-cache")
        os.mkdir(copy)
        os.mkdir(cache)
        fresh_copy(copy, source)
        env = dict(os.environ, NUMBA_CACHE_DIR=cache, PYTHONPATH=copy, OMP_NUM_THREADS="1")
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        cold = _run(src, env, copy)
        warm = _run(src, env, copy)
    return {"cold": cold[0], "import_cold": cold[1], "sklearn": cold[2],
            "warm": warm[0], "import_warm": warm[1]}


def print_first_fit(name, **params):
    """Print :func:`first_fit`'s seconds for ``skrank.<name>(**params)`` (300 x 6 table)."""
    t = first_fit(name, **params)
    shown = ", ".join(f"{k}={v}" for k, v in params.items() if k != "random_state")
    print(f"  first fit in a fresh process, {shown}: {t['cold']:.2f} s with an empty Numba cache, "
          f"{t['warm']:.2f} s with the cache (import {t['import_cold']:.2f} s)")
