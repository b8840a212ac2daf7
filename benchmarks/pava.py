"""Timings of skrank's PAVA kernels (skrank/kernels/pava.py).

Prints one table:

* ``isotonic_regression`` against ``sklearn.isotonic.isotonic_regression``
  (unweighted and weighted) -- the goal is a ratio of at most 1.5;
* the ADMM z-step ``zstep`` on unsorted input (the stable argsort is
  included) for the logistic and hinge losses with superquantile weights
  (q = 0.8), for both PAVA variants, next to the time of the argsort alone.

Numba compile time is reported apart: once cold (fresh cache directory, in
a subprocess) and once as the first call of this process (loads the on-disk
cache when there is one).  Each timing is the median over several repeats.

Usage::

    python benchmarks/pava.py           # n = 1e4, 1e5, 1e6
    python benchmarks/pava.py --quick   # n = 1e3, 1e4, 1e5
"""

import argparse
import os
import platform
import subprocess
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

_COMPILE_SNIPPET = """
import time, numpy as np
t0 = time.perf_counter()
from skrank.kernels.pava import isotonic_regression, zstep
from skrank.losses import LOGISTIC
t1 = time.perf_counter()
isotonic_regression(np.arange(5.0))
t2 = time.perf_counter()
zstep(np.arange(5.0), np.ones(5), LOGISTIC, 0.0, 1.0)
t3 = time.perf_counter()
print(t1 - t0, t2 - t1, t3 - t2)
"""


def median_times(fns, repeats):
    """Median run time of each function; calls are interleaved so that all of
    them see the same machine load."""
    times = np.empty((repeats, len(fns)))
    for r in range(repeats):
        for k, fn in enumerate(fns):
            t0 = time.perf_counter()
            fn()
            times[r, k] = time.perf_counter() - t0
    return np.median(times, axis=0)


def repeats_for(n):
    return 25 if n <= 1e4 else (11 if n <= 1e5 else 7)


def superquantile_weights(n, q=0.8):
    k = int(np.floor(n * q))
    sigma = np.zeros(n)
    sigma[k:] = 1.0 / (n - k)
    return sigma


def cold_compile_times():
    """(import, isotonic, zstep) seconds in a fresh process with an empty Numba cache."""
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, NUMBA_CACHE_DIR=cache, PYTHONPATH=ROOT)
        out = subprocess.run(
            [sys.executable, "-c", _COMPILE_SNIPPET], env=env, capture_output=True, text=True
        )
    if out.returncode != 0:
        raise RuntimeError(out.stderr)
    return [float(x) for x in out.stdout.split()]


def fmt(seconds):
    if seconds < 1e-3:
        return f"{seconds * 1e6:8.1f} us"
    if seconds < 1.0:
        return f"{seconds * 1e3:8.2f} ms"
    return f"{seconds:8.2f} s "


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="smaller sizes (1e3..1e5)")
    args = parser.parse_args(argv)
    sizes = [1_000, 10_000, 100_000] if args.quick else [10_000, 100_000, 1_000_000]

    import numba
    import sklearn
    from sklearn.isotonic import isotonic_regression as sk_isotonic

    cold = cold_compile_times()

    t0 = time.perf_counter()
    from skrank.kernels.pava import _zstep_sorted_impl, isotonic_regression, zstep
    from skrank.losses import HINGE, LOGISTIC

    t_import = time.perf_counter() - t0
    t0 = time.perf_counter()
    isotonic_regression(np.arange(5.0))
    t_iso_first = time.perf_counter() - t0
    t0 = time.perf_counter()
    zstep(np.arange(5.0), np.ones(5), LOGISTIC, 0.0, 1.0)
    t_z_first = time.perf_counter() - t0
    sk_isotonic(np.arange(5.0))

    print("skrank PAVA benchmark")
    print(
        f"python {platform.python_version()}, numpy {np.__version__}, numba {numba.__version__}, "
        f"scikit-learn {sklearn.__version__}, {os.cpu_count()} CPU(s), {platform.machine()}"
    )
    print(
        "compile, cold cache (fresh process): "
        f"import {cold[0]:.2f} s, isotonic {cold[1]:.2f} s, zstep {cold[2]:.2f} s"
    )
    print(
        "first call, this process (on-disk cache): "
        f"import {t_import:.2f} s, isotonic {t_iso_first:.3f} s, zstep {t_z_first:.3f} s"
    )
    print("timings: median over repeats (25 / 11 / 7 for n <= 1e4 / 1e5 / more), after warm-up")
    print()
    header = f"{'routine':<44}{'n':>9}  {'skrank':>11}  {'reference':>11}  {'ratio':>6}  note"
    print(header)
    print("-" * len(header))

    rng = np.random.default_rng(0)
    for n in sizes:
        reps = repeats_for(n)
        y = np.linspace(0.0, 3.0, n) + rng.normal(size=n)
        w = rng.uniform(0.1, 2.0, n)
        for weights in (None, w):
            label = "isotonic_regression" + (" (weighted)" if weights is not None else "")
            ours, ref = median_times(
                [
                    lambda: isotonic_regression(y, weights),
                    lambda: sk_isotonic(y, sample_weight=weights),
                ],
                reps,
            )
            err = np.abs(isotonic_regression(y, weights) - sk_isotonic(y, sample_weight=weights))
            ratio = ours / ref
            goal = "ok" if ratio <= 1.5 else "SLOWER than 1.5x"
            print(
                f"{label + ' vs sklearn':<44}{n:>9}  {fmt(ours):>11}  {fmt(ref):>11}  "
                f"{ratio:6.2f}  {goal}, max diff {err.max():.1e}"
            )

    for n in sizes:
        reps = repeats_for(n)
        sigma = superquantile_weights(n)
        m = rng.normal(scale=2.0, size=n)
        rho = 1.0 / n  # sigma / rho = 5 on the top 20%: plenty of pooling
        ms = np.sort(m)
        for code, name in ((LOGISTIC, "logistic"), (HINGE, "hinge")):
            for method in ("stack", "sweep"):
                ours, t_sort = median_times(
                    [
                        lambda: zstep(m, sigma, code, 0.0, rho, method=method),
                        lambda: np.argsort(m, kind="stable"),
                    ],
                    reps,
                )
                blocks = _zstep_sorted_impl(ms, sigma, code, 0.0, rho, None, np.inf, method)[1]
                label = f"zstep {name}, superquantile, {method}"
                print(
                    f"{label:<44}{n:>9}  {fmt(ours):>11}  {fmt(t_sort):>11}  "
                    f"{ours / t_sort:6.2f}  reference = argsort alone; {blocks.size} blocks"
                )

    print()
    cmd = "python benchmarks/pava.py" + (" --quick" if args.quick else "")
    print(f"reproduce: {cmd}")


if __name__ == "__main__":
    main()
