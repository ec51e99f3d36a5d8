"""Cost of hazard mode on the default job: wall time of ``python -m shmcomm.launch`` in hazard
mode over the same command in eager mode, alternating the two so both see the same load.

    python benchmarks/hazard_overhead.py [--nranks 8] [--reps 5] [--hazards all]

Prints each pair, the median ratio, and the load average before and after (the machine is shared).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

from shmcomm.config import parse_hazards
from shmcomm.errors import ArgumentError


def _wall(args: list[str]) -> float:
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "shmcomm.launch", *args], check=True,
                   stdout=subprocess.DEVNULL)
    return time.perf_counter() - t0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--nranks", type=int, default=8,
                   help="rank processes of the default job, 1..64 (default: %(default)s)")
    p.add_argument("--reps", type=int, default=5,
                   help="eager / hazard pairs to run, >= 1 (default: %(default)s)")
    p.add_argument("--hazards", default="all",
                   help="hazard-mode sub-models: all or a comma list of "
                        "pipes,visibility,lines,jitter,checkers (default: %(default)s)")
    return p


def main(argv: list[str] | None = None) -> int:
    p = build_parser()
    ns = p.parse_args(argv)
    if not 1 <= ns.nranks <= 64:
        p.error(f"--nranks must be in [1, 64], got {ns.nranks}")
    if ns.reps < 1:
        p.error(f"--reps must be >= 1, got {ns.reps}")
    try:
        parse_hazards(ns.hazards, "--hazards")
    except ArgumentError as exc:
        p.error(str(exc))
    base = ["--nranks", str(ns.nranks)]
    print(f"load average before: {os.getloadavg()}")
    ratios = []
    for i in range(ns.reps):
        eager = _wall(base)
        hazard = _wall(base + ["--mode", "hazard", "--seed", str(i), "--hazards", ns.hazards])
        ratios.append(hazard / eager)
        print(f"rep {i}: eager {eager:.2f} s  hazard {hazard:.2f} s  ratio {hazard / eager:.2f}x")
    print(f"median hazard/eager wall ratio ({ns.hazards}): {statistics.median(ratios):.2f}x "
          f"(max {max(ratios):.2f}x)")
    print(f"load average after: {os.getloadavg()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
