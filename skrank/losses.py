"""Individual losses, written once and compiled with Numba.

Every loss is a function of one scalar ``t``:

* classification losses take the **negative margin** ``t = -y * f(x)`` with
  ``y`` in {-1, +1}; they are nondecreasing in ``t`` (so that sorting the
  losses sorts ``t``, as the ADMM z-step of Xiao et al. 2023 needs);
* regression losses take the **residual** ``t = f(x) - y``; they are even
  in ``t``.

Inside kernels a loss is selected by a small integer code (``LOGISTIC``,
``HINGE``, ...) plus one float parameter (Huber's ``delta``; unused by the
others).  The primitives are

``loss_value(code, t, param)``
    the loss ``l(t)``;
``loss_derivative(code, t, param)``
    ``l'(t)`` (at a kink, the subgradient of least magnitude: 0);
``loss_second_derivative(code, t, param)``
    ``l''(t)`` (0 on linear pieces and where ``l''`` jumps);
``loss_prox(code, v, c, param)``
    ``argmin_z c * l(z) + (z - v)**2 / 2`` for ``c >= 0``.

All are stable for ``|t|`` up to 1e6 and beyond (no overflow, no NaN).
"""

from dataclasses import dataclass

import numpy as np

from ._jit import njit

LOGISTIC = 0
HINGE = 1
SQUARED_HINGE = 2
SQUARED = 3
ABSOLUTE = 4
HUBER = 5
#: ``sigmoid(t)``: bounded and not convex; only a pairwise surrogate (the
#: average-precision ablation of Qi et al. 2021), never an estimator's ``loss``,
#: and without a proximal map
SIGMOID = 6


@njit(cache=True, inline="always")
def stable_sigmoid(t):
    """``1 / (1 + exp(-t))`` without overflow, for the compiled kernels."""
    if t >= 0.0:
        return 1.0 / (1.0 + np.exp(-t))
    e = np.exp(t)
    return e / (1.0 + e)


@njit(cache=True)
def loss_value(code, t, param):
    """Value of loss ``code`` at ``t`` (see the module docstring)."""
    if code == LOGISTIC:
        # log(1 + e^t) = max(t, 0) + log1p(e^-|t|)
        return max(t, 0.0) + np.log1p(np.exp(-abs(t)))
    if code == HINGE:
        return max(1.0 + t, 0.0)
    if code == SQUARED_HINGE:
        h = max(1.0 + t, 0.0)
        return h * h
    if code == SQUARED:
        return 0.5 * t * t
    if code == ABSOLUTE:
        return abs(t)
    if code == SIGMOID:
        return stable_sigmoid(t)
    if code == HUBER:
        a = abs(t)
        if a <= param:
            return 0.5 * t * t
        return param * (a - 0.5 * param)
    raise ValueError("unknown loss code")


@njit(cache=True)
def loss_derivative(code, t, param):
    """Derivative of loss ``code`` at ``t``: a subgradient where not smooth."""
    if code == LOGISTIC:
        return stable_sigmoid(t)
    if code == HINGE:
        return 1.0 if t > -1.0 else 0.0
    if code == SQUARED_HINGE:
        return 2.0 * max(1.0 + t, 0.0)
    if code == SQUARED:
        return t
    if code == ABSOLUTE:
        if t > 0.0:
            return 1.0
        if t < 0.0:
            return -1.0
        return 0.0
    if code == SIGMOID:
        s = stable_sigmoid(t)
        return s * (1.0 - s)
    if code == HUBER:
        if t > param:
            return param
        if t < -param:
            return -param
        return t
    raise ValueError("unknown loss code")


@njit(cache=True)
def loss_second_derivative(code, t, param):
    """``l''(t)``: 0 on the linear pieces and at a jump of ``l''``."""
    if code == LOGISTIC:
        s = stable_sigmoid(t)
        return s * (1.0 - s)
    if code == HINGE or code == ABSOLUTE:
        return 0.0
    if code == SQUARED_HINGE:
        return 2.0 if t > -1.0 else 0.0
    if code == SQUARED:
        return 1.0
    if code == SIGMOID:
        s = stable_sigmoid(t)
        return s * (1.0 - s) * (1.0 - 2.0 * s)
    if code == HUBER:
        return 1.0 if abs(t) < param else 0.0
    raise ValueError("unknown loss code")


@njit(cache=True)
def loss_level(code, v, param):
    """``sup {t : l(t) <= v}``: a threshold on the losses as one on their arguments.

    For the nondecreasing classification losses ``l(t) > v`` exactly when
    ``t > loss_level(code, v)``; for the even regression losses exactly when
    ``|t| > loss_level(code, v)``.  ``-inf`` when no ``t`` qualifies.
    """
    if code == LOGISTIC:
        if v <= 0.0:
            return -np.inf
        if v > 30.0:
            return v + np.log1p(-np.exp(-v))
        return np.log(np.expm1(v))
    if code == HINGE:
        return v - 1.0 if v >= 0.0 else -np.inf
    if code == SQUARED_HINGE:
        return np.sqrt(v) - 1.0 if v >= 0.0 else -np.inf
    if code == SIGMOID:
        if v <= 0.0:
            return -np.inf
        if v >= 1.0:
            return np.inf
        return np.log(v) - np.log1p(-v)
    if v < 0.0:
        return -np.inf
    if code == SQUARED:
        return np.sqrt(2.0 * v)
    if code == ABSOLUTE:
        return v
    if code == HUBER:
        if v <= 0.5 * param * param:
            return np.sqrt(2.0 * v)
        return v / param + 0.5 * param
    raise ValueError("unknown loss code")


@njit(cache=True)
def logistic_value_and_derivative(t):
    """``(l(t), l'(t))`` of the logistic loss, sharing one exponential."""
    e = np.exp(-abs(t))
    s = 1.0 / (1.0 + e) if t >= 0.0 else e / (1.0 + e)
    return max(t, 0.0) + np.log1p(e), s


@njit(cache=True)
def loss_value_and_derivative(code, t, param):
    """``(l(t), l'(t))`` together; the logistic loss shares one exponential."""
    if code == LOGISTIC:
        return logistic_value_and_derivative(t)
    return loss_value(code, t, param), loss_derivative(code, t, param)


@njit(cache=True)
def _logistic_prox(v, c):
    # Root of phi(z) = c * sigmoid(z) + z - v, increasing in z, bracketed in
    # [v - c, v] because 0 < sigmoid < 1.  Newton safeguarded by the bracket:
    # a Newton point is accepted only inside the bracket and when the step at
    # least halves; otherwise bisect (so the bracket shrinks geometrically).
    if c == 0.0:
        return v
    lo = v - c
    hi = v
    z = v - c * stable_sigmoid(v)  # one fixed-point step: already inside the bracket
    dz_old = hi - lo
    for _ in range(200):
        s = stable_sigmoid(z)
        phi = c * s + z - v
        if phi == 0.0:
            return z
        if phi > 0.0:
            hi = z
        else:
            lo = z
        z_new = z - phi / (c * s * (1.0 - s) + 1.0)
        if not (lo < z_new < hi) or abs(z_new - z) > 0.5 * dz_old:
            z_new = 0.5 * (lo + hi)
        dz_old = abs(z_new - z)
        if dz_old <= 1e-15 * (1.0 + abs(z)) or hi - lo <= 1e-15 * (1.0 + abs(z)):
            return z_new
        z = z_new
    return z


@njit(cache=True)
def loss_prox(code, v, c, param):
    """Proximal point ``argmin_z c * l(z) + (z - v)**2 / 2`` of loss ``code`` (NaN for ``SIGMOID``)."""
    if code == SIGMOID:
        return np.nan
    if code == LOGISTIC:
        return _logistic_prox(v, c)
    if code == HINGE:
        if v <= -1.0:
            return v
        if v < -1.0 + c:
            return -1.0
        return v - c
    if code == SQUARED_HINGE:
        if v <= -1.0:
            return v
        return (v - 2.0 * c) / (1.0 + 2.0 * c)
    if code == SQUARED:
        return v / (1.0 + c)
    if code == ABSOLUTE:
        if v > c:
            return v - c
        if v < -c:
            return v + c
        return 0.0
    if code == HUBER:  # quadratic zone when |v| <= delta (1 + c)
        if abs(v) <= param * (1.0 + c):
            return v / (1.0 + c)
        if v > 0.0:
            return v - c * param
        return v + c * param
    raise ValueError("unknown loss code")


@njit(cache=True)
def loss_derivatives_upto2(code, t, param, value, first, second):
    """Fill ``value``, ``first`` and ``second`` with ``l``, ``l'`` and ``l''`` at ``t``.

    An empty array is not filled: ``l`` alone, ``l'`` alone, ``l''``
    alone, ``l`` and ``l'``, or all three, each in a loop of its own.  One kernel serves every
    method of :class:`Loss`, so that a fit compiles it once.
    """
    n = t.shape[0]
    if value.shape[0] == 0 and first.shape[0] == 0:
        for i in range(n):
            second[i] = loss_second_derivative(code, t[i], param)
    elif first.shape[0] == 0:
        for i in range(n):
            value[i] = loss_value(code, t[i], param)
    elif value.shape[0] == 0:
        for i in range(n):
            first[i] = loss_derivative(code, t[i], param)
    elif second.shape[0] == 0:
        if code == LOGISTIC:  # the loss of the default fits, in a loop of its own (twice as fast)
            for i in range(n):
                value[i], first[i] = logistic_value_and_derivative(t[i])
        else:
            for i in range(n):
                value[i], first[i] = loss_value_and_derivative(code, t[i], param)
    else:
        for i in range(n):
            value[i], first[i] = loss_value_and_derivative(code, t[i], param)
            second[i] = loss_second_derivative(code, t[i], param)


#: The array :func:`loss_derivatives_upto2` leaves out.
_NOT_ASKED = np.empty(0)


@dataclass(frozen=True)
class Loss:
    """Description of one loss for the Python layer.

    Build it with :func:`get_loss`; the fields are also its attributes.

    Parameters
    ----------
    name : str
        Public name, as accepted by the estimators' ``loss`` parameter.
    code : int
        Integer code that selects the loss inside Numba kernels.
    task : {"classification", "regression"}
        Classification losses take the negative margin, regression losses
        the residual.
    smooth : bool
        Whether the loss has a Lipschitz derivative.
    smoothness : float
        Lipschitz constant of ``l'`` (``inf`` when not smooth), used by the
        stochastic solvers to pick step sizes.
    linear_pieces : bool
        Whether the loss is linear with a nonzero slope somewhere (hinge,
        absolute, Huber's tails): there ``l'' = 0`` gives a Newton model
        no curvature.
    param : float
        The loss's parameter (Huber's ``delta``), 0 when unused.
    kink : float
        For the piecewise-linear losses (hinge, absolute), the argument at
        the kink; NaN for the others.
    slopes : tuple of float
        For the piecewise-linear losses, the slopes left and right of the
        kink, so that ``l(t) = max(a (t - kink) for a in slopes)``; empty
        for the others.
    twice_differentiable : bool
        Whether ``l''`` exists and is continuous everywhere (logistic,
        squared): the Newton solver's chunked Dask path takes only these.
    """

    name: str
    code: int
    task: str
    smooth: bool
    smoothness: float
    linear_pieces: bool
    param: float = 0.0
    kink: float = np.nan
    slopes: tuple = ()
    twice_differentiable: bool = False

    def value(self, t):
        """Return the loss values ``l(t)``.

        Parameters
        ----------
        t : array-like of shape (n,)
            Arguments of the loss (negative margins or residuals, see
            :mod:`skrank.losses`), converted to float64.

        Returns
        -------
        ndarray of shape (n,)
            ``l(t_i)`` for each ``i``.
        """
        return self._part(t, 0)

    def derivative(self, t):
        """Return the loss derivatives ``l'(t)`` (subgradients at kinks).

        Parameters
        ----------
        t : array-like of shape (n,)
            Arguments of the loss, converted to float64.

        Returns
        -------
        ndarray of shape (n,)
            ``l'(t_i)`` for each ``i``; at a kink of ``l`` (the hinge at
            ``t = -1``, the absolute loss at 0) the subgradient of least
            magnitude, 0.
        """
        return self._part(t, 1)

    @property
    def even(self):
        """True for the regression losses, which are even in the residual."""
        return self.task == "regression"

    def second_derivative(self, t):
        """Return ``l''(t)`` alone, without computing ``l`` and ``l'`` (see :meth:`derivatives`).

        Parameters
        ----------
        t : array-like of shape (n,)
            The loss arguments of :meth:`value`.

        Returns
        -------
        second : ndarray of shape (n,)
            ``l''(t_i)``, 0 on the linear pieces and where ``l''`` jumps or is undefined.
        """
        return self._part(t, 2)

    @property
    def curvature_from_slope(self):
        """Whether ``l''`` is a function of ``l'`` (:meth:`curvature_of_slope`), cheaper than from ``t``."""
        return self.code == LOGISTIC

    def curvature_of_slope(self, first):
        """Return ``l''(t)`` from ``first = l'(t)``, where :attr:`curvature_from_slope`.

        The logistic loss's ``l'' = l' (1 - l')``: the same values as
        :meth:`second_derivative`, without an exponential.

        Parameters
        ----------
        first : array of shape (n,)
            The derivatives ``l'(t)``: an array of any array-API namespace
            (or a Dask array).

        Returns
        -------
        second : array of shape (n,)
            ``l''(t_i)``, in the namespace of ``first``.

        Raises
        ------
        ValueError
            For a loss whose ``l''`` is not a function of ``l'``.
        """
        if not self.curvature_from_slope:
            raise ValueError(f"the {self.name} loss's l'' is not a function of l'; use second_derivative(t).")
        return first * (1.0 - first)

    def _part(self, t, which):
        """``l``, ``l'`` or ``l''`` (``which`` 0, 1 or 2) at ``t``, the others not computed."""
        t = np.ascontiguousarray(t, dtype=np.float64)
        parts = [_NOT_ASKED, _NOT_ASKED, _NOT_ASKED]
        parts[which] = np.empty_like(t)
        loss_derivatives_upto2(self.code, t, self.param, *parts)
        return parts[which]

    def derivatives(self, t):
        """Return the loss and its first two derivatives in one pass.

        Parameters
        ----------
        t : array-like of shape (n,)
            Arguments of the loss, as for :meth:`derivative`.

        Returns
        -------
        value, first, second : ndarray of shape (n,)
            ``l(t)``, ``l'(t)`` (as :meth:`derivative`) and ``l''(t)``:
            0 on the linear pieces and where ``l''`` jumps or is undefined
            (the squared hinge at ``t = -1``, Huber's loss at
            ``|t| = epsilon``, the kinks of the hinge and absolute losses).
        """
        t = np.ascontiguousarray(t, dtype=np.float64)
        out = np.empty_like(t), np.empty_like(t), np.empty_like(t)
        loss_derivatives_upto2(self.code, t, self.param, *out)
        return out

    def cvxpy_expression(self, cp, t):
        """Build the loss of a cvxpy expression, for reference solutions.

        Parameters
        ----------
        cp : module
            The ``cvxpy`` module, passed in so that skrank does not import it.
        t : cvxpy.Expression
            Affine expression of the loss's arguments.

        Returns
        -------
        cvxpy.Expression
            The elementwise loss ``l(t)``, convex, with the same shape as ``t``.

        Raises
        ------
        ValueError
            If the loss has no cvxpy form (``name`` is not one of
            :func:`get_loss`'s names).
        """
        if self.name not in _CVXPY_FORMS:
            raise ValueError(f"no cvxpy form for the loss {self.name!r}")
        return _CVXPY_FORMS[self.name](cp, t, self.param)

    def conjugate(self, a):
        """The convex conjugate ``l*(a) = sup_t a t - l(t)`` at the array ``a``.

        Used for Fenchel dual bounds: ``l(t) >= a t - l*(a)`` for every
        ``t``.  ``a = l'(t)`` always lies in the domain of ``l*``; entries
        outside it give ``inf``.

        Parameters
        ----------
        a : array-like of float
            Dual points (slopes).

        Returns
        -------
        ndarray
            ``l*(a)``, ``inf`` outside the conjugate's domain.
        """
        return conjugate_in(np, self, np.asarray(a, dtype=np.float64))

    def prox(self, v, c):
        """Apply the proximal operator of ``c * l`` elementwise.

        Parameters
        ----------
        v : array-like of shape (n,)
            Points at which the operator is evaluated, converted to float64.
        c : float
            Scale of the loss, nonnegative (0 returns ``v``).

        Returns
        -------
        ndarray of shape (n,)
            ``argmin_z c * l(z) + (z - v_i)**2 / 2`` for each ``i``.
        """
        v = np.ascontiguousarray(v, dtype=np.float64)
        out = np.empty_like(v)
        for i in range(v.shape[0]):
            out[i] = loss_prox(self.code, v[i], float(c), self.param)
        return out


_LOSSES = {
    "logistic": dict(code=LOGISTIC, task="classification", smooth=True, smoothness=0.25,
                     linear_pieces=False, twice_differentiable=True),
    "hinge": dict(code=HINGE, task="classification", smooth=False, smoothness=np.inf,
                  linear_pieces=True, kink=-1.0, slopes=(0.0, 1.0)),
    "squared_hinge": dict(code=SQUARED_HINGE, task="classification", smooth=True, smoothness=2.0,
                          linear_pieces=False),
    "squared": dict(code=SQUARED, task="regression", smooth=True, smoothness=1.0,
                    linear_pieces=False, twice_differentiable=True),
    "absolute": dict(code=ABSOLUTE, task="regression", smooth=False, smoothness=np.inf,
                     linear_pieces=True, kink=0.0, slopes=(-1.0, 1.0)),
    "huber": dict(code=HUBER, task="regression", smooth=True, smoothness=1.0, linear_pieces=True,
                  takes_epsilon=True),
}

# cvxpy's huber is twice skrank's
_CVXPY_FORMS = {
    "logistic": lambda cp, t, param: cp.logistic(t),
    "hinge": lambda cp, t, param: cp.pos(1 + t),
    "squared_hinge": lambda cp, t, param: cp.square(cp.pos(1 + t)),
    "squared": lambda cp, t, param: 0.5 * cp.square(t),
    "absolute": lambda cp, t, param: cp.abs(t),
    "huber": lambda cp, t, param: 0.5 * cp.huber(t, param),
}


# the conjugate of each loss at the array ``a`` of the namespace ``xp``, and its domain [low, high]
_CONJUGATES = {
    "logistic": lambda xp, a, p: (_xlogx_in(xp, a) + _xlogx_in(xp, 1.0 - a), 0.0, 1.0),
    "hinge": lambda xp, a, p: (-a, 0.0, 1.0),
    "squared_hinge": lambda xp, a, p: (0.25 * a * a - a, 0.0, np.inf),
    "squared": lambda xp, a, p: (0.5 * a * a, -np.inf, np.inf),
    "absolute": lambda xp, a, p: (xp.zeros_like(a), -1.0, 1.0),
    "huber": lambda xp, a, p: (0.5 * a * a, -p, p),
}

CLASSIFICATION_LOSSES = tuple(k for k, v in _LOSSES.items() if v["task"] == "classification")
REGRESSION_LOSSES = tuple(k for k, v in _LOSSES.items() if v["task"] == "regression")
#: codes of the margin losses, nondecreasing in ``t`` (the monotone PAVA z-step)
CLASSIFICATION_CODES = tuple(_LOSSES[k]["code"] for k in CLASSIFICATION_LOSSES)
#: codes of the residual losses, even in ``t`` (the even PAVA z-step)
REGRESSION_CODES = tuple(_LOSSES[k]["code"] for k in REGRESSION_LOSSES)


#: codes of the losses whose ``param`` is the estimators' ``epsilon`` (a positive threshold)
_EPSILON_CODES = tuple(v["code"] for v in _LOSSES.values() if v.get("takes_epsilon"))


def loss_names(task, *, smooth=None):
    """The names of the losses of ``task``, as the estimators' ``loss`` parameter accepts them.

    Parameters
    ----------
    task : {"classification", "regression"}
    smooth : bool or None, default=None
        True: only the losses with a Lipschitz derivative; False: only the
        others; None: all.

    Returns
    -------
    tuple of str
    """
    return tuple(name for name, spec in _LOSSES.items()
                 if spec["task"] == task and (smooth is None or spec["smooth"] == smooth))


def check_param(code, param):
    """Raise ValueError unless ``param`` is valid for the loss ``code``.

    Parameters
    ----------
    code : int
        A loss code of this module.
    param : float
        The loss parameter (the threshold ``epsilon`` of the losses that take
        one, which must be positive; unused by the others).
    """
    if code in _EPSILON_CODES and not param > 0.0:
        raise ValueError(f"loss_param (the loss's epsilon) must be positive, got {param!r}.")


def get_loss(name, *, epsilon=1.0):
    """Return the :class:`Loss` called ``name``.

    Parameters
    ----------
    name : str
        One of ``"logistic"``, ``"hinge"``, ``"squared_hinge"`` (negative
        margin) or ``"squared"``, ``"absolute"``, ``"huber"`` (residual).
        ``squared`` is ``t**2 / 2``; ``huber`` is ``t**2 / 2`` for
        ``|t| <= epsilon`` and ``epsilon * (|t| - epsilon / 2)`` beyond.
    epsilon : float, default=1.0
        The threshold of the losses whose row of the table takes one
        (Huber's); must be positive and finite.  Ignored by the other losses.

    Returns
    -------
    Loss
        The loss, with ``param`` set to ``epsilon`` for a loss that takes it
        and to 0 otherwise.

    Raises
    ------
    ValueError
        If ``name`` is unknown, or if the loss takes ``epsilon`` and it is
        not a positive finite number.
    """
    if name not in _LOSSES:
        raise ValueError(f"Unknown loss {name!r}; expected one of {sorted(_LOSSES)}.")
    spec = dict(_LOSSES[name])
    if spec.pop("takes_epsilon", False):
        if not (np.isfinite(epsilon) and epsilon > 0):
            raise ValueError(f"The {name} loss's epsilon must be a positive finite number, got {epsilon!r}.")
        spec["param"] = float(epsilon)
    return Loss(name=name, **spec)


def values_in(xp, loss, t):
    """``l(t)`` for an array ``t`` of the namespace ``xp`` (the kernels' formulas, on ``t``'s device).

    Parameters
    ----------
    xp : module
        The array namespace of ``t``.
    loss : Loss
    t : array of shape (n,)

    Returns
    -------
    array of shape (n,)
    """
    return _IN_NAMESPACE[loss.name](xp, t, loss.param)[0]


def derivatives_in(xp, loss, t):
    """``(l(t), l'(t), l''(t))`` for an array ``t`` of the namespace ``xp``, as :meth:`Loss.derivatives`."""
    return _IN_NAMESPACE[loss.name](xp, t, loss.param)


def conjugate_in(xp, loss, a):
    """``l*(a)`` for an array ``a`` of the namespace ``xp``, as :meth:`Loss.conjugate`."""
    value, low, high = _CONJUGATES[loss.name](xp, a, loss.param)
    return xp.where((a >= low) & (a <= high), value, xp.inf)


def _xlogx_in(xp, a):
    a = xp.clip(a, 0.0, 1.0)
    return xp.where(a > 0.0, a * xp.log(xp.where(a > 0.0, a, 1.0)), 0.0)


def _indicator(xp, mask):
    return xp.astype(mask, xp.float64)


def _logistic_in(xp, t, param):
    # one exponential: log(1 + e^t) = max(t, 0) + log1p(e^-|t|), sigmoid(t) stably on both signs
    e = xp.exp(-xp.abs(t))
    inv = 1.0 / (1.0 + e)
    s = xp.where(t >= 0.0, inv, e * inv)
    return xp.maximum(t, 0.0) + xp.log1p(e), s, s * (1.0 - s)


def _squared_hinge_in(xp, t, param):
    h = xp.maximum(1.0 + t, 0.0)
    return h * h, 2.0 * h, 2.0 * _indicator(xp, t > -1.0)


def _squared_in(xp, t, param):
    return 0.5 * t * t, t, xp.ones_like(t)


def _huber_in(xp, t, param):
    a = xp.abs(t)
    value = xp.where(a <= param, 0.5 * t * t, param * (a - 0.5 * param))
    return value, xp.clip(t, -param, param), _indicator(xp, a < param)


def _hinge_in(xp, t, param):
    return xp.maximum(1.0 + t, 0.0), _indicator(xp, t > -1.0), xp.zeros_like(t)


def _absolute_in(xp, t, param):
    return xp.abs(t), xp.sign(t), xp.zeros_like(t)


#: ``(l, l', l'')`` of each loss on the arrays of a namespace: the formulas of the compiled kernels.
_IN_NAMESPACE = {"logistic": _logistic_in, "squared_hinge": _squared_hinge_in, "squared": _squared_in,
                 "huber": _huber_in, "hinge": _hinge_in, "absolute": _absolute_in}
