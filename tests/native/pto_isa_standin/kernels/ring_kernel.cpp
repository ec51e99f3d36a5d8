// A pto-isa-style kernel file for the stand-in tree (shmcomm tests): kernels, a host driver
// with <<<>>> launches and the suite's common.hpp in one file, as pto-isa's a2a3 suites keep them.
#include <pto/pto-inst.hpp>
#include "common.hpp"

using namespace pto;

constexpr int N = 64;
using Vec = GlobalTensor<float, Shape<1, 1, 1, 1, N>, Stride<N, N, N, N, 1>>;
using Ints = GlobalTensor<int32_t, Shape<1, 1, 1, 1, N>, Stride<N, N, N, N, 1>>;

// Block b of rank r: loads src[b], adds r on its tile (the tile library, native), stores it to
// its staging row, TPUTs it into the next rank's dst[b], notifies the next rank's flag[b] and
// waits for its own; every block adds ones into rank 0's sum (TPUT AtomicAdd); a SYNCALL ends it.
__global__ AICORE void RingKernel(__gm__ float* src, __gm__ float* stage, __gm__ float* dst, __gm__ int32_t* ones,
                                  __gm__ int32_t* sum, __gm__ int32_t* flags, __gm__ CommDeviceContext* ctx, int round)
{
    const int me = static_cast<int>(ctx->rankId);
    const int next = (me + 1) % static_cast<int>(ctx->rankNum);
    const uint32_t b = get_block_idx();
    Tile<float, 1, N> t, u;
    Vec s(src + b * N);
    TLOAD(t, s);
    set_flag(PIPE_MTE2, PIPE_V, EVENT_ID0);
    wait_flag(PIPE_MTE2, PIPE_V, EVENT_ID0);
    TADDS(u, t, static_cast<float>(me));
    set_flag(PIPE_V, PIPE_MTE3, EVENT_ID0);
    wait_flag(PIPE_V, PIPE_MTE3, EVENT_ID0);
    Vec st(stage + b * N);
    TSTORE(st, u);
    pipe_barrier(PIPE_ALL);
    Vec remote(CommRemotePtr(ctx, dst + b * N, next));
    comm::TPUT(remote, st, t);
    pipe_barrier(PIPE_ALL);
    comm::Signal nextFlag(CommRemotePtr(ctx, flags + b * 16, next));
    comm::TNOTIFY(nextFlag, 1, comm::NotifyOp::AtomicAdd);
    comm::Signal myFlag(flags + b * 16);
    comm::TWAIT(myFlag, round, comm::WaitCmp::GE);
    Tile<int32_t, 1, N> it;
    Ints one(ones);
    Ints total(CommRemotePtr(ctx, sum, 0));
    comm::TPUT<AtomicType::AtomicAdd>(total, one, it);
    pipe_barrier(PIPE_ALL);
    SYNCALL();
}

// Waits for a flag nobody sets: the stand-in's TWAIT would return at once; shmcomm's never
// gives up silently.
__global__ AICORE void WaitForeverKernel(__gm__ int32_t* flag)
{
    comm::Signal f(flag);
    comm::TWAIT(f, 1, comm::WaitCmp::EQ);
}

// -- host code (the suite's driver): blanked by shmcomm -------------------------------------
bool RunRing(int rank, TestContext& ctx)
{
    RingKernel<<<2, nullptr, ctx.stream>>>(ctx.src, ctx.stage, ctx.dst, ctx.ones, ctx.sum, ctx.flags, ctx.deviceCtx, 1);
    return aclrtSynchronizeStream(ctx.stream) == 0 && rank >= 0;
}

template <int Ranks>
bool RunAll()
{
    return ForkAndRunWithHcclRootInfo(Ranks, [](int rank, TestContext& ctx) { return RunRing(rank, ctx); });
}

template bool RunAll<2>();
