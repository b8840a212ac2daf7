"""Exact finishes of the first-order rank-risk solvers on convex problems.

The ADMM (:mod:`skrank.solvers.splitting.admm`) and SOREL (:mod:`skrank.solvers.stochastic.sorel`)
converge linearly at best.  At the points of their schedules they hand
their iterate to a finish, which returns a :class:`FinishResult`; a
certified one ends the run:

* :class:`NewtonFinish` (smooth losses): the certified proximal Newton
  method of :mod:`skrank.solvers.full_batch.newton`, started at the iterate;
* :class:`PiecewiseLinearFinish` (hinge and absolute losses): ``F`` solved
  on the face the iterate identifies
  (:mod:`skrank.solvers.finish.piecewise_linear`), found by an active-set
  walk (:mod:`skrank.solvers.finish.walk`) with a compiled loop
  (:mod:`skrank.solvers.finish.walk_kernel`) and by active-set rounds.

Both solvers attempt a finish on one :class:`FinishSchedule`; the tuning
constants of all of them are in :mod:`skrank.solvers.finish._constants`.
"""

from typing import NamedTuple

import numpy as np


class FinishResult(NamedTuple):
    """What a finish returns.

    Parameters
    ----------
    coef : ndarray of shape (d,)
        The coefficients.
    intercept : float
        The intercept.
    certified : bool
        Whether the point is certified optimal to the requested tolerance.
    residual : float
        The finish's optimality measure (the scaled KKT residual of the
        piecewise-linear finish, the Newton method's relative gap).
    t : ndarray of shape (n,)
        The loss arguments at the point.
    lam : ndarray of shape (n,)
        The ADMM's multipliers of ``z = t`` at the point: minus the loss
        weights in ``dOmega(t)``.
    """

    coef: np.ndarray
    intercept: float
    certified: bool
    residual: float
    t: np.ndarray
    lam: np.ndarray


from .newton import NewtonFinish  # noqa: E402
from .piecewise_linear import PiecewiseLinearFinish  # noqa: E402
from .schedule import FinishSchedule  # noqa: E402

__all__ = ["FinishResult", "FinishSchedule", "NewtonFinish", "PiecewiseLinearFinish"]
