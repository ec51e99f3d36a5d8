// Stand-in (shmcomm tests): the public tile copies, calling the back end's *_IMPL as pto-isa's
// pto/common/pto_instr.hpp does.
#ifndef STANDIN_PTO_INSTR_HPP
#define STANDIN_PTO_INSTR_HPP
#include "pto/cpu/TLoad.hpp"
#include "pto/cpu/TStore.hpp"

namespace pto {
template <typename TileData, typename GlobalData>
PTO_INST void TLOAD(TileData& dst, GlobalData& src) { TLOAD_IMPL(dst, src); }

template <typename TileData, typename GlobalData>
PTO_INST void TSTORE(GlobalData& dst, TileData& src)
{
    TSTORE_IMPL<TileData, GlobalData, AtomicType::AtomicNone>(dst, src);
}

template <typename TileData, typename GlobalData, AtomicType atomicType>
PTO_INST void TSTORE(GlobalData& dst, TileData& src)
{
    TSTORE_IMPL<TileData, GlobalData, atomicType>(dst, src);
}
}  // namespace pto
#endif
