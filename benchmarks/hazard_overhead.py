"""Cost of hazard mode on the default job: wall time of ``python -m shmcomm.launch`` in hazard
mode over the same command in eager mode, alternating the two so both see the same load.

    python benchmarks/hazard_overhead.py [--nranks 8] [--reps 5] [--hazards all]

Prints the machine, each pair, the median ratio with its quartiles (or "no clear difference" when
the pairs are unstable and their spread crosses 1), and the load average before and after.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

from shmcomm.config import parse_hazards
from shmcomm.errors import ArgumentError

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # _bench beside this file
import _bench  # noqa: E402


def _wall(args: list[str]) -> float:
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "shmcomm.launch", *args], check=True,
                   stdout=subprocess.DEVNULL)
    return time.perf_counter() - t0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--nranks", type=_bench.int_range(1, 64), default=8,
                   help="rank processes of the default job, 1..64 (default: %(default)s)")
    p.add_argument("--reps", type=_bench.int_range(1), default=5,
                   help="eager / hazard pairs to run, >= 1 (default: %(default)s)")
    p.add_argument("--hazards", default="all",
                   help="hazard-mode sub-models: all or a comma list of "
                        "pipes,visibility,lines,cache,jitter,checkers (default: %(default)s)")
    return p


def main(argv: list[str] | None = None) -> int:
    p = build_parser()
    ns = p.parse_args(argv)
    try:
        parse_hazards(ns.hazards, "--hazards")
    except ArgumentError as exc:
        p.error(str(exc))
    base = ["--nranks", str(ns.nranks)]
    load0 = _bench.loadavg()
    print(f"hazard mode overhead: {_bench.machine_line(_bench.machine())}")
    ratios = []
    for i in range(ns.reps):
        eager = _wall(base)
        hazard = _wall(base + ["--mode", "hazard", "--seed", str(i), "--hazards", ns.hazards])
        ratios.append(hazard / eager)
        print(f"rep {i}: eager {eager:.2f} s  hazard {hazard:.2f} s  ratio {hazard / eager:.2f}x")
    load1 = _bench.loadavg()
    print(f"hazard/eager wall ratio ({ns.hazards}), median (quartiles): "
          f"{_bench.paired(ratios, load=load0[0])}; max {max(ratios):.2f}x")
    print(f"load average {load0[0]:.2f} -> {load1[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
