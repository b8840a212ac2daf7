"""Time one SBCD mini-batch step (64 positives x 64 negatives, d = 100) of the AGD-SBCD kernel.

Run: ``python benchmarks/sbcd_step.py``.  Prints microseconds per step for each
pairwise loss (median of 5 runs of 20,000 steps, after one compiling run), in
two regimes: thresholds tracking the level ``l / N- = 0.3`` (about 30% of the
pairs active, as in a pAUC run), and ``lambda = 0`` (every pair with a positive
loss active, at level 1: the full-AUC extreme ``beta = 1``).
"""

import time

import numpy as np

from skrank.pairwise_losses import PAIRWISE_LOSSES, get_pairwise_loss
from skrank.solvers.stochastic.sampling import seed_state
from skrank.solvers.stochastic.sbcd_kernel import sbcd_steps


def time_step(loss_name, n_pos=1000, n_neg=9000, d=100, batch=64, steps=20_000, lam0=0.5,
              level=0.3, theta=1e-3):
    """Median microseconds per step of :func:`skrank.solvers.stochastic.sbcd_kernel.sbcd_steps`.

    Returns
    -------
    us : float
    active : float
        Mean fraction of active pairs.
    """
    rng = np.random.default_rng(0)
    Xp = rng.normal(0.3, 1.0, size=(n_pos, d))
    Xn = rng.normal(0.0, 1.0, size=(n_neg, d))
    loss = get_pairwise_loss(loss_name)
    w = rng.normal(size=d) * 0.05
    lam = np.full(n_pos, lam0)
    state = seed_state(rng)
    perm_p, perm_n = np.arange(n_pos), np.arange(n_neg)
    args = (Xp, Xn, w.copy(), w, np.zeros(d), lam, level, steps, 1e-4, theta, 0.01, 0.0, batch,
            batch, loss.code, loss.shift, loss.scale, loss.is_monotone, state, perm_p, perm_n,
            True, 0.0)
    sbcd_steps(*args[:7], 10, *args[8:])  # compile
    times = []
    for _ in range(5):
        t = time.perf_counter()
        _, _, active = sbcd_steps(*args)
        times.append((time.perf_counter() - t) / steps * 1e6)
    return float(np.median(times)), active


if __name__ == "__main__":
    print("command: python benchmarks/sbcd_step.py")
    for name in PAIRWISE_LOSSES:
        for regime, kw in [("level 0.3", {}), ("lambda = 0", dict(lam0=0.0, level=1.0, theta=0.0))]:
            us, active = time_step(name, **kw)
            print(f"one SBCD step, 64 x 64 pairs, d = 100, loss={name:13s} {regime:10s} "
                  f"(active {active:4.0%}): {us:5.1f} us (goal < 20 us)")
