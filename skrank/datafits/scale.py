"""The units of a linear model's coefficients, read from its design (a diagonal preconditioner)."""

import numpy as np

#: The curvature of a loss per unit of score assumed where the l2 penalty sets the units
#: (that of the logistic loss at most, ``p (1 - p) <= 1/4``).
_LOSS_CURVATURE = 0.25


def linear_model_scale(design, row_weight=None, alpha=0.0, *, rms=None):
    """The units of a linear model's coefficients ``(w, b)``: a diagonal preconditioner for L-BFGS.

    For ``w_j`` the root mean square of column ``j`` of ``X`` under the row
    weights (:meth:`skrank.backends.design.Design.column_rms`), or
    ``sqrt(alpha / 0.25)`` when that is larger, and 1 for the intercept: the
    square roots of the curvature's diagonal for the logistic loss, up to a
    factor of about two (user guide, :ref:`methods-lbfgs`).

    Parameters
    ----------
    design : skrank.backends.design.Design
        The design ``[X, 1]`` (or ``X`` alone without an intercept).
    row_weight : ndarray of shape (n,), default=None
        Nonnegative weights of the rows; None for equal weights.
    alpha : float, default=0.0
        Strength of the l2 penalty on ``w``.
    rms : ndarray of shape (n_features,), default=None
        The columns' root mean squares when already measured (no pass over ``X`` then).

    Returns
    -------
    ndarray of shape (design.p,)
        Positive and finite: 1 where neither the column nor ``alpha`` gives
        a unit (a zero column without a penalty, or squares that overflow).
    """
    rms = design.column_rms(row_weight) if rms is None else np.asarray(rms, dtype=np.float64)
    floor = float(np.sqrt(max(float(alpha), 0.0) / _LOSS_CURVATURE))
    if not np.isfinite(floor):
        floor = 0.0
    scale = np.maximum(np.where(np.isfinite(rms), rms, 0.0), floor)
    scale = np.where(scale > 0.0, scale, 1.0)
    return np.append(scale, 1.0) if design.fit_intercept else scale


def gradient_test_scale(scale, rms, fit_intercept):
    """The units in which L-BFGS's gradient test reads a linear model's gradient.

    The root mean square ``r_j`` of each column (1 for the intercept), where
    the column has one, else the unit ``scale_j`` of the coefficient: the
    test then bounds the first-order change of ``F`` when the scores move
    by a feature of unit root mean square, whatever ``alpha`` (user guide,
    :ref:`methods-lbfgs`).

    Parameters
    ----------
    scale : ndarray of shape (p,)
        The units of :func:`linear_model_scale`.
    rms : ndarray of shape (n_features,)
        The columns' root mean squares.
    fit_intercept : bool
        Whether the last entry of ``scale`` is the intercept's.

    Returns
    -------
    ndarray of shape (p,)
        Positive and finite, at most ``scale``.
    """
    rms = np.asarray(rms, dtype=np.float64)
    if fit_intercept:
        rms = np.append(rms, 1.0)
    return np.where(np.isfinite(rms) & (rms > 0.0), np.minimum(rms, scale), scale)
