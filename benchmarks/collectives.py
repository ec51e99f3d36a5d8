"""Collective bandwidth: ReduceScatter, AllGather, AllReduce against numpy memcpy, nccl-tests style.

For every ``nranks x blocks`` shape one run measures, per size, the slowest rank's mean time per
collective over ``iters`` back-to-back calls inside one launch (after one warm-up call, between
two EpochBarriers),
and prints nccl-tests' columns:

* ``size``: bytes of the full vector per rank (AllReduce's buffer, RS's input, AG's output);
* ``time``: microseconds per collective;
* ``algbw = size / time``; ``busbw = algbw * 2(n-1)/n`` for AllReduce and ``(n-1)/n`` for RS / AG
  (nccl-tests' PERFORMANCE.md), the figure comparable with a link's bandwidth.

The roofline is numpy's memcpy measured in the same run: every rank copies a private buffer at
the same time (``np.copyto``, GiB/s = bytes copied / time), which is what the cores available
give each rank when all ranks move data at once (8 ranks share 2 cores here). ``vs roof`` is
``busbw / memcpy per rank``, with the roofline measured right before and after each size (the
load of a shared box drifts). Because wall time on a loaded box is noisy, CPU time is recorded
too: ``cpu us`` is one rank's thread time per collective (all its blocks), and ``cpu vs roof`` is
``factor * cpu(memcpy of size) / cpu us``, the same ratio by CPU work instead of wall time (equal
to ``vs roof`` when the ranks are CPU-bound on a quiet box). A single-process memcpy is recorded.

Writes ``<out>.json`` (versioned, machine metadata, load averages) and ``<out>.png``
(matplotlib, the ``bench`` extra; skipped with a note when missing).

    python benchmarks/collectives.py --quick      # well under a minute
    python benchmarks/collectives.py              # 4 KiB .. 64 MiB, nranks 2 4 8, blocks 1 4
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from typing import Any

import numpy as np

import shmcomm
from shmcomm.kernels.barrier import EpochBarrier
from shmcomm.kernels.collectives import all_gather, all_reduce, max_share, reduce_scatter
from shmcomm.transports.mpi.library import find_mpiexec

SCHEMA = "shmcomm.bench.collectives/1"
KiB, MiB = 1024, 1024 * 1024
OPS = ("rs", "ag", "ar")
OP_NAMES = {"rs": "ReduceScatter", "ag": "AllGather", "ar": "AllReduce"}
FULL_SIZES = tuple(4 * KiB * 4**k for k in range(8))  # 4 KiB .. 64 MiB
QUICK_SIZES = (4 * KiB, 64 * KiB, 1 * MiB)
ROOF_BYTES = 16 * MiB


def parse_size(text: str) -> int:
    """"4K", "16M", "4096" -> bytes."""
    t = text.strip().upper().removesuffix("B").removesuffix("I")
    mult = {"K": KiB, "M": MiB, "G": 1024 * MiB}.get(t[-1:], 1)
    return int(float(t.rstrip("KMG")) * mult)


def busbw_factor(op: str, n: int) -> float:
    return (2 * (n - 1) / n) if op == "ar" else ((n - 1) / n)


def _one(ctx, op: str, big, small, n: int) -> None:
    if op == "ar":
        all_reduce(ctx, big, big, n)
    elif op == "rs":
        reduce_scatter(ctx, big, small, n)
    else:
        all_gather(ctx, small, big, n)


def _bench_kernel(ctx, op: str, big, small, n: int, iters: int, out: list) -> None:
    _one(ctx, op, big, small, n)  # warm-up: first touches of the peers' pages fault them in
    EpochBarrier(ctx)
    t0, c0 = time.perf_counter(), time.thread_time()
    for _ in range(iters):
        _one(ctx, op, big, small, n)
    cpu = time.thread_time() - c0
    EpochBarrier(ctx)
    out.append((ctx.block_idx, (time.perf_counter() - t0) / iters, cpu / iters))


def _memcpy_per_rank(rt, nbytes: int, window_s: float, repeats: int = 3) -> float:
    """GiB/s of back-to-back np.copyto of a private buffer over ``window_s`` while every rank
    copies at the same time (a window, not one copy, so that the ranks' copies overlap)."""
    a = np.ones(nbytes // 4, np.float32)
    b = np.empty_like(a)
    rates = []
    for _ in range(repeats):
        rt.barrier()
        t0 = time.perf_counter()
        copies = 0
        while True:
            np.copyto(b, a)
            copies += 1
            t = time.perf_counter() - t0
            if t >= window_s:
                break
        rates.append(copies * nbytes / t / 2**30)
    rt.barrier()
    return sorted(rates)[len(rates) // 2]


def _memcpy_cpu(nbytes: int, repeats: int = 5) -> float:
    """CPU seconds (thread time, the best of ``repeats``) of one np.copyto of ``nbytes``."""
    a = np.ones(nbytes // 4, np.float32)
    b = np.empty_like(a)
    np.copyto(b, a)  # fault the pages in first
    ts = []
    for _ in range(repeats):
        c0 = time.thread_time()
        np.copyto(b, a)
        ts.append(time.thread_time() - c0)
    return min(ts)


def _host(rt, sizes: list[int], ops: list[str], blocks: int, max_iters: int, roof_bytes: int,
          window_s: float) -> dict:
    dt = np.dtype(np.float32)
    nmax = max(sizes) // dt.itemsize
    big = rt.alloc((nmax,), dt)
    small = rt.alloc((max_share(nmax, rt.nranks),), dt)
    rows = []
    for size in sizes:
        n = size // dt.itemsize
        iters = max(2, min(max_iters, (32 * MiB) // size))
        # the roofline right before and after this size's cases: the box's load drifts
        before = _memcpy_per_rank(rt, min(roof_bytes, max(size, 1 * MiB)), window_s)
        cases = []
        for op in ops:
            out: list = []
            big[:n] = 0.0  # AR sums in place, iters times: zeros stay finite
            rt.launch(_bench_kernel, blocks=blocks, args=(op, big.ptr, small.ptr, n, iters, out))
            wall = max(o[1] for o in out if o[0] == 0)
            cases.append({"op": op, "size": size, "iters": iters, "time_s": wall,
                          "cpu_s": sum(o[2] for o in out)})
        after = _memcpy_per_rank(rt, min(roof_bytes, max(size, 1 * MiB)), window_s)
        memcpy_cpu = _memcpy_cpu(size)
        for c in cases:
            c["memcpy_GiBps"] = (before + after) / 2
            c["memcpy_cpu_s"] = memcpy_cpu
        rows += cases
    return {"rows": rows}


def single_memcpy(nbytes: int, repeats: int = 7) -> float:
    a = np.ones(nbytes // 4, np.float32)
    b = np.empty_like(a)
    ts = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        np.copyto(b, a)
        ts.append(time.perf_counter() - t0)
    return nbytes / sorted(ts)[len(ts) // 2] / 2**30


def measure(nranks: int, blocks: int, sizes: list[int], ops: list[str], max_iters: int,
            roof_bytes: int, window_s: float = 0.3, transport: str = "shm") -> list[dict]:
    """Rows for one ``nranks x blocks`` shape (one shmcomm run)."""
    nmax = max(sizes) // 4
    heap = 4 * (nmax + max_share(nmax, nranks)) + 1 * MiB
    load0 = os.getloadavg()
    res = shmcomm.run(_host, nranks=nranks, blocks=blocks, window_bytes=heap, timeout=1800,
                      transport=transport, args=(sizes, ops, blocks, max_iters, roof_bytes, window_s))
    rows = []
    for i, base in enumerate(res[0]["rows"]):
        per = [r["rows"][i] for r in res]
        t = max(p["time_s"] for p in per)  # the slowest rank
        roof = float(np.median([p["memcpy_GiBps"] for p in per]))
        cpu = float(np.median([p["cpu_s"] for p in per]))
        memcpy_cpu = float(np.median([p["memcpy_cpu_s"] for p in per]))
        f = busbw_factor(base["op"], nranks)
        algbw = base["size"] / t / 2**30
        busbw = algbw * f
        rows.append({"op": base["op"], "nranks": nranks, "blocks": blocks, "size": base["size"],
                     "iters": base["iters"], "time_us": t * 1e6, "algbw_GiBps": algbw,
                     "busbw_GiBps": busbw, "memcpy_per_rank_GiBps": roof, "vs_roof": busbw / roof,
                     "cpu_us_per_rank": cpu * 1e6, "memcpy_cpu_us": memcpy_cpu * 1e6,
                     "cpu_vs_roof": f * memcpy_cpu / cpu if cpu > 0 else 0.0,
                     "loadavg": [round(x, 2) for x in load0]})
    return rows


# --- MPI: AllReduce on shmcomm's mpi transport and MPICH's own MPI_Allreduce (--mpi) ------------
# Each runs under ``mpiexec -n nranks`` (this script again, ``--mpi-worker``), right after the shm
# rows of the same shape, so the three AllReduce columns of the comparison share the weather.

def _mpich_allreduce(sizes: list[int], max_iters: int) -> list[dict]:
    """Every rank: in-place float32 sum ``MPI_Allreduce`` per size; the slowest rank's mean."""
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    n = comm.Get_size()
    rows = []
    for size in sizes:
        x = np.zeros(size // 4, np.float32)
        iters = max(2, min(max_iters, (32 * MiB) // size))
        comm.Allreduce(MPI.IN_PLACE, x, op=MPI.SUM)  # warm-up
        comm.Barrier()
        t0 = time.perf_counter()
        for _ in range(iters):
            comm.Allreduce(MPI.IN_PLACE, x, op=MPI.SUM)
        t = comm.allreduce((time.perf_counter() - t0) / iters, op=MPI.MAX)
        algbw = size / t / 2**30
        rows.append({"op": "ar", "nranks": n, "size": size, "iters": iters, "time_us": t * 1e6,
                     "algbw_GiBps": algbw, "busbw_GiBps": algbw * busbw_factor("ar", n)})
    return rows


def _mpi_worker(kind: str, blocks: int, sizes: list[int], max_iters: int, roof_bytes: int,
                window_s: float) -> None:
    """Body of every rank under mpiexec; rank 0 prints the rows as one JSON line."""
    if kind == "transport":
        from shmcomm.transports.mpi import load_mpi  # MPI with MPI_THREAD_MULTIPLE

        n = load_mpi().COMM_WORLD.Get_size()
        rows = measure(n, blocks, sizes, ["ar"], max_iters, roof_bytes, window_s, transport="mpi")
    else:
        rows = _mpich_allreduce(sizes, max_iters)
    from mpi4py import MPI

    if MPI.COMM_WORLD.Get_rank() == 0:
        print(json.dumps(rows), flush=True)


def mpi_rows(mpiexec: str, kind: str, nranks: int, blocks: int, sizes: list[int], max_iters: int,
             roof_bytes: int, window_s: float) -> list[dict]:
    """Rows of one ``--mpi-worker`` job (own process group, killed whole on timeout)."""
    import signal
    import subprocess

    cmd = [mpiexec, "-n", str(nranks), sys.executable, os.path.abspath(__file__), "--mpi-worker",
           kind, "--blocks", str(blocks), "--sizes", ",".join(map(str, sizes)),
           "--max-iters", str(max_iters), "--roof-bytes", str(roof_bytes), "--window", str(window_s)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=1800)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    if proc.returncode != 0:
        raise RuntimeError(f"mpiexec ({kind}) failed ({proc.returncode}): {err.strip()[-400:]}")
    rows = json.loads([ln for ln in out.splitlines() if ln.startswith("[")][-1])
    for r in rows:
        r["impl"], r["blocks"] = {"transport": "shmcomm mpi", "mpich": "MPI_Allreduce"}[kind], (
            blocks if kind == "transport" else 1)
        r["loadavg"] = [round(x, 2) for x in os.getloadavg()]
    return rows


def mpi_table(rows: list[dict], mpi: list[dict]) -> str:
    """AllReduce busbw per shape and size: shmcomm on shm, shmcomm on mpi, MPI_Allreduce."""
    hdr = (f"{'nranks':>7}{'blocks':>7}{'size':>10}{'shm GiB/s':>12}{'mpi GiB/s':>12}"
           f"{'MPI_Allreduce':>15}{'mpi/shm':>9}{'mpi/MPICH':>11}")
    lines = ["AllReduce busbw: shmcomm on shm, shmcomm on the mpi transport, MPICH's MPI_Allreduce",
             hdr, "-" * len(hdr)]
    for r in (r for r in rows if r["op"] == "ar"):
        key = (r["nranks"], r["size"])
        m = next((x for x in mpi if x["impl"] == "shmcomm mpi" and x["blocks"] == r["blocks"]
                  and (x["nranks"], x["size"]) == key), None)
        c = next((x for x in mpi if x["impl"] == "MPI_Allreduce" and (x["nranks"], x["size"]) == key),
                 None)
        mb = m["busbw_GiBps"] if m else float("nan")
        cb = c["busbw_GiBps"] if c else float("nan")
        lines.append(f"{r['nranks']:>7}{r['blocks']:>7}{fmt_size(r['size']):>10}"
                     f"{r['busbw_GiBps']:>12.3f}{mb:>12.3f}{cb:>15.3f}"
                     f"{mb / r['busbw_GiBps']:>9.2f}{mb / cb:>11.2f}")
    return "\n".join(lines)


# --- end of the MPI section -----------------------------------------------------------------------


def fmt_size(b: int) -> str:
    return f"{b // MiB} MiB" if b >= MiB else f"{b // KiB} KiB"


def table(rows: list[dict]) -> str:
    hdr = (f"{'op':<14}{'nranks':>7}{'blocks':>7}{'size':>10}{'time us':>12}{'algbw GiB/s':>13}"
           f"{'busbw GiB/s':>13}{'memcpy/rank':>13}{'vs roof':>9}{'cpu us':>10}{'cpu vs roof':>13}")
    lines = [hdr, "-" * len(hdr)]
    for r in rows:
        lines.append(f"{OP_NAMES[r['op']]:<14}{r['nranks']:>7}{r['blocks']:>7}{fmt_size(r['size']):>10}"
                     f"{r['time_us']:>12.1f}{r['algbw_GiBps']:>13.3f}{r['busbw_GiBps']:>13.3f}"
                     f"{r['memcpy_per_rank_GiBps']:>13.3f}{r['vs_roof']:>9.2f}"
                     f"{r['cpu_us_per_rank']:>10.0f}{r['cpu_vs_roof']:>13.2f}")
    return "\n".join(lines)


def plot(rows: list[dict], path: str) -> str | None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "matplotlib is not installed (pip install -e '.[bench]'): plot skipped"
    ops = [o for o in OPS if any(r["op"] == o for r in rows)]
    fig, axes = plt.subplots(1, len(ops), figsize=(5 * len(ops), 4), squeeze=False)
    for ax, op in zip(axes[0], ops, strict=True):
        shapes = sorted({(r["nranks"], r["blocks"]) for r in rows if r["op"] == op})
        for nr, nb in shapes:
            rr = [r for r in rows if r["op"] == op and (r["nranks"], r["blocks"]) == (nr, nb)]
            line, = ax.plot([r["size"] for r in rr], [r["busbw_GiBps"] for r in rr], marker="o",
                            label=f"{nr}x{nb}")
            ax.axhline(rr[0]["memcpy_per_rank_GiBps"], color=line.get_color(), ls=":", lw=0.8)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_title(f"{OP_NAMES[op]} (dotted: memcpy per rank)")
        ax.set_xlabel("size per rank (bytes)")
        ax.set_ylabel("busbw GiB/s")
        ax.legend(title="ranks x blocks", fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return None


def machine() -> dict[str, Any]:
    return {"platform": platform.platform(), "python": platform.python_version(),
            "numpy": np.__version__, "shmcomm": shmcomm.__version__, "cpus": os.cpu_count(),
            "affinity": len(os.sched_getaffinity(0)), "processor": platform.processor(),
            "loadavg_start": [round(x, 2) for x in os.getloadavg()]}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="sizes 4 KiB, 64 KiB, 1 MiB; few iterations")
    p.add_argument("--nranks", default=None, help="comma list (default 2,4,8; quick: 2,8)")
    p.add_argument("--blocks", default=None, help="comma list (default 1,4; quick: 4)")
    p.add_argument("--ops", default="rs,ag,ar", help="comma list of rs, ag, ar")
    p.add_argument("--min-size", default=None, help="smallest size per rank, e.g. 4K")
    p.add_argument("--max-size", default=None, help="largest size per rank, e.g. 64M")
    p.add_argument("--out", default="results/collectives", help="path stem for .json and .png")
    p.add_argument("--no-plot", action="store_true")
    # -- MPI section (see "MPI: AllReduce on ..." above) --
    p.add_argument("--mpi", action="store_true",
                   help="also AllReduce on shmcomm's mpi transport and MPICH's MPI_Allreduce, "
                        "each under mpiexec, after the shm rows of every shape")
    p.add_argument("--mpi-worker", choices=("transport", "mpich"), help=argparse.SUPPRESS)
    p.add_argument("--sizes", help=argparse.SUPPRESS)
    p.add_argument("--max-iters", type=int, help=argparse.SUPPRESS)
    p.add_argument("--roof-bytes", type=int, help=argparse.SUPPRESS)
    p.add_argument("--window", type=float, help=argparse.SUPPRESS)
    ns = p.parse_args(argv)
    if ns.mpi_worker:
        _mpi_worker(ns.mpi_worker, int(ns.blocks), [int(x) for x in ns.sizes.split(",")],
                    ns.max_iters, ns.roof_bytes, ns.window)
        return 0
    mpiexec = find_mpiexec() if ns.mpi else None
    if ns.mpi and mpiexec is None:
        p.error("--mpi needs mpi4py and mpiexec: pip install -e '.[mpi]'")
    sizes = list(QUICK_SIZES if ns.quick else FULL_SIZES)
    if ns.min_size:
        sizes = [s for s in sizes if s >= parse_size(ns.min_size)]
    if ns.max_size:
        sizes = [s for s in sizes if s <= parse_size(ns.max_size)]
    if not sizes:
        p.error("no size left between --min-size and --max-size")
    nranks = [int(x) for x in (ns.nranks or ("2,8" if ns.quick else "2,4,8")).split(",")]
    blocks = [int(x) for x in (ns.blocks or ("4" if ns.quick else "1,4")).split(",")]
    ops = [o.strip() for o in ns.ops.split(",")]
    if any(o not in OPS for o in ops):
        p.error(f"--ops: choose from {', '.join(OPS)}")
    max_iters = 10 if ns.quick else 100
    roof_bytes = min(ROOF_BYTES, max(sizes)) if ns.quick else ROOF_BYTES
    meta = machine()
    t0 = time.perf_counter()
    single = single_memcpy(roof_bytes)
    rows: list[dict] = []
    mpi: list[dict] = []
    for nr in nranks:
        for nb in blocks:
            rows += measure(nr, nb, sizes, ops, max_iters, roof_bytes, 0.1 if ns.quick else 0.3)
            if mpiexec:
                window = 0.1 if ns.quick else 0.3
                mpi += mpi_rows(mpiexec, "transport", nr, nb, sizes, max_iters, roof_bytes, window)
                if not any(r["impl"] == "MPI_Allreduce" and r["nranks"] == nr for r in mpi):
                    mpi += mpi_rows(mpiexec, "mpich", nr, 1, sizes, max_iters, roof_bytes, window)
    meta["loadavg_end"] = [round(x, 2) for x in os.getloadavg()]
    print(f"collectives, float32 sum; memcpy 1 process {single:.2f} GiB/s ({fmt_size(roof_bytes)}); "
          f"loadavg {meta['loadavg_start']} -> {meta['loadavg_end']}")
    print(table(rows))
    if mpi:
        print(mpi_table(rows, mpi))
    ar16 = [r for r in rows if r["op"] == "ar" and r["size"] == 16 * MiB and r["nranks"] == 8]
    for r in ar16:
        print(f"AllReduce 16 MiB x 8 ranks x {r['blocks']} blocks: busbw {r['busbw_GiBps']:.3f} GiB/s "
              f"= {100 * r['vs_roof']:.0f}% of memcpy per rank ({r['memcpy_per_rank_GiBps']:.3f} GiB/s); "
              f"by CPU time {100 * r['cpu_vs_roof']:.0f}%")
    out_dir = os.path.dirname(ns.out)
    if out_dir:
        os.makedirs(out_dir, exist_ok=True)
    doc = {"schema": SCHEMA, "machine": meta, "dtype": "float32", "op": "sum",
           "memcpy_single_GiBps": single, "roof_bytes": roof_bytes, "argv": sys.argv[1:],
           "wall_s": time.perf_counter() - t0, "rows": rows, "mpi_rows": mpi}
    with open(ns.out + ".json", "w") as f:
        json.dump(doc, f, indent=1)
    print(f"wrote {ns.out}.json")
    if not ns.no_plot:
        note = plot(rows, ns.out + ".png")
        print(note or f"wrote {ns.out}.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
