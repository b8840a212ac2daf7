"""Designs: the matrix products of a linear model on NumPy, SciPy sparse, Dask and array-API data."""
