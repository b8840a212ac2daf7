"""The closed-form solver of the full-AUC square loss (:mod:`skrank.datafits.square_auc`)."""

import time

import numpy as np

from ...datafits.square_auc import solve_square_auc_system, system_of_moments, two_class_moments
from ..result import SolverResult


def exact_square_auc(datafit, penalty):
    """Minimise the full-AUC square loss in closed form.

    Parameters
    ----------
    datafit : skrank.datafits.partial_auc.PartialAUCObjective
        With ``fpr_range=(0, 1)`` and the ``"squared"`` pairwise loss (not
        checked here); its ``X`` (dense, sparse or a Dask array chunked
        by rows), ``positive`` (the positives' rows), ``sample_weight``
        (None without weights) and ``loss.margin`` are used.
    penalty : skrank.penalties.Penalty
        The l2 penalty that ``datafit`` holds: ``penalty.l2`` is its ``alpha``.

    Returns
    -------
    SolverResult
        ``coef`` solves ``(2 S + alpha I) w = 2 c dmu`` (module docstring):
        by a Cholesky factorisation when ``alpha > 0``, and as the
        least-norm solution (eigendecomposition pseudo-inverse) when
        ``alpha = 0`` or the factorisation fails.  ``n_iter = 1``,
        ``converged = True``; ``objective_history`` holds ``F`` at the
        solution (``datafit.value``); ``stop_criterion`` is the largest
        entry of the gradient of ``F`` there (round-off only); ``info`` has
        ``passes`` (1), ``time`` and ``method`` (``"cholesky"`` or
        ``"least-norm"``).
    """
    start = time.perf_counter()
    A, r = system_of_moments(*two_class_moments(datafit.X, datafit.positive, datafit.sample_weight),
                              penalty.l2, datafit.loss.margin)
    w, method = solve_square_auc_system(A, r, penalty.l2)
    grad = A @ w - r
    return SolverResult(
        coef=w,
        intercept=0.0,
        n_iter=1,
        objective_history=np.asarray([datafit.value(w)]),
        stop_criterion=float(np.max(np.abs(grad))) if grad.size else 0.0,
        converged=True,
        info={"passes": 1, "time": time.perf_counter() - start, "method": method},
    )
