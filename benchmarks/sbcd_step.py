"""Time one SBCD mini-batch step (64 positives x 64 negatives, d = 100) of seed 000's kernel.

Run: ``python benchmarks/sbcd_step.py``.  Prints microseconds per step for each
pairwise loss (median of 5 runs of 20,000 steps, after one compiling run).
"""

import time

import numpy as np

from skrank.pairwise_losses import PAIRWISE_LOSSES, get_pairwise_loss
from skrank.solvers._sampling import _seed_state
from skrank.solvers._sbcd_kernel import sbcd_steps


def time_step(loss_name, n_pos=1000, n_neg=9000, d=100, batch=64, steps=20_000):
    """Median microseconds per step of :func:`skrank.solvers._sbcd_kernel.sbcd_steps`."""
    rng = np.random.default_rng(0)
    Xp = rng.normal(0.3, 1.0, size=(n_pos, d))
    Xn = rng.normal(0.0, 1.0, size=(n_neg, d))
    loss = get_pairwise_loss(loss_name)
    w = rng.normal(size=d) * 0.05
    lam = np.full(n_pos, 0.5)
    state = _seed_state(rng)
    perm_p, perm_n = np.arange(n_pos), np.arange(n_neg)
    args = (Xp, Xn, w.copy(), w, np.zeros(d), lam, 0.3, steps, 1e-4, 1e-3, 0.01, 0.0, batch,
            batch, loss.code, loss.shift, loss.scale, loss.is_monotone, state, perm_p, perm_n,
            True, 0.0)
    sbcd_steps(*args[:7], 10, *args[8:])  # compile
    times = []
    for _ in range(5):
        t = time.perf_counter()
        sbcd_steps(*args)
        times.append((time.perf_counter() - t) / steps * 1e6)
    return float(np.median(times))


if __name__ == "__main__":
    print("command: python benchmarks/sbcd_step.py")
    for name in PAIRWISE_LOSSES:
        print(f"one SBCD step, 64 x 64 pairs, d = 100, loss={name}: {time_step(name):.1f} us "
              "(goal < 20 us)")
