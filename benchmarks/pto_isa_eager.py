"""Eager cost per call of pto-isa's TNOTIFY and of a TLOAD + TSTORE pair (with their flags),
built against a pto-isa checkout behind shmcomm's shadow, timed inside the C++ loop; the median
of ``--repeats`` runs. Needs ``SHMCOMM_PTO_ISA`` (or ``--pto-isa``) naming the checkout.

    SHMCOMM_PTO_ISA=PATH python benchmarks/pto_isa_eager.py
"""

from __future__ import annotations

import argparse
import os
import statistics
from pathlib import Path

import numpy as np

import shmcomm
from shmcomm import native

SOURCE = Path(__file__).resolve().parent / "native" / "pto_isa_loops.cpp"


def _host(rt, kernel, what: str, calls: int) -> float:
    out = rt.alloc((1,), np.int64)
    if what == "notify":
        flag = rt.alloc((16,), np.int32)
        rt.launch(kernel, blocks=1, args=(flag.ptr, calls, out.ptr))
    else:
        src = rt.alloc((64,), np.float32)
        dst = rt.alloc((64,), np.float32)
        rt.launch(kernel, blocks=1, args=(src.ptr, dst.ptr, calls, out.ptr))
    return float(out[0]) / calls


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pto-isa", default=os.environ.get("SHMCOMM_PTO_ISA"), help="the checkout")
    ap.add_argument("--calls", type=int, default=1_000_000, help="calls per run")
    ap.add_argument("--repeats", type=int, default=7, help="runs per figure, the median kept")
    a = ap.parse_args()
    if not a.pto_isa:
        ap.error("name a pto-isa checkout: --pto-isa PATH or SHMCOMM_PTO_ISA")
    lib = native.load(SOURCE, pto_isa=a.pto_isa)
    for what, kernel, calls in (("notify", lib.NotifyLoopKernel, a.calls),
                                ("tload+tstore", lib.CopyLoopKernel, a.calls // 10)):
        got = [shmcomm.run(_host, nranks=1, mode="eager", args=(kernel, what, calls))[0]
               for _ in range(a.repeats)]
        print(f"{what:14s} {statistics.median(got):8.1f} ns/call  (min {min(got):.1f}, "
              f"max {max(got):.1f}, {a.repeats} runs of {calls})")


if __name__ == "__main__":
    main()
