"""Native kernels wherever users run kernels: ``launch --program``, the stress harness's
``--program``, a pool, and the pytest fixture's ``shmcomm.run`` underneath."""

from __future__ import annotations

import shutil
import textwrap
from pathlib import Path

import numpy as np
import pytest
from _helpers import run_cli

import shmcomm
from shmcomm import native

HERE = Path(__file__).resolve().parent  # (the C++ kernels beside these tests)
pytestmark = [pytest.mark.timeout(300),
              pytest.mark.skipif(shutil.which("c++") is None and shutil.which("g++") is None,
                                 reason="no C++ compiler on this machine (install g++)")]

PROGRAM = """
import numpy as np
import shmcomm.native

lib = shmcomm.native.load({source!r})


def host(rt, rounds=3):
    flags = rt.signal_region("pp", 1)
    if rt.nranks != 2:
        raise ValueError("two ranks")
    rt.launch(lib.PingPongKernel, blocks=1, args=(rt.device_context, flags, rounds))
    return int(rt.signals[flags.offset // 4])
"""


@pytest.fixture
def prog(tmp_path):
    (tmp_path / "nativeprog.py").write_text(textwrap.dedent(PROGRAM.format(
        source=str(HERE / "collectives.cpp"))))
    return tmp_path


def test_launch_and_stress_run_a_native_program(prog):
    p = run_cli("launch", "--nranks", "2", "--blocks", "1", "--program", "nativeprog.py:host",
                "--arg", "rounds=5", cwd=prog, timeout=240)
    assert p.returncode == 0, p.stderr
    assert p.stdout.splitlines() == ["rank 0: 5", "rank 1: 5"]
    p = run_cli("stress", "--program", "nativeprog.py:host", "--nranks", "2", "--blocks", "1",
                "--mode", "schedule", "--runs", "2", "--no-progress", cwd=prog, timeout=240)
    assert p.returncode == 0 and "failures: 0" in p.stdout, p.stdout + p.stderr


LIB = native.load(HERE / "barrier.cpp") if shutil.which("c++") or shutil.which("g++") else None


def _stamp(rt, blocks):
    stride = 8
    data = rt.alloc((rt.nranks * stride,), np.int32)
    out = rt.alloc((rt.nranks * stride + stride,), np.int32)
    out[rt.nranks * stride:rt.nranks * stride + blocks] = [10 * rt.rank + b + 1 for b in range(blocks)]
    rt.reset_signals()
    rt.launch(LIB.BarrierKernel, blocks=blocks,
              args=(rt.device_context, rt.signal_base, data.ptr, out.ptr, stride, 1))
    return out[:rt.nranks * stride].tolist()


def test_a_pool_runs_native_kernels_in_every_mode():
    expect = [10 * r + b + 1 if b < 2 else 0 for r in range(2) for b in range(8)]
    with shmcomm.Pool(nranks=2) as pool:
        for mode in ("eager", "hazard", "schedule"):
            assert pool.run(_stamp, args=(2,), mode=mode) == [expect, expect]


def _streams(rt):
    x = rt.alloc((8,), np.int32)
    y = rt.alloc((8,), np.int32)
    fill = LIB.kernel("FillKernel<int32_t, 8>")
    s1, s2 = rt.stream(), rt.stream()
    a = rt.launch(fill, blocks=1, args=(x.ptr, 3), stream=s1)
    b = rt.launch(fill, blocks=1, args=(y.ptr, 4), stream=s2)
    s1.synchronize()
    s2.synchronize()
    return a.done and b.done, x.tolist(), y.tolist()


def test_native_kernels_run_on_streams():
    assert shmcomm.run(_streams, nranks=2) == [(True, [3] * 8, [4] * 8)] * 2
