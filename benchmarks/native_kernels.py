"""Native kernels: barrier latency and instruction costs, beside their Python twins.

Rows (one invocation measures them all, in the same runs):

* barrier latency per round at ranks x blocks: the user-written barrier in C++ (the seed's
  protocol made reusable with round thresholds), the same barrier as a Python kernel, a plain C
  spin barrier over the same shared memory (the floor: one counter, no shmcomm instruction), and
  ``multiprocessing.Barrier`` over every thread;
* instruction cost per call in each mode: a native ``TNOTIFY`` / satisfied ``TWAIT`` (timed inside
  the C++ loop) and the same instruction from a Python kernel (timed inside the Python loop).

Each figure is the median of ``--repeats`` runs (the slowest rank's time for barrier rows).

    python benchmarks/native_kernels.py --quick
    python benchmarks/native_kernels.py --json results/native_kernels.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

import shmcomm
from shmcomm import native
from shmcomm.comm import TNOTIFY, TWAIT, NotifyOp, Signal, WaitCmp

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # _bench beside this file
import _bench  # noqa: E402
import barrier_latency  # noqa: E402

SCHEMA = "shmcomm.bench.native_kernels/1"
SOURCE = Path(__file__).resolve().parent / "native" / "bench.cpp"


def _barrier_host(rt, lib, which: str, iters: int) -> float:
    sig = rt.signal_region("bench", 96)
    out = rt.alloc((1,), np.int64)
    if which == "python":
        times: list = []
        rt.launch(_py_barrier_kernel, args=(sig, iters, times))
        return times[0]
    kernel = lib.UserBarrierKernel if which == "native" else lib.SpinBarrierKernel
    rt.launch(kernel, args=(rt.device_context, sig, iters, out.ptr))
    return float(out[0]) * 1e-9


def _py_barrier_kernel(ctx, sig, iters, times) -> None:
    barrier_latency.user_barrier(ctx, sig, 1)
    t0 = time.perf_counter()
    for k in range(2, iters + 2):
        barrier_latency.user_barrier(ctx, sig, k)
    if ctx.block_idx == 0:
        times.append(time.perf_counter() - t0)


def barrier_us(lib, which: str, nranks: int, blocks: int, iters: int, repeats: int) -> float:
    """Median over repeats of the slowest rank's microseconds per barrier round."""
    if which == "mp":
        per = barrier_latency.mp_case("mp", nranks, blocks, iters, repeats)
        return statistics.median(per) * 1e6
    got = []
    for _ in range(repeats):
        res = shmcomm.run(_barrier_host, nranks=nranks, blocks=blocks, args=(lib, which, iters))
        got.append(max(res) / iters * 1e6)
    return statistics.median(got)


def _py_loop(ctx, what: str, n: int, out: list) -> None:
    s = Signal(ctx.signal_base + 1024)
    t0 = time.perf_counter()
    if what == "notify":
        for _ in range(n):
            TNOTIFY(s, 1, NotifyOp.AtomicAdd)
    else:
        for _ in range(n):
            TWAIT(s, 0, WaitCmp.GE)
    out.append(time.perf_counter() - t0)


def _cost_host(rt, lib, what: str, lang: str, n: int) -> float:
    if lang == "python":
        out: list = []
        rt.launch(_py_loop, blocks=1, args=(what, n, out))
        return out[0] / n * 1e9
    o = rt.alloc((1,), np.int64)
    kernel = lib.NotifyLoopKernel if what == "notify" else lib.WaitLoopKernel
    rt.launch(kernel, blocks=1, args=(rt.signal_base + 1024, n, o.ptr))
    return float(o[0]) / n


def cost_ns(lib, what: str, lang: str, mode: str, n: int, repeats: int) -> float:
    got = [shmcomm.run(_cost_host, nranks=1, mode=mode, args=(lib, what, lang, n))[0]
           for _ in range(repeats)]
    return statistics.median(got)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="fewer rounds and repeats")
    ap.add_argument("--shapes", default="8x1,32x1,4x2", help="ranks x blocks, comma separated")
    ap.add_argument("--json", help="write the rows to this file")
    ap.add_argument("--iters", type=int, help="barrier rounds per run (default 1000, --quick 200)")
    ap.add_argument("--repeats", type=int, help="runs per figure, the median kept (default 5, --quick 3)")
    ap.add_argument("--calls", type=int, help="instruction calls per eager run; a hundredth in the "
                    "other modes (default 100000, --quick 20000)")
    args = ap.parse_args(argv)
    iters, repeats = (200, 3) if args.quick else (1000, 5)
    iters, repeats = args.iters or iters, args.repeats or repeats
    lib = native.load(SOURCE)
    rows: list[dict[str, Any]] = []
    meta = _bench.machine()
    print(_bench.machine_line(meta))
    for shape in args.shapes.split(","):
        nranks, blocks = (int(v) for v in shape.split("x"))
        line = {"shape": shape}
        for which in ("spin", "native", "python", "mp"):
            n = iters if which != "python" else max(iters // 5, 20)
            line[which] = barrier_us(lib, which, nranks, blocks, n, repeats)
        rows.append({"kind": "barrier_us", **line})
        print(f"barrier {shape:>5}: C spin floor {line['spin']:8.1f} us | native user barrier "
              f"{line['native']:8.1f} us ({line['native'] / line['spin']:.2f}x the floor) | Python "
              f"{line['python']:8.1f} us | multiprocessing.Barrier {line['mp']:8.1f} us")
    n = args.calls or (20000 if args.quick else 100000)
    for mode in ("eager", "hazard", "schedule"):
        m = n if mode == "eager" else max(n // 100, 1)
        for what in ("notify", "wait"):
            nat = cost_ns(lib, what, "native", mode, m, repeats)
            py = cost_ns(lib, what, "python", mode, m, repeats)
            rows.append({"kind": "instruction_ns", "mode": mode, "what": what, "native": nat, "python": py})
            print(f"{mode:>8} {'TNOTIFY' if what == 'notify' else 'TWAIT  '}: native {nat:10.1f} ns | "
                  f"Python {py:10.1f} ns | native/Python {nat / py:.2f}")
    print(f"load after: {os.getloadavg()}")
    if args.json:
        Path(args.json).write_text(json.dumps({"schema": SCHEMA, "machine": meta, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
