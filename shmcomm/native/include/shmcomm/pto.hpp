// shmcomm's C++ kernel API: PTO's names (pto-isa a2a3 spelling and the seed's), run on a CPU.
//
// A kernel written for the NPU compiles against this header unchanged and runs on shmcomm's
// ranks (processes) and blocks (threads). Eager mode runs every instruction natively: signal
// words are real atomics on the same shared words Python kernels use, and a TWAIT that has to
// wait follows shmcomm's wait protocol natively (it publishes the wait for the deadlock watch,
// sleeps on the same futex, honours the abort flag and the wait timeout). In hazard and schedule mode
// (and under the race detector) every instruction calls shmcomm's own Python instruction on the
// same bytes, so the models see it; each instruction records the kernel's file:line at its call.
//
// Plain loads and stores through raw pointers (`p[i] = v`, `while (*flag == 0)`) are invisible
// to every model: only instructions are seen.
#pragma once

#include "runtime.hpp"


#ifndef AICORE
#define AICORE
#endif
#ifndef __aicore__
#define __aicore__
#endif
#ifndef __gm__
#define __gm__
#endif
#ifndef __global__
#define __global__
#endif
#ifndef __ubuf__
#define __ubuf__
#endif
#ifndef PTO_INST
#define PTO_INST inline
#endif

// -- pipes, events, fences: PTO's intrinsics --------------------------------------------------

enum pipe_t : int32_t { PIPE_S = 0, PIPE_V, PIPE_MTE1, PIPE_MTE2, PIPE_MTE3, PIPE_M, PIPE_ALL, PIPE_FIX };
enum event_t : int32_t { EVENT_ID0 = 0, EVENT_ID1, EVENT_ID2, EVENT_ID3, EVENT_ID4, EVENT_ID5, EVENT_ID6, EVENT_ID7 };
enum mem_dsb_t : int32_t { DSB_ALL = 0, DSB_DDR, DSB_UB };
enum cache_line_t : int32_t { SINGLE_CACHE_LINE = 0, ENTIRE_DATA_CACHE };
enum dcci_dst_t : int32_t { CACHELINE_OUT = 0 };

inline void pipe_barrier(pipe_t pipe, const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
    const uint64_t a[1] = {static_cast<uint64_t>(pipe)};
    shmcomm::native::bridge_or_fence(shmcomm::native::OP_PIPE_BARRIER, a, 1, file, line);
}

inline void set_flag(pipe_t src, pipe_t dst, event_t ev, const char* file = __builtin_FILE(),
                     int line = __builtin_LINE()) {
    shmcomm::native::set_flag_at(static_cast<int>(src), static_cast<int>(dst), static_cast<int>(ev), file, line);
}

inline void wait_flag(pipe_t src, pipe_t dst, event_t ev, const char* file = __builtin_FILE(),
                      int line = __builtin_LINE()) {
    shmcomm::native::wait_flag_at(static_cast<int>(src), static_cast<int>(dst), static_cast<int>(ev), file, line);
}

inline void dsb(mem_dsb_t mode = DSB_DDR, const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
    const uint64_t a[1] = {static_cast<uint64_t>(mode)};
    shmcomm::native::bridge_or_fence(shmcomm::native::OP_DSB, a, 1, file, line);
}

template <typename T = void>
inline void dcci(const volatile T* ptr = nullptr, cache_line_t mode = SINGLE_CACHE_LINE, dcci_dst_t dst = CACHELINE_OUT,
                 const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
    // the line's address too: the models see this kernel's plain accesses of it only here
    const uint64_t a[3] = {static_cast<uint64_t>(mode), static_cast<uint64_t>(dst),
                           shmcomm::native::addr(const_cast<const T*>(ptr))};
    shmcomm::native::bridge_or_fence(shmcomm::native::OP_DCCI, a, 3, file, line);
}

inline int64_t get_block_idx() {
    auto* b = shmcomm::native::tls_block;
    return b == nullptr ? 0 : static_cast<int64_t>(b->block_idx);
}

inline int64_t get_block_num() {
    auto* b = shmcomm::native::tls_block;
    return b == nullptr ? 1 : static_cast<int64_t>(b->block_num);
}

inline int64_t get_subblockid() { return 0; }

// -- the device context (pto-isa's CommDeviceContext; the seed's DeviceContext) ---------------

constexpr uint32_t HCCL_MAX_RANK_NUM = 64;

struct CommDeviceContext {
    uint64_t workSpace;
    uint64_t workSpaceSize;
    uint32_t rankId;
    uint32_t rankNum;
    uint64_t winSize;
    uint64_t windowsIn[HCCL_MAX_RANK_NUM];
    uint64_t windowsOut[HCCL_MAX_RANK_NUM];
};
using HcclDeviceContext = CommDeviceContext;
using DeviceContext = CommDeviceContext;

// The same offset in rank `pe`'s window (a symmetric heap), as the a2a3 suites' CommRemotePtr.
template <typename T>
inline T* CommRemotePtr(const CommDeviceContext* ctx, T* ptr, int pe) {
    if (ctx == nullptr) shmcomm::native::fail("GetRemotePtr: ctx is null");
    if (pe < 0 || static_cast<uint32_t>(pe) >= ctx->rankNum) {
        shmcomm::native::fail("GetRemotePtr: rank " + std::to_string(pe) + " outside [0, " +
                              std::to_string(ctx->rankNum) + ")");
    }
    uint64_t me = ctx->windowsIn[ctx->rankId];
    uint64_t p = shmcomm::native::addr(ptr);
    if (p < me || p >= me + ctx->winSize) {
        shmcomm::native::fail("GetRemotePtr: the pointer is not in this rank's window");
    }
    return reinterpret_cast<T*>(ctx->windowsIn[pe] + (p - me));
}

template <typename T>
inline T* GetRemotePtr(const CommDeviceContext* ctx, T* ptr, int pe) { return CommRemotePtr(ctx, ptr, pe); }

#include "pto_tensor.hpp"
#include "pto_comm.hpp"

namespace comm = pto::comm;
