"""The rank step of a smoothed spectral risk: the projection onto its weights' polytope, and its value.

A rank step is any object with the methods the smoothed risk
(:class:`skrank.datafits.smoothed_rank_risk.SmoothedRankRisk`) asks for::

    project(keys, mu) -> (q, pooled)
    risk_value(losses, pooled=None) -> float
    first_center(losses, warm, n), block_terms(q, pooled, slopes), restarted_from(keys)

``project`` returns the weights ``q = proj_P(keys / mu)`` onto the base
polytope ``P(sigma)`` of the risk's weights, in the metric of the masses,
in the container of ``keys``, and ``pooled``, a :class:`Pooled` record of
the blocks of tied weights whose term enters the Newton model.
``risk_value`` is the exact (weighted) risk ``Omega(l)`` of the losses
(``pooled``: an earlier projection's record, a hint for the sort); the
others give the fit's first centre, the pooled blocks' term of the Newton
model and a restart.  :func:`rank_step_for` chooses :class:`HostRankStep`
(a sort and a PAVA on the host), :class:`ThresholdRankStep` or
``DaskSortedRankStep`` (Dask keys on the workers).
"""

from typing import NamedTuple

import numpy as np
import scipy.sparse as sp

from ..backends.worker_rank_step import WorkerRankStep
from .partial_auc import resort_scores
from .smoothed_risk import pooled_projection
from .threshold_projection import capped_projection, capped_threshold_dask

#: The risk value's smoothing ``mu cap`` of :class:`ThresholdRankStep`, relative to the losses'
#: spread: its threshold ``tau`` lies within ``mu cap`` of a minimiser of ``t + cap sum (l - t)_+``,
#: whose slopes are at most ``cap n``.
_VALUE_SMOOTHING = 1e-12


class Pooled(NamedTuple):
    """The pooled blocks of one projection: what the Newton model's block term needs.

    ``order`` sorts the keys (None for a step without order), ``start`` the
    blocks' first positions in it and ``size`` their sizes: pooled blocks
    only (a single weight needs no record).
    """

    order: object
    start: object
    size: np.ndarray


class HostRankStep:
    """The rank step on the host: a sort (warm-started from the last order) and one PAVA.

    Parameters
    ----------
    risk : skrank.risks.BaseRisk
        A risk with nondecreasing weights.
    n : int
        The number of samples.
    mass : ndarray of shape (n,) or None
        The sample weights in the caller's units (None: unit masses).
    m : ndarray of shape (n,)
        The masses of the metric (mean 1), those of ``mass`` made positive.
    order : ndarray of shape (n,), int64, optional
        The warm order of the first sort (default: ``0, ..., n - 1``).
    """

    def __init__(self, risk, n, mass, m, order=None):
        self.risk, self.mass, self.m = risk, mass, m
        self.sigma = None if mass is not None else np.sort(np.asarray(risk.weights(n), dtype=np.float64))
        self.order = np.arange(n) if order is None else order
        self._starts = np.empty(n + 1, dtype=np.int64)

    def restarted(self, order):
        """A step of the same risk and masses whose warm order is ``order`` (a separate sequence of sorts)."""
        step = HostRankStep.__new__(HostRankStep)
        step.__dict__.update(self.__dict__, order=order, _starts=np.empty_like(self._starts))
        return step

    def weights(self, order):
        """The risk's weights of the losses sorted by ``order`` (ascending)."""
        if self.mass is None:
            return self.sigma
        return self.risk.weights(order.size, self.mass[order])

    def project(self, keys, mu):
        """``q = proj_P(keys / mu)`` (:func:`pooled_projection`), written over the NumPy ``keys``.

        The keys are sorted from the last order (in ``O(n)`` when it nearly
        sorts them), which becomes this projection's.
        """
        order = self.order.copy()
        resort_scores(keys, order)
        self.order = order
        m = np.ones(1) if self.mass is None else self.m  # one mass of every sample: no vector of ones
        n_blocks = pooled_projection(keys, order, self.weights(order), mu, self._starts, m)
        sizes = np.diff(self._starts[: n_blocks + 1])
        pooled = np.flatnonzero(sizes > 1)
        return keys, Pooled(order, self._starts[pooled], sizes[pooled])

    def restarted_from(self, keys):
        """:meth:`restarted` from the order of ``keys``."""
        return self.restarted(np.argsort(keys, kind="stable"))

    def first_center(self, losses, warm, n):
        """The centre of the first smoothing and the largest rank weight per unit of mass.

        The centre is the mean weight (the weights of the mean risk) or, from a
        warm start, the rank weights of ``losses()`` (the losses at the start),
        tied losses sharing their weights in proportion to their masses.
        """
        losses = losses()
        order = np.argsort(losses, kind="stable")
        sigma = self.weights(order)
        if warm:
            first = np.flatnonzero(np.r_[True, np.diff(losses[order]) != 0.0])
            mass = self.m[order]
            share = np.add.reduceat(sigma, first) / np.add.reduceat(mass, first)
            center = np.empty(order.size)
            center[order] = mass * np.repeat(share, np.diff(np.r_[first, order.size]))
        else:
            center = self.m * (sigma.sum() / order.size)
        return center, float(np.max(sigma / self.m[order]))

    def block_terms(self, q, pooled, slopes):
        """The pooled blocks' term of the Newton model: ``(h, M, finish)``, or None without pooled blocks.

        ``slopes(idx)`` gives ``g_i = l'_i s_i`` of the rows ``idx``; ``h``
        the members' weights ``m_i g_i^2``, ``M`` the sparse matrix of the
        block sums ``S_B = sum_B m_i g_i [x_i, 1]`` (``M [X, 1]``), and
        ``finish(M [X, 1]) = sum_B S_B S_B^T / m(B)``.
        """
        members = self.block_members(pooled, slopes)
        if members is None:
            return None
        idx, values, indptr = members
        mass = self.m[idx]
        h = np.zeros(pooled.order.size)
        h[idx] = values * values / mass  # m_i g_i^2
        # the members come block by block: the rows of the indicator, without a conversion from pairs
        indicator = sp.csr_matrix((values, idx, indptr), shape=(indptr.size - 1, pooled.order.size))
        block_mass = np.add.reduceat(mass, indptr[:-1])
        return h, indicator, lambda sums: (sums.T / block_mass) @ sums

    def block_members(self, pooled, slopes):
        """The pooled blocks' members: ``(idx, m_i g_i, indptr)``, or None without pooled blocks.

        ``idx`` lists the members block by block, the block ``b`` at
        ``idx[indptr[b]:indptr[b + 1]]``; ``slopes(idx)`` gives
        ``g_i = l'_i s_i`` (:meth:`block_terms`).
        """
        order, block_start, size = pooled
        if size.size == 0:
            return None
        first = np.cumsum(size) - size
        idx = order[np.arange(first[-1] + size[-1]) - np.repeat(first - block_start, size)]
        return idx, self.m[idx] * slopes(idx), np.concatenate(([0], np.cumsum(size)))

    def risk_value(self, losses, pooled=None):
        """``Omega(l)``, the (weighted) risk of the NumPy ``losses`` (sorted from ``pooled.order``)."""
        if pooled is None:
            order = np.argsort(losses, kind="stable")
            return float(losses[order] @ self.weights(order))
        order = pooled.order.copy()
        return float(resort_scores(losses, order) @ self.weights(order))


class ThresholdRankStep(WorkerRankStep):
    """The rank step of a one-threshold risk on Dask vectors: the capped simplex by its threshold.

    No sort, no PAVA, no order: the weights are ``clip(keys / mu - tau,
    0, cap)`` with ``tau`` found by counting reductions over the chunks
    (:func:`capped_threshold_dask`).  The free set ``{0 < q < cap}`` is the
    one pooled block.

    Parameters
    ----------
    risk : skrank.risks.BaseRisk
        With ``threshold_rank_step`` and ``one_threshold``.
    n : int
        The number of samples (unit masses: no sample weights).
    """

    #: The threshold searches gather at most this many keys in their last round.
    bracket = 100_000

    def __init__(self, risk, n):
        self.cap, self.total = risk.threshold_level(n) / n, 1.0
        #: Submissions (``compute``/``persist``) of the threshold searches and the projections.
        self.rounds = 0

    def top(self, n):
        """The cap: the largest weight (of unit masses)."""
        return self.cap

    def block_terms(self, q, pooled, slopes):
        """``DaskSortedRankStep.block_terms`` of the one block, the free set ``{0 < q < cap}`` of unit
        masses: ``finish(S) = S S^T / |free set|`` of its sum ``S = [X, 1]^T v``."""
        size = int(pooled.size.sum())
        if size < 2:
            return None
        member = ((q > 0.0) & (q < self.cap)).astype(np.float64)
        coef = slopes(None)
        return member * coef * coef, (member * coef, None), lambda S: np.outer(S, S) / float(size)

    def threshold(self, keys, mu):
        """The threshold ``tau`` of ``proj_P(keys / mu)``."""
        tau = capped_threshold_dask(keys, mu, self.cap, self.total, bracket=self.bracket)
        self.rounds += tau.rounds
        return tau

    def project(self, keys, mu):
        """``q = proj_P(keys / mu)`` as a persisted Dask array; the pooled record counts the free set."""
        from ..backends.dask_design import persist_and_fetch

        q, _, stats = capped_projection(keys, mu, self.cap, self.threshold(keys, mu))
        # q kept and the free set counted in one submission
        (q,), (n_free,) = persist_and_fetch([q], [stats["count"]])
        self.rounds += 1
        n_free = int(n_free)
        return q, Pooled(None, None, np.array([n_free] if n_free > 1 else [], dtype=np.int64))

    def risk_value(self, losses, pooled=None):
        """``Omega(l) = min_t t total + cap sum (l - t)_+`` at the threshold of a tiny smoothing.

        ``tau`` is within ``mu cap`` of the minimiser, so the value is above
        ``Omega`` by at most ``cap n mu cap``, ``_VALUE_SMOOTHING`` times the
        losses' spread.
        """
        import dask
        import dask.array as da

        low, high = dask.compute(losses.min(), losses.max())
        spread = max(float(high) - float(low), 1e-300 + abs(float(high)) * 1e-300)
        t = self.threshold(losses, _VALUE_SMOOTHING * spread / self.cap).value
        if not np.isfinite(t):  # every weight at the cap: the mean
            return float(losses.sum()) * self.cap
        return t * self.total + self.cap * float(da.maximum(losses - t, 0.0).sum())


def rank_step_for(design, risk, mass, m):
    """The rank step of ``risk`` for keys where the fit keeps its ``n``-vectors.

    Parameters
    ----------
    design : skrank.backends.design.Design
        Gives ``n``, and whether the keys are Dask arrays kept on the
        workers (``mass`` and ``m`` too: ``design.keeps_vectors_apart``);
        else they come to the host.
    risk : skrank.risks.BaseRisk
    mass, m : ndarray or dask.array.Array of shape (n,), or None
        The sample weights (None: unit masses) and the masses of the metric.

    Returns
    -------
    HostRankStep, ThresholdRankStep or skrank.backends.dask_rank.DaskSortedRankStep
        On the workers: the threshold form where it is exact (a risk with
        ``threshold_rank_step`` and unit masses: no sort), else the sample
        sort and PAVA.
    """
    if not design.keeps_vectors_apart:
        return HostRankStep(risk, design.n, mass, m)
    if risk.threshold_rank_step and mass is None:
        return ThresholdRankStep(risk, design.n)
    from ..backends.dask_rank import DaskSortedRankStep  # Dask's sort loads with the first fit on Dask keys

    return DaskSortedRankStep(risk, masses=None if mass is None else m, sample_weight=mass)
