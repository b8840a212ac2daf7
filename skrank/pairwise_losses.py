"""Losses of a pairwise margin ``z = h(x_positive) - h(x_negative)``.

AUC-type objectives (partial AUC, Yao, Lin and Yang 2022; full AUC, Liu et al.
2020) score a pair of one positive and one negative by a non-increasing loss of the difference
of their scores.  Each pairwise loss here is one of the individual losses of
:mod:`skrank.losses` (negative-margin convention, nondecreasing in ``t``)
evaluated at ``t = shift - z`` and scaled:

================  ==============================  ==========================
name              ``loss(z)``                     as an individual loss
================  ==============================  ==========================
``squared_hinge``  ``max(0, margin - z)^2``        ``sq_hinge(t = margin - 1 - z)``
``logistic``       ``log(1 + exp(-z))``            ``logistic(t = -z)``
``squared``        ``(margin - z)^2``              ``2 * squared(t = margin - z)``
``sigmoid``        ``1 / (1 + exp(z))``            ``sigmoid(t = -z)``
``smooth_step``    ``1(z < 0)`` smoothed over      none (three squared hinges)
                   ``|z| < margin``
================  ==============================  ==========================

``smooth_step`` is the pair's indicator in the metric, ``1(z < 0)`` (a
half at ties), made continuously differentiable: one for ``z <= -margin``,
zero for ``z >= margin``, and two quadratic pieces between, so that it is
``[(margin - z)_+^2 - 2 (-z)_+^2 + (-margin - z)_+^2] / (2 margin^2)``.
Bounded and not convex; as a sum of squared hinges its range sums have the
same prefix-sum evaluator (:attr:`PairwiseLoss.pieces`), ``O(n log n)``.
It has no kernel code: only the full-batch evaluators take it.

The first three are convex (the AUC objectives, :data:`PAIRWISE_LOSSES`);
the sigmoid is a bounded, non-convex surrogate of ``1(z <= 0)`` used by the
average-precision objective of Qi et al. 2021 (its ablation, with ``c = 1``: for a
linear score ``c`` only rescales ``w``).

exactly as the papers write them (no factor 1/2).  Kernels take the triple
``(code, shift, scale)`` and use :func:`pair_value` / :func:`pair_derivative`,
so that the loss arithmetic is written once, in :mod:`skrank.losses`.
"""

from dataclasses import dataclass

import numpy as np

from ._jit import njit
from .losses import (
    LOGISTIC,
    SIGMOID,
    SQUARED,
    SQUARED_HINGE,
    loss_derivative,
    loss_level,
    loss_value,
    loss_value_and_derivative,
)

#: the convex pairwise losses (AUC and partial AUC)
PAIRWISE_LOSSES = ("squared_hinge", "logistic", "squared")
#: the surrogates of the average-precision objective (Qi et al. 2021, eq. (2) and its ablation)
AVERAGE_PRECISION_LOSSES = ("squared_hinge", "logistic", "sigmoid")
#: the partial-AUC estimator's losses: the convex ones and the smoothed indicator
PARTIAL_AUC_LOSSES = PAIRWISE_LOSSES + ("smooth_step",)
_ALL_PAIRWISE_LOSSES = PAIRWISE_LOSSES + ("sigmoid", "smooth_step")
#: no kernel code (``PairwiseLoss.code``): evaluated by its quadratic pieces only
NO_KERNEL = -1


@njit(cache=True, inline="always")
def pair_value(code, shift, scale, z):
    """``loss(z) = scale * l(shift - z)`` of the individual loss ``code``."""
    return scale * loss_value(code, shift - z, 0.0)


@njit(cache=True, inline="always")
def pair_derivative(code, shift, scale, z):
    """``d loss / dz = -scale * l'(shift - z)`` (non-positive)."""
    return -scale * loss_derivative(code, shift - z, 0.0)


@njit(cache=True, inline="always")
def pair_value_and_derivative(code, shift, scale, z):
    """``(loss(z), d loss / dz)`` in one evaluation."""
    v, d = loss_value_and_derivative(code, shift - z, 0.0)
    return scale * v, -scale * d


@njit(cache=True, inline="always")
def pair_level(code, shift, scale, lam):
    """``z*`` with ``loss(z) > lam`` exactly when ``z < z*`` (non-increasing losses only)."""
    return shift - loss_level(code, lam / scale, 0.0)


@dataclass(frozen=True)
class PairwiseLoss:
    """A non-increasing loss of the pairwise margin ``z``.

    Attributes
    ----------
    name : str
        ``"squared_hinge"``, ``"logistic"``, ``"squared"`` or ``"sigmoid"``.
    margin : float
        The margin of the squared hinge and squared losses (unused by the
        logistic and sigmoid losses).
    code, shift, scale : int, float, float
        ``loss(z) = scale * l_code(shift - z)`` for the individual loss
        ``l_code`` of :mod:`skrank.losses`.
    threshold : float
        The loss is the quadratic ``(margin - z)^2`` for ``z < threshold``
        and zero above it (``margin`` for the squared hinge, ``inf`` for the
        squared loss), or ``nan`` when it is not such a one-sided quadratic
        (logistic, sigmoid).  Quadratic losses have sorted-prefix-sum evaluators.
    smoothness : float
        Lipschitz constant of ``d loss / dz``.
    pieces : tuple of (float, float, float)
        ``(coefficient, margin, threshold)`` of each one-sided quadratic
        ``(margin - z)^2 1(z < threshold)`` whose weighted sum is the loss
        (empty when it is no such sum): the prefix-sum evaluators run once
        per piece.
    """

    name: str
    margin: float
    code: int
    shift: float
    scale: float
    threshold: float
    smoothness: float
    pieces: tuple = ()

    @property
    def is_quadratic(self):
        """True for one-sided quadratics (squared hinge, squared)."""
        return not np.isnan(self.threshold)

    @property
    def is_convex(self):
        """True for the convex losses of the AUC objectives (squared hinge, logistic, squared)."""
        return self.name in PAIRWISE_LOSSES

    @property
    def is_full_quadratic(self):
        """True for ``(margin - z)^2`` at every ``z`` (the squared loss): its AUC has a closed form."""
        return self.is_quadratic and np.isinf(self.threshold)

    @property
    def is_monotone(self):
        """True when the loss is non-increasing in ``z`` (not the squared loss)."""
        return self.name != "squared"

    @property
    def exp_factored(self):
        """True when ``loss'(z) = -scale / (1 + exp(z - shift))`` (the logistic loss)."""
        return self.code == LOGISTIC

    def value(self, z):
        """Loss values at the array ``z``."""
        z = np.ascontiguousarray(z, dtype=np.float64)
        if self.code == NO_KERNEL:
            return sum(c * np.where(z < t, (m - z) ** 2, 0.0) for c, m, t in self.pieces)
        return _elementwise(self.code, self.shift, self.scale, z, False)

    def derivative(self, z):
        """Derivatives ``d loss / dz`` at the array ``z``."""
        z = np.ascontiguousarray(z, dtype=np.float64)
        if self.code == NO_KERNEL:
            return sum(-2.0 * c * np.where(z < t, m - z, 0.0) for c, m, t in self.pieces)
        return _elementwise(self.code, self.shift, self.scale, z, True)


@njit(cache=True)
def _elementwise(code, shift, scale, z, derivative):
    """``loss(z)``, or ``loss'(z)`` when ``derivative``, at every entry of the contiguous ``z``."""
    out = np.empty_like(z)
    flat_in = z.ravel()
    flat = out.ravel()
    if derivative:  # one loop per case: each stays free of the branch
        for i in range(flat_in.shape[0]):
            flat[i] = pair_derivative(code, shift, scale, flat_in[i])
    else:
        for i in range(flat_in.shape[0]):
            flat[i] = pair_value(code, shift, scale, flat_in[i])
    return out


def get_pairwise_loss(name, margin=1.0):
    """The :class:`PairwiseLoss` called ``name`` with the given margin.

    Parameters
    ----------
    name : {"squared_hinge", "logistic", "squared", "sigmoid", "smooth_step"}
    margin : float, default=1.0
        Positive margin of the squared hinge and squared losses, the
        half-width of the smooth step.

    Returns
    -------
    PairwiseLoss
    """
    if name not in _ALL_PAIRWISE_LOSSES:
        raise ValueError(
            f"Unknown pairwise loss {name!r}; expected one of {list(_ALL_PAIRWISE_LOSSES)}."
        )
    margin = float(margin)
    if name in ("squared_hinge", "squared", "smooth_step") and not (np.isfinite(margin) and margin > 0):
        raise ValueError(f"loss={name!r} needs a positive finite margin, got margin={margin!r}.")
    if name == "squared_hinge":
        return PairwiseLoss(name, margin, SQUARED_HINGE, margin - 1.0, 1.0, margin, 2.0,
                            ((1.0, margin, margin),))
    if name == "squared":
        return PairwiseLoss(name, margin, SQUARED, margin, 2.0, np.inf, 2.0, ((1.0, margin, np.inf),))
    if name == "smooth_step":
        c = 0.5 / (margin * margin)
        return PairwiseLoss(name, margin, NO_KERNEL, 0.0, 1.0, np.nan, 2.0 * c,
                            ((c, margin, margin), (-2.0 * c, 0.0, 0.0), (c, -margin, -margin)))
    if name == "sigmoid":
        # |d^2/dz^2 sigmoid(-z)| <= 1 / (6 sqrt(3))
        return PairwiseLoss(name, margin, SIGMOID, 0.0, 1.0, np.nan, 1.0 / (6.0 * np.sqrt(3.0)))
    return PairwiseLoss(name, margin, LOGISTIC, 0.0, 1.0, np.nan, 0.25)
