"""Where a fit on an array-API ``X`` spends its time: in ``X``'s namespace, on the host, in the rank step.

A fit on an array of another array-API library (CuPy on a GPU; here
``array_api_strict``, the standard on a CPU, which runs the same code path)
computes the products with ``X`` and the arithmetic on vectors of length
``n`` in ``X``'s namespace
(:class:`skrank.backends.array_api_design.ArrayAPIDesign`); the rank step
runs on the host in NumPy (and compiled kernels), its keys going down and
its weights coming back.  Per estimator (defaults, on
``n x d`` synthetic data, ``y = 1(x . w + noise > 0)``):

* ``RankADMMClassifier(risk="superquantile")`` and
  ``SpectralRiskClassifier(risk="superquantile")``: the certified
  Newton method (:mod:`skrank.solvers.full_batch.newton`);
* ``PartialAUCClassifier()`` and ``AveragePrecisionClassifier()``: L-BFGS on their datafits.

Columns: the solver; its ``n_iter_``; ``it``, the iterations the counts
are per: Newton steps, or for L-BFGS evaluations of the scores ``X w``
(its ``n_iter_`` leaves out the line searches and the fit of a start);
passes over ``X`` (the design's products, counted here, a Gram matrix or a
block sum as one); host transfers of ``n``-vectors (calls of
``to_numpy``/``to_namespace`` whose array has length ``n``: to the host,
to ``X``'s device) and of partial ones (gathered rows, the members of
pooled blocks: length between ``d + 1`` and ``n``), per iteration; the
bytes they move per iteration; and the shares of the fit's CPU time
(``time.process_time``, exclusive: a wrapped function's time less that of
the wrapped ones it calls):

* ``X ns``: the products in ``X``'s namespace (the design's methods in
  ``_PRODUCTS``), every operation of ``array_api_strict`` that computes
  (its functions, but not ``asarray`` and ``from_dlpack``, and the
  arithmetic, comparison and indexing operators of its arrays, but not
  ``__float__``: a number brought to the host is the caller's), wherever
  the fit calls it, the checks of ``X`` where it lives and the scores of
  the fitted model;
* ``copies``: the conversions themselves (``to_numpy``, ``to_namespace``,
  and the design's ``to_host``, ``to_native`` and ``take`` around them);
* ``rank``: the rank step: sorts and PAVAs (``pooled_projection``,
  ``resort_scores``, the risk's value of sorted losses), the pAUC's
  re-sorted range sums and the AP surrogate (a sort and prefix sums,
  compiled), and the training metric of the anchored fits (the partial
  AUC or the average precision of ``n`` scores: a sort and cumulative
  sums);
* ``pxp``: the Newton direction (``p x p`` solves, coordinate descent);
* ``host n``: the rest: what arithmetic on ``n``-vectors is left on the
  host (the gathers and scatters around the rank step, the block term's
  weights, the training-metric rule's points) with the estimator's own
  work around the solver and Python's overhead; ``host n of non-X``: ``host n`` over the time
  outside ``X``'s namespace, what it would weigh once the products are
  fast (a GPU); ``outside solver``: the part of the fit
  spent before and after the estimator's ``_run_solver`` (checks, labels;
  Platt's calibration runs within it).

``host share`` is ``copies + pxp + host n``, the time outside ``X``'s
namespace less the rank step (under 10% leaves little to gain from moving it).  ``if moved``
estimates what would stay on the host if every ``n``-vector operation ran
in ``X``'s namespace with only the sort and the PAVA on the host: ``rank +
pxp`` plus two ``n``-vector copies per rank step (the keys down, the
weights up), charged at the measured cost per byte of the copies.  Timings
are on this CPU, with NumPy behind ``array_api_strict``: the shares say
where the work is, not what a GPU would make of it.  The NumPy fit of the
same data is the reference: its CPU seconds and the relative gap of the
objectives.

    OMP_NUM_THREADS=1 python benchmarks/host_share.py [--n 200000] [--d 50]
        [--estimators rank_admm,spectral,partial_auc,average_precision] [--quick]
"""

import os

os.environ.setdefault("SCIPY_ARRAY_API", "1")  # for scikit-learn's array API dispatch

import argparse  # noqa: E402
import functools  # noqa: E402
import time  # noqa: E402
import types  # noqa: E402
import warnings  # noqa: E402

import numpy as np  # noqa: E402

import skrank.backends.array_api_design as _aad  # noqa: E402
import skrank.backends.arrays as _arrays  # noqa: E402
import skrank.datafits.average_precision as _ap  # noqa: E402
import skrank.datafits.partial_auc as _pauc  # noqa: E402
import skrank.datafits.rank_step as _rank_step  # noqa: E402
import skrank.estimators._fit_template as _fit_template  # noqa: E402
import skrank.estimators._input_checks as _input_checks  # noqa: E402
import skrank.estimators._platt as _platt  # noqa: E402
import skrank.estimators._streams as _streams  # noqa: E402
import skrank.estimators._tasks as _tasks  # noqa: E402
from skrank import AveragePrecisionClassifier, PartialAUCClassifier, SpectralRiskClassifier  # noqa: E402
from skrank.datafits.penalty_model import PenaltyModel  # noqa: E402
from skrank.datafits.smoothed_rank_risk import SmoothedRankRisk  # noqa: E402
from skrank.estimators import RankADMMClassifier  # noqa: E402

ESTIMATORS = {
    "rank_admm": ("RankADMMClassifier(risk='superquantile')",
                  lambda: RankADMMClassifier(risk="superquantile")),
    "spectral": ("SpectralRiskClassifier(risk='superquantile')",
                 lambda: SpectralRiskClassifier(risk="superquantile")),
    "partial_auc": ("PartialAUCClassifier()", PartialAUCClassifier),
    "average_precision": ("AveragePrecisionClassifier()", AveragePrecisionClassifier),
}

#: The design's methods that read ``X`` in its namespace; those marked True are one pass each.
_PRODUCTS = {"_times": True, "_transposed_times": True, "_native_times": True,
             "_native_transposed_times": True, "weighted_gram": False, "_gram_of_roots": True,
             "_gram_of_rows": True, "left_product": True, "class_moments": True,
             "_squared_column_sums": True, "rows": False, "_rows_at": False, "native_gram": False}
#: The products that evaluate the scores ``X w`` (to the host, or kept in ``X``'s namespace).
_SCORES = ("_times", "_native_times")
#: The design's methods that move an ``n``-vector between the namespaces (the rank step's keys and weights).
_MOVES = ("to_host", "to_native", "take")
#: The functions of ``X``'s library that are conversions, not arithmetic (and its flags and dtypes).
_NOT_ARITHMETIC = {"asarray", "from_dlpack", "finfo", "iinfo", "isdtype", "can_cast", "result_type",
                   "broadcast_shapes", "get_array_api_strict_flags", "set_array_api_strict_flags",
                   "reset_array_api_strict_flags"}
#: The operators of ``X``'s arrays that compute on their device (not ``__float__``, ``__array__``...).
_ARRAY_OPERATORS = tuple(
    f"__{prefix}{op}__" for op in ("add", "sub", "mul", "truediv", "floordiv", "pow", "mod", "matmul", "and",
                                   "or", "xor", "lshift", "rshift")
    for prefix in ("", "r", "i")) + ("__neg__", "__pos__", "__abs__", "__invert__", "__eq__", "__ne__",
                                     "__lt__", "__le__", "__gt__", "__ge__", "__getitem__", "__setitem__")
#: Other functions that run in ``X``'s namespace.
_X_FUNCTIONS = ((_arrays, "check_where_it_lives"), (_arrays, "linear_scores"))
#: The rank step: sorts, PAVAs and the sorted sums of the rank objectives (module, attribute).
_RANK_FUNCTIONS = ((_rank_step, "pooled_projection"), (_rank_step, "resort_scores"),
                   (_pauc, "range_loss_and_score_gradients"), (_ap, "ap_surrogate_and_score_gradients"),
                   (_pauc, "region_area"), (_ap, "average_precision"))
#: The functions of which one call is one rank step (a sort and a PAVA or sorted sums of ``n`` values).
_RANK_STEPS = ("pooled_projection", "risk_value", "range_loss_and_score_gradients",
               "ap_surrogate_and_score_gradients", "region_area", "average_precision")
#: The modules whose bindings of the conversions are wrapped.
_CONVERSION_MODULES = (_aad, _arrays, _fit_template, _input_checks, _streams, _tasks, _platt)


class Ledger:
    """Exclusive CPU time per category and the conversions of one fit (see :func:`instrument`).

    Parameters
    ----------
    n : int
        The number of rows: an array of length ``n`` is an ``n``-vector.
    p : int
        ``d + 1``: a longer array that is not an ``n``-vector is a partial one.
    """

    def __init__(self, n, p):
        self.n, self.p = n, p
        self.seconds = dict.fromkeys(("x", "copies", "rank", "pxp"), 0.0)
        self.passes = self.rank_calls = 0
        #: Calls of each wrapped function by name.
        self.calls = {}
        #: ``(direction, kind, shape, nbytes, where)`` of each conversion: ``"host"`` or ``"device"``;
        #: ``"n"`` (an ``n``-vector), ``"part"`` (length between ``p`` and ``n``) or ``"small"``
        self.transfers = []
        self._stack = []  # [category, start, time of wrapped callees]

    def enter(self, category):
        self._stack.append([category, time.process_time(), 0.0])

    def leave(self):
        category, start, inner = self._stack.pop()
        spent = time.process_time() - start
        self.seconds[category] += spent - inner
        if self._stack:
            self._stack[-1][2] += spent

    def where(self):
        """The innermost wrapped product or function running now (for the conversions' records)."""
        return getattr(self, "_where", "")

    def record(self, direction, a):
        shape = tuple(np.shape(a))
        length = shape[0] if shape else 1
        kind = "n" if len(shape) == 1 and length == self.n else "part" if length > self.p else "small"
        self.transfers.append((direction, kind, shape, int(np.asarray(a).nbytes), self.where()))

    def count(self, direction=None, kind=None):
        return sum(1 for t in self.transfers if direction in (None, t[0]) and kind in (None, t[1]))

    def nbytes(self, kinds=("n", "part")):
        return sum(t[3] for t in self.transfers if t[1] in kinds)


_ledger = [None]


def _timed(category, fn, name, passes=False):
    @functools.wraps(fn)
    def run(*args, **kwargs):
        ledger = _ledger[0]
        if ledger is None:
            return fn(*args, **kwargs)
        if passes:
            ledger.passes += 1
        ledger.calls[name] = ledger.calls.get(name, 0) + 1
        if name in _RANK_STEPS and not any(frame[0] == "rank" for frame in ledger._stack):
            ledger.rank_calls += 1
        outer_where = ledger.where()
        ledger._where = name
        ledger.enter(category)
        try:
            return fn(*args, **kwargs)
        finally:
            ledger.leave()
            ledger._where = outer_where
    return run


def _in_namespace(fn):
    """``fn``, an operation of ``X``'s library, with its time charged to ``X``'s namespace."""
    @functools.wraps(fn)
    def run(*args, **kwargs):
        ledger = _ledger[0]
        if ledger is None:
            return fn(*args, **kwargs)
        ledger.enter("x")
        try:
            return fn(*args, **kwargs)
        finally:
            ledger.leave()
    return run


def _conversion(fn, direction):
    @functools.wraps(fn)
    def run(a, *args, **kwargs):
        ledger = _ledger[0]
        if ledger is None:
            return fn(a, *args, **kwargs)
        external = direction == "device" or not isinstance(a, (np.ndarray, np.generic, float, int))
        ledger.enter("copies")
        try:
            out = fn(a, *args, **kwargs)
        finally:
            ledger.leave()
        if external:  # to_numpy passes NumPy arrays through: no copy between namespaces
            ledger.record(direction, out if direction == "host" else a)
        return out
    return run


def instrument(xp=None):
    """Wrap the conversions, the design's products, the rank step and ``xp`` (recorded while a ledger is set).

    The functions are wrapped where they are looked up (module attributes,
    the design's class, the class of ``xp``'s arrays), not edited:
    ``to_numpy`` and ``to_namespace`` in every module that binds them, the
    methods of :class:`~skrank.backends.array_api_design.ArrayAPIDesign`,
    the rank step's functions in the modules that call them, and the
    functions and operators of ``xp`` (the namespace of ``X``) that compute,
    whose time is ``X``'s namespace's wherever the fit calls them.  Returns a
    function that puts the originals back.
    """
    saved = []

    def wrap(owner, name, wrapper):
        saved.append((owner, name, vars(owner)[name]))
        setattr(owner, name, wrapper)

    to_host, to_device = _conversion(_aad.to_numpy, "host"), _conversion(_aad.to_namespace, "device")
    for module in _CONVERSION_MODULES:
        if hasattr(module, "to_numpy"):
            wrap(module, "to_numpy", to_host)
        if hasattr(module, "to_namespace"):
            wrap(module, "to_namespace", to_device)
    for name, is_pass in _PRODUCTS.items():
        wrap(_aad.ArrayAPIDesign, name, _timed("x", vars(_aad.ArrayAPIDesign)[name], name, is_pass))
    for module, name in _X_FUNCTIONS:
        wrap(module, name, _timed("x", getattr(module, name), name))
    for module, name in _RANK_FUNCTIONS:
        wrap(module, name, _timed("rank", getattr(module, name), name))
    for name in _MOVES:
        wrap(_aad.ArrayAPIDesign, name, _timed("copies", vars(_aad.ArrayAPIDesign)[name], name))
    if xp is not None:
        for name, fn in vars(xp).items():
            computes = not name.startswith("_") and name not in _NOT_ARITHMETIC
            if isinstance(fn, types.FunctionType) and computes:
                wrap(xp, name, _in_namespace(fn))
        array = type(xp.asarray(0.0))
        for name in _ARRAY_OPERATORS:
            if name in vars(array):
                wrap(array, name, _in_namespace(vars(array)[name]))
    wrap(SmoothedRankRisk, "risk_value", _timed("rank", SmoothedRankRisk.risk_value, "risk_value"))
    wrap(PenaltyModel, "direction", _timed("pxp", PenaltyModel.direction, "direction"))

    def restore():
        for owner, name, original in reversed(saved):
            setattr(owner, name, original)

    return restore


def synthetic(n, d, seed=0):
    """``n x d`` standard normal rows and labels ``1(x . w + noise > 0)``, ``||w|| = 10 sqrt(1/3)``."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    w = 10.0 * np.linspace(-1.0, 1.0, d) / np.sqrt(d)
    return X, (X @ w + rng.normal(size=n) > 0.0).astype(np.int64)


def _fit(est, X, y, dispatch):
    import sklearn

    with warnings.catch_warnings(), sklearn.config_context(array_api_dispatch=dispatch):
        warnings.simplefilter("ignore")
        start = time.process_time()
        est.fit(X, y)
        return time.process_time() - start


def measure(key, X, y, xp, device):
    """One estimator: the NumPy fit, then the array-API fit under a :class:`Ledger`; a dict of the row."""
    label, make = ESTIMATORS[key]
    reference = make()
    numpy_seconds = _fit(reference, X, y, False)
    est = make()
    n, d = X.shape
    ledger = Ledger(n, d + 1)
    solver_seconds = [0.0]
    run_solver = est._run_solver

    def timed_solver(*args, **kwargs):
        start = time.process_time()
        try:
            return run_solver(*args, **kwargs)
        finally:
            solver_seconds[0] += time.process_time() - start

    est._run_solver = timed_solver
    Xd, yd = xp.asarray(X, device=device), xp.asarray(y, device=device)
    _ledger[0] = ledger
    try:
        total = _fit(est, Xd, yd, True)
    finally:
        _ledger[0] = None
        del est._run_solver
    # per Newton step; per evaluation of the scores for L-BFGS (whose n_iter_ leaves out the line
    # searches' evaluations and the fits of a start)
    evaluations = sum(ledger.calls.get(name, 0) for name in _SCORES)
    iterations = max(int(np.sum(est.n_iter_)) if est._solver == "newton" else evaluations, 1)
    s = ledger.seconds
    host_n = max(total - sum(s.values()), 0.0)
    copies = ledger.transfers
    per_byte = s["copies"] / max(sum(t[3] for t in copies), 1)
    moved = s["rank"] + s["pxp"] + 2 * ledger.rank_calls * 8 * n * per_byte
    return dict(
        estimator=label, solver=getattr(est, "_solver", "?"), iterations=iterations,
        n_iter=int(np.sum(est.n_iter_)), passes=ledger.passes,
        to_host=ledger.count("host", "n") / iterations, to_device=ledger.count("device", "n") / iterations,
        partial=ledger.count(None, "part") / iterations, mib=ledger.nbytes() / iterations / 2**20,
        per_pass=(ledger.count(None, "n") + ledger.count(None, "part")) / max(ledger.passes, 1),
        seconds=total, x=s["x"] / total, copies=s["copies"] / total, rank=s["rank"] / total,
        pxp=s["pxp"] / total, host_n=host_n / total, outside=(total - solver_seconds[0]) / total,
        host_share=(s["copies"] + s["pxp"] + host_n) / total, if_moved=moved / total,
        host_of_rest=host_n / max(total - s["x"], 1e-300),
        numpy_seconds=numpy_seconds,
        gap=abs(est.objective_ - reference.objective_) / max(abs(reference.objective_), 1e-300),
        ledger=ledger,
    )


COLUMNS = ("estimator", "solver", "n_iter_", "it", "passes", "n-vectors to host / it", "n-vectors to X / it",
           "partial / it", "MiB / it", "copies / pass", "CPU s", "X ns", "rank", "copies", "pxp", "host n",
           "host n of non-X", "outside solver", "host share", "if moved", "NumPy CPU s", "gap to NumPy")


def row(r):
    cells = [r["estimator"], r["solver"], r["n_iter"], r["iterations"], r["passes"]]
    cells += [f"{r[k]:.2f}" for k in ("to_host", "to_device", "partial", "mib", "per_pass", "seconds")]
    cells += [f"{r['x']:.0%}", f"{r['rank']:.0%}", f"{r['copies']:.1%}", f"{r['pxp']:.1%}"]
    cells += [f"{r[k]:.0%}" for k in ("host_n", "host_of_rest", "outside", "host_share", "if_moved")]
    cells += [f"{r['numpy_seconds']:.2f}", f"{r['gap']:.1e}"]
    return "| " + " | ".join(str(c) for c in cells) + " |"


def where_transfers(ledger, iterations):
    """``where (direction, kind): count, MiB`` per iteration of the ``n``-scale conversions of a fit."""
    counts = {}
    for direction, kind, _, nbytes, where in ledger.transfers:
        if kind != "small":
            key = f"{where or 'outside the design'} ({'to host' if direction == 'host' else 'to X'}, {kind})"
            c, b = counts.get(key, (0, 0))
            counts[key] = (c + 1, b + nbytes)
    return ", ".join(f"{k}: {c / iterations:.2f} ({b / iterations / 2**20:.2f} MiB)"
                     for k, (c, b) in sorted(counts.items(), key=lambda kv: -kv[1][0]))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=200_000)
    parser.add_argument("--d", type=int, default=50)
    parser.add_argument("--estimators", default=",".join(ESTIMATORS))
    parser.add_argument("--quick", action="store_true", help="n = 5,000, d = 10 (for the tests)")
    args = parser.parse_args(argv)
    import array_api_strict as xp

    n, d = (5_000, 10) if args.quick else (args.n, args.d)
    keys = [k for k in args.estimators.split(",") if k]
    unknown = set(keys) - set(ESTIMATORS)
    if unknown:
        parser.error(f"unknown estimators {sorted(unknown)}; of {sorted(ESTIMATORS)}")
    restore = instrument(xp)
    try:
        device = xp.Device("device1")  # not the default device, as in tests/test_array_api.py
        warm_X, warm_y = synthetic(500, d, seed=1)
        for key in keys:  # compiled kernels and imports paid before the timings
            measure(key, warm_X, warm_y, xp, device)
        X, y = synthetic(n, d)
        print(f"array_api_strict, X {n} x {d} on {device}; shares of the array-API fit's CPU time\n")
        print("| " + " | ".join(COLUMNS) + " |")
        print("|" + "---|" * len(COLUMNS))
        results = [measure(key, X, y, xp, device) for key in keys]
    finally:
        restore()
    for r in results:
        print(row(r), flush=True)
    print("\nn-scale conversions per iteration, by where they happen:")
    for r in results:
        print(f"* {r['estimator']}: {where_transfers(r['ledger'], r['iterations'])}")
    command = "OMP_NUM_THREADS=1 python benchmarks/host_share.py"
    command += " --quick" if args.quick else f" --n {args.n} --d {args.d}"
    if keys != list(ESTIMATORS):
        command += f" --estimators {','.join(keys)}"
    print("\ncommand: " + command)
    return results


if __name__ == "__main__":
    main()
