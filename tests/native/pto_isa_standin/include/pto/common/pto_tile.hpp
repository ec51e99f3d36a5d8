// Stand-in (shmcomm tests): 5-D global tensors and row-major vector tiles.
#ifndef STANDIN_PTO_TILE_HPP
#define STANDIN_PTO_TILE_HPP
#include <cstdint>

namespace pto {
enum class AtomicType { AtomicNone = 0, AtomicAdd = 1 };

template <int... D> struct Shape { int64_t v[5] = {D...}; };
template <int... D> struct Stride { int64_t v[5] = {D...}; };

template <typename T, typename S, typename St>
struct GlobalTensor {
    using RawDType = T;
    using DType = T;
    T* ptr;
    S shape{};
    St stride{};
    explicit GlobalTensor(T* p) : ptr(p) {}
    T* data() { return ptr; }
    int64_t GetShape(int i) const { return shape.v[i]; }
    int64_t GetStride(int i) const { return stride.v[i]; }
};

// thread-local "UB", as a CPU simulation keeps it
template <typename T, int R, int C>
struct Tile {
    using DType = T;
    static constexpr int Rows = R;
    static constexpr int Cols = C;
    alignas(64) T buf[R * C];
    T* data() { return buf; }
    static constexpr unsigned GetValidRow() { return R; }
    static constexpr unsigned GetValidCol() { return C; }
};

namespace comm {
using Signal = GlobalTensor<int32_t, Shape<1, 1, 1, 1, 1>, Stride<1, 1, 1, 1, 1>>;
}
}  // namespace pto
#endif
