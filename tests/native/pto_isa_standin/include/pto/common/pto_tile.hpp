// Stand-in (shmcomm tests): 5-D global tensors and row-major tiles, shaped as a CPU simulation
// keeps them (a tile is a pointer to its buffer: copies of it share the buffer).
#ifndef STANDIN_PTO_TILE_HPP
#define STANDIN_PTO_TILE_HPP
#include <cstddef>
#include <cstdint>

namespace pto {
enum class AtomicType { AtomicNone = 0, AtomicAdd = 1 };
enum class TileType { Vec, Mat, Left, Right, Acc };
enum class SLayout { NoneBox, RowMajor, ColMajor };
enum class STPhase : uint8_t { Unspecified = 0x0, Partial = 0x2, Final = 0x3 };
enum class ReluPreMode : uint8_t { NoRelu = 0, NormalRelu = 1 };

template <int... D> struct Shape { int64_t v[5] = {D...}; };
template <int... D> struct Stride { int64_t v[5] = {D...}; };

template <typename T, typename S, typename St>
struct GlobalTensor {
    using RawDType = T;
    using DType = T;
    T* ptr;
    S shape{};
    St stride{};
    GlobalTensor() : ptr(nullptr) {}
    explicit GlobalTensor(T* p) : ptr(p) {}
    T* data() { return ptr; }
    int64_t GetShape(int i) const { return shape.v[i]; }
    int64_t GetStride(int i) const { return stride.v[i]; }
};

// the block's local memory, a thread-local arena as a CPU simulation keeps it
inline thread_local unsigned char standin_local[64 * 1024];
inline thread_local size_t standin_top = 0;

// VR x VC: the valid region (what a copy moves), row-major, at the tile's Cols stride
template <typename T, int R, int C, TileType L = TileType::Vec, int VR = R, int VC = C>
struct Tile {
    using DType = T;
    using TileDType = T*;
    static constexpr TileType Loc = L;
    static constexpr int Rows = R;
    static constexpr int Cols = C;
    static constexpr bool isRowMajor = true;
    static constexpr SLayout SFractal = SLayout::NoneBox;
    T* data_ = nullptr;
    TileDType& data() {
        if (data_ == nullptr) {  // (the arena wraps: a kernel's tiles fit in it)
            if (standin_top + GetSizeInBytes() > sizeof(standin_local)) standin_top = 0;
            data_ = reinterpret_cast<T*>(standin_local + standin_top);
            standin_top = (standin_top + GetSizeInBytes() + 63) / 64 * 64;
        }
        return data_;
    }
    void assignData(TileDType d) { data_ = d; }
    static constexpr size_t GetSizeInBytes() { return sizeof(T) * R * C; }
    static constexpr unsigned GetValidRow() { return VR; }
    static constexpr unsigned GetValidCol() { return VC; }
};

namespace comm {
using Signal = GlobalTensor<int32_t, Shape<1, 1, 1, 1, 1>, Stride<1, 1, 1, 1, 1>>;
}
}  // namespace pto
#endif
