// shmcomm's shadow of pto-isa's pto/cpu/comm/TGet.hpp (written by shmcomm, no pto-isa code).
// The synchronous TGET_IMPLs are shmcomm's (bridged: shmcomm's TGET through the staging tile);
// pto-isa's TGET_ASYNC_IMPL stays as the checkout has it.
#ifndef SHMCOMM_SHADOW_TGET_HPP
#define SHMCOMM_SHADOW_TGET_HPP

#define TGET_IMPL pto_isa_cpu_TGET_IMPL
#include_next <pto/cpu/comm/TGet.hpp>
#undef TGET_IMPL

#include "shmcomm_shadow/comm.hpp"

namespace pto {
namespace comm {

template <typename GlobalDstData, typename GlobalSrcData, typename TileData>
PTO_INTERNAL void TGET_IMPL(GlobalDstData& dst, GlobalSrcData& src, TileData& src1,
                            const char* file = __builtin_FILE(), int line = __builtin_LINE())
{
    shmcomm::native::mark_pc();  // the user's call site, resolved when a report needs it
    shmcomm::pto_isa::copy<false>(shmcomm::native::OP_GET, dst, src, src1, file, line);
}

template <typename GlobalDstData, typename GlobalSrcData, typename TileData>
PTO_INTERNAL void TGET_IMPL(GlobalDstData& dst, GlobalSrcData& src, TileData& ping, TileData& pong,
                            const char* file = __builtin_FILE(), int line = __builtin_LINE())
{
    (void)pong;
    shmcomm::native::mark_pc();  // the user's call site, resolved when a report needs it
    shmcomm::pto_isa::copy<false>(shmcomm::native::OP_GET, dst, src, ping, file, line);
}

}  // namespace comm
}  // namespace pto

#endif
