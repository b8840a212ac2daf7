"""What the piecewise-linear finish reads of a face: its blocks of tied losses and its affine set."""

import numpy as np
import scipy.linalg

from ._constants import FLAT, RANK


class TieBlocks:
    """The blocks of equal values of a vector, contiguous in its ascending order.

    Parameters
    ----------
    values : ndarray of shape (n,)
        The values (losses, or magnitudes of loss arguments), ``n >= 1``.
    gap : float or None, default=None
        None: a block holds equal values; else consecutive sorted values
        less than ``gap`` apart share a block.

    Attributes
    ----------
    order : ndarray of shape (n,)
        The stable ascending order of ``values``.
    sorted : ndarray of shape (n,)
        ``values[order]``.
    new : ndarray of shape (n,)
        Per sorted position: whether a block starts there.
    bid : ndarray of shape (n,)
        Per sorted position: the index of its block.
    n_blocks : int
        The number of blocks.
    starts, stops : ndarray of shape (n_blocks,)
        The sorted positions where each block starts and ends (exclusive).
    """

    def __init__(self, values, gap=None):
        n = values.shape[0]
        self.order = np.argsort(values, kind="stable")
        self.sorted = values[self.order]
        self.new = np.empty(n, dtype=bool)
        self.new[0] = True
        if gap is None:
            np.not_equal(self.sorted[1:], self.sorted[:-1], out=self.new[1:])
        else:
            np.greater(np.diff(self.sorted), gap, out=self.new[1:])
        self.bid = np.cumsum(self.new) - 1
        self.n_blocks = int(self.bid[-1]) + 1
        self.starts = np.flatnonzero(self.new)
        self.stops = np.append(self.starts[1:], n)

    def sizes(self, weights=None):
        """Per block: its number of members, or the sum of ``weights`` (given in sorted order) over them."""
        return np.bincount(self.bid, weights=weights, minlength=self.n_blocks)

    def sample_bid(self):
        """Per sample (in the original order): the index of its block."""
        bid = np.empty_like(self.bid)
        bid[self.order] = self.bid
        return bid

    def flat(self, sigma):
        """Per block: whether the rank weights ``sigma`` are constant over its ranks.

        There the risk is linear in the block's losses, and a tie is no constraint.
        """
        spread = np.maximum.reduceat(sigma, self.starts) - np.minimum.reduceat(sigma, self.starts)
        return spread <= FLAT * float(sigma.max())

    def mean_weights(self, sigma, active_sorted):
        """Per sample: the mean rank weight of its block where ``active_sorted``, else 0.

        Parameters
        ----------
        sigma : ndarray of shape (n,)
            The ascending rank weights.
        active_sorted : ndarray of shape (n,)
            Per sorted position: whether the sample's loss is positive.

        Returns
        -------
        omega : ndarray of shape (n,)
            The weight of each loss on the face.
        """
        block_sigma = self.sizes(sigma)
        block_size = self.sizes()
        omega = np.zeros(self.order.shape[0])
        omega[self.order] = np.where(active_sorted, block_sigma[self.bid] / block_size[self.bid], 0.0)
        return omega

    def pairs(self, member_sorted):
        """The tie constraints of the blocks: each member paired with its block's first member.

        Parameters
        ----------
        member_sorted : ndarray of shape (n,)
            Per sorted position: whether the sample is tied to its block.

        Returns
        -------
        tie_i, tie_r : ndarray of int
            Samples (original indices) and the representatives they are tied to.
        """
        pos = np.flatnonzero(member_sorted)
        bb = self.bid[pos]
        first = np.empty(pos.size, dtype=bool)
        if pos.size:
            first[0] = True
            np.not_equal(bb[1:], bb[:-1], out=first[1:])
        rep = pos[first][np.cumsum(first) - 1]
        return self.order[pos[~first]], self.order[rep[~first]]


def project_onto_face(E, e, x):
    """A null-space basis of ``E`` and the least-squares projection of ``x`` onto ``E x = e``.

    Parameters
    ----------
    E : ndarray of shape (m, p)
        The constraints, ``m >= 1``.
    e : ndarray of shape (m,)
        Their right-hand sides.
    x : ndarray of shape (p,)
        The point.

    Returns
    -------
    N : ndarray of shape (p, p - rank(E))
        An orthonormal basis of the null space of ``E``.
    x : ndarray of shape (p,)
        ``x`` moved onto ``E x = e`` (the point closest to it in least
        squares when the system is inconsistent).
    """
    p = E.shape[1]
    # the null space from the p x p triangle of E (the SVD of E itself would be m x m)
    R = E if E.shape[0] <= p else np.linalg.qr(E, mode="r")
    _, S, Vt = np.linalg.svd(R, full_matrices=True)
    rank = int(np.sum(S > S[0] * RANK)) if S.size and S[0] > 0 else 0
    N = Vt[rank:].T
    return N, x - scipy.linalg.lstsq(E, E @ x - e, cond=RANK, check_finite=False)[0]
