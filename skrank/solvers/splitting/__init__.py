"""Splitting solvers: ADMM and the difference-of-convex methods built on it or on SBCD."""
