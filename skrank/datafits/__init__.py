"""Datafits: the objectives the solvers minimise, with their values, gradients and curvature.

:mod:`skrank.datafits.base` states what a datafit gives (:class:`~skrank.datafits.base.Datafit`).
"""
