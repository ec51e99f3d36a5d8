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


def _wall(args: list[str]) -> float:
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "shmcomm.launch", *args], check=True,
                   stdout=subprocess.DEVNULL)
    return time.perf_counter() - t0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--nranks", type=int, default=8)
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--hazards", default="all")
    ns = p.parse_args()
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
