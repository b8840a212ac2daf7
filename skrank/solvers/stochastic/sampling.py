"""Sampling inside SOREL's compiled loops: a xorshift64* generator and Walker's alias table.

The generator's state is one ``uint64`` (an array of length one, or a
register in the unrolled loop :func:`skrank.solvers.stochastic.sorel_kernel._single_steps_l2`),
seeded from the solver's ``random_state`` by :func:`seed_state`.  Weighted
draws use Walker's alias method with Vose's construction: ``O(n)`` to build
the table (:func:`build_alias`), ``O(1)`` per draw (:func:`draw_index`).  The
table is packed, ``packed[i] = i | alias[i] << 32``, so that the choice
between a column and its alias can be a shift instead of a branch.
"""

import numpy as np
from sklearn.utils import check_random_state

from ..._jit import njit

# xorshift64* (shifts 12, 25, 27, Vigna's multiplier); the top 53 bits of the product make the float
U11 = np.uint64(11)
U12 = np.uint64(12)
U25 = np.uint64(25)
U27 = np.uint64(27)
MULT = np.uint64(2685821657736338717)
INV53 = 1.0 / 9007199254740992.0  # 2**-53
# a packed alias entry: shifted right by 0 or by 1 << U5 = 32 bits, then masked, it gives i or alias[i]
U5 = np.uint64(5)
LOW32 = np.uint64(0xFFFFFFFF)


def seed_state(rng):
    """The generator's state, seeded from the NumPy ``Generator`` ``rng``."""
    return np.array([int(rng.integers(1, 2**63 - 1))], dtype=np.uint64)


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


def state_from_random_state(random_state):
    """The generator's state from a scikit-learn ``random_state`` (None, int, RandomState or Generator)."""
    return seed_state(make_rng(random_state))


@njit(cache=True, inline="always")
def xorshift_uniform(state):
    """xorshift64* step: a float in [0, 1) (53 bits); ``state`` is a uint64 array."""
    x = state[0]
    x ^= x >> U12
    x ^= x << U25
    x ^= x >> U27
    state[0] = x
    return float((x * MULT) >> U11) * INV53


@njit(cache=True, inline="always")
def sample_block(perm, size, state):
    """Partial Fisher-Yates: ``perm[:size]`` becomes a uniform subset without replacement.

    ``perm`` is any permutation (kept between calls); one uniform draw per
    element, in order.
    """
    n = perm.shape[0]
    for a in range(size):
        j = a + int(xorshift_uniform(state) * (n - a))
        if j >= n:
            j = n - 1
        tmp = perm[a]
        perm[a] = perm[j]
        perm[j] = tmp


@njit(cache=True, inline="always")
def _pack_alias(i, alias_i):
    """Entry ``i`` of the packed alias table: ``i`` in the low, ``alias_i`` in the high 32 bits."""
    return np.int64(i) | (np.int64(alias_i) << np.int64(32))


@njit(cache=True)
def build_alias(prob, packed, small, large):
    """Walker's alias table of the weights in ``prob``, in place, packed (:func:`_pack_alias`).

    On entry ``prob`` holds the weights scaled to mean one, ``n p_i /
    sum(p)`` (the caller scales them); on return the table: column ``i``,
    drawn uniformly, gives ``i`` with probability ``prob[i]`` and
    ``alias[i] = packed[i] >> 32`` otherwise, so that ``i`` comes out with
    probability ``p_i / sum(p)``.  ``small`` and ``large`` are integer
    scratch arrays of length ``n``.

    Vose's pairing, with the current large entry's probability in a
    register: a large entry that turns small would go on top of the small
    stack and be the next one paired, so it is paired at once, in
    registers, and the small stack is only read.
    """
    n = prob.shape[0]
    ns, nl = 0, 0
    for i in range(n):
        q = prob[i]
        packed[i] = _pack_alias(i, i)
        # branch-free: i goes on both stacks, only one of them grows
        is_small = q < 1.0
        small[ns] = i
        large[nl] = i
        ns += is_small
        nl += 1 - is_small
    if nl == 0:
        for k in range(ns):
            prob[small[k]] = 1.0
        return
    g = large[nl - 1]
    pg = prob[g]
    while ns > 0:
        ns -= 1
        sm = small[ns]
        packed[sm] = _pack_alias(sm, g)
        pg = pg + prob[sm] - 1.0
        while pg < 1.0:  # g turns small: paired with the next large entry
            prob[g] = pg
            nl -= 1
            if nl == 0:
                break
            old = g
            p_old = pg
            g = large[nl - 1]
            pg = prob[g]
            packed[old] = _pack_alias(old, g)
            pg = pg + p_old - 1.0
        if nl == 0:
            prob[g] = 1.0  # left on the small stack
            break
    for k in range(nl):
        prob[large[k]] = 1.0
    for k in range(ns):
        prob[small[k]] = 1.0


@njit(cache=True)
def draw_index(rng, n, prob, packed, use_alias):
    """One index: uniform, or from the alias table (``prob``, ``packed``) when ``use_alias``."""
    r = xorshift_uniform(rng) * n
    i = int(r)
    if i >= n:
        i = n - 1
    if use_alias and (r - i) >= prob[i]:
        i = packed[i] >> 32
    return i


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

    Walker's alias method (:func:`build_alias`):
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
    build_alias(prob, packed, small, large)
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
