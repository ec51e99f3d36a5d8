// Eager cost of pto-isa's instructions behind shmcomm's shadow (benchmarks/pto_isa_eager.py):
// each kernel times `calls` calls inside its own loop and writes the nanoseconds to `out`.
#include <cstdint>
#include <ctime>

#include <pto/pto-inst.hpp>

using namespace pto;

using Signal = GlobalTensor<int32_t, Shape<1, 1, 1, 1, 1>, Stride<1, 1, 1, 1, 1>, Layout::ND>;
constexpr int N = 64;
using Row = GlobalTensor<float, Shape<1, 1, 1, 1, N>, Stride<N, N, N, N, 1>, Layout::ND>;
using RowTile = Tile<TileType::Vec, float, 1, N, BLayout::RowMajor, 1, N>;

static int64_t now_ns()
{
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

__global__ AICORE void NotifyLoopKernel(__gm__ int32_t* flag, int calls, __gm__ int64_t* out)
{
    Signal s(flag);
    const int64_t t0 = now_ns();
    for (int i = 0; i < calls; ++i) comm::TNOTIFY(s, 1, comm::NotifyOp::AtomicAdd);
    out[0] = now_ns() - t0;
}

// one TLOAD and one TSTORE of a 64-float row per call (the flags a2a3 needs between them)
__global__ AICORE void CopyLoopKernel(__gm__ float* src, __gm__ float* dst, int calls, __gm__ int64_t* out)
{
    RowTile t;
    TASSIGN(t, 0x0);
    Row s(src), d(dst);
    const int64_t t0 = now_ns();
    for (int i = 0; i < calls; ++i) {
        TLOAD(t, s);
        set_flag(PIPE_MTE2, PIPE_MTE3, EVENT_ID0);
        wait_flag(PIPE_MTE2, PIPE_MTE3, EVENT_ID0);
        TSTORE(d, t);
        set_flag(PIPE_MTE3, PIPE_MTE2, EVENT_ID0);
        wait_flag(PIPE_MTE3, PIPE_MTE2, EVENT_ID0);
    }
    out[0] = now_ns() - t0;
}
