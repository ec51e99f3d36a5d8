// pto-isa's tile copies that cross GM (TLOAD, TSTORE), as shmcomm runs them (written by shmcomm;
// no pto-isa code). Included by the shadow's pto/cpu/TLoad.hpp and TStore.hpp, after pto-isa's
// own file whose TLOAD_IMPL / TSTORE_IMPL are renamed away (pto_isa_cpu_*).
//
// Every copy is performed by pto-isa's own implementation (so every layout, pad mode, quant
// mode and tile kind it supports keeps working); shmcomm only decides *when*:
//   eager: at once (AtomicAdd stores go through shmcomm, which adds under its cross-process
//     data lock: pto-isa's CPU back end adds with a plain +=);
//   bridged (hazard, schedule, race detector): the copy is registered with shmcomm's execution
//     model through the bridge (OP_TILE_COPY: the GM tensor it reads or writes, the tile's
//     bytes, its pipe) and lands when the model says, by calling back `land` below, which runs
//     pto-isa's implementation on the tile as it was issued (or, for a store whose remote
//     visibility the model delays, on a copy of the tile's bytes taken when the store completed).
// Pipes, from pto-isa's a2a3 back end (include/pto/common/event.hpp): TLOAD GM -> Vec / Mat on
// MTE2, TSTORE Vec / Mat -> GM on MTE3 (both queued in hazard mode), TSTORE Acc -> GM on FIX
// (run at once: shmcomm's model has no FIX queue, and completing early hides no bug's effect
// behind a false report); the rest of the tile library (in-core moves, vector, cube) is native
// and immediate.
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>

#include "shmcomm/runtime.hpp"

namespace shmcomm {
namespace native {
constexpr int32_t OP_TILE_COPY = 25;  // a pto-isa tile copy (bridge codes 25-30: tile copies)
}  // namespace native

namespace pto_isa {

namespace n = shmcomm::native;

enum TileCopyKind : uint64_t { COPY_LOAD = 0, COPY_STORE = 1, COPY_STORE_NOW = 2 };

// One issued copy: `land(tile bytes or nullptr)` performs it with pto-isa's implementation.
struct TileCopy {
    virtual void land(void* tile_bytes) = 0;
    virtual ~TileCopy() = default;
};

// What the model calls (through ctypes) when the copy lands (`discard` 0) or is dropped
// because the block failed (`discard` 1); either way the copy is freed.
inline void land_tile_copy(void* copy, void* tile_bytes, int32_t discard) noexcept {
    auto* c = static_cast<TileCopy*>(copy);
    if (discard == 0) c->land(tile_bytes);
    delete c;
}

template <typename TileT>
constexpr uint64_t tile_bytes() {
    if constexpr (requires { TileT::GetSizeInBytes(); }) {
        return static_cast<uint64_t>(TileT::GetSizeInBytes());
    } else {
        return static_cast<uint64_t>(sizeof(typename TileT::DType)) * static_cast<uint64_t>(TileT::bufferSize);
    }
}

// The tile bytes a copy touches: from the first to the last element of its valid region (a
// row-major or column-major tile: a2a3's DMA moves validRow bursts of validCol elements, the
// rest of each row is a gap it skips, so a view placed inside a bigger buffer does not touch
// its neighbour); the whole tile for fractal layouts.
template <typename TileT>
uint64_t tile_extent(TileT& t) {
    if constexpr (requires { TileT::isRowMajor; TileT::SFractal; t.GetValidRow(); t.GetValidCol(); }) {
        if constexpr (TileT::SFractal == std::remove_cv_t<decltype(TileT::SFractal)>::NoneBox) {
            const uint64_t r = static_cast<uint64_t>(t.GetValidRow()), c = static_cast<uint64_t>(t.GetValidCol());
            const uint64_t e = sizeof(typename TileT::DType);
            if (r == 0 || c == 0) return 0;
            const uint64_t last = TileT::isRowMajor ? (r - 1) * TileT::Cols + c : (c - 1) * TileT::Rows + r;
            return last * e < tile_bytes<TileT>() ? last * e : tile_bytes<TileT>();
        }
    }
    return tile_bytes<TileT>();
}

// The tile as issued (a CPU tile is a pointer to its buffer: copies share it) and the call
// of pto-isa's implementation on a tile; `tile_bytes`, when given, replaces the tile's buffer.
template <typename TileT, typename Run>
struct IssuedCopy final : TileCopy {
    TileT tile;
    Run run;
    IssuedCopy(TileT& t, Run r) : tile(t), run(std::move(r)) {}
    void land(void* bytes) override {
        TileT t = tile;
        // (a CPU tile's data() is a reference to its buffer pointer)
        if (bytes != nullptr) t.data() = reinterpret_cast<std::remove_reference_t<decltype(t.data())>>(bytes);
        run(t);
    }
};

// Whether a copy goes to shmcomm's model (bridged, or an AtomicAdd store, which shmcomm adds
// under its data lock) rather than running now (eager, or outside a shmcomm launch).
inline bool modelled(bool atomic) {
    shmcomm_block* b = n::tls_block;
    return b != nullptr && b->op != nullptr && (b->bridged != 0 || atomic);
}

// Issue a copy between `tile` and the GM tensor `g` to shmcomm's model; `run(tile)` performs
// it (pto-isa's implementation) when the model lands it. `kind`: COPY_LOAD (MTE2), COPY_STORE
// (MTE3) or COPY_STORE_NOW (FIX).
template <typename TileT, typename GT, typename Run>
inline void tile_copy(uint64_t kind, bool atomic, TileT& tile, GT& g, Run run, const char* file, int line) {
    if (std::strstr(file, "/pto/cpu/") != nullptr) {
        // pto-isa's CPU back end copying for itself (TPOP's GM FIFO): its own timing, at once
        n::at(file, line);
        run(tile);
        return;
    }
    const uint64_t tile_addr = n::addr(tile.data());  // (first: a tile may place itself on first use)
    auto* copy = new IssuedCopy<TileT, Run>(tile, std::move(run));
    uint64_t a[18];
    a[0] = kind;
    a[1] = atomic ? 1 : 0;
    a[2] = sizeof(typename GT::DType);
    a[3] = tile_addr;
    a[4] = tile_extent(tile);
    a[5] = n::addr(reinterpret_cast<const void*>(&land_tile_copy));
    a[6] = n::addr(static_cast<TileCopy*>(copy));
    a[7] = n::addr(g.data());
    for (int i = 0; i < 5; ++i) a[8 + i] = static_cast<uint64_t>(g.GetShape(i));
    for (int i = 0; i < 5; ++i) a[13 + i] = static_cast<uint64_t>(g.GetStride(i));
    n::call(n::OP_TILE_COPY, a, 18, file, line);  // the model owns `copy` from here
}

template <typename TileT>
constexpr uint64_t store_kind() {
    if constexpr (requires { TileT::Loc; }) {
        if constexpr (TileT::Loc == ::pto::TileType::Acc) return COPY_STORE_NOW;
    }
    return COPY_STORE;
}

}  // namespace pto_isa
}  // namespace shmcomm
