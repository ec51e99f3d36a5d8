// shmcomm's shadow of pto-isa's pto/cpu/comm/TPut.hpp (written by shmcomm, no pto-isa code).
// The synchronous TPUT_IMPLs are shmcomm's: AtomicAdd is a true atomic add per element (pto-isa's
// CPU back end does a plain +=); bridged, shmcomm's TPUT through the staging tile. TPUT_ASYNC_IMPL
// on SDMA is shmcomm's too: in flight until its event's Wait / Test (shmcomm_shadow/async.hpp).
#ifndef SHMCOMM_SHADOW_TPUT_HPP
#define SHMCOMM_SHADOW_TPUT_HPP

#include <pto/cpu/comm/TGet.hpp>

#define TPUT_IMPL pto_isa_cpu_TPUT_IMPL
#define TPUT_ASYNC_IMPL pto_isa_cpu_TPUT_ASYNC_IMPL
#include_next <pto/cpu/comm/TPut.hpp>
#undef TPUT_ASYNC_IMPL
#undef TPUT_IMPL

#include "shmcomm_shadow/async.hpp"

namespace pto {
namespace comm {

template <typename GlobalDstData, typename GlobalSrcData, typename TileData, AtomicType atomicType>
PTO_INTERNAL void TPUT_IMPL(GlobalDstData& dst, GlobalSrcData& src, TileData& src1,
                            const char* file = __builtin_FILE(), int line = __builtin_LINE())
{
    shmcomm::native::mark_pc();  // the user's call site, resolved when a report needs it
    shmcomm::pto_isa::copy<atomicType == AtomicType::AtomicAdd>(shmcomm::native::OP_PUT, dst, src, src1, file, line);
}

template <typename GlobalDstData, typename GlobalSrcData, typename TileData, AtomicType atomicType>
PTO_INTERNAL void TPUT_IMPL(GlobalDstData& dst, GlobalSrcData& src, TileData& ping, TileData& pong,
                            const char* file = __builtin_FILE(), int line = __builtin_LINE())
{
    (void)pong;
    shmcomm::native::mark_pc();  // the user's call site, resolved when a report needs it
    shmcomm::pto_isa::copy<atomicType == AtomicType::AtomicAdd>(shmcomm::native::OP_PUT, dst, src, ping, file, line);
}

// SDMA (a2a3's engine): posted to the block's DMA queue, landing at the event's Wait / Test.
// Another engine (not a2a3's) keeps pto-isa's CPU copy.
template <DmaEngine engine = DmaEngine::SDMA, typename GlobalDstData, typename GlobalSrcData>
PTO_INTERNAL AsyncEvent TPUT_ASYNC_IMPL(GlobalDstData& dst, GlobalSrcData& src, const AsyncSession& session,
                                       const char* file = __builtin_FILE(), int line = __builtin_LINE())
{
    shmcomm::native::mark_pc();  // the user's call site, resolved when a report needs it
    if constexpr (engine == DmaEngine::SDMA) {
        return AsyncEvent(shmcomm::pto_isa::async_copy<0>(dst, src, session, file, line), engine);
    } else {
        return pto_isa_cpu_TPUT_ASYNC_IMPL<engine>(dst, src, session);
    }
}

// the explicit-peer form (pto-isa's A5 / CPU overload): SDMA ignores the peer, as pto-isa says
template <DmaEngine engine, typename GlobalDstData, typename GlobalSrcData>
PTO_INTERNAL AsyncEvent TPUT_ASYNC_IMPL(GlobalDstData& dst, GlobalSrcData& src, const AsyncSession& session,
                                       uint32_t peer, const char* file = __builtin_FILE(),
                                       int line = __builtin_LINE())
{
    shmcomm::native::mark_pc();  // the user's call site, resolved when a report needs it
    if constexpr (engine == DmaEngine::SDMA) {
        (void)peer;
        return AsyncEvent(shmcomm::pto_isa::async_copy<0>(dst, src, session, file, line), engine);
    } else {
        return pto_isa_cpu_TPUT_ASYNC_IMPL<engine>(dst, src, session, peer);
    }
}

}  // namespace comm
}  // namespace pto

#endif
