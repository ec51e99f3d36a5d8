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

// The seed's hand-made pipeline (TLOAD, MTE2 -> MTE3 event, TSTORE_IMPL, MTE3 -> MTE2 event) in
// a copy loop to the next rank; its twin (flagged = 0) stores without the MTE2 -> MTE3 wait, so
// the store may read the tile before the load has filled it.
__global__ AICORE void ManualCopyKernel(__gm__ DeviceContext *ctx, __gm__ int32_t *flags, __gm__ float *src,
                                        __gm__ float *recv, __gm__ float *out, int size, int flagged)
{
    if (get_block_idx() != 0) return;
    int me = static_cast<int>(ctx->rankId), n = static_cast<int>(ctx->rankNum);
    using TileData = pto::Tile<pto::TileType::Vec, float, 1, 32, pto::BLayout::RowMajor, -1, -1>;
    TileData tile(1, 32);
    TASSIGN(tile, 0x0);
    __gm__ float *dst = GetRemotePtr(ctx, recv, (me + 1) % n);
    for (int c0 = 0; c0 < size; c0 += 32) {
        int len = size - c0 < 32 ? size - c0 : 32;
        tile.SetValidShape(1, len);
        Global srcG(src + c0, pto::Shape<1, 1, 1, 1, pto::DYNAMIC>(len));
        Global dstG(dst + c0, pto::Shape<1, 1, 1, 1, pto::DYNAMIC>(len));
        TLOAD(tile, srcG);
        if (flagged) {
            set_flag(PIPE_MTE2, PIPE_MTE3, EVENT_ID0);
            wait_flag(PIPE_MTE2, PIPE_MTE3, EVENT_ID0);
        }
        TSTORE_IMPL<TileData, Global, AtomicType::AtomicNone>(dstG, tile);  // MANUAL_STORE_LINE
        set_flag(PIPE_MTE3, PIPE_MTE2, EVENT_ID0);
        wait_flag(PIPE_MTE3, PIPE_MTE2, EVENT_ID0);
    }
    pipe_barrier(PIPE_ALL);
    dsb(DSB_DDR);
    comm::Signal peer(GetRemotePtr(ctx, flags, (me + 1) % n));
    comm::TNOTIFY(peer, 1, comm::NotifyOp::AtomicAdd);
    comm::Signal mine(flags);
    comm::TWAIT(mine, 1, comm::WaitCmp::GE);
    Staging staging(1, 256);
    TASSIGN(staging, 0x1000);
    Global recvG(recv, pto::Shape<1, 1, 1, 1, pto::DYNAMIC>(size));
    Global outG(out, pto::Shape<1, 1, 1, 1, pto::DYNAMIC>(size));
    pto::comm::TGET(outG, recvG, staging);
    pipe_barrier(PIPE_ALL);
}
