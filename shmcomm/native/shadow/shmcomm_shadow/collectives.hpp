// shmcomm's root collectives (TBROADCAST / TSCATTER / TGATHER / TREDUCE) over a pto-isa
// checkout's ParallelGroup (written by shmcomm; no pto-isa code).
//
// Data as a2a3's AIV path (include/pto/comm/a2a3/T{BroadCast,Scatter,Gather,Reduce}.hpp): only
// the root calls; TBROADCAST stores src into every member, the root's own included; member r
// of TSCATTER / TGATHER is the root tensor's rows [r*H, (r+1)*H) of DIM_3 (H the members'
// DIM_3), viewed with the root tensor's strides; TREDUCE folds the root's tensor, then every
// other member's in index order, with Sum / Max / Min. Each move waits for its stores
// (MTE3 -> MTE2) before the next, and nothing more: the data is in GM when the instruction
// returns, with no fence for another rank's reader.
// Eager: element by element natively (the staging tiles carry nothing a reader could see).
// Bridged: shmcomm's Python collective on a ParallelGroup over the same bytes, which chunks
// through the tiles and queues its TLOAD / TSTOREs as a2a3 does.
#pragma once

#include <string>
#include <vector>

#include "shmcomm_shadow/comm.hpp"

namespace shmcomm {
namespace pto_isa {

enum Coll : int32_t { BROADCAST = 0, SCATTER = 1, GATHER = 2, REDUCE = 3 };
inline const char* coll_name(int32_t kind) {
    static const char* names[] = {"TBROADCAST", "TSCATTER", "TGATHER", "TREDUCE"};
    return names[kind];
}

// element offset of index (i0..i4) in a tensor with strides s
inline int64_t offset5(const int64_t* i, const int64_t* s) {
    return i[0] * s[0] + i[1] * s[1] + i[2] * s[2] + i[3] * s[3] + i[4] * s[4];
}

template <typename G>
inline void dims(G& g, int64_t* shape, int64_t* stride) {
    for (int d = 0; d < 5; ++d) {
        shape[d] = static_cast<int64_t>(g.GetShape(d));
        stride[d] = static_cast<int64_t>(g.GetStride(d));
    }
}

// every index of a 5-D shape, last dim fastest
template <typename F>
inline void each5(const int64_t* shape, F f) {
    int64_t i[5];
    for (i[0] = 0; i[0] < shape[0]; ++i[0])
        for (i[1] = 0; i[1] < shape[1]; ++i[1])
            for (i[2] = 0; i[2] < shape[2]; ++i[2])
                for (i[3] = 0; i[3] < shape[3]; ++i[3])
                    for (i[4] = 0; i[4] < shape[4]; ++i[4]) f(i);
}

template <typename TileT>
inline void tile6(uint64_t* a, TileT& t) {
    a[0] = n::addr(t.data());
    a[1] = static_cast<uint64_t>(n::dtype_code<std::remove_cv_t<typename TileT::DType>>());
    a[2] = TileT::Rows;
    a[3] = TileT::Cols;
    a[4] = static_cast<uint64_t>(t.GetValidRow());
    a[5] = static_cast<uint64_t>(t.GetValidCol());
}

// a root collective may only be called by the rank that holds the root's tensor
template <typename PG>
inline void check_root(int32_t kind, PG& pg) {
    const int n_ = pg.GetSize(), root = pg.GetRootIdx();
    if (n_ <= 0 || root < 0 || root >= n_) {
        n::fail(std::string(coll_name(kind)) + ": the group's root index " + std::to_string(root) +
                " is outside its " + std::to_string(n_) + " members");
    }
    int32_t rank;
    uint64_t off;
    n::locate(pg[root].data(), &rank, &off);
    if (n::tls_block != nullptr && rank >= 0 && rank != n::tls_block->rank) {
        n::fail(std::string(coll_name(kind)) + ": called on rank " + std::to_string(n::tls_block->rank) +
                ", but the group's root is index " + std::to_string(root) + " (rank " + std::to_string(rank) +
                "); only the root calls a root collective, the other members just keep their tensors ready");
    }
}

// Bridged: shmcomm's Python collective (bridge code OP_COLLECTIVE). Words: kind, reduce op,
// members, root, the address of the members' tensor words (12 each), the local tensor (12),
// the tile count and the tiles (6 each).
template <typename PG, typename G, typename... Tiles>
inline void call_collective(int32_t kind, int32_t op, PG& pg, G& local, const char* file, int line,
                            Tiles&... tiles) {
    const int members = pg.GetSize();
    std::vector<uint64_t> words(12 * static_cast<size_t>(members));
    for (int r = 0; r < members; ++r) tensor12(words.data() + 12 * r, pg[r]);
    uint64_t a[36] = {};
    a[0] = static_cast<uint64_t>(kind);
    a[1] = static_cast<uint64_t>(op);
    a[2] = static_cast<uint64_t>(members);
    a[3] = static_cast<uint64_t>(pg.GetRootIdx());
    a[4] = n::addr(words.data());
    tensor12(a + 5, local);
    a[17] = sizeof...(Tiles);
    int k = 0;
    ((tile6(a + 18 + 6 * k++, tiles)), ...);
    n::call(n::OP_COLLECTIVE, a, 36, file, line);
}

template <typename T>
inline T reduce_one(T acc, T v, int32_t op) {
    switch (op) {
        case 0: return static_cast<T>(acc + v);
        case 1: return v > acc ? v : acc;
        default: return v < acc ? v : acc;
    }
}

// TBROADCAST / TSCATTER / TGATHER: `local` is the root's src (broadcast, scatter) or dst (gather)
template <typename PG, typename G, typename... Tiles>
inline void move(int32_t kind, PG& pg, G& local, const char* file, int line, Tiles&... tiles) {
    using T = std::remove_cv_t<typename G::RawDType>;
    n::at(file, line);
    check_root(kind, pg);
    if (n::bridged()) {
        call_collective(kind, 0, pg, local, file, line, tiles...);
        return;
    }
    int64_t ls[5], lt[5];
    dims(local, ls, lt);
    T* base = reinterpret_cast<T*>(local.data());
    for (int r = 0; r < pg.GetSize(); ++r) {
        int64_t ms[5], mt[5];
        dims(pg[r], ms, mt);
        T* mem = reinterpret_cast<T*>(pg[r].data());
        if (kind == BROADCAST) {
            each5(ls, [&](const int64_t* i) { mem[offset5(i, mt)] = base[offset5(i, lt)]; });
        } else {
            T* part = base + static_cast<int64_t>(r) * ms[3] * lt[3];  // rows [r*H, (r+1)*H)
            if (kind == SCATTER) {
                each5(ms, [&](const int64_t* i) { mem[offset5(i, mt)] = part[offset5(i, lt)]; });
            } else {
                each5(ms, [&](const int64_t* i) { part[offset5(i, lt)] = mem[offset5(i, mt)]; });
            }
        }
    }
    std::atomic_thread_fence(std::memory_order_seq_cst);
}

template <typename PG, typename G, typename... Tiles>
inline void reduce(PG& pg, G& dst, int32_t op, const char* file, int line, Tiles&... tiles) {
    using T = std::remove_cv_t<typename G::RawDType>;
    n::at(file, line);
    check_root(REDUCE, pg);
    if (op < 0 || op > 2) n::fail("TREDUCE: unknown ReduceOp " + std::to_string(op));
    if (n::bridged()) {
        call_collective(REDUCE, op, pg, dst, file, line, tiles...);
        return;
    }
    const int root = pg.GetRootIdx();
    int64_t ds[5], dt[5], rs[5], rt[5];
    dims(dst, ds, dt);
    dims(pg[root], rs, rt);
    std::vector<const T*> ptrs;  // the other members in index order, with their strides
    std::vector<int64_t> strides;
    for (int r = 0; r < pg.GetSize(); ++r) {
        if (r == root) continue;
        int64_t ms[5], mt[5];
        dims(pg[r], ms, mt);
        ptrs.push_back(reinterpret_cast<const T*>(pg[r].data()));
        strides.insert(strides.end(), mt, mt + 5);
    }
    T* out = reinterpret_cast<T*>(dst.data());
    const T* mine = reinterpret_cast<const T*>(pg[root].data());
    each5(rs, [&](const int64_t* i) {
        T acc = mine[offset5(i, rt)];
        for (size_t k = 0; k < ptrs.size(); ++k) acc = reduce_one(acc, ptrs[k][offset5(i, &strides[5 * k])], op);
        out[offset5(i, dt)] = acc;
    });
    std::atomic_thread_fence(std::memory_order_seq_cst);
}

}  // namespace pto_isa
}  // namespace shmcomm
