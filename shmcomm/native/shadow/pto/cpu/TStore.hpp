// shmcomm's shadow of pto-isa's pto/cpu/TStore.hpp (written by shmcomm, no pto-isa code).
// pto-isa's own file is included with its TSTORE_IMPLs renamed away (pto_isa_cpu_TSTORE_IMPL);
// the TSTORE_IMPLs pto-isa's public TSTORE / TSTORE_FP call (the same template parameters and
// arguments) then run that implementation at once (eager), or queue it in shmcomm's execution
// model, on MTE3 (Vec / Mat tiles) or at once on FIX (Acc tiles), which runs it when the copy
// lands (hazard, schedule, race detector): see shmcomm_shadow/tiles.hpp. pto-isa's internal
// overload (explicit quant mode and scalars) is reached only through these and stays its own.
#ifndef SHMCOMM_SHADOW_TSTORE_HPP
#define SHMCOMM_SHADOW_TSTORE_HPP

#define TSTORE_IMPL pto_isa_cpu_TSTORE_IMPL
#include_next <pto/cpu/TStore.hpp>
#undef TSTORE_IMPL

#include "shmcomm_shadow/tiles.hpp"

namespace pto {

namespace shmcomm_detail {
template <typename TileData, typename GlobalData, AtomicType atomicType, typename Run>
PTO_INTERNAL void store(GlobalData& dst, TileData& src, Run run, const char* file, int line)
{
    shmcomm::native::mark_pc();  // the user's call site, resolved when a report needs it
    if (!shmcomm::pto_isa::modelled(atomicType == AtomicType::AtomicAdd)) {  // eager: pto-isa's copy, now
        shmcomm::native::at(file, line);
        run(dst, src);
        return;
    }
    using G = std::remove_cv_t<GlobalData>;
    G g = dst;
    shmcomm::pto_isa::tile_copy(
        shmcomm::pto_isa::store_kind<TileData>(), atomicType == AtomicType::AtomicAdd, src, g,
        [g, run](TileData& t) mutable { run(g, t); }, file, line);
}
}  // namespace shmcomm_detail

template <typename TileData, typename GlobalData, AtomicType atomicType, STPhase Phase = STPhase::Unspecified>
PTO_INTERNAL void TSTORE_IMPL(GlobalData& dst, TileData& src, const char* file = __builtin_FILE(),
                              int line = __builtin_LINE())
{
    shmcomm_detail::store<TileData, GlobalData, atomicType>(
        dst, src, [](auto& g, TileData& t) { pto_isa_cpu_TSTORE_IMPL<TileData, std::remove_reference_t<decltype(g)>, atomicType, Phase>(g, t); }, file,
        line);
}

template <typename TileData, typename GlobalData, AtomicType atomicType, ReluPreMode reluPreMode,
          STPhase Phase = STPhase::Unspecified>
PTO_INTERNAL void TSTORE_IMPL(GlobalData& dst, TileData& src, const char* file = __builtin_FILE(),
                              int line = __builtin_LINE())
{
    shmcomm_detail::store<TileData, GlobalData, atomicType>(
        dst, src,
        [](auto& g, TileData& t) { pto_isa_cpu_TSTORE_IMPL<TileData, std::remove_reference_t<decltype(g)>, atomicType, reluPreMode, Phase>(g, t); }, file,
        line);
}

template <typename TileData, typename GlobalData, AtomicType atomicType, ReluPreMode reluPreMode,
          STPhase Phase = STPhase::Unspecified>
PTO_INTERNAL void TSTORE_IMPL(GlobalData& dst, TileData& src, uint64_t preQuantScalar,
                              const char* file = __builtin_FILE(), int line = __builtin_LINE())
{
    shmcomm_detail::store<TileData, GlobalData, atomicType>(
        dst, src,
        [preQuantScalar](auto& g, TileData& t) {
            pto_isa_cpu_TSTORE_IMPL<TileData, std::remove_reference_t<decltype(g)>, atomicType, reluPreMode, Phase>(g, t, preQuantScalar);
        },
        file, line);
}

template <typename TileData, typename GlobalData, typename FpTileData, AtomicType atomicType, ReluPreMode reluPreMode,
          STPhase Phase = STPhase::Unspecified>
PTO_INTERNAL void TSTORE_IMPL(GlobalData& dst, TileData& src, FpTileData& fp, const char* file = __builtin_FILE(),
                              int line = __builtin_LINE())
{
    using G = std::remove_cv_t<GlobalData>;
    FpTileData f = fp;  // the quant tile as issued (a CPU tile points at its buffer)
    shmcomm_detail::store<TileData, GlobalData, atomicType>(
        dst, src,
        [f](auto& g, TileData& t) mutable {
            pto_isa_cpu_TSTORE_IMPL<TileData, std::remove_reference_t<decltype(g)>, FpTileData, atomicType, reluPreMode, Phase>(g, t, f);
        },
        file, line);
}

}  // namespace pto

#endif
