"""Biased mini-batch stochastic subgradient method for rank-weighted risks.

A baseline of Ge and Jiang (2024) and Xiao et al. (2023): each step sorts
the losses of a mini-batch and weighs them with the risk's weights at the
batch size.  The method is described in the user guide,
:ref:`methods-baselines`.
"""

import time

import numpy as np

from ..._jit import njit
from ...datafits.rank_risk import rank_objective
from ...losses import loss_derivative, loss_value
from .docs import fill_doc
from .epochs import EpochLog, EpochStream, initial_point, run_epochs
from .sampling import seed_numba
from .steps import check_learning_rate, prox_factors, prox_step, sample_smoothness
from .units import FeatureUnits, dense_design, prepare_data, user_step_fraction
from .weights import weight_pieces


@njit(cache=True)
def sgd_epoch(
    X, s, c, code, param, w, b, perm, pos, batch, n_steps, sig_a, sig_b, threshold,
    lr, l1, l2, fit_intercept, t_buf, l_buf, work,
):
    """``n_steps`` biased subgradient steps on mini-batches of size ``batch``.

    Batches are consecutive slices of ``perm``, reshuffled whenever fewer
    than ``batch`` entries remain (so each batch is drawn without
    replacement).  ``pos`` (a length-1 integer array) is the position in
    ``perm``, carried over between epochs.  The ``r``-th smallest batch
    loss gets ``sig_a[r]`` if it is at most ``threshold``, else
    ``sig_b[r]``; the step is ``prox(w - lr * g)`` with
    ``g = sum_r weight_r s_i l'(t_i) (x_i, 1)`` and the per-coefficient
    penalty strengths ``l1``, ``l2`` (arrays).
    """
    n, d = X.shape
    empty = np.zeros(d)
    thr, inv = prox_factors(lr, l1, l2, 0.0)
    for _ in range(n_steps):
        if pos[0] + batch > n:
            np.random.shuffle(perm)
            pos[0] = 0
        for m in range(batch):
            i = perm[pos[0] + m]
            f = b[0]
            for j in range(d):
                f += X[i, j] * w[j]
            t = s[i] * f + c[i]
            t_buf[m] = t
            l_buf[m] = loss_value(code, t, param)
        order = np.argsort(l_buf, kind="mergesort")
        below = 0
        for m in range(batch):
            if l_buf[m] <= threshold:
                below += 1
        for j in range(d):
            work[j] = 0.0
        gb = 0.0
        for r in range(batch):
            m = order[r]
            i = perm[pos[0] + m]
            weight = sig_a[r] if r < below else sig_b[r]
            delta = weight * s[i] * loss_derivative(code, t_buf[m], param)
            if delta != 0.0:
                for j in range(d):
                    work[j] += delta * X[i, j]
                gb += delta
        prox_step(w, b, work, gb, lr, thr, inv, 0.0, empty, 0.0, fit_intercept)
        pos[0] += batch


def sgd_step_size(smoothness, sig_a, sig_b):
    """Automatic constant step ``1 / (2 L_B)`` of :func:`sgd`.

    ``L_B = max(sum |sigma_a|, sum |sigma_b|) * max_i L_i`` bounds the
    smoothness of the rank-weighted batch loss (the weights sum to one for a
    spectral risk).  The penalty is handled by its prox and needs no room.
    """
    total = max(float(np.abs(sig_a).sum()), float(np.abs(sig_b).sum()), 1e-12)
    return 1.0 / (2.0 * total * float(smoothness.max()))


@fill_doc
def sgd(datafit, penalty, *, batch_size=64, learning_rate="auto", max_iter=100,
        epoch_length=None, tol=1e-6, random_state=None, coef_init=None, intercept_init=None, verbose=0):
    """Minimise ``sum_i sigma_i l_(i) + penalty`` by biased mini-batch subgradient steps.

    Parameters
    ----------
    {datafit}
        Its risk: any risk; value-dependent weights (human-aligned) are applied to the
        batch losses, ``risk.weights(B, batch_losses)``.
        Its loss: any loss (non-smooth ones use a subgradient).
        Its sample weights, if any: each epoch draws its ``n`` samples with
        probabilities ``w_i / sum w`` (with replacement), so that the batches
        come from the weighted empirical distribution (:mod:`skrank.risks`);
        ``F`` is the weighted objective.
    penalty : skrank.penalties.Penalty
        The l1, l2 or elastic-net penalty, applied by its prox after every step.
    batch_size : int, default=64
        Samples per step, drawn without replacement (capped at ``n``).
    learning_rate : "auto" or float, default="auto"
        Constant step; "auto" is :func:`sgd_step_size` {scale_free}
    max_iter : int, default=100
        Number of epochs.
    epoch_length : int or None, default=None
        Steps per epoch; ``None`` means ``n // batch_size`` (one pass).
    {epoch_tol}
    {seed_start_verbose}

    Returns
    -------
    {epoch_result} (cumulative solver seconds,
        objective evaluation excluded), ``passes`` (``B * steps / n`` per
        epoch, our convention) and ``learning_rate``.

    Notes
    -----
    The step and its bias are described in the user guide, :ref:`methods-baselines`.
    """
    X, y, risk, loss, fit_intercept, sample_weight = datafit.weighted()
    stream = SGDStream(risk, loss, penalty, fit_intercept=fit_intercept, batch_size=batch_size,
                       learning_rate=learning_rate, random_state=random_state, coef_init=coef_init,
                       intercept_init=intercept_init, n_features=X.shape[1])
    data = stream.prepare(X, y, sample_weight)
    steps = max(data.n // data.batch, 1) if epoch_length is None else int(epoch_length)
    fraction = 1.0
    if not stream.units_automatic:
        sig_a, sig_b, _ = stream.pieces(data.batch)
        fraction = user_step_fraction(
            X, fit_intercept, stream.lr,
            lambda sq: sgd_step_size(sample_smoothness(loss, sq), sig_a, sig_b), sample_weight)

    def objective():
        return rank_objective(X, y, stream.w, stream.b[0], risk, loss, penalty, sample_weight)

    def epoch(_):
        start = time.perf_counter()
        stream.epoch(data, steps)
        seconds = time.perf_counter() - start
        return objective(), seconds, steps * data.batch / data.n

    log = EpochLog(objective(), "SGD", verbose, max_iter, fraction)
    crit, converged = run_epochs(log, epoch, max_iter, tol)
    return log.result(stream.w, stream.b[0], fit_intercept, crit, converged, learning_rate=stream.lr)


def _step_key(risk, loss, batch_size, learning_rate):
    """What a stream's step depends on: the risk's class and parameters, the loss, the batch, the rate."""
    params = tuple(sorted((name, repr(value)) for name, value in risk.get_params(deep=False).items()))
    return type(risk).__name__, params, loss.name, repr(loss.param), int(batch_size), repr(learning_rate)


class _PassData:
    """One data set prepared for the kernel, with its sampling order and buffers."""

    def __init__(self, X, s, c, batch, p, perm):
        self.X, self.s, self.c, self.batch, self.p, self.perm = X, s, c, batch, p, perm
        self.n = X.shape[0]
        self.pos = np.zeros(1, dtype=np.int64)
        self.t_buf, self.l_buf, self.work = np.empty(batch), np.empty(batch), np.empty(X.shape[1])


class SGDStream(EpochStream):
    """The state of :func:`sgd` between passes: coefficients, step and generator.

    :func:`sgd` runs its epochs through one stream; an estimator's
    ``partial_fit`` keeps one between calls and runs one pass over each batch
    of data it is given, as scikit-learn's ``SGDClassifier`` does.

    Parameters
    ----------
    risk, loss, penalty : objects
        The problem (see :func:`sgd`).
    fit_intercept : bool
    batch_size : int
        Samples per step (capped at the size of the data of a pass).
    learning_rate : "auto" or float
        ``"auto"``: :func:`sgd_step_size` on the first data seen, in the
        units of :class:`skrank.solvers.stochastic.units.FeatureUnits` read from
        that data and kept for the later passes (so that a stream of
        ``X * s`` with the penalty rescaled gives ``coef / s``).
    random_state : int, RandomState, Generator or None
    coef_init, intercept_init : ndarray, float or None
        Starting point (zeros by default).
    n_features : int
    """

    def __init__(self, risk, loss, penalty, *, fit_intercept, batch_size, learning_rate, random_state,
                 coef_init, intercept_init, n_features):
        self.risk, self.loss, self.penalty = risk, loss, penalty
        self.fit_intercept, self.batch_size = bool(fit_intercept), int(batch_size)
        self.reseed(random_state)
        self.lr = check_learning_rate(learning_rate)
        #: the units of the steps (:class:`FeatureUnits`), read from the first data seen
        self.units = None
        self._step_key = _step_key(risk, loss, batch_size, learning_rate)
        self.w, self.b = initial_point(n_features, coef_init, intercept_init, fit_intercept)
        self._pieces = {}
        #: passes run so far
        self.passes = 0

    @staticmethod
    def _seed_kernel(rng):
        # the kernel shuffles with Numba's generator
        seed_numba(rng)

    def update(self, risk, loss, penalty, *, batch_size, learning_rate):
        """Take the estimator's current settings for the next passes (``partial_fit``).

        The coefficients, the generator and the passes go on; the step of
        ``learning_rate="auto"`` and its units are derived again, on the next
        pass's data, when the risk, the loss, the batch size or
        ``learning_rate`` changed.

        Parameters
        ----------
        risk, loss, penalty : objects
            The problem (see :func:`sgd`).
        batch_size : int
        learning_rate : "auto" or float
        """
        key = _step_key(risk, loss, batch_size, learning_rate)
        if key != getattr(self, "_step_key", key):
            self.lr = check_learning_rate(learning_rate)
            self.units = None
            self._pieces = {}
        self.risk, self.loss, self.penalty = risk, loss, penalty
        self.batch_size, self._step_key = int(batch_size), key

    def pieces(self, batch):
        """The risk's weights at the batch size (:func:`skrank.solvers.stochastic.weights.weight_pieces`)."""
        if batch not in self._pieces:
            self._pieces[batch] = weight_pieces(self.risk, batch)
        return self._pieces[batch]

    def _order(self, n, p):
        return self.rng.permutation(n) if p is None else self.rng.choice(n, size=n, p=p)

    def prepare(self, X, y, sample_weight=None):
        """The data of a pass: dense design, loss map, batch size and sampling order.

        Parameters
        ----------
        X : {ndarray, sparse matrix} of shape (n, d)
        y : ndarray of shape (n,)
        sample_weight : ndarray of shape (n,), optional

        Returns
        -------
        _PassData
        """
        X = dense_design(X)
        if getattr(self, "units", None) is None:
            self.units = FeatureUnits(X, self.fit_intercept, sample_weight, identity=self.lr is not None)
        Xd, s, c, sqnorms = prepare_data(self.units.transform(X), y, self.loss, self.fit_intercept)
        n = Xd.shape[0]
        batch = int(min(max(self.batch_size, 1), n))
        if self.lr is None:
            sig_a, sig_b, _ = self.pieces(batch)
            self.lr = sgd_step_size(sample_smoothness(self.loss, sqnorms), sig_a, sig_b)
        p = None
        if sample_weight is not None:
            p = np.asarray(sample_weight, dtype=np.float64) / np.sum(sample_weight)
        return _PassData(Xd, s, c, batch, p, self._order(n, p))

    def epoch(self, data, steps=None):
        """``steps`` steps (one pass, ``n // batch``, by default) on ``data``, in place.

        Parameters
        ----------
        data : _PassData
            From :meth:`prepare`.
        steps : int, optional
        """
        steps = max(data.n // data.batch, 1) if steps is None else int(steps)
        if data.p is not None:
            # a fresh weighted sample for every pass
            data.perm = self._order(data.n, data.p)
            data.pos[0] = 0
        sig_a, sig_b, threshold = self.pieces(data.batch)
        l1, l2 = self.units.penalty(self.penalty)
        v, b_t = self.units.to_internal(self.w, self.b[0])
        b = np.array([b_t])
        sgd_epoch(
            data.X, data.s, data.c, self.loss.code, self.loss.param, v, b, data.perm, data.pos,
            data.batch, steps, sig_a, sig_b, threshold, self.lr, l1, l2,
            self.fit_intercept, data.t_buf, data.l_buf, data.work,
        )
        self.w[:], b_o = self.units.to_original(v, b[0])
        if self.fit_intercept:
            self.b[0] = b_o
        self.passes += 1

    @property
    def units_automatic(self):
        """Whether the steps are automatic (in standardised units), not a given ``learning_rate``."""
        return self.units is not None and not self.units.identity

    @property
    def coef(self):
        """The coefficients."""
        return self.w.copy()

    @property
    def intercept(self):
        """The intercept."""
        return float(self.b[0]) if self.fit_intercept else 0.0
