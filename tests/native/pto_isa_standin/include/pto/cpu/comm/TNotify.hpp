// Stand-in (shmcomm tests): a plain store or add, as an unsynchronized CPU simulation.
#ifndef STANDIN_TNOTIFY_HPP
#define STANDIN_TNOTIFY_HPP
#include "pto/common/pto_tile.hpp"
#include "pto/comm/comm_types.hpp"
namespace pto {
namespace comm {
template <typename GlobalSignalData>
PTO_INTERNAL void TNOTIFY_IMPL(GlobalSignalData& dstSignalData, int32_t value, NotifyOp op)
{
    if (op == NotifyOp::AtomicAdd) *dstSignalData.data() += value;
    else *dstSignalData.data() = value;
}
}  // namespace comm
}  // namespace pto
#endif
