"""The design in the units where the stochastic solvers take their steps.

* :class:`FeatureUnits`: the affine change of coefficients that puts every
  feature in unit scale, in which the automatic steps are derived (so that
  rescaling a column of ``X`` rescales its coefficient and nothing else);
* :func:`user_step_fraction`: how a step given in the units of ``X``
  compares with the automatic one;
* :func:`prepare_data`: the dense float64 design, the affine map of the loss
  arguments (``t_i = s_i f_i + c_i``, see :func:`skrank.datafits.rank_risk.affine_map`)
  and the squared row norms (``+ 1`` for the intercept column).
"""

import numpy as np
import scipy.sparse as sp

from ...datafits.rank_risk import affine_map

#: A column whose spread is at most this fraction of its root mean square is constant
#: (what is left of it is the rounding of its mean).
_CONSTANT_RTOL = 1e-10


def dense_design(X):
    """``X`` as a dense, C-contiguous float64 array."""
    if sp.issparse(X):
        X = X.toarray()
    return np.ascontiguousarray(X, dtype=np.float64)


def _column_stats(X, p, fit_intercept):
    """Weighted column statistics of ``X / size``: ``(mean, spread, rms, size)``.

    ``size`` is each column's largest magnitude (1 for a zero column), so that
    squares of features near 1e-200 or 1e200 stay finite; ``spread`` is the
    standard deviation about ``mean`` (two passes, also for a sparse ``X``,
    whose zeros count through the weight they leave over), zero without
    ``fit_intercept``.
    """
    d = X.shape[1]
    if sp.issparse(X):
        A = sp.csc_matrix(X, dtype=np.float64)
        cols = np.repeat(np.arange(d), np.diff(A.indptr))
        rows = A.indices
        size = np.zeros(d)
        np.maximum.at(size, cols, np.abs(A.data))
        size[~(size > 0)] = 1.0
        z = A.data / size[cols]
        pr = p[rows]
        rms = np.sqrt(np.bincount(cols, pr * z * z, minlength=d))
        mean, spread = np.zeros(d), np.zeros(d)
        if fit_intercept:
            mean = np.bincount(cols, pr * z, minlength=d)
            left = np.maximum(1.0 - np.bincount(cols, pr, minlength=d), 0.0)
            var = np.bincount(cols, pr * (z - mean[cols]) ** 2, minlength=d) + left * mean ** 2
            spread = np.sqrt(var)
        return mean, spread, rms, size
    X = np.asarray(X, dtype=np.float64)
    size = np.abs(X).max(axis=0) if X.shape[0] else np.zeros(d)
    size[~(size > 0)] = 1.0
    Z = X / size
    rms = np.sqrt(p @ (Z * Z))
    mean, spread = np.zeros(d), np.zeros(d)
    if fit_intercept:
        mean = p @ Z
        spread = np.sqrt(np.maximum(p @ ((Z - mean) ** 2), 0.0))
    return mean, spread, rms, size


class FeatureUnits:
    """The affine change of coefficients in which the stochastic solvers take their steps.

    The features ``(x_ij - m_j) / u_j`` and the coefficients ``u_j w_j`` give
    the same scores, the penalty rescaled to match, so that the steps do not
    depend on the scale of the columns (:ref:`methods-feature-units`).

    Parameters
    ----------
    X : {ndarray, sparse matrix} of shape (n, d)
        The data (or the first batch of a stream) the units are read from.
    fit_intercept : bool
        With an intercept ``m`` holds the column means and ``u`` the standard
        deviations; without one ``m = 0`` and ``u`` holds the root mean squares.
    sample_weight : ndarray of shape (n,), optional
        Weights of the rows in the means (only their ratios matter).
    per_feature : bool, default=True
        False: one unit for every column, the root mean square of the ``u_j``
        (for a solver whose penalty must stay a multiple of the identity).
    identity : bool, default=False
        ``m = 0``, ``u = 1``: the original coordinates (a step size given by
        the user is in the units of ``X``).

    Attributes
    ----------
    offset : ndarray of shape (d,)
        ``m``.
    unit : ndarray of shape (d,)
        ``u``; a constant column (its spread at most ``1e-10`` of its root
        mean square) is zero in ``x~`` and gets the root mean square of the
        other units (1 when every column is constant).
    constant : ndarray of bool, shape (d,)
        The constant columns.
    """

    def __init__(self, X, fit_intercept, sample_weight=None, *, per_feature=True, identity=False):
        d = X.shape[1]
        self.offset, self.unit = np.zeros(d), np.ones(d)
        self.constant = np.zeros(d, dtype=bool)
        self.identity = bool(identity)
        if self.identity:
            return
        n = X.shape[0]
        if sample_weight is None:
            p = np.full(n, 1.0 / max(n, 1))
        else:
            p = np.asarray(sample_weight, dtype=np.float64)
            p = p / p.max() if p.size and p.max() > 0 else np.ones_like(p)
            p = p / p.sum()
        mean, spread, rms, size = _column_stats(X, p, fit_intercept)
        if fit_intercept:
            self.constant = spread <= _CONSTANT_RTOL * rms
            self.offset = mean * size
        else:
            spread = rms
            self.constant = ~(rms > 0)
        unit = spread * size
        free = ~self.constant
        fill = 1.0
        if free.any():
            top = float(unit[free].max())
            fill = top * float(np.sqrt(np.mean((unit[free] / top) ** 2))) if top > 0 else 1.0
        if not (np.isfinite(fill) and fill > 0):
            fill = 1.0
        unit[self.constant] = fill
        if not per_feature:
            unit[:] = fill
        self.unit = unit

    def transform(self, X):
        """``x~ = (X - m) / u`` (dense, C-contiguous).

        In a constant column the entries equal to its value up to rounding
        are exactly zero; others (a later batch of a stream, where the
        column varies) keep their value.
        """
        X = dense_design(X)
        if self.identity:
            return X
        Xt = (X - self.offset) / self.unit
        if self.constant.any():
            cols = np.flatnonzero(self.constant)
            m = self.offset[cols]
            rounding = np.abs(X[:, cols] - m) <= 100 * _CONSTANT_RTOL * np.abs(m)
            Xt[:, cols] = np.where(rounding, 0.0, Xt[:, cols])
        return np.ascontiguousarray(Xt)

    def to_internal(self, w, b):
        """``(v, b~)`` from the coefficients ``w`` and the intercept ``b`` (a float)."""
        w = np.asarray(w, dtype=np.float64)
        return w * self.unit, float(b) + float(self.offset @ w)

    def to_original(self, v, b):
        """``(w, b)`` from ``(v, b~)``."""
        w = np.asarray(v, dtype=np.float64) / self.unit
        return w, float(b) - float(self.offset @ w)

    def penalty(self, penalty):
        """``(l1 / u, l2 / u^2)``: the penalty's strengths per internal coefficient."""
        return (np.ascontiguousarray(penalty.l1 / self.unit),
                np.ascontiguousarray(penalty.l2 / (self.unit * self.unit)))

    def step_fraction(self, lr, lr_auto, fit_intercept):
        """The smallest ratio of a step ``lr`` in the units of ``X`` to the automatic one.

        ``lr_auto`` is a step in the units of ``x~``: in the units of ``X``
        it is ``lr_auto / u_j^2`` for the coefficient ``j`` and ``lr_auto`` for
        the intercept.  Constant columns do not count.
        """
        ratios = lr * self.unit[~self.constant] ** 2 / lr_auto
        if fit_intercept:
            ratios = np.append(ratios, lr / lr_auto)
        return float(ratios.min()) if ratios.size else 1.0


def user_step_fraction(X, fit_intercept, lr, auto_step, sample_weight=None, per_feature=True):
    """:meth:`FeatureUnits.step_fraction` of a given step ``lr`` against the automatic one.

    ``auto_step(sqnorms)`` is the automatic step from the squared row norms
    of the standardised design (``+ 1`` with an intercept); ``per_feature``
    as in :class:`FeatureUnits`.
    """
    units = FeatureUnits(X, fit_intercept, sample_weight, per_feature=per_feature)
    Xt = units.transform(X)
    sqnorms = np.einsum("ij,ij->i", Xt, Xt) + (1.0 if fit_intercept else 0.0)
    return units.step_fraction(lr, auto_step(sqnorms), fit_intercept)


def prepare_data(X, y, loss, fit_intercept):
    """Dense design and affine map of the loss arguments.

    Sparse input is densified: the stochastic kernels update a dense ``w``
    at every step, so a sparse layout would save nothing at the sizes these
    solvers target.

    Returns
    -------
    X : ndarray of shape (n, d), C-contiguous float64
    s, c : ndarray of shape (n,)
        ``t_i = s_i (x_i . w + b) + c_i``.
    sqnorms : ndarray of shape (n,)
        ``||x_i||^2 + fit_intercept``.
    """
    X = dense_design(X)
    s, c = affine_map(y, loss.task)
    sqnorms = np.einsum("ij,ij->i", X, X) + (1.0 if fit_intercept else 0.0)
    return X, np.ascontiguousarray(s), np.ascontiguousarray(c), sqnorms


def standardised_data(X, y, loss, fit_intercept, lr, per_feature=True):
    """The data of a solver that steps in the units of :class:`FeatureUnits`.

    Parameters
    ----------
    X : {ndarray, sparse matrix} of shape (n, d)
        The design.
    y : ndarray of shape (n,)
        Labels or targets.
    loss : skrank.losses.Loss
        The loss (its task sets the map of the loss arguments).
    fit_intercept : bool
        Whether the model has an intercept.
    lr : float or None
        A step given by the user (the units are then the identity) or None
        for the automatic step.
    per_feature : bool, default=True
        As in :class:`FeatureUnits`.

    Returns
    -------
    X_orig : ndarray of shape (n, d)
        The dense design in the units of ``X``.
    units : FeatureUnits
    X, s, c, sqnorms : ndarray
        :func:`prepare_data` of the standardised design.
    """
    X_orig = dense_design(X)
    units = FeatureUnits(X_orig, fit_intercept, per_feature=per_feature, identity=lr is not None)
    return (X_orig, units) + prepare_data(units.transform(X_orig), y, loss, fit_intercept)


def resolve_step(lr, auto_step, sqnorms, X_orig, fit_intercept, per_feature=True):
    """``(lr, fraction)``: the step taken and its ratio to the automatic one.

    With ``lr`` None the step is ``auto_step(sqnorms)`` and the fraction 1;
    a given ``lr`` is kept and the fraction is :func:`user_step_fraction`.
    """
    if lr is None:
        return auto_step(sqnorms), 1.0
    return lr, user_step_fraction(X_orig, fit_intercept, lr, auto_step, per_feature=per_feature)
