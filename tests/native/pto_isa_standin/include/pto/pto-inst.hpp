// shmcomm's test stand-in for a pto-isa checkout (written for shmcomm's tests; not pto-isa's
// code): the include paths and the *_IMPL declarations shmcomm's shadow replaces, with
// pto-isa-CPU-like single-threaded behaviour, so CI tests the shadow without pto-isa.
#ifndef STANDIN_PTO_INST_HPP
#define STANDIN_PTO_INST_HPP
#if defined(__CPU_SIM)
#include "pto/common/cpu_stub.hpp"
#endif
#include <pto/cpu/atomic.hpp>
#include "pto/common/pto_tile.hpp"
#include "pto/common/pto_instr.hpp"
#include "pto/comm/pto_comm_inst.hpp"
#endif
