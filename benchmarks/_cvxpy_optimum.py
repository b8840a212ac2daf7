"""The optimum of a convex rank-risk problem by cvxpy (CLARABEL), for the benchmarks.

The problem is the one skrank's spectral-risk and RankADMM estimators solve,
``F(w, b) = sum_i sigma_i l_(i) + l1 ||w||_1 + l2 ||w||^2 / 2`` with
nondecreasing weights ``sigma >= 0``; the rank term is written as
``sum_k (sigma_k - sigma_{k-1})`` times the sum of the ``n - k + 1`` largest
losses, so it costs one ``sum_largest`` per jump of ``sigma`` (one for ERM,
at most two for a superquantile).
"""

import numpy as np


def jumps(sigma):
    """Indices ``k`` and sizes of the jumps of the nondecreasing weights ``sigma``.

    Parameters
    ----------
    sigma : ndarray of shape (n,)
        Rank weights, ascending order statistics first.

    Returns
    -------
    k : ndarray of int
        Positions where ``sigma`` increases by more than ``1e-9 max |sigma|``
        (rounding errors are not jumps; ``sigma`` is 0 before the start).
    size : ndarray
        ``sigma[k] - sigma[k - 1]``.
    """
    step = np.diff(sigma, prepend=0.0)
    k = np.flatnonzero(step > 1e-9 * max(float(np.max(np.abs(sigma))), 1e-300))
    return k, step[k]


def cvxpy_optimum(X, y, risk, loss, penalty, *, fit_intercept=True, tol=1e-9):
    """skrank's objective at CLARABEL's minimiser of a convex rank-risk problem.

    Parameters
    ----------
    X : ndarray or sparse matrix of shape (n_samples, n_features)
    y : ndarray of shape (n_samples,)
        Labels in {-1, +1} for a classification loss, targets otherwise.
    risk : skrank.risks.BaseRisk
        A convex risk (nondecreasing weights).
    loss : skrank.losses.Loss
    penalty : skrank.penalties.Penalty
    fit_intercept : bool, default=True
    tol : float, default=1e-9
        CLARABEL's absolute and relative gap and feasibility tolerances.

    Returns
    -------
    value : float
        ``F`` evaluated by skrank's own formula at cvxpy's minimiser, so an
        upper bound on the optimum in the same arithmetic as ``objective_``.
    status : str
        cvxpy's status (``"optimal"`` or ``"optimal_inaccurate"``).

    Raises
    ------
    RuntimeError
        If CLARABEL returns no solution.
    """
    import cvxpy as cp

    n, d = X.shape
    sigma = np.asarray(risk.weights(n), dtype=np.float64)
    w = cp.Variable(d)
    b = cp.Variable() if fit_intercept else 0.0
    f = X @ w + b
    t = cp.multiply(-y, f) if loss.task == "classification" else f - y
    losses = loss.cvxpy_expression(cp, t)
    rank_term = sum(h * cp.sum_largest(losses, n - k) for k, h in zip(*jumps(sigma)))
    objective = rank_term + penalty.l1 * cp.norm1(w) + 0.5 * penalty.l2 * cp.sum_squares(w)
    problem = cp.Problem(cp.Minimize(objective))
    problem.solve(solver="CLARABEL", tol_gap_abs=tol, tol_gap_rel=tol, tol_feas=tol)
    if problem.status not in (cp.OPTIMAL, cp.OPTIMAL_INACCURATE):
        raise RuntimeError(f"CLARABEL status {problem.status}")
    w_opt = np.asarray(w.value, dtype=np.float64)
    b_opt = float(b.value) if fit_intercept else 0.0
    f_opt = np.asarray(X @ w_opt).ravel() + b_opt
    t_opt = -y * f_opt if loss.task == "classification" else f_opt - y
    value = float(np.sort(loss.value(t_opt)) @ sigma + penalty.value(w_opt))
    return value, problem.status
