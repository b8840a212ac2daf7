"""The exact finish of a first-order run with a smooth loss: its iterate handed to the Newton method.

:class:`NewtonFinish` offers the interface of
:class:`~skrank.solvers.finish.piecewise_linear.PiecewiseLinearFinish` (:mod:`skrank.solvers.finish`).
"""

import numpy as np

from ..registry import SOLVERS
from . import FinishResult
from ._constants import MAX_FEATURES, NEWTON_GAP, NEWTON_STEPS


class NewtonFinish:
    """Certified finish of an iterate by :func:`skrank.solvers.full_batch.newton.smoothed_newton`.

    Parameters
    ----------
    datafit : skrank.datafits.rank_risk.RankRisk
        The data, the risk and the loss (unweighted).
    penalty : skrank.penalties.Penalty
        The penalty; :meth:`applies` says whether the Newton method fits the problem.
    """

    #: Most coefficients for which a finish is set up.
    max_features = MAX_FEATURES

    def __init__(self, datafit, penalty):
        self.datafit, self.penalty = datafit, penalty
        design = datafit.design()
        n, p = design.n, design.p
        self._scale = 2 * n * p
        # a Newton step: a weighted Gram matrix (about p products) and a few products
        self._step_cost = self._scale * (p + 4)
        #: Multiply-adds spent so far (a product with ``[X, 1]`` counts ``2 n p``).
        self.work = 0

    @staticmethod
    def applies(risk, loss, penalty):
        """Whether the Newton method fits the problem (:data:`skrank.solvers.registry.SOLVERS`).

        Parameters
        ----------
        risk, loss, penalty : objects
            The problem.

        Returns
        -------
        bool
            True when ``solver="newton"`` would accept it.
        """
        return SOLVERS["newton"].unsupported(risk, loss, penalty) is None

    def objective(self, w, b):
        """``F(w, b)``."""
        return self.datafit.objective(w, b, self.penalty)

    def snap(self, t):
        """The reading of ties of the piecewise-linear finish, not needed here: ``t`` itself."""
        return t

    def __call__(self, z, w, tol, b=0.0, u=None, rounds=None):
        """Finish from ``(w, b)``; ``z``, ``u`` and ``rounds`` (of the piecewise-linear finish) are unused."""
        return self.from_iterate(None, w, b, tol)

    def from_iterate(self, t, w, b, tol, max_work=None):
        """The :class:`FinishResult` of the Newton method started at ``(w, b)`` (residual: its relative gap).

        ``lambda`` is the ADMM's multiplier of ``z = t`` at that point: minus
        the certificate's loss weights ``q_i l'(t_i)``.
        """
        from ..full_batch.newton import smoothed_newton

        steps = NEWTON_STEPS
        if max_work is not None:
            steps = int(max(1, min(steps, max_work // self._step_cost)))
        res = smoothed_newton(self.datafit, self.penalty, coef_init=np.asarray(w, dtype=float),
                              intercept_init=float(b), max_iter=steps, tol=min(tol, NEWTON_GAP))
        self.work += int(res.info["passes"]) * self._scale
        t = self.datafit.arguments(res.coef, res.intercept)
        # the ADMM's multipliers of z = t: minus the loss weights q l'(t) in dOmega(t)
        lam = -res.info["weights"] * self.datafit.loss.derivative(t)
        return FinishResult(res.coef, res.intercept, res.converged, res.stop_criterion, t, lam)
