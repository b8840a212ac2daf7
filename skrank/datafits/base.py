"""What a datafit gives: the contract between the rank objectives and the full-batch solvers.

A datafit is the objective of a linear model's parameters ``theta`` on one
training set,

    F(theta) = D(theta) + alpha ||w||^2 / 2,

with ``theta = (w, b)`` when it fits an intercept (``b`` is not penalised)
and ``theta = w`` otherwise.  :class:`Datafit` adds the penalty to the data
term ``D`` of a subclass and states what a solver may ask of it:

* :meth:`Datafit.value` and :meth:`Datafit.value_and_grad`, the value and the
  gradient (a Clarke subgradient where ``D`` has kinks);
* :meth:`Datafit.smoothness`, a Lipschitz constant of the gradient where one
  is known, else None;
* :meth:`Datafit.variable_scale`, the units of ``theta`` (a diagonal
  preconditioner for :func:`skrank.solvers.full_batch.lbfgs.lbfgs`);
* :attr:`Datafit.penalty`, the l2 penalty it holds (the solvers' second argument);
* :attr:`Datafit.fits_intercept`.
"""

import numpy as np

from ..penalties import Penalty
from .scale import gradient_test_scale, linear_model_scale


class Datafit:
    """Base of the datafits: ``F(theta) = D(theta) + alpha ||w||^2 / 2`` (module docstring).

    A subclass sets :attr:`design` (the products with ``X``, or ``[X, 1]``
    with an intercept) and :attr:`alpha`, and implements two methods:
    ``_data_term(theta, gradient)``, which returns ``D(theta)`` and, when
    ``gradient`` is True, its gradient as a new array (else None); and
    ``_scale_row_weight()``, the row weights under which
    :meth:`variable_scale` measures the columns.

    Attributes
    ----------
    design : skrank.backends.design.Design
        The products with the data.
    alpha : float
        Strength of the l2 penalty on ``w``.
    """

    #: whether ``theta`` ends with an intercept ``b`` (not penalised)
    fits_intercept = False

    def _data_term(self, theta, gradient):  # pragma: no cover - abstract
        raise NotImplementedError

    def _scale_row_weight(self):  # pragma: no cover - abstract
        raise NotImplementedError

    def _coef(self, theta):
        """The penalised part ``w`` of ``theta``."""
        return theta[:-1] if self.fits_intercept else theta

    def _penalty(self, w):
        return 0.5 * self.alpha * float(w @ w)

    @property
    def penalty(self):
        """The l2 penalty of ``F``, ``alpha ||w||^2 / 2``, as a :class:`skrank.penalties.Penalty`."""
        return Penalty(0.0, self.alpha)

    def value(self, theta):
        """``F(theta)``.

        Parameters
        ----------
        theta : ndarray of shape (n_params,)
            The parameters: ``(w, b)`` when :attr:`fits_intercept`, else ``w``.

        Returns
        -------
        float
            The objective.
        """
        theta = np.asarray(theta, dtype=np.float64)
        value, _ = self._data_term(theta, gradient=False)
        return value + self._penalty(self._coef(theta))

    def value_and_grad(self, theta):
        """``F(theta)`` and its gradient (one pass over the data).

        Parameters
        ----------
        theta : ndarray of shape (n_params,)
            The parameters, as for :meth:`value`.

        Returns
        -------
        value : float
            ``F(theta)``.
        grad : ndarray of shape (n_params,)
            Its gradient (a Clarke subgradient where ``D`` has kinks).
        """
        theta = np.asarray(theta, dtype=np.float64)
        value, grad = self._data_term(theta, gradient=True)
        w = self._coef(theta)
        grad[: w.shape[0]] += self.alpha * w
        return value + self._penalty(w), grad

    def smoothness(self):
        """A Lipschitz constant of the gradient of ``F``, where one is known.

        Returns
        -------
        float or None
            None when no constant is known (the rank surrogates here: theirs
            depend on the data and the rank weights in ways not bounded in
            closed form).
        """
        return None

    def variable_scale(self):
        """The units of ``theta`` for :func:`skrank.solvers.full_batch.lbfgs.lbfgs` (one per coefficient).

        :func:`skrank.datafits.scale.linear_model_scale` of the design and
        ``alpha`` under the datafit's row weights, computed once (one pass
        over ``X``) and kept: a shallow copy of the datafit shares it.

        Returns
        -------
        ndarray of shape (n_params,)
        """
        if getattr(self, "_variable_scale", None) is None:
            rms = self.design.column_rms(self._scale_row_weight())
            self._variable_scale = linear_model_scale(self.design, alpha=self.alpha, rms=rms)
            self._gradient_scale = gradient_test_scale(self._variable_scale, rms, self.design.fit_intercept)
        return self._variable_scale

    def gradient_scale(self):
        """The units in which :func:`skrank.solvers.full_batch.lbfgs.lbfgs` tests the gradient.

        :func:`skrank.datafits.scale.gradient_test_scale`: the columns' root
        mean squares, which :meth:`variable_scale` raises to
        ``sqrt(alpha / 0.25)`` where the penalty dominates the curvature.
        Computed with :meth:`variable_scale`, in the same pass.

        Returns
        -------
        ndarray of shape (n_params,)
        """
        self.variable_scale()
        return self._gradient_scale
