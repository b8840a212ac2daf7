"""Robustness probe of the skrank estimators: a seeded sweep of cases, each fitted under a time limit.

The cases, their references and the verdict of each are those of
``tests/robustness_cases.py`` (shared with ``tests/test_robustness.py``):
NaN and infinities in ``X``, ``y`` and ``sample_weight``; features scaled
from 1e-12 to 1e12; weights from 1e-200 to 1e300; degenerate data (one
class, ``d > n``, duplicated rows, constant features); dense, sparse and
Dask inputs; determinism (twice in one process, and again in a fresh
process); ``partial_fit`` streams; every estimator and solver.  Each case
ends ``OK`` (a fit within the stated tolerance of its reference), ``clear
error`` (a ValueError or TypeError of skrank or scikit-learn that names the
problem) or ``bad`` (anything else, a time-out included).

Run::

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/probe_robustness.py            # the full sweep
    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/probe_robustness.py --quick    # a small subset
    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/probe_robustness.py --case streams-0012

It prints the table (area, cases, OK, clear error, bad), every bad case
with a one-line reproduction, and the command that reproduces the run.
"""

import argparse
import collections
import json
import multiprocessing
import os
import subprocess
import sys
import time
from multiprocessing.connection import wait

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
TESTS = os.path.join(ROOT, "tests")
for path in (ROOT, TESTS):
    if path not in sys.path:
        sys.path.insert(0, path)

import robustness_cases as rc  # noqa: E402

#: Cases of each area in the full sweep (at least 1,000 in all).
FULL_COUNTS = {"nan_inf": 600, "feature_scale": 600, "weight_scale": 500, "degenerate": 500,
               "input_kind": 400, "determinism": 240, "streams": 360, "solvers": 500, "conventions": 120,
               "constant_model": 120, "silent_wrong": 40, "messages": 160}
#: ``--quick`` runs every QUICK_STRIDE-th case of the full sweep.
QUICK_STRIDE = 16


def select_cases(args):
    """The cases of the run: the full sweep, or every ``QUICK_STRIDE``-th case, of the chosen areas."""
    cases = rc.generate_cases(FULL_COUNTS, seed=args.seed)
    if args.area:
        unknown = set(args.area) - set(rc.AREAS)
        if unknown:
            raise SystemExit(f"unknown area(s) {sorted(unknown)}; expected some of {list(rc.AREAS)}")
        cases = [c for c in cases if c["area"] in args.area]
    if args.quick:
        cases = [c for c in cases if int(c["id"].rsplit("-", 1)[1]) % QUICK_STRIDE == 0]
    return cases


# --------------------------------------------------------------------------- the worker pool
def _worker(conn):
    """Run the cases sent on ``conn`` one at a time and send back their outcomes."""
    import warnings

    warnings.simplefilter("ignore")  # the verdicts record warnings themselves
    while True:
        case = conn.recv()
        if case is None:
            return
        conn.send((case["id"], rc.run_case(case).to_dict()))


class Pool:
    """Worker processes, each running one case at a time; a case over ``timeout`` seconds is killed.

    A killed worker (time-out, or a crash of the interpreter) is replaced
    and its case reported ``bad``.
    """

    def __init__(self, jobs, timeout):
        self.ctx = multiprocessing.get_context("spawn")
        self.jobs, self.timeout = jobs, timeout
        self.workers = []

    def _start(self):
        parent, child = self.ctx.Pipe()
        process = self.ctx.Process(target=_worker, args=(child,), daemon=True)
        process.start()
        child.close()
        return {"process": process, "conn": parent, "case": None, "since": 0.0}

    def run(self, cases, report):
        """Run ``cases``, calling ``report(case, outcome)`` as each ends."""
        queue = collections.deque(cases)
        self.workers = [self._start() for _ in range(min(self.jobs, len(cases)))]
        try:
            while queue or any(w["case"] is not None for w in self.workers):
                for w in self.workers:
                    if w["case"] is None and queue:
                        w["case"], w["since"] = queue.popleft(), time.monotonic()
                        w["conn"].send(w["case"])
                busy = [w for w in self.workers if w["case"] is not None]
                ready = wait([w["conn"] for w in busy] + [w["process"].sentinel for w in busy], timeout=1.0)
                now = time.monotonic()
                for i, w in enumerate(self.workers):
                    if w["case"] is None:
                        continue
                    if w["conn"] in ready:
                        try:
                            _, outcome = w["conn"].recv()
                        except EOFError:
                            outcome = None
                        if outcome is not None:
                            report(w["case"], outcome)
                            w["case"] = None
                            continue
                    dead = w["process"].sentinel in ready and not w["process"].is_alive()
                    late = now - w["since"] > self.timeout
                    if dead or late:
                        cause = (f"hang: no result within {self.timeout:g} s" if late
                                 else f"worker died (exit code {w['process'].exitcode})")
                        report(w["case"], rc.Outcome("bad", cause, "", seconds=now - w["since"]).to_dict())
                        self._stop(w)
                        self.workers[i] = self._start()
        finally:
            for w in self.workers:
                self._stop(w, gently=True)

    @staticmethod
    def _stop(w, gently=False):
        if gently and w["process"].is_alive():
            try:
                w["conn"].send(None)
            except (BrokenPipeError, OSError):
                pass
            w["process"].join(2.0)
        if w["process"].is_alive():
            w["process"].kill()  # this probe's own worker, by its handle
            w["process"].join()


# --------------------------------------------------------------------------- determinism across processes
def cross_process(cases, outcomes, timeout):
    """Refit the determinism cases in one fresh interpreter and compare the fingerprints.

    Turns an ``OK`` determinism case into ``bad`` when the fresh process
    fits different arrays.
    """
    todo = [c for c in cases if c["area"] == "determinism" and outcomes[c["id"]]["status"] == "ok"
            and outcomes[c["id"]]["fingerprint"]]
    if not todo:
        return 0
    env = dict(os.environ, PYTHONHASHSEED="12345")
    code = ("import json, sys, warnings; warnings.simplefilter('ignore'); sys.path[:0] = [%r, %r]; "
            "import robustness_cases as rc; cases = json.load(sys.stdin); "
            "print(json.dumps({c['id']: rc.fresh_fingerprint(c) for c in cases}))" % (ROOT, TESTS))
    try:
        done = subprocess.run([sys.executable, "-c", code], input=json.dumps(todo), capture_output=True,
                              text=True, env=env, timeout=max(timeout, 5 * len(todo)), check=True)
        fresh = json.loads(done.stdout.strip().splitlines()[-1])
    except (subprocess.SubprocessError, ValueError, IndexError) as exc:
        for c in todo:
            outcomes[c["id"]].update(status="bad", cause="fresh process failed to refit",
                                     detail=str(exc)[-500:])
        return len(todo)
    for c in todo:
        if fresh.get(c["id"]) != outcomes[c["id"]]["fingerprint"]:
            outcomes[c["id"]].update(status="bad",
                                     cause="non-deterministic: another process fits other arrays",
                                     detail=f"{outcomes[c['id']]['fingerprint']} vs {fresh.get(c['id'])}")
    return len(todo)


# --------------------------------------------------------------------------- report
def table(cases, outcomes):
    """Rows ``(area, cases, OK, clear error, bad)`` and the total."""
    rows = []
    for area in rc.AREAS:
        mine = [outcomes[c["id"]]["status"] for c in cases if c["area"] == area]
        if mine:
            rows.append((area, len(mine), mine.count("ok"), mine.count("error"), mine.count("bad")))
    total = tuple(sum(r[i] for r in rows) for i in range(1, 5))
    return rows, ("total",) + total


def print_report(cases, outcomes, command, seconds):
    rows, total = table(cases, outcomes)
    width = max(len(r[0]) for r in rows + [total])
    head = f"{'area':<{width}}  {'cases':>6}  {'OK':>6}  {'clear error':>11}  {'bad':>5}"
    print(head)
    print("-" * len(head))
    for r in rows + [total]:
        if r is total:
            print("-" * len(head))
        print(f"{r[0]:<{width}}  {r[1]:>6}  {r[2]:>6}  {r[3]:>11}  {r[4]:>5}")
    warned = sum(1 for c in cases if outcomes[c["id"]]["status"] == "ok"
                 and outcomes[c["id"]]["cause"].startswith("off the reference"))
    print(f"\nOK includes {warned} fits off their reference that said so with a ConvergenceWarning.")
    bad = [c for c in cases if outcomes[c["id"]]["status"] == "bad"]
    if bad:
        print(f"\n{len(bad)} bad case(s), by cause:")
        by_cause = collections.defaultdict(list)
        for c in bad:
            by_cause[outcomes[c["id"]]["cause"]].append(c)
        for cause, group in sorted(by_cause.items(), key=lambda item: -len(item[1])):
            print(f"\n[{len(group)}] {cause}")
            for c in group:
                detail = " ".join(outcomes[c["id"]]["detail"].split())[:160]
                print(f"  {c['id']} ({c['kind']}) {rc.describe(c['config'])}")
                print(f"      {detail}")
                print(f"      {rc.reproduction(c)}")
    slow = sorted(cases, key=lambda c: -outcomes[c["id"]]["seconds"])[:3]
    print("\nslowest cases: " + ", ".join(f"{c['id']} {outcomes[c['id']]['seconds']:.1f} s" for c in slow))
    print(f"probe time: {seconds:.0f} s")
    print(f"reproduce this run: {command}")


def run_one(case_id, seed):
    """Run one case in this process and print everything about it."""
    cases = {c["id"]: c for c in rc.generate_cases(FULL_COUNTS, seed=seed)}
    if case_id not in cases:
        raise SystemExit(f"no case {case_id!r}; an id is an area and a number, such as nan_inf-0007")
    case = cases[case_id]
    print(json.dumps(case, indent=1, sort_keys=True))
    print(rc.describe(case["config"]))
    outcome = rc.run_case(case)
    print(f"\nstatus: {outcome.status}\ncause: {outcome.cause}\ndetail:\n{outcome.detail}")
    print(f"seconds: {outcome.seconds:.2f}")
    if case["area"] == "determinism" and outcome.status == "ok":
        env = dict(os.environ, PYTHONHASHSEED="12345")
        code = ("import json, sys; sys.path[:0] = [%r, %r]; import robustness_cases as rc; "
                "print(rc.fresh_fingerprint(json.loads(sys.argv[1])))" % (ROOT, TESTS))
        fresh = subprocess.run([sys.executable, "-c", code, json.dumps(case)], capture_output=True, text=True,
                               env=env).stdout.strip()
        print(f"fingerprint here {outcome.fingerprint}, in a fresh process {fresh}")
    return 0 if outcome.status != "bad" else 1


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help=f"every {QUICK_STRIDE}th case only")
    parser.add_argument("--area", action="append", help="run this area only (repeatable)")
    parser.add_argument("--jobs", type=int, default=2, help="worker processes (default 2)")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds before a case is a hang (60)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the case generator (default 0)")
    parser.add_argument("--json", help="write every case and its outcome to this file")
    parser.add_argument("--case", help="run this case id alone, in this process, and show its details")
    args = parser.parse_args(argv)
    if args.case:
        return run_one(args.case, args.seed)
    cases = select_cases(args)
    command = "OMP_NUM_THREADS=1 .venv/bin/python benchmarks/probe_robustness.py" + "".join(
        [" --quick" if args.quick else ""] + [f" --area {a}" for a in args.area or []]
        + [f" --seed {args.seed}" if args.seed else ""] + [f" --jobs {args.jobs}"])
    print(f"{len(cases)} cases, {args.jobs} worker(s), time limit {args.timeout:g} s per case", flush=True)
    outcomes = {}
    start = time.perf_counter()
    progress = {"done": 0}

    def report(case, outcome):
        outcomes[case["id"]] = outcome
        progress["done"] += 1
        if progress["done"] % 100 == 0:
            print(f"  {progress['done']}/{len(cases)} cases, {time.perf_counter() - start:.0f} s", flush=True)

    Pool(args.jobs, args.timeout).run(cases, report)
    cross_process(cases, outcomes, args.timeout)
    seconds = time.perf_counter() - start
    print()
    print_report(cases, outcomes, command, seconds)
    if args.json:
        with open(args.json, "w") as handle:
            json.dump({"command": command, "seconds": seconds,
                       "table": [list(r) for r in table(cases, outcomes)[0]],
                       "cases": [dict(case=c, outcome=outcomes[c["id"]], reproduction=rc.reproduction(c))
                                 for c in cases]}, handle, indent=1)
    return 1 if any(o["status"] == "bad" for o in outcomes.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
