"""The peak resident memory of this process (and of worker processes) during a block, for the benchmarks."""

import ctypes
import gc
import threading


class PeakMemory:
    """Peak RSS of this process and of the processes ``pids`` (summed), sampled every ``every`` seconds.

    ``before`` and ``workers_before``: the RSS on entry, after a garbage
    collection and a ``malloc_trim`` (glibc), so that memory freed before
    the fit is not counted as held; ``peak`` and ``workers_peak``: the
    largest samples, the last one taken on exit.
    """

    def __init__(self, pids=(), every=0.01):
        import psutil

        self._me = psutil.Process()
        self._workers = [psutil.Process(pid) for pid in pids]
        self._every = every
        self._stop = threading.Event()

    def _workers_rss(self):
        total = 0
        for process in self._workers:
            try:
                total += process.memory_info().rss
            except Exception:  # a worker gone (restarted by its nanny)
                pass
        return total

    def _read(self):
        self.peak = max(self.peak, self._me.memory_info().rss)
        if self._workers:
            self.workers_peak = max(self.workers_peak, self._workers_rss())

    def _sample(self):
        while not self._stop.wait(self._every):
            self._read()

    def __enter__(self):
        gc.collect()
        try:
            ctypes.CDLL("libc.so.6").malloc_trim(0)
        except (OSError, AttributeError):  # not glibc
            pass
        self.before = self.peak = self._me.memory_info().rss
        self.workers_before = self.workers_peak = self._workers_rss()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self._read()

    @property
    def growth(self):
        """Bytes of this process's peak above its RSS on entry."""
        return self.peak - self.before
