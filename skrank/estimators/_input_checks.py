"""The estimators' checks of their inputs: ``X`` where it lives (NumPy, SciPy sparse, Dask, array API),
the targets' shape, the sample and class weights, and the namespace of the fitted arrays."""

import numpy as np
from sklearn.utils._array_api import check_same_namespace
from sklearn.utils.class_weight import compute_sample_weight
from sklearn.utils.validation import _check_sample_weight, check_is_fitted, validate_data

from ..backends import arrays
from ..backends.array_api_design import array_api_namespace, device_of, to_namespace, to_numpy
from ..backends.dask_design import is_dask_array
from ..backends.dispatch import external_kind


def _check_class_weight_values(class_weight):
    """Raise a ValueError naming ``class_weight`` when a class's weight is negative, NaN or infinite."""
    for label, value in class_weight.items():
        try:
            number = float(value)
        except (TypeError, ValueError):
            number = np.nan
        if not (np.isfinite(number) and number >= 0.0):
            kind = "negative" if number < 0.0 else "not a finite number"
            raise ValueError(
                f"class_weight gives class {label!r} the weight {value!r}, which is {kind}: class "
                "weights multiply the samples' weights and must be finite and nonnegative (0 drops "
                f"the class's samples). Pass a nonnegative weight for class {label!r}."
            )


class InputChecks:
    """The checks of ``fit``'s, ``partial_fit``'s and the predictions' inputs (a part of the fit template)."""

    _task = None  # "classification" or "regression"
    _accept_sparse = "csr"
    #: whether ``fit`` takes a multi-label indicator ``y`` (one ranking per label)
    _multilabel = False
    #: whether the targets of a Dask ``X`` may stay a Dask array on the workers (the solvers that
    #: do not take them so get them gathered, :meth:`RegisteredSolverModel._datafit`)
    _keeps_dask_targets = False

    def _fit_sample_weight(self, X, y, sample_weight):
        """The validated weights (times ``class_weight``), or None for equal weights.

        Weights of one everywhere are None: the fit is then exactly the
        unweighted one, with any solver.  Weights whose values or sum
        overflow are refused (ValueError naming ``sample_weight``); others
        are kept as given, at any scale.  The objectives compute with the
        weights' ratios (the weighted empirical distribution, rescaled
        internally so that tiny or huge weights neither underflow nor
        overflow); the total weight ``W`` matters only where repeated rows
        need it (``alpha=None`` is ``1 / W``, the integer counts of ``TopK`` and
        ``RankedRange`` and Platt's smoothed targets are in units of weight;
        doc/sample_weights.rst).
        """
        class_weight = getattr(self, "class_weight", None)
        if sample_weight is None and class_weight is None:
            return None
        if sample_weight is not None and not np.isscalar(sample_weight):
            sample_weight = arrays.to_host(sample_weight)  # n values, on the host for an external X
        weights = _check_sample_weight(sample_weight, np.asarray(y), dtype=np.float64,
                                       ensure_non_negative=True)
        if class_weight is not None:
            if isinstance(class_weight, dict):
                unknown = [c for c in class_weight if c not in set(np.unique(y).tolist())]
                if unknown:
                    raise ValueError(f"class_weight names classes not in y: {unknown}.")
                _check_class_weight_values(class_weight)
            with np.errstate(over="ignore"):
                weights = weights * compute_sample_weight(class_weight, y)
        with np.errstate(over="ignore"):
            total = float(np.sum(weights))
        if not (np.all(np.isfinite(weights)) and np.isfinite(total)):
            raise ValueError(
                "sample_weight overflows: " + ("its values times class_weight's" if class_weight is not None
                                               else "its values") +
                f" or their sum exceed the largest float ({np.finfo(np.float64).max:.3g}); rescale "
                "sample_weight (e.g. divide it by its largest value).")
        if not total > 0.0:
            raise ValueError("sample_weight sums to zero: at least one sample needs a positive weight.")
        if np.all(weights == 1.0):
            return None
        return weights

    @staticmethod
    def _drop_weightless(X, y, sample_weight):
        """Remove the samples of weight zero (a weighted risk ignores them, :mod:`skrank.risks`)."""
        if sample_weight is None or np.all(sample_weight > 0.0):
            return X, y, sample_weight
        keep = sample_weight > 0.0
        xp = array_api_namespace(X)
        if xp is not None:
            rows = to_namespace(np.flatnonzero(keep), xp, device_of(X))
            return xp.take(X, rows, axis=0), y[keep], sample_weight[keep]
        return X[keep], y[keep], sample_weight[keep]

    def _validate_fit_data(self, X, y, reset=True):
        if external_kind(X) is not None:
            return self._validate_external_data(X, y, reset)
        X, y = validate_data(self, X, y, reset=reset, accept_sparse=self._accept_sparse,
                             dtype=[np.float64, np.float32], y_numeric=self._task == "regression",
                             ensure_min_samples=2 if reset else 1, multi_output=self._multilabel)
        if X.dtype != np.float64:
            X = X.astype(np.float64)
        return X, y

    def _validate_external_data(self, X, y, reset):
        """An external ``X`` checked where it lives, without gathering it, and its targets ``y``.

        A Dask ``X`` is checked finite in one pass over its chunks; an
        array-API ``X`` (CuPy...) on its device, with scikit-learn's array
        API dispatch on.  A Dask vector ``y`` stays on the workers where the
        solvers take it (``_keeps_dask_targets``): its finite values are one
        reduction, a classifier's labels are checked from their distinct
        values (:func:`skrank.estimators._tasks._labels_of`).
        """
        X = arrays.check_where_it_lives(X)
        n, d = X.shape
        if reset:
            self.n_features_in_ = d
            self.__dict__.pop("feature_names_in_", None)
        else:
            self._check_external_features(d)
        if n < (2 if reset else 1):
            raise ValueError(f"Found array with {n} sample(s) while a minimum of 2 is required.")
        if is_dask_array(X) and not bool(
                X.map_blocks(lambda block: np.all(np.isfinite(block)).reshape(1, 1), chunks=(1, 1),
                             dtype=bool).all().compute()):
            raise ValueError("Input X contains NaN or infinity.")
        lazy = self._keeps_dask_targets and is_dask_array(X) and is_dask_array(y) and y.ndim == 1
        if lazy and np.isnan(y.shape[0]):
            raise ValueError("y has unknown chunk sizes (NaN); call y.compute_chunk_sizes() first.")
        y = y if lazy else arrays.to_host(y)
        if y.ndim == 2 and self._multilabel and y.shape[0] == n:
            return X, y  # a multi-label indicator (or a column), checked by _check_targets
        if y.ndim != 1 or y.shape[0] != n:
            shapes = (f"a vector of length {n} or, multi-label, a matrix of {n} rows" if self._multilabel
                      else f"a vector of length {n}")
            raise ValueError(f"y must be {shapes} (the rows of X), got shape {y.shape}.")
        if self._task == "regression":
            y = y.astype(np.float64)
            if not bool(np.all(np.isfinite(y))):  # one reduction of a Dask y
                raise ValueError("Input y contains NaN or infinity.")
        return X, y

    def _check_external_features(self, d):
        """Raise scikit-learn's ValueError when an external ``X`` has not the fitted number of features."""
        if d != self.n_features_in_:
            raise ValueError(f"X has {d} features, but {type(self).__name__} is expecting "
                             f"{self.n_features_in_} features as input.")

    def _linear_predict(self, X, method):
        """``X @ coef_.T + intercept_`` with one column per problem, where ``X`` lives (lazy for Dask).

        Under array API dispatch, ``X`` must be of the namespace and device
        of the fit (``method`` names the caller in the error), as in
        scikit-learn.
        """
        self._check_fitted_namespace(X, method)
        coef = np.atleast_2d(to_numpy(self.coef_)).T
        intercept = np.atleast_1d(to_numpy(self.intercept_))
        if external_kind(X) is not None:
            X = arrays.check_where_it_lives(X)
            self._check_external_features(X.shape[1])
        else:
            X = validate_data(self, X, accept_sparse=self._accept_sparse, dtype=[np.float64, np.float32],
                              reset=False)
        return arrays.linear_scores(X, coef, intercept)

    def _check_fitted_namespace(self, X, method):
        """Fitted, and under array API dispatch on ``X``'s namespace and device (as in scikit-learn)."""
        check_is_fitted(self)
        check_same_namespace(X, self, attribute="coef_", method=method)

    def _place_fitted(self, X):
        """Move the fitted arrays (``coef_``...) to the namespace and device of an array-API ``X``.

        As scikit-learn's estimators do under array API dispatch; labels
        that are not numbers (strings) stay NumPy arrays.
        """
        xp = array_api_namespace(X)
        if xp is None:
            return
        device = device_of(X)
        for name, value in list(vars(self).items()):
            fitted = name.endswith("_") and not name.startswith("_")
            if fitted and isinstance(value, np.ndarray) and value.dtype.kind in "biuf":
                setattr(self, name, to_namespace(value, xp, device))
