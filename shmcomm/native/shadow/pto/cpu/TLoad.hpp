// shmcomm's shadow of pto-isa's pto/cpu/TLoad.hpp (written by shmcomm, no pto-isa code).
// pto-isa's own file is included with its TLOAD_IMPL renamed away (pto_isa_cpu_TLOAD_IMPL);
// TLOAD_IMPL, with the signature pto-isa's TLOAD calls, then runs that implementation at once
// (eager) or queues it on MTE2 in shmcomm's execution model, which runs it when the copy lands
// (hazard, schedule, race detector): see shmcomm_shadow/tiles.hpp.
#ifndef SHMCOMM_SHADOW_TLOAD_HPP
#define SHMCOMM_SHADOW_TLOAD_HPP

#define TLOAD_IMPL pto_isa_cpu_TLOAD_IMPL
#include_next <pto/cpu/TLoad.hpp>
#undef TLOAD_IMPL

#include "shmcomm_shadow/tiles.hpp"

namespace pto {

template <typename TileData, typename GlobalData>
PTO_INTERNAL void TLOAD_IMPL(TileData& dst, GlobalData& src, const char* file = __builtin_FILE(),
                             int line = __builtin_LINE())
{
    shmcomm::native::mark_pc();  // the user's call site, resolved when a report needs it
    if (!shmcomm::pto_isa::modelled(false)) {  // eager: pto-isa's copy, now
        shmcomm::native::at(file, line);
        pto_isa_cpu_TLOAD_IMPL(dst, src);
        return;
    }
    using G = std::remove_cv_t<GlobalData>;
    G g = src;  // the tensor as issued
    shmcomm::pto_isa::tile_copy(
        shmcomm::pto_isa::COPY_LOAD, false, dst, g, [g](TileData& t) mutable { pto_isa_cpu_TLOAD_IMPL(t, g); },
        file, line);
}

}  // namespace pto

#endif
