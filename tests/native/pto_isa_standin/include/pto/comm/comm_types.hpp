// Stand-in (shmcomm tests): the comm enums, the root collectives' group, the asynchronous copies'
// session (the fields the SDMA shadow and the URMA harness fill) and event.
#ifndef STANDIN_COMM_TYPES_HPP
#define STANDIN_COMM_TYPES_HPP
#include <cstdint>
namespace pto {
namespace comm {
enum class NotifyOp : uint8_t { AtomicAdd = 0, Set = 1 };
enum class WaitCmp : uint8_t { EQ = 0, NE = 1, GT = 2, GE = 3, LT = 4, LE = 5 };
enum class ReduceOp : uint8_t { Sum = 0, Max = 1, Min = 2 };
enum class DmaEngine : uint8_t { SDMA = 0, URMA = 1, RDMA = 2 };

template <typename G>
struct ParallelGroup {
    G* tensors;
    int nranks;
    int rootIdx;
    ParallelGroup(G* t, int n, int root) : tensors(t), nranks(n), rootIdx(root) {}
    int GetRootIdx() const { return rootIdx; }
    int GetSize() const { return nranks; }
    G& operator[](int i) { return tensors[i]; }
};

namespace sdma {
struct SdmaBaseConfig {
    uint64_t block_bytes;
    uint64_t comm_block_offset;
    uint32_t queue_num;
};
constexpr uint32_t kAutoChannelGroupIdx = UINT32_MAX;
constexpr uint64_t kDefaultSdmaBlockBytes = 1024 * 1024;
namespace detail {
struct SdmaRuntimeContext {
    uint64_t nextPostId;
};
}  // namespace detail
}  // namespace sdma

struct AsyncSession {
    DmaEngine engine{DmaEngine::SDMA};
    bool valid{false};
    uint8_t* contextGm{nullptr};
    uint32_t syncId{0};
    uint32_t channelGroupIdx{sdma::kAutoChannelGroupIdx};
    uint64_t blockBytes{sdma::kDefaultSdmaBlockBytes};
    uint64_t commBlockOffset{0};
    uint32_t queueNum{1};
    mutable sdma::detail::SdmaRuntimeContext sdmaRuntimeCtx{};
    uint32_t destRankId{0};
    uint32_t myPe{0};
};

struct AsyncEvent {
    uint64_t handle{0};
    DmaEngine engine{DmaEngine::SDMA};
    constexpr AsyncEvent() = default;
    constexpr AsyncEvent(uint64_t h, DmaEngine e) : handle(h), engine(e) {}
    constexpr bool valid() const { return handle != 0; }
    inline bool Wait(const AsyncSession& session) const;
    inline bool Test(const AsyncSession& session) const;
};
}  // namespace comm
}  // namespace pto
#endif
