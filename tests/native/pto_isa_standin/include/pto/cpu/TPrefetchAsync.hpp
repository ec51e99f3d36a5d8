// Stand-in (shmcomm tests): a sequential simulation's async events, done at once.
#ifndef STANDIN_TPREFETCH_ASYNC_HPP
#define STANDIN_TPREFETCH_ASYNC_HPP
#include "pto/comm/comm_types.hpp"
#include "pto/comm/async_common/async_types.hpp"
namespace pto {
namespace comm {
PTO_INTERNAL bool AsyncEvent::Wait(const AsyncSession& /*session*/) const { return true; }
PTO_INTERNAL bool AsyncEvent::Test(const AsyncSession& /*session*/) const { return true; }
}  // namespace comm
}  // namespace pto
#endif
