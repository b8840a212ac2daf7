"""SOTA-s for the KL-DRO form of the two-way partial AUC of a linear score.

Zhu, Wu, Wang and Yang (2022), "When AUC meets DRO: Optimizing Partial AUC
for Deep Learning with Non-Convex Convergence Guarantee".
:class:`SOTAStream` holds the state; :func:`sota_s` runs its epochs on the
whole data.  The smoothed objective, the steps, the temperatures and the
adaptive step are described in the user guide, :doc:`/two_way_partial_auc`.
"""

import time

import numpy as np
from scipy.special import logsumexp
from scipy.stats import norm

from .epochs import EpochLog, EpochStream, run_epochs
from .sampling import make_rng
from .units import FeatureUnits, dense_design

#: the largest temperature, in units of ``l(0)``: a range that covers its whole class (``fpr_max = 1``
#: or ``tpr_min = 0``) is a plain mean, which a temperature this large approaches
_MAX_TEMPERATURE = 1e3
#: the factors of the step after an epoch that lowers the exact objective, and after one that does not
#: (:func:`sota_s`; Battiti's "bold driver")
GROW, SHRINK = 1.2, 0.5


def default_temperature(share, loss):
    """The KL-DRO temperature that stands for the top ``share`` of a class's losses.

    ``l(0) share / phi(z)``, ``z`` the normal quantile of ``1 - share``
    (user guide), at most ``1000 l(0)`` (``share = 1``: a plain mean).

    Parameters
    ----------
    share : float
        In ``(0, 1]``: ``fpr_max`` for the negatives, ``1 - tpr_min`` for the positives.
    loss : skrank.pairwise_losses.PairwiseLoss

    Returns
    -------
    float
    """
    scale = float(loss.value(np.zeros(1))[0])
    if share >= 1.0:
        return _MAX_TEMPERATURE * scale
    kappa = share / norm.pdf(norm.ppf(1.0 - share))
    return min(kappa, _MAX_TEMPERATURE) * scale


class _Data:
    """One data set of a stream: its classes' rows in the steps' units, its positives' entries of ``u``."""

    def __init__(self, X_pos, X_neg, slot):
        self.pos, self.neg, self.slot = X_pos, X_neg, slot
        self.n = X_pos.shape[0] + X_neg.shape[0]


def _moving_log_average(old, new, gamma):
    """``log((1 - gamma) exp(old) + gamma exp(new))``; ``new`` where ``old`` is nan (a first visit)."""
    first = np.isnan(old)
    mixed = np.logaddexp(np.log1p(-gamma) + np.where(first, new, old), np.log(gamma) + new)
    return np.where(first, new, mixed)


class SOTAStream(EpochStream):
    """The state of SOTA-s between epochs: ``w``, its momentum, the averages ``v`` and ``u_i``.

    An estimator's ``partial_fit`` keeps one and runs an epoch on each
    batch of data; the averages ``u_i`` are keyed by the positive row's
    content (user guide).  The step of an epoch is ``rate * step / L``:
    :func:`sota_s` adapts ``rate``, a stream keeps it (1 for a new one).

    Parameters
    ----------
    loss : skrank.pairwise_losses.PairwiseLoss
        A convex pairwise loss.
    alpha : float
        l2 strength.
    fpr_max, tpr_min : float
        The range, which sets the temperatures :func:`default_temperature`.
    batch_size : int, default=64
        Positives and negatives each step draws (with replacement).
    step : float, default=0.5
        Step in units of ``1 / L``, ``L`` the curvature bound of the
        steps' units (user guide).
    momentum : float, default=0.9
        Weight of the past in the moving average of the gradients.
    gamma : float, default=0.9
        Weight of the new estimate in the moving averages ``u_i`` and ``v``.
    lam_n, lam_p : float or None, default=None
        The inner and outer temperatures; None for :func:`default_temperature`.
    random_state : int, RandomState, Generator or None, default=None
        Sets the generator of the draws of the steps.
    coef_init : ndarray of shape (n_features,) or None, default=None
        Start ``w`` (zeros by default).
    n_features : int
        Number of features.
    """

    def __init__(self, *, loss, alpha, fpr_max, tpr_min, batch_size=64, step=0.5, momentum=0.9, gamma=0.9,
                 lam_n=None, lam_p=None, random_state=None, coef_init=None, n_features):
        d = int(n_features)
        w = np.zeros(d) if coef_init is None else np.array(coef_init, dtype=np.float64).ravel()
        if w.shape != (d,):
            raise ValueError(f"coef_init has shape {w.shape}; expected ({d},).")
        if not (0.0 <= momentum < 1.0 and 0.0 < gamma <= 1.0 and step > 0):
            raise ValueError("SOTA-s needs 0 <= momentum < 1, 0 < gamma <= 1 and step > 0.")
        self.loss, self.w_init = loss, w
        self.step, self.momentum, self.gamma = float(step), float(momentum), float(gamma)
        #: the temperatures given, which a new range leaves as they are (None: from the range)
        self._given_temperatures = (lam_n, lam_p)
        #: log of the moving average of the outer mean (nan before the first step)
        self.log_v = np.nan
        #: log of each positive's moving average of ``mean_j exp(l_ij / lam_n)`` (nan before its first
        #: draw), and the entry of each positive row's content
        self.log_u, self._index = np.zeros(0), {}
        self.lam_n = self.lam_p = None
        self.update(alpha=alpha, loss=loss, batch_size=batch_size, fpr_max=fpr_max, tpr_min=tpr_min)
        self.reseed(random_state)
        #: FeatureUnits of the first data with both classes; the internal point v and its momentum
        self.units, self.v, self.m = None, None, np.zeros(d)
        self.passes, self.samples, self.steps = 0, 0, 0
        #: the factor of ``step / L`` in the epochs' steps
        self.rate = 1.0

    def _seed_kernel(self, rng):
        """No compiled kernel: the steps draw from ``rng`` itself."""

    def update(self, *, alpha, loss, batch_size, fpr_max, tpr_min):
        """Take the estimator's current l2 strength, loss, batch size and range for the next steps.

        A new range sets the temperatures again (those not given) and
        restarts the moving averages ``u_i`` and ``v`` (user guide).
        """
        if int(batch_size) < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}.")
        if not (0.0 < float(fpr_max) <= 1.0 and 0.0 <= float(tpr_min) < 1.0):
            raise ValueError(f"SOTA-s needs 0 < fpr_max <= 1 and 0 <= tpr_min < 1; got fpr_max={fpr_max} "
                             f"and tpr_min={tpr_min}.")
        self.alpha, self.loss, self.batch = float(alpha), loss, int(batch_size)
        lam_n, lam_p = self._given_temperatures
        lam_n = default_temperature(float(fpr_max), loss) if lam_n is None else float(lam_n)
        lam_p = default_temperature(1.0 - float(tpr_min), loss) if lam_p is None else float(lam_p)
        if (lam_n, lam_p) != (self.lam_n, self.lam_p):
            self.lam_n, self.lam_p = lam_n, lam_p
            self.log_u[:], self.log_v = np.nan, np.nan

    def prepare(self, X, y, sample_weight=None):
        """The data of an epoch, in the steps' units (the first data with both classes set them)."""
        if sample_weight is not None:
            raise ValueError("solver='sota-s' does not take sample_weight.")
        pos = np.asarray(y) > 0
        if self.units is None and 0 < pos.sum() < pos.shape[0]:
            self.units = FeatureUnits(X, fit_intercept=True)
            self.v = self.w_init * self.units.unit
            Z = self.units.transform(X)
            self.curvature = 2.0 * float(self.loss.smoothness) * float(np.mean(np.sum(Z * Z, axis=1)))
        if self.units is None:
            return _Data(np.zeros((pos.sum(), 0)), np.zeros((0, 0)), np.zeros(0, dtype=np.int64))
        Z = self.units.transform(X)
        return _Data(Z[pos], Z[~pos], self._slots(dense_design(X[pos])))

    def _slots(self, rows):
        """The entries of ``log u`` of the positive ``rows`` (new rows get new entries, nan)."""
        slots = self._row_slots(rows)
        if len(self._index) > self.log_u.shape[0]:
            grown = np.full(max(len(self._index), 2 * self.log_u.shape[0]), np.nan)
            grown[:self.log_u.shape[0]] = self.log_u
            self.log_u = grown
        return slots

    def _eta(self):
        """``step / L``: ``L`` bounds the pair losses' curvature and the penalty's in the steps' units."""
        return self.step / (self.curvature + self.alpha / float(np.min(self.units.unit)) ** 2)

    def _gradient(self, data, ip, jn):
        """The step's gradient estimate in the internal units; updates ``log u_i`` and ``log v``."""
        Xp, Xn = data.pos[ip], data.neg[jn]
        z = (Xp @ self.v)[:, None] - (Xn @ self.v)[None, :]
        a = self.loss.value(z) / self.lam_n
        batch_log = logsumexp(a, axis=1) - np.log(a.shape[1])
        slots = data.slot[ip]
        log_u = _moving_log_average(self.log_u[slots], batch_log, self.gamma)
        self.log_u[slots] = log_u
        r = (self.lam_n / self.lam_p) * log_u  # log exp(g_i / lam_p), g_i = lam_n log u_i
        self.log_v = _moving_log_average(np.array(self.log_v),
                                         logsumexp(r) - np.log(r.shape[0]), self.gamma)[()]
        outer = np.exp(r - self.log_v) / r.shape[0]
        inner = np.exp(a - log_u[:, None]) / a.shape[1]
        c = outer[:, None] * inner * self.loss.derivative(z)
        return Xp.T @ c.sum(axis=1) - Xn.T @ c.sum(axis=0) + self.alpha * self.v / self.units.unit**2

    def epoch(self, data):
        """``ceil(n / (2 B))`` steps on ``data`` (about one pass); none without both classes."""
        self.passes += 1
        n_pos, n_neg = data.pos.shape[0], data.neg.shape[0]
        if n_pos == 0 or n_neg == 0:
            return
        eta = self._eta() * self.rate
        for _ in range(-(-data.n // (2 * self.batch))):
            ip = self.rng.integers(n_pos, size=self.batch)
            jn = self.rng.integers(n_neg, size=self.batch)
            g = self._gradient(data, ip, jn)
            self.m = self.momentum * self.m + (1.0 - self.momentum) * g
            self.v = self.v - eta * self.m
            self.steps += 1
            self.samples += 2 * self.batch

    @property
    def coef(self):
        """``w`` in the units of ``X``."""
        if self.units is None:
            return self.w_init.copy()
        return self.units.to_original(self.v, 0.0)[0]

    @property
    def intercept(self):
        """0: an intercept cancels in the pairwise differences."""
        return 0.0


def sota_s(datafit, penalty, *, coef_init=None, max_iter=100, tol=1e-4, batch_size=64, step=0.5,
           momentum=0.9, gamma=0.9, lam_n=None, lam_p=None, random_state=None, verbose=0):
    """Minimise the KL-DRO form of the two-way partial AUC by SOTA-s (Zhu, Wu, Wang and Yang 2022).

    Parameters
    ----------
    datafit : skrank.datafits.partial_auc.PartialAUCObjective
        With ``fpr_range=(0, fpr_max)``, any ``tpr_min`` and a convex
        pairwise loss; no sample weights.
    penalty : skrank.penalties.Penalty
        The l2 penalty that ``datafit`` holds: ``penalty.l2`` is its ``alpha``.
    coef_init : ndarray of shape (d,) or None, default=None
        Start ``w`` (zeros when None).
    max_iter : int, default=100
        Most epochs (``ceil(n / (2 B))`` steps each, about one pass).
    tol : float, default=1e-4
        Stop when the exact ``F`` changes by at most ``tol |F|`` over each
        of the last five epochs.  The step grows by :data:`GROW` after an
        epoch that lowers ``F``, and any other epoch is undone and the step
        shrinks by :data:`SHRINK` (the "bold driver" of the user guide).
    batch_size : int, default=64
        ``B``: positives and negatives drawn per step.
    step : float, default=0.5
        The first epoch's step, in units of ``1 / L`` (:class:`SOTAStream`).
    momentum, gamma, lam_n, lam_p : see SOTAStream
        As in :class:`SOTAStream`.
    random_state : int, RandomState, Generator or None, default=None
        Sets the generator of the draws of the steps.
    verbose : int, default=0
        Print ``F`` after every epoch when positive.

    Returns
    -------
    SolverResult
        ``objective_history``: the exact two-way objective
        (``datafit.value``, the hard top-share selections, not the KL-DRO
        form the steps follow) at the start and after every epoch, at the
        point kept (non-increasing after the first epoch: an undone epoch
        repeats the last value); ``coef`` is the point of lowest ``F``
        after an epoch, or the start (``w = 0`` where its ``F`` is lower)
        when every epoch ended above it (then the last entry of the history
        is that point's ``F``, ``converged`` is False and
        ``info["kept_start"]`` True).  ``info``: ``times``,
        ``passes``, ``lam_n``, ``lam_p``, ``steps``, ``rate`` (the final
        factor of ``step / L``) and ``kept_start``.
    """
    if datafit.fpr_range[0] > 0.0:
        raise ValueError(f"solver='sota-s' needs fpr_range=(0, fpr_max); got {datafit.fpr_range}.")
    if datafit.weighted:
        raise ValueError("solver='sota-s' does not take sample_weight.")
    X = datafit.X
    y = np.where(datafit.positive, 1, -1)
    stream = SOTAStream(loss=datafit.loss, alpha=penalty.l2, fpr_max=datafit.fpr_range[1],
                        tpr_min=datafit.tpr_min, batch_size=batch_size, step=step, momentum=momentum,
                        gamma=gamma, lam_n=lam_n, lam_p=lam_p, random_state=make_rng(random_state),
                        coef_init=coef_init, n_features=X.shape[1])
    data = stream.prepare(X, y)
    log = EpochLog(datafit.value(stream.coef), "SOTA-s", verbose, max_iter)

    # the lowest F after an epoch so far and its point (internal units); not the start's F while the
    # epochs run (at w = 0 every pair ties, a point the first steps rarely improve on in the exact F),
    # but the start, or w = 0 where it is lower, is kept at the end when no epoch got below it
    start_F, start_v = log.history[0], stream.v.copy()
    if np.any(start_v):
        zero_F = datafit.value(np.zeros_like(stream.coef))
        if zero_F < start_F:
            start_F, start_v = zero_F, np.zeros_like(start_v)
    best = [np.inf, stream.v.copy()]

    def epoch(k):
        start = time.perf_counter()
        samples = stream.samples
        stream.epoch(data)
        F = datafit.value(stream.coef)
        if F <= best[0]:
            best[:] = [F, stream.v.copy()]
            stream.rate *= GROW
        else:
            stream.v, F = best[1].copy(), best[0]
            stream.m[:] = 0.0
            stream.rate *= SHRINK
        seconds = time.perf_counter() - start
        return F, seconds, (stream.samples - samples) / data.n

    criterion, converged = run_epochs(log, epoch, int(max_iter), tol)
    kept_start = bool(best[0] > start_F)
    if kept_start:
        # no epoch ended below the start: the start is the point kept, and the fit did not converge
        stream.v, log.history[-1], converged = start_v, start_F, False
        log.progress.note(f"F ended at {best[0]:.6g}, above the start's {start_F:.6g} (or w = 0's): kept it")
    return log.result(stream.coef, 0.0, False, criterion, converged, lam_n=stream.lam_n,
                      lam_p=stream.lam_p, steps=stream.steps, rate=stream.rate, kept_start=kept_start)
