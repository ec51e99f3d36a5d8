// shmcomm's shadow of pto-isa's pto/common/cpu_stub.hpp (written by shmcomm, no pto-isa code).
// pto-isa's own file is included with its synchronization functions renamed away; this file
// then defines them as shmcomm's, with the signatures pto-isa's code calls:
//   pipe_barrier, set_flag / wait_flag, dsb, dcci: shmcomm's pipes, events and fences (native in
//     eager mode: fences, and an unmatched wait_flag fails; bridged in the observed modes);
//   get_block_idx / get_block_num: the shmcomm block running the kernel;
//   SYNCALL_IMPL (and the soft SYNCALLs over every block): shmcomm's SYNCALL of the launch.
// Everything else of pto-isa's CPU back end (the ACL stubs, CommDeviceContext, the tile
// library's runtime) stays the checkout's own, except the device-side HCCL stand-ins
// (CommDeviceContext, HCCL_MAX_RANK_NUM) a kernel defines itself: shmcomm's build then defines
// SHMCOMM_KERNEL_OWNS_<name>, and pto-isa's stand-in is renamed away so the kernel's is the one.
#ifndef SHMCOMM_SHADOW_CPU_STUB_HPP
#define SHMCOMM_SHADOW_CPU_STUB_HPP

#define SHMCOMM_PTO_ISA_SHADOW 1

#define pipe_barrier pto_isa_cpu_pipe_barrier
#define set_flag pto_isa_cpu_set_flag
#define wait_flag pto_isa_cpu_wait_flag
#define dsb pto_isa_cpu_dsb
#define dcci pto_isa_cpu_dcci
#define get_block_idx pto_isa_cpu_get_block_idx
#define get_block_num pto_isa_cpu_get_block_num
#define SYNCALL_IMPL pto_isa_cpu_SYNCALL_IMPL
#define SYNCALL_SOFT_IMPL pto_isa_cpu_SYNCALL_SOFT_IMPL
#define SYNCALL_SOFT_AIC_IMPL pto_isa_cpu_SYNCALL_SOFT_AIC_IMPL
#define SYNCALL_SOFT_MIX_IMPL pto_isa_cpu_SYNCALL_SOFT_MIX_IMPL
#ifdef SHMCOMM_KERNEL_OWNS_CommDeviceContext
#define CommDeviceContext pto_isa_cpu_CommDeviceContext
#endif
#ifdef SHMCOMM_KERNEL_OWNS_HCCL_MAX_RANK_NUM
#define HCCL_MAX_RANK_NUM pto_isa_cpu_HCCL_MAX_RANK_NUM
#endif
#include_next <pto/common/cpu_stub.hpp>
#undef CommDeviceContext
#undef HCCL_MAX_RANK_NUM
#undef pipe_barrier
#undef set_flag
#undef wait_flag
#undef dsb
#undef dcci
#undef get_block_idx
#undef get_block_num
#undef SYNCALL_IMPL
#undef SYNCALL_SOFT_IMPL
#undef SYNCALL_SOFT_AIC_IMPL
#undef SYNCALL_SOFT_MIX_IMPL

#include <string>

// pto-isa's CPU pipes are constants; a2a3 kernel files test for them with the preprocessor
// (`#ifndef PIPE_FIX` / `#define PIPE_FIX static_cast<pipe_t>(10)`, bisheng's numbering): as
// macros of themselves they are found, and every pipe keeps the CPU back end's number
#define PIPE_S PIPE_S
#define PIPE_V PIPE_V
#define PIPE_MTE1 PIPE_MTE1
#define PIPE_MTE2 PIPE_MTE2
#define PIPE_MTE3 PIPE_MTE3
#define PIPE_M PIPE_M
#define PIPE_ALL PIPE_ALL
#define PIPE_FIX PIPE_FIX

#include "shmcomm/runtime.hpp"

namespace shmcomm {
namespace pto_isa {

inline void syncall(const char* file, int line) { native::call(native::OP_SYNCALL, nullptr, 0, file, line); }

inline void soft_syncall(int32_t used_cores, const char* file, int line) {
    shmcomm_block* b = native::tls_block;
    // 0: every block of the launch (pto/common/syncall_soft.hpp: `usedCores != 0 ? usedCores :
    // get_block_num()`)
    if (b != nullptr && used_cores != 0 && used_cores != static_cast<int32_t>(b->block_num)) {
        native::at(file, line);
        native::fail("SYNCALL: a soft SYNCALL over " + std::to_string(used_cores) + " of the launch's " +
                     std::to_string(b->block_num) + " blocks is not supported yet (shmcomm's SYNCALL spans every block)");
    }
    syncall(file, line);
}

}  // namespace pto_isa
}  // namespace shmcomm

inline void pipe_barrier(pipe_t pipe, const char* file = __builtin_FILE(), int line = __builtin_LINE())
{
    uint64_t a[1] = {static_cast<uint64_t>(pipe)};
    shmcomm::native::bridge_or_fence(shmcomm::native::OP_PIPE_BARRIER, a, 1, file, line);
}

inline void set_flag(pipe_t src, pipe_t dst, int ev, const char* file = __builtin_FILE(), int line = __builtin_LINE())
{
    shmcomm::native::set_flag_at(static_cast<int>(src), static_cast<int>(dst), ev, file, line);
}

inline void wait_flag(pipe_t src, pipe_t dst, int ev, const char* file = __builtin_FILE(), int line = __builtin_LINE())
{
    shmcomm::native::wait_flag_at(static_cast<int>(src), static_cast<int>(dst), ev, file, line);
}

inline void dsb(mem_dsb_t mode, const char* file = __builtin_FILE(), int line = __builtin_LINE())
{
    uint64_t a[1] = {static_cast<uint64_t>(mode)};
    shmcomm::native::bridge_or_fence(shmcomm::native::OP_DSB, a, 1, file, line);
}

inline void dcci(const volatile void* ptr, int mode, int dst = 0, const char* file = __builtin_FILE(),
                 int line = __builtin_LINE())
{
    // the line's address too: the models see this kernel's plain accesses of it only here
    uint64_t a[3] = {static_cast<uint64_t>(mode), static_cast<uint64_t>(dst),
                     shmcomm::native::addr(const_cast<const void*>(ptr))};
    shmcomm::native::bridge_or_fence(shmcomm::native::OP_DCCI, a, 3, file, line);
}

// the shmcomm block running the kernel; pto-isa's own answer outside a shmcomm launch
inline uint32_t get_block_idx()
{
    auto* b = shmcomm::native::tls_block;
    return b == nullptr ? pto_isa_cpu_get_block_idx() : b->block_idx;
}

inline uint32_t get_block_num()
{
    auto* b = shmcomm::native::tls_block;
    return b == nullptr ? pto_isa_cpu_get_block_num() : b->block_num;
}

#if defined(__CPU_SIM)
namespace pto {
template <SyncCoreType CoreType = SyncCoreType::AIVOnly>
inline void SYNCALL_IMPL(const char* file = __builtin_FILE(), int line = __builtin_LINE())
{
    shmcomm::pto_isa::syncall(file, line);
}

template <SyncCoreType CoreType = SyncCoreType::AIVOnly>
inline void SYNCALL_SOFT_IMPL(int32_t* gmWorkspace, int32_t usedCores, const char* file = __builtin_FILE(),
                              int line = __builtin_LINE())
{
    (void)gmWorkspace;
    shmcomm::pto_isa::soft_syncall(usedCores, file, line);
}

inline void SYNCALL_SOFT_AIC_IMPL(int32_t* gmWorkspace, int32_t usedCores, const char* file = __builtin_FILE(),
                                  int line = __builtin_LINE())
{
    (void)gmWorkspace;
    shmcomm::pto_isa::soft_syncall(usedCores, file, line);
}

template <SyncCoreType CoreType = SyncCoreType::Mix>
inline void SYNCALL_SOFT_MIX_IMPL(int32_t* gmWorkspace, int32_t usedCores, const char* file = __builtin_FILE(),
                                  int line = __builtin_LINE())
{
    (void)gmWorkspace;
    shmcomm::pto_isa::soft_syncall(usedCores, file, line);
}
}  // namespace pto
#endif  // __CPU_SIM

// a pto-isa CPU comm suite built by shmcomm's suite runner: the harness macros are shmcomm's
#ifdef SHMCOMM_PTO_ISA_SUITE
#include "shmcomm_shadow/suite.hpp"
#endif

#endif
