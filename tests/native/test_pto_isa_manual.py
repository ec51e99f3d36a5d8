"""pto-isa's manual a2a3 comm-compute kernels, ``kernels/manual/a2a3/allgather_gemm`` and
``kernels/manual/a2a3/gemm_ar``, compiled unchanged from their files in a real pto-isa checkout
(never part of this project), each rank running its communication kernel and its GEMM kernel
at the same time on two streams as their ``main.cpp`` does, the cube compute through pto-isa's
own CPU ``TMATMUL``. Sizes are small (``-D CONFIG_*``, the knobs the kernels' CMake files set),
the code paths the kernels' own. Skipped unless ``SHMCOMM_PTO_ISA`` names the checkout:

    SHMCOMM_PTO_ISA=PATH python -m pytest -m pto_isa tests/native/test_pto_isa_manual.py
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

import shmcomm
from shmcomm import native

ROOT = os.environ.get("SHMCOMM_PTO_ISA")
MODES = ["eager", "hazard", "schedule"]
pytestmark = [pytest.mark.pto_isa, pytest.mark.timeout(600),
              pytest.mark.skipif(not ROOT, reason="set SHMCOMM_PTO_ISA to a pto-isa checkout to run these")]


def _manual(name: str) -> Path:
    assert ROOT is not None
    return Path(ROOT) / "kernels" / "manual" / "a2a3" / name


def _inputs(rng: np.random.Generator, m: int, k: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    """gen_data.py's inputs: small integers in fp16, so the fp32 products and sums are exact."""
    return (rng.integers(1, 5, (m, k)).astype(np.float16), rng.integers(1, 5, (k, n)).astype(np.float16))


# -- allgather_gemm ------------------------------------------------------------------------------
# C = allgather(A) @ B: rank r holds rows [r*M/n, (r+1)*M/n) of A in its window; the comm kernel
# (AIV) TPUTs the slice to every peer chunk by chunk, bumping the peer's chunk flag and summary
# counter; the compute kernel (AIC) multiplies the local rows at once and each remote row group as
# its chunks arrive (TWAIT on the summary counter, then a scan of the chunk flags).

AG = {"CONFIG_G_M": 256, "CONFIG_G_K": 2048, "CONFIG_G_N": 512, "CONFIG_G_BASE_M": 128,
      "CONFIG_G_BASE_N": 256, "CONFIG_COMPUTE_BLOCK_NUM": 2, "CONFIG_COMM_BLOCK_NUM": 2}
AG_HEADER_WORDS = 16  # sizeof(ChunkFlagMatrix) / 4: its 64-byte header (ready_queue.hpp)


@pytest.fixture(scope="module")
def allgather_gemm():
    d = _manual("allgather_gemm")
    return (native.load(d / "allgather_gemm_comm_kernel.cpp", pto_isa=True, defines=AG),
            native.load(d / "allgather_gemm_compute_kernel.cpp", pto_isa=True, defines=AG))


def _chunk_layout(nranks: int) -> tuple[int, int, int, int]:
    """InitChunkLayout / ChunkFlagMatrixInit of main.cpp and ready_queue.hpp: tiles per source,
    chunk size (ComputeOptimalChunkSize), chunks per source, the row stride of the flags."""
    m_tiles = AG["CONFIG_G_M"] // AG["CONFIG_G_BASE_M"]
    tiles = (m_tiles // nranks) * (AG["CONFIG_G_K"] // AG["CONFIG_G_BASE_N"])
    chunk = 4  # MIN_CHUNK_SIZE: below TARGET_CHUNKS_MAX chunks it stays there
    assert (tiles + chunk - 1) // chunk <= 128
    chunks = (tiles + chunk - 1) // chunk
    return tiles, chunk, chunks, (chunks + 15) // 16 * 16


def _allgather_gemm_host(rt, comm, compute, a_full, b, run="pipelined"):
    """main.cpp's runs and VerifyOutput's read-back. ``pipelined`` (PrepareStreamingState, then
    RunPipelinedBenchmark's launches): the comm kernel on the comm stream and the compute kernel
    on the compute stream, both in flight; ``sequential`` (RunSequentialBenchmark): the comm
    stream synchronized before the compute kernel is launched; ``compute_only``
    (PrepareComputeOnlyState, RunComputeOnlyBenchmark): every rank's A rows and every chunk
    marked ready by the host, the compute kernel alone."""
    m, k = a_full.shape
    n = b.shape[1]
    tiles, chunk, chunks, stride = _chunk_layout(rt.nranks)
    shmem_input = rt.alloc((m, k), np.float16)          # window: every rank's A rows
    flags = rt.alloc((AG_HEADER_WORDS + rt.nranks * stride + rt.nranks,), np.int32)  # window
    src1 = rt.alloc((n, k), np.float16)                 # B, stored transposed (Layout::DN)
    output = rt.alloc((m, n), np.float32)
    rows = m // rt.nranks
    mine = slice(rt.rank * rows, (rt.rank + 1) * rows)
    shmem_input[:] = 0
    shmem_input[mine] = a_full[mine]
    src1[:] = b.T
    output[:] = 0
    flags[:] = 0  # ChunkFlagMatrixInit, ChunkFlagMatrixSummaryInit, my_rank, epoch 1
    flags[:7] = [rt.nranks, chunks, tiles, chunk, stride, rt.rank, 1]
    if run == "compute_only":  # MarkAllChunksReadyHost: every flag at the epoch, every summary full
        shmem_input[:] = a_full
        grid = flags[AG_HEADER_WORDS:AG_HEADER_WORDS + rt.nranks * stride].reshape(rt.nranks, stride)
        grid[:, :chunks] = 1
        flags[AG_HEADER_WORDS + rt.nranks * stride:] = chunks
    rt.barrier()
    comm_stream, compute_stream = rt.stream(), rt.stream()
    if run != "compute_only":
        remote = rt.nranks - 1  # launchRingCommStreaming's block count
        comm_blocks = remote * max(1, AG["CONFIG_COMM_BLOCK_NUM"] // remote)
        rt.launch(comm, blocks=comm_blocks, stream=comm_stream,
                  args=(shmem_input.ptr, flags.ptr, rt.device_context, comm_blocks))
    if run == "sequential":
        comm_stream.synchronize()
    nblocks = AG["CONFIG_COMPUTE_BLOCK_NUM"]
    rt.launch(compute, blocks=nblocks, stream=compute_stream,
              args=(output.ptr, shmem_input.ptr, src1.ptr, flags.ptr, nblocks))
    comm_stream.synchronize()
    compute_stream.synchronize()
    rt.barrier()
    return output[:].copy(), flags[:].copy()


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("run", ["pipelined", "sequential", "compute_only"])
def test_allgather_gemm(allgather_gemm, mode, run):
    comm, compute = allgather_gemm
    m, k, n = AG["CONFIG_G_M"], AG["CONFIG_G_K"], AG["CONFIG_G_N"]
    a, b = _inputs(np.random.default_rng(7), m, k, n)
    golden = a.astype(np.float32) @ b.astype(np.float32)
    nranks = 2
    res = shmcomm.run(_allgather_gemm_host, nranks=nranks, mode=mode, seed=0, heap_bytes=8 << 20,
                      args=(comm.RingCommStreamingKernel, compute.AllGatherGemmComputeStreamingKernel, a, b,
                            run))
    _, _, chunks, stride = _chunk_layout(nranks)
    for rank, (out, flags) in enumerate(res):
        np.testing.assert_array_equal(out, golden, err_msg=f"rank {rank}")
        # every source's chunks arrived once (the local ones set by the comm kernel's block 0)
        grid = flags[AG_HEADER_WORDS:AG_HEADER_WORDS + nranks * stride].reshape(nranks, stride)
        assert (grid[:, :chunks] == 1).all() and (grid[:, chunks:] == 0).all()
        assert flags[AG_HEADER_WORDS + nranks * stride:].tolist() == [chunks] * nranks


# -- gemm_ar --------------------------------------------------------------------------------------
# C = sum over ranks of A_r @ B, on every rank: the compute kernel (AIC) writes each C_r tile to GM
# and enqueues its index in its block's ready queue (plain stores, then dcci); the comm kernel
# (AIV) dequeues with TTEST / TWAIT on the queue's count, reduce-scatters each tile's subtiles
# into the owner's reduced_output with TSTORE<AtomicAdd>, counts them ready on the owner (TNOTIFY),
# and all-gathers each subtile that every rank has added to (TTEST on the count, TWAIT on a
# summary slot) to every peer.

AR = {"CONFIG_G_M": 256, "CONFIG_G_K": 256, "CONFIG_G_N": 512, "CONFIG_G_BASE_M": 128,
      "CONFIG_G_BASE_K": 64, "CONFIG_G_BASE_N": 256, "CONFIG_COMPUTE_BLOCK_NUM": 2,
      "CONFIG_COMM_BLOCK_NUM": 2, "CONFIG_COMM_SUB_M": 64}
MAX_RANKS = 8            # gemm_ar_config.h
MAX_COMPUTE_BLOCKS = 32  # ready_queue.hpp


@pytest.fixture(scope="module")
def gemm_ar():
    d = _manual("gemm_ar")
    return (native.load(d / "comm_kernel.cpp", pto_isa=True, defines=AR),
            native.load(d / "gemm_compute_kernel.cpp", pto_isa=True, defines=AR))


def _signal_words() -> int:
    """G_SIGNAL_TOTAL_SLOTS of gemm_ar_config.h, rounded up to 64 bytes as main.cpp allocates."""
    tiles = (AR["CONFIG_G_M"] // AR["CONFIG_G_BASE_M"]) * (AR["CONFIG_G_N"] // AR["CONFIG_G_BASE_N"])
    subtiles = tiles * (AR["CONFIG_G_BASE_M"] // AR["CONFIG_COMM_SUB_M"])
    total = MAX_RANKS + 2 + subtiles + AR["CONFIG_COMM_BLOCK_NUM"] * 16
    return (total + 15) // 16 * 16


def _queue_set(blocks: int, total_tiles: int) -> np.ndarray:
    """MultiBlockQueueSetInit of ready_queue.hpp, as int32 words: the 192-byte header (counts,
    then queue_offsets[MAX_COMPUTE_BLOCKS]), then one 64-byte-aligned PerBlockQueue per block
    (tail, count, capacity, block_id, padding[4], data[capacity] = -1)."""
    cap = (total_tiles + blocks - 1) // blocks
    per_queue = ((64 - 4 + cap * 4) + 63) // 64 * 64
    header = (8 + MAX_COMPUTE_BLOCKS) * 4
    header = (header + 63) // 64 * 64
    words = np.zeros((header + blocks * per_queue) // 4, np.int32)
    words[:4] = [blocks, total_tiles, cap, 0]
    for b in range(blocks):
        off = header + b * per_queue
        words[8 + b] = off
        q = off // 4
        words[q:q + 4] = [0, 0, cap, b]
        words[q + 8:q + 8 + cap] = -1
    return words


def _gemm_ar_host(rt, comm, compute, a_all, b, run="pipelined"):
    """main.cpp's ResetDeviceState, then its launches, then the read-back: ``pipelined`` (the
    compute kernel on the compute stream and the comm kernel on the comm stream, both in flight)
    or ``sequential`` (RunSequentialBenchmark: the compute stream synchronized first)."""
    m, k = a_all.shape[1:]
    n = b.shape[1]
    gemm_output = rt.alloc((m, n), np.float16)
    reduced_output = rt.alloc((m, n), np.float16)        # window
    signal_matrix = rt.alloc((_signal_words(),), np.int32)  # window
    src0 = rt.alloc((m, k), np.float16)
    src1 = rt.alloc((n, k), np.float16)                  # B, stored transposed (Layout::DN)
    nblocks = AR["CONFIG_COMPUTE_BLOCK_NUM"]
    qwords = _queue_set(nblocks, (m // AR["CONFIG_G_BASE_M"]) * (n // AR["CONFIG_G_BASE_N"]))
    queue_set = rt.alloc(qwords.shape, np.int32)
    src0[:] = a_all[rt.rank]
    src1[:] = b.T
    queue_set[:] = qwords
    gemm_output[:] = 0
    reduced_output[:] = 0
    signal_matrix[:] = 0
    rt.barrier()
    compute_stream, comm_stream = rt.stream(), rt.stream()
    rt.launch(compute, blocks=nblocks, stream=compute_stream,
              args=(gemm_output.ptr, src0.ptr, src1.ptr, queue_set.ptr, rt.rank, nblocks, k))
    if run == "sequential":
        compute_stream.synchronize()
    rt.launch(comm, blocks=AR["CONFIG_COMM_BLOCK_NUM"], stream=comm_stream,
              args=(gemm_output.ptr, reduced_output.ptr, signal_matrix.ptr, queue_set.ptr, rt.device_context,
                    rt.rank, rt.nranks, nblocks, AR["CONFIG_COMM_BLOCK_NUM"]))
    compute_stream.synchronize()
    comm_stream.synchronize()
    rt.barrier()
    return reduced_output[:].copy()


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(("nranks", "run"), [(2, "pipelined"), (4, "pipelined"), (2, "sequential")])
def test_gemm_ar(gemm_ar, mode, nranks, run):
    comm, compute = gemm_ar
    m, k, n = AR["CONFIG_G_M"], AR["CONFIG_G_K"], AR["CONFIG_G_N"]
    rng = np.random.default_rng(11)
    # integers in [-1, 1]: every partial product, sum and fp16 result is exact
    a_all = rng.integers(-1, 2, (nranks, m, k)).astype(np.float16)
    b = rng.integers(-1, 2, (k, n)).astype(np.float16)
    golden = sum(a.astype(np.float32) @ b.astype(np.float32) for a in a_all)
    res = shmcomm.run(_gemm_ar_host, nranks=nranks, mode=mode, seed=0, heap_bytes=8 << 20,
                      args=(comm.GemmCommAllKernel, compute.GemmComputeKernel, a_all, b, run))
    for rank, out in enumerate(res):
        np.testing.assert_array_equal(out.astype(np.float32), golden, err_msg=f"rank {rank}")
