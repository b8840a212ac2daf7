"""Stochastic solvers: steps on samples or batches, with the exact objective checked between epochs."""
