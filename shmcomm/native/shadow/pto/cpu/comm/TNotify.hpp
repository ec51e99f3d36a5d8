// shmcomm's shadow of pto-isa's pto/cpu/comm/TNotify.hpp (written by shmcomm, no pto-isa code).
// pto-isa's own file is included with its TNOTIFY_IMPL renamed away; TNOTIFY_IMPL, with the
// signature pto-isa's TNOTIFY calls, is then shmcomm's: a real atomic on the shared word that
// wakes its futex sleepers (eager), or shmcomm's TNOTIFY (hazard, schedule, race detector).
#ifndef SHMCOMM_SHADOW_TNOTIFY_HPP
#define SHMCOMM_SHADOW_TNOTIFY_HPP

#define TNOTIFY_IMPL pto_isa_cpu_TNOTIFY_IMPL
#include_next <pto/cpu/comm/TNotify.hpp>
#undef TNOTIFY_IMPL

#include "shmcomm_shadow/comm.hpp"

namespace pto {
namespace comm {

template <typename GlobalSignalData>
PTO_INTERNAL void TNOTIFY_IMPL(GlobalSignalData& dstSignalData, int32_t value, NotifyOp op,
                               const char* file = __builtin_FILE(), int line = __builtin_LINE())
{
    shmcomm::native::mark_pc();  // the user's call site, resolved when a report needs it
    shmcomm::pto_isa::notify(dstSignalData, value, static_cast<int32_t>(op), file, line);
}

}  // namespace comm
}  // namespace pto

#endif
