// shmcomm's comm instructions over a pto-isa checkout's tensor types (written by shmcomm; no
// pto-isa code). Included by the shadow files in pto/cpu/comm/ after pto-isa's own file, whose
// *_IMPL is renamed away: pto-isa's public TNOTIFY / TWAIT / TTEST / TPUT / TGET then call these.
//
// Eager runs natively on shmcomm's runtime (atomics on the shared words, the registered futex
// wait that never gives up silently, true atomic adds); whenever the block's execution model
// observes instructions (hazard, schedule, the race detector) each one calls shmcomm's Python
// instruction through the bridge, as shmcomm/pto.hpp's do.
#pragma once

#include <cstring>
#include <type_traits>

#include "shmcomm/runtime.hpp"

namespace shmcomm {
namespace pto_isa {

namespace n = shmcomm::native;

// A pto-isa GlobalTensor seen as rows x cols words (cols: the last dim), as the runtime's wait
// and the bridge see a signal.
template <typename T>
struct View {
    T* ptr;
    int64_t shape[5];
    int64_t stride[5];

    template <typename G>
    explicit View(G& g) : ptr(reinterpret_cast<T*>(g.data())) {
        for (int i = 0; i < 5; ++i) {
            shape[i] = static_cast<int64_t>(g.GetShape(i));
            stride[i] = static_cast<int64_t>(g.GetStride(i));
        }
    }
    int64_t rows() const { return shape[0] * shape[1] * shape[2] * shape[3]; }
    int64_t cols() const { return shape[4]; }
    T* at(int64_t r, int64_t c) const {
        int64_t off = c * stride[4];
        for (int d = 3; d >= 0; --d) {
            off += (r % shape[d]) * stride[d];
            r /= shape[d];
        }
        return ptr + off;
    }
    int64_t row_stride() const { return rows() > 1 ? at(1, 0) - ptr : cols(); }
    // the outer dims collapse to one evenly strided row index (what shmcomm's Signal2D is)
    bool rows_dense() const {
        if (stride[4] != 1) return false;
        int64_t want = row_stride();
        for (int d = 3; d >= 0; --d) {
            if (shape[d] > 1 && stride[d] != want) return false;
            want *= shape[d];
        }
        return true;
    }
};

template <typename G>
inline View<int32_t> signal(G& g) {
    static_assert(sizeof(typename G::DType) == sizeof(int32_t), "pto::comm: a signal is 32-bit");
    return View<int32_t>(g);
}

inline void sig_args(uint64_t* a, const View<int32_t>& v, int32_t value, int32_t how) {
    if (!v.rows_dense()) n::fail("TWAIT: the signal's outer dims are not evenly strided");
    a[0] = n::addr(v.ptr);
    a[1] = static_cast<uint64_t>(v.rows());
    a[2] = static_cast<uint64_t>(v.cols());
    a[3] = static_cast<uint64_t>(v.row_stride());
    a[4] = static_cast<uint64_t>(static_cast<int64_t>(value));
    a[5] = static_cast<uint64_t>(how);
}

template <typename G>
inline void notify(G& g, int32_t value, int32_t op, const char* file, int line) {
    auto v = signal(g);
    if (n::bridged() || (op == 1 && n::tls_block != nullptr && n::tls_block->set_read_add)) {
        uint64_t a[6];
        sig_args(a, v, value, op);
        a[1] = a[2] = a[3] = 1;  // TNOTIFY writes the first element
        n::call(n::OP_NOTIFY, a, 6, file, line);
        return;
    }
    n::at(file, line);
    n::notify_word(v.ptr, value, op);
}

template <typename G>
inline void wait(G& g, int32_t value, int32_t cmp, const char* file, int line) {
    auto v = signal(g);
    if (n::bridged()) {
        uint64_t a[6];
        sig_args(a, v, value, cmp);
        n::call(n::OP_WAIT, a, 6, file, line);
        return;
    }
    n::at(file, line);
    n::wait_eager(v, value, cmp, v.rows_dense(), [&](uint64_t* a) { sig_args(a, v, value, cmp); }, file, line);
}

template <typename G>
inline bool test(G& g, int32_t value, int32_t cmp, const char* file, int line) {
    auto v = signal(g);
    if (!n::bridged()) {
        n::at(file, line);
        if (n::sweep(v, value, cmp)) return true;
    }
    // false (or bridged): shmcomm's TTEST, which also publishes a TTEST loop as a wait
    uint64_t a[6];
    sig_args(a, v, value, cmp);
    return n::call(n::OP_TEST, a, 6, file, line) != 0;
}

template <typename G>
inline void tensor12(uint64_t* a, G& g) {
    a[0] = n::addr(g.data());
    a[1] = static_cast<uint64_t>(n::dtype_code<std::remove_cv_t<typename G::RawDType>>());
    for (int i = 0; i < 5; ++i) a[2 + i] = static_cast<uint64_t>(g.GetShape(i));
    for (int i = 0; i < 5; ++i) a[7 + i] = static_cast<uint64_t>(g.GetStride(i));
}

// One element of an AtomicAdd copy: a real atomic add (pto-isa's CPU back end does a plain +=).
template <typename T>
inline void atomic_add(T* p, T v) {
    if constexpr (std::is_integral_v<T>) {
        __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST);
    } else {
        static_assert(sizeof(T) == 4 || sizeof(T) == 8, "TPUT<AtomicAdd>: 16-bit floats are not supported yet");
        using U = std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>;
        U* up = reinterpret_cast<U*>(p);
        U expected = __atomic_load_n(up, __ATOMIC_RELAXED);
        while (true) {
            T cur;
            std::memcpy(&cur, &expected, sizeof(U));
            T next = cur + v;
            U desired;
            std::memcpy(&desired, &next, sizeof(U));
            if (__atomic_compare_exchange_n(up, &expected, desired, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) break;
        }
    }
}

// TPUT / TGET (code OP_PUT / OP_GET): bridged through shmcomm's instruction with the staging
// tile; eager, element by element with a true atomic for AtomicAdd.
template <bool add, typename GD, typename GS, typename TileT>
inline void copy(int32_t code, GD& dst, GS& src, TileT& tile, const char* file, int line) {
    using TD = std::remove_cv_t<typename GD::RawDType>;
    using TS = std::remove_cv_t<typename GS::RawDType>;
    static_assert(sizeof(TD) == sizeof(TS), "TPUT/TGET: dst and src element sizes differ");
    View<TD> d(dst);
    View<TS> s(src);
    if (d.rows() != s.rows() || d.cols() != s.cols()) n::fail("TPUT/TGET: dst and src shapes differ");
    if (n::bridged()) {
        uint64_t a[31];
        tensor12(a, dst);
        tensor12(a + 12, src);
        a[24] = n::addr(tile.data());
        a[25] = static_cast<uint64_t>(n::dtype_code<std::remove_cv_t<typename TileT::DType>>());
        a[26] = TileT::Rows;
        a[27] = TileT::Cols;
        a[28] = static_cast<uint64_t>(tile.GetValidRow());
        a[29] = static_cast<uint64_t>(tile.GetValidCol());
        a[30] = add ? 1 : 0;
        n::call(code, a, 31, file, line);
        return;
    }
    n::at(file, line);
    for (int64_t r = 0; r < s.rows(); ++r) {
        for (int64_t c = 0; c < s.cols(); ++c) {
            if constexpr (add) {
                atomic_add(d.at(r, c), static_cast<TD>(*s.at(r, c)));
            } else {
                std::memcpy(d.at(r, c), s.at(r, c), sizeof(TD));
            }
        }
    }
}

}  // namespace pto_isa
}  // namespace shmcomm
