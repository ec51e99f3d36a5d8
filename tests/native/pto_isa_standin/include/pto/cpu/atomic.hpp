// Stand-in (shmcomm tests): the CPU back end's AtomicAdd lock, one std::mutex per process.
#ifndef STANDIN_CPU_ATOMIC_HPP
#define STANDIN_CPU_ATOMIC_HPP
#include <mutex>

namespace pto::cpu {
#if defined(__CPU_SIM)
PTO_INTERNAL std::mutex& AtomicAddMutex()
{
    static std::mutex mutex;
    return mutex;
}
#endif
}  // namespace pto::cpu
#endif
