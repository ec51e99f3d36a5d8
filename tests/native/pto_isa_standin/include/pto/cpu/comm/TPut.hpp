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
}  // namespace comm
}  // namespace pto
#endif
