// Stand-in (shmcomm tests): always true.
#ifndef STANDIN_TTEST_HPP
#define STANDIN_TTEST_HPP
#include "pto/comm/comm_types.hpp"
namespace pto {
namespace comm {
template <typename GlobalSignalData>
PTO_INTERNAL bool TTEST_IMPL(GlobalSignalData& signalData, int32_t cmpValue, WaitCmp cmp)
{
    (void)signalData;
    (void)cmpValue;
    (void)cmp;
    return true;
}
}  // namespace comm
}  // namespace pto
#endif
