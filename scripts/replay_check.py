"""Every catalogue bug's first failing schedule-mode seed, replayed: same failure, same trace.

For each bug: sweep its configurations in schedule mode until the first catch, then rerun that
seed ``--times`` times and compare the root failure (kind and message) and the schedule's trace
bytes with the first run. Exit status 1 when any replay differed.

    python scripts/replay_check.py [--times 10] [--strategy random] [--only a,b]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile

import shmcomm
from shmcomm.errors import RunError
from shmcomm.stress import catalogue
from shmcomm.stress.harness import CATCH_KINDS, Settings, configs, sweep


def _failure(entry, spec, strategy: str, trace: str) -> tuple[str, bytes]:
    try:
        shmcomm.run(entry.host, nranks=spec.nranks, blocks=spec.blocks, args=(spec.size,),
                    seed=spec.seed, mode="schedule", strategy=strategy, trace=trace,
                    timeout=120, wait_timeout=60)
        what = "ok"
    except RunError as exc:
        first = exc.failures[0]
        what = f"{first.kind}: {first.where()}: {first.message.splitlines()[0]}"
    with open(trace, "rb") as f:
        return what, f.read()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--times", type=int, default=10)
    p.add_argument("--strategy", default="random")
    p.add_argument("--only", default=None)
    ns = p.parse_args(argv)
    bad = 0
    load0 = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        trace = os.path.join(tmp, "trace.json")
        for e in catalogue.BUGS + catalogue.SCHEDULE:
            if not e.bug or (ns.only and e.name not in ns.only.split(",")):
                continue
            rep = sweep(e.host, configs(e.nranks, e.blocks, e.sizes, ("schedule",)), runs=40,
                        settings=Settings(strategy=ns.strategy, trace_dir="", schedule_dir=""),
                        stop_at_first=True, program=e.name, pool=False)
            catch = next((o for o in rep.outcomes if o.kind in CATCH_KINDS), None)
            if catch is None:
                print(f"{e.name:<28} not caught in {len(rep.outcomes)} schedules")
                continue
            first = _failure(e, catch.spec, ns.strategy, trace)
            same = sum(_failure(e, catch.spec, ns.strategy, trace) == first
                       for _ in range(ns.times))
            bad += same != ns.times
            print(f"{e.name:<28} seed {catch.spec.seed:<3} {catch.spec.label():<44} "
                  f"identical {same}/{ns.times}  {first[0][:70]}", flush=True)
    print(f"loadavg {load0:.2f} -> {os.getloadavg()[0]:.2f}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
