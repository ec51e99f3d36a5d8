// Stand-in (shmcomm tests): no copy at all (shmcomm's shadow must do it).
#ifndef STANDIN_TGET_HPP
#define STANDIN_TGET_HPP
#include "pto/common/pto_tile.hpp"
namespace pto {
namespace comm {
template <typename GlobalDstData, typename GlobalSrcData, typename TileData>
PTO_INTERNAL void TGET_IMPL(GlobalDstData& dst, GlobalSrcData& src, TileData& src1)
{
    (void)dst;
    (void)src;
    (void)src1;
}
template <typename GlobalDstData, typename GlobalSrcData, typename TileData>
PTO_INTERNAL void TGET_IMPL(GlobalDstData& dst, GlobalSrcData& src, TileData& ping, TileData& pong)
{
    TGET_IMPL(dst, src, ping);
    (void)pong;
}
}  // namespace comm
}  // namespace pto
#endif
