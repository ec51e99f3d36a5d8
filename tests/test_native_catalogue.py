"""C++ twins of the bug catalogue's kernels, caught like their Python twins, and the fixed
kernel on which no mode may report anything."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

import shmcomm
from shmcomm import native

HERE = Path(__file__).resolve().parent / "native"
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
