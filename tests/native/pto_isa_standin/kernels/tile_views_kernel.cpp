// Two views of one UB buffer, as pto-isa's manual kernels overlay tiles (moe_dispatch declares
// its scale columns as wide as the whole ping tile): `wide` is declared W floats wide but its
// valid region, what a copy moves, is its first V; `next` starts `off` floats into it. With
// off = V the views move disjoint bytes, and a2a3 needs no flag between storing `wide` (MTE3)
// and loading `next` (MTE2); with off < V they overlap, and it does.
#include <pto/pto-inst.hpp>

using namespace pto;

constexpr int W = 64;
constexpr int V = 8;
using Row = GlobalTensor<float, Shape<1, 1, 1, 1, V>, Stride<V, V, V, V, 1>>;

__global__ AICORE void TileViewsKernel(__gm__ float* a, __gm__ float* b, __gm__ float* outA, __gm__ float* outB,
                                       int off)
{
    Tile<float, 1, W, TileType::Vec, 1, V> wide;
    Tile<float, 1, V> next;
    next.assignData(wide.data() + off);
    Row ga(a), gb(b), oa(outA), ob(outB);
    TLOAD(wide, ga);
    set_flag(PIPE_MTE2, PIPE_MTE3, EVENT_ID0);
    wait_flag(PIPE_MTE2, PIPE_MTE3, EVENT_ID0);
    TSTORE(oa, wide);  // VIEWS_STORE_LINE
    TLOAD(next, gb);   // VIEWS_LOAD_LINE
    set_flag(PIPE_MTE2, PIPE_MTE3, EVENT_ID1);
    wait_flag(PIPE_MTE2, PIPE_MTE3, EVENT_ID1);
    TSTORE(ob, next);
    pipe_barrier(PIPE_ALL);
}
