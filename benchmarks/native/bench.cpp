// Kernels of benchmarks/native_kernels.py: a user-written reusable barrier (the seed's protocol
// with round thresholds), a plain C spin barrier over the same shared memory (the floor), and
// an instruction-cost loop. Each writes its elapsed nanoseconds through `out` (block 0).
#include <time.h>

#include <pto/pto-inst.hpp>

static inline int64_t now_ns()
{
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

// words of `sig` (this rank's): [0, 64) cross-rank arrivals, 64 intra-rank arrivals, 80 the local flag
AICORE inline void UserBarrier(__gm__ DeviceContext *ctx, __gm__ int32_t *sig, int k)
{
    int me = static_cast<int>(ctx->rankId), n = static_cast<int>(ctx->rankNum);
    int b = static_cast<int>(get_block_idx()), nb = static_cast<int>(get_block_num());
    comm::Signal intra(sig + 64);
    if (b != 0) {
        comm::TNOTIFY(intra, 1, comm::NotifyOp::AtomicAdd);
    } else if (nb > 1) {
        comm::TWAIT(intra, k * (nb - 1), comm::WaitCmp::GE);
    }
    pipe_barrier(PIPE_ALL);
    comm::Signal flag(sig + 80);
    if (b == 0) {
        for (int r = 0; r < n; r++) {
            if (r == me) continue;
            comm::Signal peer(GetRemotePtr(ctx, sig + me, r));
            comm::TNOTIFY(peer, 1, comm::NotifyOp::AtomicAdd);
        }
        for (int r = 0; r < n; r++) {
            if (r == me) continue;
            comm::Signal arrived(sig + r);
            comm::TWAIT(arrived, k, comm::WaitCmp::GE);
        }
        comm::TNOTIFY(flag, 1, comm::NotifyOp::AtomicAdd);
    } else {
        comm::TWAIT(flag, k, comm::WaitCmp::GE);
    }
    pipe_barrier(PIPE_ALL);
}

__global__ AICORE void UserBarrierKernel(__gm__ DeviceContext *ctx, __gm__ int32_t *sig, int iters, __gm__ int64_t *out)
{
    UserBarrier(ctx, sig, 1);  // everybody started
    int64_t t0 = now_ns();
    for (int k = 2; k < iters + 2; k++) UserBarrier(ctx, sig, k);
    if (get_block_idx() == 0) out[0] = now_ns() - t0;
}

// The floor: one counter on rank 0, every thread adds 1 and spins (yielding: the box is
// oversubscribed) until the round's total arrived. No shmcomm instruction at all.
__global__ AICORE void SpinBarrierKernel(__gm__ DeviceContext *ctx, __gm__ int32_t *sig, int iters, __gm__ int64_t *out)
{
    int32_t *count = GetRemotePtr(ctx, sig, 0);
    int total = static_cast<int>(ctx->rankNum * get_block_num());
    int64_t t0 = 0;
    for (int k = 1; k < iters + 2; k++) {
        if (k == 2) t0 = now_ns();
        __atomic_fetch_add(count, 1, __ATOMIC_SEQ_CST);
        int spins = 0;
        while (__atomic_load_n(count, __ATOMIC_ACQUIRE) < k * total) {
            if (++spins > 64) sched_yield();
        }
    }
    if (get_block_idx() == 0) out[0] = now_ns() - t0;
}

// `n` TNOTIFY AtomicAdd on a local signal, timed inside the kernel.
__global__ AICORE void NotifyLoopKernel(__gm__ int32_t *sig, int n, __gm__ int64_t *out)
{
    comm::Signal s(sig);
    int64_t t0 = now_ns();
    for (int i = 0; i < n; i++) comm::TNOTIFY(s, 1, comm::NotifyOp::AtomicAdd);
    out[0] = now_ns() - t0;
}

// `n` satisfied TWAIT on a local signal.
__global__ AICORE void WaitLoopKernel(__gm__ int32_t *sig, int n, __gm__ int64_t *out)
{
    comm::Signal s(sig);
    int64_t t0 = now_ns();
    for (int i = 0; i < n; i++) comm::TWAIT(s, 0, comm::WaitCmp::GE);
    out[0] = now_ns() - t0;
}
