// Stand-in (shmcomm tests): the URMA harness of a CPU comm suite as a sequential simulation has
// it (each rank's own buffer as every peer's memory region; the first rank that passes
// decides). shmcomm's suite runner replaces this file with its shim.
#pragma once
#include <cstdint>
#include <cstdlib>

#include "pto/comm/comm_types.hpp"
#include "pto/common/cpu_stub.hpp"

struct UrmaWorkspaceManager {
    void* GetWorkspaceAddr() const { return urmaInfoDevice_; }
    void* urmaInfoDevice_{nullptr};
};

struct UrmaTestContext {
    void* devBuf{nullptr};
    void* stream{nullptr};
    UrmaWorkspaceManager urmaMgr;

    bool Setup(int, int, int, int, int, size_t commBytesNeeded)
    {
        devBuf = calloc(1, commBytesNeeded);
        urmaMgr.urmaInfoDevice_ = devBuf;
        return true;
    }
    void Cleanup() { free(devBuf); }
};

inline uint64_t UrmaPeerMrBaseAddr(uint8_t* urmaWorkspace, uint32_t) { return reinterpret_cast<uint64_t>(urmaWorkspace); }

template <pto::comm::DmaEngine engine>
inline bool BuildAsyncSession(uint8_t*, uint32_t, pto::comm::AsyncSession&) { return true; }

using UrmaKernelFn = bool (*)(int, int, int, int, int, int);

inline bool RunUrmaTestMpiLaunch(int n_ranks, int n_devices, int first_rank_id, int first_device_id, UrmaKernelFn fn)
{
    bool res = false;
    for (int i = 0; i < n_ranks; i++) res = res || fn(i, n_ranks, n_devices, first_device_id, first_rank_id, 0);
    return res;
}
