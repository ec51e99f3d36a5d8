// Stand-in URMA CPU comm suite (shmcomm tests; written for shmcomm): the root writes its vector
// into every peer's memory region through UrmaPeerMrBaseAddr, in a URMA session.
#include <cstddef>
#include <cstdint>
#include <iostream>

#include <pto/pto-inst.hpp>
#include "pto/common/cpu_stub.hpp"
#include "../common.hpp"
#include "../urma_context.hpp"

constexpr int N = 64;

__global__ AICORE void RootPutKernel(__gm__ float* buf, int nranks, int my_rank, int root, __gm__ uint8_t* ws)
{
    if (my_rank == root) {
        for (int peer = 0; peer < nranks; ++peer) {
            if (peer == root) continue;
            pto::comm::AsyncSession session;
            BuildAsyncSession<pto::comm::DmaEngine::URMA>(ws, static_cast<uint32_t>(peer), session);
            float* remote = reinterpret_cast<float*>(UrmaPeerMrBaseAddr(ws, static_cast<uint32_t>(peer))) + N;
            for (int i = 0; i < N; ++i) remote[i] = buf[i];
        }
    }
    pipe_barrier(PIPE_ALL);
}

bool RunRootPutRank(int rank_id, int n_ranks, int n_devices, int first_device_id, int first_rank_id, int root)
{
    (void)first_rank_id;
    UrmaTestContext ctx;
    if (!ctx.Setup(rank_id, n_ranks, n_devices, first_device_id, root, 2 * N * sizeof(float))) return false;
    float* send = static_cast<float*>(ctx.devBuf);
    float* recv = send + N;
    for (int i = 0; i < N; ++i) {
        send[i] = static_cast<float>(rank_id * 1000 + i);
        recv[i] = -1.0f;
    }
    CommMpiBarrier();
    RootPutKernel(send, n_ranks, rank_id, root, static_cast<uint8_t*>(ctx.urmaMgr.GetWorkspaceAddr()));
    CommMpiBarrier();
    bool ok = true;
    for (int i = 0; rank_id != root && i < N; ++i) ok = ok && recv[i] == static_cast<float>(root * 1000 + i);
    ctx.Cleanup();
    return ok;
}

bool RunRootPut(int n_ranks) { return RunUrmaTestMpiLaunch(n_ranks, n_ranks, 0, 0, RunRootPutRank); }
