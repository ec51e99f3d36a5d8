"""Native kernels: building, caching, discovery, template instantiation, argument checks."""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

import numpy as np
import pytest

import shmcomm
from shmcomm import native
from shmcomm.errors import ArgumentError
from shmcomm.native import NativeBuildError

HERE = Path(__file__).resolve().parent  # (the C++ kernels beside these tests)
pytestmark = [pytest.mark.timeout(300),
              pytest.mark.skipif(shutil.which("c++") is None and shutil.which("g++") is None,
                                 reason="no C++ compiler on this machine (install g++)")]

SMALL = """#include <pto/pto-inst.hpp>
#include "extra.hpp"
__global__ AICORE void Add(__gm__ int32_t *dst, int value, double scale)
{
    comm::Signal s(dst);
    comm::TNOTIFY(s, static_cast<int32_t>(value * scale) + EXTRA, comm::NotifyOp::AtomicAdd);
}
"""


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return tmp_path / "cache" / "shmcomm" / "native"


def _source(tmp_path: Path, extra: int = 1, body: str = SMALL) -> Path:
    src = tmp_path / "k.cpp"
    src.write_text(body)
    (tmp_path / "inc").mkdir(exist_ok=True)
    (tmp_path / "inc" / "extra.hpp").write_text(f"#pragma once\nconstexpr int EXTRA = {extra};\n")
    return src


def test_a_build_is_cached_by_content_and_a_header_edit_rebuilds(tmp_path, cache):
    src = _source(tmp_path)
    first = native.load(src, include_dirs=[tmp_path / "inc"])
    assert first.built
    again = native.load(src, include_dirs=[tmp_path / "inc"])
    assert not again.built and again.path == first.path
    assert stat.S_IMODE(os.stat(cache).st_mode) == 0o700
    assert not [p for p in os.listdir(cache) if p.startswith("unit-") or p.endswith(".tmp")]
    _source(tmp_path, extra=2)  # only an included header changes
    edited = native.load(src, include_dirs=[tmp_path / "inc"])
    assert edited.built and edited.path != first.path
    flagged = native.load(src, include_dirs=[tmp_path / "inc"], defines=["UNUSED=1"])
    assert flagged.built and flagged.path not in (first.path, edited.path)


def test_a_compiler_error_carries_the_compilers_file_line(tmp_path, cache):
    src = _source(tmp_path, body=SMALL.replace("comm::TNOTIFY(s,", "comm::TNOTIFY(nosuch,"))
    with pytest.raises(NativeBuildError) as err:
        native.load(src, include_dirs=[tmp_path / "inc"])
    assert any(f"{src}:6:" in d and "error" in d for d in err.value.diagnostics), err.value.diagnostics
    assert f"{src}:6:" in str(err.value)


def test_no_compiler_names_the_package_to_install(tmp_path, cache, monkeypatch):
    monkeypatch.setenv("CXX", "no-such-compiler-anywhere")
    with pytest.raises(NativeBuildError, match="CXX"):
        native.load(_source(tmp_path), include_dirs=[tmp_path / "inc"])
    monkeypatch.delenv("CXX")
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(NativeBuildError, match="apt-get install g\\+\\+"):
        native.load(_source(tmp_path), include_dirs=[tmp_path / "inc"])


def test_load_rejects_bad_arguments(tmp_path):
    with pytest.raises(ArgumentError, match="no file"):
        native.load(tmp_path / "missing.cpp")
    (tmp_path / "none.cpp").write_text("int f() { return 1; }\n")
    with pytest.raises(ArgumentError, match="no `__global__"):
        native.load(tmp_path / "none.cpp")
    with pytest.raises(ArgumentError, match="include_dirs"):
        native.load(_source(tmp_path), include_dirs=[1])


@pytest.fixture(scope="module")
def lib():
    return native.load(HERE / "barrier.cpp")


def test_kernels_are_discovered_with_their_parameter_kinds(lib):
    assert lib.kernels == ["BarrierKernel", "PutNotifyKernel", "CrashKernel", "ThrowKernel", "FillKernel"]
    assert lib.BarrierKernel.kinds == "cpppii"
    assert lib.ThrowKernel.kinds == "i"
    with pytest.raises(ArgumentError, match="template kernel"):
        lib.FillKernel  # noqa: B018
    with pytest.raises(ArgumentError, match="no kernel 'Nope'"):
        lib.kernel("Nope")


def _fill(rt, kernel, value):
    x = rt.alloc((8,), np.int32)
    rt.launch(kernel, blocks=1, args=(x.ptr, value))
    return x.tolist()


def test_a_template_kernel_is_built_per_instantiation(lib):
    k = lib.kernel("FillKernel<int32_t, 8>")
    assert k is lib.kernel("FillKernel<int32_t,  8>")  # spelled with other spaces: the same one
    assert shmcomm.run(_fill, nranks=1, args=(k, 7)) == [[7] * 8]


def _call(rt, kernel, args):
    flags = rt.signal_region("f", 1)
    args = tuple(flags if a == "flags" else rt.device_context if a == "ctx" else a for a in args)
    rt.launch(kernel, blocks=1, args=args)


@pytest.mark.parametrize("args,match", [
    (("flags", 1), "takes 3 argument"),
    ((5, 1, 1), "argument 0 is a pointer: pass a GMPtr"),
    (("flags", 1.5, 1), "argument 1 is an integer"),
])
def test_a_launch_checks_count_and_kinds_with_a_clear_error(lib, args, match):
    with pytest.raises(shmcomm.RunError, match=match):
        shmcomm.run(_call, nranks=1, args=(lib.CrashKernel, args))


def test_a_device_context_parameter_takes_only_rt_device_context(lib):
    with pytest.raises(shmcomm.RunError, match="DeviceContext\\*: pass rt.device_context"):
        shmcomm.run(_call, nranks=1, args=(lib.PutNotifyKernel, ("flags",) * 5 + (1, 1, 1)))


@pytest.mark.parametrize("source", ["barrier.cpp", "collectives.cpp", "catalogue.cpp"])
def test_the_kernel_api_compiles_warning_free(source):
    # -Wall -Wextra are always on; -Werror turns any warning of the headers or the trampolines
    # into a build error
    lib = native.load(HERE / source, cxxflags=["-Werror"], kernels=(
        ["FillKernel<float, 4>", "FillKernel<int64_t, 2>"] if source == "barrier.cpp" else []))
    assert lib.kernels
