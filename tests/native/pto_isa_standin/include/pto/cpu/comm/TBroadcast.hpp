// Stand-in (shmcomm tests): no data moves at all (shmcomm's shadow must move it).
#ifndef STANDIN_TBROADCAST_HPP
#define STANDIN_TBROADCAST_HPP
#include "pto/comm/comm_types.hpp"
namespace pto {
namespace comm {
template <typename ParallelGroupType, typename GlobalSrcData, typename TileData>
PTO_INTERNAL void TBROADCAST_IMPL(ParallelGroupType& parallelGroup, GlobalSrcData& srcGlobalData, TileData& stagingTileData)
{
    (void)parallelGroup;
    (void)srcGlobalData;
    (void)stagingTileData;
}
template <typename ParallelGroupType, typename GlobalSrcData, typename TileData>
PTO_INTERNAL void TBROADCAST_IMPL(ParallelGroupType& parallelGroup, GlobalSrcData& srcGlobalData, TileData& pingTile, TileData& pongTile)
{
    (void)pongTile;
    TBROADCAST_IMPL(parallelGroup, srcGlobalData, pingTile);
}
}  // namespace comm
}  // namespace pto
#endif
