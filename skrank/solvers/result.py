"""The value every solver returns."""

from dataclasses import dataclass, field

import numpy as np


@dataclass
class SolverResult:
    """Outcome of one solver run.

    Attributes
    ----------
    coef : ndarray of shape (n_features,)
        Coefficients.
    intercept : float
        Intercept (0.0 when not fitted).
    n_iter : int
        Outer iterations (or epochs) run.
    objective_history : ndarray
        The objective after each outer iteration (or epoch).
    stop_criterion : float
        Final value of the solver's stopping criterion (its meaning is
        documented by each solver: a KKT residual, a relative change, ...).
    converged : bool
        Whether ``stop_criterion <= tol`` was reached before ``max_iter``.
    info : dict
        Solver-specific extras (times, residual histories, ...).
    """

    coef: np.ndarray
    intercept: float
    n_iter: int
    objective_history: np.ndarray
    stop_criterion: float
    converged: bool
    info: dict = field(default_factory=dict)

    @property
    def objective(self):
        """Final objective value."""
        return float(self.objective_history[-1]) if len(self.objective_history) else np.nan
