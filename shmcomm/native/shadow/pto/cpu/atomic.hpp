// shmcomm's shadow of pto-isa's pto/cpu/atomic.hpp (written by shmcomm, no pto-isa code).
// pto-isa's CPU back end makes every AtomicAdd (TSTORE<AtomicAdd>, GlobalTensor::AddToElement)
// a read-modify-write under AtomicAddMutex(), one std::mutex per process. shmcomm's ranks are
// processes that add into each other's windows, where a2a3's atomic adds are atomic at GM: inside
// a shmcomm launch AtomicAddMutex() is therefore one process-shared mutex of the run, kept in
// rank 0's signal matrix (shmcomm.kernels.layout's `native_atomic` region: a state word, then the
// pthread mutex). Outside a launch it is pto-isa's own.
#ifndef SHMCOMM_SHADOW_CPU_ATOMIC_HPP
#define SHMCOMM_SHADOW_CPU_ATOMIC_HPP

#define AtomicAddMutex pto_isa_cpu_AtomicAddMutex
#include_next <pto/cpu/atomic.hpp>
#undef AtomicAddMutex

#if defined(__CPU_SIM)
#include <pthread.h>
#include <sched.h>

#include <mutex>
#include <stdexcept>

#include "shmcomm/runtime.hpp"

namespace shmcomm {
namespace pto_isa {

// words of rank 0's signal matrix (shmcomm/kernels/layout.py: NATIVE_ATOMIC; a test keeps the two equal)
constexpr uint64_t NATIVE_ATOMIC_WORD = 352;
constexpr int32_t MUTEX_UNSET = 0, MUTEX_INITIALIZING = 1, MUTEX_READY = 2;
static_assert(sizeof(std::mutex) == sizeof(pthread_mutex_t) && sizeof(pthread_mutex_t) <= 56,
              "std::mutex must be a pthread mutex (libstdc++, libc++ on Linux) that fits the region");

// The run's process-shared mutex: the first caller initializes it (the words start zeroed, and
// rt.reset_signals() zeroes them again between launches), the others wait for that, bounded by
// the run's abort flag.
inline std::mutex& shared_atomic_mutex(const shmcomm_block* b) {
    auto* base = reinterpret_cast<unsigned char*>(static_cast<uintptr_t>(b->bases[0])) + 4 * NATIVE_ATOMIC_WORD;
    auto* state = reinterpret_cast<int32_t*>(base);
    auto* m = reinterpret_cast<pthread_mutex_t*>(base + 8);
    int32_t s = __atomic_load_n(state, __ATOMIC_ACQUIRE);
    if (s != MUTEX_READY) {
        int32_t unset = MUTEX_UNSET;
        if (__atomic_compare_exchange_n(state, &unset, MUTEX_INITIALIZING, false, __ATOMIC_ACQ_REL,
                                        __ATOMIC_ACQUIRE)) {
            pthread_mutexattr_t attr;
            pthread_mutexattr_init(&attr);
            pthread_mutexattr_setpshared(&attr, PTHREAD_PROCESS_SHARED);
            pthread_mutex_init(m, &attr);
            pthread_mutexattr_destroy(&attr);
            __atomic_store_n(state, MUTEX_READY, __ATOMIC_RELEASE);
        } else {
            while (__atomic_load_n(state, __ATOMIC_ACQUIRE) != MUTEX_READY) {
                if (*b->abort_word != 0) {
                    throw std::runtime_error("AtomicAdd: the run aborted while another block set up its lock");
                }
                sched_yield();
            }
        }
    }
    return *reinterpret_cast<std::mutex*>(m);
}

}  // namespace pto_isa
}  // namespace shmcomm

namespace pto::cpu {

PTO_INTERNAL std::mutex& AtomicAddMutex()
{
    const shmcomm_block* b = shmcomm::native::tls_block;
    return b == nullptr ? pto_isa_cpu_AtomicAddMutex() : shmcomm::pto_isa::shared_atomic_mutex(b);
}

}  // namespace pto::cpu
#endif  // __CPU_SIM

#endif
