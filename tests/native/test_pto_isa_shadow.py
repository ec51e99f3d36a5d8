"""A pto-isa checkout behind shmcomm's shadow, tested on a stand-in tree the project writes
itself (pto_isa_standin/: pto-isa's include paths and *_IMPL declarations, with a sequential
simulation's behaviour: a TWAIT that returns at once, copies that copy nothing, plain adds), so
every result here comes from shmcomm's shadow, never from the stand-in."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import psutil
import pytest

import shmcomm
from shmcomm import native
from shmcomm.errors import ArgumentError
from shmcomm.launch.stacks import show_path
from shmcomm.native import ptoisa

HERE = Path(__file__).resolve().parent
STANDIN = HERE / "pto_isa_standin"
KERNELS = STANDIN / "kernels" / "ring_kernel.cpp"
N = 64
pytestmark = [pytest.mark.timeout(300),
              pytest.mark.skipif(shutil.which("c++") is None and shutil.which("g++") is None,
                                 reason="no C++ compiler on this machine (install g++)")]


@pytest.fixture(scope="module")
def lib():
    return native.load(KERNELS, pto_isa=STANDIN)


def _ring_host(rt, kernel, blocks, rounds):
    src = rt.alloc((blocks * N,), np.float32)
    stage = rt.alloc((blocks * N,), np.float32)
    dst = rt.alloc((blocks * N,), np.float32)
    ones = rt.alloc((N,), np.int32)
    total = rt.alloc((N,), np.int32)
    flags = rt.alloc((blocks * 16,), np.int32)
    ones[:] = 1
    total[:] = 0
    flags[:] = 0
    got = []
    for r in range(1, rounds + 1):
        src[:] = np.arange(blocks * N, dtype=np.float32) + 1000 * rt.rank + 100 * r
        dst[:] = -1
        rt.barrier()
        rt.launch(kernel, blocks=blocks,
                  args=(src.ptr, stage.ptr, dst.ptr, ones.ptr, total.ptr, flags.ptr, rt.device_context, r))
        rt.barrier()
        got.append(dst[:].copy())
    return got, total[:].copy()


@pytest.mark.parametrize("mode", ["eager", "hazard", "schedule"])
def test_a_pto_inst_kernel_runs_on_the_shadow_in_every_mode(lib, mode):
    nranks, blocks, rounds = 3, 2, 2
    for seed in (0, 1):
        res = shmcomm.run(_ring_host, nranks=nranks, mode=mode, seed=seed,
                          args=(lib.RingKernel, blocks, rounds))
        for rank, (got, total) in enumerate(res):
            prev = (rank - 1) % nranks
            for r, dst in enumerate(got, 1):
                want = np.arange(blocks * N, dtype=np.float32) + 1000 * prev + 100 * r + prev
                np.testing.assert_array_equal(dst, want)
            if rank == 0:  # every block of every rank and round added its ones atomically
                assert total.tolist() == [nranks * blocks * rounds] * N


def test_a_wait_never_gives_up_silently(lib):
    def host(rt):
        flag = rt.alloc((16,), np.int32)
        flag[:] = 0
        rt.launch(lib.WaitForeverKernel, blocks=1, args=(flag.ptr,))

    with pytest.raises(shmcomm.RunError) as err:
        shmcomm.run(host, nranks=2, mode="eager", wait_timeout=2, timeout=60)
    # the native wait is registered: the deadlock watch sees both ranks waiting on their word,
    # and the report names the kernel's TWAIT line (pto-isa's wrapper passes none: its PC's)
    msg = str(err.value)
    assert "deadlock" in msg and "signal rank 0" in msg and "signal rank 1" in msg
    src = KERNELS.read_text().splitlines()
    line = next(i for i, ln in enumerate(src, 1) if "WaitForeverKernel" in ln)
    line = next(i for i, ln in enumerate(src[line:], line + 1) if "comm::TWAIT" in ln)
    for rank in (0, 1):
        assert f"rank {rank} block 0 waits at {show_path(str(KERNELS))}:{line} (native)" in msg, msg
    # the launcher resolved the PC with a helper process of its own, which is gone
    assert [p.name() for p in psutil.Process().children(recursive=True)] == []


def test_host_code_is_blanked_keeping_every_line():
    text = ptoisa.kernel_text(KERNELS)
    assert text.startswith(ptoisa.PRELUDE)  # pto-isa's headers and the device pass's macro first
    text = text[len(ptoisa.PRELUDE):]
    src = KERNELS.read_text()
    body = text.split("\n", 1)[1]  # after the #line naming the user's file
    assert text.startswith(f'#line 1 "{KERNELS}"')
    assert body.count("\n") == src.count("\n") + 1
    code = re.sub(r"//[^\n]*", "", body)
    for gone in ("RunRing", "RunAll", "<<<", "ForkAndRunWithHcclRootInfo", '"common.hpp"'):
        assert gone not in code
    assert '#include "shmcomm_shadow/a2a3_common.hpp"' in body
    kept = [i for i, ln in enumerate(src.splitlines()) if "__global__" in ln]
    lines = body.splitlines()
    assert all(lines[i] == src.splitlines()[i] for i in kept)


def _copy_standin(tmp_path: Path) -> Path:
    root = tmp_path / "pto-isa"
    shutil.copytree(STANDIN / "include", root / "include")
    return root


def test_a_checkout_whose_signatures_differ_is_refused_naming_the_file(tmp_path):
    root = _copy_standin(tmp_path)
    f = root / "include" / "pto" / "cpu" / "comm" / "TWait.hpp"
    f.write_text(f.read_text().replace("comm::WaitCmp cmp)", "comm::WaitCmp cmp, int timeout)"))
    with pytest.raises(native.PtoIsaMismatch) as err:
        native.load(KERNELS, pto_isa=root)
    msg = str(err.value)
    assert str(f) in msg and "TWAIT_IMPL" in msg and ptoisa.CHECKED_AGAINST in msg
    (root / "include" / "pto" / "cpu" / "comm" / "TNotify.hpp").unlink()
    with pytest.raises(native.PtoIsaMismatch, match="TNotify.hpp is missing"):
        native.load(KERNELS, pto_isa=root)
    with pytest.raises(native.PtoIsaMismatch, match="no pto-isa checkout"):
        native.load(KERNELS, pto_isa=tmp_path)
    with pytest.raises(ArgumentError, match="pto_isa must be the path"):
        native.load(KERNELS, pto_isa=3)


def test_the_environment_names_the_checkout_for_pto_isa_true(monkeypatch, lib):
    monkeypatch.setenv(ptoisa.ENV, str(STANDIN))
    got = native.load(KERNELS, pto_isa=True)
    assert got.pto_isa == STANDIN / "include" and got.path == lib.path
    plain = native.load(HERE / "barrier.cpp")  # without pto_isa: shmcomm's own API, whatever the environment
    assert plain.pto_isa is None
    monkeypatch.setenv(ptoisa.ENV, str(HERE))
    with pytest.raises(native.PtoIsaMismatch, match="no pto-isa checkout"):
        native.load(KERNELS, pto_isa=True)
    monkeypatch.delenv(ptoisa.ENV)
    with pytest.raises(ArgumentError, match="SHMCOMM_PTO_ISA"):
        native.load(KERNELS, pto_isa=True)


def _gcc_major() -> int:
    gxx = shutil.which("g++")
    if gxx is None:
        return 0
    out = subprocess.run([gxx, "-dumpversion"], capture_output=True, text=True, check=False).stdout
    return int(out.split(".")[0] or 0)


@pytest.mark.skipif(_gcc_major() == 0 or _gcc_major() >= 13,
                    reason="needs g++ older than 13 (this machine's g++ is new enough, or absent)")
def test_a_compiler_that_rejects_the_checkout_is_named_with_what_to_install(tmp_path, monkeypatch):
    root = _copy_standin(tmp_path)
    (root / "include" / "pto" / "cpu" / "TReduceIdx.hpp").write_text(
        "template <typename T> void f() { static_assert(false, \"no\"); }\n")
    monkeypatch.setenv("CXX", "g++")
    with pytest.raises(native.NativeBuildError) as err:
        native.load(KERNELS, pto_isa=root)
    assert "TReduceIdx.hpp" in str(err.value) and "apt-get install clang-19" in str(err.value)


def test_host_code_in_namespaces_and_comments_is_found(tmp_path):
    src = tmp_path / "k.cpp"
    src.write_text(
        '#include "../suite/common.hpp"\n'
        "namespace demo {\n"
        "__global__ AICORE void K(int* p) { p[0] = '}'; /* } */ }\n"
        "static int Helper(int x) { return x + 1; }  // Run() is mentioned here only\n"
        "bool Run(Ctx& c) {\n"
        "    K<<<1, nullptr, c.stream>>>(c.p);  // {\n"
        "    return Helper(1) > 0;\n"
        "}\n"
        "bool RunAll() { return Run(g); }\n"
        "}  // namespace demo\n")
    out = ptoisa.kernel_text(src)[len(ptoisa.PRELUDE):].split("\n", 1)[1].splitlines()
    assert out[0] == '#include "shmcomm_shadow/a2a3_common.hpp"'
    assert out[2].startswith("__global__ AICORE void K") and out[3].startswith("static int Helper")
    assert all(not ln.strip() for ln in out[4:9]) and out[9] == "}  // namespace demo"


ASYNC_COLL = STANDIN / "kernels" / "async_collectives_kernel.cpp"


@pytest.fixture(scope="module")
def coll():
    return native.load(ASYNC_COLL, pto_isa=STANDIN)


def _peek_host(rt, kernel):
    src, dst, back = (rt.alloc((N,), np.float32) for _ in range(3))
    seen = rt.alloc((4,), np.float32)
    ws = rt.alloc((256,), np.uint8)
    src[:] = np.arange(N) + 1000 * rt.rank
    dst[:] = -1
    back[:] = -1
    seen[:] = -2
    rt.barrier()
    rt.launch(kernel, blocks=1, args=(src.ptr, dst.ptr, back.ptr, seen.ptr, ws.ptr, rt.device_context))
    rt.barrier()
    return seen[:].tolist(), dst[:].copy(), back[:].copy()


@pytest.mark.parametrize("mode", ["eager", "hazard", "schedule"])
def test_an_async_copy_lands_at_its_wait_not_at_issue(coll, mode):
    n = 3
    res = shmcomm.run(_peek_host, nranks=n, mode=mode, seed=0, args=(coll.AsyncPeekKernel,))
    for rank, (seen, dst, back) in enumerate(res):
        prev = (rank - 1) % n
        if mode == "eager":  # the stand-in copied at issue; shmcomm's SDMA queue holds it to the Test
            assert seen[0] == -1 and seen[3] == 1 and seen[1] == 1000 * rank
        assert seen[2] == 1000 * rank  # landed by the Wait, whatever the model
        np.testing.assert_array_equal(dst, np.arange(N) + 1000 * prev)
        np.testing.assert_array_equal(back, np.arange(N) + 1000 * prev)  # never waited: the kernel's end


def _collectives_host(rt, kernel):
    n = rt.nranks
    src, dst, total = (rt.alloc((N,), np.float32) for _ in range(3))
    rows = rt.alloc((8 * N,), np.float32)
    src[:] = np.arange(N) + 1000 * rt.rank
    dst[:] = -1
    total[:] = -1
    rows[:] = -1
    rt.barrier()
    rt.launch(kernel, blocks=1, args=(src.ptr, dst.ptr, total.ptr, rows.ptr, rt.device_context))
    rt.barrier()
    return dst[:].copy(), total[:].copy(), rows[:n * N].copy()


@pytest.mark.parametrize("mode", ["eager", "hazard", "schedule"])
def test_the_root_collectives_are_shmcomms_in_every_mode(coll, mode):
    n = 3
    res = shmcomm.run(_collectives_host, nranks=n, mode=mode, seed=0, args=(coll.CollectivesKernel,))
    for rank, (dst, total, rows) in enumerate(res):
        np.testing.assert_array_equal(dst, np.arange(N))  # rank 0's src, broadcast
        if rank == 0:
            np.testing.assert_array_equal(total, sum(np.arange(N) + 1000 * r for r in range(n)))
            np.testing.assert_array_equal(rows, np.concatenate([np.arange(N) + 1000 * r for r in range(n)]))


@pytest.mark.parametrize("mode", ["eager", "hazard"])
def test_a_root_collective_called_off_its_root_is_refused(coll, mode):
    def host(rt):
        src = rt.alloc((N,), np.float32)
        rt.launch(coll.OffRootKernel, blocks=1, args=(src.ptr, rt.device_context))

    with pytest.raises(shmcomm.RunError) as err:
        shmcomm.run(host, nranks=2, mode=mode, seed=0, timeout=60)
    msg = str(err.value)
    assert "TBROADCAST: called on rank 1" in msg and "only the root calls" in msg, msg


def test_host_code_naming_the_suites_harness_is_found(tmp_path):
    suite = tmp_path / "suite"
    (suite / "case").mkdir(parents=True)
    (suite / "mpi.h").write_text("#define COMM_MPI_CHAR 1\ninline int CommMpiRank() { return 0; }\n")
    (suite / "common.hpp").write_text(
        '#include "mpi.h"\n'
        "struct CommDeviceContext { int rankId; };  // the kernels use it: never host code\n"
        "struct TestContext { int stream; };\n"
        "inline void* WindowAlloc(unsigned long base, unsigned long& off, unsigned long n);\n"
        "inline int PeerOf(int r) { return r + 1; }  // device-side, used through a helper\n")
    src = suite / "case" / "k.cpp"
    src.write_text(
        '#include "../common.hpp"\n'
        "static int Helper(CommDeviceContext* c) { return PeerOf(c->rankId); }\n"
        "__global__ AICORE void K(CommDeviceContext* c) { Helper(c); }\n"
        "bool Ready(bool ok) { return CommMpiRank() == 0 && ok && COMM_MPI_CHAR; }\n"
        "struct Device { TestContext ctx; };\n"
        "using Launcher = void (*)(int*, aclrtStream);\n"
        "bool RunOne(Launcher l, Device& d) { return Ready(true) && l != nullptr && d.ctx.stream; }\n"
        "void* Carve() { unsigned long off = 0; return WindowAlloc(0, off, 64); }\n")
    out = ptoisa.kernel_text(src)[len(ptoisa.PRELUDE):].split("\n", 1)[1].splitlines()
    # Helper names the harness's PeerOf, but a kernel calls it: device code, kept
    assert out[1].startswith("static int Helper") and out[2].startswith("__global__ AICORE void K")
    assert all(not ln.strip() for ln in out[3:8]), out[3:8]
