// Stand-in (shmcomm tests): the comm enums.
#ifndef STANDIN_COMM_TYPES_HPP
#define STANDIN_COMM_TYPES_HPP
#include <cstdint>
namespace pto {
namespace comm {
enum class NotifyOp : uint8_t { AtomicAdd = 0, Set = 1 };
enum class WaitCmp : uint8_t { EQ = 0, NE = 1, GT = 2, GE = 3, LT = 4, LE = 5 };
enum class DmaEngine : uint8_t { SDMA = 0, URMA = 1, RDMA = 2 };
// what an asynchronous copy runs in (the fields the URMA harness fills)
struct AsyncSession {
    DmaEngine engine{DmaEngine::SDMA};
    bool valid{false};
    uint8_t* contextGm{nullptr};
    uint32_t destRankId{0};
    uint32_t myPe{0};
};
}  // namespace comm
}  // namespace pto
#endif
