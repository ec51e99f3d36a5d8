// The communication instructions (pto::comm): signals, TNOTIFY / TWAIT / TTEST, TPUT / TGET,
// the async copies, SYNCALL, st_atomic. Part of shmcomm/pto.hpp, not included on its own.
#pragma once

namespace pto {

// a2a3's record token of a copy (accepted for parity; every copy here completes before return)
struct RecordEvent {};

namespace comm {

enum class NotifyOp : uint8_t { AtomicAdd = 0, Set = 1 };
enum class WaitCmp : uint8_t { EQ = 0, NE = 1, GT = 2, GE = 3, LT = 4, LE = 5 };
enum class DmaEngine : uint8_t { SDMA = 0, URMA = 1, RDMA = 2 };

using Signal = GlobalTensor<int32_t, Shape<1, 1, 1, 1, 1>, Stride<1, 1, 1, 1, 1>, Layout::ND>;

template <int Rows, int Cols>
struct Signal2D : GlobalTensor<int32_t, Shape<1, 1, 1, Rows, Cols>, Stride<1, 1, 1, DYNAMIC, 1>, Layout::ND> {
    using Base = GlobalTensor<int32_t, Shape<1, 1, 1, Rows, Cols>, Stride<1, 1, 1, DYNAMIC, 1>, Layout::ND>;
    explicit Signal2D(int32_t* p) : Base(p, typename Base::Shape{}, typename Base::Stride(Cols)) {}
    Signal2D(int32_t* p, int row_stride) : Base(p, typename Base::Shape{}, typename Base::Stride(row_stride)) {}
};

namespace detail {
using shmcomm::native::holds;
using shmcomm::native::registered_wait;
using shmcomm::native::sweep;

// rows x cols of the signal tensor, rows `row_stride` elements apart (what shmcomm's Signal2D is)
template <typename S>
inline void sig_args(uint64_t* a, const S& sig, int32_t value, int32_t how) {
    static_assert(std::is_same_v<typename S::DType, int32_t>, "pto::comm: a signal is int32");
    if (!sig.rows_dense()) shmcomm::native::fail("TWAIT: the signal's outer dims are not evenly strided");
    a[0] = shmcomm::native::addr(sig.ptr);
    a[1] = static_cast<uint64_t>(sig.rows());
    a[2] = static_cast<uint64_t>(sig.cols());
    a[3] = static_cast<uint64_t>(sig.rows() > 1 ? sig.stride.v[3] : sig.cols());
    a[4] = static_cast<uint64_t>(static_cast<int64_t>(value));
    a[5] = static_cast<uint64_t>(how);
}

template <typename G>
inline void tensor12(uint64_t* a, const G& g) {
    a[0] = shmcomm::native::addr(g.ptr);
    a[1] = static_cast<uint64_t>(shmcomm::native::dtype_code<typename G::DType>());
    for (int i = 0; i < 5; ++i) a[2 + i] = static_cast<uint64_t>(g.shape.v[i]);
    for (int i = 0; i < 5; ++i) a[7 + i] = static_cast<uint64_t>(g.stride.v[i]);
}

// Copy src -> dst through the staging tile in tile-sized pieces, as a2a3's TPUT / TGET do.
template <typename GD, typename GS, typename TileT>
inline void staged_copy(const char* op, GD& dst, const GS& src, TileT& tile) {
    namespace n = shmcomm::native;
    using T = typename GS::DType;
    static_assert(sizeof(typename GD::DType) == sizeof(T), "TPUT/TGET: dst and src element sizes differ");
    if (dst.rows() != src.rows() || dst.cols() != src.cols()) {
        n::fail(std::string(op) + ": dst and src shapes differ");
    }
    auto* t = reinterpret_cast<T*>(tile.data());
    const int64_t R = TileT::Rows, C = TileT::Cols;
    for (int64_t r0 = 0; r0 < src.rows(); r0 += R) {
        for (int64_t c0 = 0; c0 < src.cols(); c0 += C) {
            int64_t nr = std::min<int64_t>(R, src.rows() - r0), nc = std::min<int64_t>(C, src.cols() - c0);
            for (int64_t r = 0; r < nr; ++r) std::memcpy(t + r * C, src.at(r0 + r, c0), sizeof(T) * nc);
            for (int64_t r = 0; r < nr; ++r) std::memcpy(dst.at(r0 + r, c0), t + r * C, sizeof(T) * nc);
        }
    }
}

template <typename GD, typename GS, typename TileT>
inline void copy_call(int32_t code, GD& dst, const GS& src, TileT& tile, AtomicType atomic, const char* file, int line) {
    namespace n = shmcomm::native;
    uint64_t a[31];
    tensor12(a, dst);
    tensor12(a + 12, src);
    a[24] = n::addr(tile.data());
    a[25] = static_cast<uint64_t>(n::dtype_code<typename TileT::DType>());
    a[26] = TileT::Rows;
    a[27] = TileT::Cols;
    a[28] = static_cast<uint64_t>(tile.valid_row);
    a[29] = static_cast<uint64_t>(tile.valid_col);
    a[30] = static_cast<uint64_t>(atomic);
    n::call(code, a, 31, file, line);
}
}  // namespace detail

// Atomically add `value` to (AtomicAdd) or store it into (Set) the signal; wakes its sleepers.
template <typename S>
inline void TNOTIFY(const S& sig, int32_t value, NotifyOp op, const char* file = __builtin_FILE(),
                    int line = __builtin_LINE()) {
    namespace n = shmcomm::native;
    if (n::bridged() || (op == NotifyOp::Set && n::tls_block != nullptr && n::tls_block->set_read_add)) {
        uint64_t a[6];
        detail::sig_args(a, sig, value, static_cast<int32_t>(op));
        a[1] = a[2] = a[3] = 1;  // TNOTIFY writes the first element
        n::call(n::OP_NOTIFY, a, 6, file, line);
        return;
    }
    n::at(file, line);
    n::notify_word(sig.ptr, value, static_cast<int32_t>(op));
}

// Block until every element of `sig` satisfies `element <cmp> value`. A wait that is not over
// after a short poll hands over to shmcomm's wait (registered, futex sleep, abort, timeout).
template <typename S>
inline void TWAIT(const S& sig, int32_t value, WaitCmp cmp, const char* file = __builtin_FILE(),
                  int line = __builtin_LINE()) {
    namespace n = shmcomm::native;
    if (n::bridged()) {
        uint64_t a[6];
        detail::sig_args(a, sig, value, static_cast<int32_t>(cmp));
        n::call(n::OP_WAIT, a, 6, file, line);
        return;
    }
    n::at(file, line);
    const int32_t c = static_cast<int32_t>(cmp);
    n::wait_eager(sig, value, c, sig.rows_dense(), [&](uint64_t* w) { detail::sig_args(w, sig, value, c); }, file, line);
}

// One sweep: whether every element satisfies the condition (never blocks).
template <typename S>
inline bool TTEST(const S& sig, int32_t value, WaitCmp cmp, const char* file = __builtin_FILE(),
                  int line = __builtin_LINE()) {
    namespace n = shmcomm::native;
    if (!n::bridged()) {
        n::at(file, line);
        if (detail::sweep(sig, value, static_cast<int32_t>(cmp))) return true;
    }
    // false (or bridged): shmcomm's TTEST, which also publishes a TTEST loop as a wait
    uint64_t a[6];
    detail::sig_args(a, sig, value, static_cast<int32_t>(cmp));
    return n::call(n::OP_TEST, a, 6, file, line) != 0;
}

// Remote write through the staging tile (chunked when the data is larger than the tile).
template <AtomicType atomic = AtomicType::AtomicNone, typename GD, typename GS, typename TileT>
inline RecordEvent TPUT(GD& dst, GS& src, TileT& tile, const char* file = __builtin_FILE(),
                        int line = __builtin_LINE()) {
    namespace n = shmcomm::native;
    if (n::bridged() || atomic != AtomicType::AtomicNone) {
        detail::copy_call(n::OP_PUT, dst, src, tile, atomic, file, line);
    } else {
        n::at(file, line);
        detail::staged_copy("TPUT", dst, src, tile);
    }
    return {};
}

// Remote read through the staging tile.
template <typename GD, typename GS, typename TileT>
inline RecordEvent TGET(GD& dst, GS& src, TileT& tile, const char* file = __builtin_FILE(),
                        int line = __builtin_LINE()) {
    namespace n = shmcomm::native;
    if (n::bridged()) {
        detail::copy_call(n::OP_GET, dst, src, tile, AtomicType::AtomicNone, file, line);
    } else {
        n::at(file, line);
        detail::staged_copy("TGET", dst, src, tile);
    }
    return {};
}

// -- asynchronous copies (eager: the copy is done when the call returns) -----------------------

// A block's session of asynchronous copies. In the bridged modes shmcomm keeps one Python
// session per C++ session object (by its address).
struct AsyncSession {
    uint32_t syncId = 0;
};

template <DmaEngine engine = DmaEngine::SDMA, typename... A>
inline bool BuildAsyncSession(A&&...) { return true; }

// An asynchronous copy's handle. Eager: the copy is done when TPUT_ASYNC returns. Bridged:
// `bridged_id` names shmcomm's AsyncEvent, which Wait / Test ask.
struct AsyncEvent {
    uint64_t handle = 0;
    DmaEngine engine = DmaEngine::SDMA;
    uint64_t bridged_id = 0;
    AsyncEvent() = default;
    AsyncEvent(uint64_t h, DmaEngine e) : handle(h), engine(e) {}
    bool valid() const { return handle != 0; }
    bool Wait(const AsyncSession& = AsyncSession{}, const char* file = __builtin_FILE(),
              int line = __builtin_LINE()) const {
        if (bridged_id == 0) return true;
        uint64_t a[1] = {bridged_id};
        shmcomm::native::call(shmcomm::native::OP_ASYNC_WAIT, a, 1, file, line);
        return true;
    }
    bool Test(const AsyncSession& = AsyncSession{}, const char* file = __builtin_FILE(),
              int line = __builtin_LINE()) const {
        if (bridged_id == 0) return true;
        uint64_t a[1] = {bridged_id};
        return shmcomm::native::call(shmcomm::native::OP_ASYNC_TEST, a, 1, file, line) != 0;
    }
};

namespace detail {
template <typename GD, typename GS>
inline AsyncEvent async_copy(int32_t which, GD& dst, const GS& src, const AsyncSession& session, const char* file,
                             int line) {
    namespace n = shmcomm::native;
    if (n::bridged()) {
        uint64_t a[26];
        tensor12(a, dst);
        tensor12(a + 12, src);
        a[24] = n::addr(&session);
        a[25] = static_cast<uint64_t>(which);
        AsyncEvent ev(1, DmaEngine::SDMA);
        ev.bridged_id = static_cast<uint64_t>(n::call(n::OP_ASYNC, a, 26, file, line));
        return ev;
    }
    n::at(file, line);
    using T = typename GS::DType;
    if (dst.rows() != src.rows() || dst.cols() != src.cols()) {
        n::fail(std::string(which == 0 ? "TPUT_ASYNC" : "TGET_ASYNC") + ": dst and src shapes differ");
    }
    for (int64_t r = 0; r < src.rows(); ++r) std::memcpy(dst.at(r, 0), src.at(r, 0), sizeof(T) * src.cols());
    std::atomic_thread_fence(std::memory_order_seq_cst);
    return AsyncEvent(src.rows() * src.cols() == 0 ? 0 : 1, DmaEngine::SDMA);
}
}  // namespace detail

template <DmaEngine engine = DmaEngine::SDMA, typename GD, typename GS>
inline AsyncEvent TPUT_ASYNC(GD& dst, GS& src, const AsyncSession& session, const char* file = __builtin_FILE(),
                             int line = __builtin_LINE()) {
    return detail::async_copy(0, dst, src, session, file, line);
}

template <DmaEngine engine = DmaEngine::SDMA, typename GD, typename GS>
inline AsyncEvent TGET_ASYNC(GD& dst, GS& src, const AsyncSession& session, const char* file = __builtin_FILE(),
                             int line = __builtin_LINE()) {
    return detail::async_copy(1, dst, src, session, file, line);
}

}  // namespace comm

enum class SyncAllMode { Hard = 0, Soft = 1 };

// Cross-core barrier of the blocks of this launch (shmcomm's SYNCALL, on its control segment).
inline void SYNCALL(const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
    shmcomm::native::call(shmcomm::native::OP_SYNCALL, nullptr, 0, file, line);
}

// st_atomic<T>(value, ptr) after set_st_atomic_cfg(..., ATOMIC_SUM): an atomic add at ptr.
template <typename T>
inline void st_atomic(T value, T* ptr, const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
    namespace n = shmcomm::native;
    if (n::bridged()) {
        uint64_t a[3] = {n::addr(ptr), static_cast<uint64_t>(n::dtype_code<T>()), 0};
        if constexpr (std::is_floating_point_v<T>) {
            double d = static_cast<double>(value);
            std::memcpy(&a[2], &d, sizeof d);
        } else {
            a[2] = static_cast<uint64_t>(static_cast<int64_t>(value));
        }
        n::call(n::OP_ST_ATOMIC, a, 3, file, line);
        return;
    }
    n::at(file, line);
    if constexpr (std::is_integral_v<T>) {
        __atomic_fetch_add(ptr, value, __ATOMIC_SEQ_CST);
    } else {
        // floats: a compare-exchange loop on the bits
        using U = std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>;
        U* up = reinterpret_cast<U*>(ptr);
        U expected = __atomic_load_n(up, __ATOMIC_RELAXED);
        while (true) {
            T cur;
            std::memcpy(&cur, &expected, sizeof(U));
            T next = cur + value;
            U desired;
            std::memcpy(&desired, &next, sizeof(U));
            if (__atomic_compare_exchange_n(up, &expected, desired, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) break;
        }
    }
}

}  // namespace pto

using pto::SYNCALL;
using pto::st_atomic;
