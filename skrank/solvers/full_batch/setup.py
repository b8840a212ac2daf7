"""What the certified full-batch solvers share: the check of a problem and the starting point."""

import numpy as np

from ...backends.dispatch import is_external
from ..registry import SOLVERS


def supported_input(solver, X, risk, loss, penalty):
    """``X`` as the solver's design takes it, once the solver's table row accepts the problem.

    Parameters
    ----------
    solver : str
        The solver's name in :data:`skrank.solvers.registry.SOLVERS`.
    X : {array-like, sparse matrix, dask.array.Array, array-API array} of shape (n, d)
        The features.
    risk, loss, penalty
        The problem.

    Returns
    -------
    X : {ndarray, sparse matrix, dask.array.Array, array-API array}
        ``X`` itself when sparse or external, else a float64 ndarray.

    Raises
    ------
    ValueError
        With the table's reason, when the solver does not fit the problem.
    """
    reason = SOLVERS[solver].unsupported(risk, loss, penalty)
    if reason is not None:
        raise ValueError(reason)
    if not (hasattr(X, "tocsr") or is_external(X)):
        X = np.asarray(X, dtype=np.float64)
    return X


def starting_theta(design, coef_init, intercept_init):
    """The start ``theta = (w, b)`` of a design's coefficients, zero where not given.

    Parameters
    ----------
    design : skrank.backends.design.Design
        Gives the numbers of coefficients ``d`` and ``p`` and ``fit_intercept``.
    coef_init : ndarray of shape (d,) or None
    intercept_init : float or None
        Ignored without an intercept.

    Returns
    -------
    theta : ndarray of shape (p,)
    """
    theta = np.zeros(design.p)
    if coef_init is not None:
        theta[: design.d] = coef_init
    if design.fit_intercept and intercept_init is not None:
        theta[-1] = float(intercept_init)
    return theta
