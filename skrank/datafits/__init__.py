"""Datafits: the objectives the solvers minimise, with their values, gradients and curvature."""
