"""Schedules to the first catch of every catalogue bug in schedule mode, per strategy.

For each bug and strategy, ``--trials`` sweeps (seeds ``trial * 1000 + i``) over the bug's own
configurations, each stopping at its first catch (at most ``--max-runs`` runs): the table gives
the mean number of schedules to the first catch and how many trials caught it.

    python benchmarks/schedule_strategies.py [--strategies random,pct:2,pct:3] [--trials 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys

from shmcomm.stress import catalogue
from shmcomm.stress.harness import CATCH_KINDS, Settings, configs, sweep

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # _bench beside this file
import _bench  # noqa: E402


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--strategies", default="random,pct:2,pct:3",
                   help="comma list of schedule strategies (default: %(default)s)")
    p.add_argument("--trials", type=_bench.int_range(1), default=3,
                   help="sweeps per bug and strategy, from different seeds (default: %(default)s)")
    p.add_argument("--max-runs", type=_bench.int_range(1), default=40,
                   help="schedules per sweep at most (default: %(default)s)")
    p.add_argument("--hazards", default="all", help="hazard sub-models (default: %(default)s)")
    p.add_argument("--only", default=None, help="comma list of bug names (default: every bug)")
    return p


def main(argv: list[str] | None = None) -> int:
    ns = build_parser().parse_args(argv)
    print(f"schedule strategies: {_bench.machine_line(_bench.machine())}", flush=True)
    strategies = ns.strategies.split(",")
    load0 = os.getloadavg()[0]
    bugs = [e for e in catalogue.BUGS + catalogue.SCHEDULE if e.bug
            and (not ns.only or e.name in ns.only.split(","))]
    rows = []
    for e in bugs:
        row = [e.name]
        for strat in strategies:
            settings = Settings(strategy=strat, hazards=ns.hazards, trace_dir="", schedule_dir="")
            counts = []
            for t in range(ns.trials):
                rep = sweep(e.host, configs(e.nranks, e.blocks, e.sizes, ("schedule",)),
                            seed=t * 1000, runs=ns.max_runs, settings=settings,
                            stop_at_first=True, program=e.name)
                hit = [i for i, o in enumerate(rep.outcomes) if o.kind in CATCH_KINDS]
                if hit:
                    counts.append(hit[0] + 1)
            row.append(f"{statistics.mean(counts):.1f} ({len(counts)}/{ns.trials})"
                       if counts else f"- (0/{ns.trials})")
        rows.append(row)
        print("  ".join(row), flush=True)
    print(f"\nschedules to the first catch, mean over trials (caught/trials), hazards={ns.hazards}, "
          f"max {ns.max_runs} runs; loadavg {load0:.2f} -> {os.getloadavg()[0]:.2f}")
    w = max(len(r[0]) for r in rows)
    print("bug".ljust(w) + "".join(f"{s:>16}" for s in strategies))
    for r in rows:
        print(r[0].ljust(w) + "".join(f"{c:>16}" for c in r[1:]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
