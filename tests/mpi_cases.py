"""shmcomm's own tests, run on the mpi transport: ``mpiexec -n N python tests/mpi_cases.py CASE``.

Every MPI process is one rank and runs the same calls; ``shmcomm.run`` (with
``SHMCOMM_TRANSPORT=mpi``, set here) returns every rank's result on every rank, so the test
modules' own host programs and checks run unchanged. World rank 0 prints ``mpi case CASE: OK``
at the end; a failed check raises (exit status 1), a failed run aborts the job with its report.
``tests/transports/test_transports_mpi.py`` starts these under ``mpiexec`` with timeouts.
"""

from __future__ import annotations

import os
import sys

os.environ["SHMCOMM_TRANSPORT"] = "mpi"
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _paths import add_test_dirs  # noqa: E402

add_test_dirs()  # (the test modules whose hosts run here live in the area folders)

import numpy as np  # noqa: E402
import test_hazard_models as tr  # noqa: E402
import test_kernels_barrier as tb  # noqa: E402
import test_kernels_barrier_central as tcb  # noqa: E402
import test_kernels_collectives as tc  # noqa: E402
import test_pto_group as tg  # noqa: E402

import shmcomm  # noqa: E402
from shmcomm.comm import (  # noqa: E402
    TNOTIFY,
    TPUT,
    TWAIT,
    AtomicType,
    GetRemotePtr,
    GlobalTensor,
    NotifyOp,
    ReduceOp,
    Signal,
    WaitCmp,
)
from shmcomm.pipe import DSB_DDR, PIPE_ALL, dsb, pipe_barrier  # noqa: E402
from shmcomm.transports.mpi import load_mpi  # noqa: E402

# (n, dtype, op, blocks, tile_elems): bigger than a tile, odd sizes, every dtype and op
SHAPES = [(3000, "float32", ReduceOp.Sum, 4, None), (777, "float16", ReduceOp.Max, 3, None),
          (5, "int32", ReduceOp.Min, 4, None), (1001, "int16", ReduceOp.Sum, 2, 100),
          (257, "int8", ReduceOp.Max, 1, 64), (0, "float32", ReduceOp.Sum, 2, None)]


def _every_shape_host(rt) -> list:
    """test_kernels_collectives' host once per shape, all in one run (a run's start and end
    over MPI cost more than its collectives)."""
    return [tc._all_three_host(rt, n, dtype, op, blocks, tile_elems, 11 + k)
            for k, (n, dtype, op, blocks, tile_elems) in enumerate(SHAPES)]


def collectives(size: int) -> None:
    """ReduceScatter, AllGather and AllReduce against numpy, as test_kernels_collectives."""
    per_rank = shmcomm.run(_every_shape_host, blocks=max(s[3] for s in SHAPES))
    for k, (n, dtype, op, _blocks, _tile_elems) in enumerate(SHAPES):
        tc.check_all_three([outs[k] for outs in per_rank], size, n, dtype, op, 11 + k)
    if size == 5:  # TREDUCE's test is written for 5 ranks
        for op in ReduceOp:
            tg.test_treduce_combines_every_member(op, np.float32, False)


def _ring(ctx, src, dst, n, fence, out):
    """Every rank puts its vector into the next rank's ``dst`` and signals it; once signalled,
    block 0 notes whether its own ``dst`` holds the previous rank's vector."""
    if ctx.block_idx != 0:
        return
    peer = (ctx.rank + 1) % ctx.nranks
    tile = ctx.tile((1, 1024), np.float32)
    TPUT(GlobalTensor(GetRemotePtr(ctx, dst, peer), (1, n)), GlobalTensor(src, (1, n)), tile)
    if fence:
        pipe_barrier(PIPE_ALL)
        dsb(DSB_DDR)
    TNOTIFY(Signal(GetRemotePtr(ctx, ctx.signal_base + 9216, peer)), 1, NotifyOp.AtomicAdd)
    TWAIT(Signal(ctx.signal_base + 9216), 1, WaitCmp.GE)
    want = (ctx.rank - 1) % ctx.nranks + 1
    out.append(bool((GlobalTensor(dst, (1, n)).view() == want).all()))


def ring_host(rt, fence: bool = True) -> bool:
    """The README's ring: whether my ``dst`` held the previous rank's vector once signalled."""
    n = 4096
    src, dst = rt.alloc((n,), np.float32), rt.alloc((n,), np.float32)
    src[:] = rt.rank + 1
    out: list[bool] = []
    rt.launch(_ring, blocks=2, args=(src.ptr, dst.ptr, n, fence, out))
    return out[0]


def suite(size: int) -> None:
    """Barriers, root collectives, collectives and hazard mode at the job's size (4 in CI)."""
    collectives(size)
    tb.test_seed_device_barrier_orders_one_phase(size, 2)
    tb.test_epoch_barrier_many_rounds_and_launches_without_reset(size, 3)
    for policy in ("adaptive", "futex"):
        tcb.test_central_barrier_orders_many_rounds_and_launches_without_reset(size, 2, policy)
    tg.test_tbroadcast_copies_root_tensor_everywhere(size, size - 1, (5, 7), (2, 3), False)
    tg.test_tscatter_splits_rows_and_tgather_concatenates_them(size, 1, (3, 5), (2, 2), True)
    for seed in (1, 2):
        results = shmcomm.run(tc._all_three_host, blocks=3, mode="hazard", seed=seed,
                              args=(1000, "float32", ReduceOp.Sum, 3, 96, seed))
        tc.check_all_three(results, size, 1000, "float32", ReduceOp.Sum, seed)
    # the ring is right in eager mode even without its fence, and right with it in hazard mode
    # (without it hazard mode aborts: the case "unfenced")
    assert all(shmcomm.run(ring_host, args=(False,)))
    assert all(shmcomm.run(ring_host, mode="hazard", seed=3, hazards="all"))
    if len(sys.argv) > 2:  # a trace file: every rank's blocks write their events into it
        _check_trace(size, sys.argv[2])


def _check_trace(size: int, path: str) -> None:
    """The ring in hazard mode, traced: one finalized file with every rank's events, and the
    flow arrows from a notify on one rank to the wait it released on another."""
    from shmcomm.exec.trace import load

    shmcomm.run(ring_host, mode="hazard", seed=3, trace=path)
    if load_mpi().COMM_WORLD.Get_rank() != 0:
        return
    import json

    with open(path) as f:
        doc = json.load(f)
    assert doc["otherData"]["transport"] == "mpi", doc.get("otherData")
    events = load(path)
    assert {e["pid"] for e in events if e.get("ph") == "X"} == set(range(size)), events[:5]
    starts = {e["id"]: e["pid"] for e in events if e.get("ph") == "s"}
    ends = {e["id"]: e["pid"] for e in events if e.get("ph") == "f"}
    assert any(starts[i] != ends.get(i, starts[i]) for i in starts), "no arrow across ranks"


def race_pair(size: int) -> None:
    """test_race_models' put-then-notify pair (2 ranks): the fenced kernel is right in hazard
    mode, the unfenced one is right in eager mode and shows stale data in hazard mode."""
    assert size == 2
    assert tr._run(tr.host_put_notify, nranks=2, mode="eager", args=(False, False)) == [0, 0]
    assert tr._run(tr.host_put_notify, nranks=2, seed=1, args=(True, True, 3)) == [0, 0]
    assert tr._run(tr.host_put_notify, nranks=2, seed=1, hazards="pipes,visibility",
                   args=(True, False), **tr.SLOW) == [0, 1]


def checked_ring_host(rt, fence: bool = True) -> None:
    """``ring_host`` that fails when its data did not arrive before the signal."""
    assert ring_host(rt, fence), f"rank {rt.rank}: dst did not hold the previous rank's vector"


def unfenced(size: int) -> None:
    """The ring without its drain and fence in hazard mode: the signal overtakes the queued
    TPUT, the data check fails, and the failure aborts the job (the first failing run ends
    it). The copies stay queued 0.2 s, not 2 ms, and a few seeds run: on a loaded box a reader
    can lose the CPU for longer than the default delay and then find the data already there."""
    for seed in (7, 8, 9):
        shmcomm.run(checked_ring_host, mode="hazard", seed=seed, hazard_delay=0.2, args=(False,))


def _add_into_root(ctx, acc, src, rows, cols, stride):
    """Every block of every rank adds its rows into rank 0's strided ``acc`` with TPUT AtomicAdd."""
    tile = ctx.tile((2, 64), src.dtype)
    dst = GlobalTensor(GetRemotePtr(ctx, acc, 0), (rows, cols), row_stride=stride)
    TPUT(dst, GlobalTensor(src, (rows, cols)), tile, AtomicType.AtomicAdd)


def add_host(rt, dtype: str) -> bool:
    """Rank 0's strided accumulator holds the sum of every block's rows (exact in every dtype)."""
    rows, cols, stride, blocks = 5, 100, 130, 3
    acc = rt.alloc((rows, stride), dtype)
    src = rt.alloc((rows, cols), dtype)
    src[:] = (np.arange(rows * cols).reshape(rows, cols) % 3 + rt.rank).astype(dtype)
    rt.barrier()
    rt.launch(_add_into_root, blocks=blocks, args=(acc.ptr, src.ptr, rows, cols, stride))
    rt.barrier()
    if rt.rank != 0:
        return True
    base = np.arange(rows * cols).reshape(rows, cols) % 3
    want = sum(blocks * (base + r) for r in range(rt.nranks))
    return bool((acc[:, :cols] == want.astype(dtype)).all() and (acc[:, cols:] == 0).all())


def rma(size: int) -> None:
    """Every other rank reached by Put / Get / Accumulate / Fetch_and_op only (``mpi_peers=rma``,
    as across hosts): the collectives, TPUT AtomicAdd into a strided tensor, the ring in eager
    and hazard mode, the put-then-notify pair, and a missing fence still reported."""
    os.environ["SHMCOMM_MPI_PEERS"] = "rma"
    for k, (n, dtype, op, blocks, tile_elems) in enumerate(SHAPES[:4]):
        results = shmcomm.run(tc._all_three_host, blocks=blocks,
                              args=(n, dtype, op, blocks, tile_elems, k))
        tc.check_all_three(results, size, n, dtype, op, k)
    for dtype in ("float32", "int32", "int16", "int8", "float16"):
        assert all(shmcomm.run(add_host, args=(dtype,))), dtype
    assert all(shmcomm.run(ring_host))
    assert all(shmcomm.run(ring_host, mode="hazard", seed=3))
    if size == 2:
        race_pair(size)


def _asymmetric_alloc(rt) -> bool:
    """Rank 1 allocates one element more: every rank's alloc must refuse."""
    from shmcomm.errors import ArgumentError

    try:
        rt.alloc((1000 + (rt.rank == 1),), np.float32)
    except ArgumentError as exc:
        return "not symmetric" in str(exc)
    return False


def _host_collectives(rt) -> bool:
    """rt.barrier, rt.alloc, rt.signal_region and rt.reset_signals across hosts: a value each
    rank stores before a barrier is seen by every rank after it."""
    x = rt.alloc((4,), np.int32)
    flags = rt.signal_region("flags", rt.nranks)
    for k in range(5):
        rt.reset_signals()
        x[:] = k * 10 + rt.rank
        rt.barrier()
        assert int(x[0]) == k * 10 + rt.rank
    return int(flags.offset) > 0


def hosts(size: int) -> None:
    """What a job whose every rank is its own host runs (``MPIR_CVAR_NOLOCAL=1``, or ranks in
    network namespaces): the host collectives and their symmetry checks, every collective, TPUT
    AtomicAdd, root collectives, the ring in eager and hazard mode (the default job checks the
    library barriers). The barrier tests' kernels store through raw views of peers' windows,
    which no process can have across hosts, so they are not run here."""
    assert all(shmcomm.run(_host_collectives)), "host collectives"
    assert all(shmcomm.run(_asymmetric_alloc)), "an asymmetric alloc must fail on every rank"
    for k, (n, dtype, op, blocks, tile_elems) in enumerate(SHAPES[:2]):
        results = shmcomm.run(tc._all_three_host, blocks=blocks,
                              args=(n, dtype, op, blocks, tile_elems, k))
        tc.check_all_three(results, size, n, dtype, op, k)
    for dtype in ("float32", "float16"):
        assert all(shmcomm.run(add_host, args=(dtype,))), dtype
    tg.test_tbroadcast_copies_root_tensor_everywhere(size, size - 1, (5, 7), (2, 3), False)
    tg.test_tscatter_splits_rows_and_tgather_concatenates_them(size, 1, (3, 5), (2, 2), True)
    assert all(shmcomm.run(ring_host))
    assert all(shmcomm.run(ring_host, mode="hazard", seed=3, hazards="all"))
    if len(sys.argv) > 2:
        _check_trace(size, sys.argv[2])


def conformance(size: int) -> None:
    """The mpi transport against the seam, rank 0 and 1 of a 2-rank job, in both peer modes:
    word operations, the notify fast path, sleep, data locks, views and get / put / accumulate."""
    import time

    from shmcomm.errors import Aborted, ArgumentError, WaitTimeout
    from shmcomm.transports import Transport, Word
    from shmcomm.transports.mpi import MpiTransport

    assert size == 2
    MPI = load_mpi()
    for peers in ("shared", "rma"):
        comm = MPI.COMM_WORLD.Dup()
        t = MpiTransport(comm, 4096, 65536, peers)
        me, other = comm.Get_rank(), 1 - comm.Get_rank()
        assert isinstance(t, Transport) and t.unmapped == (frozenset() if peers == "shared"
                                                           else frozenset({other}))
        w = t.word(0, 64)  # rank 0's word, from both ranks
        assert isinstance(w, Word)
        comm.Barrier()
        for _ in range(500):  # atomic across ranks
            w.add(1)
            w.fetch_add(w.handle, 1, 5)
        comm.Barrier()
        assert w.load() == 2000 and (me != 0 or w.cell.value == 2000)
        comm.Barrier()
        if me == 0:
            assert w.exchange(w.handle, 7, 5) == 2000
            w.set(9)
        comm.Barrier()
        assert w.load() == 9
        # sleep: returns at its timeout, and when the other rank sets the word
        if me == 0:
            t0 = time.perf_counter()
            w.sleep(9, 0.05, lambda v: False)
            assert time.perf_counter() - t0 < 5
        comm.Barrier()
        if me == 1:
            time.sleep(0.05)
            w.set(10)
        else:
            deadline = time.perf_counter() + 20
            while w.cell.value != 10:
                assert time.perf_counter() < deadline, "the set never arrived"
                w.sleep(9, 0.5, lambda v: v == 10)
        comm.Barrier()
        # data: own window mapped; the other's mapped or reached by get / put / accumulate
        mine = t.view(me, 4096, (4,), np.dtype(np.float32))
        mine[:] = me
        comm.Barrier()
        got = np.zeros((2, 2), np.float32)
        if other in t.unmapped:
            t.get(other, 4096, 8, got)
            try:
                t.view(other, 4096, (4,), np.dtype(np.float32))
                raise AssertionError("a view of an unmapped window")
            except ArgumentError as exc:
                assert "another host" in str(exc)
            assert t.locate(t.window(me).ctypes.data + 8) == (me, 8)
        else:
            got[:] = t.view(other, 4096, (2, 2), np.dtype(np.float32))
            assert t.locate(t.window(other).ctypes.data + 8) == (other, 8)
        assert (got == other).all()
        comm.Barrier()
        if other in t.unmapped:  # a strided put, then accumulate under the data lock
            t.put(other, 8192, 16, np.full((2, 2), 3, np.int32))
            with t.data_lock(other, 8192, 32, 5.0, lambda: False):
                t.accumulate(other, 8192, 16, np.ones((2, 2), np.int32))
            comm.Barrier()
            dst = t.view(me, 8192, (8,), np.dtype(np.int32))
            assert dst.tolist() == [4, 4, 0, 0, 4, 4, 0, 0], dst.tolist()
        comm.Barrier()
        # data lock: a held stripe times out, and an abort stops the waiter
        if me == 0:
            with t.data_lock(0, 12288, 4, 5.0, lambda: False):
                comm.Barrier()
                comm.Barrier()
        else:
            comm.Barrier()
            for aborted, exc in ((lambda: False, WaitTimeout), (lambda: True, Aborted)):
                try:
                    with t.data_lock(0, 12288, 4, 0.05, aborted):
                        raise AssertionError("took a held lock")
                except exc:
                    pass
            comm.Barrier()
        comm.Barrier()
        del mine
        t.close()
        comm.Free()


CASES = {"collectives": collectives, "suite": suite, "race_pair": race_pair, "unfenced": unfenced,
         "rma": rma, "conformance": conformance, "hosts": hosts,
         "trace": lambda size: _check_trace(size, sys.argv[2])}


def main() -> None:
    case = sys.argv[1]
    MPI = load_mpi()
    size = MPI.COMM_WORLD.Get_size()
    CASES[case](size)
    if MPI.COMM_WORLD.Get_rank() == 0:
        print(f"mpi case {case}: OK ({size} ranks)", flush=True)


if __name__ == "__main__":
    main()
