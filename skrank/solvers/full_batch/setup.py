"""What the certified full-batch solvers share: the check of a problem and the starting point."""

import numpy as np

from ..registry import SOLVERS


def check_supported(solver, datafit, penalty):
    """Raise the solver's table row's reason when it does not fit the problem.

    Parameters
    ----------
    solver : str
        The solver's name in :data:`skrank.solvers.registry.SOLVERS`.
    datafit : skrank.datafits.rank_risk.RankRisk
        Its risk and loss.
    penalty : skrank.penalties.Penalty

    Raises
    ------
    ValueError
        With the table's reason, when the solver does not fit the problem.
    """
    reason = SOLVERS[solver].unsupported(datafit.risk, datafit.loss, penalty)
    if reason is not None:
        raise ValueError(reason)


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
