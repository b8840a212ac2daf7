"""Pieces shared by the stochastic spectral-risk solvers (SOREL, LSVRG, SGD, Prospect).

* :class:`FeatureUnits`: the affine change of coefficients that puts every
  feature in unit scale, in which the automatic steps are derived (so that
  rescaling a column of ``X`` rescales its coefficient and nothing else);
* :func:`prepare_data`: the dense float64 design, the affine map of the loss
  arguments (``t_i = s_i f_i + c_i``, see :func:`skrank.datafits.rank_risk.affine_map`)
  and the squared row norms (``+ 1`` for the intercept column);
* :func:`sample_smoothness`: the Lipschitz constants ``L_i`` of the per-sample
  gradients, from which every automatic step size is derived;
* :func:`svrg_epoch`: the Numba inner loop of variance-reduced proximal steps
  with one cached scalar per sample, shared by SOREL and LSVRG;
* :func:`rank_weights`: the weights of a loss vector's ranks (``lam[argsort(l)] =
  sigma``), for any risk, value-dependent ones included;
* :func:`weight_pieces`: the same rule in a form Numba kernels can apply to a
  mini-batch (two weight sequences and a loss threshold);
* :func:`svrg_step_size`: the automatic step of the variance-reduced loops;
* :func:`seed_numba`, :func:`draw_uniform`, :func:`draw_weighted`: sampling
  inside compiled code, seeded from the solver's ``random_state``;
* :func:`prox_step`: the closed-form proximal step shared by every kernel.

For a linear model every per-sample gradient is ``g_i(w) = s_i l'(t_i) x_i``
(and ``s_i l'(t_i)`` for the intercept), so one scalar per sample is enough
to store a gradient.
"""

import numpy as np
import scipy.sparse as sp
from sklearn.utils import check_random_state

from ..._jit import njit
from ...datafits.rank_risk import affine_map
from ...losses import loss_derivative
from ..progress import Progress
from .sampling import _build_alias

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

    With column offsets ``m`` and units ``u``, the features
    ``x~_ij = (x_ij - m_j) / u_j`` and the coefficients ``v_j = u_j w_j``,
    ``b~ = b + m . w`` give the same scores, ``x~_i . v + b~ = x_i . w + b``,
    and the penalty ``l1 ||w||_1 + l2/2 ||w||^2`` becomes the separable
    ``sum_j (l1 / u_j) |v_j| + (l2 / u_j^2) v_j^2 / 2``.  A step size derived
    from ``x~`` (whose columns have unit spread) is then the same for
    ``X * s`` and ``X``, and so are the iterates: the step in ``w_j`` is
    divided by ``u_j^2``, the step of the intercept is not.  Plain gradient
    steps in ``(v, b~)`` are diagonally preconditioned steps in ``(w, b)``
    (with the intercept decoupled from the column means).

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


def sample_smoothness(loss, sqnorms):
    """Lipschitz constants ``L_i = L_loss ||(x_i, 1)||^2`` of the per-sample gradients."""
    if not np.isfinite(loss.smoothness):
        # Non-smooth loss (hinge, absolute): there is no Lipschitz gradient;
        # step sizes then use the scale of a unit-smooth loss (a heuristic).
        return sqnorms.copy()
    return loss.smoothness * sqnorms


def rank_weights(risk, losses, out=None):
    """Weights by rank: ``lam[argsort(losses)] = sigma`` (ties broken stably)."""
    n = losses.shape[0]
    order = np.argsort(losses, kind="stable")
    if risk.depends_on_values:
        sigma = risk.weights(n, losses)
    else:
        sigma = risk.weights(n)
    lam = np.empty(n) if out is None else out
    lam[order] = sigma
    return lam


def weight_pieces(risk, n):
    """``(sigma_a, sigma_b, threshold)``: the rank weights of ``n`` losses for kernels.

    The ``r``-th smallest loss gets ``sigma_a[r]`` when it is at most
    ``threshold`` and ``sigma_b[r]`` otherwise.  For a risk whose weights
    depend only on ``n`` both sequences are ``risk.weights(n)`` and the
    threshold is infinite; for the human-aligned risk they are its two CPT
    pieces and its reference point, so that the result equals
    ``risk.weights(n, losses)``.
    """
    if risk.depends_on_values:
        sigma_a, sigma_b = risk.weight_pieces(n)
        return (np.ascontiguousarray(sigma_a, dtype=np.float64),
                np.ascontiguousarray(sigma_b, dtype=np.float64), float(risk.reference))
    sigma = np.ascontiguousarray(risk.weights(n), dtype=np.float64)
    return sigma, sigma, np.inf


def svrg_step_size(smoothness, sigma, batch_size, sampling="uniform"):
    """Automatic step of a variance-reduced loop on ``sum_i lam_i l_i``.

    ``smoothness`` holds the per-sample constants ``L_i`` and ``sigma`` the
    rank weights.  Whatever the ranking, ``sum_i lam_i l_i`` is at most
    ``Lbar = sum_i sigma_(i) L_(i)``-smooth (largest weights on the largest
    ``L_i``).  The sampled term ``(lam_i / p_i) l_i`` is

    * ``"uniform"`` (``p_i = 1/n``): up to ``n max(sigma) max_i L_i``-smooth
      (``n sigma_n ||x_i||^2`` for the squared loss; our own bound);
    * ``"importance"`` (``p_i`` proportional to ``lam_i L_i``):
      ``sum_j lam_j L_j <= Lbar``-smooth;
    * ``"nonuniform"`` (``p_i = lam_i``, LSVRG(NU) of Xiao et al. 2023, section 5):
      ``max_i L_i``-smooth.

    A batch of ``B`` draws divides the variance term by ``B``; the step is
    ``1 / (3 (L_term / B + Lbar))``, within SVRG's ``1 / (4 L)`` bound up to
    the factor 4/3 that practice allows (the SVRG inner loop of Ge and Jiang 2024, Lemma 3).
    """
    sigma = np.abs(np.asarray(sigma, dtype=np.float64))
    l_bar = float(np.sort(sigma) @ np.sort(smoothness))
    l_max = float(smoothness.max())
    if sampling == "importance":
        l_term = l_bar
    elif sampling == "nonuniform":
        l_term = l_max
    else:
        l_term = smoothness.shape[0] * float(sigma.max()) * l_max
    return 1.0 / (3.0 * (l_term / batch_size + l_bar))


def make_rng(random_state):
    """A NumPy ``Generator`` from None, an int, a ``RandomState`` or a ``Generator``.

    As in scikit-learn (:func:`sklearn.utils.check_random_state`), None is
    NumPy's global ``RandomState``, which ``np.random.seed`` sets: the
    generator is seeded by a draw from it.
    """
    if isinstance(random_state, np.random.Generator):
        return random_state
    if random_state is None or isinstance(random_state, np.random.RandomState):
        return np.random.default_rng(check_random_state(random_state).randint(np.iinfo(np.int32).max))
    return np.random.default_rng(random_state)


def check_learning_rate(learning_rate):
    """``"auto"`` or a positive float."""
    if isinstance(learning_rate, str):
        if learning_rate != "auto":
            raise ValueError(f"learning_rate must be 'auto' or a positive float, got {learning_rate!r}.")
        return None
    lr = float(learning_rate)
    if not (np.isfinite(lr) and lr > 0):
        raise ValueError(f"learning_rate must be 'auto' or a positive float, got {learning_rate!r}.")
    return lr


@njit(cache=True, inline="always")
def _soft(v, t):
    if v > t:
        return v - t
    if v < -t:
        return v + t
    return 0.0


@njit(cache=True)
def _seed(seed):
    np.random.seed(seed)


def seed_numba(rng):
    """Seed Numba's generator (used inside the kernels) from the NumPy ``Generator``."""
    _seed(int(rng.integers(0, 2**31 - 1)))


@njit(cache=True)
def draw_uniform(n, out):
    """Fill ``out`` with indices drawn uniformly from ``range(n)``, with replacement."""
    for m in range(out.shape[0]):
        out[m] = np.random.randint(0, n)
    return out


@njit(cache=True)
def draw_weighted(p, out, prob, packed, small, large):
    """Fill ``out`` with indices ``i`` drawn with probability ``p_i / sum(p)``.

    Walker's alias method (:func:`skrank.solvers.stochastic.sampling._build_alias`):
    ``O(n)`` to build the table in the scratch arrays ``prob`` (float),
    ``packed``, ``small``, ``large`` (int, length n), then ``O(1)`` per
    draw, so that a pass of weighted draws costs about as much as a pass of
    uniform ones.
    """
    n = p.shape[0]
    total = 0.0
    for i in range(n):
        total += p[i]
    for i in range(n):
        prob[i] = p[i] * n / total
    _build_alias(prob, packed, small, large)
    for m in range(out.shape[0]):
        i = np.random.randint(0, n)
        out[m] = i if np.random.random() < prob[i] else packed[i] >> 32
    return out


class WeightedSampler:
    """Scratch space of :func:`draw_weighted` for repeated draws over ``n`` items."""

    def __init__(self, n):
        self.prob = np.empty(n)
        self.packed = np.empty(n, dtype=np.int64)
        self.small = np.empty(n, dtype=np.int64)
        self.large = np.empty(n, dtype=np.int64)

    def draw(self, p, out):
        """Fill ``out`` with draws proportional to ``p`` (nonnegative, positive sum)."""
        return draw_weighted(p, out, self.prob, self.packed, self.small, self.large)


@njit(cache=True)
def prox_factors(lr, l1, l2, inv_tau):
    """``(thr, inv)`` of :func:`prox_step`: ``lr l1_j`` and ``1 / (1 + lr l2_j + lr inv_tau)``."""
    d = l1.shape[0]
    thr, inv = np.empty(d), np.empty(d)
    for j in range(d):
        thr[j] = lr * l1[j]
        inv[j] = 1.0 / (1.0 + lr * l2[j] + lr * inv_tau)
    return thr, inv


@njit(cache=True, inline="always")
def prox_step(w, b, grad, grad_b, lr, thr, inv, inv_tau, w_anchor, b_anchor, fit_intercept):
    """``(w, b) <- prox(w - lr grad, b - lr grad_b)`` in place.

    The prox is the closed form of ``lr * (sum_j l1_j |.| + l2_j/2 (.)^2 +
    inv_tau/2 ||. - w_anchor||^2)`` (Ge and Jiang 2024, Algorithm 1 line 14) with
    per-coefficient strengths ``l1``, ``l2`` (:meth:`FeatureUnits.penalty`),
    through ``(thr, inv) = prox_factors(lr, l1, l2, inv_tau)``; the intercept
    gets only the anchor term.  ``inv_tau = 0`` gives the plain proximal
    gradient step on the penalty.
    """
    for j in range(w.shape[0]):
        z = w[j] - lr * grad[j] + lr * inv_tau * w_anchor[j]
        w[j] = _soft(z, thr[j]) * inv[j]
    if fit_intercept:
        b[0] = (b[0] - lr * grad_b + lr * inv_tau * b_anchor) / (1.0 + lr * inv_tau)


@njit(cache=True)
def loss_arguments_dense(X, s, c, w, b, out):
    """``out_i = s_i (x_i . w + b) + c_i``."""
    n, d = X.shape
    for i in range(n):
        f = b
        for j in range(d):
            f += X[i, j] * w[j]
        out[i] = s[i] * f + c[i]
    return out


@njit(cache=True)
def scalar_gradients(code, param, s, t, out):
    """``out_i = s_i l'(t_i)``: the per-sample gradient is ``out_i (x_i, 1)``."""
    for i in range(t.shape[0]):
        out[i] = s[i] * loss_derivative(code, t[i], param)
    return out


@njit(cache=True, inline="always")
def vr_batch_direction(X, w, b0, idx, start, stop, s, c, code, param, gref, mult, inv_b, out, db):
    """Add the batch's variance-reduced correction to ``out``; return ``db`` plus its intercept part.

    For ``i = idx[start:stop]``: ``inv_b * mult_i * (s_i l'(t_i(w)) - gref_i) * (x_i, 1)``
    (Ge and Jiang 2024, Algorithm 1 line 13, averaged over the batch), with ``b0`` the current
    intercept.  Shared by :func:`svrg_epoch` and SOREL's epoch kernel.
    """
    d = X.shape[1]
    for m in range(start, stop):
        i = idx[m]
        f = b0
        for j in range(d):
            f += X[i, j] * w[j]
        t = s[i] * f + c[i]
        delta = inv_b * mult[i] * (s[i] * loss_derivative(code, t, param) - gref[i])
        if delta != 0.0:
            for j in range(d):
                out[j] += delta * X[i, j]
            db += delta
    return db


@njit(cache=True)
def svrg_epoch(
    X, s, c, code, param, w, b, gref, mult, gbar, gbar_b, idx, batch, lr, l1, l2,
    inv_tau, w_anchor, b_anchor, fit_intercept, work,
):
    """Variance-reduced proximal steps on ``sum_i lam_i l_i + penalty + prox term``.

    Each step draws the batch ``idx[k*batch:(k+1)*batch]`` and moves along

        d = gbar + (1/B) sum_{i in batch} mult_i (s_i l'(t_i(w)) - gref_i) (x_i, 1)

    (Ge and Jiang 2024, Algorithm 1 line 13, batch-averaged, with ``mult_i = lam_i / p_i``
    for sampling probabilities ``p_i``), then takes the closed-form prox of
    ``lr * (l1 ||.||_1 + l2/2 ||.||^2 + inv_tau/2 ||. - w_anchor||^2)``
    (their line 14; the intercept gets only the anchor term), with the
    per-coefficient strengths ``l1``, ``l2`` of :func:`prox_step`.

    ``w`` and ``b`` (a length-1 array) are updated in place; ``work`` is a
    length-d scratch array.  Returns the number of steps.
    """
    d = X.shape[1]
    n_steps = idx.shape[0] // batch
    inv_b = 1.0 / batch
    thr, inv = prox_factors(lr, l1, l2, inv_tau)
    for k in range(n_steps):
        for j in range(d):
            work[j] = gbar[j]
        db = vr_batch_direction(
            X, w, b[0], idx, k * batch, (k + 1) * batch, s, c, code, param, gref, mult, inv_b,
            work, gbar_b,
        )
        prox_step(w, b, work, db, lr, thr, inv, inv_tau, w_anchor, b_anchor, fit_intercept)
    return n_steps


#: Epochs over which the stochastic solvers' objective must stay within ``tol`` (relative) to stop,
#: as scikit-learn's SGD estimators' ``n_iter_no_change``.
N_ITER_NO_CHANGE = 5


class EpochLog:
    """Objective, time and pass counts per epoch, and the relative-change criterion.

    The criterion is the largest relative change of ``F`` over the last
    :data:`N_ITER_NO_CHANGE` epochs (over the epochs so far before that):
    the objective of a stochastic method fluctuates from epoch to epoch, and
    a single epoch's change falls below ``tol`` by chance when ``F``
    crosses its previous value, far from where the method stalls.

    ``step_fraction`` (at most 1) is the ratio of the step taken to the
    automatic one (:meth:`FeatureUnits.step_fraction`; 1 for the automatic
    step).  Below 1 the criterion is the change plus the rounding of ``F``
    (``eps``) divided by it: with small steps ``F`` changes in proportion to
    the step, and a step too small to move the iterate (whose ``F`` then
    does not change at all) must not pass for a method that has stalled.

    ``passes`` follows our convention (the paper's count is samples used / n): every per-sample loss or
    gradient evaluation at a new point counts ``1/n``.
    """

    def __init__(self, objective0, name, verbose, max_iter=None, step_fraction=1.0):
        self.history = [float(objective0)]
        self.times = [0.0]
        self.passes = [0.0]
        self.changes = []
        self.name = name
        self.verbose = verbose
        self.step_fraction = min(float(step_fraction), 1.0)
        self.progress = Progress(name.lower(), verbose, max_iter, unit="epoch",
                                 criterion=f"relative change over {N_ITER_NO_CHANGE} epochs")

    def record(self, objective, seconds, passes):
        """Log one epoch; returns the criterion (``inf`` if ``F`` is not finite).

        The criterion is the largest relative objective change over the
        last :data:`N_ITER_NO_CHANGE` epochs, divided by the step fraction
        (class docstring).
        """
        prev = self.history[-1]
        self.history.append(float(objective))
        self.times.append(self.times[-1] + seconds)
        self.passes.append(self.passes[-1] + passes)
        if not np.isfinite(objective):
            return np.inf
        self.changes.append(abs(prev - objective) / max(abs(objective), 1e-300))
        criterion = max(self.changes[-N_ITER_NO_CHANGE:])
        if self.step_fraction < 1.0:
            # a change below the rounding of F (even none at all) is no smaller than eps
            criterion = ((criterion + np.finfo(np.float64).eps) / self.step_fraction
                         if self.step_fraction > 0 else np.inf)
        self.progress(len(self.history) - 1, objective, criterion)
        return criterion

    def result(self, w, b, fit_intercept, criterion, converged, **info):
        """The :class:`SolverResult` of the run."""
        from ..result import SolverResult

        return SolverResult(
            coef=w,
            intercept=float(b[0]) if fit_intercept else 0.0,
            n_iter=len(self.history) - 1,
            objective_history=np.asarray(self.history),
            stop_criterion=float(criterion),
            converged=bool(converged),
            info={"times": np.asarray(self.times), "passes": np.asarray(self.passes), **info},
        )


def initial_point(d, coef_init, intercept_init, fit_intercept):
    """``w`` (length d) and ``b`` (a length-1 array) from the optional starting point."""
    w = np.zeros(d) if coef_init is None else np.array(coef_init, dtype=np.float64).ravel().copy()
    b0 = 0.0 if (intercept_init is None or not fit_intercept) else float(intercept_init)
    return w, np.array([b0])
