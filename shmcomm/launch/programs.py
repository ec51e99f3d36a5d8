"""Built-in host programs: the default job of ``python -m shmcomm.launch``.

The default job times barrier round trips (the epoch-safe barrier many times in one launch, the
seed's ``DeviceBarrier`` once per launch with a collective signal reset in between, as its
contract demands) and checks that every round number agrees; then it runs AllReduce (the two-shot
kernel, several times in one launch) and checks the result against numpy.
"""

from __future__ import annotations

import statistics
import time
from typing import Any

import numpy as np

from ..kernels.barrier import DeviceBarrier, EpochBarrier
from ..kernels.collectives import all_reduce

SEED_BARRIER_LAUNCHES = 10
AR_ELEMS = 256 * 1024  # float32: 1 MiB per rank
AR_ITERS = 3  # in place: values grow by nranks per call, exact in float32 up to 64 ranks


def _epoch_kernel(ctx, iters: int, out: list) -> None:
    EpochBarrier(ctx)  # warm-up: builds the signal cache, aligns the blocks
    perf = time.perf_counter
    times = []
    last = 0
    for _ in range(iters):
        t0 = perf()
        last = EpochBarrier(ctx)
        times.append(perf() - t0)
    if ctx.block_idx == 0:
        out.append((times, last))


def _seed_kernel(ctx, out: list) -> None:
    t0 = time.perf_counter()
    DeviceBarrier(ctx, ctx.signal_base, 0, ctx.rank, ctx.nranks, ctx.block_idx, ctx.block_num)
    if ctx.block_idx == 0:
        out.append(time.perf_counter() - t0)


def _all_reduce_kernel(ctx, x, n: int, iters: int, out: list) -> None:
    EpochBarrier(ctx)
    times = []
    for _ in range(iters):
        t0 = time.perf_counter()
        all_reduce(ctx, x, x, n)
        times.append(time.perf_counter() - t0)
    if ctx.block_idx == 0:
        out.append(times)


def _all_reduce_check(rt, blocks: int) -> tuple[float, bool]:
    """AR_ITERS in-place AllReduce sums of 1 MiB per rank; median time, and whether every
    element equals numpy's result."""
    n, k = AR_ELEMS, AR_ITERS
    base = np.arange(n, dtype=np.float32) % 4
    x = rt.alloc((n,), np.float32)
    x[:] = base + rt.rank
    out: list = []
    rt.launch(_all_reduce_kernel, blocks=blocks, args=(x.ptr, n, k, out))
    want = sum(base + r for r in range(rt.nranks)) * np.float32(rt.nranks) ** (k - 1)
    return statistics.median(out[0]), bool(np.array_equal(x, want))


def default_job(rt, iters: int = 200) -> dict[str, Any]:
    """Barrier latency of both barriers on this rank; ``ok`` if every round agreed."""
    blocks = rt.config.blocks
    out: list = []
    rt.reset_signals()
    rt.launch(_epoch_kernel, blocks=blocks, args=(iters, out))
    times, last_round = out[0]
    seed_times: list = []
    for _ in range(SEED_BARRIER_LAUNCHES):
        rt.reset_signals()  # the seed barrier is single-use: reset before every launch
        rt.launch(_seed_kernel, blocks=blocks, args=(seed_times,))
    rt.reset_signals()
    ar_s, ar_ok = _all_reduce_check(rt, blocks)
    ar_name = f"AllReduce {rt.nranks}x{blocks} float32 sum 1 MiB vs numpy"
    return {
        "rank": rt.rank,
        "blocks": blocks,
        "iters": iters,
        "epoch_us": statistics.median(times) * 1e6,
        "seed_us": statistics.median(seed_times) * 1e6,
        "allreduce_us": ar_s * 1e6,
        "ok": last_round == iters + 1 and ar_ok,
        "checks": [("EpochBarrier rounds", last_round == iters + 1), (ar_name, ar_ok)],
    }


def format_default(results: list[dict[str, Any]], wall: float) -> str:
    """The default job's table: barrier latency (median over ranks, slowest rank), result."""
    r0 = results[0]
    n = len(results)
    lines = [f"shmcomm default job: {n} ranks x {r0['blocks']} blocks"]
    hdr = f"{'barrier':<16}{'iterations':>11}{'median us':>12}{'slowest rank us':>17}"
    lines += [hdr, "-" * len(hdr)]
    for name, key, its in (("EpochBarrier", "epoch_us", r0["iters"]),
                           ("DeviceBarrier", "seed_us", SEED_BARRIER_LAUNCHES),
                           ("AllReduce 1 MiB", "allreduce_us", AR_ITERS)):
        if key not in r0:
            continue
        vals = [r[key] for r in results]
        lines.append(f"{name:<16}{its:>11}{statistics.median(vals):>12.1f}{max(vals):>17.1f}")
    checks: dict[str, bool] = {}
    for r in results:
        for name, ok in r["checks"]:
            checks[name] = checks.get(name, True) and ok
    for name, ok in checks.items():
        lines.append(f"check {name}: {'OK' if ok else 'FAILED'}")
    ok = all(r["ok"] for r in results)
    lines.append(f"result: {'OK' if ok else 'FAILED'}   (wall {wall:.2f} s)")
    return "\n".join(lines)
