// AllReduce written the seed's way: a ReduceScatter phase, pipe_barrier(PIPE_ALL), the seed's
// DeviceBarrier, an AllGather phase. Each block handles `chunk` elements of every share.
#include <pto/pto-inst.hpp>

#include "barrier_impl.hpp"

using Global = pto::GlobalTensor<float, pto::Shape<1, 1, 1, 1, pto::DYNAMIC>, pto::Stride<1, 1, 1, 1, 1>>;
using TileData = pto::Tile<pto::TileType::Vec, float, 1, 128, pto::BLayout::RowMajor, -1, -1>;

AICORE inline void ReduceScatterPhase(__gm__ DeviceContext *ctx, __gm__ float *x, __gm__ float *acc, int share,
                                      int chunk, TileData &tile)
{
    int me = static_cast<int>(ctx->rankId), n = static_cast<int>(ctx->rankNum);
    int lo = static_cast<int>(get_block_idx()) * chunk;
    for (int i = 0; i < n; i++) {
        int p = (me + i) % n;  // start with the next rank: not every rank adds to the same share at once
        Global src(x + p * share + lo, pto::Shape<1, 1, 1, 1, pto::DYNAMIC>(chunk));
        Global dst(GetRemotePtr(ctx, acc + lo, p), pto::Shape<1, 1, 1, 1, pto::DYNAMIC>(chunk));
        pto::comm::TPUT<pto::AtomicType::AtomicAdd>(dst, src, tile);
    }
}

AICORE inline void AllGatherPhase(__gm__ DeviceContext *ctx, __gm__ float *acc, __gm__ float *out, int share,
                                  int chunk, TileData &tile)
{
    int me = static_cast<int>(ctx->rankId), n = static_cast<int>(ctx->rankNum);
    int lo = static_cast<int>(get_block_idx()) * chunk;
    for (int i = 0; i < n; i++) {
        int p = (me + i) % n;
        Global src(acc + lo, pto::Shape<1, 1, 1, 1, pto::DYNAMIC>(chunk));
        Global dst(GetRemotePtr(ctx, out + me * share + lo, p), pto::Shape<1, 1, 1, 1, pto::DYNAMIC>(chunk));
        pto::comm::TPUT(dst, src, tile);
    }
}

__global__ AICORE void AllReduceKernel(__gm__ DeviceContext *ctx, __gm__ int32_t *signal_base, __gm__ float *x,
                                       __gm__ float *acc, __gm__ float *out, int share)
{
    int nb = static_cast<int>(get_block_num());
    int chunk = share / nb;
    TileData tile(1, 128);
    TASSIGN(tile, 0x0);

    // 阶段 1：ReduceScatter
    ReduceScatterPhase(ctx, x, acc, share, chunk, tile);
    pipe_barrier(PIPE_ALL);
    dsb(DSB_DDR);

    // 阶段 2：跨 rank barrier
    DeviceBarrier(ctx, signal_base, 0, static_cast<int>(ctx->rankId), static_cast<int>(ctx->rankNum),
                  static_cast<int>(get_block_idx()), nb);

    // 阶段 3：AllGather
    AllGatherPhase(ctx, acc, out, share, chunk, tile);
    pipe_barrier(PIPE_ALL);
}

// Ping-pong with a peer that may be a Python kernel: rank 0 notifies first.
__global__ AICORE void PingPongKernel(__gm__ DeviceContext *ctx, __gm__ int32_t *flags, int rounds)
{
    int me = static_cast<int>(ctx->rankId);
    int peer = 1 - me;
    comm::Signal mine(flags);
    comm::Signal theirs(GetRemotePtr(ctx, flags, peer));
    for (int i = 0; i < rounds; i++) {
        if (me == 0) {
            comm::TNOTIFY(theirs, 1, comm::NotifyOp::AtomicAdd);
            comm::TWAIT(mine, i + 1, comm::WaitCmp::GE);
        } else {
            comm::TWAIT(mine, i + 1, comm::WaitCmp::GE);
            comm::TNOTIFY(theirs, 1, comm::NotifyOp::AtomicAdd);
        }
    }
}

// Waits for a notify nobody sends: the deadlock watch must see it and report it.
__global__ AICORE void StuckKernel(__gm__ int32_t *flags)
{
    comm::Signal mine(flags);
    comm::TWAIT(mine, 1, comm::WaitCmp::GE);  // STUCK_LINE
}

// Sets a local signal to `value` twice (the second Set changes nothing).
__global__ AICORE void SetKernel(__gm__ int32_t *flags, int value)
{
    comm::Signal mine(flags);
    comm::TNOTIFY(mine, value, comm::NotifyOp::Set);
    comm::TNOTIFY(mine, value, comm::NotifyOp::Set);
}

// TPUT_ASYNC to the next rank; the correct kernel waits for its event (and fences) before it
// notifies; the buggy twin (waited = 0) notifies while the copy may still be in flight.
__global__ AICORE void AsyncPutKernel(__gm__ DeviceContext *ctx, __gm__ int32_t *flags, __gm__ float *src,
                                      __gm__ float *recv, __gm__ float *out, int size, int waited)
{
    if (get_block_idx() != 0) return;
    int me = static_cast<int>(ctx->rankId), n = static_cast<int>(ctx->rankNum);
    using Flat = pto::GlobalTensor<float, pto::Shape<1, 1, 1, 1, pto::DYNAMIC>, pto::Stride<1, 1, 1, 1, 1>>;
    pto::Shape<1, 1, 1, 1, pto::DYNAMIC> shape(size);
    Flat srcG(src, shape);
    Flat remote(GetRemotePtr(ctx, recv, (me + 1) % n), shape);
    pto::comm::AsyncSession session;
    pto::comm::BuildAsyncSession(session);
    pto::comm::AsyncEvent ev = pto::comm::TPUT_ASYNC(remote, srcG, session);  // ASYNC_LINE
    if (waited) {
        ev.Wait(session);
        dsb(DSB_DDR);
    }
    comm::Signal peer(GetRemotePtr(ctx, flags, (me + 1) % n));
    comm::TNOTIFY(peer, 1, comm::NotifyOp::AtomicAdd);
    comm::Signal mine(flags);
    comm::TWAIT(mine, 1, comm::WaitCmp::GE);
    Flat recvG(recv, shape);
    Flat outG(out, shape);
    pto::comm::AsyncEvent back = pto::comm::TGET_ASYNC(outG, recvG, session);
    back.Wait(session);
    if (!ev.Test(session)) ev.Wait(session);
}
