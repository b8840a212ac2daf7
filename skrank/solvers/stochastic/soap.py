"""SOAP: stochastic optimisation of the average-precision surrogate.

Qi, Luo, Xu, Ji and Yang, "Stochastic Optimization of Areas Under
Precision-Recall Curves with Provable Convergence" (NeurIPS 2021),
Algorithms 1-3, for the score ``h = sigmoid(X w + b)``, with
:class:`SOAPStream` for ``partial_fit``.  The method and the decisions the
paper leaves open are described in the user guide, :ref:`methods-soap`.
"""

import time

import numpy as np
import scipy.sparse as sp

from .docs import fill_doc
from .epochs import EpochStream
from .outer_loop import OuterLoop
from .sampling import seed_state
from .soap_kernel import OPTIMIZERS, soap_steps
from .units import FeatureUnits

#: default step sizes per optimizer (``learning_rate=None``), in units of the
#: inverse of the mean squared row norm for SGD and momentum
DEFAULT_LEARNING_RATES = {"sgd": 10.0, "momentum": 10.0, "adam": 1e-2}


def soap(datafit, penalty, *, coef_init, max_iter=100, tol=1e-4, batch_size=64, positives_per_batch=8,
         gamma=0.9, optimizer="adam", learning_rate=None, beta1=0.9, beta2=0.999, eps=1e-8,
         n_iter_no_change=5, random_state=None, verbose=0):
    """Minimise the average-precision surrogate by SOAP.

    Parameters
    ----------
    datafit : skrank.datafits.average_precision.AveragePrecisionObjective
        The objective on the training set: its data, surrogate loss, l2
        strength and sample weights (user guide: weighted draws).
    penalty : skrank.penalties.Penalty
        The l2 penalty that ``datafit`` holds: ``penalty.l2`` is its ``alpha``.
    coef_init : ndarray of shape (d + 1,)
        Start ``(w, b)``.
    max_iter : int, default=100
        Maximum number of epochs.
    tol : float, default=1e-4
        Stop when the best exact objective has not improved by
        ``tol * max(1, |F|)`` for ``n_iter_no_change`` epochs.
    batch_size : int, default=64
        Samples per step ``B``.
    positives_per_batch : int, default=8
        Positives (anchors) per step ``B+``; must be below ``batch_size``.
    gamma : float, default=0.9
        Weight of the new batch estimate in the moving averages, in (0, 1].
    optimizer : {"sgd", "momentum", "adam"}, default="adam"
        Update rule of the steps.
    learning_rate : float or None, default=None
        Step size in the units of ``X``; None takes
        :data:`DEFAULT_LEARNING_RATES` in standardised units (module
        docstring), for ``"sgd"`` and ``"momentum"`` divided by the mean
        squared row norm of the standardised ``X`` plus one.
    beta1, beta2, eps : float
        Moment weights and the Adam constant.
    n_iter_no_change : int, default=5
        Number of epochs over which the improvement is measured (``tol``).
    random_state : int, RandomState, Generator or None, default=None
        Seed of the in-kernel generator (the batches).
    verbose : int, default=0
        Print one line per epoch when positive.

    Returns
    -------
    SolverResult
        ``coef`` is the epoch end of lowest exact objective;
        ``objective_history`` has the exact objective at the start and
        after each epoch, then at the returned point; ``stop_criterion`` is
        the best value's relative improvement over the last
        ``n_iter_no_change`` epochs, or its relative excess over the
        objective at ``(w, b) = 0`` when that is above ``tol`` (module
        docstring).  ``info`` has ``passes`` (sampled rows
        / n plus one per exact evaluation), ``steps``, ``time``,
        ``learning_rate`` and ``u`` (the final moving averages, one row per
        positive of positive weight, in the order of ``y``).

    Raises
    ------
    ValueError
        If the objective has no negative of positive weight.
    """
    start = time.perf_counter()
    stream = SOAPStream(datafit.loss, penalty.l2, batch_size=batch_size,
                        positives_per_batch=positives_per_batch, gamma=gamma, optimizer=optimizer,
                        learning_rate=learning_rate, beta1=beta1, beta2=beta2, eps=eps,
                        random_state=random_state, coef_init=coef_init,
                        n_features=datafit.X.shape[1])
    data = stream.prepare(datafit.X, datafit.y, datafit.sample_weight)
    if data.neg_idx.shape[0] == 0 or not stream.totals[1] > 0:
        raise ValueError("SOAP needs at least one negative sample (of positive weight).")
    w = stream.point()
    loop = OuterLoop(w, datafit.value(w), tol, verbose, "soap")
    _run_epochs(stream, data, datafit, loop, max_iter, tol, n_iter_no_change)
    _check_against_zero(datafit, loop, tol)
    return loop.result({
        "passes": stream.t * stream.batch_size / data.n + loop.n_iter + 2,
        "steps": stream.t,
        "time": time.perf_counter() - start,
        "learning_rate": stream.lr,
        "step_units": stream.units.unit,
        "u": stream.moving_averages(data),
    })


def _run_epochs(stream, data, objective, loop, max_iter, tol, n_iter_no_change):
    """Epochs of ``stream`` on ``data``, recorded in ``loop``, until the best ``F`` stalls.

    The criterion is the best value's relative improvement over the last
    ``n_iter_no_change`` epochs (over all the epochs before that many).
    """
    best_window = [loop.best_F]
    for _ in range(max_iter):
        stream.epoch(data)
        w = stream.point()
        F = objective.value(w)
        loop.step(w, F, f"steps {stream.t:7d}")
        best_window.append(loop.best_F)
        if not np.isfinite(F):
            loop.converged = False
            return
        old = best_window[max(len(best_window) - 1 - n_iter_no_change, 0)]
        loop.crit = (old - loop.best_F) / max(1.0, abs(loop.best_F))
        loop.converged = len(best_window) > n_iter_no_change and loop.crit <= tol
        if loop.converged:
            return


def _check_against_zero(objective, loop, tol):
    """Mark the fit not converged when its best ``F`` is above ``F`` at ``(w, b) = 0`` by more than ``tol``.

    ``F(0)`` (every score 1/2) bounds the minimum from above, so such a fit
    is provably more than ``tol * max(1, |F|)`` from it, whatever its last
    epochs did (a start far out, where the steps barely move ``(w, b)``,
    stalls at a huge ``F`` with an improvement of zero).  The stopping
    criterion becomes at least that relative excess.
    """
    F_zero = objective.value(np.zeros_like(loop.best_w))
    excess = (loop.best_F - F_zero) / max(1.0, abs(loop.best_F))
    if not excess <= tol:
        loop.converged = False
        loop.crit = max(float(loop.crit), float(excess))


class _SoapPass:
    """One data set prepared for :func:`skrank.solvers.stochastic.soap_kernel.soap_steps`.

    The dense rows, each class's rows, the positives' entries of the moving
    averages, and the sampler's lists and cursor (carried from one epoch on
    the same data to the next).
    """

    def __init__(self, X, pos_idx, neg_idx, slot, p_pos, p_neg, steps):
        # X: the rows in the units of the steps
        self.X, self.pos_idx, self.neg_idx, self.slot = X, pos_idx, neg_idx, slot
        self.n = X.shape[0]
        self.p_pos, self.p_neg, self.steps = p_pos, p_neg, steps
        self.perm_pos = np.arange(pos_idx.shape[0], dtype=np.int64)
        self.perm_neg = np.arange(neg_idx.shape[0], dtype=np.int64)
        self.cursor = np.array([pos_idx.shape[0], neg_idx.shape[0]], dtype=np.int64)  # shuffle first


def _batch_sizes(batch_size, positives_per_batch):
    """``(B, B+)`` as integers; raises ValueError unless ``1 <= B+ < B``."""
    B, Bp = int(batch_size), int(positives_per_batch)
    if not 1 <= Bp < B:
        raise ValueError(
            f"positives_per_batch={Bp} must be at least 1 and below batch_size={B}: "
            "each batch needs negatives as well as positives."
        )
    return B, Bp


class SOAPStream(EpochStream):
    """The state of SOAP between epochs: the point, optimizer, generator, moving averages, class totals.

    :func:`soap` runs its epochs through one stream; an estimator's
    ``partial_fit`` keeps one between calls and runs one epoch (its
    ``ceil(N- / (B - B+))`` steps) on each batch of data it is given.  The
    moving averages are keyed by the positives' content, so a row that
    comes back in a later batch continues its average and a new one starts
    from its first batch averages; the class weights of the batches come
    from the class totals of all the batches seen (user guide).

    Parameters
    ----------
    loss : skrank.pairwise_losses.PairwiseLoss
        The surrogate.
    alpha : float
        l2 strength.
    batch_size, positives_per_batch, gamma, optimizer, learning_rate, beta1, beta2, eps : see soap
        As in :func:`soap`; ``learning_rate=None`` for ``"sgd"`` and
        ``"momentum"`` is scaled on the first batch.
    random_state : int, RandomState, Generator or None
        Seed of the generator.
    coef_init : ndarray of shape (n_features + 1,) or None
        Start ``(w, b)``; None: the start of
        :meth:`skrank.datafits.average_precision.AveragePrecisionObjective.start`
        on the first batch that holds both classes.
    n_features : int
        Number of features.
    """

    def __init__(self, loss, alpha, *, batch_size=64, positives_per_batch=8, gamma=0.9, optimizer="adam",
                 learning_rate=None, beta1=0.9, beta2=0.999, eps=1e-8, random_state=None, coef_init=None,
                 n_features):
        B, Bp = _batch_sizes(batch_size, positives_per_batch)
        if optimizer not in OPTIMIZERS:
            raise ValueError(f"Unknown optimizer {optimizer!r}; expected one of {list(OPTIMIZERS)}.")
        self.loss, self.alpha = loss, float(alpha)
        self.batch_size, self.positives_per_batch = B, Bp
        self.gamma, self.optimizer = float(gamma), optimizer
        self.beta1, self.beta2, self.eps = float(beta1), float(beta2), float(eps)
        self._set_learning_rate(learning_rate)
        self.reseed(random_state)
        self.n_features = int(n_features)
        #: the start ``(w, b)`` given, until the first data sets the units
        self._start = None if coef_init is None else np.array(coef_init, dtype=np.float64).ravel()
        #: ``(v, b~)``, the point in the units of the steps (None before the start)
        self.theta = None
        #: the units of the steps (:class:`FeatureUnits`), read from the first data seen
        self.units = None
        d = self.n_features
        self.m1, self.m2 = np.zeros(d + 1), np.zeros(d + 1)
        #: steps run so far (the index of the next step)
        self.t = 0
        #: passes run so far
        self.passes = 0
        #: total weight (count without weights) of the positives and negatives seen
        self.totals = np.zeros(2)
        self._index = {}
        self.u = np.zeros((0, 2))
        self.seen = np.zeros(0, dtype=np.bool_)
        self.stamp = np.zeros(0, dtype=np.int64)

    def _set_learning_rate(self, learning_rate):
        self._learning_rate = learning_rate
        self._base_lr = (DEFAULT_LEARNING_RATES[self.optimizer] if learning_rate is None
                         else float(learning_rate))
        #: the step size (None until the next batch for "sgd" and "momentum")
        self.lr = self._base_lr if self.optimizer == "adam" else None

    def _seed_kernel(self, rng):
        self.state = seed_state(rng)

    def update(self, loss, alpha, *, batch_size, positives_per_batch, gamma, learning_rate):
        """Take the estimator's current settings for the next epochs (``partial_fit``).

        The point, the optimizer's moments, the moving averages and the
        class totals go on; a new ``learning_rate`` sets the step again
        (``None`` with ``"sgd"`` or ``"momentum"``: scaled on the next
        batch).

        Parameters
        ----------
        loss : skrank.pairwise_losses.PairwiseLoss
        alpha : float
        batch_size, positives_per_batch, gamma, learning_rate : see soap
        """
        B, Bp = _batch_sizes(batch_size, positives_per_batch)
        self.loss, self.alpha = loss, float(alpha)
        self.batch_size, self.positives_per_batch, self.gamma = B, Bp, float(gamma)
        if learning_rate != getattr(self, "_learning_rate", learning_rate):
            if (learning_rate is None) != (self._learning_rate is None) and self.units is not None:
                # the steps change units: carry the point over, restart the moments
                self._start = self.point() if self.theta is not None else self._start
                self.theta, self.units = None, None
                self.m1[:], self.m2[:] = 0.0, 0.0
            self._set_learning_rate(learning_rate)

    def _slots(self, rows):
        """The entries of ``u`` of ``rows`` (new rows get new, unseen entries)."""
        out = self._row_slots(rows)
        size, old = len(self._index), self.u.shape[0]
        if size > old:
            cap = max(size, 2 * old)
            u, seen, stamp = np.zeros((cap, 2)), np.zeros(cap, dtype=np.bool_), np.full(cap, -1, np.int64)
            u[:old], seen[:old], stamp[:old] = self.u, self.seen, self.stamp
            self.u, self.seen, self.stamp = u, seen, stamp
        return out

    @fill_doc
    def prepare(self, X, y, sample_weight=None):
        """The data of an epoch; counts its classes into the running totals.

        On the first batch it also fixes the step of ``"sgd"`` and
        ``"momentum"`` and, without ``coef_init``, the start (on the first
        batch that holds both classes).

        Parameters
        ----------
        {labelled_batch}
        sample_weight : ndarray of shape (n,), optional
            Nonnegative weights: the epochs draw each class's rows with
            probabilities proportional to them (rows of weight zero never).

        Returns
        -------
        _SoapPass
        """
        X = X.toarray() if sp.issparse(X) else X
        X = np.ascontiguousarray(X, dtype=np.float64)
        y = np.asarray(y, dtype=np.float64)
        pos = y > 0
        v = None if sample_weight is None else np.asarray(sample_weight, dtype=np.float64)
        if self.units is None:
            self.units = FeatureUnits(X, True, v, identity=self._learning_rate is not None)
        Xt = self.units.transform(X)
        kept = np.ones(y.shape[0], dtype=bool) if v is None else v > 0  # a weight of zero drops a row
        pos_idx = np.flatnonzero(pos & kept).astype(np.int64)
        neg_idx = np.flatnonzero(~pos & kept).astype(np.int64)
        n_neg = neg_idx.shape[0]
        p_pos = p_neg = None
        if v is None:
            self.totals += (pos_idx.shape[0], n_neg)
        else:
            v_pos, v_neg = v[pos_idx], v[neg_idx]
            self.totals += (v_pos.sum(), v_neg.sum())
            p_pos, p_neg = v_pos / v_pos.sum(), v_neg / v_neg.sum()
        if self.lr is None:
            sqnorms = np.einsum("ij,ij->i", Xt, Xt)
            mean_sqnorm = np.mean(sqnorms) if v is None else np.average(sqnorms, weights=v)
            self.lr = self._base_lr / (float(mean_sqnorm) + 1.0)
        if self.theta is None and self._start is None and pos_idx.shape[0] and n_neg:
            from ...datafits.average_precision import AveragePrecisionObjective

            self._start = AveragePrecisionObjective(X, y, self.loss, self.alpha, v).start()
        if self.theta is None and self._start is not None:
            self.theta = np.append(*self.units.to_internal(self._start[:-1], self._start[-1]))
        steps = -(-n_neg // (self.batch_size - self.positives_per_batch))
        return _SoapPass(Xt, pos_idx, neg_idx, self._slots(X[pos_idx]), p_pos, p_neg, steps)

    def epoch(self, data, steps=None):
        """``steps`` SOAP steps (one epoch by default) on ``data``, in place.

        A batch without positives or without negatives (or, without
        ``coef_init``, before the first batch with both) takes no step.

        Parameters
        ----------
        data : _SoapPass
            From :meth:`prepare`.
        steps : int, optional
        """
        self.passes += 1
        if self.theta is None or data.pos_idx.shape[0] == 0 or data.neg_idx.shape[0] == 0:
            return
        steps = data.steps if steps is None else int(steps)
        if data.p_pos is not None:
            # a fresh weighted sample of each class's list for every epoch
            data.perm_pos = self.rng.choice(data.pos_idx.shape[0], size=data.pos_idx.shape[0],
                                            p=data.p_pos).astype(np.int64)
            data.perm_neg = self.rng.choice(data.neg_idx.shape[0], size=data.neg_idx.shape[0],
                                            p=data.p_neg).astype(np.int64)
            data.cursor[:] = 0
        B, Bp = self.batch_size, self.positives_per_batch
        total = self.totals[0] + self.totals[1]
        weight_pos = (self.totals[0] / total) / (Bp / B)
        weight_neg = (self.totals[1] / total) / ((B - Bp) / B)
        loss = self.loss
        alpha = np.ascontiguousarray(self.alpha / (self.units.unit * self.units.unit))
        soap_steps(data.X, data.pos_idx, data.neg_idx, data.slot, self.theta, self.u, self.seen, self.stamp,
                   self.m1, self.m2, steps, self.t, Bp, B, self.gamma, self.lr, alpha,
                   OPTIMIZERS[self.optimizer], self.beta1, self.beta2, self.eps, weight_pos, weight_neg,
                   loss.code, loss.shift, loss.scale, self.state, data.perm_pos, data.perm_neg, data.cursor)
        self.t += steps

    def moving_averages(self, data):
        """The moving averages ``u`` of the positives of ``data``, in their order.

        Parameters
        ----------
        data : _SoapPass

        Returns
        -------
        ndarray of shape (n_positives, 2)
        """
        return self.u[data.slot].copy()

    def point(self):
        """``(w, b)``: the coefficients and the score intercept, in the units of ``X``."""
        if self.theta is None:
            return np.zeros(self.n_features + 1) if self._start is None else self._start.copy()
        return np.append(*self.units.to_original(self.theta[:-1], self.theta[-1]))

    @property
    def coef(self):
        """The coefficients ``w``."""
        return self.point()[:-1]

    @property
    def intercept(self):
        """The score intercept ``b``."""
        return float(self.point()[-1])
