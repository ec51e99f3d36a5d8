// shmcomm's stand-in for the harness header of pto-isa's CPU comm suites,
// tests/cpu/comm/st/testcase/common.hpp (written by shmcomm to its names and signatures; no
// pto-isa code). shmcomm's suite runner compiles a suite with its `#include "../common.hpp"`
// pointing here. Every rank is a shmcomm rank process and every window a real shared one:
//   CommRemotePtr       the same offset in rank pe's window (pto-isa's: a scratch buffer)
//   WindowAlloc         the next bytes of the rank's suite window (pto-isa's: malloc)
//   TestContext::Init   the rank's suite window, zeroed for the test, every window's base in
//                       windowsIn[], then the test's ranks meet
//   CommMpiBarrier      the host barrier of the test's ranks (pto-isa's: nothing)
//   ForkAndRunWithHcclRootInfo  perRankFn(rank) on this rank if it is one of the nRanks, then
//                       true only if every one of them passed (pto-isa's: the ranks one after
//                       another, true at the first that passes)
#pragma once

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <iostream>

#include "pto/common/cpu_stub.hpp"
#include "shmcomm_shadow/suite.hpp"

template <typename T>
inline T* CommRemotePtr(CommDeviceContext* ctx, T* localPtr, int pe, const char* file = __builtin_FILE(),
                        int line = __builtin_LINE())
{
    if (pe < 0 || static_cast<uint32_t>(pe) >= ctx->rankNum) {
        shmcomm::native::at(file, line);
        shmcomm::suite::fail("CommRemotePtr: rank " + std::to_string(pe) + " is outside the context's " +
                             std::to_string(ctx->rankNum) + " ranks");
    }
    const uint64_t off = reinterpret_cast<uint64_t>(localPtr) - ctx->windowsIn[ctx->rankId];
    return reinterpret_cast<T*>(ctx->windowsIn[pe] + off);
}

inline void* WindowAlloc(uint64_t windowBase, size_t& offset, size_t bytes, const char* file = __builtin_FILE(),
                         int line = __builtin_LINE())
{
    shmcomm::suite::use(windowBase, offset, bytes, "WindowAlloc", file, line);
    void* ptr = reinterpret_cast<void*>(windowBase + offset);
    offset += bytes;
    return ptr;
}

inline void CommMpiBarrier(const char* file = __builtin_FILE(), int line = __builtin_LINE())
{
    shmcomm::suite::host_barrier(file, line);
}

template <typename T, size_t count>
struct TestContext {
    int32_t deviceId{-1};
    aclrtStream stream{nullptr};
    int aclStatus{0};
    CommDeviceContext* deviceCtx{nullptr};
    CommDeviceContext hostCtx{};

    bool Init(int rankId, int nRanks, int nDevices, int firstDeviceId, const HcclRootInfo* rootInfo,
              const char* file = __builtin_FILE(), int line = __builtin_LINE())
    {
        (void)rootInfo;
        namespace s = shmcomm::suite;
        if (nDevices <= 0 || nRanks <= 0) {
            std::cerr << "[ERROR] n_devices and n_ranks must be > 0\n";
            return false;
        }
        shmcomm_block* b = s::block();
        if (rankId != s::g.rank || nRanks > s::g.nranks) {
            shmcomm::native::at(file, line);
            s::fail("TestContext::Init(rank " + std::to_string(rankId) + ", " + std::to_string(nRanks) +
                    " ranks) on rank " + std::to_string(s::g.rank) + " of " + std::to_string(s::g.nranks));
        }
        hostCtx.rankId = static_cast<uint32_t>(rankId);
        hostCtx.rankNum = static_cast<uint32_t>(nRanks);
        hostCtx.winSize = s::g.area_bytes;
        const uint64_t off = reinterpret_cast<uint64_t>(s::g.area) - b->bases[b->rank];
        for (uint32_t i = 0; i < HCCL_MAX_RANK_NUM; ++i) {
            hostCtx.windowsIn[i] = i < static_cast<uint32_t>(nRanks) ? b->bases[i] + off : 0;
        }
        deviceCtx = &hostCtx;
        deviceId = rankId % nDevices + firstDeviceId;
        s::fresh_window(file, line);
        return true;
    }

    bool Finalize() { return true; }
};

template <typename Func>
inline bool ForkAndRunWithHcclRootInfo(int nRanks, int firstRankId, int firstDeviceId, Func&& perRankFn,
                                       const char* file = __builtin_FILE(), int line = __builtin_LINE())
{
    (void)firstRankId;
    (void)firstDeviceId;
    return shmcomm::suite::run_ranks("ForkAndRunWithHcclRootInfo", nRanks, [&](int rank) {
        HcclRootInfo rootInfo{};
        return static_cast<bool>(perRankFn(rank, &rootInfo));
    }, file, line);
}
