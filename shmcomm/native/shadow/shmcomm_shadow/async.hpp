// shmcomm's asynchronous copies (TPUT_ASYNC / TGET_ASYNC on a2a3's SDMA engine) over a pto-isa
// checkout's AsyncSession and AsyncEvent (written by shmcomm; no pto-isa code).
//
// As a2a3 (include/pto/comm/a2a3/async/, async_common/TPutAsyncCommonDetail.hpp): both tensors
// flat contiguous 1-D, dst at least as long as src, the session's commBlockOffset added to both
// addresses, an empty src posts nothing (the event of handle 0). The copy is in flight when the
// instruction returns: it lands when its event's Wait asks (or a Test, which then returns
// true), with every earlier copy of its session, and at the kernel's end at the latest.
// Eager: the block's native DMA queue (shmcomm/runtime.hpp). Bridged: shmcomm's Python
// TPUT_ASYNC / TGET_ASYNC in the session BuildAsyncSession registered, so hazard mode keeps the
// copy in flight past every pipe_barrier and dsb, as on a2a3.
#pragma once

#include <string>

#include "shmcomm_shadow/comm.hpp"

namespace shmcomm {
namespace pto_isa {

constexpr uint32_t SDMA_MAX_CHANNEL = 48;  // a2a3's SDMA queues per device (sdma_types.hpp)

// TPutAsyncIsFlatContiguous1D of a2a3: packed strides and a single logical line
template <typename G>
inline bool flat_1d(G& g) {
    int64_t d[5], s[5];
    for (int i = 0; i < 5; ++i) {
        d[i] = static_cast<int64_t>(g.GetShape(i));
        s[i] = static_cast<int64_t>(g.GetStride(i));
    }
    const bool packed = s[4] == 1 && s[3] == d[4] && s[2] == d[3] * s[3] && s[1] == d[2] * s[2] && s[0] == d[1] * s[1];
    return packed && d[0] == 1 && d[1] == 1 && d[2] == 1 && d[3] == 1;
}

template <typename G>
inline uint64_t elements(G& g) {
    uint64_t e = 1;
    for (int i = 0; i < 5; ++i) e *= static_cast<uint64_t>(g.GetShape(i));
    return e;
}

// a2a3's BuildSdmaSession rules: an invalid session for a sync id past 7, a queue count outside
// 1-48, a channel group at or past 48 / queues, or no workspace. Bridged, shmcomm's Python
// BuildAsyncSession decides the same and keeps the session under the C++ object's address.
template <typename Session, typename Cfg, typename TileT>
inline bool build_session(TileT& scratch, uint8_t* workspace, Session& session, uint32_t syncId, const Cfg& cfg,
                          uint32_t group, uint32_t auto_group, const char* file, int line) {
    if (n::bridged()) {
        uint64_t a[13];
        a[0] = n::addr(&session);
        a[1] = n::addr(workspace);
        a[2] = syncId;
        a[3] = cfg.block_bytes;
        a[4] = cfg.comm_block_offset;
        a[5] = cfg.queue_num;
        a[6] = group == auto_group ? UINT64_MAX : group;
        a[7] = n::addr(scratch.data());
        a[8] = static_cast<uint64_t>(n::dtype_code<std::remove_cv_t<typename TileT::DType>>());
        a[9] = TileT::Rows;
        a[10] = TileT::Cols;
        a[11] = static_cast<uint64_t>(scratch.GetValidRow());
        a[12] = static_cast<uint64_t>(scratch.GetValidCol());
        if (workspace == nullptr) a[1] = 0;
        session.valid = n::call(n::OP_ASYNC_SESSION, a, 13, file, line) != 0;
    } else {
        n::at(file, line);
        if (group == auto_group) group = n::tls_block != nullptr ? n::tls_block->block_idx : 0;
        session.valid = !(workspace == nullptr || syncId > 7 || cfg.queue_num == 0 ||
                          cfg.queue_num > SDMA_MAX_CHANNEL || group >= SDMA_MAX_CHANNEL / cfg.queue_num);
    }
    if (session.valid) {
        session.contextGm = workspace;
        session.syncId = syncId;
        session.channelGroupIdx = group;
        session.blockBytes = cfg.block_bytes;
        session.commBlockOffset = cfg.comm_block_offset;
        session.queueNum = cfg.queue_num;
        session.sdmaRuntimeCtx = {};
    }
    return session.valid;
}

// TPUT_ASYNC (which 0) / TGET_ASYNC (which 1) on SDMA: the event's handle (0: nothing posted)
template <int which, typename GD, typename GS, typename Session>
inline uint64_t async_copy(GD& dst, GS& src, const Session& session, const char* file, int line) {
    using TD = std::remove_cv_t<typename GD::RawDType>;
    using TS = std::remove_cv_t<typename GS::RawDType>;
    static_assert(std::is_same_v<TD, TS>, "TPUT_ASYNC/TGET_ASYNC: src/dst element type mismatch");
    const std::string op = which == 0 ? "TPUT_ASYNC" : "TGET_ASYNC";
    n::at(file, line);
    if (!session.valid) n::fail(op + ": the session is not valid (BuildAsyncSession returned false or was not called)");
    if (!flat_1d(src) || !flat_1d(dst)) {
        n::fail(op + ": src and dst must be flat contiguous 1-D tensors (packed layout, single logical line), "
                     "the SDMA path's only layout on a2a3");
    }
    const uint64_t count = elements(src);
    if (elements(dst) < count) n::fail(op + ": dst buffer too small for src data");
    if (count == 0) return 0;  // a2a3: no post, the event of handle 0
    if (n::bridged()) {
        uint64_t a[26];
        tensor12(a, dst);
        tensor12(a + 12, src);
        a[24] = n::addr(&session);
        a[25] = which;
        return static_cast<uint64_t>(n::call(n::OP_ASYNC, a, 26, file, line));
    }
    const uint64_t off = session.commBlockOffset;
    if (off % sizeof(TS) != 0) {
        n::fail(op + ": the session's commBlockOffset (" + std::to_string(off) + " bytes) is not a multiple of the " +
                std::to_string(sizeof(TS)) + "-byte element");
    }
    const uint64_t seq = ++session.sdmaRuntimeCtx.nextPostId;
    n::dma_post(reinterpret_cast<unsigned char*>(dst.data()) + off, reinterpret_cast<const unsigned char*>(src.data()) + off,
                count * sizeof(TS), &session, seq);
    return seq;
}

// AsyncEvent::Wait (test false) / Test (test true) of an SDMA copy: true once it has landed
template <typename Session>
inline bool async_done(uint64_t handle, const Session& session, bool test, const char* file, int line) {
    if (handle == 0) return true;
    if (n::bridged()) {
        uint64_t a[1] = {handle};
        return n::call(test ? n::OP_ASYNC_TEST : n::OP_ASYNC_WAIT, a, 1, file, line) != 0 || !test;
    }
    n::at(file, line);
    n::dma_land(&session, handle);  // the engine has finished it (a Test that looks lands it too)
    return true;
}

}  // namespace pto_isa
}  // namespace shmcomm
