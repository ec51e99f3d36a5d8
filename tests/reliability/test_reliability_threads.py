"""Host threads and pools: no false success from a launch a host helper thread made, and a pool
that isolates its runs (one caller at a time, no leftover thread or patch, a dead rank named)."""

from __future__ import annotations

import threading
import time

import pytest
from _pool_hosts import (
    fresh_alloc,
    ident,
    json_works,
    leave_thread,
    patch_module,
    pid_host,
    rebind_private,
)

import shmcomm
from shmcomm import RunError
from shmcomm.launch.pool import PoolError

pytestmark = pytest.mark.timeout(180)

SMALL = dict(window_bytes=1 << 16, timeout=60.0, wait_timeout=50.0)


def _late_failure(ctx, started) -> None:
    started.set()
    time.sleep(0.3)  # the host has returned by now
    raise ValueError("late failure in a helper thread's launch")


def _host_helper_launch(rt):
    started = threading.Event()

    def helper() -> None:
        try:
            rt.launch(_late_failure, blocks=1, args=(started,))
        except shmcomm.errors.ShmcommError:
            pass  # the helper swallows it: the run must fail all the same

    threading.Thread(target=helper, daemon=True).start()
    started.wait(30)
    return "ok"


def test_launch_from_a_host_helper_thread_is_joined_before_the_rank_reports():
    with pytest.raises(RunError) as info:
        shmcomm.run(_host_helper_launch, 2, **SMALL)
    first = info.value.failures[0]
    assert "late failure" in first.message, str(info.value)
    assert first.rank in (0, 1)


def _host_helper_launch_passes(rt):
    started = threading.Event()

    def kernel(ctx) -> None:
        started.set()
        time.sleep(0.2)
        ctx.rt.kernel_state["done"] = True

    threading.Thread(target=lambda: rt.launch(kernel, blocks=1), daemon=True).start()
    started.wait(30)
    return rt.rank


def test_a_passing_helper_launch_still_passes():
    assert shmcomm.run(_host_helper_launch_passes, 2, **SMALL) == [0, 1]


# -- the pool --------------------------------------------------------------------------------


def test_pool_runs_from_two_threads_never_mix_results():
    errors: list[BaseException] = []
    with shmcomm.Pool(nranks=2, window_bytes=1 << 16) as pool:
        def caller(tag: str) -> None:
            try:
                for i in range(6):
                    got = pool.run(ident, args=(f"{tag}{i}",), timeout=60)
                    assert got == [(f"{tag}{i}", 0), (f"{tag}{i}", 1)], got
            except BaseException as exc:  # noqa: BLE001 -- reported below
                errors.append(exc)

        threads = [threading.Thread(target=caller, args=(t,)) for t in "ab"]
        for t in threads:
            t.start()
        for t in threads:
            t.join(150)
    assert not errors, errors


def test_a_thread_left_by_a_pool_run_cannot_write_into_the_next_run():
    with shmcomm.Pool(nranks=2, window_bytes=1 << 16) as pool:
        old = pool.run(leave_thread)
        got = pool.run(fresh_alloc)
        assert all(values == [0, 0, 0, 0] for _, values in got), got
        assert set(old).isdisjoint(p for p, _ in got)  # those processes served no other run


def test_a_monkeypatch_in_a_pool_run_does_not_persist():
    with shmcomm.Pool(nranks=2, window_bytes=1 << 16) as pool:
        pool.run(patch_module)
        assert [j for _, j in pool.run(json_works)] == ["[1]", "[1]"]


def test_a_clean_pool_run_keeps_its_processes():
    with shmcomm.Pool(nranks=2, window_bytes=1 << 16) as pool:
        first = pool.run(pid_host)
        assert pool.run(pid_host) == first and pool.replaced == 0


def test_a_dead_pool_rank_is_named_and_replaced():
    import os
    import signal

    with shmcomm.Pool(nranks=2, window_bytes=1 << 16) as pool:
        pids = pool.run(pid_host)
        os.kill(pids[1], signal.SIGKILL)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and os.waitid(
                os.P_PID, pids[1], os.WEXITED | os.WNOHANG | os.WNOWAIT) is None:
            time.sleep(0.05)
        with pytest.raises(PoolError, match=r"pool rank 1 \(pid \d+\) died from signal SIGKILL"):
            pool.run(pid_host)
        assert set(pool.run(pid_host)).isdisjoint(pids)


def test_a_pool_made_from_a_worker_thread_survives_that_thread():
    with shmcomm.Pool(nranks=2, window_bytes=1 << 16) as pool:
        box: list = []
        t = threading.Thread(target=lambda: box.append(pool.run(pid_host)))
        t.start()
        t.join(120)
        time.sleep(0.5)  # the parent-death signal, if it were the worker's, has fired by now
        assert pool.run(pid_host) == box[0] and pool.replaced == 0


def test_pool_run_after_close_is_refused():
    pool = shmcomm.Pool(nranks=1, window_bytes=1 << 16)
    pool.run(pid_host)
    pool.close()
    with pytest.raises(shmcomm.errors.ShmcommError, match="closed"):
        pool.run(pid_host)


def _waits_for_helper(ctx, sig_offset) -> None:
    from shmcomm.comm import TWAIT, Signal, WaitCmp

    TWAIT(Signal(ctx.signal_base + sig_offset), 1, WaitCmp.GE)


def _host_helper_notifies_late(rt):
    from shmcomm.comm import TNOTIFY, NotifyOp, Signal

    def helper() -> None:
        time.sleep(3.0)  # well past deadlock_grace: the kernel waits on this thread's notify
        TNOTIFY(Signal(rt.signal_base + 8), 1, NotifyOp.AtomicAdd)

    t = threading.Thread(target=helper, daemon=True)
    t.start()
    rt.launch(_waits_for_helper, blocks=1, args=(8,))
    t.join()
    return "ok"


def test_a_notify_from_a_host_helper_thread_is_no_deadlock():
    got = shmcomm.run(_host_helper_notifies_late, 1, window_bytes=1 << 16, timeout=60.0,
                      wait_timeout=50.0, deadlock_grace=0.5)
    assert got == ["ok"]


def test_a_library_rebinding_its_private_state_keeps_the_pool():
    # hypothesis (and other libraries) rebind private module globals as they run: no monkeypatch
    import hypothesis.internal.conjecture.junkdrawer  # noqa: F401 -- loaded before the fork

    with shmcomm.Pool(nranks=2, window_bytes=1 << 16) as pool:
        first = pool.run(rebind_private)
        assert pool.run(pid_host) == [p for p, _ in first] and pool.replaced == 0


def _block_thread(ctx, out) -> None:
    out[ctx.block_idx] = (threading.get_ident(), threading.current_thread().name)


def _two_launches(rt):
    first, second = {}, {}
    rt.launch(_block_thread, blocks=3, args=(first,))
    rt.launch(_block_thread, blocks=4, args=(second,))
    return first, second, [t.name for t in threading.enumerate()]


def test_blocks_run_on_kept_threads_named_for_the_block():
    # a launch takes the idle threads of the one before (no thread start per block); a block's
    # thread carries the block's name while it runs, and goes idle (not a leftover) after
    first, second, names = shmcomm.run(_two_launches, nranks=1, **SMALL)[0]
    assert {i for i, _ in first.values()} <= {i for i, _ in second.values()}
    assert sorted(n for _, n in second.values()) == [f"shmcomm-r0-b{b}" for b in range(4)]
    used = {i for i, _ in first.values()} | {i for i, _ in second.values()}
    assert names.count("shmcomm-block-idle") == len(used) <= 4  # a block that ended early


def test_a_pool_rank_keeps_its_block_threads_between_runs():
    with shmcomm.Pool(nranks=2, window_bytes=1 << 16) as pool:
        a = pool.run(_two_launches)
        b = pool.run(_two_launches)
        assert pool.replaced == 0
        for (_, s1, _), (f2, _, _) in zip(a, b, strict=True):
            assert {i for i, _ in f2.values()} <= {i for i, _ in s1.values()}


def test_a_kept_thread_survives_a_function_that_raises():
    from shmcomm.core import threads as block_threads

    def boom() -> None:
        raise ValueError("a block main that raised")

    seen: list[int] = []
    first = block_threads.start(boom, (), "shmcomm-test-b0")
    first.join(30)
    assert not first.is_alive()
    again = block_threads.start(lambda: seen.append(threading.get_ident()), (), "shmcomm-test-b1")
    again.join(30)
    assert seen and block_threads.idle_count() >= 1


def test_a_deferred_block_named_by_its_key_is_woken_alone():
    """Schedule mode wakes the block it gave the turn to before its launch's others; the next
    release wakes the rest, and a key no deferred thread has wakes them all."""
    from shmcomm.core import threads as block_threads

    go = threading.Event()  # three warm-up jobs that run at once: three idle threads after
    warm = [block_threads.start(go.wait, (30,), f"shmcomm-test-w{k}") for k in range(3)]
    go.set()
    for job in warm:  # (a deferred start needs a kept thread: a new one starts at once)
        job.join(30)
    ran: list[int] = []
    jobs = [block_threads.start(ran.append, (k,), f"shmcomm-test-d{k}", True, k) for k in range(3)]
    time.sleep(0.05)
    assert ran == []  # handed over, not woken
    block_threads.release_deferred(1)
    jobs[1].join(30)
    time.sleep(0.05)
    assert ran == [1] and jobs[0].is_alive() and jobs[2].is_alive()
    block_threads.release_deferred(7)  # no deferred thread has it: every one is woken
    for job in jobs:
        job.join(30)
    assert sorted(ran) == [0, 1, 2]
