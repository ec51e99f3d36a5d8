// Kernels written by shmcomm against a real pto-isa checkout's API (pto_isa-marked tests): each
// block loads a row (TLOAD, MTE2), adds its rank (TADDS, a vector instruction), stores the row
// into the next rank's receive buffer (TSTORE, MTE3), notifies it, waits for its own row and
// copies that, through a 2-D tile whose rows are strided in GM, into its output. With the flags
// a2a3 needs (bug 0); `bug` 1 drops the MTE2 -> V flag, `bug` 2 the MTE3 drain before TNOTIFY.
#include <cstdint>

#include <pto/pto-inst.hpp>
#include "common.hpp"

using namespace pto;

constexpr int N = 64;
constexpr int R = 4;  // rows of the 2-D copy: N / R elements each, strided by 2 * (N / R) in GM
constexpr int C = N / R;
using Row = GlobalTensor<float, Shape<1, 1, 1, 1, N>, Stride<N, N, N, N, 1>, Layout::ND>;
using Grid = GlobalTensor<float, Shape<1, 1, 1, R, C>, Stride<2 * N, 2 * N, 2 * N, 2 * C, 1>, Layout::ND>;
using RowTile = Tile<TileType::Vec, float, 1, N, BLayout::RowMajor, 1, N>;
using GridTile = Tile<TileType::Vec, float, R, C, BLayout::RowMajor, R, C>;

// out (2 * N per block) gets the received row in its even C-element chunks
__global__ AICORE void TileExchangeKernel(__gm__ float* src, __gm__ float* recv, __gm__ float* out,
                                          __gm__ int32_t* flags, __gm__ CommDeviceContext* ctx, int round, int bug)
{
    const int me = static_cast<int>(ctx->rankId);
    const int next = (me + 1) % static_cast<int>(ctx->rankNum);
    const uint32_t b = get_block_idx();
    RowTile t, u;
    GridTile w;
    TASSIGN(t, 0x0);
    TASSIGN(u, 0x1000);
    TASSIGN(w, 0x2000);
    Row mine(src + b * N);
    TLOAD(t, mine);
    if (bug != 1) {
        set_flag(PIPE_MTE2, PIPE_V, EVENT_ID0);
        wait_flag(PIPE_MTE2, PIPE_V, EVENT_ID0);
    }
    TADDS(u, t, static_cast<float>(me));  // REAL_ADD_LINE
    set_flag(PIPE_V, PIPE_MTE3, EVENT_ID0);
    wait_flag(PIPE_V, PIPE_MTE3, EVENT_ID0);
    Row there(CommRemotePtr(ctx, recv + b * N, next));
    TSTORE(there, u);  // REAL_STORE_LINE
    if (bug != 2) {
        pipe_barrier(PIPE_ALL);
    }
    dsb(DSB_DDR);
    using Signal = GlobalTensor<int32_t, Shape<1, 1, 1, 1, 1>, Stride<1, 1, 1, 1, 1>, Layout::ND>;
    Signal nextFlag(CommRemotePtr(ctx, flags + b * 16, next));
    comm::TNOTIFY(nextFlag, round, comm::NotifyOp::Set);  // REAL_NOTIFY_LINE
    Signal myFlag(flags + b * 16);
    comm::TWAIT(myFlag, round, comm::WaitCmp::GE);
    using Dense = GlobalTensor<float, Shape<1, 1, 1, R, C>, Stride<N, N, N, C, 1>, Layout::ND>;
    Dense got(recv + b * N);
    TLOAD(w, got);  // REAL_RELOAD_LINE
    set_flag(PIPE_MTE2, PIPE_MTE3, EVENT_ID1);
    wait_flag(PIPE_MTE2, PIPE_MTE3, EVENT_ID1);
    Grid o(out + b * 2 * N);
    TSTORE(o, w);
    pipe_barrier(PIPE_ALL);
}

// The cube path: A and B into L1 (TLOAD to Mat tiles, MTE2), into L0A / L0B (TMOV, MTE1),
// TMATMUL into L0C (M), the Acc tile to GM (TSTORE, FIX). `bug` 1 drops the MTE2 -> MTE1 flag.
constexpr int CM = 16, CK = 16, CN = 16;
using GmA = GlobalTensor<float, Shape<1, 1, 1, CM, CK>, Stride<CM * CK, CM * CK, CM * CK, CK, 1>>;
using GmB = GlobalTensor<float, Shape<1, 1, 1, CK, CN>, Stride<CK * CN, CK * CN, CK * CN, CN, 1>>;
using GmC = GlobalTensor<float, Shape<1, 1, 1, CM, CN>, Stride<CM * CN, CM * CN, CM * CN, CN, 1>>;
using MatA = Tile<TileType::Mat, float, CM, CK, BLayout::ColMajor, CM, CK, SLayout::RowMajor, 512>;
using MatB = Tile<TileType::Mat, float, CK, CN, BLayout::ColMajor, CK, CN, SLayout::RowMajor, 512>;

__global__ AICORE void CubeKernel(__gm__ float* a, __gm__ float* b, __gm__ float* c, int bug)
{
    const uint32_t blk = get_block_idx();
    GmA ga(a + blk * CM * CK);
    GmB gb(b + blk * CK * CN);
    GmC gc(c + blk * CM * CN);
    MatA ma;
    MatB mb;
    TileLeft<float, CM, CK, CM, CK> l;
    TileRight<float, CK, CN, CK, CN> r;
    TileAcc<float, CM, CN, CM, CN> acc;
    TASSIGN(ma, 0x0);
    TASSIGN(mb, 0x10000);
    TASSIGN(l, 0x0);
    TASSIGN(r, 0x0);
    TASSIGN(acc, 0x0);
    TLOAD(ma, ga);
    TLOAD(mb, gb);
    if (bug != 1) {
        set_flag(PIPE_MTE2, PIPE_MTE1, EVENT_ID0);
        wait_flag(PIPE_MTE2, PIPE_MTE1, EVENT_ID0);
    }
    TMOV(l, ma);
    TMOV(r, mb);
    set_flag(PIPE_MTE1, PIPE_M, EVENT_ID0);
    wait_flag(PIPE_MTE1, PIPE_M, EVENT_ID0);
    TMATMUL(acc, l, r);
    set_flag(PIPE_M, PIPE_FIX, EVENT_ID0);
    wait_flag(PIPE_M, PIPE_FIX, EVENT_ID0);
    TSTORE(gc, acc);  // REAL_ACC_STORE_LINE
    pipe_barrier(PIPE_ALL);
}
