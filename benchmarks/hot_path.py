"""Hot-path cost: what each kernel instruction costs per call, beside one bare ctypes call.

Every row is timed inside a launched kernel (instructions need a block) of rank 0 of a 2-rank run
(``GetRemotePtr`` needs a peer), in the same process and the same run as the baseline: one bare
``__atomic_fetch_add_4(c_void_p, 1, 5)`` through ``ctypes.PyDLL`` with no ``argtypes``, on a
word of the benchmark's own, which is the call shmcomm's fast path makes. A row's ratio is its
per-call time over the baseline's, so what the box's speed and load do to both cancels out.

Timing is timeit-style: a loop of ``--number`` calls is one sample, every row takes one sample in
turn (rows interleaved, so load falls on all of them alike), ``--samples`` times; a row reports the
min and the median per call. Every name a statement uses is a local of its loop, so the loop
overhead (the ``pass`` row) is the same for every row and included in all of them.

    python benchmarks/hot_path.py --quick                 # < 20 s
    python benchmarks/hot_path.py --json results/hot_path.json
"""

from __future__ import annotations

import argparse
import ctypes
import ctypes.util
import itertools
import json
import os
import re
import sys
import time
from typing import Any

import shmcomm
from shmcomm.comm import TNOTIFY, TTEST, TWAIT, GetRemotePtr, NotifyOp, Signal, Signal2D, WaitCmp

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # _bench beside this file
import _bench  # noqa: E402

SCHEMA = "shmcomm.bench.hot_path/1"
REGION = 4096  # words of the signal matrix this benchmark uses (any run of its own would do)
SEQ_CST = 5
BARE = "bare"

# (key, label, statement); every name in a statement is a local of its timing loop
ROWS: tuple[tuple[str, str, str], ...] = (
    ("pass", "empty loop (overhead in every row)", "pass"),
    (BARE, "bare ctypes __atomic_fetch_add_4 (PyDLL, c_void_p)", "fetch_add(cp, 1, 5)"),
    ("bare_load", "bare ctypes __atomic_load_4", "load(cp, 5)"),
    ("plain_read", "plain ctypes c_int32.value read", "cell.value"),
    ("tnotify_add", "TNOTIFY AtomicAdd, local signal", "TNOTIFY(sig_add, 1, NotifyOp.AtomicAdd)"),
    ("tnotify_set", "TNOTIFY Set, local signal", "TNOTIFY(sig_set, v, NotifyOp.Set)"),
    ("twait", "TWAIT satisfied (GE 0)", "TWAIT(sig_wait, 0, WaitCmp.GE)"),
    ("ttest", "TTEST (GE 0)", "TTEST(sig_wait, 0, WaitCmp.GE)"),
    ("signal_seen", "Signal(ptr), word already seen", "Signal(p_seen)"),
    ("ptr_add", "ptr + 1", "base + 1"),
    ("remote_ptr", "GetRemotePtr(ctx, ptr, r)", "GetRemotePtr(ctx, p_seen, r)"),
    ("seed_remote", "Signal(GetRemotePtr(ctx, base + r, r))", "Signal(GetRemotePtr(ctx, base + r, r))"),
    ("twait_2d", "TWAIT satisfied, Signal2D 1x8", "TWAIT(sig8, 0, WaitCmp.GE)"),
    ("wake_none", "futex wake of a word nobody sleeps on", "sig_wait.wake()"),
    ("enum_member", "NotifyOp.AtomicAdd (an enum member, as kernels name it)", "NotifyOp.AtomicAdd"),
)
# the ratios that matter, with their limits (the hot-path goals)
FACTS: tuple[tuple[str, str, float], ...] = (
    ("tnotify_add", "TNOTIFY", 3.0),
    ("twait", "satisfied TWAIT", 2.5),
    ("seed_remote", "Signal(GetRemotePtr(ctx, base + r, r))", 3.0),
)


def _bare_fetch_add() -> Any:
    """``__atomic_fetch_add_4`` bound as shmcomm's fast path binds it: PyDLL, no argtypes."""
    lib = ctypes.PyDLL(ctypes.util.find_library("atomic") or "libatomic.so.1")
    fn = getattr(lib, "__atomic_fetch_add_4")  # getattr: the name must not be mangled
    fn.restype = ctypes.c_int32
    load = getattr(lib, "__atomic_load_4")
    load.restype = ctypes.c_int32
    return fn, load


def _loop(stmt: str, names: list[str]) -> Any:
    """A function ``loop(n, *values)`` that runs ``stmt`` n times with ``names`` as locals and
    returns the elapsed seconds (timeit's template, with locals instead of globals)."""
    src = (f"def loop(_n, {', '.join(names)}):\n"
           "    _it = _repeat(None, _n)\n"
           "    _t0 = _perf()\n"
           "    for _ in _it:\n"
           f"        {stmt}\n"
           "    return _perf() - _t0\n")
    ns: dict[str, Any] = {"_repeat": itertools.repeat, "_perf": time.perf_counter}
    exec(compile(src, f"<hot_path {stmt}>", "exec"), ns)  # our own constant text
    return ns["loop"]


def _kernel(ctx, number: int, samples: int, out: dict) -> None:
    if ctx.rank != 0:
        return  # the peer only has to exist: its window is mapped in every rank
    fetch_add, load = _bare_fetch_add()
    word = (ctypes.c_int32 * 16)()  # the baseline's own word, outside any shmcomm window
    base = ctx.signal_base
    p_seen = base + REGION
    env = {
        "fetch_add": fetch_add, "load": load, "cp": ctypes.c_void_p(ctypes.addressof(word)),
        "cell": ctypes.c_int32.from_buffer(word, 4),
        "TNOTIFY": TNOTIFY, "TWAIT": TWAIT, "TTEST": TTEST, "Signal": Signal,
        "GetRemotePtr": GetRemotePtr, "NotifyOp": NotifyOp, "WaitCmp": WaitCmp,
        "sig_add": Signal(base + REGION + 16), "sig_set": Signal(base + REGION + 32), "v": 7,
        "sig_wait": Signal(base + REGION + 48), "sig8": Signal2D(base + REGION + 64, 1, 8),
        "p_seen": p_seen, "base": base, "ctx": ctx, "r": (ctx.rank + 1) % ctx.nranks,
    }
    Signal(p_seen)
    Signal(GetRemotePtr(ctx, base + env["r"], env["r"]))  # "already seen", like every later call
    loops = []
    for key, _label, stmt in ROWS:
        names = sorted(set(re.findall(r"[A-Za-z_]\w*", stmt)) & env.keys())
        loops.append((key, _loop(stmt, names), [env[n] for n in names]))
    for _key, fn, vals in loops:  # warm-up: first calls build caches, sites, ctypes thunks
        fn(max(1, number // 20), *vals)
    got: dict[str, list[float]] = {k: [] for k, _f, _v in loops}
    for _ in range(samples):
        for key, fn, vals in loops:
            got[key].append(fn(number, *vals) / number * 1e6)
    out.update(got)


def _host(rt, number: int, samples: int) -> dict[str, list[float]] | None:
    out: dict[str, list[float]] = {}
    rt.launch(_kernel, blocks=1, args=(number, samples, out))
    return out if rt.rank == 0 else None


def measure(number: int, samples: int) -> list[dict[str, Any]]:
    """Per-call µs of every row (``samples`` samples of ``number`` calls each), with ratios to
    the bare ctypes call of the same run."""
    res = shmcomm.run(_host, nranks=2, blocks=1, args=(number, samples), window_bytes=1 << 16,
                      timeout=170.0)
    per_call = res[0]
    stats = {k: _bench.Stats.of(v).as_dict() for k, v in per_call.items()}
    bare = stats[BARE]
    rows = []
    for key, label, stmt in ROWS:
        s = stats[key]
        rows.append({"key": key, "label": label, "stmt": stmt, "per_call_us": s,
                     "samples_us": per_call[key],
                     "ratio": {"min": s["min"] / bare["min"], "median": s["median"] / bare["median"]}})
    return rows


def facts(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    by_key = {r["key"]: r for r in rows}
    return [{"key": k, "what": what, "ratio": by_key[k]["ratio"]["median"], "limit": limit}
            for k, what, limit in FACTS]


def fact_lines(fs: list[dict[str, Any]]) -> list[str]:
    return [f"{f['what']} {f['ratio']:.1f}x a bare ctypes call (limit {f['limit']:g}x)" for f in fs]


def table(rows: list[dict[str, Any]]) -> str:
    w = max(len(r["label"]) for r in rows)
    lines = [f"{'row':<{w}}  {'min us':>8}  {'median us':>9}  {'rel sd':>6}  {'x bare (med)':>12}  "
             f"{'x bare (min)':>12}"]
    for r in rows:
        s, q = r["per_call_us"], r["ratio"]
        mark = "  unstable" if s["rel_stdev"] > _bench.MAX_REL_STDEV else ""
        lines.append(f"{r['label']:<{w}}  {s['min']:8.3f}  {s['median']:9.3f}  {s['rel_stdev']:6.1%}  "
                     f"{q['median']:12.2f}  {q['min']:12.2f}{mark}")
    return "\n".join(lines)


def machine(load0: float) -> dict[str, Any]:
    return dict(_bench.machine(), loadavg_1min=load0, loadavg_1min_end=os.getloadavg()[0],
                shmcomm=shmcomm.__version__)


def _positive_int(s: str) -> int:
    try:
        v = int(s)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be an int >= 1, got {s!r}") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"must be an int >= 1, got {v}")
    return v


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true",
                   help="fewer and shorter samples (5 x 10000 calls): finishes in < 20 s "
                        "(default: off)")
    p.add_argument("--samples", type=_positive_int, default=None,
                   help="samples per row, min and median are taken over them (default: 15; quick: 5)")
    p.add_argument("--number", type=_positive_int, default=None,
                   help="calls per sample (default: 20000; quick: 10000)")
    p.add_argument("--json", default=None, metavar="PATH",
                   help=f"also write the rows and machine metadata to PATH as JSON ({SCHEMA}) "
                        "(default: none)")
    return p


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    a = build_parser().parse_args(argv)
    a.samples = a.samples or (5 if a.quick else 15)
    a.number = a.number or (10000 if a.quick else 20000)
    return a


def main(argv: list[str] | None = None) -> int:
    a = parse(argv)
    load0 = os.getloadavg()[0]
    print(f"hot path: {a.samples} samples x {a.number} calls per row; "
          f"{_bench.machine_line(_bench.machine())}", flush=True)
    rows = measure(a.number, a.samples)
    fs = facts(rows)
    print(table(rows))
    print()
    for line in fact_lines(fs):
        print(line)
    shaky = [r["key"] for r in rows if r["per_call_us"]["rel_stdev"] > _bench.MAX_REL_STDEV]
    judged = _bench.stability(load=load0)
    if shaky or not judged.stable:
        why = ([f"relative stdev > {_bench.MAX_REL_STDEV:.0%} in {', '.join(shaky)}"] if shaky else [])
        print("WARNING: unstable: " + "; ".join(why + judged.reasons) + "; rerun on a quieter machine",
              file=sys.stderr)
    if a.json:
        doc = {"schema": SCHEMA, "machine": machine(load0),
               "settings": {"samples": a.samples, "number": a.number, "quick": a.quick},
               "baseline": BARE, "rows": rows, "facts": fs}
        os.makedirs(os.path.dirname(os.path.abspath(a.json)), exist_ok=True)
        with open(a.json, "w") as f:
            json.dump(doc, f, indent=1)
        print(f"wrote {a.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
