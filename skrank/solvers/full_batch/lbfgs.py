"""Deterministic full-batch L-BFGS on an exact objective.

A plain quasi-Newton method (scipy's L-BFGS-B without bounds) driven by an
objective object that returns its exact value and gradient over the whole
training set in one pass (e.g.
:class:`skrank.datafits.partial_auc.PartialAUCObjective`).  For tables that
fit in memory it needs far fewer passes than the stochastic methods of the
papers, whose strength is data too large for a full pass.

The objectives it serves are piecewise smooth (a loss evaluated on ranked
scores): the gradient jumps where two scores swap ranks.  L-BFGS copes with
such mild kinks in practice; when its line search cannot progress any more
it stops, and the stopping criterion then says how stationary the last
point is.

The method runs on scaled variables ``u = s * w`` (entrywise), ``s`` the
units of the coefficients (:func:`skrank.datafits.scale.linear_model_scale`: the root mean square
of each column of ``X``, or the size set by the l2 penalty when that is
larger, and 1 for an intercept): rescaling ``X`` rescales the coefficients
inversely, and leaves ``u`` and the gradient in ``u`` unchanged.  So the
iterates and the stopping tests do not depend on the units of the features
(with ``alpha`` rescaled to match), nor on the scale of the sample weights
(the objectives are weighted means).

The stopping tests are those of scipy's L-BFGS-B on ``u``:

* the gradient test: the largest entry of the gradient in ``u``,
  ``max_j |dF/dw_j| / scale_j``, is at most ``tol``.  With ``scale`` the
  root mean square of each feature, ``dF/du_j`` is the first-order change of
  ``F`` when the scores ``X w`` move by feature ``j`` scaled to a unit root
  mean square (and for the intercept, when the scores all move by one): no
  such move lowers ``F`` by more than ``tol``.  The objectives are means of
  losses of the scores, of order one at ``w = 0``, so the test is absolute:
  a start far from the minimum (a large ``F(w_0)``) does not loosen it;
* the decrease test: one iteration lowers ``F`` by at most ``tol * 1e-3``
  relative (scipy's ``ftol``), i.e. the iterations have stalled, as they do
  on the kinks of a piecewise smooth ``F``.

Both are unchanged when ``X`` is rescaled (a change of units of the
features, with ``alpha`` rescaled to match) or the sample weights are
rescaled: ``F`` and the gradient in ``u`` are then the same.  When neither
holds (``max_iter`` reached, or the line search failing away from a
stationary point), or when no step was accepted and the start fails the
gradient test (the decrease test is then met vacuously), ``converged`` is
False and the estimators warn; ``n_iter`` is 0 when the returned point is
the start.
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


def lbfgs(objective, *, coef_init, max_iter=500, tol=1e-6, memory=10, verbose=0, scale=None):
    """Minimise ``objective`` by L-BFGS from ``coef_init``.

    The iterations run on ``u = scale * w``, with the stopping tests of the
    module docstring.

    Parameters
    ----------
    objective : object
        With ``value_and_grad(w) -> (float, ndarray)`` and ``value(w)``;
        optionally ``variable_scale() -> ndarray``, the default ``scale``.
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
        linear model).  None means ``objective.variable_scale()`` when the
        objective has it, else ones (the unscaled method).

    Returns
    -------
    SolverResult
        ``objective_history`` holds ``F`` after each iteration (its last
        entry is ``F`` at the returned coefficients); ``stop_criterion`` is
        the largest entry of the gradient in ``u`` at the returned point;
        ``converged`` is True when that criterion is at most ``tol``, or
        when scipy reports convergence (one of the two tests) after moving
        from the start.  ``info`` has ``passes`` (value-and-gradient
        evaluations), ``time``, scipy's ``message`` and the ``scale``.
    """
    start = time.perf_counter()
    w0 = np.array(coef_init, dtype=np.float64)
    scale = _checked_scale(objective, w0, scale)
    fun = _ScaledObjective(objective, scale, w0)
    u0 = w0 * scale
    history = []
    progress = Progress("lbfgs", verbose, max_iter, criterion="|g_u|_inf")

    def callback(intermediate_result):
        history.append(float(intermediate_result.fun))
        progress(len(history), history[-1], float(np.max(np.abs(fun.g / scale), initial=0.0)))

    res = minimize(
        fun, u0, jac=True, method="L-BFGS-B", callback=callback,
        options=dict(maxiter=max_iter, gtol=tol, ftol=tol * 1e-3, maxcor=memory),
    )
    u = np.asarray(res.x, dtype=np.float64)
    # no step accepted: scipy may count an iteration of no decrease (which meets its decrease test)
    at_start = bool(np.array_equal(u, u0))
    if at_start:
        w, F, g0 = fun.start
        g_u = g0 / scale
    else:
        F, g_u = fun(u)
        w = fun.w
    if not history or history[-1] != F:
        history.append(float(F))
    crit = float(np.max(np.abs(g_u))) if g_u.size else 0.0
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
