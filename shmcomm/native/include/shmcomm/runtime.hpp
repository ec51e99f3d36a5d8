// shmcomm's native runtime: the C view of a block (filled by shmcomm.native) and what every
// instruction needs from it: the bridge call, window lookup, futex wake, the registered wait.
// Free of PTO types, so both shmcomm/pto.hpp and the shadow of a pto-isa checkout build on it.
#pragma once

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>
#include <type_traits>

#include <linux/futex.h>
#include <sched.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

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
    OP_LOAD, OP_STORE, OP_PUT, OP_GET, OP_SYNCALL, OP_ST_ATOMIC, OP_WAIT_EXPIRED, OP_ASYNC, OP_ASYNC_WAIT, OP_ASYNC_TEST,
    OP_ASYNC_SESSION = 19, OP_COLLECTIVE = 20
};

constexpr uint64_t UB_BYTES = 192 * 1024;  // a block's UB, as on A2/A3

// The instruction a block is at. `pc`: where in the kernel's code an instruction whose file and
// line name a library's header (pto-isa's public wrappers pass none of their caller's) was
// called from, resolved to the user's line (DWARF inline info) only when a report needs it;
// `next_pc`: such an instruction's PC, taken by its next `at`.
struct Site {
    const char* file;
    int line;
    const void* pc;
    const void* next_pc;
};

// The unwinding of a block whose Python instruction raised: caught by the trampoline.
struct PythonRaised {};

inline thread_local shmcomm_block* tls_block = nullptr;
inline thread_local Site tls_site = {"", 0, nullptr, nullptr};
alignas(64) inline thread_local unsigned char tls_ub[UB_BYTES];
inline thread_local uint64_t tls_ub_top = UB_BYTES;  // unassigned tiles are placed from the top
// pending set_flag events (eager): word = source pipe, bit = destination pipe * 8 + event, so
// (PIPE_M -> PIPE_MTE1, EVENT_ID0) and (PIPE_MTE2 -> PIPE_MTE1, EVENT_ID0) are two events, as on a2a3
inline thread_local uint64_t tls_flags[8] = {};

inline void at(const char* file, int line) {
    Site& s = tls_site;
    if (s.next_pc != nullptr || s.file != file || s.line != line) {  // (the same site again keeps its PC)
        s.pc = s.next_pc;
        s.next_pc = nullptr;
    }
    s.file = file;
    s.line = line;
}

// Called first thing by an instruction that a library's wrapper calls with the wrapper's own
// file and line (the pto-isa shadow's *_IMPL): the PC here, inlined into the user's code, whose
// DWARF inline chain names the user's line. One instruction and a store: eager pays nothing more.
__attribute__((always_inline)) inline void mark_pc() {
    const void* pc;
#if defined(__x86_64__)
    asm volatile("lea 0(%%rip), %0" : "=r"(pc));
#elif defined(__aarch64__)
    asm volatile("adr %0, ." : "=r"(pc));
#else
    pc = nullptr;
#endif
    tls_site.next_pc = pc;
}

// The `file` the bridge passes for a site with a PC: "\x01<pc hex>\x01<file>" (bridge.py
// resolves it to the user's file and line, once per site).
inline const char* site_file(const char* file, char* buf, std::size_t len) {
    const void* pc = tls_site.pc;
    if (pc == nullptr || tls_site.file != file) return file;
    std::snprintf(buf, len, "\x01%llx\x01%s", static_cast<unsigned long long>(reinterpret_cast<uintptr_t>(pc)), file);
    return buf;
}

// -- the eager DMA engine: asynchronous copies posted and not yet landed (per block) --------
//
// A copy lands when its event's Wait (or a true Test) asks, every earlier one of its session
// with it, and at the kernel's end at the latest; never at issue. Its source is read then.
struct PendingCopy {
    void* dst;
    const void* src;
    uint64_t bytes;
    const void* session;
    uint64_t seq;
};

constexpr int MAX_PENDING_COPIES = 256;
inline thread_local PendingCopy tls_dma[MAX_PENDING_COPIES];
inline thread_local int tls_dma_n = 0;

// land the pending copies of `session` up to post `seq` (every session's: session nullptr)
inline void dma_land(const void* session, uint64_t seq) {
    int k = 0;
    for (int i = 0; i < tls_dma_n; ++i) {
        PendingCopy& c = tls_dma[i];
        if ((session == nullptr || c.session == session) && c.seq <= seq) {
            std::memcpy(c.dst, c.src, c.bytes);
        } else {
            tls_dma[k++] = c;
        }
    }
    tls_dma_n = k;
    std::atomic_thread_fence(std::memory_order_seq_cst);
}

inline bool bridged() { return tls_block != nullptr && tls_block->bridged != 0; }

inline int64_t call(int32_t code, const uint64_t* args, int32_t n, const char* file, int line) {
    at(file, line);
    if (tls_block == nullptr || tls_block->op == nullptr) {
        throw std::runtime_error("shmcomm: this instruction runs only inside a kernel launched by rt.launch");
    }
    char buf[512];
    int64_t rc = tls_block->op(code, args, n, site_file(file, buf, sizeof buf), line);
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
#ifdef __FLT16_MAX__
    else if constexpr (std::is_same_v<T, _Float16>) return 11;  // pto-isa's CPU `half`
#endif
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

// post a copy to the eager DMA engine; with its queue full, the oldest one lands first (the
// engine may finish a copy at any time after its issue)
inline void dma_post(void* dst, const void* src, uint64_t bytes, const void* session, uint64_t seq) {
    if (tls_dma_n == MAX_PENDING_COPIES) {
        const PendingCopy& c = tls_dma[0];
        dma_land(c.session, c.seq);
    }
    tls_dma[tls_dma_n++] = {dst, src, bytes, session, seq};
}

// -- signal words: what the eager TNOTIFY / TWAIT / TTEST share -----------------------------
//
// A signal S is rows x cols int32 words: S has `ptr`, `rows()`, `cols()`, `at(r, c)`.

inline bool holds(int32_t cur, int32_t value, int32_t cmp) {  // PTO's WaitCmp codes
    switch (cmp) {
        case 0: return cur == value;
        case 1: return cur != value;
        case 2: return cur > value;
        case 3: return cur >= value;
        case 4: return cur < value;
        case 5: return cur <= value;
    }
    return false;
}

template <typename S>
inline bool sweep(const S& sig, int32_t value, int32_t cmp) {
    for (int64_t r = 0; r < sig.rows(); ++r) {
        for (int64_t c = 0; c < sig.cols(); ++c) {
            if (!holds(__atomic_load_n(sig.at(r, c), __ATOMIC_ACQUIRE), value, cmp)) return false;
        }
    }
    return true;
}

// -- where each native block waits: the stuck report's "waits at" line ----------------------
//
// A process-wide table (one per kernel library) the registered wait fills while it waits, and
// the stack-dump signal's handler (entry.hpp) prints into the rank's dump beside Python's
// stacks, where a native block has no frame of the user's. `pc`: the instruction's PC when its
// file is a library's header (resolved by the report, not here).
struct WaitNote {
    int32_t used;  // 0 free, 2 being filled, 1 a block waits at this site
    int32_t block;
    int32_t line;
    const char* file;
    const void* pc;
};
constexpr int WAIT_NOTES = 256;
inline WaitNote wait_notes[WAIT_NOTES];

inline WaitNote* note_wait(const shmcomm_block* b) {
    for (WaitNote& w : wait_notes) {
        int32_t free_ = 0;
        if (__atomic_load_n(&w.used, __ATOMIC_RELAXED) == 0 &&
            __atomic_compare_exchange_n(&w.used, &free_, 2, false, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) {
            w.block = static_cast<int32_t>(b->block_idx);
            w.line = tls_site.line;
            w.file = tls_site.file;
            w.pc = tls_site.pc;
            __atomic_store_n(&w.used, 1, __ATOMIC_RELEASE);
            return &w;
        }
    }
    return nullptr;  // (more waiters than notes: the report names fewer lines)
}

inline void end_wait_note(WaitNote* w) {
    if (w != nullptr) __atomic_store_n(&w->used, 0, __ATOMIC_RELEASE);
}

// shmcomm's registered wait, natively: publish the wait on the agent's control line (the
// deadlock watch and the stuck report read it), yield for a while, then sleep on the word's
// futex, counted in its sleeper bucket so TNOTIFY wakes it; re-check the abort word and the
// deadline at every pass. 0: satisfied; 1: the run aborted; 2: timed out.
template <typename S>
inline int registered_wait(const S& sig, int32_t value, int32_t cmp, const uint64_t* a) {
    namespace n = shmcomm::native;
    shmcomm_block* b = n::tls_block;
    int32_t* line = reinterpret_cast<int32_t*>(b->line);
    const int64_t start = n::mono_ns();
    auto now_ms = [b]() { return static_cast<int32_t>(((n::mono_ns() - b->t0_ns) / 1000000) & 0x7fffffff); };
    int32_t rank;
    uint64_t off;
    n::locate(sig.ptr, &rank, &off);
    int32_t seq = (__atomic_load_n(&line[1], __ATOMIC_RELAXED) + 1) & 0x7fffffff;
    const int32_t fields[11] = {seq, rank, static_cast<int32_t>(off & 0xffffffffu), static_cast<int32_t>(off >> 32),
                                static_cast<int32_t>(a[1]), static_cast<int32_t>(a[2]), static_cast<int32_t>(a[3]),
                                cmp, value, now_ms(), 0};
    for (int i = 0; i < 11; ++i) __atomic_store_n(&line[1 + i], fields[i], __ATOMIC_RELAXED);
    __atomic_store_n(&line[0], 2, __ATOMIC_SEQ_CST);  // WAITING, after the fields
    int32_t* active = reinterpret_cast<int32_t*>(b->active_word);
    WaitNote* note = note_wait(b);
    bool asleep = false;
    int result = 0;
    int64_t sleep_ns = 500000, last = start;
    // yield first only while every runnable agent has a core (else a yield hands whole time
    // slices to others, while a futex sleeper is woken, and run, by the notify it waits for)
    const int64_t yield_until = __atomic_load_n(active, __ATOMIC_RELAXED) <= b->ncores ? start + 2000000 : start;
    while (true) {
        if (sweep(sig, value, cmp)) break;
        if (*b->abort_word != 0) { result = 1; break; }
        int64_t t = n::mono_ns();
        if (t - start > b->timeout_ns) { result = 2; break; }
        if (t < yield_until && t - last < 500000) {  // a yield that kept us away long: sleep
            last = t;
            sched_yield();
            continue;
        }
        last = t;
        if (!asleep) {  // a futex sleeper is not runnable: others may spin
            __atomic_fetch_add(active, -1, __ATOMIC_SEQ_CST);
            asleep = true;
        }
        // the first unsatisfied word, as the sweep found it
        int32_t* word = nullptr;
        int32_t cur = 0;
        for (int64_t r = 0; r < sig.rows() && word == nullptr; ++r) {
            for (int64_t c = 0; c < sig.cols(); ++c) {
                int32_t v = __atomic_load_n(sig.at(r, c), __ATOMIC_SEQ_CST);
                if (!holds(v, value, cmp)) { word = sig.at(r, c); cur = v; break; }
            }
        }
        if (word == nullptr) continue;
        int32_t* sleepers = n::sleepers_of(word);
        if (sleepers == nullptr) { sched_yield(); continue; }
        __atomic_fetch_add(sleepers, 1, __ATOMIC_SEQ_CST);
        if (__atomic_load_n(word, __ATOMIC_SEQ_CST) == cur) {  // a notify after our count wakes us
            int64_t left = std::min<int64_t>(sleep_ns, b->timeout_ns - (t - start));
            timespec ts{static_cast<time_t>(left / 1000000000), static_cast<long>(left % 1000000000)};
            syscall(SYS_futex, word, FUTEX_WAIT, cur, &ts, nullptr, 0);
        }
        __atomic_fetch_add(sleepers, -1, __ATOMIC_SEQ_CST);
        sleep_ns = std::min<int64_t>(sleep_ns * 2, 20000000);
    }
    if (asleep) __atomic_fetch_add(active, 1, __ATOMIC_SEQ_CST);
    end_wait_note(note);
    __atomic_store_n(&line[13], now_ms(), __ATOMIC_RELAXED);  // A_SINCE
    __atomic_store_n(&line[0], 1, __ATOMIC_SEQ_CST);          // RUNNING
    return result;
}


// TNOTIFY on a window word: an atomic add (op 0) or store (op 1), then wake its futex sleepers.
inline void notify_word(int32_t* w, int32_t value, int32_t op) {
    if (op == 0) {
        __atomic_fetch_add(w, value, __ATOMIC_SEQ_CST);
    } else {
        __atomic_exchange_n(w, value, __ATOMIC_SEQ_CST);  // a read-modify-write orders the sleeper read
    }
    wake(w);
}

// The eager TWAIT: a short poll, then shmcomm's registered wait (futex sleep, abort, timeout);
// `dense` says the registered wait can describe the signal, `fill(a)` writes the bridge's six
// argument words (rows x cols at a row stride) when shmcomm's Python wait has to take over.
template <typename S, typename F>
inline void wait_eager(const S& sig, int32_t value, int32_t cmp, bool dense, F fill, const char* file, int line) {
    if (sweep(sig, value, cmp)) return;
    int spin = tls_block != nullptr ? tls_block->spin : 0;
    for (int i = 0; i < spin; ++i) {
        for (int k = 0; k < 16; ++k) cpu_relax();
        if ((i & 15) == 15) sched_yield();
        if (sweep(sig, value, cmp)) return;
        if (tls_block != nullptr && *tls_block->abort_word != 0) break;
    }
    uint64_t a[6];
    fill(a);
    if (tls_block != nullptr && tls_block->line != 0 && dense) {
        int r = registered_wait(sig, value, cmp, a);
        if (r == 0) return;
        if (r == 2) {  // timed out: shmcomm raises WaitTimeout naming the wait
            call(OP_WAIT_EXPIRED, a, 6, file, line);
            return;
        }
    }
    call(OP_WAIT, a, 6, file, line);  // shmcomm's wait (and its Aborted when the run aborts)
}

// pipe_barrier / dsb / dcci of both APIs: the bridged instruction when a model sees the block's
// instructions; in eager mode every pipe's work is done, so a full fence is all they mean
inline void bridge_or_fence(int32_t code, const uint64_t* a, int32_t n_args, const char* file, int line) {
    if (bridged()) {
        call(code, a, n_args, file, line);
    } else {
        at(file, line);
        std::atomic_thread_fence(std::memory_order_seq_cst);
    }
}

// set_flag / wait_flag of both APIs (shmcomm's own and the pto-isa shadow): the bridged
// instruction when a model sees the block's instructions, else the block's pending-event bits
inline uint64_t flag_bit(int dst, int ev) { return uint64_t{1} << (dst % 8 * 8 + ev % 8); }

inline uint64_t& flag_word(int src) { return tls_flags[static_cast<unsigned>(src) % 8]; }

inline void set_flag_at(int src, int dst, int ev, const char* file, int line) {
    if (bridged()) {
        uint64_t a[3] = {static_cast<uint64_t>(src), static_cast<uint64_t>(dst), static_cast<uint64_t>(ev)};
        call(OP_SET_FLAG, a, 3, file, line);
        return;
    }
    at(file, line);
    flag_word(src) |= flag_bit(dst, ev);
}

inline void wait_flag_at(int src, int dst, int ev, const char* file, int line) {
    if (bridged()) {
        uint64_t a[3] = {static_cast<uint64_t>(src), static_cast<uint64_t>(dst), static_cast<uint64_t>(ev)};
        call(OP_WAIT_FLAG, a, 3, file, line);
        return;
    }
    at(file, line);
    uint64_t bit = flag_bit(dst, ev);
    if (tls_block != nullptr && !(flag_word(src) & bit)) {  // (outside a shmcomm launch: nothing to check)
        fail("wait_flag: no set_flag is pending for this event (pipes " + std::to_string(src) + " -> " +
             std::to_string(dst) + ", EVENT_ID" + std::to_string(ev) + "); on hardware the pipe would stall forever");
    }
    flag_word(src) &= ~bit;
}
}  // namespace native
}  // namespace shmcomm
