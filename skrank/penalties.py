"""Penalties on the coefficients: value and proximal operator.

``l2``: ``alpha / 2 ||w||^2``; ``l1``: ``alpha ||w||_1``; ``elasticnet``:
``alpha (l1_ratio ||w||_1 + (1 - l1_ratio) / 2 ||w||^2)`` (scikit-learn's
parametrisation).  The intercept is never penalised.
"""

from dataclasses import dataclass

import numpy as np


def soft_threshold(v, t):
    """Soft-threshold elementwise: ``sign(v) * max(|v| - t, 0)``.

    Parameters
    ----------
    v : array-like
        Values to shrink towards zero.
    t : float or array-like
        Threshold, nonnegative; an array broadcasts against ``v``.

    Returns
    -------
    ndarray
        The shrunk values, of the broadcast shape of ``v`` and ``t``.
    """
    return np.sign(v) * np.maximum(np.abs(v) - t, 0.0)


@dataclass(frozen=True)
class Penalty:
    """A penalty ``alpha * R(w)``, split into its l1 and l2 strengths.

    ``value(w) = l1 * ||w||_1 + l2 / 2 * ||w||^2`` with
    ``l1 = alpha * l1_ratio`` and ``l2 = alpha * (1 - l1_ratio)``.

    Parameters
    ----------
    l1 : float
        Strength of the l1 term.
    l2 : float
        Strength of the squared l2 term.
    """

    l1: float
    l2: float

    def value(self, w):
        """Return the penalty value at ``w``.

        Parameters
        ----------
        w : array-like of shape (d,)
            Coefficients (without the intercept).

        Returns
        -------
        float
            ``l1 * ||w||_1 + l2 / 2 * ||w||^2``.
        """
        w = np.asarray(w, dtype=np.float64)
        return float(self.l1 * np.abs(w).sum() + 0.5 * self.l2 * (w @ w))

    def prox(self, v, step):
        """Apply the proximal operator ``argmin_w step * R(w) + ||w - v||^2 / 2``.

        Parameters
        ----------
        v : array-like of shape (d,)
            Point at which the operator is evaluated.
        step : float
            Step size, nonnegative.

        Returns
        -------
        ndarray of shape (d,)
            The minimiser: ``v`` soft-thresholded at ``step * l1``, divided by
            ``1 + step * l2``.
        """
        v = np.asarray(v, dtype=np.float64)
        return soft_threshold(v, step * self.l1) / (1.0 + step * self.l2)

    def subgradient_distance(self, w, g):
        """Return the distance from ``g`` to the subdifferential of the penalty at ``w``.

        Used by the stopping rules: ``dist(-grad_smooth, dR(w))``.

        Parameters
        ----------
        w : array-like of shape (d,)
            Coefficients at which the subdifferential is taken.
        g : array-like of shape (d,)
            Vector whose distance is measured (the stopping rules pass
            minus the gradient of the smooth part).

        Returns
        -------
        float
            Euclidean distance, zero when ``g`` is a subgradient of the
            penalty at ``w``.
        """
        w = np.asarray(w, dtype=np.float64)
        g = np.asarray(g, dtype=np.float64) - self.l2 * w
        r = np.where(w != 0.0, g - self.l1 * np.sign(w), np.maximum(np.abs(g) - self.l1, 0.0))
        return float(np.linalg.norm(r))

    @property
    def is_smooth(self):
        """True when there is no l1 part."""
        return self.l1 == 0.0


def get_penalty(penalty, alpha, l1_ratio=0.5):
    """Build a :class:`Penalty` from scikit-learn style parameters.

    Parameters
    ----------
    penalty : {"l2", "l1", "elasticnet"} or None
        Kind of penalty; ``None`` means no penalty.
    alpha : float
        Overall strength, ``alpha >= 0``.
    l1_ratio : float, default=0.5
        Mixing parameter of the elastic net, in [0, 1].

    Returns
    -------
    Penalty
        Its ``l1`` and ``l2`` strengths: ``(0, alpha)`` for "l2",
        ``(alpha, 0)`` for "l1", ``(alpha * l1_ratio, alpha * (1 - l1_ratio))``
        for "elasticnet", ``(0, 0)`` for None.
    """
    if not (np.isfinite(alpha) and alpha >= 0):
        raise ValueError(f"alpha must be a nonnegative finite number, got {alpha!r}.")
    if penalty is None or penalty == "none":
        return Penalty(0.0, 0.0)
    if penalty == "l2":
        return Penalty(0.0, float(alpha))
    if penalty == "l1":
        return Penalty(float(alpha), 0.0)
    if penalty == "elasticnet":
        if not (0.0 <= l1_ratio <= 1.0):
            raise ValueError(f"l1_ratio must lie in [0, 1], got {l1_ratio!r}.")
        return Penalty(float(alpha * l1_ratio), float(alpha * (1.0 - l1_ratio)))
    raise ValueError(f"Unknown penalty {penalty!r}; expected 'l2', 'l1', 'elasticnet' or None.")
