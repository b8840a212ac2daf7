"""SOAP: stochastic optimisation of the average-precision surrogate (seed 002).

Qi, Luo, Xu, Ji and Yang, "Stochastic Optimization of Areas Under
Precision-Recall Curves with Provable Convergence" (NeurIPS 2021),
Algorithms 1-3, for the score ``h = sigmoid(X w + b)``, on the objective of
:class:`skrank.average_precision_objective.AveragePrecisionObjective`.
The compiled steps are :func:`skrank.solvers._soap_kernel.soap_steps`.

Decisions where the paper is silent or leaves a choice (Qi et al. 2021):

* Sampler: every batch holds ``positives_per_batch`` positives (the
  anchors ``B+``) and ``batch_size - positives_per_batch`` negatives, each
  class cycled through its own shuffled list (the paper's experiments);
  an epoch is ``ceil(N- / (batch_size - positives_per_batch))`` steps, so
  that every negative is seen once per epoch.
* The batch's class mix differs from the data's, so each positive of the
  batch carries the weight ``(N+/n) / (B+/B)`` and each negative
  ``(N-/n) / ((B - B+)/B)`` in the averages and in the gradient: the batch
  averages are then unbiased for the full-data ``g_i(w)`` of eq. (4),
  as with the uniform batches of Algorithm 1, and SOAP minimises the
  objective that ``objective_`` reports.  (The paper's experiments do not
  reweight, which optimises the surrogate of a rebalanced data set.)
* ``u`` is kept for the positives only (``O(N+)`` memory), initialised to
  a row's first batch averages at its first visit (rather than a moving
  average from zero, which would start ``u^2`` at ``gamma`` times its
  value), and updated before the gradient is formed (Algorithm 1's order).
  A positive drawn twice in one batch is updated once.
* ``gamma`` weighs the NEW estimate, ``u <- (1 - gamma) u + gamma g``, as
  in the paper and LibAUC.
* Adam style: the paper's Algorithm 3 (no bias correction, ``eps`` inside
  the square root).  Momentum: ``m <- beta1 m + (1 - beta1) G``,
  ``w <- w - lr m``.
* The l2 term ``alpha w`` of the objective is added to every gradient
  estimate.
* Sparse input is densified (one dense copy of ``X``).
* The exact objective is evaluated after every epoch; the returned point
  is the epoch end of lowest exact objective, and the loop stops when that
  best value has not improved by ``tol * max(1, |F|)`` for
  ``n_iter_no_change`` epochs (scikit-learn's SGD convention).
"""

import time

import numpy as np
import scipy.sparse as sp

from ._outer import OuterLoop
from ._sampling import state_from_random_state
from ._soap_kernel import ADAM, MOMENTUM, SGD, soap_steps

OPTIMIZERS = {"sgd": SGD, "momentum": MOMENTUM, "adam": ADAM}
#: default step sizes per optimizer (``learning_rate=None``), in units of the
#: inverse of the mean squared row norm for SGD and momentum
DEFAULT_LEARNING_RATES = {"sgd": 10.0, "momentum": 10.0, "adam": 1e-2}


def soap(
    objective,
    *,
    coef_init,
    max_iter=100,
    tol=1e-4,
    batch_size=64,
    positives_per_batch=8,
    gamma=0.9,
    optimizer="adam",
    learning_rate=None,
    beta1=0.9,
    beta2=0.999,
    eps=1e-8,
    n_iter_no_change=5,
    random_state=None,
    verbose=0,
):
    """Minimise the average-precision surrogate by SOAP.

    Parameters
    ----------
    objective : skrank.average_precision_objective.AveragePrecisionObjective
        The objective on the training set: its data, surrogate loss and l2
        strength.
    coef_init : ndarray of shape (d + 1,)
        Start ``(w, b)``.
    max_iter : int, default=100
        Maximum number of epochs.
    tol : float, default=1e-4
        Stop when the best exact objective has not improved by
        ``tol * max(1, |F|)`` for ``n_iter_no_change`` epochs.
    batch_size : int, default=64
        Samples per step ``B``.
    positives_per_batch : int, default=8
        Positives (anchors) per step ``B+``; must be below ``batch_size``.
    gamma : float, default=0.9
        Weight of the new batch estimate in the moving averages, in (0, 1].
    optimizer : {"sgd", "momentum", "adam"}, default="adam"
        Update rule of the steps.
    learning_rate : float or None, default=None
        Step size; None takes :data:`DEFAULT_LEARNING_RATES`.  For
        ``"sgd"`` and ``"momentum"`` the step is divided by the mean
        squared row norm of ``X`` (so that it does not depend on the
        features' scale).
    beta1, beta2, eps : float
        Moment weights and the Adam constant.
    n_iter_no_change : int, default=5
        Number of epochs over which the improvement is measured (``tol``).
    random_state : int, RandomState, Generator or None, default=None
        Seed of the in-kernel generator (the batches).
    verbose : int, default=0
        Print one line per epoch when positive.

    Returns
    -------
    SolverResult
        ``coef`` is the epoch end of lowest exact objective;
        ``objective_history`` has the exact objective at the start and
        after each epoch, then at the returned point; ``stop_criterion`` is
        the best value's relative improvement over the last
        ``n_iter_no_change`` epochs.  ``info`` has ``passes`` (sampled rows
        / n plus one per exact evaluation), ``steps``, ``time``,
        ``learning_rate`` and ``u`` (the final moving averages, one row per
        positive in the order of ``y``).

    Raises
    ------
    ValueError
        If ``objective`` has sample weights (SOAP does not take them yet).
    """
    if getattr(objective, "sample_weight", None) is not None:
        raise ValueError("SOAP does not take sample weights: minimise a weighted objective with "
                         "skrank.solvers.lbfgs.lbfgs (solver='lbfgs').")
    start = time.perf_counter()
    X = objective.X
    X = X.toarray() if sp.issparse(X) else X
    X = np.ascontiguousarray(X, dtype=np.float64)
    pos = objective.y > 0
    pos_idx = np.flatnonzero(pos).astype(np.int64)
    neg_idx = np.flatnonzero(~pos).astype(np.int64)
    n, d = X.shape
    n_pos, n_neg = pos_idx.shape[0], neg_idx.shape[0]
    B, Bp = int(batch_size), int(positives_per_batch)
    if not 1 <= Bp < B:
        raise ValueError(
            f"positives_per_batch={Bp} must be at least 1 and below batch_size={B}: "
            "each batch needs negatives as well as positives."
        )
    if n_neg == 0:
        raise ValueError("SOAP needs at least one negative sample.")
    if optimizer not in OPTIMIZERS:
        raise ValueError(f"Unknown optimizer {optimizer!r}; expected one of {list(OPTIMIZERS)}.")
    lr = DEFAULT_LEARNING_RATES[optimizer] if learning_rate is None else float(learning_rate)
    if optimizer != "adam":
        lr /= float(np.einsum("ij,ij->", X, X)) / n + 1.0
    weight_pos = (n_pos / n) / (Bp / B)
    weight_neg = (n_neg / n) / ((B - Bp) / B)
    loss = objective.loss
    state = state_from_random_state(random_state)
    perm_pos = np.arange(n_pos, dtype=np.int64)
    perm_neg = np.arange(n_neg, dtype=np.int64)
    cursor = np.array([n_pos, n_neg], dtype=np.int64)  # shuffle at the first draw
    u = np.zeros((n_pos, 2))
    seen = np.zeros(n_pos, dtype=np.bool_)
    stamp = np.full(n_pos, -1, dtype=np.int64)
    m1, m2 = np.zeros(d + 1), np.zeros(d + 1)
    steps_per_epoch = -(-n_neg // (B - Bp))

    w = np.array(coef_init, dtype=np.float64)
    loop = OuterLoop(w, objective.value(w), tol, verbose, "soap")
    best_window = [loop.best_F]
    t = 0
    for _ in range(max_iter):
        soap_steps(X, pos_idx, neg_idx, w, u, seen, stamp, m1, m2, steps_per_epoch, t, Bp, B,
                   float(gamma), lr, objective.alpha, OPTIMIZERS[optimizer], float(beta1),
                   float(beta2), float(eps), weight_pos, weight_neg, loss.code, loss.shift,
                   loss.scale, state, perm_pos, perm_neg, cursor)
        t += steps_per_epoch
        F = objective.value(w)
        loop.step(w, F, f"steps {t:7d}")
        best_window.append(loop.best_F)
        if not np.isfinite(F):
            loop.converged = False
            break
        if len(best_window) > n_iter_no_change:
            old = best_window[-1 - n_iter_no_change]
            loop.crit = (old - loop.best_F) / max(1.0, abs(loop.best_F))
            loop.converged = loop.crit <= tol
            if loop.converged:
                break
        else:
            loop.crit = (best_window[0] - loop.best_F) / max(1.0, abs(loop.best_F))
            loop.converged = False
    result = loop.result({
        "passes": t * B / n + loop.n_iter + 1,
        "steps": t,
        "time": time.perf_counter() - start,
        "learning_rate": lr,
        "u": u,
    })
    return result
