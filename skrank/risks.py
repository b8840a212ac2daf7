"""Rank weights: the risks that turn a vector of losses into one number.

A risk assigns the weight ``sigma_i`` to the i-th SMALLEST loss (ascending
order statistics ``L_(1) <= ... <= L_(n)``) and its value is
``sum_i sigma_i L_(i)``.  Risks are small parameter objects: they support
``get_params``/``set_params``, so an estimator's ``risk__q`` can be tuned by
``GridSearchCV``.

Spectral risks (nondecreasing weights, a convex objective for convex
losses) are given by the integral ``Phi(t) = int_0^t sigma(s) ds`` of their
spectrum: ``sigma_i = Phi(i/n) - Phi((i-1)/n)`` (Ge and Jiang 2024,
Table 1; Xiao et al. 2023, section 2.1).

Sample weights: a weighted risk is the risk of the weighted empirical
distribution, each loss weighted by the spectrum integrated over its cell
of cumulative mass; an integer count (``TopK``'s ``k``, ``RankedRange``'s
``m`` and ``k``) is a number of units of weight and a fraction a share of
the samples of positive weight.  The user guide gives the formulas,
:doc:`/sample_weights`.
"""

import numbers

import numpy as np
from sklearn.base import BaseEstimator


class BaseRisk(BaseEstimator):
    """Common interface of all risks.

    Subclasses implement ``_weights(n, sample_weight)``, :meth:`weights`
    for a checked ``n`` (or override :meth:`weights` itself, as
    :class:`HumanAligned` does, whose weights also take the loss values).
    ``is_convex`` is True when the weights are nondecreasing, i.e. when the
    risk is a spectral risk and ``sum_i sigma_i l_(i)(w)`` is convex for
    convex losses.
    """

    is_convex = True
    #: True when the weights depend on the loss values (human-aligned risk).
    depends_on_values = False
    #: True when the risk is a difference of two top-k sums (ranked range),
    #: the form the DCA and AGD solvers and the ADMM's trimming steps use.
    difference_of_top_sums = False
    #: True when the weights, largest first, are one level ``c`` on the top
    #: losses, at most ``c`` on the next and zero below (ERM, superquantile,
    #: top-k), so that ``sum_i sigma_i l_(i) = min_tau (sum sigma) tau + c
    #: sum_i (l_i - tau)_+`` (Rockafellar and Uryasev 2000), the form the
    #: interior-point solver uses.  These risks define
    #: ``threshold_level(total, sample_weight)``, the level ``c`` per unit of weight.
    one_threshold = False
    #: True when the weights are the samples' shares of the weight in any order (ERM): a mean loss.
    is_mean = False
    #: True when, without sample weights, the weights' permutations for any ``n`` span the capped simplex
    #: ``{0 <= q_i <= threshold_level(n) / n, sum q = 1}`` (superquantile, top-k): the chunked Newton path
    #: projects onto it by a threshold search, without a sort.
    threshold_rank_step = False
    #: True when the weighted risk is unchanged where identical losses become one of their summed weight:
    #: the weights integrate over the cumulative weight alone, with no count of the samples (spectral
    #: risks); False where a parameter counts samples (a fractional ``k`` takes ``floor(k n)`` of them).
    merges_repeats = False

    def weights(self, n, sample_weight=None):
        """Return the weights ``sigma_1..sigma_n`` of the ascending order statistics.

        Parameters
        ----------
        n : int
            Number of losses.
        sample_weight : array-like of shape (n,), optional
            Weights of the samples, in the ascending order of their losses
            (user guide, :doc:`/sample_weights`); None for equal weights.

        Returns
        -------
        ndarray of shape (n,)
            ``sigma_i`` is the weight of the i-th smallest loss: nonnegative
            and summing to one (a spectral risk's are nondecreasing per unit
            of weight); the class docstring gives them.

        Raises
        ------
        ValueError
            When ``n`` is not a positive integer, a parameter of the risk is
            out of its range, or its counts do not fit the ``n`` losses or,
            with weights, the total weight (the message names
            ``sample_weight`` and its total).
        """
        return self._weights(_check_n(n), sample_weight)

    def _weights(self, n, sample_weight):  # pragma: no cover - abstract
        """:meth:`weights` for a checked ``n``."""
        raise NotImplementedError

    def weights_slice(self, n, start, stop):
        """Return ``weights(n)[start:stop]``, without the other weights where the risk can.

        A risk whose weights without sample weights are differences of its
        spectrum's integral at ``i / n`` makes only the ``stop - start``
        asked for, with the same rounding as :meth:`weights`; a rank step
        split across workers asks each for its slice of the ranks.

        Parameters
        ----------
        n : int
            Number of losses.
        start, stop : int
            The ranks asked for, ``0 <= start <= stop <= n`` (0 the smallest loss).

        Returns
        -------
        ndarray of shape (stop - start,)
            The weights of the losses ranked ``start`` to ``stop - 1``.
        """
        n = _check_n(n)
        if not (isinstance(start, numbers.Integral) and isinstance(stop, numbers.Integral)
                and 0 <= start <= stop <= n):
            raise ValueError(f"start and stop must be integers with 0 <= start <= stop <= n = {n}, "
                             f"got start={start!r}, stop={stop!r}.")
        return self._weights_slice(n, int(start), int(stop))

    def _weights_slice(self, n, start, stop):
        """:meth:`weights_slice` for checked arguments: here by making every weight."""
        return self.weights(n)[start:stop]

    def cell_weights(self, share, below, above, total, n_samples):
        """The weights of consecutive losses from their cells of mass (with sample weights).

        The losses ranked ``a + 1`` to ``a + k`` (ascending) hold the cells
        ``[C_(a+t-1), C_(a+t)]`` of cumulative mass (:doc:`/sample_weights`).  This
        gives their weights from the cells alone, as :meth:`weights` gives
        them from all the sample weights: a rank step split across workers
        asks each for its run of ranks.

        Parameters
        ----------
        share : ndarray of shape (k,)
            Each loss's share of the total weight, ``v_i / V``.
        below : ndarray of shape (k + 1,)
            ``C_a, ..., C_(a+k)``: the share of the weight of the losses
            ranked below each cell's end (0 first and 1 last for the whole
            range), summed from the smallest loss.
        above : ndarray of shape (k + 1,)
            ``1 - C_a, ..., 1 - C_(a+k)``, summed from the largest loss (1
            first and 0 last for the whole range), accurate where ``C`` is
            close to one.
        total : float
            ``V``, the total sample weight (the unit of an integer count).
        n_samples : int
            The number of samples of positive weight (those a fractional
            count is taken of).

        Returns
        -------
        ndarray of shape (k,)
            The weights of the ``k`` losses.

        Raises
        ------
        NotImplementedError
            When the risk's weights are not a function of the cells (they
            depend on the loss values).
        """
        return self._run_weights(share, below, above, total, n_samples)

    def _run_weights(self, share, below, above, total, n_samples):
        """:meth:`cell_weights`: here none, the weights not being a function of the cells."""
        raise NotImplementedError(f"{type(self).__name__} gives no weights from cells of mass alone.")

    def check(self, n, sample_weight=None):
        """Raise the ValueError that :meth:`weights` would raise, making the weights only where needed.

        Parameters
        ----------
        n : int
            Number of losses.
        sample_weight : array-like of shape (n,), optional
            Weights of the samples; None for equal weights.
        """
        self._check(_check_n(n), sample_weight)

    def _check(self, n, sample_weight):
        """:meth:`check` for a checked ``n``: here by making the weights."""
        self.weights(n, sample_weight=sample_weight)

    def value(self, losses, sample_weight=None):
        """Risk of the loss vector: ``sum_i sigma_i L_(i)``.

        Parameters
        ----------
        losses : array-like of shape (n,)
            Individual losses, in any order.
        sample_weight : array-like of shape (n,), optional
            Weights of the samples, in the order of ``losses``.

        Returns
        -------
        float
            The weighted sum of the sorted losses.
        """
        losses = _as_losses(losses)
        order = np.argsort(losses, kind="stable")
        sorted_losses = losses[order]
        if sample_weight is not None:
            sample_weight = _check_sample_weight(sample_weight, losses.shape[0])[order]
        return float(self._weights_for(sorted_losses, sample_weight) @ sorted_losses)

    def _weights_for(self, sorted_losses, sample_weight=None):
        return self.weights(sorted_losses.shape[0], sample_weight)

    def __eq__(self, other):
        return type(self) is type(other) and self.get_params() == other.get_params()

    def __hash__(self):
        return hash((type(self).__name__, tuple(sorted(self.get_params().items()))))


def _as_losses(losses):
    losses = np.asarray(losses, dtype=np.float64)
    if losses.ndim != 1:
        raise ValueError(f"losses must be a 1-D array, got shape {losses.shape}.")
    if losses.shape[0] == 0:
        raise ValueError("losses must not be empty.")
    if not np.all(np.isfinite(losses)):
        raise ValueError("losses contain NaN or infinity.")
    return losses


def _check_sample_weight(sample_weight, n):
    """The weights as float64 of shape (n,): finite, nonnegative, not all zero."""
    v = np.asarray(sample_weight, dtype=np.float64)
    if v.shape != (n,):
        raise ValueError(f"sample_weight must have shape ({n},), got {v.shape}.")
    if not np.all(np.isfinite(v)):
        raise ValueError("sample_weight contains NaN or infinity.")
    if np.any(v < 0.0):
        raise ValueError("sample_weight must be nonnegative.")
    total = float(v.sum())
    if not total > 0.0:
        raise ValueError("sample_weight sums to zero: at least one sample needs a positive weight.")
    return v


def _cells(n, sample_weight):
    """Ends ``0 = C_0 <= ... <= C_n = 1`` of the losses' cells of mass, and the total mass."""
    if sample_weight is None:
        return np.arange(n + 1, dtype=np.float64) / n, float(n)
    v = _check_sample_weight(sample_weight, n)
    total = float(v.sum())
    grid = np.empty(n + 1)
    grid[0] = 0.0
    np.cumsum(v / total, out=grid[1:])
    grid[-1] = 1.0
    return np.minimum(grid, 1.0), total


def _check_n(n):
    if not isinstance(n, numbers.Integral) or n < 1:
        raise ValueError(f"n must be a positive integer, got {n!r}.")
    return int(n)


def check_real(name, value, *, low=None, high=None, low_open=False, high_open=False):
    """``value`` as a float, or a ValueError naming ``name`` unless it is a finite real number in range."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not np.isfinite(value):
        raise ValueError(f"{name} must be a finite real number, got {value!r}.")
    bad_low = low is not None and (value <= low if low_open else value < low)
    bad_high = high is not None and (value >= high if high_open else value > high)
    if bad_low or bad_high:
        lo = "(" if low_open else "["
        hi = ")" if high_open else "]"
        low_s = "-inf" if low is None else low
        high_s = "inf" if high is None else high
        raise ValueError(f"{name} must lie in {lo}{low_s}, {high_s}{hi}, got {value!r}.")
    return float(value)


class _SpectralRisk(BaseRisk):
    """A spectral risk, given by the integral ``Phi`` of its spectrum (:doc:`/sample_weights`)."""

    merges_repeats = True

    def _cumulative(self, t):  # pragma: no cover - abstract
        raise NotImplementedError

    def _weights(self, n, sample_weight):
        """``sigma_i = Phi(C_i) - Phi(C_(i-1))``, ``C_i = i/n`` without weights."""
        self._validate()
        if sample_weight is None:
            return self._equal_weights(n)
        return self._cell_weights(n, sample_weight)

    def _check(self, n, sample_weight):
        """Without sample weights, the parameters only: the weights of ``n`` equal cells are valid then."""
        if sample_weight is not None:
            return super()._check(n, sample_weight)
        self._validate()

    def _equal_weights(self, n, start=0, stop=None):
        """Weights of ranks ``start`` to ``stop - 1`` without sample weights (cells ``[(i-1)/n, i/n]``)."""
        stop = n if stop is None else stop
        grid = np.arange(start, stop + 1, dtype=np.float64) / n
        return np.maximum(np.diff(self._cumulative(grid)), 0.0)

    def _weights_slice(self, n, start, stop):
        self._validate()
        return self._equal_weights(n, start, stop)

    def _cell_weights(self, n, sample_weight):
        """``Phi`` integrated over each loss's cell of mass."""
        grid, _ = _cells(n, sample_weight)
        return np.maximum(np.diff(self._cumulative(grid)), 0.0)

    def _run_weights(self, share, below, above, total, n_samples):
        """``Phi(C_i) - Phi(C_(i-1))`` over the given cells."""
        self._validate()
        grid = np.minimum(np.asarray(below, dtype=np.float64), 1.0)
        return np.maximum(np.diff(self._cumulative(grid)), 0.0)


class _TailMean(_SpectralRisk):
    """A spectral risk that is the mean of the losses above a quantile (ERM: the quantile 0)."""

    one_threshold = True

    def _quantile(self):  # pragma: no cover - abstract
        raise NotImplementedError

    def threshold_level(self, total, sample_weight=None):
        """The weight per unit of sample weight above the quantile ``q``: ``1 / (1 - q)``.

        See ``BaseRisk.one_threshold``; ``q = 0`` for ERM.

        Parameters
        ----------
        total : float
            Total sample weight (``n`` without weights).
        sample_weight : array-like of shape (n,), optional
            The weights (unused).

        Returns
        -------
        float
            ``1 / (1 - q)``: a sample of weight ``v`` above the quantile has
            rank weight ``v / ((1 - q) total)``.
        """
        self._validate()
        return 1.0 / (1.0 - self._quantile())


class ERM(_TailMean):
    """Empirical risk: the mean loss, ``sigma_i = 1/n`` (with sample weights ``v_i / sum v``)."""

    is_mean = True

    def _validate(self):
        pass

    def _quantile(self):
        return 0.0

    def _cumulative(self, t):
        return t

    def _equal_weights(self, n, start=0, stop=None):
        return np.full((n if stop is None else stop) - start, 1.0 / n)

    def _cell_weights(self, n, sample_weight):
        v = _check_sample_weight(sample_weight, n)
        return v / v.sum()

    def _run_weights(self, share, below, above, total, n_samples):
        """The shares of the weight themselves."""
        return np.array(share, dtype=np.float64)


class Superquantile(_TailMean):
    """Superquantile (conditional value at risk) at level ``q``.

    The mean of the losses above their ``q``-quantile:
    ``sigma_i = |[(i-1)/n, i/n] ∩ [q, 1]| / (1 - q)``, so the cell that
    contains ``q`` gets a fractional weight.

    Parameters
    ----------
    q : float, default=0.8
        Level in ``[0, 1)``; ``q = 0`` is the mean, ``q -> 1`` the maximum.
    """

    threshold_rank_step = True

    def __init__(self, q=0.8):
        self.q = q

    def _validate(self):
        check_real("q", self.q, low=0.0, high=1.0, high_open=True)

    def _cumulative(self, t):
        return np.maximum(t - self.q, 0.0) / (1.0 - self.q)

    def _quantile(self):
        return self.q


#: Alias: the conditional value at risk is the superquantile.
CVaR = Superquantile


class Extremile(_SpectralRisk):
    """Extremile of order ``r``: ``sigma_i = (i/n)^r - ((i-1)/n)^r``.

    Parameters
    ----------
    r : float, default=2.0
        Order, ``r >= 1``; ``r = 1`` is the mean.
    """

    def __init__(self, r=2.0):
        self.r = r

    def _validate(self):
        check_real("r", self.r, low=1.0)

    def _cumulative(self, t):
        return t**self.r


class ExponentialSpectral(_SpectralRisk):
    """Exponential spectral risk measure with parameter ``rho``.

    ``sigma_i = e^-rho (e^(rho i/n) - e^(rho (i-1)/n)) / (1 - e^-rho)``,
    evaluated as ``exp(rho (i/n - 1)) * (-expm1(-rho/n)) / (-expm1(-rho))``
    so that large ``rho`` does not overflow.

    Parameters
    ----------
    rho : float, default=1.0
        Risk aversion, ``rho > 0``.
    """

    def __init__(self, rho=1.0):
        self.rho = rho

    def _validate(self):
        check_real("rho", self.rho, low=0.0, low_open=True)

    def _cumulative(self, t):
        # Phi(t) = (e^(rho t) - 1) / (e^rho - 1), written without overflow
        rho = float(self.rho)
        return np.exp(rho * (t - 1.0)) * (-np.expm1(-rho * t)) / (-np.expm1(-rho))

    def _equal_weights(self, n, start=0, stop=None):
        rho = float(self.rho)
        i = np.arange(start + 1, (n if stop is None else stop) + 1, dtype=np.float64)
        return np.exp(rho * (i / n - 1.0)) * (-np.expm1(-rho / n)) / (-np.expm1(-rho))


def _count(name, value, n):
    """An integer count, or a fraction of ``n`` when ``value`` is a float in (0, 1)."""
    if isinstance(value, bool):
        raise ValueError(f"{name} must be an integer count or a fraction in (0, 1), got {value!r}.")
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real) and 0.0 < value < 1.0:
        return int(np.floor(value * n + 1e-9))
    raise ValueError(f"{name} must be an integer count or a fraction in (0, 1), got {value!r}.")


def _is_fraction(value):
    return not isinstance(value, numbers.Integral)


def _share(name, value, total, n_samples):
    """The share of the total weight ``total`` that the count ``value`` stands for.

    An integer count is that many units of weight (``value / total``); a
    fraction takes ``floor(value n)`` of the ``n_samples`` samples of
    positive weight, the same fraction of the total.
    """
    count = _count(name, value, n_samples)
    if _is_fraction(value):
        return count / n_samples
    return count / total


def _tail_mass(sample_weight, total):
    """``1 - C_i`` for ``i = 0..n``: the share of the weight above each cell, summed from the top.

    Summed from the largest loss down, so that a top share far below the
    resolution of ``1 - C_i`` near one (integer counts of huge weights) is
    still exact.
    """
    v = np.asarray(sample_weight, dtype=np.float64) / total
    tail = np.zeros(v.shape[0] + 1)
    tail[:-1] = np.cumsum(v[::-1])[::-1]
    tail[0] = 1.0
    return np.minimum(tail, 1.0)


def _n_positive(sample_weight):
    """The number of samples of positive weight, of which a fractional count is taken.

    A weight below ``2^-1074`` times the largest (the smallest double) is
    no weight: its share of the total is zero, and the weighted solvers
    drop its sample.
    """
    v = np.asarray(sample_weight, dtype=np.float64)
    _, exponent = np.frexp(v.max())
    return int(np.count_nonzero(np.ldexp(v, -exponent) > 0.0))


#: Where the number of losses ranked together comes from, for the errors of the counts.
_WHAT_N_IS = ("n is the number of samples ranked together: those passed to fit, or those of one "
              "partial_fit batch or of a stochastic solver's mini-batch (batch_size)")


def _smallest_n(valid, limit=1_000_000):
    """The smallest ``n`` in ``1..limit`` for which ``valid(n)`` (vectorised over an array), or None."""
    n = np.arange(1, limit + 1, dtype=np.float64)
    ok = np.flatnonzero(valid(n))
    return int(n[ok[0]]) if ok.size else None


def _counts_at(value, n):
    """:func:`_count` over an array of ``n`` (a validated count)."""
    if _is_fraction(value):
        return np.floor(value * n + 1e-9)
    return np.full(n.shape, float(value))


class _RankedRangeMean(BaseRisk):
    """The mean of the losses ranked ``m+1`` to ``k`` from the largest (``TopK``: ``m = 0``).

    Subclasses give the ranks ``(m, k)`` of ``n`` losses (``_ranks``) and,
    with sample weights, the shares ``(s_m, s_k)`` of the total weight that
    they stand for (``_range_shares``, user guide).
    """

    def _weights(self, n, sample_weight):
        """``1/(k-m)`` on ascending positions ``n-k+1 .. n-m``; with weights, on the mass of the range.

        With weights the range is the mass between the shares ``1 - s_k``
        and ``1 - s_m`` of the total weight.
        """
        if sample_weight is None:
            low, high = self._ranks(n)
            w = np.zeros(n)
            w[n - high : n - low] = 1.0 / (high - low)
            return w
        _, total = _cells(n, sample_weight)
        return self._range_weights(_tail_mass(sample_weight, total), total, _n_positive(sample_weight))

    def _range_weights(self, above, total, n_samples):
        """The weights of the cells whose ends leave the shares ``above`` of the weight above them."""
        low, high = self._range_shares(total, n_samples)
        width = high - low
        # the mass of each cell between the shares 1 - high and 1 - low, per unit of the range
        phi = np.clip(high - above, 0.0, width) / width
        return np.maximum(np.diff(phi), 0.0)

    def _weights_slice(self, n, start, stop):
        low, high = self._ranks(n)
        w = np.zeros(stop - start)
        w[max(n - high, start) - start : max(min(n - low, stop), start) - start] = 1.0 / (high - low)
        return w

    def _run_weights(self, share, below, above, total, n_samples):
        """The mass of each cell inside the ranked range, per unit of it."""
        return self._range_weights(np.minimum(np.asarray(above, dtype=np.float64), 1.0), total, n_samples)


class TopK(_RankedRangeMean):
    """Average of the ``k`` largest losses.

    Parameters
    ----------
    k : int or float, default=0.2
        An integer count ``1 <= k <= n``, or a fraction of ``n`` in (0, 1)
        (then ``k = floor(k n)``, at least 1); with ``sample_weight``, see
        :doc:`/sample_weights`.
    """

    one_threshold = True
    # the permutahedron of k equal weights 1/k is the capped simplex {0 <= q <= 1/k, sum q = 1}
    threshold_rank_step = True

    def __init__(self, k=0.2):
        self.k = k

    def _ranks(self, n):
        return 0, self._k(n)

    def _range_shares(self, total, n_samples):
        return 0.0, self._top_share(total, n_samples)

    def _k(self, n):
        """``k`` as a number of the ``n`` losses (no weights)."""
        k = _count("k", self.k, n)
        if _is_fraction(self.k):
            k = max(k, 1)
        if not 1 <= k <= n:
            raise ValueError(f"TopK needs 1 <= k <= n = {n:g}, got k={k}; {_WHAT_N_IS}.")
        return k

    def _top_share(self, total, n_samples):
        """The share of the total weight ``total`` held by the top ``k`` (with weights)."""
        k = _count("k", self.k, n_samples)
        if _is_fraction(self.k):
            return max(k, 1) / n_samples
        if k < 1:
            raise ValueError(f"TopK needs 1 <= k, got k={k}.")
        if k > total:
            raise ValueError(
                f"TopK(k={k}) counts k in units of sample weight (integer weights are repeated rows), "
                f"but the total sample_weight is {total:.6g} < k = {k}: there are no top {k} units. Give "
                f"k as a fraction in (0, 1) (the top floor(k n) of the n samples, whatever the scale of "
                f"the weights), or rescale sample_weight so that it sums to at least {k}."
            )
        return k / total

    def threshold_level(self, total, sample_weight=None):
        """The weight per unit of sample weight on the top losses (see ``BaseRisk.one_threshold``).

        Parameters
        ----------
        total : float
            Total sample weight (``n`` without weights), the unit an
            integer ``k`` counts in.
        sample_weight : array-like of shape (n,), optional
            The weights, whose samples of positive weight a fraction ``k``
            is taken of; None without weights (``total`` is then ``n``).

        Returns
        -------
        float
            ``1 / s``, ``s`` the share of the total weight held by the top
            ``k`` (``total / k`` for an integer ``k``): a sample of weight
            ``v`` among them has rank weight ``v / (s total)``.
        """
        if sample_weight is None:
            return total / self._k(total)
        return 1.0 / self._top_share(total, _n_positive(sample_weight))


class RankedRange(_RankedRangeMean):
    """Average of a ranked range of losses (AoRR, the SoRR loss divided by its size).

    The mean of the (m+1)-th to the k-th LARGEST losses: outliers above
    rank ``m`` are ignored and easy samples below rank ``k`` too.  Not
    convex.

    Parameters
    ----------
    m : int or float, default=0.05
        Number of top losses left out: an integer count or a fraction of
        ``n`` in (0, 1).
    k : int or float, default=0.5
        Rank of the last loss included, ``0 <= m < k <= n``: an integer
        count or a fraction of ``n`` in (0, 1).

    Notes
    -----
    With ``sample_weight``, the counts are read as :doc:`/sample_weights`
    says.  Fractions need enough samples: ``RankedRange(0.1, 0.6)`` needs at
    least two (``floor(0.6 n) > floor(0.1 n)``), in a fit as in each
    ``partial_fit`` batch and mini-batch.
    """

    is_convex = False
    difference_of_top_sums = True

    def __init__(self, m=0.05, k=0.5):
        self.m = m
        self.k = k

    def _smallest_n(self):
        """The fewest losses these counts fit (None when no number of losses does)."""
        def valid(n):
            m, k = _counts_at(self.m, n), _counts_at(self.k, n)
            return (0 <= m) & (m < k) & (k <= n)

        return _smallest_n(valid)

    def counts(self, n):
        """Return the integer ranks ``(m, k)`` for ``n`` losses, validated.

        Parameters
        ----------
        n : int
            Number of losses; fractional ``m`` and ``k`` are taken of it.

        Returns
        -------
        m : int
            Number of largest losses left out.
        k : int
            Rank (from the largest) of the last loss included.
        """
        n = _check_n(n)
        m = _count("m", self.m, n)
        k = _count("k", self.k, n)
        if not 0 <= m < k <= n:
            smallest = self._smallest_n()
            if smallest is not None and smallest > n:
                advice = (f"; {_WHAT_N_IS}: {n} sample(s) are too few for these counts. Pass at least "
                          f"{smallest} samples (a larger batch), or smaller counts")
            else:
                advice = "; choose 0 <= m < k (counts or fractions of n in (0, 1))"
            raise ValueError(
                f"RankedRange needs 0 <= m < k <= n; got m={m}, k={k}, n={n} "
                f"(from m={self.m!r}, k={self.k!r}){advice}."
            )
        return m, k

    def _range_shares(self, total, n_samples):
        """The shares ``(m, k)`` of the total weight of the ranked range's ends (with weights)."""
        low = _share("m", self.m, total, n_samples)
        high = _share("k", self.k, total, n_samples)
        if 0.0 <= low < high <= 1.0:
            return low, high
        fractions = _is_fraction(self.m) and _is_fraction(self.k)
        head = (f"RankedRange(m={self.m!r}, k={self.k!r}) needs 0 <= m < k <= V in units of sample "
                f"weight, V = {total:.6g} the total sample_weight (an integer count is that many units "
                f"of weight, as integer weights are repeated rows; a fraction f takes floor(f n) of the "
                f"n = {n_samples} samples of positive weight, the same fraction of V); it gets "
                f"m = {low * total:.6g} and k = {high * total:.6g} units")
        smallest = self._smallest_n()
        if fractions and smallest is not None and smallest > n_samples:
            advice = (f"; {_WHAT_N_IS}: {n_samples} sample(s) are too few for these fractions. Pass at "
                      f"least {smallest} samples of positive weight (a larger batch)")
        elif not fractions and smallest is not None:
            advice = ("; give m and k as fractions in (0, 1), which depend only on the ratios of the "
                      "weights, or rescale sample_weight so that it sums to at least k")
        else:
            advice = "; choose 0 <= m < k (counts or fractions in (0, 1))"
        raise ValueError(head + advice + ".")

    _ranks = counts


def _tk_weighting(p, exponent):
    """Tversky-Kahneman probability weighting ``p^g / (p^g + (1-p)^g)^(1/g)``."""
    p = np.asarray(p, dtype=np.float64)
    num = p**exponent
    return num / (num + (1.0 - p) ** exponent) ** (1.0 / exponent)


class HumanAligned(BaseRisk):
    """Human-aligned risk: cumulative prospect theory (CPT) weights, Xiao et al. 2023, eqs. (4)-(5).

    With losses sorted ascending, a loss at or below the ``reference`` gets
    ``sigma^a_i = w_delta(i/n) - w_delta((i-1)/n)`` and a loss above it
    ``sigma^b_i = w_gamma((n-i+1)/n) - w_gamma((n-i)/n)``, where
    ``w_g(p) = p^g / (p^g + (1-p)^g)^(1/g)``.  The weights therefore depend
    on the loss VALUES (through how many lie below the reference), not only
    on ``n``: :meth:`weights` takes them.  Not convex.

    Parameters
    ----------
    gamma : float, default=0.61
        Exponent of the weighting of losses above the reference, in (0, 1].
    delta : float, default=0.69
        Exponent of the weighting of losses at or below the reference, in (0, 1].
    reference : float, default=log(1 + e^-5)
        Reference point ``B`` in loss space (the default is the logistic
        loss at negative margin -5, as in the paper's experiments).
    """

    is_convex = False
    depends_on_values = True

    def __init__(self, gamma=0.61, delta=0.69, reference=float(np.log1p(np.exp(-5.0)))):
        self.gamma = gamma
        self.delta = delta
        self.reference = reference

    def _validate(self):
        check_real("gamma", self.gamma, low=0.0, high=1.0, low_open=True)
        check_real("delta", self.delta, low=0.0, high=1.0, low_open=True)
        check_real("reference", self.reference)

    def weight_pieces(self, n, sample_weight=None):
        """Return the two weight sequences ``(sigma_a, sigma_b)`` for ``n`` losses.

        ``sigma_a[i]`` applies when the i-th smallest loss is at or below
        the reference, ``sigma_b[i]`` when it is above.

        Parameters
        ----------
        n : int
            Number of losses.
        sample_weight : array-like of shape (n,), optional
            Weights of the samples, in the ascending order of their losses:
            ``i/n`` above becomes the cumulative mass ``C_i``.

        Returns
        -------
        sigma_a : ndarray of shape (n,)
            Weights of the losses at or below the reference.
        sigma_b : ndarray of shape (n,)
            Weights of the losses above the reference.
        """
        n = _check_n(n)
        self._validate()
        grid, _ = _cells(n, sample_weight)
        sigma_a = np.diff(_tk_weighting(grid, self.delta))
        # sigma_b_i = w_gamma(1 - C_(i-1)) - w_gamma(1 - C_i), i = 1..n
        wg = _tk_weighting(1.0 - grid, self.gamma)
        sigma_b = wg[:-1] - wg[1:]
        return sigma_a, sigma_b

    def _check(self, n, sample_weight):
        """:meth:`BaseRisk.check` by :meth:`weight_pieces` (the weights need the losses)."""
        self.weight_pieces(n, sample_weight)

    def weights(self, n, losses=None, sample_weight=None):
        """Effective weights for the given loss values.

        Parameters
        ----------
        n : int
            Number of losses.
        losses : array-like of shape (n,)
            The loss values (any order): the j losses at or below the
            reference take ``sigma_a[:j]``, the others ``sigma_b[j:]``.
            Required.
        sample_weight : array-like of shape (n,), optional
            Weights of the samples, in the ascending order of their losses.

        Returns
        -------
        ndarray of shape (n,)
            Weights of the ascending order statistics of ``losses``.
        """
        if losses is None:
            raise ValueError(
                "HumanAligned weights depend on the loss values: call weights(n, losses)."
            )
        losses = _as_losses(losses)
        if losses.shape[0] != n:
            raise ValueError(f"losses has length {losses.shape[0]}, expected n = {n}.")
        sigma_a, sigma_b = self.weight_pieces(n, sample_weight)
        j = int(np.count_nonzero(losses <= self.reference))
        return np.concatenate([sigma_a[:j], sigma_b[j:]])

    def _weights_for(self, sorted_losses, sample_weight=None):
        return self.weights(sorted_losses.shape[0], sorted_losses, sample_weight)


_RISKS = {
    "erm": ERM,
    "mean": ERM,
    "superquantile": Superquantile,
    "cvar": Superquantile,
    "extremile": Extremile,
    "exponential": ExponentialSpectral,
    "topk": TopK,
    "ranked_range": RankedRange,
    "aorr": RankedRange,
    "human_aligned": HumanAligned,
    "cpt": HumanAligned,
}


def check_risk(risk):
    """Turn ``risk`` (a name or a risk object) into a risk object.

    Parameters
    ----------
    risk : str or BaseRisk
        A risk instance, or one of ``"erm"``, ``"superquantile"`` (``"cvar"``),
        ``"extremile"``, ``"exponential"``, ``"topk"``, ``"ranked_range"``
        (``"aorr"``), ``"human_aligned"`` (``"cpt"``): that class with its
        defaults.

    Returns
    -------
    BaseRisk
        ``risk`` itself when it is a risk object (its parameters are checked
        when its weights are computed), else a new instance of the named
        class.
    """
    if isinstance(risk, str):
        key = risk.lower()
        if key not in _RISKS:
            raise ValueError(f"Unknown risk {risk!r}; expected one of {sorted(_RISKS)} or a risk object.")
        return _RISKS[key]()
    if isinstance(risk, BaseRisk):
        return risk
    raise TypeError(f"risk must be a string or a skrank.risks risk object, got {type(risk).__name__}.")


__all__ = [
    "BaseRisk",
    "ERM",
    "Superquantile",
    "CVaR",
    "Extremile",
    "ExponentialSpectral",
    "TopK",
    "RankedRange",
    "HumanAligned",
    "check_risk",
]
