"""pto-isa's ``kernels/manual/a2a3/allgather_gemm``, ported: AllGather + GEMM as two kernels that
run at the same time on one rank (a communication kernel and a compute kernel on two streams,
each with its own ``block_idx`` / ``block_num``), overlapping at chunk granularity.

* Every rank holds its M-slice of ``A`` (``M x K`` float16) in a symmetric buffer; ``B``
  (``K x N`` float16) is replicated; every rank computes the whole ``C = A @ B`` (float32).
* Comm kernel (``RingCommStreamingKernel``): ``A``'s slice is cut into ``BASE_M x BASE_N`` tiles,
  grouped into chunks; the work items (destination, chunk) go round-robin over the comm blocks;
  each chunk is ``TPUT`` (ping-pong tiles) into the destination's buffer, then
  ``pipe_barrier(PIPE_ALL)`` + ``dsb(DSB_DDR)`` and ``TNOTIFY`` of that chunk's ready flag there.
* Compute kernel (``AllGatherGemmComputeStreamingKernel``): row groups ``mi`` go round-robin over
  the compute blocks, local rows first (no wait), then remote rows, each after a ``TWAIT`` on
  the ready flags of the chunks holding it (a ``Signal2D`` row of the chunk-flag matrix).

The host launches both on two streams without waiting in between, as ``main.cpp`` does, and
checks ``C`` exactly (small integers, so float32 sums are exact) against numpy.
"""

from __future__ import annotations

import numpy as np
import pytest

import shmcomm
from shmcomm.comm import (
    TNOTIFY,
    TPUT,
    TWAIT,
    GetRemotePtr,
    GlobalTensor,
    NotifyOp,
    Signal,
    Signal2D,
    WaitCmp,
)
from shmcomm.pipe import (
    DSB_DDR,
    EVENT_ID0,
    PIPE_ALL,
    PIPE_MTE2,
    PIPE_MTE3,
    PIPE_V,
    TASSIGN,
    TLOAD,
    TSTORE,
    dsb,
    pipe_barrier,
    set_flag,
    wait_flag,
)

pytestmark = pytest.mark.timeout(600)

BASE_M = BASE_N = 32  # G_BASE_M x G_BASE_N tiles


class Params:
    """``CommParams`` of the C++ kernel, from the problem size and the rank count."""

    def __init__(self, M: int, K: int, N: int, nranks: int, chunk_size: int) -> None:
        self.M, self.K, self.N = M, K, N
        self.m_tiles = M // BASE_M
        self.m_tiles_local = self.m_tiles // nranks
        self.k_tiles = K // BASE_N
        self.n_tiles = N // BASE_N
        self.tiles_per_src = self.m_tiles_local * self.k_tiles
        self.chunk_size = chunk_size
        self.num_chunks = -(-self.tiles_per_src // chunk_size)


def _tile(ptr, row_tile: int, col_tile: int, row_len: int) -> GlobalTensor:
    """Tile ``(row_tile, col_tile)`` of a row-major matrix with rows of ``row_len`` elements."""
    off = row_tile * BASE_M * row_len + col_tile * BASE_N
    return GlobalTensor(ptr + off, (BASE_M, BASE_N), row_stride=row_len)


# --- the communication kernel -------------------------------------------------------------

def comm_kernel(ctx, shmem_input, flags, p):
    me, n = ctx.rank, ctx.nranks
    ping = ctx.tile((BASE_M, BASE_N), np.float16)
    pong = ctx.tile((BASE_M, BASE_N), np.float16)
    TASSIGN(ping, 0x0)
    TASSIGN(pong, -(-ping.nbytes // 1024) * 1024)  # TILE_UB_BYTES
    total = (n - 1) * p.num_chunks
    for work in range(ctx.block_idx, total, ctx.block_num):  # DispatchFewBlocks
        dest_idx, chunk = divmod(work, p.num_chunks)
        dest = dest_idx if dest_idx < me else dest_idx + 1
        remote = GetRemotePtr(ctx, shmem_input, dest)
        for t in range(chunk * p.chunk_size, min((chunk + 1) * p.chunk_size, p.tiles_per_src)):
            mi_local, kt = divmod(t, p.k_tiles)
            mi = me * p.m_tiles_local + mi_local
            TPUT(_tile(remote, mi, kt, p.K), _tile(shmem_input, mi, kt, p.K), ping, pong)
        pipe_barrier(PIPE_ALL)
        dsb(DSB_DDR)
        flag = GetRemotePtr(ctx, flags + me * p.num_chunks + chunk, dest)
        TNOTIFY(Signal(flag), 1, NotifyOp.AtomicAdd)  # SetRemoteChunkFlagReady


# --- the compute kernel -------------------------------------------------------------------

def gemm_row_group(ctx, a, b, c, mi, p, tiles):
    """``C[mi] = A[mi] @ B`` tile by tile: TLOAD A and B tiles, the matmul on the block, TSTORE."""
    a_t, b_t, c_t = tiles
    for ni in range(p.n_tiles):
        acc = np.zeros((BASE_M, BASE_N), np.float32)
        for kt in range(p.k_tiles):
            TLOAD(a_t, _tile(a, mi, kt, p.K))
            TLOAD(b_t, _tile(b, kt, ni, p.N))
            set_flag(PIPE_MTE2, PIPE_V, EVENT_ID0)
            wait_flag(PIPE_MTE2, PIPE_V, EVENT_ID0)
            acc += a_t.array.astype(np.float32) @ b_t.array.astype(np.float32)  # TMATMUL(_ACC)
            set_flag(PIPE_V, PIPE_MTE2, EVENT_ID0)
            wait_flag(PIPE_V, PIPE_MTE2, EVENT_ID0)
        c_t.array[:] = acc
        set_flag(PIPE_V, PIPE_MTE3, EVENT_ID0)
        wait_flag(PIPE_V, PIPE_MTE3, EVENT_ID0)
        TSTORE(_tile(c, mi, ni, p.N), c_t)
        set_flag(PIPE_MTE3, PIPE_V, EVENT_ID0)  # c_t is free again once the store has read it
        wait_flag(PIPE_MTE3, PIPE_V, EVENT_ID0)


def compute_kernel(ctx, shmem_input, b, c, flags, p):
    me = ctx.rank
    tiles = (ctx.tile((BASE_M, BASE_N), np.float16), ctx.tile((BASE_M, BASE_N), np.float16),
             ctx.tile((BASE_M, BASE_N), np.float32))
    lo, hi = me * p.m_tiles_local, (me + 1) * p.m_tiles_local
    for mi in range(lo + ctx.block_idx, hi, ctx.block_num):  # phase 1: local rows, no wait
        gemm_row_group(ctx, shmem_input, b, c, mi, p, tiles)
    for mi in range(ctx.block_idx, p.m_tiles, ctx.block_num):  # phase 2: remote rows, streamed
        src, mi_local = divmod(mi, p.m_tiles_local)
        if src == me:
            continue
        c0 = mi_local * p.k_tiles // p.chunk_size
        c1 = -(-(mi_local + 1) * p.k_tiles // p.chunk_size)
        TWAIT(Signal2D(flags + src * p.num_chunks + c0, 1, c1 - c0), 1, WaitCmp.GE)
        gemm_row_group(ctx, shmem_input, b, c, mi, p, tiles)


# --- host -----------------------------------------------------------------------------------

def host(rt, M, K, N, chunk_size, comm_blocks, compute_blocks):
    n, me = rt.nranks, rt.rank
    p = Params(M, K, N, n, chunk_size)
    rng = np.random.default_rng(2026)  # every rank draws the same A and B
    a_full = rng.integers(-3, 4, (M, K)).astype(np.float16)
    b_full = rng.integers(-3, 4, (K, N)).astype(np.float16)
    shmem_input = rt.alloc((M, K), np.float16)
    rows = slice(me * M // n, (me + 1) * M // n)
    shmem_input[rows] = a_full[rows]
    b = rt.alloc((K, N), np.float16)
    b[:] = b_full
    c = rt.alloc((M, N), np.float32)
    flags = rt.signal_region("allgather_gemm_chunk_flags", n * p.num_chunks)
    rt.barrier()
    comm_stream, compute_stream = rt.stream(), rt.stream()
    rt.launch(comm_kernel, blocks=comm_blocks, args=(shmem_input.ptr, flags, p),
              stream=comm_stream)
    rt.launch(compute_kernel, blocks=compute_blocks,
              args=(shmem_input.ptr, b.ptr, c.ptr, flags, p), stream=compute_stream)
    compute_stream.synchronize()
    comm_stream.synchronize()
    rt.barrier()
    golden = a_full.astype(np.float32) @ b_full.astype(np.float32)
    return int(np.count_nonzero(c != golden))


@pytest.mark.parametrize("mode", ["eager", "hazard"])
def test_allgather_gemm_two_concurrent_kernels_2ranks(mode):
    # 2 ranks: 4 local row groups x 4 k tiles = 16 tiles per source, chunks of 4 -> 4 chunks;
    # 2 comm blocks and 3 compute blocks, launched together on each rank
    res = shmcomm.run(host, nranks=2, args=(256, 128, 64, 4, 2, 3), mode=mode, seed=21,
                      timeout=300)
    assert res == [0, 0]


def test_allgather_gemm_two_concurrent_kernels_4ranks():
    res = shmcomm.run(host, nranks=4, args=(256, 128, 64, 3, 3, 2), timeout=300)
    assert res == [0, 0, 0, 0]
