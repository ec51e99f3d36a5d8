// A pto-isa-style kernel file written the way pto-isa's manual a2a3 comm-compute kernels are
// (shmcomm tests): a `#ifndef PIPE_FIX` fallback with bisheng's numbering before any include,
// <cstdint> names used before any include, device code under `#ifdef __CCE_AICORE__` (bisheng's
// device pass), HcclRemotePtr, and two kernels of one rank that must run at the same time: the
// consumer waits for what the producer, launched after it on another stream, signals.
#ifndef PIPE_FIX
#define PIPE_FIX static_cast<pipe_t>(10)
#endif

constexpr uint32_t N = 64;

#include <mutex>

#include <pto/pto-inst.hpp>
#include "common.hpp"

using namespace pto;

using Halves = GlobalTensor<_Float16, Shape<1, 1, 1, 1, N>, Stride<N, N, N, N, 1>>;

#ifdef __CCE_AICORE__
// every block of every rank adds `reps` ones to rank 0's counter, each add a read-modify-write
// under pto-isa's AtomicAdd lock (as its CPU TSTORE<AtomicAdd> does per element); all of them
// start together (rank 0's arrival word), so the ranks' adds overlap
AICORE inline void LockedAdds(__gm__ int64_t* counter, __gm__ int32_t* arrived, __gm__ CommDeviceContext* ctx,
                              int reps)
{
    comm::Signal all(HcclRemotePtr(ctx, arrived, 0));
    comm::TNOTIFY(all, 1, comm::NotifyOp::AtomicAdd);
    comm::TWAIT(all, static_cast<int32_t>(ctx->rankNum * get_block_num()), comm::WaitCmp::GE);
    volatile int64_t* total = HcclRemotePtr(ctx, counter, 0);
    for (int i = 0; i < reps; ++i) {
        std::lock_guard<std::mutex> lock(pto::cpu::AtomicAddMutex());
        *total = *total + 1;
    }
}
#endif

// Block b: two events to one destination pipe from two source pipes (as a cube pipeline sets
// them), PIPE_FIX, the locked adds, an fp16 TPUT of src to the next rank's dst, then it tells
// this rank's consumer block b that it is done.
__global__ AICORE void ProducerKernel(__gm__ int64_t* counter, __gm__ int32_t* arrived, __gm__ _Float16* src,
                                      __gm__ _Float16* dst, __gm__ int32_t* ready, __gm__ CommDeviceContext* ctx,
                                      int reps)
{
#ifdef __CCE_AICORE__
    const uint32_t b = get_block_idx();
    set_flag(PIPE_M, PIPE_MTE1, EVENT_ID0);
    set_flag(PIPE_MTE2, PIPE_MTE1, EVENT_ID0);
    wait_flag(PIPE_M, PIPE_MTE1, EVENT_ID0);
    wait_flag(PIPE_MTE2, PIPE_MTE1, EVENT_ID0);
    set_flag(PIPE_M, PIPE_FIX, EVENT_ID0);
    wait_flag(PIPE_M, PIPE_FIX, EVENT_ID0);
    LockedAdds(counter, arrived, ctx, reps);
    const int next = (static_cast<int>(ctx->rankId) + 1) % static_cast<int>(ctx->rankNum);
    Tile<_Float16, 1, N> t;
    Halves s(src + b * N);
    Halves remote(HcclRemotePtr(ctx, dst + b * N, next));
    comm::TPUT(remote, s, t);
    pipe_barrier(PIPE_ALL);
    comm::Signal done(ready + b * 16);
    comm::TNOTIFY(done, 1, comm::NotifyOp::Set);
#endif
}

// Block b waits for producer block b of its rank and marks out[b].
__global__ AICORE void ConsumerKernel(__gm__ int32_t* ready, __gm__ int32_t* out)
{
#ifdef __CCE_AICORE__
    const uint32_t b = get_block_idx();
    comm::Signal done(ready + b * 16);
    comm::TWAIT(done, 1, comm::WaitCmp::EQ);
    out[b] = 1;
#endif
}

// Rank 0 puts `data` into rank 1's `inbox`, drains, and publishes it to rank 1: by TNOTIFY of
// `flag[0]` (byNotify), or as the manual kernels' ready queues do, by plain stores each written
// back with dcci: the slot `flag[8]`, then the count `flag[0]`. Rank 1 polls: by plain loads
// after dcci (byNotify), or by TTEST of the count, then dcci and a plain load of the slot; then
// it copies the inbox to `out` (a TPUT reads it). Correct on a2a3: no report.
__global__ AICORE void PlainFlagKernel(__gm__ float* data, __gm__ float* inbox, __gm__ float* out,
                                       __gm__ int32_t* flag, __gm__ CommDeviceContext* ctx, int byNotify)
{
#ifdef __CCE_AICORE__
    using Vec = GlobalTensor<float, Shape<1, 1, 1, 1, N>, Stride<N, N, N, N, 1>>;
    Tile<float, 1, N> t;
    if (ctx->rankId == 0) {
        Vec src(data);
        Vec dst(HcclRemotePtr(ctx, inbox, 1));
        comm::TPUT(dst, src, t);
        pipe_barrier(PIPE_ALL);
        dsb(DSB_DDR);
        volatile __gm__ int32_t* count = HcclRemotePtr(ctx, flag, 1);
        if (byNotify != 0) {
            comm::Signal s(const_cast<__gm__ int32_t*>(count));
            comm::TNOTIFY(s, 1, comm::NotifyOp::Set);
        } else {
            count[8] = 5;
            dcci((__gm__ void*)(count + 8), 0);
            count[0] = 1;
            dcci((__gm__ void*)count, 0);
        }
    } else if (ctx->rankId == 1) {
        volatile __gm__ int32_t* count = flag;
        if (byNotify != 0) {
            do {
                dcci((__gm__ void*)count, 0);
            } while (count[0] == 0);
        } else {
            comm::Signal s(flag);
            while (!comm::TTEST(s, 1, comm::WaitCmp::GE)) {
            }
            dcci((__gm__ void*)(count + 8), 0);
            if (count[8] != 5) {
                return;  // (out stays zero: the test sees it)
            }
        }
        Vec src(inbox);
        Vec dst(out);
        comm::TPUT(dst, src, t);
        pipe_barrier(PIPE_ALL);
    }
#endif
}

// -- host code (the example's launchers): blanked by shmcomm --------------------------------
void LaunchProducer(int64_t* counter, int32_t* arrived, _Float16* src, _Float16* dst, int32_t* ready, void* ctx,
                    void* stream)
{
    ProducerKernel<<<2, nullptr, stream>>>(counter, arrived, src, dst, ready, static_cast<CommDeviceContext*>(ctx),
                                           100);
}
