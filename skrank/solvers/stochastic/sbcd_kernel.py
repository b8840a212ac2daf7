"""The compiled mini-batch step of SBCD, shared by AGD-SBCD, DCA and proximal DCA.

Yao, Lin and Yang, "Large-scale Optimization of Partial AUC in a Range of
False Positive Rates" (NeurIPS 2022), Algorithm 1.  The step, its three
uses and the factored logistic derivatives are described in the user
guide, :ref:`methods-agd-sbcd`.
"""

import numpy as np

from ..._jit import njit
from ...pairwise_losses import pair_derivative, pair_level, pair_value_and_derivative
from .sampling import sample_block


@njit(cache=True, inline="always")
def _scores(X, perm, v, out):
    """``out[a] = X[perm[a]] . v`` for the block's rows ``perm[:len(out)]``."""
    for a in range(out.shape[0]):
        row = X[perm[a]]
        s = 0.0
        for f in range(v.shape[0]):
            s += row[f] * v[f]
        out[a] = s


@njit(cache=True, inline="always")
def _exp_factors(hp, hn, shift, ep, en):
    """``ep = exp(hp - shift - mid)``, ``en = exp(mid - hn)``; False (none set) if the scores span 1400+."""
    lo, hi = np.inf, -np.inf
    for a in range(hp.shape[0]):
        lo = min(lo, hp[a] - shift)
        hi = max(hi, hp[a] - shift)
    for b in range(hn.shape[0]):
        lo = min(lo, hn[b])
        hi = max(hi, hn[b])
    factored = hi - lo < 1400.0
    if factored:
        mid = 0.5 * (lo + hi)
        for a in range(hp.shape[0]):
            ep[a] = np.exp(hp[a] - shift - mid)
        for b in range(hn.shape[0]):
            en[b] = np.exp(mid - hn[b])
    return factored


@njit(cache=True, inline="always")
def _anchor_pairs(hpa, lam_i, hn, epa, en, c, factored, monotone, code, shift, scale):
    """One positive's active pairs: adds their derivatives to ``c``; returns their sum and count."""
    ra = 0.0
    cnt = 0
    if factored:
        cut = hpa - pair_level(code, shift, scale, lam_i)
        for b in range(hn.shape[0]):
            on = hn[b] > cut
            der = -scale / (1.0 + epa * en[b]) if on else 0.0
            ra += der
            c[b] += der
            cnt += on
    elif monotone:
        cut = hpa - pair_level(code, shift, scale, lam_i)
        for b in range(hn.shape[0]):
            if hn[b] > cut:
                der = pair_derivative(code, shift, scale, hpa - hn[b])
                ra += der
                c[b] += der
                cnt += 1
    else:
        for b in range(hn.shape[0]):
            val, der = pair_value_and_derivative(code, shift, scale, hpa - hn[b])
            if val > lam_i:
                ra += der
                c[b] += der
                cnt += 1
    return ra, cnt


@njit(cache=True, inline="always")
def _block_gradient(Xp, Xn, perm_pos, perm_neg, r, c, grad):
    """``grad = X_I' r - X_J' c`` (rows of zero weight skipped)."""
    grad[:] = 0.0
    for a in range(r.shape[0]):
        ra = r[a]
        if ra != 0.0:
            row = Xp[perm_pos[a]]
            for f in range(grad.shape[0]):
                grad[f] += ra * row[f]
    for b in range(c.shape[0]):
        cb = c[b]
        if cb != 0.0:
            row = Xn[perm_neg[b]]
            for f in range(grad.shape[0]):
                grad[f] -= cb * row[f]


# reassociation lets the dot products and row updates vectorise; infinities
# (thresholds of lambda <= 0) must survive, so no 'ninf' / 'nnan'
@njit(cache=True, fastmath={"reassoc", "contract", "arcp"})
def sbcd_steps(Xp, Xn, v, center, xi, lam, level_frac, n_steps, eta, theta, prox, reg,
               batch_pos, batch_neg, code, shift, scale, monotone, state, perm_pos, perm_neg,
               average, lam_floor, exp_factored=False):
    """Run ``n_steps`` SBCD steps from ``(v, lam)`` (both updated in place).

    Parameters
    ----------
    Xp, Xn : ndarray of shape (N+, d), (N-, d)
        Positive and negative rows, C-contiguous float64.
    v, lam : ndarray of shape (d,), (N+,)
        Start ``v^(0)`` and one threshold per positive; hold the last iterates on return.
    center, xi : ndarray of shape (d,)
        Centre of the proximal term (``w``), and the linear term subtracted
        from the gradient (DCA; zeros otherwise).
    level_frac, n_steps : float, int
        ``l / N-`` (``fpr_min`` or ``fpr_max``), and the number of steps.
    eta, theta, prox, reg : float
        Primal step, dual step, proximal weight ``P`` and l2 weight.
    batch_pos, batch_neg : int
        Block sizes (capped at the class sizes).
    code, shift, scale : int, float, float
        The pairwise loss (:mod:`skrank.pairwise_losses`).
    monotone : bool
        The loss is non-increasing: the mask is then the score threshold
        ``h_j > h_i - z*(lambda_i)`` and only active pairs evaluate the
        derivative (no loss values).
    state, perm_pos, perm_neg : ndarray of one uint64, int64 arrays
        Generator state, and the permutations the blocks are drawn from (any order; kept between calls).
    average : bool
        Return the averages of ``v^(0..T-1)`` and ``lambda^(0..T-1)``.
    lam_floor : float
        Lower bound of ``lambda`` (0 for nonnegative losses, ``-inf`` for none).
    exp_factored : bool, default=False
        The derivative is ``-scale / (1 + exp(z - shift))`` (the loss's
        :attr:`~skrank.pairwise_losses.PairwiseLoss.exp_factored`): the pair
        derivatives then take ``I + J`` exponentials (user guide).

    Returns
    -------
    v_avg, lam_avg : ndarray
        The averages when ``average``, else copies of the last iterates.
    active : float
        Mean fraction of active pairs over the steps (a diagnostic).
    """
    d, n_pos = v.shape[0], Xp.shape[0]
    I, J = min(batch_pos, n_pos), min(batch_neg, Xn.shape[0])
    hp, ep, r = np.empty(I), np.empty(I), np.empty(I)
    hn, en, c = np.empty(J), np.empty(J), np.empty(J)
    grad, v_sum, lam_sum = np.empty(d), np.zeros(d), np.zeros(n_pos)
    last = np.zeros(n_pos, dtype=np.int64)
    inv_pairs, inv_j, denom = 1.0 / (I * J), 1.0 / J, 1.0 + eta * prox
    active_total = 0.0
    for t in range(n_steps):
        if average:
            for f in range(d):
                v_sum[f] += v[f]
        sample_block(perm_pos, I, state)
        sample_block(perm_neg, J, state)
        _scores(Xp, perm_pos, v, hp)
        _scores(Xn, perm_neg, v, hn)
        c[:] = 0.0
        factored = _exp_factors(hp, hn, shift, ep, en) if exp_factored else False
        n_active = 0.0
        for a in range(I):
            i = perm_pos[a]
            lam_i = lam[i]
            r[a], cnt = _anchor_pairs(hp[a], lam_i, hn, ep[a], en, c, factored, monotone, code, shift, scale)
            n_active += cnt
            # dual step at the same mask; lazy running sum of lambda_i
            if average:
                # lam_i was in effect at steps last[i] .. t; the new value from t + 1
                lam_sum[i] += lam_i * (t + 1 - last[i])
                last[i] = t + 1
            new = lam_i - theta * (level_frac - cnt * inv_j)
            lam[i] = new if new > lam_floor else lam_floor
        active_total += n_active * inv_pairs
        _block_gradient(Xp, Xn, perm_pos, perm_neg, r, c, grad)
        for f in range(d):
            g = grad[f] * inv_pairs - xi[f] + reg * v[f]
            v[f] = (v[f] + eta * prox * center[f] - eta * g) / denom
    if average and n_steps > 0:
        for i in range(n_pos):
            lam_sum[i] += lam[i] * (n_steps - last[i])
        return v_sum / n_steps, lam_sum / n_steps, active_total / n_steps
    return v.copy(), lam.copy(), active_total / max(n_steps, 1)
