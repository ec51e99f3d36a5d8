// Stand-in (shmcomm tests): the public comm instructions, calling the back end's *_IMPL.
#ifndef STANDIN_PTO_COMM_INST_HPP
#define STANDIN_PTO_COMM_INST_HPP
#include "pto/comm/comm_types.hpp"
#include "pto/cpu/comm/TNotify.hpp"
#include "pto/cpu/comm/TWait.hpp"
#include "pto/cpu/comm/TTest.hpp"
#include "pto/cpu/comm/TPut.hpp"
#include "pto/cpu/comm/TBroadcast.hpp"
#include "pto/cpu/comm/TScatter.hpp"
#include "pto/cpu/comm/TGather.hpp"
#include "pto/cpu/comm/TReduce.hpp"
#include "pto/cpu/TPrefetchAsync.hpp"

namespace pto {
namespace comm {
template <typename S>
PTO_INST void TNOTIFY(S& sig, int32_t value, NotifyOp op) { ::pto::comm::TNOTIFY_IMPL(sig, value, op); }
template <typename S>
PTO_INST void TWAIT(S& sig, int32_t value, WaitCmp cmp) { ::pto::comm::TWAIT_IMPL(sig, value, cmp); }
template <typename S>
PTO_INST bool TTEST(S& sig, int32_t value, WaitCmp cmp) { return ::pto::comm::TTEST_IMPL(sig, value, cmp); }
template <AtomicType atomicType = AtomicType::AtomicNone, typename GD, typename GS, typename TileData>
PTO_INST void TPUT(GD& dst, GS& src, TileData& tile) {
    ::pto::comm::TPUT_IMPL<GD, GS, TileData, atomicType>(dst, src, tile);
}
template <typename GD, typename GS, typename TileData>
PTO_INST void TGET(GD& dst, GS& src, TileData& tile) { ::pto::comm::TGET_IMPL(dst, src, tile); }
template <DmaEngine engine = DmaEngine::SDMA, typename GD, typename GS>
PTO_INST AsyncEvent TPUT_ASYNC(GD& dst, GS& src, const AsyncSession& session) {
    return ::pto::comm::TPUT_ASYNC_IMPL<engine>(dst, src, session);
}
template <DmaEngine engine = DmaEngine::SDMA, typename GD, typename GS>
PTO_INST AsyncEvent TGET_ASYNC(GD& dst, GS& src, const AsyncSession& session) {
    return ::pto::comm::TGET_ASYNC_IMPL<engine>(dst, src, session);
}
template <typename PG, typename G, typename TileData>
PTO_INST void TBROADCAST(PG& pg, G& src, TileData& tile) { ::pto::comm::TBROADCAST_IMPL(pg, src, tile); }
template <typename PG, typename G, typename TileData>
PTO_INST void TSCATTER(PG& pg, G& src, TileData& tile) { ::pto::comm::TSCATTER_IMPL(pg, src, tile); }
template <typename PG, typename G, typename TileData>
PTO_INST void TGATHER(PG& pg, G& dst, TileData& ping, TileData& pong) { ::pto::comm::TGATHER_IMPL(pg, dst, ping, pong); }
template <typename PG, typename G, typename TileData>
PTO_INST void TREDUCE(PG& pg, G& dst, TileData& acc, TileData& recv, ReduceOp op) {
    ::pto::comm::TREDUCE_IMPL(pg, dst, acc, recv, op);
}
}  // namespace comm

template <SyncCoreType CoreType = SyncCoreType::AIVOnly>
PTO_INST void SYNCALL() { SYNCALL_IMPL<CoreType>(); }
// the soft form over a GM workspace: usedCores 0 means every block of the launch
enum class SyncAllMode { Hard, Soft };
template <SyncAllMode Mode, SyncCoreType CoreType = SyncCoreType::AIVOnly, typename GlobalData>
PTO_INST void SYNCALL(GlobalData& gmWorkspace, int32_t usedCores = 0) {
    SYNCALL_SOFT_IMPL<CoreType>(gmWorkspace.data(), usedCores);
}
}  // namespace pto
#endif
