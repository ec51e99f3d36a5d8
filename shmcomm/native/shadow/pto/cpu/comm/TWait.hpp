// shmcomm's shadow of pto-isa's pto/cpu/comm/TWait.hpp (written by shmcomm, no pto-isa code).
// pto-isa's TWAIT_IMPL gives up silently after PTO_CPU_SIM_TWAIT_MAX_SPINS sweeps; shmcomm's
// never does: it polls, then waits with shmcomm's registered futex wait (the deadlock watch
// sees it; the run's abort and wait_timeout end it with shmcomm's errors), or calls shmcomm's
// TWAIT when the block's execution model observes instructions.
#ifndef SHMCOMM_SHADOW_TWAIT_HPP
#define SHMCOMM_SHADOW_TWAIT_HPP

#define TWAIT_IMPL pto_isa_cpu_TWAIT_IMPL
#include_next <pto/cpu/comm/TWait.hpp>
#undef TWAIT_IMPL

#include "shmcomm_shadow/comm.hpp"

namespace pto {
namespace comm {

template <typename GlobalSignalData>
inline void TWAIT_IMPL(GlobalSignalData& signalData, int32_t cmpValue, comm::WaitCmp cmp,
                       const char* file = __builtin_FILE(), int line = __builtin_LINE())
{
    shmcomm::native::mark_pc();  // the user's call site, resolved when a report needs it
    shmcomm::pto_isa::wait(signalData, cmpValue, static_cast<int32_t>(cmp), file, line);
}

}  // namespace comm
}  // namespace pto

#endif
