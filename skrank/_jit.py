"""The Numba decorator of skrank: kernels compiled when first used, with an on-disk cache.

:func:`njit` is a drop-in replacement for :func:`numba.njit`.  A cached
kernel without signatures is a :class:`LazyKernel`: neither Numba nor the
kernel is loaded before its first call, so ``import skrank`` does not
import Numba and a fit loads only the kernels it runs.  With
``cache=True`` the compiled code is kept in Numba's cache files, in a
folder :mod:`skrank._numba_cache` chooses and reads defensively
(:ref:`architecture-kernels`).
"""

import functools
import threading
import types

__all__ = ["LazyKernel", "njit"]

_LOCK = threading.RLock()


class LazyKernel:
    """A kernel whose Numba dispatcher is built on first use.

    Calling it, or reading any attribute of the dispatcher (``py_func``,
    ``signatures``, ``targetoptions``, Numba's ``_numba_type_`` when
    another kernel calls it or receives it as an argument), builds the
    dispatcher, which then replaces the kernel in its module's namespace.

    Parameters
    ----------
    func : function
        The Python function to compile.
    options : dict
        Options of :func:`numba.njit`, ``cache`` included.
    """

    def __init__(self, func, options):
        self._func = func
        self._options = options
        self._dispatcher = None
        functools.update_wrapper(self, func)

    def dispatcher(self):
        """The Numba dispatcher (the plain function under ``NUMBA_DISABLE_JIT``), built once."""
        disp = self._dispatcher
        if disp is None:
            with _LOCK:
                if self._dispatcher is None:
                    from ._numba_cache import compile_kernel

                    self._dispatcher = compile_kernel(self._func, None, dict(self._options))
                    namespace = self._func.__globals__
                    if namespace.get(self._func.__name__) is self:
                        namespace[self._func.__name__] = self._dispatcher
                disp = self._dispatcher
        return disp

    def __call__(self, *args, **kwargs):
        return self.dispatcher()(*args, **kwargs)

    def __getattr__(self, name):
        if name.startswith("__") or name in ("_func", "_options", "_dispatcher"):
            raise AttributeError(name)
        return getattr(self.dispatcher(), name)

    def __reduce__(self):
        return self.dispatcher().__reduce__()

    def __repr__(self):
        state = "compiled" if self._dispatcher is not None else "not loaded"
        return f"<skrank kernel {self._func.__module__}.{self._func.__qualname__} ({state})>"


def njit(*args, **options):
    """Compile a function with Numba in nopython mode, caching it where possible.

    Takes the arguments of :func:`numba.njit`.  With ``cache=True`` and no
    signatures the kernel is a :class:`LazyKernel`, built on first use, and
    its compiled code is cached on disk: read from and written to the first
    usable folder, an unwritable folder or an unreadable entry costing a
    compilation, never an error.  With signatures it is compiled for them
    at once; without ``cache`` it is :func:`numba.njit`'s dispatcher.

    Parameters
    ----------
    *args : function, signature or list of signatures, optional
        The function to compile, or the signatures to compile eagerly.
    **options
        Options of :func:`numba.njit`, ``cache`` included.

    Returns
    -------
    LazyKernel, numba.core.dispatcher.Dispatcher or callable
        The kernel, or a decorator that makes one.
    """
    cache = options.pop("cache", False)
    if not cache:
        import numba

        return numba.njit(*args, **options)
    if len(args) > 1:
        raise TypeError("njit takes at most one positional argument")
    target = args[0] if args else None
    if isinstance(target, types.FunctionType):
        return LazyKernel(target, options)
    if target is None:
        return functools.partial(LazyKernel, options=options)
    sigs = target if isinstance(target, list) else [target]

    def decorate(func):
        from ._numba_cache import compile_kernel

        return compile_kernel(func, sigs, options)

    return decorate
