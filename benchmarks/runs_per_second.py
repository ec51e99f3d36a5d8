"""Runs per second of a small kernel, a fork per run against a pool, in eager and schedule mode.

The kernel: every block of every rank notifies its peer block on the next rank and waits for
the notify from the previous one (one ``TNOTIFY`` and one ``TWAIT`` per block, plus the launch).
``--reps`` alternating rounds of each case; the figure is the median runs/s over rounds, the
ratio compares the pool with a fork per run in the same mode.

    python benchmarks/runs_per_second.py [--nranks 8] [--blocks 4] [--runs 20] [--reps 3]
                                         [--strategy random|pct:3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import shmcomm
from shmcomm.comm import TNOTIFY, TWAIT, GetRemotePtr, NotifyOp, Signal, WaitCmp

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # _bench beside this file
import _bench  # noqa: E402

SLOT = 9216  # the first word of the users' free range


def ring_kernel(ctx):
    me, n, b = ctx.rank, ctx.nranks, ctx.block_idx
    TNOTIFY(Signal(GetRemotePtr(ctx, ctx.signal_base + SLOT + b, (me + 1) % n)), 1,
            NotifyOp.AtomicAdd)
    TWAIT(Signal(ctx.signal_base + SLOT + b), 1, WaitCmp.GE)


def small_host(rt):
    rt.launch(ring_kernel)


def _rate(run, runs: int, mode: str, strategy: str) -> float:
    extra = {"strategy": strategy} if mode == "schedule" else {}
    t0 = time.perf_counter()
    for i in range(runs):
        run(small_host, seed=i, mode=mode, **extra)
    return runs / (time.perf_counter() - t0)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--nranks", type=_bench.int_range(1, 64), default=8,
                   help="rank processes, 1..64 (default: %(default)s)")
    p.add_argument("--blocks", type=_bench.int_range(1, 64), default=4,
                   help="blocks per rank, 1..64 (default: %(default)s)")
    p.add_argument("--runs", type=_bench.int_range(1), default=20,
                   help="runs per case and round (default: %(default)s)")
    p.add_argument("--reps", type=_bench.int_range(1), default=3,
                   help="alternating rounds (default: %(default)s)")
    p.add_argument("--modes", type=_bench.choice_list(("eager", "hazard", "schedule")),
                   default="eager,schedule", help="comma list of modes (default: %(default)s)")
    p.add_argument("--strategy", default="random", help="schedule mode's strategy (default: %(default)s)")
    return p


def main(argv: list[str] | None = None) -> int:
    ns = build_parser().parse_args(argv)
    print(f"runs per second: {_bench.machine_line(_bench.machine())}", flush=True)
    load0 = os.getloadavg()
    rates: dict[tuple[str, str], list[float]] = {}
    with shmcomm.Pool(nranks=ns.nranks) as pool:
        def forked(host, **kw):
            return shmcomm.run(host, nranks=ns.nranks, blocks=ns.blocks, **kw)

        def pooled(host, **kw):
            return pool.run(host, blocks=ns.blocks, **kw)

        pooled(small_host)  # the pool's processes exist before the clock starts
        for _ in range(ns.reps):
            for mode in ns.modes:
                for how, run in (("fork", forked), ("pool", pooled)):
                    rates.setdefault((mode, how), []).append(_rate(run, ns.runs, mode,
                                                                    ns.strategy))
    load1 = os.getloadavg()
    print(f"runs/s of a small kernel at {ns.nranks} ranks x {ns.blocks} blocks, {ns.runs} runs x "
          f"{ns.reps} rounds per case, schedule strategy {ns.strategy}; loadavg {load0[0]:.2f} -> "
          f"{load1[0]:.2f}")
    print(f"{'mode':<10}{'fork per run':>14}{'pool':>10}  pool / fork, median (quartile bounds)")
    for mode in ns.modes:
        f = statistics.median(rates[(mode, "fork")])
        q = statistics.median(rates[(mode, "pool")])
        ratio = _bench.compare(rates[(mode, "pool")], rates[(mode, "fork")], load=max(load0[0], load1[0]))
        print(f"{mode:<10}{f:>14.1f}{q:>10.1f}  {ratio}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
