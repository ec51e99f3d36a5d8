// C++ twins of the bug catalogue's kernels (shmcomm/stress/catalogue/bugs.py): each must be
// caught like its Python twin.
#include <pto/pto-inst.hpp>

#include "barrier_impl.hpp"

using Global = pto::GlobalTensor<float, pto::Shape<1, 1, 1, 1, pto::DYNAMIC>, pto::Stride<1, 1, 1, 1, 1>>;
using Staging = pto::Tile<pto::TileType::Vec, float, 1, 256, pto::BLayout::RowMajor, -1, -1>;

// The phase-blind cross-rank slot: two DeviceBarriers in one launch. Phase 1 reuses phase 0's
// cross-rank counters (and its local flag aliases phase 0's intra counter), so the second
// barrier is already satisfied and a rank reads its peer's data before the peer wrote it.
__global__ AICORE void TwoPhaseKernel(__gm__ DeviceContext *ctx, __gm__ int32_t *signal_base, __gm__ float *src,
                                      __gm__ float *recv, __gm__ float *out, int size)
{
    int me = static_cast<int>(ctx->rankId), n = static_cast<int>(ctx->rankNum);
    int b = static_cast<int>(get_block_idx()), nb = static_cast<int>(get_block_num());
    Staging tile(1, 256);
    TASSIGN(tile, 0x0);
    pto::Shape<1, 1, 1, 1, pto::DYNAMIC> shape(size);
    DeviceBarrier(ctx, signal_base, 0, me, n, b, nb);
    if (b == 0) {
        Global srcG(src, shape);
        Global remote(GetRemotePtr(ctx, recv, (me + 1) % n), shape);
        pto::comm::TPUT(remote, srcG, tile);
        pipe_barrier(PIPE_ALL);
        dsb(DSB_DDR);
    }
    DeviceBarrier(ctx, signal_base, 1, me, n, b, nb);  // bug: phase 1 reuses phase 0's slots
    if (b == 0) {
        Global recvG(recv, shape);
        Global outG(out, shape);
        pto::comm::TGET(outG, recvG, tile);  // READ_LINE
        pipe_barrier(PIPE_ALL);
    }
}

// A non-atomic "AtomicAdd": every block adds 1 to rank 0's accumulator by TLOAD, add, TSTORE.
__global__ AICORE void RmwKernel(__gm__ DeviceContext *ctx, __gm__ float *acc, int size, int iters)
{
    Staging tile(1, size);
    TASSIGN(tile, 0x0);
    Global target(GetRemotePtr(ctx, acc, 0), pto::Shape<1, 1, 1, 1, pto::DYNAMIC>(size));
    for (int i = 0; i < iters; i++) {
        TLOAD(tile, target);  // bug: read-modify-write instead of TSTORE<AtomicType::AtomicAdd>
        set_flag(PIPE_MTE2, PIPE_MTE3, EVENT_ID0);
        wait_flag(PIPE_MTE2, PIPE_MTE3, EVENT_ID0);
        for (int k = 0; k < size; k++) tile.data()[k] += 1.0f;
        TSTORE(target, tile);  // RMW_STORE_LINE
        pipe_barrier(PIPE_ALL);
    }
}

// The fix: the same adds as TSTORE<AtomicAdd> of a tile of ones.
__global__ AICORE void AtomicAddKernel(__gm__ DeviceContext *ctx, __gm__ float *acc, int size, int iters)
{
    Staging tile(1, size);
    TASSIGN(tile, 0x0);
    for (int k = 0; k < size; k++) tile.data()[k] = 1.0f;
    Global target(GetRemotePtr(ctx, acc, 0), pto::Shape<1, 1, 1, 1, pto::DYNAMIC>(size));
    for (int i = 0; i < iters; i++) {
        TSTORE<pto::AtomicType::AtomicAdd>(target, tile);
        pipe_barrier(PIPE_ALL);
    }
}
