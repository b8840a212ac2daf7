"""The tuning constants of the exact finishes, in one place.

Tolerances are relative unless said otherwise: to the largest rank weight, to
``max(1, |value|)`` or to the largest singular value, as each entry states.
"""

# ---------------------------------------------------------------------------
# Tolerances of the piecewise-linear finish (face solve, rounds and walk)
# ---------------------------------------------------------------------------

#: A loss argument within this of the kink (times ``max(1, |kink|)``) lies on it; a walk
#: direction that moves no free piece by more than this is a null step.
AT_KINK = 1e-13
#: Relative step by which a point leaving the kink or a tie block is moved off it, and
#: the relative slack on the bounds of its loss weight before it is moved.
NUDGE = 1e-9
#: Singular values (and new diagonals of the walk's QR) below this fraction of the largest
#: count as zero: ranks, least squares, numerically dependent working sets.
RANK = 1e-10
#: Looser rank cut of the walk's starting working set (the pivoted QR of the kink rows).
START_RANK = 1e-9
#: Relative size below which a value counts as flat: a block of ``sigma`` (ties there are
#: no constraint), an eigenvalue of the reduced Hessian, a gradient on the flat directions;
#: a weight below minus this fraction is negative; ``rcond`` of the face's pseudo-inverse.
FLAT = 1e-12
#: A free piece whose residual is within this of 0 at the end of the walk is put on its
#: side of the kink by :data:`NUDGE`.
NEAR_KINK = 1e-12
#: A coefficient within this of 0 at the end of the walk is set to ``±TINY`` on the side
#: of its sign pattern.
ZERO_COEF = 1e-14
#: Stationarity of the walk on its working set: ``|d . g| <= STATIONARY max(1, |q . y|)``.
STATIONARY = 1e-15
#: Largest relative violation of the multipliers' bounds ``[lo, hi]`` at a stationary point.
MULTIPLIER = 1e-11
#: Added to the interior scores of the starting kink rows (ranks them when every estimated
#: multiplier sits at an end of its range).
INTERIOR_FLOOR = 1e-3
#: Guard of divisions.
TINY = 1e-300

# ---------------------------------------------------------------------------
# Sizes and budgets
# ---------------------------------------------------------------------------

#: Most coefficients (features plus intercept) for which a finish is set up: a face
#: solve costs ``O(n p^2 + p^3)`` against ``O(n min(n, p))`` for one ADMM iteration, so
#: beyond this the iterations are cheaper.
MAX_FEATURES = 200
#: Rounds of the active-set correction of the piecewise-linear finish.
MAX_ROUNDS = 8
#: The rounds stop when the residual exceeds this multiple of the best so far ...
ROUNDS_ABORT = 100.0
#: ... or when it has not fallen below this fraction of the best so far ...
ROUNDS_PROGRESS = 0.5
#: ... in this many rounds.
ROUNDS_STALL = 4
#: Alternating projections onto the box of the loss weights when the face's multipliers
#: are not unique and no estimate of them is given (0: none).
BOX_ROUNDS = 50
#: Most steps of the active-set walk: this plus :data:`WALK_STEPS_PER_PIECE` per piece
#: (from an early iterate the walk needs about a step per fifth to half of the samples).
WALK_STEPS = 1000
WALK_STEPS_PER_PIECE = 0.25
#: Most steps of the walk with the tie blocks released (a last resort, meant for an
#: iterate whose face is right but for a tie block: short).
RELEASE_STEPS = 200
RELEASE_STEPS_PER_PIECE = 0.05
#: Most tau pieces of the released walk (members times jumps of ``sigma``, over the
#: released tie blocks): this many per sample, at least :data:`TAU_PIECES_MIN`; the
#: blocks beyond it stay constraints.
TAU_PIECES_PER_SAMPLE = 4.0
TAU_PIECES_MIN = 256
#: Most taus of the released walk, per coefficient (features plus intercept): the
#: optimum's tie blocks need at most about one tie per coefficient, and each tau adds an
#: unknown to every step of the walk.
TAUS_PER_COEF = 1.0
#: The walk recomputes the pieces' values from scratch every this many steps (in between
#: they are updated along the steps).
WALK_REFRESH = 50
#: The walk's line search takes this many breakpoints by selection before it sorts the
#: rest (the search usually ends among the first few).
LINE_SEARCH_SELECT = 8

# ---------------------------------------------------------------------------
# The Newton finish (smooth losses)
# ---------------------------------------------------------------------------

#: Most Newton steps of one attempt.
NEWTON_STEPS = 100
#: The Newton finish certifies at most this relative gap: a point as exact as the face
#: solves of the piecewise-linear finish, which the caller keeps only when it does not
#: raise ``F``.
NEWTON_GAP = 1e-10

# ---------------------------------------------------------------------------
# The schedule of the attempts
# ---------------------------------------------------------------------------

#: Growth of the iteration count between scheduled attempts.
SCHEDULE_GROWTH = 2.0
#: Least number of iterations between residual-triggered attempts at the same residual.
SCHEDULE_GAP = 10
#: A residual-triggered attempt is due once the residual has fallen by this factor.
SCHEDULE_DROP = 0.1
#: A certified point is kept unless it raises ``F`` by more than this (relative).
KEEP_ROUNDING = 1e-12
