// shmcomm's shadow of pto-isa's pto/cpu/comm/TReduce.hpp (written by shmcomm, no pto-isa code).
// TREDUCE_IMPL is shmcomm's: the root's tensor folded with every other member's in index order
// (Sum / Max / Min), as a2a3's AIV path (shmcomm_shadow/collectives.hpp): natively in eager
// mode, shmcomm's TREDUCE when the block's execution model observes instructions. The CCU forms
// stay pto-isa's.
#ifndef SHMCOMM_SHADOW_TREDUCE_HPP
#define SHMCOMM_SHADOW_TREDUCE_HPP

#define TREDUCE_IMPL pto_isa_cpu_TREDUCE_IMPL
#include_next <pto/cpu/comm/TReduce.hpp>
#undef TREDUCE_IMPL

#include "shmcomm_shadow/collectives.hpp"

namespace pto {
namespace comm {

template <typename ParallelGroupType, typename GlobalDstData, typename TileData>
PTO_INTERNAL void TREDUCE_IMPL(ParallelGroupType& parallelGroup, GlobalDstData& dstGlobalData, TileData& accTileData,
                               TileData& recvTileData, pto::comm::ReduceOp op, const char* file = __builtin_FILE(),
                               int line = __builtin_LINE())
{
    shmcomm::native::mark_pc();  // the user's call site, resolved when a report needs it
    shmcomm::pto_isa::reduce(parallelGroup, dstGlobalData, static_cast<int32_t>(op), file, line, accTileData,
                             recvTileData);
}

template <typename ParallelGroupType, typename GlobalDstData, typename TileData>
PTO_INTERNAL void TREDUCE_IMPL(ParallelGroupType& parallelGroup, GlobalDstData& dstGlobalData, TileData& accTileData,
                               TileData& pingTile, TileData& pongTile, pto::comm::ReduceOp op,
                               const char* file = __builtin_FILE(), int line = __builtin_LINE())
{
    shmcomm::native::mark_pc();  // the user's call site, resolved when a report needs it
    shmcomm::pto_isa::reduce(parallelGroup, dstGlobalData, static_cast<int32_t>(op), file, line, accTileData,
                             pingTile, pongTile);
}

}  // namespace comm
}  // namespace pto

#endif
