// A pto-isa-style kernel file for the stand-in tree (shmcomm tests): an asynchronous copy and the
// root collectives, with the suite's host driver in the same file, as pto-isa's a2a3 suites keep
// them. The stand-in copies at once and moves nothing in a collective, so what these kernels
// see comes from shmcomm's shadow.
#include <pto/pto-inst.hpp>
#include "common.hpp"

using namespace pto;

constexpr int N = 64;
constexpr int MAX_RANKS = 8;
using Vec = GlobalTensor<float, Shape<1, 1, 1, 1, N>, Stride<N, N, N, N, 1>>;

// Every rank TPUT_ASYNCs src into the next rank's dst and TGET_ASYNCs the previous rank's src
// into back, never waiting for that one (it lands at the kernel's end at the latest). seen[0]
// is the first element of the remote dst just after the issue, seen[1] after a Test, seen[2]
// after the Wait; seen[3] whether the Test said done.
__global__ AICORE void AsyncPeekKernel(__gm__ float* src, __gm__ float* dst, __gm__ float* back, __gm__ float* seen,
                                       __gm__ uint8_t* workspace, __gm__ CommDeviceContext* ctx)
{
    const int me = static_cast<int>(ctx->rankId);
    const int n = static_cast<int>(ctx->rankNum);
    Tile<uint8_t, 1, 256> scratch;
    comm::AsyncSession session;
    if (!comm::BuildAsyncSession(scratch, workspace, session)) return;
    float* remote = CommRemotePtr(ctx, dst, (me + 1) % n);
    Vec to(remote), from(src);
    comm::AsyncEvent ev = comm::TPUT_ASYNC(to, from, session);
    seen[0] = remote[0];
    Vec mine(back), theirs(CommRemotePtr(ctx, src, (me + n - 1) % n));
    comm::TGET_ASYNC(mine, theirs, session);
    seen[3] = ev.Test(session) ? 1.0f : 0.0f;
    seen[1] = remote[0];
    ev.Wait(session);
    seen[2] = remote[0];
    pipe_barrier(PIPE_ALL);
}

// Rank 0 broadcasts its src into every rank's dst, then reduces every rank's src (Sum) into
// sum, then gathers every rank's src into its rows (ping-pong form).
__global__ AICORE void CollectivesKernel(__gm__ float* src, __gm__ float* dst, __gm__ float* sum,
                                         __gm__ float* rows, __gm__ CommDeviceContext* ctx)
{
    const int n = static_cast<int>(ctx->rankNum);
    if (ctx->rankId != 0) return;
    Vec dsts[MAX_RANKS], srcs[MAX_RANKS];
    for (int r = 0; r < n; ++r) {
        dsts[r] = Vec(CommRemotePtr(ctx, dst, r));
        srcs[r] = Vec(CommRemotePtr(ctx, src, r));
    }
    Tile<float, 1, N> t, u;
    Vec mine(src);
    comm::ParallelGroup<Vec> everyone(dsts, n, 0);
    comm::TBROADCAST(everyone, mine, t);
    comm::ParallelGroup<Vec> inputs(srcs, n, 0);
    Vec out(sum);
    comm::TREDUCE(inputs, out, t, u, comm::ReduceOp::Sum);
    using All = GlobalTensor<float, Shape<1, 1, 1, MAX_RANKS, N>, Stride<MAX_RANKS * N, MAX_RANKS * N, MAX_RANKS * N, N, 1>>;
    All gathered(rows);
    gathered.shape.v[3] = n;
    comm::TGATHER(inputs, gathered, t, u);
    pipe_barrier(PIPE_ALL);
}

// Every rank broadcasts into a group whose root is rank 0's tensor: only rank 0 may.
__global__ AICORE void OffRootKernel(__gm__ float* src, __gm__ CommDeviceContext* ctx)
{
    Vec members[MAX_RANKS];
    for (uint32_t r = 0; r < ctx->rankNum; ++r) members[r] = Vec(CommRemotePtr(ctx, src, static_cast<int>(r)));
    comm::ParallelGroup<Vec> group(members, static_cast<int>(ctx->rankNum), 0);
    Tile<float, 1, N> t;
    comm::TBROADCAST(group, members[0], t);
}

// -- host code (the suite's driver): blanked by shmcomm -------------------------------------
bool RunCollectives(TestContext& ctx)
{
    CollectivesKernel<<<1, nullptr, ctx.stream>>>(ctx.src, ctx.dst, ctx.sum, ctx.rows, ctx.deviceCtx);
    return aclrtSynchronizeStream(ctx.stream) == 0;
}
