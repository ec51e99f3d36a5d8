"""Shared body of the ported pto-isa ring suites (``tests/npu/a2a3/comm/st/testcase/t{put,get}``).

Each pto-isa case runs two kernel launches with a host barrier between them, on one block:

* TPUT, phase 0: stage ``src`` into this rank's ``send`` buffer (TLOAD / TSTORE chunks), then
  ``TPUT`` it into the previous rank's ``recv`` buffer; phase 1: copy ``recv`` into ``dst``.
* TGET, phase 0: stage ``src`` into ``send``; phase 1: ``TGET`` the next rank's ``send`` into
  ``recv``, then copy ``recv`` into ``dst``.

Rank ``r`` fills ``src[i] = T(i + r * 10000)``; every rank must end with
``dst[i] == T(i + next * 10000)``, as pto-isa checks. The AtomicAdd case has every rank
``TPUT<AtomicAdd>`` into rank 0's ``recv``: ``n * i + 10000 * n(n-1)/2``.

A case is ``(name, dtype, shape (5-D or shorter), tile (rows, cols), form)`` with ``form`` one of
``"single"``, ``"pingpong"``, ``"atomic"``. All cases of one suite and rank count run in one
``shmcomm.run`` (one module-scoped result table), and each case is its own test.
"""

from __future__ import annotations

import math

import numpy as np

import shmcomm
from shmcomm.comm import TGET, TPUT, AtomicType, GetRemotePtr, GlobalTensor
from shmcomm.pipe import (
    EVENT_ID0,
    PIPE_ALL,
    PIPE_MTE2,
    PIPE_MTE3,
    TASSIGN,
    TLOAD,
    TSTORE,
    pipe_barrier,
    set_flag,
    wait_flag,
)

f32, i32 = np.float32, np.int32
# The chunked cases the TPut and TGet suites share (main.cpp of each), on 2 ranks:
# (name, dtype, shape, tile, form, nranks)
CHUNKED_CASES = [
    ("LargeShape_Float_128x64_tile16", f32, (128, 64), (16, 64), "single", 2),
    ("LargeShape_Int32_256x32_tile32", i32, (256, 32), (32, 32), "single", 2),
    ("LargeShape_Float_512x32_tile64", f32, (512, 32), (64, 32), "single", 2),
    ("LargeShape_Float_2048x32_tile64", f32, (2048, 32), (64, 32), "single", 2),
    ("LargeShape_Float_4096x32_tile64", f32, (4096, 32), (64, 32), "single", 2),
    ("LargeShape_Float_2048x64_tile128", f32, (2048, 64), (128, 64), "single", 2),
    ("LargeShape_Int32_4096x64_tile128", i32, (4096, 64), (128, 64), "single", 2),
    ("MultiDim_Float_2x2x1x32x32_tile16", f32, (2, 2, 1, 32, 32), (16, 32), "single", 2),
    ("MultiDim_Int32_4x1x1x32x64_tile16", i32, (4, 1, 1, 32, 64), (16, 64), "single", 2),
    ("Irregular_Float_2047x32_tile64", f32, (2047, 32), (64, 32), "single", 2),
    ("Irregular_Int32_1025x32_tile64", i32, (1025, 32), (64, 32), "single", 2),
    ("Irregular_Float_4095x32_tile128", f32, (4095, 32), (128, 32), "single", 2),
    ("Sliding2D_Float_64x128_tile16x32", f32, (64, 128), (16, 32), "single", 2),
    ("Sliding2D_Int32_128x256_tile32x64", i32, (128, 256), (32, 64), "single", 2),
    ("Sliding2D_Float_256x512_tile64x128", f32, (256, 512), (64, 128), "single", 2),
    ("Sliding2D_IrregRow_Float_65x64_tile16x32", f32, (65, 64), (16, 32), "single", 2),
    ("Sliding2D_IrregCol_Float_64x104_tile16x32", f32, (64, 104), (16, 32), "single", 2),
    ("Sliding2D_IrregBoth_Float_65x104_tile16x32", f32, (65, 104), (16, 32), "single", 2),
    ("PingPong_Float_128x128_tile16x32", f32, (128, 128), (16, 32), "pingpong", 2),
    ("PingPong_Int32_256x256_tile32x64", i32, (256, 256), (32, 64), "pingpong", 2),
    ("PingPong_Irregular_Float_65x104_tile16x32", f32, (65, 104), (16, 32), "pingpong", 2),
]


def stage(ctx, dst: GlobalTensor, src: GlobalTensor, tile) -> None:
    """Copy ``src`` to ``dst`` (same shape) through ``tile`` in tile-sized 2-D chunks, with the
    MTE2 -> MTE3 and MTE3 -> MTE2 events pto-isa's test kernels use."""
    for s, d in zip(src.slabs(), dst.slabs(), strict=True):
        for r0 in range(0, s.rows, tile.rows):
            r1 = min(r0 + tile.rows, s.rows)
            for c0 in range(0, s.cols, tile.cols):
                c1 = min(c0 + tile.cols, s.cols)
                TLOAD(tile, s.chunk(r0, r1, c0, c1))
                set_flag(PIPE_MTE2, PIPE_MTE3, EVENT_ID0)
                wait_flag(PIPE_MTE2, PIPE_MTE3, EVENT_ID0)
                TSTORE(d.chunk(r0, r1, c0, c1), tile)
                set_flag(PIPE_MTE3, PIPE_MTE2, EVENT_ID0)
                wait_flag(PIPE_MTE3, PIPE_MTE2, EVENT_ID0)


def ring_kernel(ctx, op, dst, src, send, recv, shape, tile_shape, form, phase):
    me, n = ctx.rank, ctx.nranks
    prev, nxt = (me + n - 1) % n, (me + 1) % n
    dtype = src.dtype
    ping = ctx.tile(tile_shape, dtype)
    TASSIGN(ping, 0x0)
    pong = None
    if form == "pingpong":
        pong = ctx.tile(tile_shape, dtype)
        TASSIGN(pong, -(-ping.nbytes // 256) * 256)  # the next 256-byte boundary
    tiles = (ping,) if pong is None else (ping, pong)
    srcG, sendG, recvG, dstG = (GlobalTensor(p, shape) for p in (src, send, recv, dst))
    if op == "TPUT" and phase == 0:
        if form == "atomic":
            TPUT(GlobalTensor(GetRemotePtr(ctx, recv, 0), shape), srcG, ping, AtomicType.AtomicAdd)
        else:
            stage(ctx, sendG, srcG, ping)
            TPUT(GlobalTensor(GetRemotePtr(ctx, recv, prev), shape), sendG, *tiles)
        pipe_barrier(PIPE_ALL)
    elif op == "TGET" and phase == 0:
        stage(ctx, sendG, srcG, ping)
        pipe_barrier(PIPE_ALL)
    else:
        if op == "TGET":
            TGET(recvG, GlobalTensor(GetRemotePtr(ctx, send, nxt), shape), *tiles)
            pipe_barrier(PIPE_ALL)
        if form != "atomic" or me == 0:
            stage(ctx, dstG, recvG, ping)


def _values(n: int, rank: int, dtype) -> np.ndarray:
    return (np.arange(n, dtype=np.int64) + rank * 10000).astype(dtype)


def ring_host(rt, op, cases):
    """Every case in turn; returns ``{name: None (passed) or a description of the mismatch}``."""
    out = {}
    for name, dtype, shape, tile, form in cases:
        n = math.prod(shape)
        src, dst = rt.alloc((n,), dtype), rt.alloc((n,), dtype)
        send, recv = rt.alloc((n,), dtype), rt.alloc((n,), dtype)
        src[:] = _values(n, rt.rank, dtype)
        dst[:] = np.array(-1).astype(dtype)
        rt.barrier()
        for phase in (0, 1):
            rt.launch(ring_kernel, blocks=1, args=(op, dst.ptr, src.ptr, send.ptr, recv.ptr, shape,
                                                   tile, form, phase))
            rt.barrier()
        if form == "atomic":
            i = np.arange(n, dtype=np.int64)
            want = (rt.nranks * i + 10000 * rt.nranks * (rt.nranks - 1) // 2).astype(dtype)
            check = rt.rank == 0
        else:
            want = _values(n, (rt.rank + 1) % rt.nranks, dtype)
            check = True
        bad = np.flatnonzero(dst != want) if check else []
        out[name] = None if not len(bad) else (
            f"rank {rt.rank}: {len(bad)} of {n} wrong, first at {bad[0]}: "
            f"{dst[bad[0]]!r} != {want[bad[0]]!r}")
    return out


def run_suite(op, cases, nranks, mode, seed=11):
    """``{name: [per-rank result]}`` of every case, in one run."""
    heap = sum(4 * math.prod(c[2]) * np.dtype(c[1]).itemsize + 4096 for c in cases)
    res = shmcomm.run(ring_host, nranks=nranks, args=(op, cases), mode=mode, seed=seed,
                      timeout=600, heap_bytes=max(heap, 1 << 20))
    return {c[0]: [r[c[0]] for r in res] for c in cases}


_results: dict = {}


def case_errors(op, cases, case, mode):
    """The per-rank errors of ``case`` (a row ``(name, dtype, shape, tile, form, nranks)`` of
    ``cases``); every case of that rank count and mode runs once, in one ``shmcomm.run``."""
    key = (op, mode, case[5])
    if key not in _results:
        _results[key] = run_suite(op, [c[:5] for c in cases if c[5] == case[5]], case[5], mode)
    return [e for e in _results[key][case[0]] if e]
