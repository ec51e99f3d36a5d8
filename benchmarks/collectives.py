"""Collective bandwidth, nccl-tests style: ReduceScatter, AllGather and AllReduce, every result checked.

For every ``nranks x blocks`` shape one run measures, per collective, data type, reduction op and
size, the slowest rank's mean time per call over ``-n`` back-to-back out-of-place calls inside
one launch (after ``-w`` warm-up calls, between two EpochBarriers), then (``-c 1``, the default)
compares every output element with numpy's result and counts the wrong ones, as nccl-tests'
``#wrong`` column does. Columns:

* ``size``: bytes of the full vector per rank (AllReduce's buffer, RS's input, AG's output);
  ``count``: its elements;
* ``time``: microseconds per call, the slowest rank's;
* ``algbw = size / time``; ``busbw = algbw * 2(n-1)/n`` for AllReduce and ``(n-1)/n`` for RS / AG
  (nccl-tests' PERFORMANCE.md), the figure comparable with a link's bandwidth;
* ``#wrong``: output elements that differ from numpy's, summed over the ranks (the inputs are
  small integers, so every reduction order gives the exact same result in every data type);
* ``memcpy/rank`` and ``vs roof``: numpy's memcpy measured in the same run while every rank copies
  at once (what the cores give each rank), and ``busbw`` over it.

With ``--mpi`` (the ``mpi`` extra: mpi4py + the MPICH wheel) every AllReduce case is measured two
more ways in the same run, each its own ``mpiexec -n nranks`` job right after the shm rows of its
shape: the same kernel on shmcomm's mpi transport (``AllReduce/mpi``) and MPICH's own out-of-place
``MPI_Allreduce`` (``MPI_Allreduce``, one thread per rank), both checked like the shm rows; a second
table puts the three busbw figures side by side.

Writes ``<out>.json`` (versioned, machine metadata, load averages) and ``<out>.png``
(matplotlib, the ``bench`` extra). Exit status 1 when any result was wrong or an ``--mpi`` job
failed, 2 on a usage error.

    python benchmarks/collectives.py --quick                 # every type and op, small sizes
    python benchmarks/collectives.py -b 4K -e 64M -f 4       # float32 sum, nranks 2 4 8, blocks 1 4
    python benchmarks/collectives.py -d all -o all -b 1K -e 1M -f 32 --nranks 4
    python benchmarks/collectives.py --collectives ar -b 1M -e 16M --nranks 4,8 --blocks 4 --mpi
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any

import numpy as np

import shmcomm
from shmcomm.config import MAX_BLOCKS, MAX_RANKS
from shmcomm.kernels.barrier import EpochBarrier
from shmcomm.kernels.collectives import all_gather, all_reduce, max_share, reduce_scatter, share_bounds
from shmcomm.transports.mpi.library import find_mpiexec, run_script

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # _bench beside this file
import _bench  # noqa: E402

SCHEMA = "shmcomm.bench.collectives/2"  # rows gained "transport" (--mpi): additive, same schema
KiB, MiB = 1024, 1024 * 1024
COLLS = ("rs", "ag", "ar")
COLL_NAMES = {"rs": "ReduceScatter", "ag": "AllGather", "ar": "AllReduce"}
DTYPES = ("float32", "float16", "int32", "int16", "int8")
REDOPS = ("sum", "max", "min")
NP_REDUCE = {"sum": np.add, "max": np.maximum, "min": np.minimum}
MAX_BYTES = 1024 * MiB
# the kernels the benchmark calls, by collective (a test swaps one for a broken kernel)
KERNELS: dict[str, Any] = {"rs": reduce_scatter, "ag": all_gather, "ar": all_reduce}


def parse_size(text: str) -> int:
    """"4K", "16M", "1G", "4096" -> bytes (argparse type: a usage error when malformed)."""
    t = text.strip().upper().removesuffix("B").removesuffix("I")
    mult = {"K": KiB, "M": MiB, "G": 1024 * MiB}.get(t[-1:], 1)
    try:
        value = int(float(t.rstrip("KMG")) * mult)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a size like 4096, 4K, 16M or 1G, got {text!r}") from None
    if not 1 <= value <= MAX_BYTES:
        raise argparse.ArgumentTypeError(f"size must be in [1, 1G] bytes, got {text!r}")
    return value


def _int_list(low: int, high: int):
    return _bench.int_list(low, high)


def _choices(allowed: tuple[str, ...]):
    return _bench.choice_list(allowed, all_word="all")


def busbw_factor(coll: str, n: int) -> float:
    return (2 * (n - 1) / n) if coll == "ar" else ((n - 1) / n)


def sizes_between(lo: int, hi: int, factor: float) -> list[int]:
    """nccl-tests' sweep: ``lo``, ``lo * factor``, ... up to ``hi`` (the last one always ``hi``)."""
    out, s = [], float(lo)
    while s < hi and len(out) < 64:
        out.append(int(s))
        s *= factor
    return out + [hi]


def input_values(rank: int, count: int, dtype: np.dtype) -> np.ndarray:
    """Rank ``rank``'s input: small integers 0..4, so sums over 64 ranks stay exact in float16
    and wrap identically in any order in the integer types."""
    i = np.arange(count, dtype=np.int64)
    return ((i * 7 + rank * 13) % 5).astype(dtype)


def expected(coll: str, redop: str, nranks: int, rank: int, count: int, dtype: np.dtype) -> np.ndarray:
    """numpy's result of ``coll`` on the inputs of :func:`input_values`, as this rank sees it."""
    lo, hi = share_bounds(count, nranks, rank)
    if coll == "ag":
        full = np.empty(count, dtype)
        for r in range(nranks):
            a, b = share_bounds(count, nranks, r)
            full[a:b] = input_values(r, count, dtype)[a:b]
        return full
    acc = input_values(0, count, dtype)
    with np.errstate(over="ignore"):
        for r in range(1, nranks):
            acc = NP_REDUCE[redop](acc, input_values(r, count, dtype)).astype(dtype)
    return acc[lo:hi] if coll == "rs" else acc


def _call(ctx, coll: str, redop: str, src, dst, count: int) -> None:
    if coll == "ag":
        KERNELS["ag"](ctx, src, dst, count)
    else:
        KERNELS[coll](ctx, src, dst, count, redop)


def _bench_kernel(ctx, coll: str, redop: str, src, dst, count: int, warmup: int, iters: int,
                  out: list) -> None:
    for _ in range(warmup):  # first touches of the peers' pages fault them in
        _call(ctx, coll, redop, src, dst, count)
    EpochBarrier(ctx)
    t0 = time.perf_counter()
    for _ in range(iters):
        _call(ctx, coll, redop, src, dst, count)
    EpochBarrier(ctx)
    out.append((ctx.block_idx, (time.perf_counter() - t0) / iters))


def _memcpy_per_rank(barrier, nbytes: int, window_s: float, repeats: int = 3) -> float:
    """GiB/s of back-to-back np.copyto of a private buffer over ``window_s`` while every rank
    copies at the same time (a window, not one copy, so that the ranks' copies overlap)."""
    a = np.ones(max(nbytes // 4, 1), np.float32)
    b = np.empty_like(a)
    rates = []
    for _ in range(repeats):
        barrier()
        t0 = time.perf_counter()
        copies = 0
        while True:
            np.copyto(b, a)
            copies += 1
            t = time.perf_counter() - t0
            if t >= window_s:
                break
        rates.append(copies * a.nbytes / t / 2**30)
    barrier()
    return sorted(rates)[len(rates) // 2]


def _host(rt, cases: list[tuple[str, str, str]], sizes: list[int], blocks: int, warmup: int,
          iters: int, check: bool, window_s: float) -> list[dict]:
    rows = []
    bufs: dict[str, tuple] = {}
    for dt_name in sorted({c[1] for c in cases}):
        dt = np.dtype(dt_name)
        nmax = max(max(sizes) // dt.itemsize, 1)
        bufs[dt_name] = (rt.alloc((nmax,), dt), rt.alloc((max_share(nmax, rt.nranks),), dt),
                         rt.alloc((nmax,), dt))
    for size in sizes:
        roof = _memcpy_per_rank(rt.barrier, max(size, 1 * MiB), window_s)
        for coll, dt_name, redop in cases:
            dt = np.dtype(dt_name)
            count = max(size // dt.itemsize, 1)
            full, share, result = bufs[dt_name]
            lo, hi = share_bounds(count, rt.nranks, rt.rank)
            mine = input_values(rt.rank, count, dt)
            if coll == "ag":
                share[:hi - lo] = mine[lo:hi]
                src, dst, got = share, result, result[:count]
            elif coll == "rs":
                full[:count] = mine
                src, dst, got = full, share, share[:hi - lo]
            else:
                full[:count] = mine
                src, dst, got = full, result, result[:count]
            dst[:] = 0
            out: list = []
            rt.launch(_bench_kernel, blocks=blocks,
                      args=(coll, redop, src.ptr, dst.ptr, count, warmup, iters, out))
            wrong = -1
            if check:
                want = expected(coll, redop, rt.nranks, rt.rank, count, dt)
                wrong = int(np.count_nonzero(np.asarray(got) != want))
            rows.append({"coll": coll, "dtype": dt_name, "redop": "none" if coll == "ag" else redop,
                         "size": count * dt.itemsize, "count": count, "iters": iters,
                         "time_s": max(o[1] for o in out if o[0] == 0), "wrong": wrong,
                         "memcpy_GiBps": roof})
    return rows


def measure(nranks: int, blocks: int, cases: list[tuple[str, str, str]], sizes: list[int],
            warmup: int, iters: int, check: bool, window_s: float,
            transport: str = "shm") -> list[dict]:
    """Rows for one ``nranks x blocks`` shape (one shmcomm run on ``transport``; under "mpi"
    every process of the ``mpiexec`` job calls this and gets every row)."""
    per_dtype = max(sizes) + max_share(max(sizes), nranks) + max(sizes) + 3 * 4096
    heap = len({c[1] for c in cases}) * per_dtype + 1 * MiB
    load0 = os.getloadavg()
    res = shmcomm.run(_host, nranks=nranks, blocks=blocks, window_bytes=heap, timeout=3600,
                      transport=transport, args=(cases, sizes, blocks, warmup, iters, check, window_s))
    return summarize(res, nranks, blocks, check, transport, load0)


def summarize(res: list[list[dict]], nranks: int, blocks: int, check: bool, transport: str,
              load0: tuple[float, float, float]) -> list[dict]:
    """One row per case from every rank's rows of it: the slowest rank's time, #wrong summed."""
    rows = []
    for i, base in enumerate(res[0]):
        per = [r[i] for r in res]
        t = max(p["time_s"] for p in per)  # the slowest rank
        roof = float(np.median([p["memcpy_GiBps"] for p in per]))
        algbw = base["size"] / t / 2**30
        busbw = algbw * busbw_factor(base["coll"], nranks)
        wrong = sum(p["wrong"] for p in per) if check else -1
        rows.append({**{k: base[k] for k in ("coll", "dtype", "redop", "size", "count", "iters")},
                     "transport": transport, "nranks": nranks, "blocks": blocks, "time_us": t * 1e6,
                     "algbw_GiBps": algbw,
                     "busbw_GiBps": busbw, "wrong": wrong, "memcpy_per_rank_GiBps": roof,
                     "vs_roof": busbw / roof, "loadavg": [round(x, 2) for x in load0]})
    return rows


# --- MPI: AllReduce on shmcomm's mpi transport and MPICH's own MPI_Allreduce (--mpi) ------------
# Each is one ``mpiexec -n nranks`` job running this script again (``--mpi-worker``), right after
# the shm rows of the same shape, so the three AllReduce figures share the box's load. Rank 0 of
# the job prints its rows as one JSON line; the rows are checked against numpy like the shm ones.

MPI_JOB_TIMEOUT_S = 3600.0
MPI_IMPLS = {"mpi": "AllReduce/mpi", "mpich": "MPI_Allreduce"}  # row label by transport


def _mpich_allreduce(cases: list[tuple[str, str, str]], sizes: list[int], warmup: int, iters: int,
                     check: bool, window_s: float) -> list[list[dict]]:
    """Every rank of the job: out-of-place ``MPI_Allreduce`` per AllReduce case and size, the
    rows of :func:`_host`'s shape (one thread per rank); every rank's rows, gathered."""
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    mpi_op = {"sum": MPI.SUM, "max": MPI.MAX, "min": MPI.MIN}
    rows = []
    for size in sizes:
        roof = _memcpy_per_rank(comm.Barrier, max(size, 1 * MiB), window_s)
        for coll, dt_name, redop in cases:
            dt = np.dtype(dt_name)
            count = max(size // dt.itemsize, 1)
            src, dst = input_values(comm.rank, count, dt), np.zeros(count, dt)
            for _ in range(warmup):
                comm.Allreduce(src, dst, op=mpi_op[redop])
            comm.Barrier()
            t0 = time.perf_counter()
            for _ in range(iters):
                comm.Allreduce(src, dst, op=mpi_op[redop])
            comm.Barrier()
            t = (time.perf_counter() - t0) / iters
            wrong = -1
            if check:
                want = expected(coll, redop, comm.size, comm.rank, count, dt)
                wrong = int(np.count_nonzero(dst != want))
            rows.append({"coll": coll, "dtype": dt_name, "redop": redop, "size": count * dt.itemsize,
                         "count": count, "iters": iters, "time_s": t, "wrong": wrong,
                         "memcpy_GiBps": roof})
    return comm.allgather(rows)


def _mpi_worker(kind: str, job: dict[str, Any]) -> None:
    """Body of every process of an ``mpiexec`` job (``--mpi-worker``); rank 0 prints the rows."""
    cases = [tuple(c) for c in job["cases"]]
    args = (cases, job["sizes"], job["warmup"], job["iters"], job["check"], job["window_s"])
    if kind == "mpi":
        from shmcomm.launch.mpi import is_root
        from shmcomm.transports.mpi import load_mpi

        nranks = load_mpi().COMM_WORLD.Get_size()
        load0 = os.getloadavg()
        rows = measure(nranks, job["blocks"], *args, transport="mpi")
    else:
        from mpi4py import MPI

        def is_root() -> bool:
            return MPI.COMM_WORLD.Get_rank() == 0

        load0 = os.getloadavg()
        res = _mpich_allreduce(*args)
        rows = summarize(res, MPI.COMM_WORLD.Get_size(), 1, job["check"], "mpich", load0)
    if is_root():
        print(json.dumps(rows), flush=True)


def mpi_rows(mpiexec: str, kind: str, nranks: int, blocks: int, job: dict[str, Any]) -> list[dict]:
    """The rows of one ``--mpi-worker`` job, ``kind`` "mpi" (shmcomm's mpi transport) or "mpich"
    (``MPI_Allreduce``); the job runs in its own process group, stopped whole on a timeout."""
    code, out, err = run_script(mpiexec, nranks, [
        os.path.abspath(__file__), "--mpi-worker", kind,
        "--mpi-job", json.dumps({**job, "blocks": blocks})], MPI_JOB_TIMEOUT_S)
    lines = [ln for ln in out.splitlines() if ln.startswith("[")]
    if code != 0 or not lines:
        raise RuntimeError(f"{MPI_IMPLS[kind]} {nranks}x{blocks}: mpiexec exited with status "
                           f"{code}: {err.strip()[-600:]}")
    return json.loads(lines[-1])


def mpi_table(rows: list[dict]) -> str:
    """AllReduce busbw per shape, type, op and size: shm, the mpi transport, MPI_Allreduce."""
    hdr = (f"{'nranks':>7}{'blocks':>7}{'size(B)':>11}{'type':>8}{'redop':>6}{'shm':>10}"
           f"{'mpi':>10}{'MPI_Allreduce':>15}{'mpi/shm':>9}{'mpi/MPICH':>11}")
    lines = ["AllReduce busbw (GiB/s): shmcomm on shm, shmcomm on the mpi transport, "
             "MPICH's MPI_Allreduce (one thread per rank)", hdr, "-" * len(hdr)]

    def busbw(transport: str, r: dict) -> float:
        key = ("dtype", "redop", "size", "nranks") + (("blocks",) if transport != "mpich" else ())
        m = next((x for x in rows if x["transport"] == transport
                  and all(x[k] == r[k] for k in key)), None)
        return m["busbw_GiBps"] if m else float("nan")

    for r in (r for r in rows if r["transport"] == "shm" and r["coll"] == "ar"):
        shm, mpi, mpich = r["busbw_GiBps"], busbw("mpi", r), busbw("mpich", r)
        lines.append(f"{r['nranks']:>7}{r['blocks']:>7}{r['size']:>11}{r['dtype']:>8}{r['redop']:>6}"
                     f"{shm:>10.3f}{mpi:>10.3f}{mpich:>15.3f}{mpi / shm:>9.2f}{mpi / mpich:>11.2f}")
    return "\n".join(lines)


# --- end of the MPI section -----------------------------------------------------------------------


def label(row: dict) -> str:
    """The ``collective`` column: the collective's name, or the MPI implementation's (--mpi)."""
    return MPI_IMPLS.get(row.get("transport", "shm"), COLL_NAMES[row["coll"]])


def table(rows: list[dict]) -> str:
    """nccl-tests' table (out-of-place columns), one row per case; ``#wrong`` is N/A without -c."""
    hdr = (f"{'collective':<14}{'nranks':>7}{'blocks':>7}{'size(B)':>11}{'count':>10}{'type':>8}"
           f"{'redop':>6}{'time(us)':>11}{'algbw(GiB/s)':>14}{'busbw(GiB/s)':>14}{'#wrong':>8}"
           f"{'memcpy/rank':>13}{'vs roof':>9}")
    lines = [hdr, "-" * len(hdr)]
    for r in rows:
        wrong = "N/A" if r["wrong"] < 0 else str(r["wrong"])
        lines.append(f"{label(r):<14}{r['nranks']:>7}{r['blocks']:>7}{r['size']:>11}"
                     f"{r['count']:>10}{r['dtype']:>8}{r['redop']:>6}{r['time_us']:>11.1f}"
                     f"{r['algbw_GiBps']:>14.3f}{r['busbw_GiBps']:>14.3f}{wrong:>8}"
                     f"{r['memcpy_per_rank_GiBps']:>13.3f}{r['vs_roof']:>9.2f}")
    return "\n".join(lines)


def plot(rows: list[dict], path: str, meta: dict[str, Any]) -> str | None:
    """busbw against size, a panel per collective, a line per shape (float32 sum rows, or the
    first type and op measured); the dotted lines are memcpy per rank in the same run."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "matplotlib is not installed (pip install -e '.[bench]'): plot skipped"
    rows = [r for r in rows if r["transport"] == "shm"]  # --mpi's rows are in mpi_table
    dtype = "float32" if any(r["dtype"] == "float32" for r in rows) else rows[0]["dtype"]
    colls = [c for c in COLLS if any(r["coll"] == c for r in rows)]
    fig, axes = plt.subplots(1, len(colls), figsize=(5 * len(colls), 4.4), squeeze=False)
    for ax, coll in zip(axes[0], colls, strict=True):
        sel = [r for r in rows if r["coll"] == coll and r["dtype"] == dtype]
        redop = "none" if coll == "ag" else ("sum" if any(r["redop"] == "sum" for r in sel)
                                             else sel[0]["redop"])
        sel = [r for r in sel if r["redop"] == redop]
        for nr, nb in sorted({(r["nranks"], r["blocks"]) for r in sel}):
            rr = [r for r in sel if (r["nranks"], r["blocks"]) == (nr, nb)]
            line, = ax.plot([r["size"] for r in rr], [r["busbw_GiBps"] for r in rr], marker="o",
                            label=f"{nr} ranks, {nb} blocks each")
            ax.plot([r["size"] for r in rr], [r["memcpy_per_rank_GiBps"] for r in rr],
                    color=line.get_color(), ls=":", lw=0.9)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_title(f"{COLL_NAMES[coll]}, {dtype}" + ("" if redop == "none" else f" {redop}"))
        ax.set_xlabel("bytes per rank")
        ax.set_ylabel("bus bandwidth, GiB/s (slowest rank)")
        ax.legend(fontsize=7)
    fig.suptitle(f"shmcomm collectives, {meta['date']}, {meta['cpus']} CPUs ({meta['platform']}), "
                 f"load {meta['loadavg_start'][0]:.1f} -> {meta['loadavg_end'][0]:.1f}\n"
                 "solid: bus bandwidth; dotted: numpy memcpy per rank, every rank copying at once",
                 fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return None


def machine() -> dict[str, Any]:
    return dict(_bench.machine(), numpy=np.__version__, shmcomm=shmcomm.__version__)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        epilog="exit status: 0 every result right, 1 a result was wrong (#wrong > 0) or an --mpi job "
               "failed, 2 usage error")
    p.add_argument("--quick", action="store_true",
                   help="every type and op at 4 KiB and 64 KiB on 4 ranks x 2 blocks, -n 5 -w 1; "
                        "options given as well override it (default: off)")
    p.add_argument("-b", "--minbytes", "--min-size", type=parse_size, default=None,
                   help="smallest size per rank, e.g. 4K (default: 4K)")
    p.add_argument("-e", "--maxbytes", "--max-size", type=parse_size, default=None,
                   help="largest size per rank, e.g. 64M (default: 64M)")
    p.add_argument("-f", "--stepfactor", type=float, default=None,
                   help="multiply the size by this between steps, > 1 (default: 4)")
    p.add_argument("-n", "--iters", type=int, default=None,
                   help="timed calls per case, 1..100000 (default: 20)")
    p.add_argument("-w", "--warmup_iters", type=int, default=None,
                   help="untimed calls before them, 0..1000 (default: 1)")
    p.add_argument("-c", "--check", type=int, choices=(0, 1), default=1,
                   help="check every result against numpy and count #wrong (default: 1)")
    p.add_argument("-d", "--datatype", type=_choices(DTYPES), default=None,
                   help="'all' or a comma list of " + ", ".join(DTYPES) + " (default: float32)")
    p.add_argument("-o", "--op", type=_choices(REDOPS), default=None,
                   help="reduction ops of ReduceScatter and AllReduce: 'all' or a comma list of "
                        + ", ".join(REDOPS) + " (default: sum)")
    p.add_argument("--collectives", type=_choices(COLLS), default=None,
                   help="'all' or a comma list of rs, ag, ar (default: all)")
    p.add_argument("--nranks", type=_int_list(2, MAX_RANKS), default=None,
                   help=f"rank counts, 2..{MAX_RANKS} (default: 2,4,8)")
    p.add_argument("--blocks", type=_int_list(1, MAX_BLOCKS), default=None,
                   help=f"blocks per rank, 1..{MAX_BLOCKS} (default: 1,4)")
    p.add_argument("--out", default="results/collectives",
                   help="path stem of the .json and .png written (default: %(default)s)")
    p.add_argument("--no-plot", action="store_true", help="write no .png (default: off)")
    # -- MPI section (see "MPI: AllReduce on ..." above) --
    p.add_argument("--mpi", action="store_true",
                   help="also run every AllReduce case on shmcomm's mpi transport and as MPICH's "
                        "MPI_Allreduce, each under mpiexec after the shm rows of its shape, checked "
                        "the same way; needs the mpi extra (default: off)")
    p.add_argument("--mpiexec", default=None, metavar="PATH",
                   help="the mpiexec of the --mpi jobs, e.g. scripts/netns-mpiexec under "
                        "scripts/netns_hosts.py --shell: ranks on network-namespace hosts "
                        "(default: the one next to this Python)")
    p.add_argument("--mpi-worker", choices=tuple(MPI_IMPLS), default=None, help=argparse.SUPPRESS)
    p.add_argument("--mpi-job", default=None, help=argparse.SUPPRESS)
    return p


def main(argv: list[str] | None = None) -> int:
    p = build_parser()
    ns = p.parse_args(argv)
    if ns.mpi_worker:
        _mpi_worker(ns.mpi_worker, json.loads(ns.mpi_job))
        return 0
    q = ns.quick

    def pick(value: Any, quick: Any, full: Any) -> Any:
        return value if value is not None else (quick if q else full)

    lo, hi = pick(ns.minbytes, 4 * KiB, 4 * KiB), pick(ns.maxbytes, 64 * KiB, 64 * MiB)
    factor = pick(ns.stepfactor, 16.0, 4.0)
    iters, warmup = pick(ns.iters, 5, 20), pick(ns.warmup_iters, 1, 1)
    if lo > hi:
        p.error(f"-b/--minbytes ({lo}) must be <= -e/--maxbytes ({hi})")
    if not factor > 1:
        p.error(f"-f/--stepfactor must be > 1, got {factor:g}")
    if not 1 <= iters <= 100000:
        p.error(f"-n/--iters must be in [1, 100000], got {iters}")
    if not 0 <= warmup <= 1000:
        p.error(f"-w/--warmup_iters must be in [0, 1000], got {warmup}")
    dtypes = pick(ns.datatype, list(DTYPES), ["float32"])
    redops = pick(ns.op, list(REDOPS), ["sum"])
    colls = ns.collectives or list(COLLS)
    nranks = pick(ns.nranks, [4], [2, 4, 8])
    blocks = pick(ns.blocks, [2], [1, 4])
    sizes = sizes_between(lo, hi, factor)
    cases = [(c, d, o) for c in colls for d in dtypes for o in (redops if c != "ag" else ["none"])]
    window_s = 0.1 if q else 0.3
    if ns.mpi and "ar" not in colls:
        p.error("--mpi compares AllReduce: --collectives must include ar")
    mpiexec = (ns.mpiexec or find_mpiexec()) if ns.mpi else None
    if ns.mpi and mpiexec is None:
        p.error("--mpi needs mpi4py and mpiexec: pip install -e '.[mpi]'")
    job = {"cases": [c for c in cases if c[0] == "ar"], "sizes": sizes, "warmup": warmup,
           "iters": iters, "check": bool(ns.check), "window_s": window_s}
    meta = machine()
    t0 = time.perf_counter()
    rows: list[dict] = []
    for nr in nranks:
        for nb in blocks:
            rows += measure(nr, nb, cases, sizes, warmup, iters, bool(ns.check), window_s)
            if mpiexec:
                try:
                    rows += mpi_rows(mpiexec, "mpi", nr, nb, job)
                    if not any(r["transport"] == "mpich" and r["nranks"] == nr for r in rows):
                        rows += mpi_rows(mpiexec, "mpich", nr, 1, job)
                except RuntimeError as e:
                    print(f"collectives.py: {e}", file=sys.stderr)
                    return 1
    meta["loadavg_end"] = [round(x, 2) for x in os.getloadavg()]
    print(f"shmcomm collectives, {meta['date']}, {meta['cpus']} CPUs, load average "
          f"{meta['loadavg_start'][0]:.2f} -> {meta['loadavg_end'][0]:.2f}; -n {iters} -w {warmup} "
          f"-c {ns.check}; out-of-place")
    print(table(rows))
    if mpiexec:
        print()
        print(mpi_table(rows))
    judged = _bench.stability(load=meta["loadavg_start"][0])
    if not judged.stable:  # the times are means of -n calls: only the load can be judged here
        print(f"WARNING: collectives: {judged}; rerun on a quieter machine before quoting these times",
              file=sys.stderr)
    wrong = sum(r["wrong"] for r in rows if r["wrong"] > 0)
    if ns.check:
        print(f"# wrong elements: {wrong} ({'OK' if wrong == 0 else 'FAILED'})")
    out_dir = os.path.dirname(ns.out)
    if out_dir:
        os.makedirs(out_dir, exist_ok=True)
    doc = {"schema": SCHEMA, "machine": meta, "argv": sys.argv[1:] if argv is None else argv,
           "iters": iters, "warmup": warmup, "check": bool(ns.check),
           "wall_s": time.perf_counter() - t0, "rows": rows}
    with open(ns.out + ".json", "w") as f:
        json.dump(doc, f, indent=1)
    print(f"wrote {ns.out}.json")
    if not ns.no_plot:
        note = plot(rows, ns.out + ".png", meta)
        print(note or f"wrote {ns.out}.png")
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
