// Stand-in (shmcomm tests): the CPU back end's qualifiers, pipes and empty synchronization.
#ifndef STANDIN_CPU_STUB_HPP
#define STANDIN_CPU_STUB_HPP
#include <cstdint>

#define AICORE
#define __gm__
#define __global__
#define PTO_INTERNAL inline __attribute__((always_inline))  // (as pto-isa: every wrapper inlined)
#define PTO_INST inline __attribute__((always_inline))

typedef int pipe_t;
const pipe_t PIPE_S = 0;
const pipe_t PIPE_V = 1;
const pipe_t PIPE_MTE2 = 3;
const pipe_t PIPE_MTE3 = 4;
const pipe_t PIPE_ALL = 6;
using mem_dsb_t = int;
inline constexpr mem_dsb_t DSB_DDR = 0;
#define EVENT_ID0 0
#define EVENT_ID1 1

// the stand-in's own answers: one block, no synchronization (as a sequential CPU simulation)
inline void pipe_barrier(pipe_t pipe) { (void)pipe; }
inline void set_flag(pipe_t, pipe_t, int) {}
inline void wait_flag(pipe_t, pipe_t, int) {}
inline void dcci(const volatile void*, int) {}
inline void dcci(const volatile void*, int, int) {}
inline void dsb(mem_dsb_t) {}
inline uint32_t get_block_idx() { return 0; }
inline uint32_t get_block_num() { return 1; }

struct CommDeviceContext {
    uint64_t workSpace;
    uint64_t workSpaceSize;
    uint32_t rankId;
    uint32_t rankNum;
    uint64_t winSize;
    uint64_t windowsIn[64];
    uint64_t windowsOut[64];
};

namespace pto {
enum class SyncCoreType { AIVOnly, Mix };
template <SyncCoreType CoreType = SyncCoreType::AIVOnly>
inline void SYNCALL_IMPL() {}
template <SyncCoreType CoreType = SyncCoreType::AIVOnly>
inline void SYNCALL_SOFT_IMPL(int32_t* gmWorkspace, int32_t usedCores) { (void)gmWorkspace; (void)usedCores; }
inline void SYNCALL_SOFT_AIC_IMPL(int32_t* gmWorkspace, int32_t usedCores) { (void)gmWorkspace; (void)usedCores; }
template <SyncCoreType CoreType = SyncCoreType::Mix>
inline void SYNCALL_SOFT_MIX_IMPL(int32_t* gmWorkspace, int32_t usedCores) { (void)gmWorkspace; (void)usedCores; }
}  // namespace pto
#endif
