// shmcomm's shadow of pto-isa's pto/cpu/comm/TGather.hpp (written by shmcomm, no pto-isa code).
// TGATHER_IMPL is shmcomm's: member r's tensor into rows [r*H, (r+1)*H) of the root's dst,
// as a2a3's AIV path (shmcomm_shadow/collectives.hpp): natively in eager mode, shmcomm's TGATHER
// when the block's execution model observes instructions. The CCU forms stay pto-isa's.
#ifndef SHMCOMM_SHADOW_TGATHER_HPP
#define SHMCOMM_SHADOW_TGATHER_HPP

#define TGATHER_IMPL pto_isa_cpu_TGATHER_IMPL
#include_next <pto/cpu/comm/TGather.hpp>
#undef TGATHER_IMPL

#include "shmcomm_shadow/collectives.hpp"

namespace pto {
namespace comm {

template <typename ParallelGroupType, typename GlobalDstData, typename TileData>
PTO_INTERNAL void TGATHER_IMPL(ParallelGroupType& parallelGroup, GlobalDstData& dstGlobalData, TileData& stagingTileData,
                             const char* file = __builtin_FILE(), int line = __builtin_LINE())
{
    shmcomm::native::mark_pc();  // the user's call site, resolved when a report needs it
    shmcomm::pto_isa::move(shmcomm::pto_isa::GATHER, parallelGroup, dstGlobalData, file, line, stagingTileData);
}

template <typename ParallelGroupType, typename GlobalDstData, typename TileData>
PTO_INTERNAL void TGATHER_IMPL(ParallelGroupType& parallelGroup, GlobalDstData& dstGlobalData, TileData& pingTile,
                             TileData& pongTile, const char* file = __builtin_FILE(), int line = __builtin_LINE())
{
    shmcomm::native::mark_pc();  // the user's call site, resolved when a report needs it
    shmcomm::pto_isa::move(shmcomm::pto_isa::GATHER, parallelGroup, dstGlobalData, file, line, pingTile, pongTile);
}

}  // namespace comm
}  // namespace pto

#endif
