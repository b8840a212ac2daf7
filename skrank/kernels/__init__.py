"""Compiled ranking kernels shared by the datafits and the solvers: sorting and PAVA."""
