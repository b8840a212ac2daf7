"""Solvers: plain functions over arrays, one file per algorithm.

Each solver takes validated arrays (``X`` of shape (n, d), ``y`` with
labels in {-1, +1} for classification or real targets for regression), a
risk, a loss and a penalty, and returns a :class:`SolverResult`.  Solvers
never validate user input and never import scikit-learn's estimator
machinery.
"""

from .result import SolverResult

__all__ = ["SolverResult"]
