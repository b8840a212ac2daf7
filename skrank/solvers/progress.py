"""The progress lines every solver prints with ``verbose`` (one format for all)."""

import time

#: With ``verbose=1`` a line is printed at least this often (seconds), besides the schedule.
_INTERVAL = 2.0


class Progress:
    """Progress of one solver run: a line per tenth of ``max_iter``, or per iteration.

    With ``verbose=1`` a line is printed after the first iteration, at every
    tenth of ``max_iter`` (at every doubling of the count when ``max_iter`` is
    None) and whenever :data:`_INTERVAL` seconds have passed since the last
    line; with ``verbose >= 2`` after every iteration; with ``verbose=0``
    never.  Each line has the iteration count, the objective ``F``, the
    solver's stopping criterion and the seconds since the start.

    Parameters
    ----------
    name : str
        The solver's name, the prefix of the lines.
    verbose : int
        The estimator's ``verbose``.
    max_iter : int or None, default=None
        The iteration budget.
    unit : str, default="iteration"
        What one iteration is (``"epoch"``, ``"Newton step"``, ...).
    criterion : str, default="criterion"
        The name of the stopping criterion in the lines.
    """

    def __init__(self, name, verbose, max_iter=None, unit="iteration", criterion="criterion"):
        self.name, self.verbose, self.max_iter = name, int(verbose or 0), max_iter
        self.unit, self.criterion = unit, criterion
        self.start = self._last = time.perf_counter()
        self._step = max(1, -(-int(max_iter) // 10)) if max_iter else None
        self._next = 1

    def __call__(self, k, objective, criterion, extra=""):
        """Report iteration ``k`` (counted from 1) with ``F`` and the criterion; extra text last."""
        if self.verbose <= 0:
            return
        now = time.perf_counter()
        if self.verbose == 1 and k < self._next and now - self._last < _INTERVAL:
            return
        if k >= self._next:
            self._next = (k // self._step + 1) * self._step if self._step else 2 * k
        self._last = now
        budget = f"/{self.max_iter}" if self.max_iter else ""
        tail = f"  {extra}" if extra else ""
        print(f"[{self.name}] {self.unit} {k}{budget}  F={objective:.10g}  "
              f"{self.criterion}={criterion:.3g}  {now - self.start:.2f} s{tail}", flush=True)

    def note(self, text):
        """A line of text about an event of the run (printed when ``verbose`` is positive)."""
        if self.verbose > 0:
            print(f"[{self.name}] {text}", flush=True)
