"""What one turn hand-off costs on this box: below shmcomm, and as a schedule-mode step.

Schedule mode runs one agent at a time and passes the turn at every scheduling point: the holder
stores the next agent's ``go`` word and wakes its futex, and that agent (a thread of another rank
process, most of the time) runs once the kernel has woken it. This benchmark measures the floor
under that hand-off and what a step costs on top of it:

* ``futex``: two processes pass a token back and forth through two futex words in shared memory,
  the primitive schedule mode's turn uses (the atomics shmcomm calls through ctypes), with both
  processes on one CPU, on two different CPUs, and left to the kernel. On a virtual machine a
  wake on another CPU can cost ten times one on the same CPU (an inter-processor interrupt).
* ``step``: schedule mode on a pool, a kernel whose blocks each take ``--points`` scheduling
  points (a ``TNOTIFY`` to a word of their own), against the same kernel with none; the
  difference over the points is one step's cost, hand-off included. Measured with the ranks
  where a scheduled run keeps them (every one on one CPU, ``pin_ranks``) and, alternating in
  the same repeats, left to the kernel (``pin_ranks=False``).

    python benchmarks/handoff_latency.py [--iters 2000] [--repeats 5] [--points 20]
                                         [--nranks 8] [--blocks 4] [--no-step]

Each figure is the median of ``--repeats`` repeats with its quartiles; a warning says when the
repeats spread too much or the box is loaded.
"""

from __future__ import annotations

import argparse
import ctypes
import mmap
import os
import signal
import sys
import time

import shmcomm
from shmcomm.comm import TNOTIFY, NotifyOp, Signal
from shmcomm.transports.shm import atomics as at

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # _bench beside this file
import _bench  # noqa: E402

WAIT_S = 1.0  # one futex wait's bound: the partner re-checks, and a dead partner ends the run
DEADLINE_S = 60.0  # a repeat that takes longer than this has lost its partner
SLOT = 9216  # the first word of the users' free range


def _pass_token(cells: list, cps: list, me: int, iters: int, deadline: float) -> bool:
    """``iters`` round trips as side ``me`` (0 starts): wait for my word, clear it, set the
    other's and wake it. False when the partner stopped answering."""
    mine, other = cells[me], cps[1 - me]
    mine_cp = cps[me]
    for i in range(iters):
        if me == 0 or i:  # side 0 serves first; side 1 waits for the first token
            at.fast_exchange(other, 1, at.SEQ_CST)
            at.futex_wake(other)
        while mine.value == 0:
            if time.monotonic() > deadline:
                return False
            at.futex_wait(mine_cp, 0, WAIT_S)
        mine.value = 0
    if me == 1:  # the last answer
        at.fast_exchange(other, 1, at.SEQ_CST)
        at.futex_wake(other)
    return True


def futex_round_trip(iters: int, cpus: tuple[set[int] | None, set[int] | None]) -> float:
    """Microseconds per hand-off (half a round trip) between this process and a forked one,
    each on its CPU set (``None``: left to the kernel)."""
    buf = mmap.mmap(-1, 128)  # shared with the child: one 64-byte line per word
    view = (ctypes.c_char * 128).from_buffer(buf)
    base = ctypes.addressof(view)
    cells = [ctypes.c_int32.from_address(base), ctypes.c_int32.from_address(base + 64)]
    cps = [ctypes.c_void_p(base), ctypes.c_void_p(base + 64)]
    mask = os.sched_getaffinity(0)
    pid = os.fork()
    if pid == 0:  # the partner: ends with its parent, and never runs the parent's code on
        code = 1
        try:
            at.set_parent_death_signal(signal.SIGKILL)
            if cpus[1] is not None:
                os.sched_setaffinity(0, cpus[1])
            code = 0 if _pass_token(cells, cps, 1, iters, time.monotonic() + DEADLINE_S) else 1
        finally:
            os._exit(code)
    try:
        if cpus[0] is not None:
            os.sched_setaffinity(0, cpus[0])
        t0 = time.perf_counter()
        ok = _pass_token(cells, cps, 0, iters, time.monotonic() + DEADLINE_S)
        dt = time.perf_counter() - t0
    finally:
        os.sched_setaffinity(0, mask)
        deadline = time.monotonic() + DEADLINE_S
        while os.waitpid(pid, os.WNOHANG)[0] == 0:  # the partner ends (or is ended) here
            if time.monotonic() > deadline:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                break
            time.sleep(0.01)
        del cells, cps, view
        buf.close()
    if not ok:
        raise RuntimeError("handoff_latency: the partner process stopped answering")
    return 1e6 * dt / (2 * iters)


def _points_kernel(ctx, points: int) -> None:
    sig = Signal(ctx.signal_base + SLOT + ctx.block_idx)
    for _ in range(points):
        TNOTIFY(sig, 1, NotifyOp.AtomicAdd)


def points_host(rt, points: int) -> None:
    rt.launch(_points_kernel, args=(points,))


def step_cost(pool: shmcomm.Pool, blocks: int, points: int, runs: int,
              pin: bool) -> tuple[float, float]:
    """Milliseconds per run of the kernel with ``points`` points per block and with none."""
    out = []
    for n in (points, 0):
        t0 = time.perf_counter()
        for i in range(runs):
            pool.run(points_host, args=(n,), blocks=blocks, seed=i, mode="schedule",
                     detect_races=False, pin_ranks=pin)
        out.append(1e3 * (time.perf_counter() - t0) / runs)
    return out[0], out[1]


def _row(name: str, samples: list[float], unit: str, load: float) -> None:
    st = _bench.Stats.of(samples)
    print(f"  {name:<50} {st.median:9.1f} {unit}  ({st.q1:.1f}..{st.q3:.1f})")
    _bench.warn_if_unstable(name, st, load=load)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--iters", type=_bench.int_range(10, 1_000_000), default=2000,
                   help="round trips per futex repeat, 10..1000000 (default: %(default)s)")
    p.add_argument("--repeats", type=_bench.int_range(1, 100), default=5,
                   help="repeats of every figure, 1..100 (default: %(default)s)")
    p.add_argument("--points", type=_bench.int_range(1, 10_000), default=20,
                   help="scheduling points per block of the step kernel, 1..10000 "
                        "(default: %(default)s)")
    p.add_argument("--runs", type=_bench.int_range(1, 100_000), default=10,
                   help="schedule-mode runs per repeat and kernel, 1..100000 "
                        "(default: %(default)s)")
    _bench.add_shape(p)
    p.add_argument("--no-step", action="store_true",
                   help="only the futex figures, no schedule-mode runs (default: off)")
    return p


def main(argv: list[str] | None = None) -> int:
    ns = build_parser().parse_args(argv)
    load = _bench.START_LOAD
    mask = sorted(os.sched_getaffinity(0))
    print(f"hand-off latency: {_bench.machine_line(_bench.machine())}", flush=True)
    print(f"futex hand-off between two processes, {ns.iters} round trips x {ns.repeats} repeats "
          "(median, quartiles):")
    cases: list[tuple[str, tuple[set[int] | None, set[int] | None]]] = [
        ("both on one CPU", ({mask[0]}, {mask[0]}))]
    if len(mask) > 1:
        cases.append(("on two different CPUs", ({mask[0]}, {mask[1]})))
    cases.append(("left to the kernel", (None, None)))
    for name, cpus in cases:
        _row(name, [futex_round_trip(ns.iters, cpus) for _ in range(ns.repeats)], "us", load)
    if len(mask) == 1:
        print("  (one CPU in this process's affinity: no two-CPU figure)")
    if ns.no_step:
        return 0
    total = ns.nranks * ns.blocks * ns.points
    print(f"schedule mode on a pool, {ns.nranks} ranks x {ns.blocks} blocks, {ns.points} points "
          f"per block ({total} points a run), {ns.runs} runs x {ns.repeats} repeats:")
    per_point: dict[bool, list[float]] = {True: [], False: []}
    empty: dict[bool, list[float]] = {True: [], False: []}
    with shmcomm.Pool(nranks=ns.nranks) as pool:
        pool.run(points_host, args=(1,), blocks=ns.blocks, mode="schedule", detect_races=False)
        for _ in range(ns.repeats):
            for pin in (True, False):
                with_points, without = step_cost(pool, ns.blocks, ns.points, ns.runs, pin)
                per_point[pin].append(1e3 * (with_points - without) / total)
                empty[pin].append(without)
    for pin, where in ((True, "ranks on one CPU"), (False, "ranks left to the kernel")):
        _row(f"{where}: a run with no points", empty[pin], "ms", load)
        _row(f"{where}: one scheduling point", per_point[pin], "us", load)
    return 0


if __name__ == "__main__":
    sys.exit(main())
