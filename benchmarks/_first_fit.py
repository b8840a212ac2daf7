"""The first fit of an estimator in a fresh Python process, with an empty and a warm Numba cache."""

import os
import subprocess
import sys
import tempfile
import textwrap

_CODE = textwrap.dedent("""
    import time
    t0 = time.perf_counter()
    import numpy as np
    from sklearn.datasets import make_classification, make_regression
    import skrank
    if NAME.endswith("Regressor"):
        X, y = make_regression(2000, 20, noise=10.0, random_state=0)
    else:
        X, y = make_classification(2000, 20, weights=[0.9], random_state=0)
    t1 = time.perf_counter()
    getattr(skrank, NAME)(**PARAMS).fit(X, y)
    print(f"{time.perf_counter() - t1:.2f} {t1 - t0:.2f}")
""")


def first_fit(name, **params):
    """Seconds of ``skrank.<name>(**params).fit`` on a 2,000 x 20 table in fresh processes.

    Two fresh processes share one temporary Numba cache: the first compiles
    (empty cache), the second loads what the first wrote.  Returns
    ``(empty cache, warm cache, import)`` as strings.
    """
    src = _CODE.replace("NAME", repr(name)).replace("PARAMS", repr(params))
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, NUMBA_CACHE_DIR=cache)
        cold, warm = (subprocess.run([sys.executable, "-c", src], env=env, capture_output=True,
                                     text=True).stdout.split() for _ in range(2))
    return cold[0], warm[0], cold[1]


def print_first_fit(name, **params):
    """Print :func:`first_fit`'s seconds for ``skrank.<name>(**params)``."""
    cold, warm, imported = first_fit(name, **params)
    shown = ", ".join(f"{k}={v}" for k, v in params.items() if k != "random_state")
    print(f"  first fit in a fresh process, {shown}: {cold} s with an empty Numba cache, "
          f"{warm} s with the cache (import {imported} s); goal < 5 s")
