// A pto-isa-style manual kernel file (shmcomm tests) laid out as pto-isa's kernels/manual ones:
// its own device context header, a struct of its own, a soft SYNCALL over every block, and its
// host launcher after `#include "acl/acl.h"`.
#include <pto/pto-inst.hpp>
#include "comm_context.h"
#include "ring_args.h"

using namespace pto;

constexpr int N = 64;
using Vec = GlobalTensor<float, Shape<1, 1, 1, 1, N>, Stride<N, N, N, N, 1>>;
using Ws = GlobalTensor<int32_t, Shape<1, 1, 1, 1, 16>, Stride<16, 16, 16, 16, 1>>;

template <typename T>
AICORE inline __gm__ T* CommRemotePtr(__gm__ CommDeviceContext* ctx, __gm__ T* localPtr, int pe)
{
    return (__gm__ T*)(ctx->windowsIn[pe] + ((uint64_t)localPtr - ctx->windowsIn[ctx->rankId]));
}

// Block b puts src[b] into the next rank's dst[b] and notifies its flag[b]; after a soft SYNCALL
// (usedCores 0: every block) each block waits for its own flag.
extern "C" __global__ AICORE void OwnContextKernel(__gm__ float* src, __gm__ float* dst, __gm__ int32_t* flags,
                                                   __gm__ CommDeviceContext* ctx, __gm__ int32_t* ws)
{
    const int me = static_cast<int>(ctx->rankId);
    const int next = (me + 1) % static_cast<int>(ctx->rankNum);
    const uint32_t b = get_block_idx();
    Tile<float, 1, N> t;
    Vec s(src + b * N);
    Vec remote(CommRemotePtr(ctx, dst + b * N, next));
    comm::TPUT(remote, s, t);
    pipe_barrier(PIPE_ALL);
    comm::Signal f(CommRemotePtr(ctx, flags + b * 16, next));
    comm::TNOTIFY(f, 1, comm::NotifyOp::AtomicAdd);
    Ws w(ws);
    SYNCALL<SyncAllMode::Soft>(w);
    comm::Signal mine(flags + b * 16);
    comm::TWAIT(mine, 1, comm::WaitCmp::GE);
}

// The same ring over a struct of the kernel's own, which the host builds in a window.
extern "C" __global__ AICORE void OwnStructKernel(__gm__ float* src, __gm__ float* dst, __gm__ RingArgs* args)
{
    const uint32_t b = get_block_idx();
    Tile<float, 1, N> t;
    Vec s(src + b * N);
    Vec remote((__gm__ float*)(args->nextBase + ((uint64_t)(dst + b * N) - args->myBase)));
    comm::TPUT(remote, s, t);
    pipe_barrier(PIPE_ALL);
}

#include "acl/acl.h"

bool LaunchOwnContext(void* stream, float* src, float* dst, int32_t* flags, void* ctx, int32_t* ws)
{
    OwnContextKernel<<<2, nullptr, stream>>>(src, dst, flags, (CommDeviceContext*)ctx, ws);
    return aclrtSynchronizeStream(stream) == ACL_SUCCESS;
}
