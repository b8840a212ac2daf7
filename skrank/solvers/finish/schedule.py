"""When a first-order solver tries its finish, and which results it keeps."""

import numpy as np

from ._constants import KEEP_ROUNDING, SCHEDULE_DROP, SCHEDULE_GAP, SCHEDULE_GROWTH


class FinishSchedule:
    """The finish attempts of one run of a first-order solver.

    Attempts are due after ``first`` iterations, then whenever the
    iteration count has grown ``growth``-fold since the last attempt that
    was due, and at the last iteration.  A solver that tracks a KKT
    residual may also pass it: an attempt is then due once the residual is
    below ``crit_level`` and has fallen tenfold since the last attempt, or
    ``gap`` iterations have passed (``gap`` doubles after attempts in
    quick succession).

    Parameters
    ----------
    first : int or None
        Iterations before the first attempt; None for an attempt at the last
        iteration only.
    growth : float, default=2.0
        Growth of the iteration count between scheduled attempts
        (:data:`~skrank.solvers.finish._constants.SCHEDULE_GROWTH`).
    crit_level : float or None, default=None
        Residual below which attempts are also due; None for no residual
        trigger.
    gap : int, default=10
        Least number of iterations between residual-triggered attempts at
        the same residual (:data:`~skrank.solvers.finish._constants.SCHEDULE_GAP`).
    """

    def __init__(self, first, growth=SCHEDULE_GROWTH, crit_level=None, gap=SCHEDULE_GAP):
        self.next = np.inf if first is None else int(first)
        self.first = self.next
        self.growth = float(growth)
        self.crit_level = crit_level
        self.gap = int(gap)
        self._last_k, self._last_crit = -(10**9), np.inf
        #: attempts so far
        self.attempts = 0

    def due(self, k, last, crit=None):
        """Whether an attempt is due after ``k`` iterations (``last``: the final one)."""
        if last or k >= self.next:
            return True
        if crit is None or self.crit_level is None or crit > self.crit_level:
            return False
        return crit <= SCHEDULE_DROP * self._last_crit or k - self._last_k >= self.gap

    def attempted(self, k, crit=None):
        """Record an attempt after ``k`` iterations (at residual ``crit``)."""
        if k >= self.next:
            self.next = max(int(np.ceil(self.growth * k)), k + 1, self.first)
        if crit is not None:
            if k - self._last_k < 2 * self.gap:
                self.gap *= 2
            self._last_k, self._last_crit = k, crit
        self.attempts += 1

    @staticmethod
    def keep(F_new, F_cur, certified, last):
        """Whether to replace the iterate of value ``F_cur`` by a finish of value ``F_new``.

        A certified point is kept unless it raises ``F`` beyond rounding; at
        the last iteration an uncertified point is kept when it does not
        raise ``F``.
        """
        if certified:
            return F_new <= F_cur + KEEP_ROUNDING * max(1.0, abs(F_cur))
        return bool(last) and F_new <= F_cur
