// Stand-in CPU comm suite (shmcomm tests; written for shmcomm, laid out as pto-isa's CPU comm
// suites are): kernels called as plain functions by host code that runs each rank through the
// suite's ../common.hpp harness.
#include <cstddef>
#include <cstdint>
#include <iostream>

#include <pto/pto-inst.hpp>
#include "pto/common/cpu_stub.hpp"
#include "../common.hpp"

using namespace pto;

constexpr int N = 64;
using Vec = GlobalTensor<float, Shape<1, 1, 1, 1, N>, Stride<N, N, N, N, 1>>;

// Every rank TPUTs its vector into the next rank's dst, notifies the next rank's flag and waits
// for its own.
__global__ AICORE void RingPutKernel(__gm__ float* src, __gm__ float* dst, __gm__ int32_t* flag,
                                     __gm__ CommDeviceContext* ctx)
{
    const int me = static_cast<int>(ctx->rankId);
    const int next = (me + 1) % static_cast<int>(ctx->rankNum);
    Tile<float, 1, N> tile;
    Vec s(src);
    Vec remote(CommRemotePtr(ctx, dst, next));
    comm::TPUT(remote, s, tile);
    pipe_barrier(PIPE_ALL);
    comm::Signal nextFlag(CommRemotePtr(ctx, flag, next));
    comm::TNOTIFY(nextFlag, 1, comm::NotifyOp::AtomicAdd);
    comm::Signal myFlag(flag);
    comm::TWAIT(myFlag, 1, comm::WaitCmp::GE);
}

// Copies src into dst on rank `to` with plain stores (as pto-isa's WindowMemCopyIn kernels do).
__global__ AICORE void SendKernel(__gm__ float* src, __gm__ float* dst, int to, __gm__ CommDeviceContext* ctx)
{
    __gm__ float* d = CommRemotePtr(ctx, dst, to);
    for (int i = 0; i < N; ++i) d[i] = src[i];
    pipe_barrier(PIPE_ALL);
}

// Waits for a flag.
__global__ AICORE void WaitFlagKernel(__gm__ int32_t* flag)
{
    comm::Signal f(flag);
    comm::TWAIT(f, 1, comm::WaitCmp::EQ);
}

// Writes through a pointer that points nowhere.
__global__ AICORE void CrashKernel(__gm__ int32_t* nowhere)
{
    *reinterpret_cast<volatile int32_t*>(nowhere) = 1;
}

struct Buffers {
    float* src;
    float* dst;
    int32_t* flag;
};

template <typename Ctx>
Buffers Alloc(Ctx& ctx, int rank)
{
    uint64_t base = ctx.hostCtx.windowsIn[rank];
    size_t offset = 0;
    Buffers b;
    b.src = static_cast<float*>(WindowAlloc(base, offset, N * sizeof(float)));
    b.dst = static_cast<float*>(WindowAlloc(base, offset, N * sizeof(float)));
    b.flag = static_cast<int32_t*>(WindowAlloc(base, offset, 64));
    for (int i = 0; i < N; ++i) {
        b.src[i] = static_cast<float>(rank * 1000 + i);
        b.dst[i] = -1.0f;
    }
    return b;
}

bool Expect(const float* got, int from, int rank)
{
    for (int i = 0; i < N; ++i) {
        if (got[i] != static_cast<float>(from * 1000 + i)) {
            std::cerr << "Rank " << rank << ": dst[" << i << "] = " << got[i] << ", expected " << from * 1000 + i
                      << std::endl;
            return false;
        }
    }
    return true;
}

bool RunRingRank(int rank, int n_ranks)
{
    TestContext<float, 4 * N> ctx;
    if (!ctx.Init(rank, n_ranks, n_ranks, 0, nullptr)) return false;
    Buffers b = Alloc(ctx, rank);
    HcclHostBarrier(ctx.comm, ctx.stream);
    RingPutKernel(b.src, b.dst, b.flag, ctx.deviceCtx);
    HcclHostBarrier(ctx.comm, ctx.stream);
    return Expect(b.dst, (rank + n_ranks - 1) % n_ranks, rank) && ctx.Finalize();
}

// The root "scatters" its vector, but to itself: every other rank never receives it. A harness
// that stops at the first rank that passes accepts this as soon as the root checks.
bool RunSelfSendRank(int rank, int n_ranks, int root)
{
    TestContext<float, 4 * N> ctx;
    if (!ctx.Init(rank, n_ranks, n_ranks, 0, nullptr)) return false;
    Buffers b = Alloc(ctx, rank);
    HcclHostBarrier(ctx.comm, ctx.stream);
    if (rank == root) SendKernel(b.src, b.dst, root, ctx.deviceCtx);
    HcclHostBarrier(ctx.comm, ctx.stream);
    return Expect(b.dst, root, rank) && ctx.Finalize();
}

// Rank 1 waits for a flag nobody sets while the others wait for it at the barrier: a hang.
bool RunNeverNotifiedRank(int rank, int n_ranks)
{
    TestContext<float, 4 * N> ctx;
    if (!ctx.Init(rank, n_ranks, n_ranks, 0, nullptr)) return false;
    Buffers b = Alloc(ctx, rank);
    if (rank == 1) WaitFlagKernel(b.flag);
    HcclHostBarrier(ctx.comm, ctx.stream);
    return true;
}

// Rank 1 crashes while the others wait for it at the barrier.
bool RunCrashRank(int rank, int n_ranks)
{
    TestContext<float, 4 * N> ctx;
    if (!ctx.Init(rank, n_ranks, n_ranks, 0, nullptr)) return false;
    if (rank == 1) CrashKernel(nullptr);
    HcclHostBarrier(ctx.comm, ctx.stream);
    return true;
}

bool RunCrash(int n_ranks)
{
    return ForkAndRunWithHcclRootInfo(n_ranks, 0, 0, [&](int rank, const HcclRootInfo*) {
        return RunCrashRank(rank, n_ranks);
    });
}

bool RunRing(int n_ranks)
{
    return ForkAndRunWithHcclRootInfo(n_ranks, 0, 0, [&](int rank, const HcclRootInfo*) {
        return RunRingRank(rank, n_ranks);
    });
}

bool RunSelfSend(int n_ranks, int root)
{
    return ForkAndRunWithHcclRootInfo(n_ranks, 0, 0, [&](int rank, const HcclRootInfo*) {
        return RunSelfSendRank(rank, n_ranks, root);
    });
}

bool RunNeverNotified(int n_ranks)
{
    return ForkAndRunWithHcclRootInfo(n_ranks, 0, 0, [&](int rank, const HcclRootInfo*) {
        return RunNeverNotifiedRank(rank, n_ranks);
    });
}
