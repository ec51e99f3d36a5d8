// shmcomm's shadow of pto-isa's pto/cpu/TPrefetchAsync.hpp (written by shmcomm, no pto-isa code).
// pto-isa's CPU back end defines AsyncEvent::Wait / Test here as `return true` (its copies land
// at issue). Its file is included with AsyncEvent renamed to a class of ours derived from it, so
// its trivial Wait / Test (and its prefetch no-op, unchanged) bind to that class, and
// AsyncEvent::Wait / Test are shmcomm's: an SDMA copy lands when they ask (a2a3). Also
// BuildAsyncSession, which pto-isa's CPU back end lacks (a2a3's comes from
// async_common/async_event_impl.hpp, skipped under __CPU_SIM): the SDMA form, as a2a3's.
#ifndef SHMCOMM_SHADOW_TPREFETCH_ASYNC_HPP
#define SHMCOMM_SHADOW_TPREFETCH_ASYNC_HPP

#include "pto/comm/comm_types.hpp"
#include "pto/comm/async_common/async_types.hpp"

namespace pto {
namespace comm {
struct pto_isa_cpu_AsyncEvent : AsyncEvent {
    using AsyncEvent::AsyncEvent;
    PTO_INTERNAL bool Wait(const AsyncSession& session) const;
    PTO_INTERNAL bool Test(const AsyncSession& session) const;
};
}  // namespace comm
}  // namespace pto

#define AsyncEvent pto_isa_cpu_AsyncEvent
#include_next <pto/cpu/TPrefetchAsync.hpp>
#undef AsyncEvent

#include "shmcomm_shadow/async.hpp"

namespace pto {
namespace comm {

// Wait and Test have no call-site argument in pto-isa's declaration: the PC names the user's line
PTO_INTERNAL bool AsyncEvent::Wait(const AsyncSession& session) const
{
    shmcomm::native::mark_pc();  // the user's call site, resolved when a report needs it
    if (engine != DmaEngine::SDMA) return pto_isa_cpu_AsyncEvent(handle, engine).Wait(session);
    return shmcomm::pto_isa::async_done(handle, session, false, __builtin_FILE(), __builtin_LINE());
}

PTO_INTERNAL bool AsyncEvent::Test(const AsyncSession& session) const
{
    shmcomm::native::mark_pc();  // the user's call site, resolved when a report needs it
    if (engine != DmaEngine::SDMA) return pto_isa_cpu_AsyncEvent(handle, engine).Test(session);
    return shmcomm::pto_isa::async_done(handle, session, true, __builtin_FILE(), __builtin_LINE());
}

template <DmaEngine engine = DmaEngine::SDMA, typename ScratchTile>
PTO_INTERNAL bool BuildAsyncSession(ScratchTile& scratchTile, __gm__ uint8_t* workspace, AsyncSession& session,
                                    uint32_t syncId = 0,
                                    const sdma::SdmaBaseConfig& baseConfig = {sdma::kDefaultSdmaBlockBytes, 0, 1},
                                    uint32_t channelGroupIdx = sdma::kAutoChannelGroupIdx,
                                    const char* file = __builtin_FILE(), int line = __builtin_LINE())
{
    shmcomm::native::mark_pc();  // the user's call site, resolved when a report needs it
    static_assert(engine == DmaEngine::SDMA,
                  "BuildAsyncSession: this form is SDMA's, the only engine of a2a3 (as pto-isa's a2a3 back end)");
    session.engine = engine;
    return shmcomm::pto_isa::build_session(scratchTile, workspace, session, syncId, baseConfig, channelGroupIdx,
                                           sdma::kAutoChannelGroupIdx, file, line);
}

}  // namespace comm
}  // namespace pto

#endif
