"""Native kernels in every mode: the seed's DeviceBarrier as the seed writes it, its buggy twin,
an AllReduce written the seed's way, Python and C++ kernels signalling each other, crashes,
C++ exceptions and deadlocks."""

from __future__ import annotations

import shutil
import threading
import time
from pathlib import Path

import numpy as np
import pytest

import shmcomm
from shmcomm import native
from shmcomm.comm import TNOTIFY, TWAIT, GetRemotePtr, NotifyOp, Signal, WaitCmp
from shmcomm.launch.stacks import show_path

HERE = Path(__file__).resolve().parent  # (the C++ kernels beside these tests)
pytestmark = [pytest.mark.timeout(300),
              pytest.mark.skipif(shutil.which("c++") is None and shutil.which("g++") is None,
                                 reason="no C++ compiler on this machine (install g++)")]


def _line(path: Path, marker: str) -> int:
    return next(i for i, ln in enumerate(path.read_text().splitlines(), 1) if marker in ln)


@pytest.fixture(scope="module")
def lib():
    return native.load(HERE / "barrier.cpp")


@pytest.fixture(scope="module")
def coll():
    return native.load(HERE / "collectives.cpp")


STRIDE = 8


def _barrier_host(rt, kernel, blocks, launches, fenced):
    data = rt.alloc((rt.nranks * STRIDE,), np.int32)
    out = rt.alloc((rt.nranks * STRIDE + STRIDE,), np.int32)
    seen = []
    for it in range(launches):
        rt.reset_signals()
        data[:] = 0
        out[:] = 0
        out[rt.nranks * STRIDE:rt.nranks * STRIDE + blocks] = [
            1000 * (it + 1) + 10 * rt.rank + b for b in range(blocks)]
        rt.barrier()
        rt.launch(kernel, blocks=blocks,
                  args=(rt.device_context, rt.signal_base, data.ptr, out.ptr, STRIDE, fenced))
        seen.append(out[:rt.nranks * STRIDE].tolist())
    return seen


def _expected(nranks, blocks, it):
    return [1000 * (it + 1) + 10 * r + b if b < blocks else 0
            for r in range(nranks) for b in range(STRIDE)]


@pytest.mark.parametrize("mode", ["eager", "hazard", "schedule"])
@pytest.mark.parametrize("nranks,blocks", [(4, 2), (8, 4)])
def test_the_seed_device_barrier_passes_every_seed(lib, mode, nranks, blocks):
    launches = 2
    for seed in (0, 1, 2):
        res = shmcomm.run(_barrier_host, nranks=nranks, mode=mode, seed=seed,
                          args=(lib.BarrierKernel, blocks, launches, 1))
        for per_rank in res:
            assert per_rank == [_expected(nranks, blocks, it) for it in range(launches)]


@pytest.mark.parametrize("mode", ["hazard", "schedule"])
def test_the_buggy_twin_is_reported_at_its_cpp_line(lib, mode):
    impl = HERE / "barrier_impl.hpp"
    notify = _line(impl, "comm::TNOTIFY(arrSig")
    cross = _line(impl, "comm::TNOTIFY(sig, 1")
    with pytest.raises(shmcomm.RunError) as err:
        shmcomm.run(_barrier_host, nranks=4, mode=mode, seed=0, args=(lib.BarrierKernel, 2, 1, 0))
    text = str(err.value)
    assert f"{impl}:{notify}" in text or f"{impl}:{cross}" in text, text


def _put_notify(rt, kernel, drain, fence, size):
    flags = rt.signal_region("flags", 1)
    src = rt.alloc((size,), np.float32)
    recv = rt.alloc((size,), np.float32)
    out = rt.alloc((size,), np.float32)
    src[:] = rt.rank + 1.0
    rt.barrier()
    rt.launch(kernel, blocks=1,
              args=(rt.device_context, flags, src.ptr, recv.ptr, out.ptr, size, drain, fence))
    return out.tolist()


@pytest.mark.parametrize("mode", ["eager", "hazard", "schedule"])
def test_put_then_drain_fence_notify_passes(lib, mode):
    for seed in (0, 1):
        res = shmcomm.run(_put_notify, nranks=3, mode=mode, seed=seed, args=(lib.PutNotifyKernel, 1, 1, 200))
        assert res == [[(r - 1) % 3 + 1.0] * 200 for r in range(3)]


@pytest.mark.parametrize("mode", ["hazard", "schedule"])
@pytest.mark.parametrize("drain", [0, 1])  # notify before drain; drain without the DDR fence
def test_put_notify_twins_are_reported_at_the_notify_or_copy_line(lib, mode, drain):
    src = HERE / "barrier.cpp"
    with pytest.raises(shmcomm.RunError) as err:
        shmcomm.run(_put_notify, nranks=2, mode=mode, seed=0, args=(lib.PutNotifyKernel, drain, 0, 256))
    text = str(err.value)
    assert f"{src}:{_line(src, 'NOTIFY_LINE')}" in text or f"{src}:{_line(src, 'TPUT(remoteG')}" in text, text


def _allreduce(rt, kernel, blocks, share):
    n = rt.nranks
    x = rt.alloc((n * share,), np.float32)
    acc = rt.alloc((share,), np.float32)
    out = rt.alloc((n * share,), np.float32)
    rng = np.random.default_rng(rt.rank)
    x[:] = rng.integers(-50, 50, n * share).astype(np.float32)
    mine = x.copy()
    rt.reset_signals()
    rt.launch(kernel, blocks=blocks, args=(rt.device_context, rt.signal_base, x.ptr, acc.ptr, out.ptr, share))
    rt.barrier()
    return mine, out.copy()


@pytest.mark.parametrize("mode", ["eager", "hazard", "schedule"])
def test_a_seed_style_allreduce_matches_numpy(coll, mode):
    res = shmcomm.run(_allreduce, nranks=4, mode=mode, seed=3, args=(coll.AllReduceKernel, 2, 64))
    expect = np.sum([mine for mine, _ in res], axis=0)
    for _, out in res:
        np.testing.assert_array_equal(out, expect)


def _py_pingpong(ctx, flags, rounds):
    me = ctx.rank
    mine, theirs = Signal(flags), Signal(GetRemotePtr(ctx, flags, 1 - me))
    for i in range(rounds):
        if me == 0:
            TNOTIFY(theirs, 1, NotifyOp.AtomicAdd)
            TWAIT(mine, i + 1, WaitCmp.GE)
        else:
            TWAIT(mine, i + 1, WaitCmp.GE)
            TNOTIFY(theirs, 1, NotifyOp.AtomicAdd)


def _mixed(rt, kernel, native_rank, rounds):
    flags = rt.signal_region("pp", 1)
    if rt.rank == native_rank:
        rt.launch(kernel, blocks=1, args=(rt.device_context, flags, rounds))
    else:
        rt.launch(_py_pingpong, blocks=1, args=(flags, rounds))
    return int(rt.signals[flags.offset // 4])


@pytest.mark.parametrize("mode", ["eager", "hazard", "schedule"])
@pytest.mark.parametrize("native_rank", [0, 1])
def test_a_python_kernel_and_a_cpp_kernel_signal_each_other(coll, mode, native_rank):
    rounds = 200 if mode == "eager" else 20
    assert shmcomm.run(_mixed, nranks=2, mode=mode, seed=1,
                       args=(coll.PingPongKernel, native_rank, rounds)) == [rounds, rounds]


def _crash(rt, kernel):
    flags = rt.signal_region("f", 1)
    rt.barrier()
    rt.launch(kernel, blocks=2, args=(flags, 1, 1))


def test_a_native_crash_names_rank_block_and_line(lib):
    src = HERE / "barrier.cpp"
    with pytest.raises(shmcomm.RunError) as err:
        shmcomm.run(_crash, nranks=2, args=(lib.CrashKernel,))
    text = str(err.value)
    line = _line(src, "comm::TNOTIFY(sig, 0")  # the last instruction before the bad store
    assert "rank 1 block 1" in text and "SIGSEGV" in text, text
    assert f"{src}:{line}" in text and "CrashKernel" in text, text
    if shutil.which("addr2line"):  # the faulting frame resolved to the store itself
        assert f"#0 {src}:{_line(src, 'CRASH_LINE')} (CrashKernel" in text, text


def _throw(rt, kernel):
    rt.launch(kernel, blocks=2, args=(rt.rank,))


def test_a_cpp_exception_is_that_blocks_error_at_its_line(lib):
    src = HERE / "barrier.cpp"
    with pytest.raises(shmcomm.RunError) as err:
        shmcomm.run(_throw, nranks=2, args=(lib.ThrowKernel,))
    text = str(err.value)
    assert "rank 1 block" in text and "value must not be positive" in text, text
    assert f"{src}:{_line(src, 'value > 0') - 1}" in text, text


def _stuck(rt, kernel):
    flags = rt.signal_region("s", 1)
    rt.launch(kernel, blocks=1, args=(flags,))


@pytest.mark.parametrize("mode", ["eager", "schedule"])
def test_a_native_wait_nobody_answers_is_reported_as_a_deadlock(coll, mode):
    with pytest.raises(shmcomm.DeadlockError) as err:
        shmcomm.run(_stuck, nranks=2, mode=mode, args=(coll.StuckKernel,))
    assert "signal rank 1 offset" in str(err.value)
    if mode == "eager":  # where each native block waits: the kernel's line
        src = HERE / "collectives.cpp"
        where = f"{show_path(str(src))}:{_line(src, 'STUCK_LINE')} (native)"
        for rank in (0, 1):
            assert f"rank {rank} block 0 waits at {where}" in str(err.value), str(err.value)


def _set_twice(rt, kernel):
    flags = rt.signal_region("pp", 1)
    rt.launch(kernel, blocks=1, args=(flags, 5))
    return int(rt.signals[flags.offset // 4])


@pytest.mark.parametrize("semantics", ["store", "read-add"])
def test_a_native_set_runs_under_either_set_semantics(coll, semantics):
    assert shmcomm.run(_set_twice, nranks=1, set_semantics=semantics, args=(coll.SetKernel,)) == [5]


def _late_notify(ctx, flags, delay):
    time.sleep(delay)  # the native waiter has long gone to sleep on the futex by now
    TNOTIFY(Signal(GetRemotePtr(ctx, flags, 1)), 1, NotifyOp.AtomicAdd)


def _sleeper(rt, kernel, delay):
    flags = rt.signal_region("s", 1)
    rt.barrier()
    t0 = time.perf_counter()
    if rt.rank == 0:
        rt.launch(_late_notify, blocks=1, args=(flags, delay))
    else:
        rt.launch(kernel, blocks=1, args=(flags,))
    return time.perf_counter() - t0


def test_a_native_wait_asleep_on_the_futex_is_woken_by_a_python_notify(coll):
    took = shmcomm.run(_sleeper, nranks=2, args=(coll.StuckKernel, 0.4))
    assert 0.35 < took[1] < 5.0


def _helper_keeps_watch_off(rt, kernel):
    flags = rt.signal_region("s", 1)
    helper = threading.Event()
    t = threading.Thread(target=helper.wait, args=(5.0,))  # a host thread that could notify
    t.start()
    try:
        rt.launch(kernel, blocks=1, args=(flags,))
    finally:
        helper.set()
        t.join()


def test_a_native_wait_times_out_with_shmcomms_error_at_its_line(coll):
    src = HERE / "collectives.cpp"
    with pytest.raises(shmcomm.RunError) as err:
        shmcomm.run(_helper_keeps_watch_off, nranks=1, wait_timeout=0.5, args=(coll.StuckKernel,))
    text = str(err.value)
    assert "WaitTimeout" in text and "timed out (wait_timeout=0.5 s)" in text, text
    assert f'File "{src}", line {_line(src, "STUCK_LINE")}' in text, text  # the traceback's C++ frame


def _one_fails(rt, lib, coll):
    flags = rt.signal_region("s", 1)
    rt.barrier()
    if rt.rank == 0:
        time.sleep(0.2)
        rt.launch(lib.ThrowKernel, blocks=1, args=(1,))
    else:
        rt.launch(coll.StuckKernel, blocks=2, args=(flags,))


def test_a_native_wait_stops_when_another_rank_fails(lib, coll):
    t0 = time.perf_counter()
    with pytest.raises(shmcomm.RunError) as err:
        shmcomm.run(_one_fails, nranks=2, wait_timeout=60, args=(lib, coll))
    assert "rank 0" in str(err.value) and "value must not be positive" in str(err.value)
    assert time.perf_counter() - t0 < 30


def _async_put(rt, kernel, size, waited):
    flags = rt.signal_region("a", 1)
    src = rt.alloc((size,), np.float32)
    recv = rt.alloc((size,), np.float32)
    out = rt.alloc((size,), np.float32)
    src[:] = rt.rank + 1.0
    rt.barrier()
    rt.launch(kernel, blocks=2, args=(rt.device_context, flags, src.ptr, recv.ptr, out.ptr, size, waited))
    return out.tolist()


@pytest.mark.parametrize("mode", ["eager", "hazard", "schedule"])
def test_async_copies_waited_before_the_notify_pass(coll, mode):
    for seed in (0, 1):
        res = shmcomm.run(_async_put, nranks=3, mode=mode, seed=seed, args=(coll.AsyncPutKernel, 100, 1))
        assert res == [[(r - 1) % 3 + 1.0] * 100 for r in range(3)]


@pytest.mark.parametrize("mode", ["hazard", "schedule"])
def test_a_notify_before_the_async_copy_landed_is_reported_at_its_line(coll, mode):
    src = HERE / "collectives.cpp"
    with pytest.raises(shmcomm.RunError) as err:
        shmcomm.run(_async_put, nranks=2, mode=mode, seed=0, args=(coll.AsyncPutKernel, 100, 0))
    assert f"{src}:{_line(src, 'ASYNC_LINE')}" in str(err.value), str(err.value)
