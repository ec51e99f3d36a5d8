// Stand-in (shmcomm tests): the CPU back end's qualifiers, pipes and empty synchronization.
#ifndef STANDIN_CPU_STUB_HPP
#define STANDIN_CPU_STUB_HPP
#include <cstdint>
#include <cstdlib>
#include <cstring>

#define AICORE
#define __gm__
#define __global__
#define __ubuf__
#define PTO_INTERNAL inline __attribute__((always_inline))  // (as pto-isa: every wrapper inlined)
#define PTO_INST inline __attribute__((always_inline))

typedef int pipe_t;
const pipe_t PIPE_S = 0;
const pipe_t PIPE_V = 1;
const pipe_t PIPE_MTE1 = 2;
const pipe_t PIPE_MTE2 = 3;
const pipe_t PIPE_MTE3 = 4;
const pipe_t PIPE_M = 5;
const pipe_t PIPE_ALL = 6;
const pipe_t PIPE_FIX = 7;
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

// the host side of a CPU comm suite: ACL as plain memory, HCCL's harness macros empty
typedef void* aclrtStream;
enum { ACL_MEM_MALLOC_HUGE_FIRST = 0, ACL_MEMCPY_HOST_TO_DEVICE = 0, ACL_MEMCPY_DEVICE_TO_HOST = 1 };
inline int aclrtMallocHost(void** p, size_t sz) { *p = calloc(1, sz); return *p == nullptr; }
inline int aclrtMalloc(void** p, size_t sz, int) { return aclrtMallocHost(p, sz); }
inline int aclrtMemcpy(void* dst, size_t szDst, const void* src, size_t szSrc, int)
{
    memcpy(dst, src, szDst < szSrc ? szDst : szSrc);
    return 0;
}
inline int aclrtSynchronizeStream(aclrtStream) { return 0; }
inline int aclrtFree(void* p) { free(p); return 0; }
inline int aclrtFreeHost(void* p) { free(p); return 0; }
#define HcclHostBarrier(x, y)
#define CommMpiInit(x, y) (true)
#define CommMpiFinalize()
#define SKIP_IF_RANKS_LT(n)
static constexpr uint32_t HCCL_MAX_RANK_NUM = 64;
struct HcclRootInfo {};

struct CommDeviceContext {
    uint64_t workSpace;
    uint64_t workSpaceSize;
    uint32_t rankId;
    uint32_t rankNum;
    uint64_t winSize;
    uint64_t windowsIn[HCCL_MAX_RANK_NUM];
    uint64_t windowsOut[HCCL_MAX_RANK_NUM];
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
