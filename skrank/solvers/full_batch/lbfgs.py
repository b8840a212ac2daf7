"""Deterministic full-batch L-BFGS on an exact objective.

scipy's L-BFGS-B (without bounds) on the coefficients in the units of
:func:`skrank.datafits.scale.linear_model_scale`, driven by an objective
that returns its exact value and gradient in one pass (e.g.
:class:`skrank.datafits.partial_auc.PartialAUCObjective`).  The units and
the stopping tests are described in the user guide, :ref:`methods-lbfgs`.
"""

import time

import numpy as np
from scipy.optimize import minimize

from ..progress import Progress
from ..result import SolverResult


def _checked_scale(objective, w0, scale):
    """The units of the variables: ``scale``, else the objective's ``variable_scale()``, else ones."""
    if scale is None:
        scale = objective.variable_scale() if hasattr(objective, "variable_scale") else np.ones(w0.shape)
    scale = np.asarray(scale, dtype=np.float64)
    if scale.shape != w0.shape or not np.all(np.isfinite(scale) & (scale > 0)):
        raise ValueError(f"scale must hold {w0.shape[0]} positive finite units, one per variable.")
    return scale


def _test_scale(objective, scale):
    """The units of the gradient test: ``objective.gradient_scale()`` (at most ``scale``), else ``scale``."""
    if not hasattr(objective, "gradient_scale"):
        return scale
    return np.minimum(objective.gradient_scale(), scale)  # positive and finite (gradient_test_scale)


class _ScaledObjective:
    """``u -> (F, dF/du)`` for scipy with ``w = u / scale``, the last evaluation kept.

    scipy asks for the start again and often ends on the last point it
    evaluated: a point equal to the last one is not evaluated again.
    """

    def __init__(self, objective, scale, w0):
        self.objective, self.scale = objective, scale
        F0, g0 = objective.value_and_grad(w0)
        #: ``(w, F, gradient in w)`` at the start
        self.start = (w0, F0, g0)
        self.evaluations = 1
        # the last evaluation, keyed by u: w is where F and g were evaluated
        self.u, self.w, self.F, self.g = w0 * scale, w0, F0, g0

    def __call__(self, u):
        if not np.array_equal(u, self.u):
            u = np.array(u, dtype=np.float64)
            w = u / self.scale
            F, g = self.objective.value_and_grad(w)
            self.evaluations += 1
            self.u, self.w, self.F, self.g = u, w, F, g
        return self.F, self.g / self.scale


def lbfgs(datafit, penalty, *, coef_init, max_iter=500, tol=1e-6, memory=10, verbose=0, scale=None):
    """Minimise ``datafit`` by L-BFGS from ``coef_init``.

    The iterations run on ``u = scale * w``, with the stopping tests of the
    user guide, :ref:`methods-lbfgs`.

    Parameters
    ----------
    datafit : object
        With ``value_and_grad(w) -> (float, ndarray)`` and ``value(w)``;
        optionally ``variable_scale() -> ndarray``, the default ``scale``,
        and ``gradient_scale() -> ndarray``, the units of the gradient test
        (at most ``scale``; ``scale`` itself when absent or when ``scale``
        is given).  ``F`` includes the penalty.
    penalty : skrank.penalties.Penalty or None
        The penalty that ``datafit`` holds (not read).
    coef_init : ndarray of shape (d,)
        Starting point.
    max_iter : int, default=500
        Maximum number of L-BFGS iterations.
    tol : float, default=1e-6
        Tolerance of the two stopping tests above.
    memory : int, default=10
        Number of correction pairs kept.
    verbose : int, default=0
        Print ``F`` and the gradient size after each iteration when positive.
    scale : ndarray of shape (d,), default=None
        Positive units of the variables (:func:`skrank.datafits.scale.linear_model_scale` for a
        linear model).  None means ``datafit.variable_scale()`` when the
        objective has it, else ones (the unscaled method).

    Returns
    -------
    SolverResult
        ``objective_history`` holds ``F`` after each iteration (its last
        entry is ``F`` at the returned coefficients); ``stop_criterion`` is
        the largest entry of the gradient divided by the units of the
        gradient test (the gradient in ``u`` where those are ``scale``) at
        the returned point;
        ``converged`` is True when that criterion is at most ``tol``, or
        when scipy reports convergence (one of the two tests) after moving
        from the start.  ``info`` has ``passes`` (value-and-gradient
        evaluations), ``time``, scipy's ``message`` and the ``scale``.
    """
    start = time.perf_counter()
    w0 = np.array(coef_init, dtype=np.float64)
    given = scale is not None
    scale = _checked_scale(datafit, w0, scale)
    test = scale if given else _test_scale(datafit, scale)
    # Where the penalty sets the units (scale above test), the gradient in u is kappa times smaller:
    # scipy's gradient test of kappa tol implies ours, max |dF/dw| / test <= tol.  Its decrease test
    # stays: the first steps from w = 0 already point along the minimiser there (w ~ -grad / alpha).
    kappa = float(np.min(test / scale, initial=1.0))
    fun = _ScaledObjective(datafit, scale, w0)
    u0 = w0 * scale
    history = []
    progress = Progress("lbfgs", verbose, max_iter, criterion="|g / units|_inf")

    def callback(intermediate_result):
        history.append(float(intermediate_result.fun))
        if progress.verbose > 0:  # the criterion costs a pass over the gradient: only for the lines
            progress(len(history), history[-1], float(np.max(np.abs(fun.g / test), initial=0.0)))

    res = minimize(
        fun, u0, jac=True, method="L-BFGS-B", callback=callback,
        options=dict(maxiter=max_iter, gtol=tol * kappa, ftol=tol * 1e-3, maxcor=memory),
    )
    u = np.asarray(res.x, dtype=np.float64)
    # no step accepted: scipy may count an iteration of no decrease (which meets its decrease test)
    at_start = bool(np.array_equal(u, u0))
    if at_start:
        w, F, g = fun.start
    else:
        fun(u)
        w, F, g = fun.w, fun.F, fun.g
    if not history or history[-1] != F:
        history.append(float(F))
    crit = float(np.max(np.abs(g / test))) if g.size else 0.0
    return SolverResult(
        coef=np.array(w, dtype=np.float64),
        intercept=0.0,
        n_iter=0 if at_start else int(res.nit),
        objective_history=np.asarray(history),
        stop_criterion=crit,
        converged=crit <= tol or (bool(res.success) and not at_start),
        info={"passes": fun.evaluations, "time": time.perf_counter() - start,
              "message": str(res.message), "scale": scale},
    )
