"""What pto-isa's manual a2a3 comm-compute kernels need from shmcomm, tested on the stand-in tree
(pto_isa_standin/kernels/manual_kernels.cpp, written by the project): their files compiled as
bisheng's device pass sees them (pto-isa's headers and <cstdint> first, then ``__CCE_AICORE__``;
a ``#ifndef PIPE_FIX`` fallback that finds pto-isa's pipe), two kernels of one rank running at
the same time on two streams, one flag event per (source pipe, destination pipe, event), fp16
copies in every mode, ``HcclRemotePtr``, and pto-isa's AtomicAdd lock shared by the ranks."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import numpy as np
import pytest

import shmcomm
from shmcomm import native
from shmcomm.kernels import layout
from shmcomm.native import ptoisa

HERE = Path(__file__).resolve().parent
STANDIN = HERE / "pto_isa_standin"
KERNELS = STANDIN / "kernels" / "manual_kernels.cpp"
N = 64
pytestmark = [pytest.mark.timeout(300),
              pytest.mark.skipif(shutil.which("c++") is None and shutil.which("g++") is None,
                                 reason="no C++ compiler on this machine (install g++)")]


@pytest.fixture(scope="module")
def lib():
    return native.load(KERNELS, pto_isa=STANDIN)


def _host(rt, producer, consumer, blocks, reps):
    counter = rt.alloc((1,), np.int64)
    arrived = rt.alloc((16,), np.int32)
    src = rt.alloc((blocks * N,), np.float16)
    dst = rt.alloc((blocks * N,), np.float16)
    ready = rt.alloc((blocks * 16,), np.int32)
    out = rt.alloc((blocks,), np.int32)
    counter[:] = 0
    arrived[:] = 0
    src[:] = (np.arange(blocks * N) / 4 + rt.rank).astype(np.float16)
    dst[:] = -1
    ready[:] = 0
    out[:] = 0
    rt.barrier()
    first, second = rt.stream(), rt.stream()
    # the consumer first: it can only finish if the producer runs while it waits
    rt.launch(consumer, blocks=blocks, stream=first, args=(ready.ptr, out.ptr))
    rt.launch(producer, blocks=blocks, stream=second,
              args=(counter.ptr, arrived.ptr, src.ptr, dst.ptr, ready.ptr, rt.device_context, reps))
    first.synchronize()
    second.synchronize()
    rt.barrier()
    return int(counter[0]), dst[:].copy(), out[:].tolist()


@pytest.mark.parametrize("mode", ["eager", "hazard", "schedule"])
def test_a_comm_and_a_compute_kernel_of_one_rank_run_at_the_same_time(lib, mode):
    nranks, blocks, reps = 3, 2, 20000
    res = shmcomm.run(_host, nranks=nranks, mode=mode, seed=0,
                      args=(lib.ProducerKernel, lib.ConsumerKernel, blocks, reps))
    for rank, (_, dst, out) in enumerate(res):
        assert out == [1] * blocks  # the device code ran (__CCE_AICORE__), and both kernels at once
        prev = (rank - 1) % nranks
        want = (np.arange(blocks * N) / 4 + prev).astype(np.float16)
        np.testing.assert_array_equal(dst, want)  # fp16 TPUT, bridged in hazard and schedule mode
    # no add lost: the ranks' read-modify-writes excluded each other under one lock
    assert res[0][0] == nranks * blocks * reps


def _plain_flag_host(rt, kernel, by_notify):
    data, inbox, out = (rt.alloc((N,), np.float32) for _ in range(3))
    flag = rt.alloc((16,), np.int32)
    data[:] = np.arange(N) + 7
    inbox[:] = 0
    out[:] = 0
    flag[:] = 0
    rt.barrier()
    rt.launch(kernel, blocks=1, args=(data.ptr, inbox.ptr, out.ptr, flag.ptr, rt.device_context, by_notify))
    rt.barrier()
    return out[:].copy()


@pytest.mark.parametrize("mode", ["eager", "hazard", "schedule"])
@pytest.mark.parametrize("by_notify", [1, 0])
def test_a_flag_read_or_written_by_plain_accesses_with_dcci_orders_the_data(lib, mode, by_notify):
    # the plain loads and stores are invisible; their dcci is what the race detector orders by
    for seed in (0, 1):
        res = shmcomm.run(_plain_flag_host, nranks=2, mode=mode, seed=seed, detect_races=mode != "eager",
                          args=(lib.PlainFlagKernel, by_notify))
        np.testing.assert_array_equal(res[1], np.arange(N) + 7)


def test_atomic_add_lock_is_one_per_run_at_the_layout_table_place():
    text = (ptoisa.SHADOW_DIR / "pto" / "cpu" / "atomic.hpp").read_text()
    word = int(re.search(r"NATIVE_ATOMIC_WORD = (\d+);", text).group(1))
    assert word == layout.NATIVE_ATOMIC.first and layout.NATIVE_ATOMIC in layout.REGIONS
    assert "pto/cpu/atomic.hpp" in ptoisa.EXPECTED


def test_the_device_pass_prelude_comes_before_the_file():
    text = ptoisa.kernel_text(KERNELS)
    assert text.startswith(ptoisa.PRELUDE)
    assert "#define __CCE_AICORE__" in ptoisa.PRELUDE and "<pto/pto-inst.hpp>" in ptoisa.PRELUDE
    body = text[len(ptoisa.PRELUDE):]
    assert body.startswith(f'#line 1 "{KERNELS}"')
    assert "<<<" not in re.sub(r"//[^\n]*", "", body)  # the host launcher is blanked
