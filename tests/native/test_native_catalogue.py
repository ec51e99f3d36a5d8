"""C++ twins of the bug catalogue's kernels, caught like their Python twins, and the fixed
kernel on which no mode may report anything."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

import shmcomm
from shmcomm import native

HERE = Path(__file__).resolve().parent  # (the C++ kernels beside these tests)
SRC = HERE / "catalogue.cpp"
pytestmark = [pytest.mark.timeout(300),
              pytest.mark.skipif(shutil.which("c++") is None and shutil.which("g++") is None,
                                 reason="no C++ compiler on this machine (install g++)")]


def _line(marker: str) -> int:
    return next(i for i, ln in enumerate(SRC.read_text().splitlines(), 1) if marker in ln)


@pytest.fixture(scope="module")
def lib():
    return native.load(SRC)  # finds barrier_impl.hpp beside it


def _two_phase(rt, kernel, size):
    src = rt.alloc((size,), np.float32)
    recv = rt.alloc((size,), np.float32)
    out = rt.alloc((size,), np.float32)
    src[:] = rt.rank + 1.0
    rt.reset_signals()
    rt.launch(kernel, args=(rt.device_context, rt.signal_base, src.ptr, recv.ptr, out.ptr, size))
    return out.tolist()


@pytest.mark.parametrize("mode", ["hazard", "schedule"])
def test_the_phase_blind_slot_is_caught(lib, mode):
    for seed in (0, 1):
        with pytest.raises(shmcomm.RunError) as err:
            shmcomm.run(_two_phase, nranks=3, blocks=2, mode=mode, seed=seed,
                        args=(lib.TwoPhaseKernel, 64))
        text = str(err.value)
        assert str(HERE / "barrier_impl.hpp") in text and str(SRC) in text, text


def _adds(rt, kernel, iters):
    acc = rt.alloc((16,), np.float32)
    rt.barrier()
    rt.launch(kernel, args=(rt.device_context, acc.ptr, 16, iters))
    rt.barrier()
    return float(acc[0])


@pytest.mark.parametrize("mode", ["hazard", "schedule"])
def test_a_nonatomic_atomicadd_is_reported_at_its_store(lib, mode):
    for seed in (0, 1):
        with pytest.raises(shmcomm.RunError) as err:
            shmcomm.run(_adds, nranks=3, blocks=2, mode=mode, seed=seed, args=(lib.RmwKernel, 20))
        assert f"{SRC}:{_line('RMW_STORE_LINE')}" in str(err.value), str(err.value)


@pytest.mark.parametrize("mode", ["eager", "hazard", "schedule"])
def test_the_atomic_add_fix_passes_every_mode(lib, mode):
    for seed in (0, 1, 2):
        res = shmcomm.run(_adds, nranks=3, blocks=2, mode=mode, seed=seed, args=(lib.AtomicAddKernel, 20))
        assert res[0] == 3 * 2 * 20


def _manual_copy(rt, kernel, size, flagged):
    flags = rt.signal_region("m", 1)
    src = rt.alloc((size,), np.float32)
    recv = rt.alloc((size,), np.float32)
    out = rt.alloc((size,), np.float32)
    src[:] = 10000.0 * (rt.rank + 1) + np.arange(size, dtype=np.float32)
    rt.barrier()
    rt.launch(kernel, args=(rt.device_context, flags, src.ptr, recv.ptr, out.ptr, size, flagged))
    prev = (rt.rank - 1) % rt.nranks
    return bool(np.array_equal(out, 10000.0 * (prev + 1) + np.arange(size, dtype=np.float32)))


@pytest.mark.parametrize("mode", ["eager", "hazard", "schedule"])
def test_the_seeds_hand_made_pipeline_passes_every_mode(lib, mode):
    for seed in (0, 1, 2):
        assert shmcomm.run(_manual_copy, nranks=3, blocks=1, mode=mode, seed=seed,
                           args=(lib.ManualCopyKernel, 200, 1)) == [True] * 3


@pytest.mark.parametrize("mode", ["hazard", "schedule"])
def test_a_missing_wait_flag_is_reported_at_its_store(lib, mode):
    for seed in (0, 1):
        with pytest.raises(shmcomm.RunError) as err:
            shmcomm.run(_manual_copy, nranks=3, blocks=1, mode=mode, seed=seed,
                        args=(lib.ManualCopyKernel, 200, 0))
        assert f"{SRC}:{_line('MANUAL_STORE_LINE')}" in str(err.value), str(err.value)


STRIDE = 8


def _no_reset(rt, kernel, blocks, reset):
    """The seed barrier's stamp kernel launched three times; ``reset`` zeroes the signals
    before each launch (the fix), else only before the first (the bug)."""
    data = rt.alloc((rt.nranks * STRIDE,), np.int32)
    out = rt.alloc((rt.nranks * STRIDE + STRIDE,), np.int32)
    rt.reset_signals()
    good = []
    for launch in (1, 2, 3):
        if reset and launch > 1:
            rt.reset_signals()
        stamps = [1000 * launch + 10 * rt.rank + b for b in range(blocks)]
        out[rt.nranks * STRIDE:rt.nranks * STRIDE + blocks] = stamps
        rt.barrier()
        rt.launch(kernel, blocks=blocks,
                  args=(rt.device_context, rt.signal_base, data.ptr, out.ptr, STRIDE, 1))
        want = [1000 * launch + 10 * r + b if b < blocks else 0
                for r in range(rt.nranks) for b in range(STRIDE)]
        good.append(out[:rt.nranks * STRIDE].tolist() == want)
    return good


@pytest.fixture(scope="module")
def barrier_lib():
    return native.load(HERE / "barrier.cpp")


@pytest.mark.parametrize("mode", ["eager", "hazard", "schedule"])
def test_the_seed_barrier_with_a_reset_before_every_launch_passes(barrier_lib, mode):
    for seed in (0, 1):
        res = shmcomm.run(_no_reset, nranks=3, mode=mode, seed=seed,
                          args=(barrier_lib.BarrierKernel, 2, True))
        assert res == [[True] * 3] * 3


@pytest.mark.parametrize("mode", ["hazard", "schedule"])
def test_no_reset_between_launches_is_reported_at_the_kernels_lines(barrier_lib, mode):
    for seed in (0, 1):
        with pytest.raises(shmcomm.RunError) as err:  # a launch reads stamps not yet written
            shmcomm.run(_no_reset, nranks=3, mode=mode, seed=seed,
                        args=(barrier_lib.BarrierKernel, 2, False))
        assert "data race" in str(err.value) and f"{HERE / 'barrier.cpp'}:" in str(err.value), str(err.value)
