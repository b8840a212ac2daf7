"""How many threads BLAS may use during a fit."""

import contextlib
import functools

#: Problems with at most this many entries in ``X`` run BLAS on one thread.
#: Their products and the one eigendecomposition gain little from threads,
#: and a threaded BLAS on a busy machine (more runnable processes than cores)
#: can be ten times slower than a single thread.  ``None`` or 0 disables it.
SINGLE_THREAD_MAX_SIZE = 4_000_000


def blas_threads(X):
    """Context limiting BLAS to one thread for small problems (see above)."""
    limit = SINGLE_THREAD_MAX_SIZE
    if not limit or X.shape[0] * X.shape[1] > limit:
        return contextlib.nullcontext()
    return _thread_controller().limit(limits=1, user_api="blas")


@functools.lru_cache(maxsize=1)
def _thread_controller():
    # scanning the loaded libraries costs milliseconds: once per process
    from threadpoolctl import ThreadpoolController

    return ThreadpoolController()
