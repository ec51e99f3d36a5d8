// pto-isa-style tile kernels for the stand-in tree (shmcomm tests): each block loads its row,
// adds its rank on a tile (a vector instruction: native and immediate), stores the row into the
// next rank's receive buffer, notifies it, waits for its own row from the previous rank, and
// stores that (plus nothing) into its output. `bug` removes one sync a2a3 needs:
//   1: the MTE2 -> V flag after the first TLOAD (the vector add may read the tile before the
//      load lands);
//   2: the MTE3 drain before TNOTIFY (the receiver may load the row before the store lands).
#include <pto/pto-inst.hpp>
#include "common.hpp"

using namespace pto;

constexpr int N = 64;
using Row = GlobalTensor<float, Shape<1, 1, 1, 1, N>, Stride<N, N, N, N, 1>>;

__global__ AICORE void TileExchangeKernel(__gm__ float* src, __gm__ float* recv, __gm__ float* out,
                                          __gm__ int32_t* flags, __gm__ CommDeviceContext* ctx, int round, int bug)
{
    const int me = static_cast<int>(ctx->rankId);
    const int next = (me + 1) % static_cast<int>(ctx->rankNum);
    const uint32_t b = get_block_idx();
    Tile<float, 1, N> t, u, w;
    Row mine(src + b * N);
    TLOAD(t, mine);
    if (bug != 1) {
        set_flag(PIPE_MTE2, PIPE_V, EVENT_ID0);
        wait_flag(PIPE_MTE2, PIPE_V, EVENT_ID0);
    }
    TADDS(u, t, static_cast<float>(me));  // TILES_ADD_LINE
    set_flag(PIPE_V, PIPE_MTE3, EVENT_ID0);
    wait_flag(PIPE_V, PIPE_MTE3, EVENT_ID0);
    Row there(CommRemotePtr(ctx, recv + b * N, next));
    TSTORE(there, u);  // TILES_STORE_LINE
    if (bug != 2) {
        pipe_barrier(PIPE_ALL);
    }
    dsb(DSB_DDR);
    comm::Signal nextFlag(CommRemotePtr(ctx, flags + b * 16, next));
    comm::TNOTIFY(nextFlag, round, comm::NotifyOp::Set);  // TILES_NOTIFY_LINE
    comm::Signal myFlag(flags + b * 16);
    comm::TWAIT(myFlag, round, comm::WaitCmp::GE);
    Row got(recv + b * N);
    TLOAD(w, got);  // TILES_RELOAD_LINE
    set_flag(PIPE_MTE2, PIPE_MTE3, EVENT_ID1);
    wait_flag(PIPE_MTE2, PIPE_MTE3, EVENT_ID1);
    Row o(out + b * N);
    TSTORE(o, w);
    pipe_barrier(PIPE_ALL);
}

// Every block of every rank adds its ones row into rank 0's sum with TSTORE<AtomicAdd> (the
// stand-in adds with a plain +=, as pto-isa's CPU back end does: shmcomm must add under its lock).
__global__ AICORE void AtomicStoreKernel(__gm__ float* ones, __gm__ float* sum, __gm__ CommDeviceContext* ctx,
                                         int iters)
{
    Tile<float, 1, N> t;
    Row one(ones);
    TLOAD(t, one);
    set_flag(PIPE_MTE2, PIPE_MTE3, EVENT_ID0);
    wait_flag(PIPE_MTE2, PIPE_MTE3, EVENT_ID0);
    Row total(CommRemotePtr(ctx, sum, 0));
    for (int i = 0; i < iters; ++i) {
        TSTORE<Tile<float, 1, N>, Row, AtomicType::AtomicAdd>(total, t);
    }
    pipe_barrier(PIPE_ALL);
}

// An Acc tile's TSTORE (a2a3: FIX) runs at once in every mode: its GM holds the data right after.
__global__ AICORE void AccStoreKernel(__gm__ float* src, __gm__ float* out, __gm__ int32_t* seen)
{
    const uint32_t b = get_block_idx();
    Tile<float, 1, N> t;
    Tile<float, 1, N, TileType::Acc> acc;
    Row s(src + b * N);
    TLOAD(t, s);
    set_flag(PIPE_MTE2, PIPE_V, EVENT_ID0);
    wait_flag(PIPE_MTE2, PIPE_V, EVENT_ID0);
    TADDS(acc, t, 1.0f);  // (the stand-in's vector add fills the Acc tile)
    Row o(out + b * N);
    TSTORE(o, acc);
    seen[b] = static_cast<int32_t>(out[b * N + 1]);  // a plain read right after: already there
}

// A TWAIT on a signal whose outer dims are not evenly strided: shmcomm's C++ error, at this line.
__global__ AICORE void UnevenWaitKernel(__gm__ int32_t* flags)
{
    GlobalTensor<int32_t, Shape<1, 1, 2, 2, 1>, Stride<1, 1, 100, 7, 1>> sig(flags);
    comm::TWAIT(sig, 1, comm::WaitCmp::EQ);  // TILES_UNEVEN_LINE
}
