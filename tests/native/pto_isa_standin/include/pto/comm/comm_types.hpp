// Stand-in (shmcomm tests): the comm enums.
#ifndef STANDIN_COMM_TYPES_HPP
#define STANDIN_COMM_TYPES_HPP
#include <cstdint>
namespace pto {
namespace comm {
enum class NotifyOp : uint8_t { AtomicAdd = 0, Set = 1 };
enum class WaitCmp : uint8_t { EQ = 0, NE = 1, GT = 2, GE = 3, LT = 4, LE = 5 };
}  // namespace comm
}  // namespace pto
#endif
