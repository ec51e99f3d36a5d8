"""Runs per second of a small kernel: a fork per run against a pool, and on the pool schedule
mode and the race detector.

The kernel: every block of every rank notifies its peer block on the next rank and waits for
the notify from the previous one (one ``TNOTIFY`` and one ``TWAIT`` per block, plus the launch).
The cases: ``fork`` (eager mode, a fork per run), ``pool`` (eager mode on a pool), ``hazard``,
``schedule``, ``schedule-eager`` (schedule mode over eager semantics, ``hazards="none"``: the
interleavings only, without the hazard model's pipes, visibility, lines and checkers),
``schedule+races`` and ``hazard+races`` (on the pool; ``+races``: with ``detect_races=True``,
every other case with ``detect_races=False``, so the detector's default does not hide in the
baselines). ``--reps`` alternating rounds of ``--runs`` runs of each case; the figure
is the median runs/s over rounds with its quartiles, and each ratio is the median of the
rounds' ratios (both sides measured in the same round, so under the same load), with a warning
when the rounds spread too much or the box is loaded.

    python benchmarks/runs_per_second.py [--nranks 8] [--blocks 4] [--runs 20] [--reps 5]
                                         [--cases fork,pool,...] [--strategy random|pct:3]
    python benchmarks/runs_per_second.py --profile schedule --runs 200   # where the CPU goes

``--profile CASE`` runs the case ``--runs`` times with cProfile on the thread-CPU clock in every
rank's host function and every block's kernel, and prints the functions that took the most CPU,
per run over all ranks: waits cost nothing there, and what runs outside the host function (a
rank's setup before it, the pool's checks after it) is not counted. The profiler's own cost per
call inflates every figure; compare the rows with each other, not with the runs/s table.
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import sys
import time
from typing import Any

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


def _profiled_kernel(ctx, profiles: list) -> None:
    prof = cProfile.Profile(time.thread_time)  # CPU of this thread: its waits cost nothing
    prof.enable()
    try:
        ring_kernel(ctx)
    finally:
        prof.disable()
        profiles.append(prof)


def profiled_host(rt) -> dict:
    """``small_host`` under cProfile (host and blocks): the merged raw stats of this rank."""
    profiles: list = []
    prof = cProfile.Profile(time.thread_time)
    prof.enable()
    rt.launch(_profiled_kernel, args=(profiles,))
    prof.disable()
    merged = pstats.Stats(prof)
    for p in profiles:
        merged.add(p)
    return merged.stats  # type: ignore[attr-defined]  # plain dicts and tuples: they pickle


class _RawStats:
    """pstats input from the raw stats a rank returned."""

    def __init__(self, stats: dict) -> None:
        self.stats = stats

    def create_stats(self) -> None:
        pass


def print_profile(stats: list[dict], runs: int, top: int = 30) -> None:
    merged = pstats.Stats(_RawStats(stats[0]))
    for s in stats[1:]:
        merged.add(_RawStats(s))
    rows: list[tuple[float, float, str]] = []
    for (file, line, name), (_cc, ncalls, tottime, _ct, _callers) in merged.stats.items():  # type: ignore[attr-defined]
        where = f"{os.path.basename(file)}:{line}({name})" if file != "~" else name
        rows.append((tottime, ncalls, where))
    total = sum(r[0] for r in rows)
    calls = sum(r[1] for r in rows)
    print(f"profiled CPU over all ranks: {1e3 * total / runs:.2f} ms and {calls / runs:.0f} "
          f"calls per run (the profiler's cost included)")
    print(f"{'CPU us/run':>11} {'share':>6} {'calls/run':>10}  function")
    for tottime, ncalls, where in sorted(rows, reverse=True)[:top]:
        print(f"{1e6 * tottime / runs:>11.1f} {tottime / total:>6.1%} {ncalls / runs:>10.1f}  {where}")


def profile(case: str, ns: Any) -> int:
    kw = _settings(case, ns.strategy)
    stats: list[dict] = []
    if case == "fork":
        for i in range(ns.runs):
            stats += shmcomm.run(profiled_host, nranks=ns.nranks, blocks=ns.blocks, seed=i, **kw)
    else:
        with shmcomm.Pool(nranks=ns.nranks) as pool:
            pool.run(profiled_host, blocks=ns.blocks, **kw)  # forks the ranks: not counted
            for i in range(ns.runs):
                stats += pool.run(profiled_host, blocks=ns.blocks, seed=i, **kw)
    print(f"cProfile (thread CPU) of {case}, {ns.runs} runs at {ns.nranks} ranks x {ns.blocks} "
          f"blocks: host functions and kernels of every rank")
    print_profile(stats, ns.runs)
    return 0


CASES = ("fork", "pool", "hazard", "schedule", "schedule-eager", "schedule+races", "hazard+races")
# (numerator, denominator, what the ratio says), shown when both cases ran
RATIOS = (("pool", "fork", "pool / fork per run (eager)"),
          ("schedule", "fork", "schedule on the pool / eager fork per run"),
          ("schedule", "pool", "schedule / eager, both on the pool"),
          ("schedule", "schedule+races", "cost of the detector in schedule mode (without / with)"),
          ("schedule-eager", "schedule", "cost of hazard semantics in schedule mode (without / with)"),
          ("hazard", "hazard+races", "cost of the detector in hazard mode (without / with)"))


def _mode(case: str) -> str:
    mode = case.split("+")[0].split("-")[0]
    return "eager" if mode in ("fork", "pool") else mode


def _settings(case: str, strategy: str) -> dict:
    mode = _mode(case)
    kw: dict = {"mode": mode}
    if mode == "schedule":
        kw["strategy"] = strategy
    if case == "schedule-eager":
        kw["hazards"] = "none"  # schedule mode over eager semantics
    # the detector is on by default in hazard and schedule mode: each case says which it is
    kw["detect_races"] = case.endswith("+races")
    return kw


def _rate(run, runs: int, kw: dict, first_seed: int) -> float:
    t0 = time.perf_counter()
    for i in range(runs):
        run(small_host, seed=first_seed + i, **kw)
    return runs / (time.perf_counter() - t0)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    _bench.add_shape(p)
    p.add_argument("--runs", type=_bench.int_range(1), default=20,
                   help="runs per case and round (default: %(default)s)")
    p.add_argument("--reps", type=_bench.int_range(1), default=5,
                   help="alternating rounds (default: %(default)s)")
    p.add_argument("--cases", type=_bench.choice_list(CASES, "all"), default="all",
                   help=f"comma list of {', '.join(CASES)}, or all (default: %(default)s)")
    p.add_argument("--modes", type=_bench.choice_list(("eager", "hazard", "schedule")),
                   default=None,
                   help="the cases of these modes only (eager: fork and pool; default: all)")
    p.add_argument("--strategy", default="random", help="schedule mode's strategy (default: %(default)s)")
    p.add_argument("--profile", choices=CASES, default=None, metavar="CASE",
                   help=f"instead of the table: where the CPU of CASE goes ({', '.join(CASES)}; "
                        "cProfile of the host functions and kernels, per run over all ranks; default: "
                        "off)")
    return p


def main(argv: list[str] | None = None) -> int:
    ns = build_parser().parse_args(argv)
    if ns.profile:
        return profile(ns.profile, ns)
    cases = list(ns.cases)
    if ns.modes:
        keep = {"eager": ("fork", "pool")}
        cases = [c for c in cases if c in keep.get(c, ()) or any(
            c in keep.get(m, ()) or _mode(c) == m for m in ns.modes)]
    print(f"runs per second: {_bench.machine_line(_bench.machine())}", flush=True)
    load0 = os.getloadavg()
    rates: dict[str, list[float]] = {c: [] for c in cases}
    with shmcomm.Pool(nranks=ns.nranks) as pool:
        def forked(host, **kw):
            return shmcomm.run(host, nranks=ns.nranks, blocks=ns.blocks, **kw)

        def pooled(host, **kw):
            return pool.run(host, blocks=ns.blocks, **kw)

        for c in cases:  # the pool's processes exist, and every case ran once, before the clock
            (forked if c == "fork" else pooled)(small_host, **_settings(c, ns.strategy))
        for rep in range(ns.reps):
            for c in cases:
                rates[c].append(_rate(forked if c == "fork" else pooled, ns.runs,
                                      _settings(c, ns.strategy), rep * ns.runs))
        replaced = pool.replaced
    load1 = os.getloadavg()
    load = load0[0]  # the box before the runs: they make load of their own
    print(f"runs/s of a small kernel at {ns.nranks} ranks x {ns.blocks} blocks, {ns.runs} runs x "
          f"{ns.reps} rounds per case, schedule strategy {ns.strategy}; loadavg {load0[0]:.2f} -> "
          f"{load1[0]:.2f}" + (f"; the pool was replaced {replaced} times" if replaced else ""))
    print(f"{'case':<16}{'runs/s':>9}  {'quartiles':<15}{'rel. stdev':>10}  ms/run")
    for c in cases:
        st = _bench.Stats.of(rates[c])
        print(f"{c:<16}{st.median:>9.1f}  {st.q1:>6.1f}..{st.q3:<7.1f}{st.rel_stdev:>9.0%}  "
              f"{1e3 / st.median:>7.2f}")
        _bench.warn_if_unstable(c, st, load=load)
    print("ratios (median of the rounds' ratios, quartiles):")
    for num, den, what in RATIOS:
        if num in rates and den in rates:
            per_round = [a / b for a, b in zip(rates[num], rates[den], strict=True)]
            print(f"  {what:<59} {_bench.paired(per_round, load=load)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
