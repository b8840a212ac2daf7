"""The Numba cache of skrank's kernels on read-only installs and with damaged cache files.

Each scenario runs ``import skrank`` and two of its kernels (one of ``losses.py`` and one of
another file that inlines it) in a fresh interpreter, on a copy of the package put first on
``PYTHONPATH``:

* a read-only copy imported by a user who cannot write to it, to ``HOME`` or
  to ``NUMBA_CACHE_DIR``: the kernels are cached in a private temporary folder,
  or compiled in memory with one warning where that folder is unusable;
* a read-only copy with a cache built before it was made read-only: the
  cache is used and nothing is compiled;
* a writable copy whose cache has truncated ``.nbc`` and garbage ``.nbi``
  files: the kernels give the same results and the entries are rewritten.

Root writes anywhere, so where the tests run as root the read-only runs
switch to the ``nobody`` user or, where ``nobody`` cannot run this
interpreter, bind-mount the read-only folders read-only in a mount namespace
of their own (``unshare --mount``); they are skipped where neither works.
The last tests exercise :mod:`skrank._jit` in this process on one-line kernels.
"""

import importlib.util
import itertools
import json
import os
import pickle
import shutil
import stat
import subprocess
import sys
import tempfile
import textwrap
import warnings
from pathlib import Path

import pytest
from numba.core.dispatcher import Dispatcher
from numba.core.errors import NumbaWarning

import skrank
from skrank import _jit, _numba_cache

pytestmark = [
    pytest.mark.skipif(sys.platform == "win32", reason="file modes and users are POSIX ones"),
    pytest.mark.skipif(os.environ.get("NUMBA_DISABLE_JIT", "0") != "0", reason="Numba JIT disabled"),
    # one pytest-xdist worker runs them all: the copies of the package are built once per module
    pytest.mark.xdist_group("numba_cache"),
]

PACKAGE = Path(skrank.__file__).parent

FIT = textwrap.dedent(
    """
    import json, sys, warnings
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        import numpy as np
        import skrank
        from numba.core.dispatcher import Dispatcher
        from skrank.losses import LOGISTIC, loss_value_and_derivative
        from skrank.pairwise_losses import pair_value
        t = np.linspace(-3.0, 3.0, 7).tolist()
        # a kernel of losses.py, and one of another file that inlines losses.py's kernels (scalar
        # ones: each run on an empty cache compiles them)
        values = [v for x in t for v in loss_value_and_derivative(LOGISTIC, x, 0.0)]
        values += [pair_value(LOGISTIC, 1.0, 0.5, x) for x in t]
    kernels = {id(obj): obj for name, module in list(sys.modules.items()) if name.startswith("skrank")
               for obj in vars(module).values() if isinstance(obj, Dispatcher)}
    print(json.dumps({
        "file": skrank.__file__,
        "result": [float(c).hex() for c in values],
        "hits": sum(sum(k.stats.cache_hits.values()) for k in kernels.values()),
        "misses": sum(sum(k.stats.cache_misses.values()) for k in kernels.values()),
        "warnings": [str(w.message) for w in caught if str(w.message).startswith("skrank")],
    }))
    """
)


def _make_writable(path):
    for root, dirs, files in os.walk(path):
        for name in dirs + files:
            full = os.path.join(root, name)
            if not os.path.islink(full):
                os.chmod(full, os.stat(full).st_mode | stat.S_IWUSR)
    os.chmod(path, os.stat(path).st_mode | stat.S_IWUSR)


def _make_read_only(path):
    for root, dirs, files in os.walk(path):
        for name in dirs + files:
            full = os.path.join(root, name)
            os.chmod(full, os.stat(full).st_mode & ~0o222)
    os.chmod(path, os.stat(path).st_mode & ~0o222)


class Confinement:
    """Runs the interpreter where the read-only folders cannot be written to.

    Parameters
    ----------
    uid : int
        The user id the interpreter runs as.
    preexec_fn : callable or None
        What switches the child process to that user, if anything.
    mount : bool
        Whether the read-only folders are also mounted read-only, in a mount
        namespace of the child (for root, who writes anywhere else).
    """

    _MOUNT = ('for d in $SKRANK_READ_ONLY; do mount --bind "$d" "$d" && '
              'mount -o remount,bind,ro "$d" "$d" || exit 97; done; exec "$@"')

    def __init__(self, uid, preexec_fn=None, mount=False):
        self.uid = uid
        self.preexec_fn = preexec_fn
        self.mount = mount

    def run(self, argv, env, read_only, **kwargs):
        """:func:`subprocess.run` of ``argv`` with the folders ``read_only`` unwritable."""
        if self.mount:
            env = dict(env, SKRANK_READ_ONLY=" ".join(str(path) for path in read_only))
            argv = ["unshare", "--mount", "sh", "-c", self._MOUNT, "sh", *argv]
        return subprocess.run(argv, env=env, preexec_fn=self.preexec_fn, **kwargs)


def _confinements():
    """The ways to run the interpreter without write access, the most faithful first."""
    if os.geteuid() != 0:
        yield Confinement(os.geteuid())
        return
    import pwd

    try:
        user = pwd.getpwnam("nobody")
    except KeyError:
        pass
    else:
        def demote():
            os.setgroups([])
            os.setgid(user.pw_gid)
            os.setuid(user.pw_uid)

        yield Confinement(user.pw_uid, demote)
    if shutil.which("unshare") and shutil.which("mount"):
        yield Confinement(0, mount=True)


PROBE = textwrap.dedent(
    """
    import sys, numba, sklearn
    try:
        open(sys.argv[1] + "/probe", "w").close()
    except OSError:
        print("read-only")
    """
)


class Workspace:
    """A folder every user can read, with the copies of the package and the environments."""

    def __init__(self, root):
        self.root = Path(root)
        self.root.chmod(0o755)
        self.home = self.root / "home"
        self.home.mkdir()
        self.home.chmod(0o555)
        self.numba_dir = self.root / "numba-cache"
        self.numba_dir.mkdir()
        self.numba_dir.chmod(0o555)
        self.run_dir = self.root / "cwd"
        self.run_dir.mkdir()
        self.run_dir.chmod(0o755)

    def copy(self, name, cache_from=None):
        """A copy of the package (``<root>/<name>/skrank``), with the cache of ``cache_from``."""
        target = self.root / name
        target.mkdir()
        target.chmod(0o755)
        source = PACKAGE if cache_from is None else cache_from / "skrank"
        ignore = shutil.ignore_patterns("__pycache__" if cache_from is None else "*.pyc")
        shutil.copytree(source, target / "skrank", ignore=ignore)
        return target

    def temp_dir(self, name):
        """A fresh folder anyone may write to (sticky, like /tmp) for ``TMPDIR``."""
        path = self.root / name
        path.mkdir()
        path.chmod(0o1777)
        return path

    def environment(self, copy, tmpdir, numba_cache_dir):
        env = {k: v for k, v in os.environ.items()
               if not k.startswith("NUMBA_") and k not in ("PYTHONPATH", "XDG_CACHE_HOME", "PYTHONHOME")}
        env.update(PYTHONPATH=str(copy), HOME=str(self.home), TMPDIR=str(tmpdir),
                   PYTHONDONTWRITEBYTECODE="1", OMP_NUM_THREADS="1")
        if numba_cache_dir:
            env["NUMBA_CACHE_DIR"] = str(self.numba_dir)
        return env

    def run(self, copy, tmpdir, confinement=None, numba_cache_dir=True):
        """Run the fit on ``copy`` in a fresh interpreter and return its report."""
        env = self.environment(copy, tmpdir, numba_cache_dir)
        argv = [sys.executable, "-c", FIT]
        options = dict(cwd=self.run_dir, capture_output=True, text=True, timeout=300)
        if confinement is None:
            out = subprocess.run(argv, env=env, **options)
        else:
            out = confinement.run(argv, env, [copy, self.home, self.numba_dir], **options)
        assert out.returncode == 0, out.stderr[-3000:]
        report = json.loads(out.stdout.strip().splitlines()[-1])
        assert report["file"] == str(copy / "skrank" / "__init__.py")
        return report


@pytest.fixture(scope="module")
def workspace():
    root = tempfile.mkdtemp(prefix="skrank-cache-test-")
    try:
        yield Workspace(root)
    finally:
        _make_writable(root)
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="module")
def confinement(workspace):
    """A :class:`Confinement` that runs the interpreter but cannot write to the read-only folders."""
    failures = []
    for candidate in _confinements():
        try:
            out = candidate.run([sys.executable, "-c", PROBE, str(workspace.home)],
                                workspace.environment(workspace.run_dir, workspace.run_dir, False),
                                [workspace.home], cwd=workspace.run_dir, capture_output=True,
                                text=True, timeout=120)
        except (OSError, subprocess.SubprocessError) as exc:
            failures.append(f"uid {candidate.uid}: {exc}")
            continue
        finally:
            if (workspace.home / "probe").exists():
                (workspace.home / "probe").unlink()
        if out.returncode == 0 and out.stdout.strip() == "read-only":
            return candidate
        failures.append(f"uid {candidate.uid}: {(out.stderr.strip().splitlines() or ['writes'])[-1]}")
    pytest.skip("no way to run the interpreter without write access: " + "; ".join(failures or ["none"]))


@pytest.fixture(scope="module")
def built(workspace):
    """A writable copy whose cache holds the fit's kernels, and the fit's report."""
    copy = workspace.copy("built")
    report = workspace.run(copy, workspace.temp_dir("tmp-built"), numba_cache_dir=False)
    assert report["misses"] > 0 and not report["warnings"]
    assert _cache_files(copy / "skrank")
    return copy, report


def _cache_files(folder, pattern="*.nbc"):
    return sorted(Path(folder).rglob(pattern))


@pytest.mark.slow
def test_read_only_install_caches_in_a_private_temporary_folder(workspace, confinement, built):
    copy = workspace.copy("read-only")
    _make_read_only(copy)
    tmpdir = workspace.temp_dir("tmp-private")
    first = workspace.run(copy, tmpdir, confinement)
    assert first["result"] == built[1]["result"]
    assert first["misses"] > 0 and not first["warnings"]
    private = tmpdir / f"skrank-numba-cache-{confinement.uid}"
    assert stat.S_IMODE(private.stat().st_mode) == 0o700
    assert _cache_files(private)
    assert not _cache_files(copy)
    again = workspace.run(copy, tmpdir, confinement)
    assert again["result"] == built[1]["result"]
    assert again["hits"] > 0 and again["misses"] == 0 and not again["warnings"]


def test_read_only_install_without_writable_folder_compiles_in_memory(workspace, confinement, built):
    copy = workspace.copy("read-only-no-cache")
    _make_read_only(copy)
    tmpdir = workspace.temp_dir("tmp-taken")
    # a private folder that someone else could write to is not used
    (tmpdir / f"skrank-numba-cache-{confinement.uid}").mkdir(mode=0o777)
    (tmpdir / f"skrank-numba-cache-{confinement.uid}").chmod(0o777)
    report = workspace.run(copy, tmpdir, confinement)
    assert report["result"] == built[1]["result"]
    assert report["misses"] > 0
    assert len(report["warnings"]) == 1
    assert "no writable folder" in report["warnings"][0]
    assert not _cache_files(tmpdir) and not _cache_files(copy)


def test_read_only_install_uses_the_cache_built_beside_it(workspace, confinement, built):
    copy = workspace.copy("read-only-prebuilt", cache_from=built[0])
    _make_read_only(copy)
    tmpdir = workspace.temp_dir("tmp-prebuilt")
    report = workspace.run(copy, tmpdir, confinement)
    assert report["result"] == built[1]["result"]
    assert report["hits"] > 0 and report["misses"] == 0
    assert not report["warnings"]
    assert not _cache_files(tmpdir)


def test_damaged_cache_files_are_recompiled_and_rewritten(workspace, built):
    copy = workspace.copy("damaged", cache_from=built[0])
    pycache = copy / "skrank"  # every package folder's __pycache__
    data = _cache_files(pycache, "*.nbc")
    indexes = _cache_files(pycache, "*.nbi")
    assert len(data) >= 2 and len(indexes) >= 2
    # a truncated data file for some kernels, a garbage index for the others
    truncated = data[::2]
    for path in truncated:
        path.write_bytes(path.read_bytes()[:100])
    garbage = [path for path in indexes if not any(d.name.startswith(path.name[:-4]) for d in truncated)]
    assert garbage
    for path in garbage:
        path.write_bytes(b"not a pickle " * 20)
    tmpdir = workspace.temp_dir("tmp-damaged")
    report = workspace.run(copy, tmpdir, numba_cache_dir=False)
    assert report["result"] == built[1]["result"]
    assert report["misses"] > 0
    assert len(report["warnings"]) == 1 and "unreadable" in report["warnings"][0]
    for path in truncated:
        assert path.stat().st_size > 100
    for path in garbage:
        with open(path, "rb") as f:
            assert pickle.load(f)  # the numba version the index was written with
    again = workspace.run(copy, tmpdir, numba_cache_dir=False)
    assert again["result"] == built[1]["result"]
    assert again["hits"] > 0 and again["misses"] == 0 and not again["warnings"]


KERNEL = textwrap.dedent(
    """
    from skrank._jit import njit


    @njit(cache=True)
    def plus_one(x):
        return x + 1


    @njit(cache=True)
    def times_two(x):
        return 2 * x


    @njit("float64(float64)", cache=True)
    def square(x):
        return x * x
    """
)


_MODULE_NUMBER = itertools.count()


@pytest.fixture
def kernel_file(tmp_path, monkeypatch):
    """A module of two cached kernels, importable afresh by :func:`_load`, and the warning flag reset."""
    path = tmp_path / "kernels.py"
    path.write_text(KERNEL)
    monkeypatch.setattr(_numba_cache, "_warned", False)
    monkeypatch.delenv("NUMBA_CACHE_DIR", raising=False)
    monkeypatch.setattr(_numba_cache.config, "CACHE_DIR", "")
    return path


def _load(path):
    spec = importlib.util.spec_from_file_location(f"_skrank_cache_kernels_{next(_MODULE_NUMBER)}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_no_writable_folder_warns_once_and_compiles(kernel_file, monkeypatch):
    monkeypatch.setattr(_numba_cache, "_is_writable_folder", lambda path: False)
    monkeypatch.setattr(_numba_cache, "_private_temp_root", lambda create: None)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        module = _load(kernel_file)
        assert module.plus_one(1) == 2
        assert module.times_two(2) == 4
        assert module.plus_one(1.5) == 2.5
    messages = [str(w.message) for w in caught if issubclass(w.category, NumbaWarning)]
    assert len(messages) == 1 and "no writable folder" in messages[0]
    assert module.plus_one.stats.cache_path is None
    assert not list(kernel_file.parent.rglob("*.nb[ic]"))


def test_damaged_entries_in_process(kernel_file):
    module = _load(kernel_file)
    assert module.plus_one(1) == 2 and module.times_two(3) == 6
    pycache = kernel_file.parent / "__pycache__"
    (data,) = pycache.glob("kernels.plus_one-*.nbc")
    data.write_bytes(data.read_bytes()[:50])
    (index,) = pycache.glob("kernels.times_two-*.nbi")
    index.write_bytes(b"not a pickle")
    module = _load(kernel_file)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert module.plus_one(1) == 2 and module.times_two(3) == 6
    assert len([w for w in caught if issubclass(w.category, NumbaWarning)]) == 1
    assert sum(module.plus_one.stats.cache_misses.values()) == 1
    assert sum(module.times_two.stats.cache_misses.values()) == 1
    module = _load(kernel_file)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert module.plus_one(1) == 2 and module.times_two(3) == 6
    assert sum(module.plus_one.stats.cache_hits.values()) == 1
    assert sum(module.times_two.stats.cache_hits.values()) == 1


def test_private_temporary_folder_must_be_the_users_alone(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    assert _numba_cache._private_temp_root(create=False) is None
    root = _numba_cache._private_temp_root(create=True)
    assert root is not None and stat.S_IMODE(os.stat(root).st_mode) == 0o700
    assert _numba_cache._private_temp_root(create=False) == root
    os.chmod(root, 0o777)
    assert _numba_cache._private_temp_root(create=True) is None
    os.rmdir(root)
    os.symlink(tmp_path, root)
    assert _numba_cache._private_temp_root(create=True) is None
    os.unlink(root)
    if os.geteuid() == 0:
        os.mkdir(root, 0o700)
        os.chown(root, 65534, -1)
        assert _numba_cache._private_temp_root(create=True) is None


def test_njit_without_cache_and_with_signatures(kernel_file):
    plain = _jit.njit(lambda x: x + 1)
    assert isinstance(plain, Dispatcher) and plain(1) == 2
    assert not isinstance(plain._cache, _numba_cache._FallbackCache)
    module = _load(kernel_file)
    assert isinstance(module.square._cache, _numba_cache._FallbackCache)
    assert len(module.square.overloads) == 1 and module.square(3.0) == 9.0
    assert list(kernel_file.parent.glob("__pycache__/kernels.square-*.nbc"))
    with pytest.raises(TypeError):
        module.square(1j)


def test_an_edit_to_a_callee_file_invalidates_the_kernels_that_inline_it(workspace, built):
    # the kernels of the datafits and solvers inline the losses' kernels: an edit to losses.py must
    # not leave their cached code in use (Numba's own stamp looks at the kernel's file only)
    copy = workspace.copy("edited-callee", cache_from=built[0])
    losses = copy / "skrank" / "losses.py"
    losses.write_text(losses.read_text() + "\n# an edit: the compiled callers are stale now\n")
    report = workspace.run(copy, workspace.temp_dir("tmp-edited"), numba_cache_dir=False)
    assert report["result"] == built[1]["result"]
    assert report["hits"] == 0 and report["misses"] > 0
    again = workspace.run(copy, workspace.temp_dir("tmp-edited-again"), numba_cache_dir=False)
    assert again["hits"] > 0 and again["misses"] == 0
