// The seed's DeviceBarrier, exactly as the seed writes it, and a kernel that runs it; plus a
// buggy twin: data put to every peer, then notified before the copy has drained.
#include "pto/comm/pto_comm_inst.hpp"

#include "barrier_impl.hpp"

// Every block stamps its slot in every rank's `data`, the barrier, then block 0 copies what it
// sees into `out` (rank-local): after the barrier every stamp must be there. The buggy twin
// (fenced = 0) enters the barrier, whose first instruction is a notify, before its copies have
// drained and been fenced.
__global__ AICORE void BarrierKernel(__gm__ DeviceContext *ctx, __gm__ int32_t *signal_base,
                                     __gm__ int32_t *data, __gm__ int32_t *out, int stride, int fenced)
{
    int me = static_cast<int>(ctx->rankId), n = static_cast<int>(ctx->rankNum);
    int b = static_cast<int>(get_block_idx()), nb = static_cast<int>(get_block_num());
    using Global = pto::GlobalTensor<int32_t, pto::Shape<1, 1, 1, 1, pto::DYNAMIC>, pto::Stride<1, 1, 1, 1, 1>>;
    using TileData = pto::Tile<pto::TileType::Vec, int32_t, 1, 64, pto::BLayout::RowMajor, -1, -1>;
    TileData tile(1, 1);
    TASSIGN(tile, 0x0);
    __gm__ int32_t *stamp = out + n * stride + b;  // this block's stamp value, set by the host
    for (int r = 0; r < n; r++) {
        Global src(stamp, pto::Shape<1, 1, 1, 1, pto::DYNAMIC>(1));
        Global dst(GetRemotePtr(ctx, data + me * stride + b, r), pto::Shape<1, 1, 1, 1, pto::DYNAMIC>(1));
        pto::comm::TPUT(dst, src, tile);
    }
    if (fenced) {
        pipe_barrier(PIPE_ALL);
        dsb(DSB_DDR);
    }
    DeviceBarrier(ctx, signal_base, 0, me, n, b, nb);
    if (b == 0) {
        using All = pto::GlobalTensor<int32_t, pto::Shape<1, 1, 1, 1, pto::DYNAMIC>, pto::Stride<1, 1, 1, 1, 1>>;
        using Big = pto::Tile<pto::TileType::Vec, int32_t, 1, 512, pto::BLayout::RowMajor, -1, -1>;
        Big t(1, n * stride);
        TASSIGN(t, 0x100);
        All src(data, pto::Shape<1, 1, 1, 1, pto::DYNAMIC>(n * stride));
        All dst(out, pto::Shape<1, 1, 1, 1, pto::DYNAMIC>(n * stride));
        TLOAD(t, src);
        set_flag(PIPE_MTE2, PIPE_MTE3, EVENT_ID0);
        wait_flag(PIPE_MTE2, PIPE_MTE3, EVENT_ID0);
        TSTORE_IMPL<Big, All, AtomicType::AtomicNone>(dst, t);
        set_flag(PIPE_MTE3, PIPE_MTE2, EVENT_ID0);
        wait_flag(PIPE_MTE3, PIPE_MTE2, EVENT_ID0);
    }
}

// Block 0 puts `src` into the next rank's `recv`, notifies it, waits for its own flag and
// copies what it received into `out`. The correct kernel drains (pipe_barrier) and fences (dsb)
// between the copy and the notify; its twins skip both (notify before drain) or the fence.
__global__ AICORE void PutNotifyKernel(__gm__ DeviceContext *ctx, __gm__ int32_t *flags, __gm__ float *src,
                                       __gm__ float *recv, __gm__ float *out, int size, int drain, int fence)
{
    if (get_block_idx() != 0) return;
    int me = static_cast<int>(ctx->rankId), n = static_cast<int>(ctx->rankNum);
    int next = (me + 1) % n;
    using ShapeDyn = pto::Shape<pto::DYNAMIC, pto::DYNAMIC, pto::DYNAMIC, pto::DYNAMIC, pto::DYNAMIC>;
    using StrideDyn = pto::Stride<pto::DYNAMIC, pto::DYNAMIC, pto::DYNAMIC, pto::DYNAMIC, pto::DYNAMIC>;
    using Global = pto::GlobalTensor<float, ShapeDyn, StrideDyn, pto::Layout::ND>;
    using TileData = pto::Tile<pto::TileType::Vec, float, 1, 64, pto::BLayout::RowMajor, -1, -1>;
    ShapeDyn shape(1, 1, 1, 1, size);
    StrideDyn stride(size, size, size, size, 1);
    TileData tile(1, 64);
    TASSIGN(tile, 0x0);
    Global srcG(src, shape, stride);
    Global remoteG(GetRemotePtr(ctx, recv, next), shape, stride);
    pto::comm::TPUT(remoteG, srcG, tile);
    if (drain) pipe_barrier(PIPE_MTE3);
    if (fence) dsb(DSB_DDR);
    comm::Signal peer(GetRemotePtr(ctx, flags, next));
    comm::TNOTIFY(peer, 1, comm::NotifyOp::AtomicAdd);  // NOTIFY_LINE
    comm::Signal mine(flags);
    comm::TWAIT(mine, 1, comm::WaitCmp::GE);
    Global recvG(recv, shape, stride);
    Global outG(out, shape, stride);
    pto::comm::TGET(outG, recvG, tile);
    pipe_barrier(PIPE_ALL);
}

// A null pointer store: a native crash names its rank, block and line.
__global__ AICORE void CrashKernel(__gm__ int32_t *flags, int crash_rank, int crash_block)
{
    comm::Signal sig(flags);
    comm::TNOTIFY(sig, 0, comm::NotifyOp::AtomicAdd);
    if (get_block_idx() == crash_block) {
        if (static_cast<int>(shmcomm::native::tls_block->rank) == crash_rank) {
            volatile int32_t *bad = nullptr;
            *bad = 1;  // CRASH_LINE
        }
    }
}

// A C++ exception leaves the kernel: an error naming the kernel's line, never an unwind into Python.
__global__ AICORE void ThrowKernel(int value)
{
    pipe_barrier(PIPE_ALL);
    if (value > 0) throw std::runtime_error("value must not be positive");
}

template <typename T, int N>
__global__ AICORE void FillKernel(__gm__ T *dst, T value)
{
    for (int i = 0; i < N; i++) dst[i] = value;
    pipe_barrier(PIPE_ALL);
}
