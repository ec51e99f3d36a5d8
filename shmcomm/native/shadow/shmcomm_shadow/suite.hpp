// shmcomm's harness for pto-isa's CPU comm suites (written by shmcomm; no pto-isa code).
//
// pto-isa's own harness (tests/cpu/comm/st/testcase/common.hpp) runs the ranks of a test one
// after another on one thread and stops at the first rank that passes. Under shmcomm every rank
// is a rank process running the whole gtest binary (SPMD, as under mpirun), its test bodies on
// one shmcomm block of that process, over shmcomm's shared windows:
//   * a harness call over n ranks (ForkAndRunWithHcclRootInfo, RunUrmaTestMpiLaunch) runs the
//     per-rank function on ranks < n only; then every rank of the run publishes its result and
//     they all return true only if every one of the n passed (so every rank's gtest takes the
//     same path and their collective calls stay matched);
//   * the host barriers (HcclHostBarrier, CommMpiBarrier) are TNOTIFY / TWAIT over signal words
//     of the run, through the shadow's instructions: the deadlock watch, aborts and the observed
//     modes see them like any kernel wait.
// Included by the shadow's cpu_stub.hpp when a suite is built (SHMCOMM_PTO_ISA_SUITE), so the
// harness macros of pto-isa's cpu_stub.hpp (SKIP_IF_RANKS_LT, HcclHostBarrier) are ours in
// every file of the suite.
#pragma once

#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>

#include "shmcomm/runtime.hpp"
#include "shmcomm_shadow/comm.hpp"

namespace shmcomm {
namespace suite {

namespace n = shmcomm::native;

constexpr int MAX_RANKS = 64;
constexpr int LINE_WORDS = 16;  // one 64-byte line
// the run's suite words (rt.signal_region): a barrier counter per peer, then a result line per rank
constexpr int SYNC_WORDS = MAX_RANKS + MAX_RANKS * LINE_WORDS;
constexpr int NOT_RUN = 2;  // a rank outside the call's ranks

// one signal word, as the shadow's instructions take a signal
struct Word {
    using DType = int32_t;
    using RawDType = int32_t;
    int32_t* p;
    int32_t* data() { return p; }
    int64_t GetShape(int) const { return 1; }
    int64_t GetStride(int) const { return 1; }
};

struct State {
    int rank = -1;
    int nranks = 0;              // ranks of the run
    uint8_t* area = nullptr;     // this rank's suite window (a region of its shmcomm window)
    uint64_t area_bytes = 0;
    uint64_t used = 0;           // bytes of it the current test allocated (zeroed at the next)
    int32_t* sync = nullptr;     // this rank's suite words
    uint32_t pair[MAX_RANKS] = {};  // barriers done with each peer
    int group = 0;               // ranks of the harness call under way (0: none)
    bool a5 = false;             // Config.target == "a5": the URMA engine exists
    std::string calls;           // this test's harness calls, as JSON (rank 0 reports them)
};
inline State g;

[[noreturn]] inline void fail(const std::string& what) { n::fail(what); }

inline shmcomm_block* block() {
    shmcomm_block* b = n::tls_block;
    if (b == nullptr || g.sync == nullptr) {
        fail("pto-isa suite harness: runs only inside shmcomm's suite runner (python -m shmcomm suite)");
    }
    return b;
}

// the same offset in rank pe's window as `local` in this rank's
template <typename T>
inline T* remote(T* local, int pe) {
    shmcomm_block* b = block();
    if (pe < 0 || pe >= b->nranks) {
        fail("pto-isa suite harness: rank " + std::to_string(pe) + " is outside the run's " +
             std::to_string(b->nranks) + " ranks");
    }
    const uint64_t a = n::addr(local), mine = b->bases[b->rank];
    if (a < mine || a >= mine + b->win_size) fail("pto-isa suite harness: a pointer outside this rank's window");
    return reinterpret_cast<T*>(b->bases[pe] + (a - mine));
}

// the host barrier over ranks [0, nr): each pair of ranks counts the barriers it shared
inline void barrier(int nr, const char* file, int line) {
    block();
    const int me = g.rank;
    if (me >= nr) return;  // not one of its ranks (a harness call runs nothing on such a rank)
    for (int p = 0; p < nr; ++p) {
        if (p == me) continue;
        ++g.pair[p];
        Word w{remote(g.sync + me, p)};
        shmcomm::pto_isa::notify(w, 1, 0, file, line);  // AtomicAdd
    }
    for (int p = 0; p < nr; ++p) {
        if (p == me) continue;
        Word w{g.sync + p};
        shmcomm::pto_isa::wait(w, static_cast<int32_t>(g.pair[p]), 3, file, line);  // GE
    }
}

// HcclHostBarrier / CommMpiBarrier: the ranks of the harness call under way (else every rank).
// The host runs after its kernels ended (aclrtSynchronizeStream): where a model keeps pipe work
// queued or remote stores unseen (hazard, schedule), they are drained and published first, as
// a kernel's end does; eager has nothing pending.
inline void host_barrier(const char* file, int line) {
    if (n::bridged()) {
        uint64_t all[1] = {6};  // PIPE_ALL
        n::call(n::OP_PIPE_BARRIER, all, 1, file, line);
        uint64_t ddr[1] = {0};  // DSB_DDR
        n::call(n::OP_DSB, ddr, 1, file, line);
    }
    barrier(g.group > 0 ? g.group : g.nranks, file, line);
}

// A fresh window for a test (TestContext::Init, UrmaTestContext::Setup): what the last test
// allocated is zeroed, then the call's ranks meet, so nobody writes into a window not yet cleared.
inline void fresh_window(const char* file, int line) {
    block();
    std::memset(g.area, 0, g.used);
    g.used = 0;
    host_barrier(file, line);
}

// bytes [offset, offset + bytes) of the window at `base` are in use (bounds-checked)
inline void use(uint64_t base, uint64_t offset, uint64_t bytes, const char* what, const char* file, int line) {
    const uint64_t mine = n::addr(g.area);
    if (base < mine || base >= mine + g.area_bytes) return;  // not this rank's suite window
    const uint64_t end = base - mine + offset + bytes;
    if (end > g.area_bytes) {
        n::at(file, line);
        fail(std::string(what) + ": " + std::to_string(end) + " bytes of the suite window needed, it holds " +
             std::to_string(g.area_bytes) + ": raise --window-bytes (python -m shmcomm suite)");
    }
    if (end > g.used) g.used = end;
}

// a JSON string
inline std::string quoted(const std::string& s) {
    std::string out = "\"";
    for (char c : s) {
        if (c == '"' || c == '\\') out += '\\';
        if (static_cast<unsigned char>(c) < 0x20) continue;
        out += c;
    }
    return out + "\"";
}

inline std::string rank_list(const int* res, int nr, int want) {
    std::string s;
    for (int r = 0; r < nr; ++r) {
        if (res[r] != want) continue;
        s += (s.empty() ? "" : ", ") + std::to_string(r);
    }
    return s;
}

// Every rank of the run publishes its result (1 passed, 0 failed, NOT_RUN), meets the others,
// reads them all, meets again (nobody publishes the next call's before all have read this one's).
// Rank 0 says which ranks failed and whether pto-isa's harness would have passed the call.
inline bool agree(const char* what, int nr, int mine, const char* file, int line) {
    block();
    int32_t* slot = g.sync + MAX_RANKS + g.rank * LINE_WORDS;
    Word w{slot};
    shmcomm::pto_isa::notify(w, mine, 1, file, line);  // Set
    barrier(g.nranks, file, line);
    int res[MAX_RANKS];
    for (int r = 0; r < g.nranks; ++r) {
        Word other{remote(g.sync + MAX_RANKS + r * LINE_WORDS, r)};
        if (n::bridged()) {  // through the instructions: the value the models show
            res[r] = shmcomm::pto_isa::test(other, 1, 0, file, line) ? 1
                     : shmcomm::pto_isa::test(other, 0, 0, file, line) ? 0 : NOT_RUN;
        } else {
            res[r] = __atomic_load_n(other.p, __ATOMIC_ACQUIRE);
        }
    }
    barrier(g.nranks, file, line);
    bool all = nr > 0, any = false;
    int first = -1;
    for (int r = 0; r < nr; ++r) {
        all = all && res[r] == 1;
        if (res[r] == 1 && first < 0) first = r;
        any = any || res[r] == 1;
    }
    if (g.rank == 0) {
        std::string ranks;
        for (int r = 0; r < nr; ++r) ranks += (r ? "," : "") + std::to_string(res[r]);
        g.calls += std::string(g.calls.empty() ? "" : ",") + "{\"harness\":\"" + what + "\",\"nranks\":" +
                   std::to_string(nr) + ",\"ranks\":[" + ranks + "],\"sequential_passes\":" +
                   (any ? "true" : "false") + ",\"line\":" + quoted(std::string(file) + ":" + std::to_string(line)) + "}";
        if (!all) {
            std::printf("[shmcomm] %s over %d ranks: rank(s) %s failed", what, nr, rank_list(res, nr, 0).c_str());
            if (any) std::printf(", rank(s) %s passed", rank_list(res, nr, 1).c_str());
            std::printf("\n");
            if (any) {
                std::printf("[shmcomm] pto-isa's sequential harness (`res = res || perRankFn(i)`) accepts this "
                            "outcome: it returns true once one rank passes (here rank %d) and never fails the "
                            "call for the others\n", first);
            }
            std::fflush(stdout);
        }
    }
    return all;
}

// A harness call over nr ranks: `fn(rank)` on ranks < nr, then agree().
template <typename F>
inline bool run_ranks(const char* what, int nr, F&& fn, const char* file, int line) {
    block();
    if (nr <= 0) return false;  // as pto-isa's harness
    if (nr > g.nranks) {
        if (g.rank == 0) {
            std::printf("[shmcomm] %s over %d ranks: the run has %d ranks (--nranks)\n", what, nr, g.nranks);
            std::fflush(stdout);
        }
        return false;
    }
    int mine = NOT_RUN;
    if (g.rank < nr) {
        g.group = nr;
        mine = fn(g.rank) ? 1 : 0;
        g.group = 0;
    }
    return agree(what, nr, mine, file, line);
}

}  // namespace suite
}  // namespace shmcomm

// pto-isa's cpu_stub.hpp defines these two empty; the suites' tests and host code call them
#undef SKIP_IF_RANKS_LT
#define SKIP_IF_RANKS_LT(nr)                                                                             \
    do {                                                                                                 \
        if (::shmcomm::suite::g.nranks < (nr))                                                           \
            GTEST_SKIP() << "needs " << (nr) << " ranks, the run has " << ::shmcomm::suite::g.nranks; \
    } while (0)
#undef HcclHostBarrier
#define HcclHostBarrier(comm, stream) ::shmcomm::suite::host_barrier(__FILE__, __LINE__)
