// shmcomm's shadow of pto-isa's pto/cpu/comm/TTest.hpp (written by shmcomm, no pto-isa code).
// TTEST_IMPL is shmcomm's: one sweep of acquire loads; a false result (and every bridged call)
// goes to shmcomm's TTEST, which publishes a TTEST loop as a wait for the deadlock watch.
#ifndef SHMCOMM_SHADOW_TTEST_HPP
#define SHMCOMM_SHADOW_TTEST_HPP

#define TTEST_IMPL pto_isa_cpu_TTEST_IMPL
#include_next <pto/cpu/comm/TTest.hpp>
#undef TTEST_IMPL

#include "shmcomm_shadow/comm.hpp"

namespace pto {
namespace comm {

template <typename GlobalSignalData>
PTO_INTERNAL bool TTEST_IMPL(GlobalSignalData& signalData, int32_t cmpValue, WaitCmp cmp,
                             const char* file = __builtin_FILE(), int line = __builtin_LINE())
{
    shmcomm::native::mark_pc();  // the user's call site, resolved when a report needs it
    return shmcomm::pto_isa::test(signalData, cmpValue, static_cast<int32_t>(cmp), file, line);
}

}  // namespace comm
}  // namespace pto

#endif
