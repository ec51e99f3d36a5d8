// Stand-in (shmcomm tests): no data moves at all (shmcomm's shadow must reduce).
#ifndef STANDIN_TREDUCE_HPP
#define STANDIN_TREDUCE_HPP
#include "pto/comm/comm_types.hpp"
namespace pto {
namespace comm {
template <typename ParallelGroupType, typename GlobalDstData, typename TileData>
PTO_INTERNAL void TREDUCE_IMPL(ParallelGroupType& parallelGroup, GlobalDstData& dstGlobalData, TileData& accTileData,
                               TileData& recvTileData, pto::comm::ReduceOp op)
{
    (void)parallelGroup;
    (void)dstGlobalData;
    (void)accTileData;
    (void)recvTileData;
    (void)op;
}
template <typename ParallelGroupType, typename GlobalDstData, typename TileData>
PTO_INTERNAL void TREDUCE_IMPL(ParallelGroupType& parallelGroup, GlobalDstData& dstGlobalData, TileData& accTileData,
                               TileData& pingTile, TileData& pongTile, pto::comm::ReduceOp op)
{
    (void)pongTile;
    TREDUCE_IMPL(parallelGroup, dstGlobalData, accTileData, pingTile, op);
}
}  // namespace comm
}  // namespace pto
#endif
