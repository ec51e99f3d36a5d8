// Stand-in (shmcomm tests): gives up silently after a few sweeps, as a sequential simulation's
// wait has to (shmcomm's shadow must replace it for a concurrent run to be correct).
#ifndef STANDIN_TWAIT_HPP
#define STANDIN_TWAIT_HPP
#include "pto/comm/comm_types.hpp"
namespace pto {
namespace comm {
template <typename GlobalSignalData>
inline void TWAIT_IMPL(GlobalSignalData& signalData, int32_t cmpValue, comm::WaitCmp cmp)
{
    (void)signalData;
    (void)cmpValue;
    (void)cmp;
}
}  // namespace comm
}  // namespace pto
#endif
