// Stand-in (shmcomm tests): no copy at all (shmcomm's shadow must do it).
#ifndef STANDIN_TPUT_HPP
#define STANDIN_TPUT_HPP
#include <pto/cpu/comm/TGet.hpp>
namespace pto {
namespace comm {
template <typename GlobalDstData, typename GlobalSrcData, typename TileData, AtomicType atomicType>
PTO_INTERNAL void TPUT_IMPL(GlobalDstData& dst, GlobalSrcData& src, TileData& src1)
{
    (void)dst;
    (void)src;
    (void)src1;
}
template <typename GlobalDstData, typename GlobalSrcData, typename TileData, AtomicType atomicType>
PTO_INTERNAL void TPUT_IMPL(GlobalDstData& dst, GlobalSrcData& src, TileData& ping, TileData& pong)
{
    (void)pong;
    TPUT_IMPL<GlobalDstData, GlobalSrcData, TileData, atomicType>(dst, src, ping);
}
// copies at once, as a sequential simulation does (shmcomm's shadow must defer it to Wait)
template <DmaEngine engine = DmaEngine::SDMA, typename GlobalDstData, typename GlobalSrcData>
PTO_INTERNAL AsyncEvent TPUT_ASYNC_IMPL(GlobalDstData& dst, GlobalSrcData& src, const AsyncSession& session)
{
    (void)session;
    for (int64_t i = 0; i < src.GetShape(4); ++i) dst.data()[i] = src.data()[i];
    return AsyncEvent(0, engine);
}
template <DmaEngine engine, typename GlobalDstData, typename GlobalSrcData>
PTO_INTERNAL AsyncEvent TPUT_ASYNC_IMPL(GlobalDstData& dst, GlobalSrcData& src, const AsyncSession& session,
                                        uint32_t peer)
{
    (void)peer;
    return TPUT_ASYNC_IMPL<engine>(dst, src, session);
}
}  // namespace comm
}  // namespace pto
#endif
