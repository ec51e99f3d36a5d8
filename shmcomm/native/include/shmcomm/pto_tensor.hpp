// Global tensors, UB tiles and the tile data instructions (TASSIGN, TLOAD, TSTORE): part of
// shmcomm/pto.hpp, not included on its own.
#pragma once

namespace pto {

constexpr int DYNAMIC = -1;

enum class Layout { ND, DN, NZ };
enum class TileType { Vec, Mat, Left, Right, Acc };
enum class BLayout { RowMajor, ColMajor };
enum class SLayout { NoneBox, RowMajor, ColMajor };
enum class AtomicType { AtomicNone = 0, AtomicAdd = 1 };

namespace detail {
// Five dims; the static ones fixed, the DYNAMIC ones given to the constructor in order (or
// all five given).
template <int... Ds> struct Dims {
    static_assert(sizeof...(Ds) >= 1 && sizeof...(Ds) <= 5, "pto: Shape/Stride take 1 to 5 dims");
    int64_t v[5];
    Dims() {
        constexpr int given[] = {Ds...};
        constexpr int n = sizeof...(Ds);
        for (int i = 0; i < 5; ++i) v[i] = 1;
        for (int i = 0; i < n; ++i) v[5 - n + i] = given[i] == DYNAMIC ? 1 : given[i];
    }
    template <typename... A, typename = std::enable_if_t<(sizeof...(A) > 0) && (std::is_integral_v<A> && ...)>>
    explicit Dims(A... args) : Dims() {
        constexpr int given[] = {Ds...};
        constexpr int n = sizeof...(Ds);
        const int64_t vals[] = {static_cast<int64_t>(args)...};
        constexpr int m = sizeof...(A);
        if constexpr (m == n) {
            for (int i = 0; i < n; ++i) v[5 - n + i] = vals[i];
        } else {
            int k = 0;
            for (int i = 0; i < n && k < m; ++i) {
                if (given[i] == DYNAMIC) v[5 - n + i] = vals[k++];
            }
        }
    }
    int64_t operator[](int i) const { return v[i]; }
};
}  // namespace detail

template <int... Ds> struct Shape : detail::Dims<Ds...> {
    using detail::Dims<Ds...>::Dims;
};

template <int... Ds> struct Stride : detail::Dims<Ds...> {
    using detail::Dims<Ds...>::Dims;
};

// `shape` elements of T at `data` (a __gm__ pointer), with strides in elements; the last dim is
// contiguous. The data instructions see it as rows x cols (cols: the last dim).
template <typename T, typename ShapeT = Shape<1, 1, 1, 1, DYNAMIC>, typename StrideT = Stride<1, 1, 1, 1, 1>,
          Layout L = Layout::ND>
struct GlobalTensor {
    using DType = T;
    using Shape = ShapeT;
    using Stride = StrideT;
    T* ptr;
    ShapeT shape;
    StrideT stride;

    GlobalTensor() : ptr(nullptr), shape(), stride() {}
    explicit GlobalTensor(T* p) : ptr(p), shape(), stride() { dense_if_default(); }
    GlobalTensor(T* p, const ShapeT& s) : ptr(p), shape(s), stride() { dense_if_default(); }
    GlobalTensor(T* p, const ShapeT& s, const StrideT& st) : ptr(p), shape(s), stride(st) {}

    T* data() const { return ptr; }
    int64_t GetShape(int i) const { return shape.v[i]; }
    int64_t GetStride(int i) const { return stride.v[i]; }
    int64_t cols() const { return shape.v[4]; }
    int64_t rows() const { return shape.v[0] * shape.v[1] * shape.v[2] * shape.v[3]; }

    // element (row r, col c) of the rows x cols view
    T* at(int64_t r, int64_t c) const {
        int64_t idx[4];
        int64_t rem = r;
        for (int d = 3; d >= 0; --d) {
            idx[d] = rem % shape.v[d];
            rem /= shape.v[d];
        }
        int64_t off = c * stride.v[4];
        for (int d = 0; d < 4; ++d) off += idx[d] * stride.v[d];
        return ptr + off;
    }
    bool rows_dense() const {  // row r starts at ptr + r * row_stride for every r
        return shape.v[0] * shape.v[1] * shape.v[2] <= 1 ||
               (stride.v[2] == stride.v[3] * shape.v[3] && stride.v[1] == stride.v[2] * shape.v[2] &&
                stride.v[0] == stride.v[1] * shape.v[1]);
    }

  private:
    void dense_if_default() {
        // a default-constructed Stride of all 1s over a shape with more than one row: dense
        bool ones = true;
        for (int i = 0; i < 5; ++i) ones = ones && stride.v[i] == 1;
        if (ones) {
            int64_t s = 1;
            for (int i = 4; i >= 0; --i) {
                stride.v[i] = s;
                s *= shape.v[i];
            }
        }
    }
};

// A block-local UB tile: R x C elements of T, row-major, with a valid region (VR / VC, or
// DYNAMIC: given to the constructor). TASSIGN places it at a byte offset of the block's UB.
template <TileType Kind, typename T, int R, int C, BLayout BL = BLayout::RowMajor, int VR = R, int VC = C,
          SLayout SL = SLayout::NoneBox, int Fractal = 512>
struct Tile {
    using DType = T;
    static constexpr int Rows = R;
    static constexpr int Cols = C;
    static constexpr uint64_t Bytes = sizeof(T) * R * C;
    static_assert(Bytes <= shmcomm::native::UB_BYTES, "pto::Tile larger than a block's UB");
    T* data_;
    int valid_row;
    int valid_col;

    Tile() : data_(nullptr), valid_row(VR < 0 ? R : VR), valid_col(VC < 0 ? C : VC) {}
    Tile(int vr, int vc) : data_(nullptr), valid_row(vr), valid_col(vc) {
        if (vr < 0 || vr > R || vc < 0 || vc > C) shmcomm::native::fail("Tile: valid shape outside the tile");
    }
    explicit Tile(int vc) : Tile(R, vc) {}

    T* data() {
        if (data_ == nullptr) {  // never assigned: its own bytes from the top of the UB
            namespace n = shmcomm::native;
            uint64_t need = (Bytes + 63) / 64 * 64;
            if (need > n::tls_ub_top) n::fail("Tile: the block's UB is full (192 KiB)");
            n::tls_ub_top -= need;
            data_ = reinterpret_cast<T*>(n::tls_ub + n::tls_ub_top);
        }
        return data_;
    }
    int GetValidRow() const { return valid_row; }
    int GetValidCol() const { return valid_col; }
    void SetValidShape(int vr, int vc) { valid_row = vr; valid_col = vc; }
};

template <typename TileT>
inline void TASSIGN(TileT& tile, uint64_t ub_addr) {
    namespace n = shmcomm::native;
    if (ub_addr + TileT::Bytes > n::UB_BYTES) {
        n::fail("TASSIGN: the tile at UB offset " + std::to_string(ub_addr) + " overruns the block's UB");
    }
    tile.data_ = reinterpret_cast<typename TileT::DType*>(n::tls_ub + ub_addr);
}

namespace detail {
template <typename TileT, typename G>
inline void tensor_args(uint64_t* a, TileT& tile, const G& g) {
    namespace n = shmcomm::native;
    a[0] = n::addr(tile.data());
    a[1] = static_cast<uint64_t>(n::dtype_code<typename TileT::DType>());
    a[2] = TileT::Rows;
    a[3] = TileT::Cols;
    a[4] = static_cast<uint64_t>(tile.valid_row);
    a[5] = static_cast<uint64_t>(tile.valid_col);
    a[6] = n::addr(g.ptr);
    a[7] = static_cast<uint64_t>(n::dtype_code<typename G::DType>());
    for (int i = 0; i < 5; ++i) a[8 + i] = static_cast<uint64_t>(g.shape.v[i]);
    for (int i = 0; i < 5; ++i) a[13 + i] = static_cast<uint64_t>(g.stride.v[i]);
}

template <typename TileT, typename G>
inline void check_fits(const char* op, TileT& tile, const G& g) {
    if (g.cols() > TileT::Cols || g.rows() > TileT::Rows) {
        shmcomm::native::fail(std::string(op) + ": tensor of " + std::to_string(g.rows()) + "x" +
                              std::to_string(g.cols()) + " does not fit the " + std::to_string(TileT::Rows) + "x" +
                              std::to_string(TileT::Cols) + " tile");
    }
    (void)tile;
}
}  // namespace detail

// MTE2: GM -> UB (eager: at once).
template <typename TileT, typename G>
inline void TLOAD(TileT& tile, const G& src, const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
    namespace n = shmcomm::native;
    if (n::bridged()) {
        uint64_t a[18];
        detail::tensor_args(a, tile, src);
        n::call(n::OP_LOAD, a, 18, file, line);
        return;
    }
    n::at(file, line);
    detail::check_fits("TLOAD", tile, src);
    auto* t = tile.data();
    for (int64_t r = 0; r < src.rows(); ++r) {
        std::memcpy(t + r * TileT::Cols, src.at(r, 0), sizeof(typename G::DType) * src.cols());
    }
}

// MTE3: UB -> GM (eager: at once; AtomicAdd goes through shmcomm's locked add).
template <typename TileT, typename G>
inline void shmcomm_store(G& dst, TileT& tile, AtomicType atomic, const char* file, int line) {
    namespace n = shmcomm::native;
    if (n::bridged() || atomic != AtomicType::AtomicNone) {
        uint64_t a[19];
        detail::tensor_args(a, tile, dst);
        a[18] = static_cast<uint64_t>(atomic);
        n::call(n::OP_STORE, a, 19, file, line);
        return;
    }
    n::at(file, line);
    detail::check_fits("TSTORE", tile, dst);
    auto* t = tile.data();
    for (int64_t r = 0; r < dst.rows(); ++r) {
        std::memcpy(dst.at(r, 0), t + r * TileT::Cols, sizeof(typename G::DType) * dst.cols());
    }
}

template <AtomicType A = AtomicType::AtomicNone, typename G, typename TileT>
inline void TSTORE(G& dst, TileT& tile, const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
    shmcomm_store(dst, tile, A, file, line);
}

template <typename TileT, typename G, AtomicType A = AtomicType::AtomicNone>
inline void TSTORE_IMPL(G& dst, TileT& tile, const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
    shmcomm_store(dst, tile, A, file, line);
}

}  // namespace pto

using pto::AtomicType;
using pto::TASSIGN;
using pto::TLOAD;
using pto::TSTORE;
using pto::TSTORE_IMPL;
