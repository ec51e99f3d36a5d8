"""Cost of the race detector: wall time of a run with ``detect_races=True`` over the same run
without it, alternating the two so that both see the same load.

    python benchmarks/race_overhead.py [--nranks 8] [--blocks 4] [--reps 5] [--mode eager]

Cases: the default job (barrier round trips, then a 1 MiB AllReduce checked against numpy) and
the collectives (AllReduce, ReduceScatter, AllGather of ``--size`` float32 elements, each
``--calls`` times in one launch sequence). Prints each pair, the median ratio per case, and the
load average before and after (the machine is shared).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import numpy as np

import shmcomm
from shmcomm.launch.programs import default_job


def collectives(rt, size: int, calls: int) -> None:
    x = rt.alloc((size,), np.float32)
    share = rt.alloc((-(-size // rt.nranks),), np.float32)
    for _ in range(calls):
        x[:] = rt.rank + 1
        rt.all_reduce(x)
        rt.reduce_scatter(x, share)
        rt.all_gather(share, x)


def _wall(host, args: tuple, ns: argparse.Namespace, detect: bool, seed: int) -> float:
    t0 = time.perf_counter()
    shmcomm.run(host, nranks=ns.nranks, blocks=ns.blocks, args=args, mode=ns.mode, seed=seed,
                detect_races=detect)
    return time.perf_counter() - t0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--nranks", type=int, default=8)
    p.add_argument("--blocks", type=int, default=4)
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--mode", default="eager", choices=("eager", "hazard"))
    p.add_argument("--iters", type=int, default=200, help="barrier iterations of the default job")
    p.add_argument("--size", type=int, default=1 << 18, help="collective elements (float32)")
    p.add_argument("--calls", type=int, default=3, help="collective calls per run")
    ns = p.parse_args()
    cases = [("default job", default_job, (ns.iters,)),
             (f"collectives {ns.size * 4 >> 10} KiB x{ns.calls}", collectives, (ns.size, ns.calls))]
    print(f"race detector overhead, {ns.nranks} ranks x {ns.blocks} blocks, mode {ns.mode}; "
          f"load average before: {os.getloadavg()}")
    summary = []
    for name, host, args in cases:
        ratios = []
        for i in range(ns.reps):
            plain = _wall(host, args, ns, False, i)
            detect = _wall(host, args, ns, True, i)
            ratios.append(detect / plain)
            print(f"{name:28s} rep {i}: plain {plain:.2f} s  detect_races {detect:.2f} s  "
                  f"ratio {detect / plain:.2f}x")
        summary.append((name, statistics.median(ratios), max(ratios)))
    for name, med, hi in summary:
        print(f"{name:28s} median detect/plain wall ratio {med:.2f}x (max {hi:.2f}x)")
    print(f"load average after: {os.getloadavg()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
