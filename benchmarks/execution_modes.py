"""Cost of every execution (semantics x interleaving x observers) relative to eager: wall time of
the default job (barrier rounds) in each combination, the combinations alternated in every
repetition so that all see the same load.

    python benchmarks/execution_modes.py [--nranks 4] [--blocks 2] [--iters 200] [--reps 3]

Prints each run, the median per combination with its ratio to eager, and the load average before
and after (the machine is shared).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from typing import Any

import shmcomm
from shmcomm.launch.programs import default_job

# the detector is on by default in hazard and schedule mode: every combination says which it is
COMBINATIONS: list[tuple[str, dict[str, Any]]] = [
    ("eager", dict(detect_races=False)),
    ("eager + races", dict(detect_races=True)),
    ("eager + trace", dict(detect_races=False, trace=True)),
    ("hazard", dict(mode="hazard", detect_races=False)),
    ("hazard + races", dict(mode="hazard", detect_races=True)),
    ("hazard + trace", dict(mode="hazard", detect_races=False, trace=True)),
    ("scheduled random", dict(mode="schedule", strategy="random", detect_races=False)),
    ("scheduled pct:3", dict(mode="schedule", strategy="pct:3", detect_races=False)),
    ("scheduled random + races", dict(mode="schedule", detect_races=True)),
    ("scheduled pct:3 + races", dict(mode="schedule", strategy="pct:3", detect_races=True)),
    ("scheduled eager semantics + races", dict(mode="schedule", hazards="none",
                                               detect_races=True)),
]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--nranks", type=int, default=4, help="rank processes, 1..64 (default: 4)")
    p.add_argument("--blocks", type=int, default=2, help="blocks per launch, 1..64 (default: 2)")
    p.add_argument("--iters", type=int, default=200, help="barrier rounds, >= 1 (default: 200)")
    p.add_argument("--reps", type=int, default=3, help="repetitions, >= 1 (default: 3)")
    ns = p.parse_args(argv)
    if not 1 <= ns.nranks <= 64 or not 1 <= ns.blocks <= 64 or ns.iters < 1 or ns.reps < 1:
        p.error("--nranks and --blocks must be in [1, 64], --iters and --reps >= 1")
    print(f"default job, {ns.iters} rounds, {ns.nranks} ranks x {ns.blocks} blocks, "
          f"{ns.reps} reps; load average before: {os.getloadavg()}", flush=True)
    walls: dict[str, list[float]] = {name: [] for name, _ in COMBINATIONS}
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(ns.reps):
            for name, settings in COMBINATIONS:
                kw = dict(settings)
                if kw.get("trace"):
                    kw["trace"] = os.path.join(tmp, "trace.json")
                t0 = time.perf_counter()
                shmcomm.run(default_job, nranks=ns.nranks, blocks=ns.blocks, args=(ns.iters,),
                            seed=i, timeout=600, **kw)
                walls[name].append(time.perf_counter() - t0)
                print(f"rep {i} {name:34s} {walls[name][-1]:.2f} s", flush=True)
    base = statistics.median(walls["eager"])
    for name, _ in COMBINATIONS:
        med = statistics.median(walls[name])
        print(f"{name:34s} median {med:6.2f} s  {med / base:4.1f}x eager")
    print(f"load average after: {os.getloadavg()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
