"""A manual pto-isa kernel file (as pto-isa's ``kernels/manual/a2a3/*``) on the stand-in tree:
its own ``comm_context.h`` defining the device context pto-isa's CPU stub also declares, a
struct of its own taken by pointer, a soft SYNCALL over every block (``usedCores`` 0) and its
host launcher after ``#include "acl/acl.h"``. Every result comes from shmcomm's shadow."""

from __future__ import annotations

import ctypes
import shutil
from pathlib import Path

import numpy as np
import pytest

import shmcomm
from shmcomm import native
from shmcomm.native import ptoisa

HERE = Path(__file__).resolve().parent
STANDIN = HERE / "pto_isa_standin"
KERNELS = STANDIN / "kernels" / "own_context" / "own_context_kernel.cpp"
N = 64
pytestmark = [pytest.mark.timeout(300),
              pytest.mark.skipif(shutil.which("c++") is None and shutil.which("g++") is None,
                                 reason="no C++ compiler on this machine (install g++)")]


@pytest.fixture(scope="module")
def lib():
    return native.load(KERNELS, pto_isa=STANDIN)


class RingArgs(ctypes.Structure):
    """``struct RingArgs`` of the kernel's ``ring_args.h``."""

    _fields_ = [("rank", ctypes.c_int32), ("next", ctypes.c_int32),
                ("nextBase", ctypes.c_uint64), ("myBase", ctypes.c_uint64)]


def _ring(rt, lib, blocks, own_struct):
    src = rt.alloc((blocks * N,), np.float32)
    dst = rt.alloc((blocks * N,), np.float32)
    flags = rt.alloc((blocks * 16,), np.int32)
    ws = rt.alloc((16,), np.int32)
    src[:] = np.arange(blocks * N) + 1000 * rt.rank
    dst[:] = -1
    if own_struct:
        nxt = (rt.rank + 1) % rt.nranks
        bases = rt.device_context.bases
        args = native.place(rt, RingArgs(rt.rank, nxt, bases[nxt], bases[rt.rank]))
        rt.barrier()
        rt.launch(lib.OwnStructKernel, blocks=blocks, args=(src.ptr, dst.ptr, args.ptr))
    else:
        rt.barrier()
        rt.launch(lib.OwnContextKernel, blocks=blocks,
                  args=(src.ptr, dst.ptr, flags.ptr, rt.device_context, ws.ptr))
    rt.barrier()
    return dst[:].copy()


def test_the_kernels_own_context_and_struct_get_their_kinds(lib):
    assert lib.OwnContextKernel.kinds == "pppcp"  # its own CommDeviceContext: rt.device_context
    assert lib.OwnStructKernel.kinds == "pps"     # RingArgs: a struct the host builds


@pytest.mark.parametrize("mode", ["eager", "hazard", "schedule"])
@pytest.mark.parametrize("own_struct", [False, True])
def test_a_manual_kernel_file_runs_in_every_mode(lib, mode, own_struct):
    nranks, blocks = 3, 2
    res = shmcomm.run(_ring, nranks=nranks, mode=mode, seed=0, args=(lib, blocks, own_struct))
    for rank, dst in enumerate(res):
        np.testing.assert_array_equal(dst, np.arange(blocks * N) + 1000 * ((rank - 1) % nranks))


def test_a_struct_of_another_layout_refuses_the_device_context(lib):
    def host(rt):
        src = rt.alloc((N,), np.float32)
        rt.launch(lib.OwnStructKernel, blocks=1, args=(src.ptr, src.ptr, rt.device_context))

    with pytest.raises(shmcomm.RunError, match=r"argument 2 points to a struct of the kernel's own.*place"):
        shmcomm.run(host, nranks=1)

    def bad(rt):
        native.place(rt, 3)

    with pytest.raises(shmcomm.RunError, match="native.place: pass a ctypes Structure or bytes, got int"):
        shmcomm.run(bad, nranks=1)


def test_the_build_names_what_the_kernel_defines_itself():
    text = ptoisa.kernel_text(KERNELS)
    head = text.split(f'#line 1 "{KERNELS}"\n', 1)[0]
    first_include = head.find("#include") if "#include" in head else len(head)
    for name in ("CommDeviceContext", "HCCL_MAX_RANK_NUM"):  # before anything includes the stub
        assert -1 < head.find(f"#define SHMCOMM_KERNEL_OWNS_{name} 1\n") < first_include
    assert "LaunchOwnContext" not in text and "<<<" not in text  # the host launcher is blanked
    assert '#include "acl/acl.h"' in text  # served by the shadow: pto-isa's CPU stub's ACL names
    ring = STANDIN / "kernels" / "ring_kernel.cpp"  # uses the CPU stub's context: nothing renamed
    assert ptoisa.kernel_owned(ring) == []


def test_a_context_struct_of_another_layout_is_a_struct_of_its_own(tmp_path):
    (tmp_path / "ctx.h").write_text(
        "#pragma once\n#include <cstdint>\n"
        "struct CommDeviceContext { uint32_t rankId; uint32_t rankNum; uint64_t winSize;\n"
        "    uint64_t windowsIn[8]; uint64_t windowsOut[8]; };\n")
    src = tmp_path / "k.cpp"
    src.write_text('#include <pto/pto-inst.hpp>\n#include "ctx.h"\n'
                   "__global__ AICORE void K(__gm__ CommDeviceContext* ctx, __gm__ int32_t* p)\n"
                   "{ p[0] = static_cast<int32_t>(ctx->rankId); }\n")
    assert ptoisa.kernel_owned(src) == ["CommDeviceContext"]
    lib = native.load(src, pto_isa=STANDIN)
    assert lib.K.kinds == "sp"
