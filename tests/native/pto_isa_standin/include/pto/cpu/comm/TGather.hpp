// Stand-in (shmcomm tests): no data moves at all (shmcomm's shadow must move it).
#ifndef STANDIN_TGATHER_HPP
#define STANDIN_TGATHER_HPP
#include "pto/comm/comm_types.hpp"
namespace pto {
namespace comm {
template <typename ParallelGroupType, typename GlobalDstData, typename TileData>
PTO_INTERNAL void TGATHER_IMPL(ParallelGroupType& parallelGroup, GlobalDstData& dstGlobalData, TileData& stagingTileData)
{
    (void)parallelGroup;
    (void)dstGlobalData;
    (void)stagingTileData;
}
template <typename ParallelGroupType, typename GlobalDstData, typename TileData>
PTO_INTERNAL void TGATHER_IMPL(ParallelGroupType& parallelGroup, GlobalDstData& dstGlobalData, TileData& pingTile, TileData& pongTile)
{
    (void)pongTile;
    TGATHER_IMPL(parallelGroup, dstGlobalData, pingTile);
}
}  // namespace comm
}  // namespace pto
#endif
