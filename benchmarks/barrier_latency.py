"""Barrier latency: shmcomm's device barriers against what a user would reach for instead.

Every case runs in fresh processes, and every figure is the **slowest rank's** mean time per
barrier over ``iters`` back-to-back barriers (the max over all ranks and blocks), repeated
``repeats`` times; a row gives min / median / max over the repeats. The repeats of the cases of
one shape are interleaved in ``--rounds`` rounds (fresh processes each), so that a shared box's
load falls on every case alike. Each round of each case first runs ``--warmups`` repeats that
are not counted (as pyperf does, and the OSU micro-benchmarks' skipped iterations): the first
barriers after a fork run on cold caches and copy-on-write pages (at 8 ranks x 1 block on 2
cores the first ~20 cost about twice the rest), and a row is about the barrier, not the start;
and every loop ends with one untimed barrier, so that no rank's teardown lands in another's
last timed one. All rows of one invocation are measured in the same run, so their ratios are
what to read (the box is shared: the 1-minute load average is kept with every row); the
ratios that matter are printed after the tables, each with its spread: repeat i of a case over
repeat i of its baseline (the same round) gives one paired ratio, and the table shows their
quartiles. A ratio whose paired ratios spread over more than a third of their median, or whose
rows spread over more than half of theirs, is marked NOISY and the run ends with a warning:
rerun it on a quieter box.

Measured, for each ``nranks x blocks``:

* shmcomm ``DeviceBarrier`` (the seed's, single-use: every call gets a freshly zeroed signal
  region, which is what a reset between uses gives it), ``EpochBarrier`` and ``CentralBarrier``;
* ``user``: the seed's protocol as a user writes it with the public API (:func:`user_barrier`):
  fresh ``Signal`` / ``GetRemotePtr`` objects on every call, epoch counts instead of a reset;
* ``multiprocessing.Barrier`` over every rank x block thread (ranks as processes);
* ``threading.Barrier`` in each process + ``multiprocessing.Barrier`` across processes (thread 0
  of each process), what a user hand-writes for ranks x blocks;
* ``MPI_Barrier`` through mpi4py (thread 0 of each MPI rank, ``threading.Barrier`` around it),
  when the ``mpi`` extra (mpi4py + the MPICH wheel) is installed; skipped with a note otherwise.

Plus the wait policies (spin / yield / futex / adaptive) on a few shapes, latency versus nranks
up to 64 (oversubscribed), and the launch cost. Writes ``<out>.json`` (versioned, with machine
metadata), ``<out>.md`` and ``<out>.png`` (matplotlib, the ``bench`` extra; skipped with a note
when missing).

    python benchmarks/barrier_latency.py --quick          # < 1 minute
    python benchmarks/barrier_latency.py                  # the full table (a few minutes)
    python benchmarks/barrier_latency.py --profile seed:8x1 --iters 500   # where the time goes
    python benchmarks/barrier_latency.py --sections barriers --nranks 8,32 --blocks 1 \
        --repeats 10 --rounds 5                           # the ratio table against MPI and mp
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import statistics
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

import shmcomm
from shmcomm.comm import TNOTIFY, TWAIT, GetRemotePtr, NotifyOp, Signal, WaitCmp
from shmcomm.kernels.barrier import CentralBarrier, DeviceBarrier, EpochBarrier
from shmcomm.kernels.layout import CENTRAL_BARRIER, EPOCH_BARRIER, USER_FREE_START
from shmcomm.pipe import PIPE_ALL, pipe_barrier
from shmcomm.transports.mpi.library import find_mpiexec, run_script

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # _bench beside this file
import _bench  # noqa: E402

SCHEMA = "shmcomm.bench.barrier_latency/1"
# Signal words: the library barriers use their regions of shmcomm.kernels.layout (EpochBarrier
# aligns every case, CentralBarrier is measured); the benchmark's own words (the single-use seed
# regions, the user barrier's) come from the free range through rt.signal_region, so they never
# overlap a library region, whatever the run uses.
SEED_STRIDE = 128  # words per single-use seed-barrier region (MAX_RANKS + 2 rounded up to lines)
# the user barrier's region, from its start:
# words 0..MAX_RANKS-1: word r counts the arrivals of rank r (as in the seed's layout)
USER_FLAG = shmcomm.MAX_RANKS  # rounds released by block 0 (own 64-byte line)
USER_INTRA = shmcomm.MAX_RANKS + 16  # arrivals of blocks 1.. of this rank (own 64-byte line)
USER_WORDS = shmcomm.MAX_RANKS + 32
SHM_BARRIERS = ("seed", "user", "epoch", "central")
SCALING_BARRIERS = ("user", "epoch", "central")  # the seed is single-use: a region per call
POLICIES = ("spin", "yield", "futex", "adaptive")
CASE_TIMEOUT_S = 120.0


@dataclass
class Row:
    """One measured case: ``us`` holds the slowest rank's latency of each repeat."""

    kind: str  # "barrier" | "policy" | "scaling"
    impl: str
    nranks: int
    blocks: int
    policy: str
    iters: int
    us: list[float]
    loadavg: float
    note: str = ""
    stats: dict[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.us:
            self.stats = _bench.Stats.of(self.us).as_dict()


# Spread limits past which a run is flagged as too noisy to trust: a row whose repeats' IQR
# exceeds half its median, or a ratio whose paired-repeat IQR exceeds a third of its median.
NOISY_ROW_SPREAD = 0.5
NOISY_RATIO_SPREAD = 1 / 3


def quartiles(xs: list[float]) -> tuple[float, float, float]:
    """(first quartile, median, third quartile) of ``xs`` (inclusive method; one value: itself)."""
    if len(xs) < 2:
        return xs[0], xs[0], xs[0]
    q1, q2, q3 = statistics.quantiles(xs, n=4, method="inclusive")
    return q1, q2, q3


def relative_spread(xs: list[float]) -> float:
    """IQR over median: 0 for identical repeats, above ``NOISY_ROW_SPREAD`` for a noisy row."""
    q1, q2, q3 = quartiles(xs)
    return (q3 - q1) / q2 if q2 > 0 else 0.0


def paired_ratios(us: list[float], base_us: list[float]) -> list[float]:
    """Repeat i of a case over repeat i of its baseline: both were measured in the same round of
    interleaved cases (see ``Bench.group``), so each ratio compares like weather with like."""
    return [a / b for a, b in zip(us, base_us, strict=False) if b > 0]


def ratio_summary(us: list[float], base_us: list[float]) -> dict[str, Any]:
    """A ratio of latencies with its spread: the median of the paired repeats' ratios, their
    quartiles, the ratio of the medians, and whether the spread is too wide to trust."""
    pairs = paired_ratios(us, base_us)
    q1, q2, q3 = quartiles(pairs)
    spread = (q3 - q1) / q2 if q2 > 0 else 0.0
    noisy = (spread > NOISY_RATIO_SPREAD or relative_spread(us) > NOISY_ROW_SPREAD
             or relative_spread(base_us) > NOISY_ROW_SPREAD)
    return {"ratio": statistics.median(us) / statistics.median(base_us), "paired_median": q2,
            "paired_q1": q1, "paired_q3": q3, "pairs": len(pairs), "spread": spread,
            "noisy": noisy}


# --- shmcomm ------------------------------------------------------------------------------------

def user_barrier(ctx, signal_base, k):
    """Round ``k`` (1, 2, ...) of the seed's DeviceBarrier as a user writes it, made reusable.

    The seed's protocol (intra-rank arrivals, block 0 notifies word ``my_rank`` of every peer and
    waits once per peer, a local flag releases the other blocks) with monotonic counters and
    round thresholds instead of a reset between uses; AtomicAdd only. Written through the public
    API as a kernel author would, building ``Signal`` / ``GetRemotePtr`` objects on every call.
    Every block of every rank must call it with the same ``k`` sequence.
    """
    my_rank, nranks = ctx.rank, ctx.nranks
    block_idx, num_blocks = ctx.block_idx, ctx.block_num
    intra_counter = signal_base + USER_INTRA
    if block_idx != 0:
        TNOTIFY(Signal(intra_counter), 1, NotifyOp.AtomicAdd)
    elif num_blocks > 1:
        TWAIT(Signal(intra_counter), k * (num_blocks - 1), WaitCmp.GE)
    pipe_barrier(PIPE_ALL)
    local_flag = signal_base + USER_FLAG
    if block_idx == 0:
        for r in range(nranks):
            if r != my_rank:
                TNOTIFY(Signal(GetRemotePtr(ctx, signal_base + my_rank, r)), 1, NotifyOp.AtomicAdd)
        for r in range(nranks):
            if r != my_rank:
                TWAIT(Signal(signal_base + r), k, WaitCmp.GE)
        TNOTIFY(Signal(local_flag), 1, NotifyOp.AtomicAdd)
    else:
        TWAIT(Signal(local_flag), k, WaitCmp.GE)
    pipe_barrier(PIPE_ALL)


def _shm_kernel(ctx, which: str, iters: int, repeats: int, out: list, seed_base, user_base,
                profile: bool = False) -> None:
    if profile and ctx.rank == 0 and ctx.block_idx == 0:
        import cProfile
        import io
        import pstats

        prof = cProfile.Profile()
        prof.enable()
        try:
            _shm_kernel(ctx, which, iters, repeats, out, seed_base, user_base)
        finally:
            prof.disable()
        buf = io.StringIO()
        pstats.Stats(prof, stream=buf).sort_stats("tottime").print_stats(14)
        out.append(buf.getvalue())
        return
    perf = time.perf_counter
    me, n, b, nb = ctx.rank, ctx.nranks, ctx.block_idx, ctx.block_num
    # the seed barrier is single-use: every call gets its own zeroed region (= a reset between uses)
    seeds = [seed_base + i * SEED_STRIDE for i in range(iters * repeats)] if which == "seed" else []
    rounds = 0  # the user barrier's round count, the same in every block
    EpochBarrier(ctx)  # warm-up and alignment
    if which == "central":
        CentralBarrier(ctx)
    elif which == "user":
        rounds += 1
        user_barrier(ctx, user_base, rounds)
    lat = []
    for rep in range(repeats):
        EpochBarrier(ctx)  # align the repeats
        inside = 0.0
        if which == "seed":
            for i in range(iters):
                base = seeds[rep * iters + i]
                t0 = perf()
                DeviceBarrier(ctx, base, 0, me, n, b, nb)
                inside += perf() - t0
        elif which == "user":
            for _ in range(iters):
                rounds += 1
                t0 = perf()
                user_barrier(ctx, user_base, rounds)
                inside += perf() - t0
        elif which == "epoch":
            for _ in range(iters):
                t0 = perf()
                EpochBarrier(ctx)
                inside += perf() - t0
        else:
            for _ in range(iters):
                t0 = perf()
                CentralBarrier(ctx)
                inside += perf() - t0
        lat.append(inside / iters)
    EpochBarrier(ctx)  # untimed: see _time_loop
    out[b] = lat


def _shm_host(rt, which: str, blocks: int, iters: int, repeats: int, profile: bool = False) -> Any:
    out: list = [None] * blocks
    rt.reset_signals()
    seed_base = rt.signal_region("seed barriers", SEED_STRIDE * iters * repeats) if which == "seed" else None
    user_base = rt.signal_region("user barrier", USER_WORDS) if which == "user" else None
    rt.launch(_shm_kernel, blocks=blocks, args=(which, iters, repeats, out, seed_base, user_base, profile))
    if profile:
        return out[blocks:]
    return [max(col) for col in zip(*out, strict=True)]  # slowest block of each repeat


def _signal_bytes(which: str, calls: int) -> int:
    """The signal matrix a case needs (whole pages): the library barriers' regions, and for the
    seed (a region per call) and the user barrier their regions in the free range."""
    words = {"seed": USER_FREE_START + SEED_STRIDE * calls,
             "user": USER_FREE_START + USER_WORDS}.get(which, max(EPOCH_BARRIER.end, CENTRAL_BARRIER.end))
    return -(-4 * words // 4096) * 4096


def shm_profile(which: str, nranks: int, blocks: int, iters: int, policy: str) -> str:
    """cProfile of rank 0 block 0 through one case (``--profile``): where a barrier's time goes."""
    res = shmcomm.run(_shm_host, nranks=nranks, blocks=blocks, args=(which, blocks, iters, 1, True),
                      signal_bytes=_signal_bytes(which, iters), window_bytes=0, wait_policy=policy,
                      wait_timeout=CASE_TIMEOUT_S, timeout=CASE_TIMEOUT_S)
    return res[0][0]


def shm_case(which: str, nranks: int, blocks: int, iters: int, repeats: int, policy: str) -> list[float]:
    """The slowest rank's latency (s) per repeat of one shmcomm barrier."""
    per_rank = shmcomm.run(_shm_host, nranks=nranks, blocks=blocks, args=(which, blocks, iters, repeats),
                           signal_bytes=_signal_bytes(which, iters * repeats), window_bytes=0,
                           wait_policy=policy, wait_timeout=CASE_TIMEOUT_S, timeout=CASE_TIMEOUT_S)
    return [max(col) for col in zip(*per_rank, strict=True)]


# --- multiprocessing / threading baselines -------------------------------------------------------

def _time_loop(wait, iters: int, repeats: int, align) -> list[float]:
    perf = time.perf_counter
    wait()
    lat = []
    for _ in range(repeats):
        align()
        inside = 0.0
        for _ in range(iters):
            t0 = perf()
            wait()
            inside += perf() - t0
        lat.append(inside / iters)
    # untimed, and every implementation ends with it: without it the ranks that leave the last
    # timed barrier first tear down (results, exit) on the cores the others still need to leave
    # it, and that lands in the last repeat (+20 us per barrier at 8x1 over 200 barriers)
    align()
    return lat


def _crossing(tbar: threading.Barrier, b: int, cross) -> Any:
    """What a user hand-writes for ranks x blocks: threads meet, thread 0 crosses processes
    (``cross``), threads meet again."""
    if tbar.parties == 1:
        return cross

    def hybrid() -> None:
        tbar.wait()
        if b == 0:
            cross()
        tbar.wait()
    return hybrid


def _per_repeat_max(blocks: int, loop) -> list[float]:
    """Run ``loop(b)`` on ``blocks`` threads (block 0 on this one); per-repeat max over blocks."""
    res: list = [None] * blocks

    def body(b: int) -> None:
        res[b] = loop(b)

    threads = [threading.Thread(target=body, args=(b,)) for b in range(1, blocks)]
    for t in threads:
        t.start()
    body(0)
    for t in threads:
        t.join()
    return [max(col) for col in zip(*res, strict=True)]


def _mp_proc(kind: str, blocks: int, iters: int, repeats: int, mbar, conn) -> None:
    try:
        tbar = threading.Barrier(blocks)

        def loop(b: int) -> list[float]:
            wait = mbar.wait if kind == "mp" else _crossing(tbar, b, mbar.wait)
            return _time_loop(wait, iters, repeats, wait)

        conn.send(_per_repeat_max(blocks, loop))
    except BaseException as exc:  # reported to the parent, which raises
        conn.send(repr(exc))
    finally:
        conn.close()


def mp_case(kind: str, nranks: int, blocks: int, iters: int, repeats: int) -> list[float]:
    """``multiprocessing.Barrier`` over every thread (``mp``) or threading + mp (``hybrid``)."""
    ctx = mp.get_context("fork")
    parties = nranks * blocks if kind == "mp" else nranks
    mbar = ctx.Barrier(parties)
    pipes, procs = [], []
    try:
        for _ in range(nranks):
            r, w = ctx.Pipe(duplex=False)
            p = ctx.Process(target=_mp_proc, args=(kind, blocks, iters, repeats, mbar, w), daemon=True)
            p.start()
            w.close()
            pipes.append(r)
            procs.append(p)
        results = []
        for r in pipes:
            if not r.poll(CASE_TIMEOUT_S):
                raise RuntimeError(f"{kind} baseline {nranks}x{blocks} timed out")
            results.append(r.recv())
    finally:
        for p in procs:
            p.join(5)
            if p.is_alive():
                p.kill()
                p.join()
        for r in pipes:
            r.close()
    bad = [x for x in results if isinstance(x, str)]
    if bad:
        raise RuntimeError(f"{kind} baseline failed: {bad[0]}")
    return [max(col) for col in zip(*results, strict=True)]


# --- MPI ----------------------------------------------------------------------------------------


def _mpi_worker(blocks: int, iters: int, repeats: int) -> None:
    """Body of every MPI rank (``--mpi-worker``): rank 0 prints the per-repeat max as JSON."""
    # mpi4py's default thread level ("multiple"): with "funneled" MPICH busy-polls without
    # yielding and 8 ranks on 2 cores take ~16 ms a barrier; only block 0 calls MPI anyway
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    tbar = threading.Barrier(blocks)

    def loop(b: int) -> list[float]:
        wait = _crossing(tbar, b, comm.Barrier)
        return _time_loop(wait, iters, repeats, wait)

    mine = _per_repeat_max(blocks, loop)
    worst = comm.reduce(mine, op=lambda a, b, _t=None: [max(x, y) for x, y in zip(a, b, strict=True)])
    if comm.rank == 0:
        print(json.dumps({"us": worst, "library": MPI.Get_library_version().split("\n")[0].strip()}))


def mpi_case(mpiexec: str, nranks: int, blocks: int, iters: int, repeats: int) -> tuple[list[float], str]:
    data = _mpiexec_json(mpiexec, nranks, ["--mpi-worker", "--blocks", str(blocks), "--iters",
                                           str(iters), "--repeats", str(repeats)])
    return data["us"], data["library"]


def _mpiexec_json(mpiexec: str, nranks: int, args: list[str]) -> dict[str, Any]:
    """Run this script under ``mpiexec -n nranks`` with ``args``; the last JSON line rank 0
    printed."""
    code, out, err = run_script(mpiexec, nranks, [os.path.abspath(__file__), *args],
                                CASE_TIMEOUT_S)
    if code != 0:
        raise RuntimeError(f"mpiexec failed ({code}): {err.strip()[-400:]}")
    line = [ln for ln in out.splitlines() if ln.startswith("{")][-1]
    return json.loads(line)


# --- the mpi transport: shmcomm's own barriers under mpiexec (--mpi-transport) ------------------
# The same kernels and host program as the shm cases, each MPI process one rank; the row's name
# is the barrier's with "/mpi" appended, measured in the same group as MPI_Barrier.

MPI_TRANSPORT_BARRIERS = ("epoch", "central")


def _mpi_transport_worker(which: str, blocks: int, iters: int, repeats: int, policy: str) -> None:
    """Body of every rank (``--mpi-transport-worker``): rank 0 prints the per-repeat max."""
    per_rank = shmcomm.run(_shm_host, transport="mpi", blocks=blocks,
                           args=(which, blocks, iters, repeats),
                           signal_bytes=_signal_bytes(which, iters * repeats), window_bytes=0,
                           wait_policy=policy, wait_timeout=CASE_TIMEOUT_S, timeout=CASE_TIMEOUT_S)
    from shmcomm.launch.mpi import is_root

    if is_root():
        print(json.dumps({"s": [max(col) for col in zip(*per_rank, strict=True)]}), flush=True)


def mpi_transport_case(mpiexec: str, which: str, nranks: int, blocks: int, iters: int,
                       repeats: int, policy: str) -> list[float]:
    """The slowest rank's latency (s) per repeat of a shmcomm barrier on the mpi transport."""
    return _mpiexec_json(mpiexec, nranks, [
        "--mpi-transport-worker", which, "--blocks", str(blocks), "--iters", str(iters),
        "--repeats", str(repeats), "--policy", policy])["s"]


# --- launch cost --------------------------------------------------------------------------------

def _first_kernel(ctx, out: list) -> None:
    out.append(time.monotonic())  # CLOCK_MONOTONIC is system-wide: comparable across processes


def _first_host(rt) -> float:
    out: list = []
    rt.launch(_first_kernel, blocks=1, args=(out,))
    return out[0]


def launch_cost(repeats: int, nranks: int = 8) -> dict[str, Any]:
    """Time to the first kernel instruction of every rank (in-process ``shmcomm.run``) and the
    total wall time of ``python -m shmcomm.launch --nranks 8`` (a fresh interpreter)."""
    first, run_wall, cli_wall = [], [], []
    for _ in range(repeats):
        t0 = time.monotonic()
        starts = shmcomm.run(_first_host, nranks=nranks, blocks=1, window_bytes=1 << 20)
        run_wall.append(time.monotonic() - t0)
        first.append(max(starts) - t0)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [os.path.dirname(os.path.dirname(shmcomm.__file__)), os.environ.get("PYTHONPATH", "")]))
    for _ in range(repeats):
        t0 = time.monotonic()
        proc = subprocess.run([sys.executable, "-m", "shmcomm.launch", "--nranks", str(nranks)],
                              capture_output=True, text=True, timeout=CASE_TIMEOUT_S, env=env)
        cli_wall.append(time.monotonic() - t0)
        if proc.returncode != 0:
            raise RuntimeError(f"shmcomm.launch failed: {proc.stderr[-400:]}")
    t0 = time.monotonic()
    subprocess.run([sys.executable, "-c", "import shmcomm"], check=True, env=env)
    import_wall = time.monotonic() - t0

    def st(xs: list[float]) -> dict[str, float]:
        return {"min": min(xs), "median": statistics.median(xs), "max": max(xs)}
    return {"nranks": nranks, "first_instruction_s": st(first), "run_wall_s": st(run_wall),
            "cli_wall_s": st(cli_wall), "python_import_shmcomm_s": import_wall,
            "loadavg": os.getloadavg()[0]}


# --- the driver ---------------------------------------------------------------------------------

def machine() -> dict[str, Any]:
    return dict(_bench.machine(), numpy=np.__version__, shmcomm=shmcomm.__version__)


POLICY_NAMES = {"spin": "spin (busy poll)", "yield": "yield (sched_yield between polls)",
                "futex": "futex (sleep until woken)", "adaptive": "adaptive (spin, then futex)"}
BARRIER_NAMES = {"seed": "seed DeviceBarrier", "user": "user barrier", "epoch": "EpochBarrier",
                 "central": "CentralBarrier", "mp": "multiprocessing.Barrier",
                 "thread+mp": "threading.Barrier + multiprocessing.Barrier", "mpi": "MPI_Barrier"}


def speed(ratio: float) -> str:
    """A ratio of latencies (ours / theirs) as "N.Nx faster" or "N.Nx slower"."""
    return f"{1 / ratio:.1f}x faster" if ratio < 1 else f"{ratio:.1f}x slower"


def comparison_text(c: dict[str, Any]) -> str:
    """One comparison; an unstable one whose spread crosses 1.0 says so instead of naming a winner."""
    head = (f"{BARRIER_NAMES[c['barrier']]} against {BARRIER_NAMES[c['baseline']]} "
            f"at {c['nranks']}x{c['blocks']}")
    spread = f", paired-ratio IQR {c['paired_q1']:.2f}-{c['paired_q3']:.2f}" if "paired_q1" in c else ""
    tail = f"({c['us']:.1f} vs {c['baseline_us']:.1f} us, medians{spread})"
    lo, hi = c["ratio_bounds"]
    if not c["stable"] and lo <= 1.0 <= hi:
        return f"{head}: no clear difference {tail}; {c['stability']}"
    text = f"{BARRIER_NAMES[c['barrier']]} is {speed(c['ratio'])} than {BARRIER_NAMES[c['baseline']]} " \
           f"at {c['nranks']}x{c['blocks']} {tail}"
    return text if c["stable"] else f"{text}; WARNING {c['stability']}: rerun on a quieter machine"


class Bench:
    def __init__(self, args: argparse.Namespace) -> None:
        self.a = args
        self.rows: list[Row] = []
        self.notes: list[str] = []
        self.mpiexec = None if args.no_mpi else (args.mpiexec or find_mpiexec())
        self.mpi_library = ""
        if self.mpiexec is None and not args.no_mpi:
            self.notes.append("MPI_Barrier skipped: mpi4py / mpiexec not found "
                              "(pip install -e '.[mpi]' installs mpi4py and the MPICH wheel)")

    def group(self, cases: list[tuple]) -> None:
        """Measure ``cases`` (kind, impl, nranks, blocks, policy, iters, fn(repeats)) in
        ``--rounds`` interleaved rounds, so that every case of a group sees the same weather."""
        a = self.a
        rounds = max(1, min(a.rounds, a.repeats))
        per = [a.repeats // rounds + (1 if r < a.repeats % rounds else 0) for r in range(rounds)]
        got: dict[int, list[float]] = {i: [] for i in range(len(cases))}
        loads: dict[int, list[float]] = {i: [] for i in range(len(cases))}
        failed: set[int] = set()
        t0 = time.monotonic()
        for reps in per:
            for i, (_kind, impl, n, b, policy, _it, fn) in enumerate(cases):
                if i in failed:
                    continue
                loads[i].append(os.getloadavg()[0])
                try:  # the round's first --warmups repeats are not counted
                    got[i] += [x * 1e6 for x in fn(reps + a.warmups)[a.warmups:]]
                except Exception as exc:  # one failing case must not hide the rest of the table
                    failed.add(i)
                    self.notes.append(f"{impl} {n}x{b} {policy}: failed: {exc}")
                    print(f"  {impl:<10} {n:>3}x{b:<2} FAILED: {exc}", flush=True)
        for i, (kind, impl, n, b, policy, it, _fn) in enumerate(cases):
            if i in failed:
                continue
            row = Row(kind, impl, n, b, policy, it, got[i], statistics.median(loads[i]))
            self.rows.append(row)
            st = row.stats
            print(f"  {kind:<8} {impl:<10} {n:>3}x{b:<2} {policy:<9} min {st['min']:9.1f}  "
                  f"median {st['median']:9.1f}  max {st['max']:9.1f} us  (load {row.loadavg:.2f})",
                  flush=True)
        print(f"  ({time.monotonic() - t0:.1f} s)", flush=True)

    def barriers(self) -> None:
        a = self.a
        for n in a.nranks:
            for b in a.blocks:
                it = a.iters
                cases: list[tuple] = [
                    ("barrier", w, n, b, a.policy, it,
                     lambda r, w=w, n=n, b=b, it=it: shm_case(w, n, b, it, r, a.policy))
                    for w in SHM_BARRIERS]
                cases.append(("barrier", "mp", n, b, "-", it,
                              lambda r, n=n, b=b, it=it: mp_case("mp", n, b, it, r)))
                cases.append(("barrier", "thread+mp", n, b, "-", it,
                              lambda r, n=n, b=b, it=it: mp_case("hybrid", n, b, it, r)))
                if self.mpiexec:
                    cases.append(("barrier", "mpi", n, b, "-", it,
                                  lambda r, n=n, b=b, it=it: self._mpi(n, b, it, r)))
                    if a.mpi_transport:  # shmcomm's barriers on the mpi transport, same group
                        cases += [("barrier", f"{w}/mpi", n, b, a.policy, it,
                                   lambda r, w=w, n=n, b=b, it=it: mpi_transport_case(
                                       self.mpiexec, w, n, b, it, r, a.policy))
                                  for w in MPI_TRANSPORT_BARRIERS]
                self.group(cases)

    def _mpi(self, n: int, b: int, it: int, repeats: int) -> list[float]:
        us, self.mpi_library = mpi_case(self.mpiexec, n, b, it, repeats)  # type: ignore[arg-type]
        return us

    def policies(self) -> None:
        a = self.a
        for n, b in a.policy_shapes:
            cases = []
            for pol in a.policies:
                # pure spinning when oversubscribed costs milliseconds per barrier: fewer iterations
                it = max(2, a.iters // 10) if pol == "spin" and n * b > (os.cpu_count() or 1) else a.iters
                for w in a.policy_barriers:
                    cases.append(("policy", w, n, b, pol, it,
                                  lambda r, w=w, n=n, b=b, p=pol, it=it: shm_case(w, n, b, it, r, p)))
            self.group(cases)

    def scaling(self) -> None:
        a = self.a
        for n in a.scaling:
            it = max(5, a.iters // max(1, n // 8))
            cases: list[tuple] = [("scaling", w, n, 1, a.policy, it,
                                   lambda r, w=w, n=n, it=it: shm_case(w, n, 1, it, r, a.policy))
                                  for w in SCALING_BARRIERS]
            cases.append(("scaling", "mp", n, 1, "-", it, lambda r, n=n, it=it: mp_case("mp", n, 1, it, r)))
            self.group(cases)

    # -- reporting -------------------------------------------------------------------------

    def baseline(self, impl: str, n: int, b: int, kind: str = "barrier") -> Row | None:
        for r in self.rows:
            if r.kind == kind and r.impl == impl and r.nranks == n and r.blocks == b:
                return r
        return None

    def ratios(self, row: Row) -> dict[str, float]:
        out = {}
        kind = "scaling" if row.kind == "scaling" else "barrier"
        for base in ("mp", "thread+mp", "mpi"):
            br = self.baseline(base, row.nranks, row.blocks, kind)
            if br is not None and row.impl not in ("mp", "thread+mp", "mpi"):
                out[base] = row.stats["median"] / br.stats["median"]
        return out

    def comparisons(self) -> list[dict[str, Any]]:
        """The ratios that matter, from rows of one group (same run, same weather): the user
        barrier against what a user would reach for instead, CentralBarrier against
        ``multiprocessing.Barrier``, and every shmcomm barrier against it at 32x1."""
        wanted = [("central", "mpi", 8, 1), ("central", "mpi", 32, 1), ("user", "mp", 8, 1),
                  ("user", "mp", 2, 1), ("user", "thread+mp", 8, 4), ("user", "mpi", 8, 1),
                  ("central", "mp", 8, 1)] + [(w, "mp", 32, 1) for w in SHM_BARRIERS]
        res = []
        for impl, base, n, b in wanted:
            for kind in ("barrier", "scaling"):
                r, br = self.baseline(impl, n, b, kind), self.baseline(base, n, b, kind)
                if r is not None and br is not None:
                    a, z = _bench.Stats.of(r.us), _bench.Stats.of(br.us)
                    # judged on the load before the benchmark: a row's own ranks raise the
                    # load average of its rounds, which says nothing about other work
                    judged = _bench.stability(a, z)
                    res.append({"barrier": impl, "baseline": base, "nranks": n, "blocks": b,
                                "section": kind, "us": r.stats["median"],
                                "baseline_us": br.stats["median"], "loadavg": r.loadavg,
                                **ratio_summary(r.us, br.us),
                                "ratio": r.stats["median"] / br.stats["median"],
                                "ratio_bounds": list(_bench.ratio_bounds(a, z)),
                                "stable": judged.stable, "stability": str(judged)})
                    break
        return res

    def ratio_table(self, comps: list[dict[str, Any]]) -> list[str]:
        """The comparisons as a markdown table: ratio, paired-repeat quartiles, spread, and a
        warning column for the ones too noisy to trust."""
        lines = ["| ranks x blocks | barrier | baseline | ours us | baseline us | ratio | "
                 "paired ratios q1 / median / q3 | spread | load | |",
                 "|---|---|---|---:|---:|---:|---|---:|---:|---|"]
        for c in comps:
            lines.append(f"| {c['nranks']}x{c['blocks']} | {BARRIER_NAMES[c['barrier']]} | "
                         f"{BARRIER_NAMES[c['baseline']]} | {c['us']:.1f} | {c['baseline_us']:.1f} | "
                         f"{c['ratio']:.3f} | {c['paired_q1']:.3f} / {c['paired_median']:.3f} / "
                         f"{c['paired_q3']:.3f} | {c['spread']:.2f} | {c['loadavg']:.2f} | "
                         f"{'NOISY' if c['noisy'] else ''} |")
        return lines

    def noise_warnings(self, comps: list[dict[str, Any]]) -> list[str]:
        """Why this run's ratios should not be trusted, if they should not."""
        out = []
        noisy = [c for c in comps if c["noisy"]]
        if noisy:
            out.append(f"{len(noisy)} of {len(comps)} ratios are too noisy to trust (paired-ratio "
                       f"IQR above {NOISY_RATIO_SPREAD:.2f} of the median, or a row's IQR above "
                       f"{NOISY_ROW_SPREAD:.2f} of its median): rerun on a quieter box, or with more "
                       "--repeats and --rounds")
        pairs = min((c["pairs"] for c in comps), default=0)
        if comps and pairs < 5:
            out.append(f"only {pairs} paired repeats per ratio: spreads are rough (use --repeats 5 "
                       "or more)")
        return out

    launch: dict[str, Any] | None = None

    def markdown(self) -> str:
        lines = [f"# Barrier latency ({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())})", "",
                 "Slowest rank's mean latency per barrier in us (min / median / max over "
                 f"{self.a.repeats} repeats of {self.a.iters} barriers, after {self.a.warmups} "
                 "uncounted warm-up repeat(s) per round); ratio = shmcomm median / baseline median (lower is "
                 "better); load = median 1-min loadavg at the start of its rounds (it counts this "
                 "benchmark's own processes too).", ""]
        for kind, title in (("barrier", "Barriers against baselines"), ("policy", "Wait policies"),
                            ("scaling", "Scaling with nranks (1 block)")):
            rows = [r for r in self.rows if r.kind == kind]
            if not rows:
                continue
            lines += [f"## {title}", "",
                      "| ranks x blocks | barrier | policy | min | median | max | vs mp | vs thread+mp | "
                      "vs MPI | load |", "|---|---|---|---:|---:|---:|---:|---:|---:|---:|"]
            for r in rows:
                rat = self.ratios(r)
                cell = [f"{rat[k]:.3f}" if k in rat else "" for k in ("mp", "thread+mp", "mpi")]
                s = r.stats
                lines.append(f"| {r.nranks}x{r.blocks} | {r.impl} | {r.policy} | {s['min']:.1f} | "
                             f"{s['median']:.1f} | {s['max']:.1f} | {' | '.join(cell)} | {r.loadavg:.2f} |")
            lines.append("")
        if self.launch:
            lc = self.launch
            lines += ["## Launch cost", "",
                      f"`shmcomm.run` to the first kernel instruction of every rank ({lc['nranks']} "
                      f"ranks): median {lc['first_instruction_s']['median'] * 1e3:.0f} ms; whole "
                      f"`shmcomm.run`: {lc['run_wall_s']['median'] * 1e3:.0f} ms; "
                      f"`python -m shmcomm.launch --nranks {lc['nranks']}` wall: median "
                      f"{lc['cli_wall_s']['median']:.2f} s (min {lc['cli_wall_s']['min']:.2f}, max "
                      f"{lc['cli_wall_s']['max']:.2f}); `python -c 'import shmcomm'`: "
                      f"{lc['python_import_shmcomm_s']:.2f} s.", ""]
        comps = self.comparisons()
        if comps:
            lines += ["## Ratios", "",
                      "ratio = median over median (lower is better: below 1, shmcomm's barrier is "
                      "faster); paired ratios = repeat i over the baseline's repeat i of the same "
                      "round; spread = their IQR over their median.", ""]
            lines += self.ratio_table(comps)
            lines.append("")
            lines += [f"- {comparison_text(c)}" for c in comps]
            lines.append("")
            warnings = self.noise_warnings(comps)
            if warnings:
                lines += ["**Warning:**", ""] + [f"- {w}" for w in warnings] + [""]
        if self.notes:
            lines += ["## Notes", ""]
            lines += [f"- {n}" for n in self.notes]
        return "\n".join(lines) + "\n"

    def plot(self, path: str) -> None:
        """One panel per block count (barriers against nranks), the scaling section and the
        wait-policy section; titled with date, machine and load; the caption explains the bars."""
        try:
            import matplotlib

            matplotlib.use("Agg")
            import matplotlib.pyplot as plt
        except ImportError:
            self.notes.append("plot skipped: matplotlib missing (pip install -e '.[bench]')")
            return
        blocks = sorted({r.blocks for r in self.rows if r.kind == "barrier"})
        panels = [("barrier", b) for b in blocks] + ([("scaling", 1)] if any(
            r.kind == "scaling" for r in self.rows) else []) + ([("policy", 0)] if any(
            r.kind == "policy" for r in self.rows) else [])
        if not panels:
            return
        fig, axes = plt.subplots(1, len(panels), figsize=(4.8 * len(panels), 4.6), squeeze=False)
        for ax, (kind, b) in zip(axes[0], panels, strict=True):
            if kind == "policy":
                self._plot_policies(ax)
                continue
            impls = sorted({r.impl for r in self.rows if r.kind == kind and r.blocks == b})
            for impl in impls:
                rs = sorted((r for r in self.rows if r.kind == kind and r.impl == impl and r.blocks == b),
                            key=lambda r: r.nranks)
                xs = [r.nranks for r in rs]
                ax.errorbar(xs, [r.stats["median"] for r in rs],
                            yerr=[[r.stats["median"] - r.stats["min"] for r in rs],
                                  [r.stats["max"] - r.stats["median"] for r in rs]],
                            marker="o", capsize=3, label=BARRIER_NAMES.get(impl, impl))
            ax.set_xscale("log", base=2)
            ticks = sorted({r.nranks for r in self.rows if r.kind == kind and r.blocks == b})
            ax.set_xticks(ticks, [str(t) for t in ticks])
            ax.set_yscale("log")
            ax.set_xlabel("ranks (processes)")
            ax.set_ylabel("microseconds per barrier (slowest rank)")
            ax.set_title(f"{'scaling, ' if kind == 'scaling' else ''}{b} thread(s) per rank")
            ax.grid(True, which="both", alpha=0.3)
            ax.legend(fontsize=7)
        m = machine()
        load1 = os.getloadavg()[0]
        fig.suptitle(f"shmcomm barrier latency, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
                     f"{m['cpus']} CPUs ({m['cpu'] or m['machine']}), load average "
                     f"{self.load0[0]:.1f} -> {load1:.1f}\n"
                     f"points: median of {self.a.repeats} repeats of {self.a.iters} barriers; "
                     "bars: fastest to slowest repeat", fontsize=9)
        fig.tight_layout()
        fig.savefig(path, dpi=110)
        plt.close(fig)

    def _plot_policies(self, ax: Any) -> None:
        """Wait policies: a group of bars per (barrier, shape), a bar per policy."""
        rows = [r for r in self.rows if r.kind == "policy"]
        groups = sorted({(r.impl, r.nranks, r.blocks) for r in rows})
        policies = [p for p in POLICIES if any(r.policy == p for r in rows)]
        width = 0.8 / max(len(policies), 1)
        for k, pol in enumerate(policies):
            xs, ys, lo, hi = [], [], [], []
            for g, (impl, n, b) in enumerate(groups):
                r = next((r for r in rows if (r.impl, r.nranks, r.blocks, r.policy) == (impl, n, b, pol)),
                         None)
                if r is None:
                    continue
                xs.append(g + (k - (len(policies) - 1) / 2) * width)
                ys.append(r.stats["median"])
                lo.append(r.stats["median"] - r.stats["min"])
                hi.append(r.stats["max"] - r.stats["median"])
            ax.bar(xs, ys, width, yerr=[lo, hi], capsize=2, label=POLICY_NAMES.get(pol, pol))
        ax.set_xticks(range(len(groups)))
        ax.set_xticklabels([f"{BARRIER_NAMES.get(i, i)}\n{n} ranks x {b} thread(s)" for i, n, b in groups],
                           fontsize=7)
        ax.set_yscale("log")
        ax.set_ylabel("microseconds per barrier (slowest rank)")
        ax.set_title("how a blocked wait uses the CPU")
        ax.grid(True, axis="y", which="both", alpha=0.3)
        ax.legend(fontsize=7)

    def write(self) -> None:
        out = self.a.out
        os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
        self.plot(out + ".png")
        md = self.markdown()
        with open(out + ".md", "w") as f:
            f.write(md)
        doc = {"schema": SCHEMA, "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
               "machine": machine(), "mpi_library": self.mpi_library,
               "settings": {k: v for k, v in vars(self.a).items() if k != "out"},
               "loadavg_start": self.load0, "loadavg_end": os.getloadavg(),
               "rows": [dict(asdict(r), ratios=self.ratios(r)) for r in self.rows],
               "launch": self.launch, "comparisons": self.comparisons(),
               "notes": self.notes}
        with open(out + ".json", "w") as f:
            json.dump(doc, f, indent=1)
        print()
        print(md)
        print(f"wrote {out}.json, {out}.md" + ("" if not os.path.exists(out + ".png") else f", {out}.png"))

    def run(self) -> None:
        self.load0 = os.getloadavg()
        print(f"barrier latency: {_bench.machine_line(machine())}", flush=True)
        if "barriers" in self.a.sections:
            self.barriers()
        if "policies" in self.a.sections:
            self.policies()
        if "scaling" in self.a.sections:
            self.scaling()
        if "launch" in self.a.sections:
            self.launch = launch_cost(self.a.repeats)
            print(f"  launch: {json.dumps(self.launch)}", flush=True)
        self.write()


SECTIONS = ("barriers", "policies", "scaling", "launch")


_ints = _bench.int_list(1)


def _shapes(s: str) -> list[tuple[int, int]]:
    try:
        shapes = [tuple(int(v) for v in x.split("x")) for x in s.split(",") if x]
    except ValueError:
        shapes = []
    if not shapes or any(len(t) != 2 or min(t) < 1 for t in shapes):
        raise argparse.ArgumentTypeError(f"expected shapes like 2x1,8x4, got {s!r}")
    return shapes  # type: ignore[return-value]


_names = _bench.choice_list


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true",
                   help="a small sweep that finishes in < 1 minute; options given as well "
                        "override it (default: off)")
    p.add_argument("--nranks", type=_ints, default=None,
                   help="rank counts of the barrier section (default: 2,4,8,16; quick: 2,8)")
    p.add_argument("--blocks", type=_ints, default=None,
                   help="blocks per rank of the barrier section (default: 1,2,4; quick: 1,4)")
    p.add_argument("--iters", type=int, default=None,
                   help="barriers per repeat (default: 200; quick: 30)")
    p.add_argument("--repeats", type=int, default=None, help="repeats per case (default: 5)")
    p.add_argument("--warmups", type=int, default=1,
                   help="repeats each round of a case runs first and does not count "
                        "(default: %(default)s)")
    p.add_argument("--rounds", type=int, default=None,
                   help="split the repeats into this many rounds that interleave a group's cases "
                        "(default: 5; quick: 1)")
    p.add_argument("--policy", default="adaptive", choices=POLICIES,
                   help="wait policy of the barrier and scaling sections (default: %(default)s)")
    p.add_argument("--policies", type=_names(POLICIES), default=list(POLICIES),
                   help="policies of the policy section (default: " + ",".join(POLICIES) + ")")
    p.add_argument("--policy-shapes", type=_shapes, default=None,
                   help="ranks x blocks of the policy section (default: 2x1,8x1,8x4; quick: 8x1)")
    p.add_argument("--policy-barriers", type=_names(SHM_BARRIERS), default=["epoch", "central"],
                   help="barriers of the policy section, a comma list of " + ", ".join(SHM_BARRIERS)
                        + " (default: epoch,central)")
    p.add_argument("--scaling", type=_ints, default=None,
                   help="rank counts of the scaling section (default: 2,4,8,16,32,64; quick: 4,32)")
    p.add_argument("--sections", type=_names(SECTIONS), default=list(SECTIONS),
                   help="sections to run, a comma list of " + ", ".join(SECTIONS)
                        + " (default: all of them)")
    p.add_argument("--out", default="results/barrier_latency",
                   help="path stem of the .json, .md and .png written (default: %(default)s)")
    p.add_argument("--no-mpi", action="store_true", help="skip MPI_Barrier (default: off)")
    p.add_argument("--mpiexec", default=None, metavar="PATH",
                   help="the mpiexec of the MPI rows, e.g. scripts/netns-mpiexec under "
                        "scripts/netns_hosts.py --shell: ranks on network-namespace hosts "
                        "(default: the one next to this Python)")
    p.add_argument("--profile", default=None, metavar="BARRIER:RxB",
                   help="cProfile rank 0 block 0 of one case instead, e.g. seed:8x1 (default: none)")
    p.add_argument("--mpi-worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--mpi-transport", action="store_true",
                   help="also time the epoch and central barriers on shmcomm's mpi transport "
                        "(under mpiexec, beside MPI_Barrier) (default: off)")
    p.add_argument("--mpi-transport-worker", default=None, help=argparse.SUPPRESS)
    return p


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = build_parser()
    a = p.parse_args(argv)
    q = a.quick
    a.nranks = a.nranks or ([2, 8] if q else [2, 4, 8, 16])
    a.blocks = a.blocks or ([1, 4] if q else [1, 2, 4])
    a.iters = (30 if q else 200) if a.iters is None else a.iters
    a.repeats = 5 if a.repeats is None else a.repeats
    a.rounds = (1 if q else 5) if a.rounds is None else a.rounds
    a.policy_shapes = a.policy_shapes or ([(8, 1)] if q else [(2, 1), (8, 1), (8, 4)])
    a.scaling = a.scaling or ([4, 32] if q else [2, 4, 8, 16, 32, 64])
    if a.repeats < 1 or a.iters < 1 or a.rounds < 1:
        p.error("--iters, --repeats and --rounds must be >= 1")
    if a.warmups < 0:
        p.error(f"--warmups must be >= 0, got {a.warmups}")
    return a


def main(argv: list[str] | None = None) -> int:
    a = parse(argv)
    if a.profile:
        which, _, shape = a.profile.partition(":")
        n, b = (int(v) for v in (shape or "8x1").split("x"))
        print(f"cProfile of rank 0 block 0, {which} barrier, {n}x{b}, {a.policy}, {a.iters} barriers, "
              f"loadavg {os.getloadavg()[0]:.2f}")
        print(shm_profile(which, n, b, a.iters, a.policy))
        return 0
    if a.mpi_worker:
        _mpi_worker(a.blocks[0], a.iters, a.repeats)
        return 0
    if a.mpi_transport_worker:
        _mpi_transport_worker(a.mpi_transport_worker, a.blocks[0], a.iters, a.repeats, a.policy)
        return 0
    Bench(a).run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
