"""Numba's on-disk cache of skrank's kernels, in folders it chooses and read defensively.

:func:`skrank._jit.njit` imports this module (and Numba) when a kernel is
first compiled.  It keeps Numba's cache files but chooses their folder and
reads them defensively.  Where entries are written and looked up, when an
entry is stale and what happens when one cannot be read are described in
the developer guide, :ref:`architecture-kernels`.
"""

import functools
import hashlib
import inspect
import os
import stat
import sys
import tempfile
import warnings

import numba
from numba.core import config
from numba.core.caching import (
    CompileResultCacheImpl,
    FunctionCache,
    IndexDataCacheFile,
    _CacheLocator,
    _SourceFileBackedLocatorMixin,
)
from numba.core.dispatcher import Dispatcher
from numba.core.errors import NumbaWarning
from numba.misc.appdirs import AppDirs

__all__ = ["compile_kernel"]

_warned = False


def _warn_once(message):
    """Issue ``message`` as a :class:`NumbaWarning` unless one was issued already."""
    global _warned
    if _warned:
        return
    _warned = True
    warnings.warn(message, NumbaWarning, stacklevel=2)


def _subpath(py_file):
    """The folder for ``py_file`` inside a shared cache root, as Numba names it."""
    folder = os.path.dirname(os.path.abspath(py_file))
    digest = hashlib.sha1(folder.encode()).hexdigest()
    return "_".join([os.path.basename(folder), digest])


def _user_name():
    if hasattr(os, "getuid"):
        return str(os.getuid())
    try:
        import getpass

        return getpass.getuser()
    except Exception:
        return None


def _private_temp_root(create):
    """The per-user folder in the temporary folder, or None where it is unsafe or absent.

    Parameters
    ----------
    create : bool
        Whether to create the folder where it does not exist.

    Returns
    -------
    str or None
        Its path, where it exists (or was created), is a folder (not a link)
        and, on POSIX, belongs to the current user and is not writable by
        anyone else; None otherwise.
    """
    user = _user_name()
    try:
        base = tempfile.gettempdir()
    except OSError:
        return None
    if user is None or os.path.realpath(base) == os.path.realpath(os.getcwd()):
        # tempfile falls back on the working folder where no temporary one is writable
        return None
    root = os.path.join(base, f"skrank-numba-cache-{user}")
    if create:
        try:
            os.mkdir(root, 0o700)
        except FileExistsError:
            pass
        except OSError:
            return None
    try:
        st = os.lstat(root)
    except OSError:
        return None
    if not stat.S_ISDIR(st.st_mode):
        return None
    if hasattr(os, "getuid") and (st.st_uid != os.getuid() or st.st_mode & 0o022):
        return None
    return root


def _is_writable_folder(path):
    try:
        os.makedirs(path, exist_ok=True)
        tempfile.TemporaryFile(dir=path).close()
    except OSError:
        return False
    return True


@functools.lru_cache(maxsize=None)
def _cache_folders(py_file):
    """Where the kernels of module ``py_file`` are cached.

    Parameters
    ----------
    py_file : str
        The module's source file.

    Returns
    -------
    write : str or None
        The folder new entries are written to; None where no folder is writable.
    read : tuple of str
        The folders entries are looked up in, in order of preference; ``write``
        is one of them.
    """
    if not os.path.isfile(py_file):
        return None, ()
    subpath = _subpath(py_file)
    candidates = []
    if config.CACHE_DIR:
        candidates.append(os.path.join(config.CACHE_DIR, subpath))
    candidates.append(os.path.join(os.path.dirname(os.path.abspath(py_file)), "__pycache__"))
    try:
        candidates.append(os.path.join(AppDirs(appname="numba", appauthor=False).user_cache_dir, subpath))
    except Exception:
        pass
    write, read = None, []

    def consider(folder):
        """Read ``folder`` where it exists, and write to it if it is the first writable one."""
        nonlocal write
        if write is None and _is_writable_folder(folder):
            write = folder
        elif not os.path.isdir(folder):
            return
        read.append(folder)

    for folder in candidates:
        consider(folder)
    temp_root = _private_temp_root(create=write is None)
    if temp_root is not None:
        consider(os.path.join(temp_root, subpath))
    return write, tuple(read)


@functools.lru_cache(maxsize=None)
def _file_digest(path):
    """A digest of the bytes of ``path`` (None when it cannot be read)."""
    try:
        with open(path, "rb") as file:
            return hashlib.blake2b(file.read(), digest_size=16).hexdigest()
    except OSError:
        return None


@functools.lru_cache(maxsize=1)
def _kernel_sources_digest():
    """A digest of every source file of the package that compiles kernels.

    A kernel inlines the kernels it calls, which may live in other files
    (the losses, the sorting and PAVA kernels): Numba's own stamp, the
    modification time and size of the kernel's file alone, would keep a
    cached kernel whose callees have changed, after an upgrade or an edit.
    """
    root = os.path.dirname(os.path.abspath(__file__))
    digest = hashlib.blake2b(digest_size=16)
    for folder, subfolders, names in os.walk(root):
        subfolders[:] = sorted(name for name in subfolders if name != "__pycache__")
        for name in sorted(names):
            if not name.endswith(".py"):
                continue
            try:
                with open(os.path.join(folder, name), "rb") as file:
                    source = file.read()
            except OSError:
                continue
            if b"njit" in source:
                digest.update(os.path.relpath(os.path.join(folder, name), root).encode() + b"\0" + source)
    return digest.hexdigest()


class _Locator(_SourceFileBackedLocatorMixin, _CacheLocator):
    """Numba's locator interface for a folder chosen by :func:`_cache_folders`."""

    def __init__(self, py_func, py_file, cache_path):
        self._py_file = py_file
        self._lineno = py_func.__code__.co_firstlineno
        self._cache_path = cache_path

    def get_cache_path(self):
        return self._cache_path

    def get_source_stamp(self):
        # the contents of the kernel's file and of every file of kernels it may call
        return (_file_digest(self._py_file), _kernel_sources_digest())


class _CacheImpl(CompileResultCacheImpl):
    """Numba's serialization of compile results, with the locator given rather than searched."""

    def __init__(self, py_func, locator):
        self._lineno = py_func.__code__.co_firstlineno
        self._locator = locator
        qualname = getattr(py_func, "__qualname__", py_func.__name__)
        modname = os.path.splitext(os.path.basename(locator._py_file))[0]
        abiflags = getattr(sys, "abiflags", "")
        self._filename_base = self.get_filename_base(f"{modname}.{qualname}", abiflags)


class _CacheFile(IndexDataCacheFile):
    """An index and its data files, where an unreadable entry is a miss."""

    def _load_index(self):
        try:
            overloads = super()._load_index()
        except Exception:
            _warn_once(f"skrank found an unreadable Numba cache index {self._index_path!r}; "
                       "the kernel is compiled again and the index rewritten where possible.")
            return {}
        return overloads if isinstance(overloads, dict) else {}

    def load(self, key):
        try:
            return super().load(key)
        except Exception:
            _warn_once(f"skrank found an unreadable Numba cache entry in {self._cache_path!r}; "
                       "the kernel is compiled again and the entry rewritten where possible.")
            return None

    def save(self, key, data):
        """Write an entry under an exclusive lock on the cache folder (where the system has ``flock``).

        Numba names a new entry's data file from the index it has just read:
        two processes (parallel test workers, ``n_jobs`` fits on a fresh
        install) compiling two signatures of one kernel at once could take
        the same name, and the index left behind could point one signature
        at the other's code.
        """
        try:
            import fcntl

            folder = os.open(self._cache_path, os.O_RDONLY)
        except (ImportError, OSError):
            return super().save(key, data)
        try:
            fcntl.flock(folder, fcntl.LOCK_EX)
            return super().save(key, data)
        finally:
            os.close(folder)


class _FallbackCache(FunctionCache):
    """A per-function Numba cache that degrades to compiling in memory instead of raising.

    Parameters
    ----------
    py_func : function
        The Python function of the dispatcher.
    """

    def __init__(self, py_func):
        self._name = repr(py_func)
        self._py_func = py_func
        self._cache_path = None
        self._cache_file = None
        self._readers = ()
        try:
            py_file = inspect.getfile(py_func)
            write, read = _cache_folders(py_file)
            if read:
                locator = _Locator(py_func, py_file, write or read[0])
                self._impl = _CacheImpl(py_func, locator)
                stamp = locator.get_source_stamp()
                base = self._impl.filename_base
                self._readers = tuple(_CacheFile(folder, base, stamp) for folder in read)
                if write is not None:
                    self._cache_path = write
                    self._cache_file = self._readers[read.index(write)]
        except Exception:
            self._cache_path = None
            self._cache_file = None
            self._readers = ()
        self.enable()

    def flush(self):
        if self._cache_file is not None:
            self._cache_file.flush()

    def load_overload(self, sig, target_context):
        """The cached overload of ``sig``, or None, with the target context initialised lazily.

        Numba refreshes the whole target context before it reads an entry:
        it imports and installs every typing and lowering registry, most of
        a warm process's first call.  Rebuilding compiled code needs only
        the runtime (its allocation functions are linked by name); a
        compilation refreshes the context itself.
        """
        from numba.core.runtime import rtsys

        rtsys.initialize(target_context)
        with self._guard_against_spurious_io_errors():
            return self._load_overload(sig, target_context)
        return None

    def _load_overload(self, sig, target_context):
        if not self._enabled or not self._readers:
            return None
        key = self._index_key(sig, target_context.codegen())
        for reader in self._readers:
            data = reader.load(key)
            if data is None:
                continue
            try:
                return self._impl.rebuild(target_context, data)
            except Exception:
                _warn_once(f"skrank could not rebuild a Numba cache entry of {self._name} from "
                           f"{reader._cache_path!r}; the kernel is compiled again.")
        return None

    def _save_overload(self, sig, data):
        if not self._enabled:
            return
        if self._cache_file is None:
            _warn_once("skrank found no writable folder for Numba's cache (tried NUMBA_CACHE_DIR, "
                       "the package folder, the user's cache folder and the temporary folder); "
                       "its kernels are compiled in memory in every new process.  Set "
                       "NUMBA_CACHE_DIR to a writable folder to cache them.")
            return
        if not self._impl.check_cachable(data):
            return
        try:
            self._impl.locator.ensure_cache_path()
            key = self._index_key(sig, data.codegen)
            self._cache_file.save(key, self._impl.reduce(data))
        except Exception as exc:
            _warn_once(f"skrank could not write to Numba's cache in {self._cache_path!r} ({exc}); "
                       "the kernel stays compiled in memory only.")


def compile_kernel(func, sigs, options):
    """A dispatcher of ``func`` with a :class:`_FallbackCache`, compiled for ``sigs`` if given."""
    disp = numba.njit(**options)(func)
    if not isinstance(disp, Dispatcher):
        # NUMBA_DISABLE_JIT: the plain Python function
        return disp
    disp._cache = _FallbackCache(disp.py_func)
    if sigs is not None:
        from numba.core import typeinfer

        with typeinfer.register_dispatcher(disp):
            for sig in sigs:
                disp.compile(sig)
        disp.disable_compile()
    return disp
