// Stand-in (shmcomm tests): no copy at all (shmcomm's shadow must do it).
#ifndef STANDIN_TGET_HPP
#define STANDIN_TGET_HPP
#include "pto/common/pto_tile.hpp"
#include "pto/comm/async_common/async_types.hpp"
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
// copies at once, as a sequential simulation does (shmcomm's shadow must defer it to Wait)
template <DmaEngine engine = DmaEngine::SDMA, typename GlobalDstData, typename GlobalSrcData>
PTO_INTERNAL AsyncEvent TGET_ASYNC_IMPL(GlobalDstData& dst, GlobalSrcData& src, const AsyncSession& session)
{
    (void)session;
    for (int64_t i = 0; i < src.GetShape(4); ++i) dst.data()[i] = src.data()[i];
    return AsyncEvent(0, engine);
}
template <DmaEngine engine, typename GlobalDstData, typename GlobalSrcData>
PTO_INTERNAL AsyncEvent TGET_ASYNC_IMPL(GlobalDstData& dst, GlobalSrcData& src, const AsyncSession& session,
                                        uint32_t peer)
{
    (void)peer;
    return TGET_ASYNC_IMPL<engine>(dst, src, session);
}
}  // namespace comm
}  // namespace pto
#endif
