// shmcomm's stand-in for the device side of a pto-isa a2a3 comm suite's common.hpp (written by
// shmcomm): the host harness (ACL, HCCL, TestContext) is shmcomm's Python host; a kernel keeps
// CommRemotePtr, the same offset in rank `pe`'s window, over the rank's CommDeviceContext; also
// under its earlier name HcclRemotePtr (and HcclDeviceContext), which kernels still call.
#pragma once

#include <pto/pto-inst.hpp>

template <typename T>
AICORE inline __gm__ T* CommRemotePtr(__gm__ CommDeviceContext* ctx, __gm__ T* localPtr, int pe)
{
    const uint64_t me = ctx->windowsIn[ctx->rankId];
    return reinterpret_cast<__gm__ T*>(ctx->windowsIn[pe] + (reinterpret_cast<uint64_t>(localPtr) - me));
}

template <typename T>
AICORE inline __gm__ T* HcclRemotePtr(__gm__ CommDeviceContext* ctx, __gm__ T* localPtr, int pe)
{
    return CommRemotePtr(ctx, localPtr, pe);
}

using HcclDeviceContext = CommDeviceContext;
