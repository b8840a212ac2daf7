"""Closed-form minimiser of the full-AUC square loss for a linear score.

For ``h = X w`` and the pairwise square loss of seed 001 (Liu, Yuan, Ying
and Yang 2020, eq. (1)) with margin ``c`` and an l2 penalty,

    F(w) = mean_{i positive, j negative} (c - (x_i - x_j).w)^2 + alpha ||w||^2 / 2
         = c^2 - 2 c w.dmu + w' (S+ + S- + dmu dmu') w + alpha ||w||^2 / 2,

with ``dmu`` the difference of the class means and ``S+``, ``S-`` the class
covariances (normalised by the class sizes): the mean over pairs of
``(x_i - x_j)(x_i - x_j)'`` is ``S+ + S- + dmu dmu'``.  Setting the gradient
to zero gives

    (2 S + alpha I) w = 2 c dmu,    S = S+ + S- + dmu dmu'.

One pass over the data and a ``d x d`` solve.  With ``alpha = 0`` and a
singular ``S`` (fewer samples than features, duplicated columns) the
minimisers form an affine set; the least-norm one is returned.
"""

import time

import numpy as np
import scipy.sparse as sp

from ._result import SolverResult


def _mean_and_scatter(X):
    """Column means and ``X' X / n - mean mean'`` (dense d x d), sparse or dense."""
    n = X.shape[0]
    mean = np.asarray(X.mean(axis=0), dtype=np.float64).ravel()
    if sp.issparse(X):
        gram = np.asarray((X.T @ X).toarray(), dtype=np.float64) / n
        return mean, gram - np.outer(mean, mean)
    centred = X - mean
    return mean, centred.T @ centred / n


def exact_square_auc(objective):
    """Minimise the full-AUC square loss in closed form.

    Parameters
    ----------
    objective : skrank.partial_auc_objective.PartialAUCObjective
        With ``fpr_range=(0, 1)`` and the ``"squared"`` pairwise loss; its
        ``X_pos``, ``X_neg``, ``alpha`` and ``loss.margin`` are used.

    Returns
    -------
    SolverResult
        ``n_iter = 1``; ``objective_history`` holds ``F`` at the solution;
        ``stop_criterion`` is the largest entry of the gradient of ``F``
        there (round-off only).
    """
    start = time.perf_counter()
    mu_pos, s_pos = _mean_and_scatter(objective.X_pos)
    mu_neg, s_neg = _mean_and_scatter(objective.X_neg)
    dmu = mu_pos - mu_neg
    c = objective.loss.margin
    A = 2.0 * (s_pos + s_neg + np.outer(dmu, dmu))
    A[np.diag_indices_from(A)] += objective.alpha
    rhs = 2.0 * c * dmu
    try:
        if objective.alpha > 0:
            w = np.linalg.solve(A, rhs)
        else:
            raise np.linalg.LinAlgError
    except np.linalg.LinAlgError:
        w = np.linalg.lstsq(A, rhs, rcond=None)[0]
    grad = A @ w - rhs
    return SolverResult(
        coef=w,
        intercept=0.0,
        n_iter=1,
        objective_history=np.asarray([objective.value(w)]),
        stop_criterion=float(np.max(np.abs(grad))) if grad.size else 0.0,
        converged=True,
        info={"passes": 1, "time": time.perf_counter() - start},
    )
