"""Cost of the race detector: wall time of a run with ``detect_races=True`` over the same run
without it, alternating the two so that both see the same load.

    python benchmarks/race_overhead.py [--nranks 8] [--blocks 4] [--reps 5] [--mode eager]

Cases: the default job (barrier round trips, then a 1 MiB AllReduce checked against numpy) and
the collectives (AllReduce, ReduceScatter, AllGather of ``--size`` float32 elements, each
``--calls`` times in one launch sequence). Prints each pair, the median ratio per case, and the
load average before and after; an unstable ratio is flagged (see ``_bench``).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

import shmcomm
from shmcomm.launch.programs import default_job

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # _bench beside this file
import _bench  # noqa: E402


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


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    _bench.add_shape(p)
    p.add_argument("--reps", type=_bench.int_range(1), default=5,
                   help="plain / detect_races pairs per case, >= 1 (default: %(default)s)")
    p.add_argument("--mode", default="eager", choices=("eager", "hazard"),
                   help="execution mode of both sides (default: %(default)s)")
    p.add_argument("--iters", type=_bench.int_range(1), default=200,
                   help="barrier iterations of the default job (default: %(default)s)")
    p.add_argument("--size", type=_bench.int_range(1), default=1 << 18,
                   help="collective elements (float32) (default: %(default)s)")
    p.add_argument("--calls", type=_bench.int_range(1), default=3,
                   help="collective calls per run (default: %(default)s)")
    return p


def main(argv: list[str] | None = None) -> int:
    ns = build_parser().parse_args(argv)
    cases = [("default job", default_job, (ns.iters,)),
             (f"collectives {ns.size * 4 >> 10} KiB x{ns.calls}", collectives, (ns.size, ns.calls))]
    load0 = _bench.loadavg()
    print(f"race detector overhead, {ns.nranks} ranks x {ns.blocks} blocks, mode {ns.mode}; "
          f"{_bench.machine_line(_bench.machine())}")
    summary = []
    for name, host, args in cases:
        ratios = []
        for i in range(ns.reps):
            plain = _wall(host, args, ns, False, i)
            detect = _wall(host, args, ns, True, i)
            ratios.append(detect / plain)
            print(f"{name:28s} rep {i}: plain {plain:.2f} s  detect_races {detect:.2f} s  "
                  f"ratio {detect / plain:.2f}x")
        summary.append((name, ratios))
    load1 = _bench.loadavg()
    for name, ratios in summary:
        print(f"{name:28s} detect/plain wall ratio, median (quartiles): "
              f"{_bench.paired(ratios, load=load0[0])}; max {max(ratios):.2f}x")
    print(f"load average {load0[0]:.2f} -> {load1[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
