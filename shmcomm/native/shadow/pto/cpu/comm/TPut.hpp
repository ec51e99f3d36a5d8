// shmcomm's shadow of pto-isa's pto/cpu/comm/TPut.hpp (written by shmcomm, no pto-isa code).
// The synchronous TPUT_IMPLs are shmcomm's: AtomicAdd is a true atomic add per element (pto-isa's
// CPU back end does a plain +=); bridged, shmcomm's TPUT through the staging tile. pto-isa's
// TPUT_ASYNC_IMPL stays as the checkout has it.
#ifndef SHMCOMM_SHADOW_TPUT_HPP
#define SHMCOMM_SHADOW_TPUT_HPP

#include <pto/cpu/comm/TGet.hpp>

#define TPUT_IMPL pto_isa_cpu_TPUT_IMPL
#include_next <pto/cpu/comm/TPut.hpp>
#undef TPUT_IMPL

#include "shmcomm_shadow/comm.hpp"

namespace pto {
namespace comm {

template <typename GlobalDstData, typename GlobalSrcData, typename TileData, AtomicType atomicType>
PTO_INTERNAL void TPUT_IMPL(GlobalDstData& dst, GlobalSrcData& src, TileData& src1,
                            const char* file = __builtin_FILE(), int line = __builtin_LINE())
{
    shmcomm::native::mark_pc();  // the user's call site, resolved when a report needs it
    shmcomm::pto_isa::copy<atomicType == AtomicType::AtomicAdd>(shmcomm::native::OP_PUT, dst, src, src1, file, line);
}

template <typename GlobalDstData, typename GlobalSrcData, typename TileData, AtomicType atomicType>
PTO_INTERNAL void TPUT_IMPL(GlobalDstData& dst, GlobalSrcData& src, TileData& ping, TileData& pong,
                            const char* file = __builtin_FILE(), int line = __builtin_LINE())
{
    (void)pong;
    shmcomm::native::mark_pc();  // the user's call site, resolved when a report needs it
    shmcomm::pto_isa::copy<atomicType == AtomicType::AtomicAdd>(shmcomm::native::OP_PUT, dst, src, ping, file, line);
}

}  // namespace comm
}  // namespace pto

#endif
