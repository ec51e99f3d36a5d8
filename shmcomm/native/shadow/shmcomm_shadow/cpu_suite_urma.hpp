// shmcomm's stand-in for tests/cpu/comm/st/testcase/urma_context.hpp of pto-isa's CPU comm
// suites (written by shmcomm to its names and signatures; no pto-isa code). The URMA suites
// are Ascend950 (a5, NPU_ARCH 3510) tests: they run only when the run's target is "a5"
// (Config.target, SHMCOMM_TARGET, --target); on a2a3, which has no URMA engine, Setup and
// BuildAsyncSession refuse with an error that names the setting.
//   UrmaTestContext::Setup  the rank's memory region (MR) is its suite window, zeroed for the
//                           test; the workspace the kernel gets is its base
//   UrmaPeerMrBaseAddr      the base of peer's MR: the same offset in peer's window, as a5's
//                           symmetric MR table gives (pto-isa's CPU one: this rank's own buffer)
//   BuildAsyncSession<URMA> a valid URMA session bound to destRankId
//   RunUrmaTestMpiLaunch    kernelFn on every rank < n_ranks, then true only if all passed
#pragma once

#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "pto/comm/comm_types.hpp"
#include "pto/common/cpu_stub.hpp"
#include "shmcomm_shadow/suite.hpp"

namespace shmcomm {
namespace suite {

inline void need_urma(const char* what, const char* file, int line) {
    if (!g.a5) {
        n::at(file, line);
        fail(std::string(what) + ": the URMA engine is an Ascend950 (a5, NPU_ARCH 3510) engine and a2a3 has "
             "SDMA only; this run's target is a2a3: run it with target='a5' (SHMCOMM_TARGET=a5, "
             "python -m shmcomm suite --target a5)");
    }
}

}  // namespace suite
}  // namespace shmcomm

class UrmaWorkspaceManager {
public:
    UrmaWorkspaceManager() = default;
    ~UrmaWorkspaceManager() { Finalize(); }

    void Finalize() {}

    void* GetWorkspaceAddr() const { return urmaInfoDevice_; }

    void* urmaInfoDevice_{nullptr};
};

struct UrmaTestContext {
    int deviceId{-1};
    void* devBuf{nullptr};
    void* stream{nullptr};
    UrmaWorkspaceManager urmaMgr;

    bool AllocHugePageBuffer(size_t commBytesNeeded) { return commBytesNeeded <= shmcomm::suite::g.area_bytes; }

    bool Setup(int rank_id, int n_ranks, int n_devices, int first_device_id, int root_rank, size_t commBytesNeeded,
               const char* file = __builtin_FILE(), int line = __builtin_LINE())
    {
        namespace s = shmcomm::suite;
        (void)root_rank;
        s::need_urma("UrmaTestContext::Setup", file, line);
        if (n_devices <= 0 || n_ranks <= 0) {
            return false;
        }
        s::block();
        if (rank_id != s::g.rank || n_ranks > s::g.nranks) {
            shmcomm::native::at(file, line);
            s::fail("UrmaTestContext::Setup(rank " + std::to_string(rank_id) + ", " + std::to_string(n_ranks) +
                    " ranks) on rank " + std::to_string(s::g.rank) + " of " + std::to_string(s::g.nranks));
        }
        deviceId = rank_id % n_devices + first_device_id;
        if (commBytesNeeded == 0) {
            return false;
        }
        s::fresh_window(file, line);
        s::use(reinterpret_cast<uint64_t>(s::g.area), 0, commBytesNeeded, "UrmaTestContext::Setup", file, line);
        devBuf = s::g.area;
        urmaMgr.urmaInfoDevice_ = devBuf;
        return true;
    }

    void Cleanup()
    {
        urmaMgr.Finalize();
        devBuf = nullptr;  // the suite window, not a heap block: nothing to free
    }
};

AICORE inline uint64_t UrmaPeerMrBaseAddr(__gm__ uint8_t* urmaWorkspace, uint32_t peerRank)
{
    namespace s = shmcomm::suite;
    const int nr = s::g.group > 0 ? s::g.group : s::g.nranks;
    if (peerRank >= static_cast<uint32_t>(nr)) {
        s::fail("UrmaPeerMrBaseAddr: peerRank " + std::to_string(peerRank) + " out of range (" +
                std::to_string(nr) + " ranks registered their MR)");
    }
    return reinterpret_cast<uint64_t>(s::remote(urmaWorkspace, static_cast<int>(peerRank)));
}

template <pto::comm::DmaEngine engine>
PTO_INTERNAL bool BuildAsyncSession(__gm__ uint8_t* workspace, uint32_t destRankId, pto::comm::AsyncSession& session,
                                    const char* file = __builtin_FILE(), int line = __builtin_LINE())
{
    static_assert(engine == pto::comm::DmaEngine::URMA, "This overload is for URMA only");
    shmcomm::suite::need_urma("BuildAsyncSession<DmaEngine::URMA>", file, line);
    session.engine = engine;
    session.valid = true;
    session.contextGm = workspace;
    session.destRankId = destRankId;
    session.myPe = static_cast<uint32_t>(shmcomm::suite::g.rank);
    return true;
}

using UrmaKernelFn = bool (*)(int, int, int, int, int, int);

inline bool RunUrmaTestMpiLaunch(int n_ranks, int n_devices, int first_rank_id, int first_device_id,
                                 UrmaKernelFn kernelFn, const char* file = __builtin_FILE(),
                                 int line = __builtin_LINE())
{
    const int root = 0;
    return shmcomm::suite::run_ranks("RunUrmaTestMpiLaunch", n_ranks, [&](int rank) {
        return kernelFn(rank, n_ranks, n_devices, first_device_id, first_rank_id, root);
    }, file, line);
}
