"""The tolerances of the hinge and absolute-loss finish (face solver and walk), in one place."""

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
#: side of the kink by :data:`NUDGE`; a coefficient within ``ZERO_COEF`` of 0 is set to
#: ``±TINY`` on the side of its sign pattern.
NEAR_KINK = 1e-12
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
