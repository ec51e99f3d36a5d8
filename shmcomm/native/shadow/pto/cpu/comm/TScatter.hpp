// shmcomm's shadow of pto-isa's pto/cpu/comm/TScatter.hpp (written by shmcomm, no pto-isa code).
// TSCATTER_IMPL is shmcomm's: member r receives rows [r*H, (r+1)*H) of the root's src,
// as a2a3's AIV path (shmcomm_shadow/collectives.hpp): natively in eager mode, shmcomm's TSCATTER
// when the block's execution model observes instructions. The CCU forms stay pto-isa's.
#ifndef SHMCOMM_SHADOW_TSCATTER_HPP
#define SHMCOMM_SHADOW_TSCATTER_HPP

#define TSCATTER_IMPL pto_isa_cpu_TSCATTER_IMPL
#include_next <pto/cpu/comm/TScatter.hpp>
#undef TSCATTER_IMPL

#include "shmcomm_shadow/collectives.hpp"

namespace pto {
namespace comm {

template <typename ParallelGroupType, typename GlobalSrcData, typename TileData>
PTO_INTERNAL void TSCATTER_IMPL(ParallelGroupType& parallelGroup, GlobalSrcData& srcGlobalData, TileData& stagingTileData,
                             const char* file = __builtin_FILE(), int line = __builtin_LINE())
{
    shmcomm::native::mark_pc();  // the user's call site, resolved when a report needs it
    shmcomm::pto_isa::move(shmcomm::pto_isa::SCATTER, parallelGroup, srcGlobalData, file, line, stagingTileData);
}

template <typename ParallelGroupType, typename GlobalSrcData, typename TileData>
PTO_INTERNAL void TSCATTER_IMPL(ParallelGroupType& parallelGroup, GlobalSrcData& srcGlobalData, TileData& pingTile,
                             TileData& pongTile, const char* file = __builtin_FILE(), int line = __builtin_LINE())
{
    shmcomm::native::mark_pc();  // the user's call site, resolved when a report needs it
    shmcomm::pto_isa::move(shmcomm::pto_isa::SCATTER, parallelGroup, srcGlobalData, file, line, pingTile, pongTile);
}

}  // namespace comm
}  // namespace pto

#endif
