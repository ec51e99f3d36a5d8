// Stand-in (shmcomm tests): a CPU comm suite's harness as a sequential simulation has it: the
// ranks one after another on one thread, a scratch buffer for every other rank's pointer, and
// the first rank that passes decides. shmcomm's suite runner replaces this file with its shim.
#pragma once
#include <cstdint>
#include <cstdlib>

#include "pto/common/cpu_stub.hpp"

template <typename T>
inline T* CommRemotePtr(CommDeviceContext* ctx, T* localPtr, int pe)
{
    return ctx->rankId == static_cast<uint32_t>(pe) ? localPtr : new T[ctx->winSize / sizeof(T)];
}

inline void* WindowAlloc(uint64_t, size_t&, size_t bytes) { return calloc(1, bytes); }

inline void CommMpiBarrier() {}

template <typename T, size_t count>
struct TestContext {
    aclrtStream stream{nullptr};
    CommDeviceContext* deviceCtx{nullptr};
    CommDeviceContext hostCtx{};

    bool Init(int rankId, int nRanks, int, int, const HcclRootInfo*)
    {
        hostCtx.rankId = static_cast<uint32_t>(rankId);
        hostCtx.rankNum = static_cast<uint32_t>(nRanks);
        hostCtx.winSize = count * sizeof(T);
        uint64_t base = reinterpret_cast<uint64_t>(calloc(nRanks, count * sizeof(T)));
        for (int i = 0; i < nRanks; ++i) hostCtx.windowsIn[i] = base + i * count * sizeof(T);
        deviceCtx = &hostCtx;
        return true;
    }
    bool Finalize() { return true; }
};

template <typename Func>
inline bool ForkAndRunWithHcclRootInfo(int nRanks, int, int, Func&& perRankFn)
{
    HcclRootInfo rootInfo{};
    bool res = false;
    for (int i = 0; i < nRanks; i++) res = res || perRankFn(i, &rootInfo);
    return res;
}
