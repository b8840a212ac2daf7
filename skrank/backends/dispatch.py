"""Where ``X`` is held: in memory (NumPy, SciPy), as a Dask array, or in another array-API library.

An *external* ``X`` (Dask's chunks, a CuPy array on a GPU) stays where it is:
the full-batch solvers reach it only through the products of its design
(:func:`make_design`), and the solvers that need rows in memory refuse it.
"""

from .array_api_design import ArrayAPIDesign, array_api_namespace, namespace_name
from .dask_design import DaskDesign, is_dask_array
from .design import Design


def external_kind(X):
    """``"a Dask array"``, ``"a cupy array"``... for an external ``X``; None for NumPy and SciPy data."""
    if is_dask_array(X):
        return "a Dask array"
    xp = array_api_namespace(X)
    return None if xp is None else f"a {namespace_name(xp)} array"


def is_external(X):
    """Whether ``X`` is a Dask array or an array of an array-API library other than NumPy."""
    return external_kind(X) is not None


def make_design(X, fit_intercept):
    """The design of ``X``: :class:`DaskDesign`, :class:`ArrayAPIDesign` or the in-memory :class:`Design`."""
    if is_dask_array(X):
        return DaskDesign(X, fit_intercept)
    if array_api_namespace(X) is not None:
        return ArrayAPIDesign(X, fit_intercept)
    return Design(X, fit_intercept)
