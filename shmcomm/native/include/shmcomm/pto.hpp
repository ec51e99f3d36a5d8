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

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <type_traits>

#include <linux/futex.h>
#include <sched.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

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

// What a block thread's instructions need from shmcomm (filled by shmcomm.native, C layout).
extern "C" struct shmcomm_block {
    uint32_t block_idx;
    uint32_t block_num;
    int32_t rank;
    int32_t nranks;
    int32_t bridged;           // 1: every instruction calls `op` (hazard, schedule, race detector)
    int32_t spin;              // polls of a failed TWAIT before it hands over to shmcomm's wait
    int32_t set_read_add;      // Config.set_semantics == "read-add": a Set goes through shmcomm
    int32_t ncores;            // cores the run may use (the registered wait yields only while
                               // every runnable agent has one)
    // the registered wait (shmcomm/core/waiting.py's protocol): the agent's control line (0: let
    // shmcomm's Python wait do it), the run's runnable-agent count, the control segment's clock
    // origin (CLOCK_MONOTONIC ns) and the wait timeout (ns)
    uint64_t line;
    uint64_t active_word;
    int64_t t0_ns;
    int64_t timeout_ns;
    const volatile int32_t* abort_word;
    uint64_t win_size;         // bytes of a window (signal matrix + heap)
    const uint64_t* bases;     // each rank's window base in this process
    // calls shmcomm's Python instruction `code` with `n` words of arguments; returns >= 0, or
    // -1 when it raised (the exception is kept in Python and re-raised after the kernel unwinds)
    int64_t (*op)(int32_t code, const uint64_t* args, int32_t n, const char* file, int32_t line);
};

namespace shmcomm {
namespace native {

// instruction codes of the bridge (shmcomm/native/bridge.py keeps the same table)
enum Op : int32_t {
    OP_NOTIFY = 1, OP_WAIT, OP_TEST, OP_PIPE_BARRIER, OP_SET_FLAG, OP_WAIT_FLAG, OP_DSB, OP_DCCI,
    OP_LOAD, OP_STORE, OP_PUT, OP_GET, OP_SYNCALL, OP_ST_ATOMIC, OP_WAIT_EXPIRED, OP_ASYNC, OP_ASYNC_WAIT, OP_ASYNC_TEST
};

constexpr uint64_t UB_BYTES = 192 * 1024;  // a block's UB, as on A2/A3

struct Site {
    const char* file;
    int line;
};

// The unwinding of a block whose Python instruction raised: caught by the trampoline.
struct PythonRaised {};

inline thread_local shmcomm_block* tls_block = nullptr;
inline thread_local Site tls_site = {"", 0};
alignas(64) inline thread_local unsigned char tls_ub[UB_BYTES];
inline thread_local uint64_t tls_ub_top = UB_BYTES;  // unassigned tiles are placed from the top
inline thread_local uint64_t tls_flags = 0;          // pending set_flag events (eager)

inline void at(const char* file, int line) { tls_site = {file, line}; }

inline bool bridged() { return tls_block != nullptr && tls_block->bridged != 0; }

inline int64_t call(int32_t code, const uint64_t* args, int32_t n, const char* file, int line) {
    at(file, line);
    if (tls_block == nullptr || tls_block->op == nullptr) {
        throw std::runtime_error("shmcomm: this instruction runs only inside a kernel launched by rt.launch");
    }
    int64_t rc = tls_block->op(code, args, n, file, line);
    if (rc < 0) {
        throw PythonRaised{};
    }
    return rc;
}

template <typename T> constexpr int32_t dtype_code() {
    // numpy kinds: shmcomm/native/bridge.py maps them back
    if constexpr (std::is_same_v<T, float>) return 1;
    else if constexpr (std::is_same_v<T, double>) return 2;
    else if constexpr (std::is_same_v<T, int8_t>) return 3;
    else if constexpr (std::is_same_v<T, int16_t>) return 4;
    else if constexpr (std::is_same_v<T, int32_t>) return 5;
    else if constexpr (std::is_same_v<T, int64_t>) return 6;
    else if constexpr (std::is_same_v<T, uint8_t>) return 7;
    else if constexpr (std::is_same_v<T, uint16_t>) return 8;
    else if constexpr (std::is_same_v<T, uint32_t>) return 9;
    else if constexpr (std::is_same_v<T, uint64_t>) return 10;
    else return 0;
}

inline uint64_t addr(const void* p) { return static_cast<uint64_t>(reinterpret_cast<uintptr_t>(p)); }

// -- the shared-memory transport's protocol (shmcomm/transports/shm: sleeper buckets) -------

constexpr uint64_t SLEEPER_BUCKETS = 16;

inline int32_t* sleepers_of(const void* word) {
    shmcomm_block* b = tls_block;
    if (b == nullptr) return nullptr;
    uint64_t a = addr(word);
    for (int32_t r = 0; r < b->nranks; ++r) {
        uint64_t base = b->bases[r];
        if (a >= base && a < base + b->win_size) {
            uint64_t w = (a - base) >> 2;
            uint64_t bucket = (w ^ (w >> 4)) % SLEEPER_BUCKETS;
            return reinterpret_cast<int32_t*>(base + b->win_size + 4 * bucket);
        }
    }
    return nullptr;  // not a window word: nobody can sleep on it
}

inline void wake(int32_t* word) {
    int32_t* sleepers = sleepers_of(word);
    if (sleepers == nullptr || __atomic_load_n(sleepers, __ATOMIC_SEQ_CST) == 0) return;
    syscall(SYS_futex, word, FUTEX_WAKE, 0x7fffffff, nullptr, nullptr, 0);
}

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    asm volatile("yield" ::: "memory");
#endif
}

inline int64_t mono_ns() {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

// where a window word lives: (rank, byte offset), or rank -1
inline void locate(const void* word, int32_t* rank, uint64_t* offset) {
    *rank = -1;
    *offset = 0;
    shmcomm_block* b = tls_block;
    uint64_t a = addr(word);
    for (int32_t r = 0; b != nullptr && r < b->nranks; ++r) {
        if (a >= b->bases[r] && a < b->bases[r] + b->win_size) {
            *rank = r;
            *offset = a - b->bases[r];
            return;
        }
    }
}

[[noreturn]] inline void fail(const std::string& what) { throw std::runtime_error(what); }

}  // namespace native
}  // namespace shmcomm

// -- pipes, events, fences: PTO's intrinsics --------------------------------------------------

enum pipe_t : int32_t { PIPE_S = 0, PIPE_V, PIPE_MTE1, PIPE_MTE2, PIPE_MTE3, PIPE_M, PIPE_ALL, PIPE_FIX };
enum event_t : int32_t { EVENT_ID0 = 0, EVENT_ID1, EVENT_ID2, EVENT_ID3, EVENT_ID4, EVENT_ID5, EVENT_ID6, EVENT_ID7 };
enum mem_dsb_t : int32_t { DSB_ALL = 0, DSB_DDR, DSB_UB };
enum cache_line_t : int32_t { SINGLE_CACHE_LINE = 0, ENTIRE_DATA_CACHE };
enum dcci_dst_t : int32_t { CACHELINE_OUT = 0 };

inline void pipe_barrier(pipe_t pipe, const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
    namespace n = shmcomm::native;
    if (n::bridged()) {
        uint64_t a[1] = {static_cast<uint64_t>(pipe)};
        n::call(n::OP_PIPE_BARRIER, a, 1, file, line);
    } else {
        n::at(file, line);
        std::atomic_thread_fence(std::memory_order_seq_cst);
    }
}

inline uint64_t shmcomm_flag_bit(pipe_t src, pipe_t dst, event_t ev) {
    return uint64_t{1} << ((static_cast<int>(src) * 8 + static_cast<int>(dst)) % 8 * 8 + static_cast<int>(ev) % 8);
}

inline void set_flag(pipe_t src, pipe_t dst, event_t ev, const char* file = __builtin_FILE(),
                     int line = __builtin_LINE()) {
    namespace n = shmcomm::native;
    if (n::bridged()) {
        uint64_t a[3] = {static_cast<uint64_t>(src), static_cast<uint64_t>(dst), static_cast<uint64_t>(ev)};
        n::call(n::OP_SET_FLAG, a, 3, file, line);
        return;
    }
    n::at(file, line);
    n::tls_flags |= shmcomm_flag_bit(src, dst, ev);
}

inline void wait_flag(pipe_t src, pipe_t dst, event_t ev, const char* file = __builtin_FILE(),
                      int line = __builtin_LINE()) {
    namespace n = shmcomm::native;
    if (n::bridged()) {
        uint64_t a[3] = {static_cast<uint64_t>(src), static_cast<uint64_t>(dst), static_cast<uint64_t>(ev)};
        n::call(n::OP_WAIT_FLAG, a, 3, file, line);
        return;
    }
    n::at(file, line);
    uint64_t bit = shmcomm_flag_bit(src, dst, ev);
    if (!(n::tls_flags & bit)) {
        n::fail("wait_flag: no set_flag is pending for this event (pipes " + std::to_string(src) + " -> " +
                std::to_string(dst) + ", EVENT_ID" + std::to_string(ev) + "); on hardware the pipe would stall forever");
    }
    n::tls_flags &= ~bit;
}

inline void dsb(mem_dsb_t mode = DSB_DDR, const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
    namespace n = shmcomm::native;
    if (n::bridged()) {
        uint64_t a[1] = {static_cast<uint64_t>(mode)};
        n::call(n::OP_DSB, a, 1, file, line);
    } else {
        n::at(file, line);
        std::atomic_thread_fence(std::memory_order_seq_cst);
    }
}

template <typename T = void>
inline void dcci(const volatile T* ptr = nullptr, cache_line_t mode = SINGLE_CACHE_LINE, dcci_dst_t dst = CACHELINE_OUT,
                 const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
    namespace n = shmcomm::native;
    (void)ptr;
    if (n::bridged()) {
        uint64_t a[2] = {static_cast<uint64_t>(mode), static_cast<uint64_t>(dst)};
        n::call(n::OP_DCCI, a, 2, file, line);
    } else {
        n::at(file, line);
        std::atomic_thread_fence(std::memory_order_seq_cst);
    }
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
