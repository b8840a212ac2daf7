"""PPD-SG and PPD-AdaGrad for the full-AUC square loss of a linear score.

Liu, Yuan, Ying and Yang, "Stochastic AUC Maximization with Deep Neural
Networks" (ICLR 2020), Algorithms 2, 3 and 4: stochastic primal-dual steps
on the min-max form of the square loss, in stages, with :class:`PPDStream`
for ``partial_fit``.  The method, the step units, the centring, the
safeguard and the departures from the paper are described in the user
guide, :ref:`methods-ppd`.
"""

import time

import numpy as np
import scipy.sparse as sp
from scipy.sparse.linalg import ArpackError, ArpackNoConvergence, LinearOperator, eigsh

from ..._jit import njit
from ..progress import Progress
from ..result import SolverResult
from .epochs import EpochStream
from .sampling import build_alias, seed_state, xorshift_uniform

_STAGE_FACTOR = 3.0  # T_k = T0 3^k, eta_k = eta_0 / 3^k (Section 5)
#: ``step`` of a stream (``partial_fit``) for PPD-SG and PPD-AdaGrad: at PPD-AdaGrad's ``step=10`` a
#: young stream's average ranks backwards (user guide, :ref:`methods-ppd`).
STREAM_STEP = 1.0
_RISE = 1e-2  # a stage raising F by more than this (relative) is redone
_MAX_REDOS = 10


@njit(cache=True, inline="always")
def _sample_terms(h, positive, a, b, dual, p, q, margin):
    """Derivatives of ``l = F(w, a, b, dual; z) / (p(1-p))`` for one sample.

    ``F`` is eq. (2)'s per-sample function with margin ``c``; ``q`` replaces
    ``p(1-p)`` in its ``dual^2`` term (``q = p(1-p)`` for a known ratio).
    Returns ``(dl/dh, dl/da, dl/db, dl/d dual)``; ``dl/dw = (dl/dh) x``.
    """
    scale = 1.0 / (p * (1.0 - p))
    if positive:
        r = h - a
        return (2.0 * (1.0 - p) * (r - margin - dual) * scale,
                -2.0 * (1.0 - p) * r * scale,
                0.0,
                (-2.0 * (1.0 - p) * h - 2.0 * q * dual) * scale)
    r = h - b
    return (2.0 * p * (r + margin + dual) * scale,
            0.0,
            -2.0 * p * r * scale,
            (2.0 * p * h - 2.0 * q * dual) * scale)


@njit(cache=True, inline="always")
def _ratio_update(stats, n_positive, batch):
    """Algorithm 4's estimates ``stats = [T+, T-, y_bar, q_hat]`` after a mini-batch (``y_i`` for ``y_j``)."""
    j = stats[0] + stats[1]
    stats[0] += n_positive
    stats[1] += batch - n_positive
    y_bar = ((j + 2.0) * stats[2] + n_positive) / (j + batch + 2.0)
    spread = n_positive * (1.0 - y_bar) ** 2 + (batch - n_positive) * y_bar * y_bar
    stats[2] = y_bar
    stats[3] = ((j + 1.0) * stats[3] + spread) / (j + batch + 1.0)


@njit(cache=True, inline="always")
def _adagrad_entry(G, S2, k, g, x0, eta, delta):
    """Adds ``g`` to the AdaGrad sums of entry ``k``; returns ``x0 - eta G_k / (delta + sqrt(S2_k))``."""
    G[k] += g
    S2[k] += g * g
    return x0 - eta * G[k] / (delta + np.sqrt(S2[k]))


@njit(cache=True, inline="always")
def _update(start, cur, gw, G, S2, ga, gb, gd, a, b, du, inv_batch, alpha, eta, eta_s, inv_gamma, delta,
            delta_s, adagrad):
    """A step of :func:`_ppd_steps` from the batch gradient: ``cur[:d]`` in place; returns ``(a, b, dual)``.

    ``gw`` is the batch's sum for ``w``, ``ga``, ``gb``, ``gd`` the gradients of ``(a, b, dual)``.
    """
    d = start.shape[0] - 3
    if adagrad:
        # dual averaging anchored at the stage start (Algorithm 3, line 5);
        # the dual's gradient enters negated (ascent)
        for f in range(d):
            g = gw[f] * inv_batch + alpha * cur[f] + inv_gamma * (cur[f] - start[f])
            G[f] += g
            S2[f] += g * g
            cur[f] = start[f] - eta * G[f] / (delta + np.sqrt(S2[f]))
        return (_adagrad_entry(G, S2, d, ga, start[d], eta_s, delta_s),
                _adagrad_entry(G, S2, d + 1, gb, start[d + 1], eta_s, delta_s),
                _adagrad_entry(G, S2, d + 2, -gd, start[d + 2], eta_s, delta_s))
    for f in range(d):
        cur[f] -= eta * (gw[f] * inv_batch + alpha * cur[f] + inv_gamma * (cur[f] - start[f]))
    return a - eta_s * ga, b - eta_s * gb, du + eta_s * gd


@njit(cache=True, fastmath={"reassoc", "contract", "arcp", "nsz"})
def _ppd_steps(Xd, indptr, indices, data, is_sparse, n_pos, prob, packed, weighted, start, cur, n_steps,
               eta, eta_s, inv_gamma, inv_gamma_s, delta, delta_s, adagrad, batch, p_known, margin, alpha,
               online, stats, state, gw, G, S2, sums, center, shifted):
    """``n_steps`` steps of a stage of PPD-SG (Algorithm 2) or PPD-AdaGrad (Algorithm 3), in place.

    Rows ``0 .. n_pos-1`` of the data (dense ``Xd``, or CSR ``indptr``,
    ``indices``, ``data`` when ``is_sparse``) are the positives; each step
    draws ``batch`` rows with replacement, uniformly or, when ``weighted``,
    from the alias table ``prob``, ``packed``
    (:func:`skrank.solvers.stochastic.sampling.draw_index`).  ``start`` is the stage's
    start ``(w0, a0, b0, dual0)`` and ``cur`` the current point, both of
    length ``d + 3``; ``cur`` is updated.  ``sums`` (length ``d + 2``)
    accumulates the points ``(w, a, b)`` at which gradients are taken (the
    stage average is ``sums`` over the stage's steps), and ``G``, ``S2`` the
    stage's AdaGrad sums of gradients and of their squares.  ``eta``,
    ``inv_gamma``, ``delta`` act on ``w``; ``eta_s``, ``inv_gamma_s``,
    ``delta_s`` on ``(a, b, dual)``.  ``stats = [T+, T-, y_bar, q_hat]``
    (Algorithm 4) is updated when ``online``, else ``p_known`` is the
    positive share; ``state`` is the generator's; ``gw`` is a work array.
    When ``shifted`` the rows are read minus ``center`` (length ``d``): the
    scores are ``(x - center)' w``, without a dense copy of sparse rows.
    """
    n = indptr.shape[0] - 1 if is_sparse else Xd.shape[0]
    d = start.shape[0] - 3
    a, b, du = cur[d], cur[d + 1], cur[d + 2]
    inv_batch = 1.0 / batch
    for t in range(n_steps):
        for f in range(d):
            sums[f] += cur[f]
        sums[d] += a
        sums[d + 1] += b
        if online:
            p = (stats[0] + 1.0) / (stats[0] + stats[1] + 2.0)
            q = stats[3]
        else:
            p = p_known
            q = p * (1.0 - p)
        for f in range(d):
            gw[f] = 0.0
        ga, gb, gd = 0.0, 0.0, 0.0
        n_positive = 0
        center_score, score_sum = 0.0, 0.0
        if shifted:
            for f in range(d):
                center_score += center[f] * cur[f]
        for r in range(batch):
            # uniform, or Walker's alias draw (sampling.draw_index, written out here)
            u = xorshift_uniform(state) * n
            i = int(u)
            if i >= n:
                i = n - 1
            if weighted and (u - i) >= prob[i]:
                i = packed[i] >> 32
            h = 0.0
            if is_sparse:
                for k in range(indptr[i], indptr[i + 1]):
                    h += data[k] * cur[indices[k]]
            else:
                for f in range(d):
                    h += Xd[i, f] * cur[f]
            h -= center_score
            positive = i < n_pos
            n_positive += 1 if positive else 0
            s, da, db, dd = _sample_terms(h, positive, a, b, du, p, q, margin)
            score_sum += s
            ga += da
            gb += db
            gd += dd
            if is_sparse:
                for k in range(indptr[i], indptr[i + 1]):
                    gw[indices[k]] += s * data[k]
            else:
                for f in range(d):
                    gw[f] += s * Xd[i, f]
        if shifted:
            for f in range(d):
                gw[f] -= center[f] * score_sum
        if online:
            # after the gradient, so that the estimates used are independent of this mini-batch
            _ratio_update(stats, n_positive, batch)
        ga = ga * inv_batch + inv_gamma_s * (a - start[d])
        gb = gb * inv_batch + inv_gamma_s * (b - start[d + 1])
        a, b, du = _update(start, cur, gw, G, S2, ga, gb, gd * inv_batch, a, b, du, inv_batch, alpha, eta,
                           eta_s, inv_gamma, delta, delta_s, adagrad)
    cur[d] = a
    cur[d + 1] = b
    cur[d + 2] = du


def _units(parts, batch, alpha):
    """``(L_w, L_s)`` from the data's parts of :func:`_curvature_parts`, the batch size and ``alpha``."""
    lam, noise, scalar = parts
    L_w = max(lam, 0.0) + alpha + noise / batch
    L_s = 2.0 + scalar / batch
    return max(L_w, 1e-300), L_s


def _curvature_parts(X, n_pos, weights=None, center=None):
    """What the block curvatures ``(L_w, L_s)`` take from the data: ``(lambda_max, noise, scalar)``.

    ``L_w = lambda_max + alpha + noise / B`` and ``L_s = 2 + scalar / B``
    (:func:`_units`, user guide), so that a stream recomputes its units when
    ``alpha`` or the batch size ``B`` change, without the data.
    ``lambda_max(2 (M+ + M-))`` comes from a Lanczos run on matrix-vector
    products (a deterministic start; the trace, an upper bound, if it does
    not converge; 0 when the trace is).  ``X`` holds the positives in its
    first ``n_pos`` rows; with ``weights`` the moments and means are those
    of the weighted sample, the distribution the steps draw from; with
    ``center`` the rows are read minus it (a sparse ``X`` is not densified).
    """
    n, d = X.shape
    n_neg = n - n_pos
    Xp, Xn = X[:n_pos], X[n_pos:]
    c = np.zeros(d) if center is None else np.asarray(center, dtype=np.float64)
    if sp.issparse(X):
        sq = np.asarray(X.multiply(X).sum(axis=1)).ravel()
        if center is not None:
            sq = np.maximum(sq - 2.0 * np.asarray(X @ c).ravel() + float(c @ c), 0.0)
    else:
        Xc = X - c if center is not None else X
        sq = np.einsum("ij,ij->i", Xc, Xc)
    if weights is None:
        p = n_pos / n
        r_pos = r_neg = None
        trace = 2.0 * (sq[:n_pos].mean() + sq[n_pos:].mean())
    else:
        w_pos, w_neg = weights[:n_pos], weights[n_pos:]
        p = float(w_pos.sum() / weights.sum())
        r_pos, r_neg = w_pos / w_pos.sum(), w_neg / w_neg.sum()
        trace = 2.0 * (r_pos @ sq[:n_pos] + r_neg @ sq[n_pos:])

    def moment(A, r, count, z):
        s = np.asarray(A @ z).ravel() - float(c @ z)
        if r is None:
            return (np.asarray(A.T @ s).ravel() - c * s.sum()) / count
        s = r * s
        return np.asarray(A.T @ s).ravel() - c * s.sum()

    def hess(z):
        z = np.asarray(z, dtype=np.float64).ravel()
        return 2.0 * (moment(Xp, r_pos, n_pos, z) + moment(Xn, r_neg, n_neg, z))

    if not trace > 0.0:
        lam = 0.0  # X = 0 about the center (constant rows): no curvature, and no Krylov space
    elif d <= 3:
        lam = float(np.linalg.eigvalsh(np.column_stack([hess(e) for e in np.eye(d)]))[-1])
    else:
        op = LinearOperator((d, d), matvec=hess, dtype=np.float64)
        try:
            lam = float(eigsh(op, k=1, which="LA", v0=np.linspace(1.0, 2.0, d), tol=1e-2,
                              return_eigenvectors=False)[0])
        except (ArpackNoConvergence, ArpackError):
            lam = trace
    # per-sample curvatures l_i = tr H_i; tr E[H_i^2] / tr E[H_i] = E[l_i^2] / E[l_i]
    l_i = 2.0 * np.concatenate([sq[:n_pos] / p, sq[n_pos:] / (1.0 - p)])
    if weights is None:
        mean_l, mean_l2 = float(l_i.mean()), float(np.mean(l_i * l_i))
    else:
        share = weights / weights.sum()
        mean_l, mean_l2 = float(share @ l_i), float(share @ (l_i * l_i))
    noise = mean_l2 / mean_l if mean_l > 0 else 0.0
    return lam, noise, 2.0 * max(1.0 / p, 1.0 / (1.0 - p))


class _PPDData:
    """One data set for :func:`_ppd_steps`: the rows, positives first, and the sampler's alias table.

    The steps read the rows minus ``center`` (None: as they are): a dense
    copy is centred once, sparse rows are shifted in the steps.
    """

    def __init__(self, X, n_pos, weights, center=None):
        self.n, self.n_pos = X.shape[0], int(n_pos)
        self.is_sparse = sp.issparse(X)
        self.center = np.zeros(1) if center is None else np.asarray(center, dtype=np.float64)
        if self.is_sparse:
            X = sp.csr_matrix(X, dtype=np.float64)
            X.sort_indices()
            self.Xd = np.zeros((1, 1))
            self.indptr, self.indices = X.indptr.astype(np.int64), X.indices.astype(np.int64)
            self.data = X.data.astype(np.float64)
            self.shifted = center is not None and bool(np.any(self.center != 0.0))
        else:
            self.Xd = np.ascontiguousarray(X, dtype=np.float64)
            if center is not None:
                self.Xd = self.Xd - self.center
            self.indptr, self.indices, self.data = np.zeros(1, np.int64), np.zeros(1, np.int64), np.zeros(1)
            self.shifted = False
        self.weighted = weights is not None
        if self.weighted:
            self.prob = self.n * weights / weights.sum()
            self.packed = np.empty(self.n, dtype=np.int64)
            build_alias(self.prob, self.packed, np.empty(self.n, np.int64), np.empty(self.n, np.int64))
        else:
            self.prob, self.packed = np.zeros(1), np.zeros(1, dtype=np.int64)


def _mean_row(X, weights=None):
    """The mean row of ``X`` under the distribution the steps draw from (weighted by ``weights``)."""
    if weights is None:
        return np.asarray(X.mean(axis=0), dtype=np.float64).ravel()
    return np.asarray(X.T @ (weights / weights.sum()), dtype=np.float64).ravel()


class PPDStream(EpochStream):
    """The state of PPD-SG or PPD-AdaGrad between passes (Liu et al. 2020, Algorithms 2-4).

    :func:`ppd_sg` and :func:`ppd_adagrad` run their stages through one
    stream; an estimator's ``partial_fit`` keeps one between calls and runs
    one pass on each batch.  What it holds and how a stream's stages run is
    described in the user guide, :ref:`methods-ppd`.

    Parameters
    ----------
    alpha : float
        l2 strength.
    margin : float
        The square loss's margin ``c``.
    adagrad : bool
        PPD-AdaGrad rather than PPD-SG.
    batch_size, step, gamma, inner_iter0, class_ratio, delta : see ppd_sg
        As in :func:`ppd_sg` and :func:`ppd_adagrad`; ``step=None`` is
        :data:`STREAM_STEP` (1) for both, the step of ``partial_fit``:
        :func:`ppd_adagrad`'s 10 is too large for a stream, see there.
    random_state : int, RandomState, Generator or None
        Seed of the generator.
    coef_init : ndarray of shape (n_features,) or None
        Start ``w`` (zeros by default).
    n_features : int
        Number of features.
    """

    def __init__(self, *, alpha, margin, adagrad, batch_size=64, step=None, gamma=None, inner_iter0=1000,
                 class_ratio="known", delta=1e-2, random_state=None, coef_init=None, n_features):
        if class_ratio not in ("known", "online"):
            raise ValueError(f"class_ratio must be 'known' or 'online', got {class_ratio!r}.")
        if int(batch_size) < 1 or int(inner_iter0) < 1:
            raise ValueError("batch_size and inner_iter0 must be >= 1 and max_iter >= 0.")
        d = int(n_features)
        w = np.zeros(d) if coef_init is None else np.array(coef_init, dtype=np.float64).ravel()
        if w.shape != (d,):
            raise ValueError(f"coef_init has shape {w.shape}; expected ({d},).")
        self.alpha, self.margin, self.adagrad = float(alpha), float(margin), bool(adagrad)
        self.batch, self.inner_iter0 = int(batch_size), int(inner_iter0)
        self.step = STREAM_STEP if step is None else float(step)
        self.gamma, self.delta = gamma, float(delta)
        self.online = class_ratio == "online"
        self.reseed(random_state)
        self.w_init = w
        self.stats = np.array([0.0, 0.0, 0.5, 0.25])  # T+, T-, y_bar, q_hat (Algorithm 4)
        #: total weight (count without weights) of the positives and negatives seen, and their sums of rows
        self.totals, self.class_sums = np.zeros(2), np.zeros((2, d))
        #: (L_w, L_s), from the first data that hold both classes, and what they take from those data
        self.units, self.curvature_parts = None, None
        #: the row the steps subtract from every row (the mean of the first data with both classes)
        self.center = None
        self.start, self.cur, self.sums = np.empty(d + 3), np.empty(d + 3), np.zeros(d + 2)
        self.G, self.S2, self.gw = np.zeros(d + 3), np.zeros(d + 3), np.empty(d)
        #: the current stage (None before the first), its length and the steps it has run
        self.stage, self.stage_length, self.t = None, None, 0
        #: passes run so far
        self.passes = 0
        #: samples drawn so far
        self.samples = 0

    def _seed_kernel(self, rng):
        self.state = seed_state(rng)

    def update(self, *, alpha, margin, batch_size):
        """Take the estimator's current settings for the next steps (``partial_fit``).

        The point, the stage and its sums go on; the step units (and the
        current stage's steps) are recomputed from the curvatures of the
        first batch with both classes when ``alpha``, the margin or the
        batch size changed.

        Parameters
        ----------
        alpha, margin, batch_size : see the class
            The l2 strength, the square loss's margin ``c`` and the samples per step.
        """
        if int(batch_size) < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}.")
        new = (float(alpha), float(margin), int(batch_size))
        if new == (self.alpha, self.margin, self.batch):
            return
        self.alpha, self.margin, self.batch = new
        if getattr(self, "curvature_parts", None) is not None:
            self._set_units(*_units(self.curvature_parts, self.batch, self.alpha))

    def _set_units(self, L_w, L_s):
        self.units = (L_w, L_s)
        c = self.margin
        if self.adagrad:
            self.eta0, self.eta0_s = self.step * c / np.sqrt(L_w), self.step * c / np.sqrt(L_s)
            self.dlt, self.dlt_s = self.delta * c * np.sqrt(L_w), self.delta * c * np.sqrt(L_s)
        else:
            self.eta0, self.eta0_s = self.step / L_w, self.step / L_s
            self.dlt = self.dlt_s = 0.0
        self.inv_gamma, self.inv_gamma_s = (0.0, 0.0) if self.gamma is None else (L_w / self.gamma,
                                                                                    L_s / self.gamma)
        if self.stage is not None:  # new units within a stage: its steps follow
            divisor = getattr(self, "divisor", _STAGE_FACTOR**self.stage)
            self.eta, self.eta_s = self.eta0 / divisor, self.eta0_s / divisor

    def prepare(self, X, y, sample_weight=None):
        """The data of a pass, positives first; counts its classes into the running statistics.

        Parameters
        ----------
        X : {ndarray, sparse matrix} of shape (n, d)
        y : ndarray of shape (n,)
            Labels in {-1, +1}.
        sample_weight : ndarray of shape (n,), optional
            Nonnegative weights: the steps draw the rows with probabilities
            proportional to them.

        Returns
        -------
        _PPDData
        """
        pos = np.asarray(y) > 0
        order = np.concatenate([np.flatnonzero(pos), np.flatnonzero(~pos)])
        X = X[order] if sp.issparse(X) else np.asarray(X, dtype=np.float64)[order]
        weights = None if sample_weight is None else np.asarray(sample_weight, dtype=np.float64)[order]
        return self._prepare_sorted(X, int(pos.sum()), weights)

    def _prepare_sorted(self, X, n_pos, weights):
        Xp, Xn = X[:n_pos], X[n_pos:]
        if weights is None:
            self.totals += (n_pos, X.shape[0] - n_pos)
            self.class_sums[0] += np.asarray(Xp.sum(axis=0)).ravel()
            self.class_sums[1] += np.asarray(Xn.sum(axis=0)).ravel()
            both = 0 < n_pos < X.shape[0]
        else:
            w_pos, w_neg = weights[:n_pos], weights[n_pos:]
            self.totals += (w_pos.sum(), w_neg.sum())
            self.class_sums[0] += np.asarray(Xp.T @ w_pos).ravel()
            self.class_sums[1] += np.asarray(Xn.T @ w_neg).ravel()
            both = w_pos.sum() > 0 and w_neg.sum() > 0
        if self.units is None and both:
            self.center = _mean_row(X, weights)
            self.curvature_parts = _curvature_parts(X, n_pos, weights, self.center)
            self._set_units(*_units(self.curvature_parts, self.batch, self.alpha))
        return _PPDData(X, n_pos, weights, self.center)

    def class_means(self):
        """The class means of the rows seen (weighted), positives then negatives.

        Returns
        -------
        mu_pos, mu_neg : ndarray of shape (n_features,)
        """
        return self.class_sums[0] / self.totals[0], self.class_sums[1] / self.totals[1]

    def class_scores(self, w):
        """The scores of the class means at ``w`` in the steps' units (rows minus :attr:`center`).

        The optimal ``a`` and ``b`` at ``w`` (Proposition 1).

        Parameters
        ----------
        w : ndarray of shape (n_features,)

        Returns
        -------
        a, b : float
        """
        mu_pos, mu_neg = self.class_means()
        shift = 0.0 if self.center is None else float(self.center @ w)
        return float(mu_pos @ w) - shift, float(mu_neg @ w) - shift

    def begin_stage(self, w, a, b, stage, divisor=None):
        """Start stage ``stage`` at ``(w, a, b)``, the dual at its closed form on the running means.

        Parameters
        ----------
        w : ndarray of shape (n_features,)
        a, b : float
        stage : int
            ``k``: the stage has ``round(T0 3^k)`` steps.
        divisor : float, optional
            The step is ``eta_0 / divisor``; ``3^k`` by default.
        """
        d = self.w_init.shape[0]
        mu_pos, mu_neg = self.class_means()
        self.start[:d] = w
        self.start[d], self.start[d + 1] = a, b
        self.start[d + 2] = float(mu_neg @ w - mu_pos @ w)  # argmax_dual f(w, a, b, .) (Prop. 1)
        self.cur[:] = self.start
        self.sums[:] = 0.0
        self.G[:] = 0.0
        self.S2[:] = 0.0
        self.t = 0
        self.stage = int(stage)
        self.stage_length = int(round(self.inner_iter0 * _STAGE_FACTOR**stage))
        self.divisor = _STAGE_FACTOR**stage if divisor is None else divisor
        self.eta, self.eta_s = self.eta0 / self.divisor, self.eta0_s / self.divisor

    def run(self, data, n_steps):
        """``n_steps`` steps of the current stage on ``data``.

        Parameters
        ----------
        data : _PPDData
            From :meth:`prepare`.
        n_steps : int
        """
        p_known = self.totals[0] / (self.totals[0] + self.totals[1])
        _ppd_steps(data.Xd, data.indptr, data.indices, data.data, data.is_sparse, data.n_pos, data.prob,
                   data.packed, data.weighted, self.start, self.cur, int(n_steps), self.eta, self.eta_s,
                   self.inv_gamma, self.inv_gamma_s, self.dlt, self.dlt_s, self.adagrad, self.batch,
                   p_known, self.margin, self.alpha, self.online, self.stats, self.state, self.gw, self.G,
                   self.S2, self.sums, data.center, data.shifted)
        self.t += int(n_steps)
        self.samples += int(n_steps) * self.batch

    def average(self):
        """The average of the current stage's points so far (its start before any step).

        Returns
        -------
        w : ndarray of shape (n_features,)
        a, b : float
        """
        d = self.w_init.shape[0]
        if self.t == 0:
            return self.start[:d].copy(), float(self.start[d]), float(self.start[d + 1])
        inv = 1.0 / self.t
        return self.sums[:d] * inv, float(self.sums[d] * inv), float(self.sums[d + 1] * inv)

    def class_ratio(self):
        """``(p, q)``: the positive share and the ``p (1 - p)`` the next step would use.

        Returns
        -------
        p, q : float
        """
        if self.online:
            return (self.stats[0] + 1.0) / (self.stats[0] + self.stats[1] + 2.0), float(self.stats[3])
        p = self.totals[0] / (self.totals[0] + self.totals[1])
        return float(p), float(p * (1.0 - p))

    def partial(self, X, y, sample_weight=None):
        """One pass over a batch of data (``partial_fit``); a stage ends wherever its last step falls."""
        data = self.prepare(X, y, sample_weight)
        self.passes += 1
        if self.units is None:
            return
        if self.stage is None:
            self.begin_stage(self.w_init, *self.class_scores(self.w_init), 0)
        remaining = max(data.n // self.batch, 1)
        while remaining > 0:
            todo = min(remaining, self.stage_length - self.t)
            self.run(data, todo)
            remaining -= todo
            if self.t == self.stage_length:
                w, a, b = self.average()
                self.begin_stage(w, a, b, self.stage + 1)

    @property
    def coef(self):
        """The current stage's average ``w`` (the start before any step)."""
        return self.w_init.copy() if self.stage is None else self.average()[0]

    @property
    def intercept(self):
        """0: an intercept cancels in the pairwise differences."""
        return 0.0


def _ppd(objective, penalty, coef_init, max_iter, tol, batch_size, step, gamma, inner_iter0, class_ratio,
         delta, random_state, verbose, adagrad):
    start = time.perf_counter()
    name = "ppd-adagrad" if adagrad else "ppd-sg"
    Xp, Xn = objective.X_pos, objective.X_neg
    n_pos, n_neg = Xp.shape[0], Xn.shape[0]
    if n_pos == 0 or n_neg == 0:
        raise ValueError(f"{name} needs both classes (got {n_pos} positives, {n_neg} negatives).")
    if int(max_iter) < 0:
        raise ValueError("batch_size and inner_iter0 must be >= 1 and max_iter >= 0.")
    n, d = n_pos + n_neg, Xp.shape[1]
    stream = PPDStream(alpha=penalty.l2, margin=objective.loss.margin, adagrad=adagrad,
                       batch_size=batch_size, step=step, gamma=gamma, inner_iter0=inner_iter0,
                       class_ratio=class_ratio, delta=delta, random_state=random_state,
                       coef_init=coef_init, n_features=d)
    if sp.issparse(Xp) or sp.issparse(Xn):
        X = sp.vstack([sp.csr_matrix(Xp), sp.csr_matrix(Xn)], format="csr", dtype=np.float64)
    else:
        X = np.ascontiguousarray(np.vstack([Xp, Xn]), dtype=np.float64)
    weights = np.concatenate([objective.pos_weight, objective.neg_weight]) if objective.weighted else None
    data = stream._prepare_sorted(X, n_pos, weights)

    w = stream.w_init.copy()
    a, b = stream.class_scores(w)  # the optimal a, b for the start
    F = objective.value(w)
    history = [F]
    crit, converged = np.inf, False
    progress = Progress(name, verbose, max_iter, unit="stage", criterion="change")
    k, redos = 0, 0
    divisor_floor = 1.0
    while k < int(max_iter):
        divisor = max(_STAGE_FACTOR**k, divisor_floor)
        stream.begin_stage(w, a, b, k, divisor)
        stream.run(data, stream.stage_length)
        w_avg, a_avg, b_avg = stream.average()
        F_new = objective.value(w_avg)
        if not F_new <= F + _RISE * abs(F):
            # safeguard (not in the paper): redo the stage with half its step
            redos += 1
            divisor_floor = 2.0 * divisor
            progress.note(f"stage {k + 1}: {stream.stage_length} steps, F={F_new:.8g} rejected, step halved")
            if redos > _MAX_REDOS:
                break
            continue
        k += 1
        w, a, b = w_avg, a_avg, b_avg
        crit = abs(F - F_new) / max(abs(F_new), 1e-300)
        F = F_new
        history.append(F)
        progress(k, F, crit, f"steps={stream.stage_length}")
        if crit <= tol:
            converged = True
            break
    # F(0) bounds the minimum from above: a fit above it by more than tol is surely not within
    # tol of it, however little its last stage changed F (a start far out that the steps barely move)
    excess = (F - objective.value(np.zeros(d))) / max(abs(F), 1e-300)
    if not excess <= tol:
        converged, crit = False, max(crit, excess)
    p_used, q_used = stream.class_ratio()
    mu_pos, mu_neg = stream.class_means()
    shift = 0.0 if stream.center is None else float(stream.center @ w)  # a, b in the rows' units
    return SolverResult(
        coef=w,
        intercept=0.0,
        n_iter=k,
        objective_history=np.asarray(history),
        stop_criterion=float(crit),
        converged=converged,
        info={"passes": stream.samples / n, "time": time.perf_counter() - start,
              "stages_redone": redos, "objective_evaluations": len(history) + redos + 1,
              "step_units": stream.units, "a": a + shift, "b": b + shift,
              "dual": float(mu_neg @ w - mu_pos @ w), "p": p_used, "q": q_used},
    )


_DOC = """
    Parameters
    ----------
    datafit : skrank.datafits.partial_auc.PartialAUCObjective
        With ``fpr_range=(0, 1)`` and the ``"squared"`` loss (not checked
        here); its ``X_pos``, ``X_neg`` (dense or sparse), ``alpha``,
        ``loss.margin`` and sample weights (drawn with their probabilities,
        user guide) define the problem.  Standardise the features: the
        steps adapt to their scale, but not to a bad conditioning.
    penalty : skrank.penalties.Penalty
        The l2 penalty that ``datafit`` holds: ``penalty.l2`` is its ``alpha``.
    coef_init : ndarray of shape (d,) or None, default=None
        Start ``w`` (zeros, the paper's ``v_bar_0 = 0``, when None); ``a``,
        ``b`` start at its class-mean scores and the dual at their
        difference.
    max_iter : int, default=4
        Number of stages ``K`` (stage ``k`` takes ``T0 3^k`` steps: 40
        ``T0`` in all for the default).
    tol : float, default=1e-4
        Stop when the exact ``F`` changes by at most ``tol |F|`` over a
        stage.
    batch_size : int, default=64
        Samples per step, drawn uniformly with replacement.
    step : float, default={step}
        ``eta_0``, divided by 3 at each stage, in the scaled units of the
        user guide: {units}.
    gamma : float or None, default=None
        Proximal parameter of eq. (3) in units of ``1 / L``: the term adds
        ``(L / gamma)(v - v_0)`` to each block's gradient (``L_w`` on ``w``,
        ``L_s`` on ``(a, b)``).  None: no proximal term (the default; see
        the user guide).
    inner_iter0 : int, default=1000
        ``T0``, the number of steps of the first stage.
    class_ratio : {{"known", "online"}}, default="known"
        The training set's positive share ``p``, or Algorithm 4's running
        estimates of ``p`` and ``p (1 - p)``.{extra}
    random_state : int, RandomState, Generator or None, default=None
        Seeds the compiled generator of the mini-batches.
    verbose : int, default=0
        Print ``F`` after every stage when positive.

    Returns
    -------
    SolverResult
        ``coef``: the ``w``-part of the last accepted stage's average.
        ``objective_history``: the exact ``F`` (``datafit.value``) at the
        start and after every accepted stage (its last entry is ``F`` at
        ``coef``).  ``stop_criterion``: the relative change of ``F`` over
        the last stage; ``converged`` when it is at most ``tol``.
        ``n_iter``: accepted stages.  A fit whose ``F`` is above ``F(0)``
        (an upper bound of the minimum) by more than ``tol |F|`` is not
        converged, its criterion at least that excess.  ``info``: ``passes`` (samples drawn by
        the stochastic steps over ``n``; each stage also makes one exact
        pass for ``F``), ``time`` (seconds), ``stages_redone`` (the
        safeguard), ``objective_evaluations``, ``step_units`` ``(L_w, L_s)``,
        the final ``a`` and ``b``, ``dual`` (its closed form at ``coef``,
        Algorithm 2's ``alpha_bar_K``), ``p`` and ``q`` (the ratio and the
        ``p (1 - p)`` used; the last estimates when online).
"""


def ppd_sg(datafit, penalty, *, coef_init=None, max_iter=4, tol=1e-4, batch_size=64, step=1.0,
           gamma=None, inner_iter0=1000, class_ratio="known", random_state=None, verbose=0):
    return _ppd(datafit, penalty, coef_init, max_iter, tol, batch_size, step, gamma, inner_iter0,
                class_ratio, 0.0, random_state, verbose, adagrad=False)


def ppd_adagrad(datafit, penalty, *, coef_init=None, max_iter=4, tol=1e-4, batch_size=64, step=10.0,
                gamma=None, inner_iter0=1000, class_ratio="known", delta=1e-2, random_state=None,
                verbose=0):
    return _ppd(datafit, penalty, coef_init, max_iter, tol, batch_size, step, gamma, inner_iter0,
                class_ratio, delta, random_state, verbose, adagrad=True)


ppd_sg.__doc__ = (
    """PPD-SG (Liu et al. 2020, Algorithm 2): stages of proximal primal-dual SGD.

    Minimises the full-AUC square loss ``F`` of a linear score through the
    min-max form of Proposition 1 (user guide), with closed-form dual
    restarts between stages.
""" + _DOC.format(step=1.0, units="""``eta = step / L`` per block.  First
        stages diverged from about 1.5 on the tables tried (the safeguard
        redoes them)""", extra=""))
ppd_adagrad.__doc__ = (
    """PPD-AdaGrad (Liu et al. 2020, Algorithm 3): stages of AdaGrad dual averaging.

    Same stages, restarts and objective as :func:`ppd_sg`; the inner loop is
    ``u = u_0 - eta G / (delta + sqrt(S2))`` over ``u = (w, a, b, dual)``.
""" + _DOC.format(step=10.0, units="""``eta = step * c / sqrt(L)`` per block,
        a distance in units of the score.  The gaps to the optimum on the
        tables tried shrank or stayed flat from 3 to 100""",
                  extra="""
    delta : float, default=1e-2
        The constant of ``H_t = delta I + diag(s_t)``, in units of
        ``c sqrt(L)`` (a typical gradient entry in the scaled coordinates);
        the paper gives no value (Lemma 3 assumes it bounds the gradients).
        Results were flat from 1e-3 to 1e-1."""))
