"""Concurrent launches on one rank: two kernels at once, each with its own blocks and slots.

A PTO host runs a compute kernel and a communication kernel on two streams; here that is
``rt.launch(kernel, ..., stream=rt.stream())`` (returns at once) or two host threads that each
call ``rt.launch``. Before launches had their own control slots, the second launch overwrote the
first one's block lines and the deadlock watch aborted a healthy program.
"""

from __future__ import annotations

import threading
import time

import pytest

import shmcomm
from shmcomm import DeadlockError, RunError
from shmcomm.comm import TNOTIFY, TWAIT, NotifyOp, Signal, WaitCmp, get_block_idx, get_block_num
from shmcomm.errors import ArgumentError

pytestmark = pytest.mark.timeout(120)


def _compute(ctx, base, seconds):
    """Busy with its own work (not waiting on any signal), then publishes its result."""
    time.sleep(seconds)
    TNOTIFY(Signal(base + ctx.block_idx), 1, NotifyOp.AtomicAdd)


def _comm(ctx, base, log):
    TWAIT(Signal(base + ctx.block_idx), 1, WaitCmp.GE)
    log.append(("comm", get_block_idx(), get_block_num()))


def _host_threads(rt):
    """The case that used to be aborted as a deadlock: the comm kernel's waiting blocks took
    the compute kernel's (running) control slots, so every slot looked blocked."""
    base = rt.signal_region("cc", 16)
    log: list = []
    t = threading.Thread(target=rt.launch, args=(_compute, 1, (base, 2.0)))
    t.start()
    time.sleep(0.3)
    rt.launch(_comm, 1, (base, log))
    t.join()
    return log


@pytest.mark.parametrize("mode", ["eager", "hazard"])
def test_two_threads_launching_at_once_are_not_a_deadlock(mode):
    assert shmcomm.run(_host_threads, nranks=2, mode=mode, seed=3, timeout=60,
                       deadlock_grace=0.5) == [[("comm", 0, 1)]] * 2


def _ident(ctx, log, name):
    log.append((name, ctx.block_idx, ctx.block_num, get_block_idx(), get_block_num()))


def _host_streams(rt):
    base = rt.signal_region("cc", 16)
    comm_s, compute_s = rt.stream(), rt.stream()
    log: list = []
    h1 = rt.launch(_comm, blocks=3, args=(base, log), stream=comm_s)
    h2 = rt.launch(_compute, blocks=3, args=(base, 1.0), stream=compute_s)
    rt.launch(_ident, blocks=2, args=(log, "after-compute"), stream=compute_s)  # in stream order
    assert not h1.done  # returned at once; still waiting for the compute kernel
    compute_s.synchronize()
    comm_s.synchronize()
    assert h1.done and h2.done
    return sorted(log)


@pytest.mark.parametrize("mode", ["eager", "hazard"])
def test_stream_launches_run_concurrently_with_their_own_block_ids(mode):
    res = shmcomm.run(_host_streams, nranks=2, mode=mode, seed=5, timeout=60, deadlock_grace=0.5)
    want = sorted([("comm", b, 3) for b in range(3)]
                  + [("after-compute", b, 2, b, 2) for b in range(2)])
    assert res == [want, want]


def test_a_failing_stream_launch_fails_the_run_even_without_synchronize():
    def boom(ctx):
        raise ValueError("boom in a stream kernel")

    def host(rt):
        rt.launch(boom, blocks=1, stream=rt.stream())
        return "returned"

    with pytest.raises(RunError, match="boom in a stream kernel"):
        shmcomm.run(host, nranks=2, timeout=60)


def test_a_real_deadlock_between_concurrent_launches_is_still_reported():
    def waits_forever(ctx, base):
        TWAIT(Signal(base + 5), 1, WaitCmp.GE)  # nobody ever notifies word 5

    def host(rt):
        base = rt.signal_region("cc", 16)
        s1, s2 = rt.stream(), rt.stream()
        rt.launch(waits_forever, blocks=2, args=(base,), stream=s1)
        rt.launch(waits_forever, blocks=1, args=(base,), stream=s2)
        rt.synchronize()

    with pytest.raises(DeadlockError) as ei:
        shmcomm.run(host, nranks=2, timeout=60, deadlock_grace=0.5)
    table = str(ei.value)
    assert "offset" in table and table.count(">=") >= 6  # 2 ranks x 3 blocks, all listed


def test_unsupported_forms_raise_clear_errors():
    def idle(ctx, base):
        TWAIT(Signal(base), 1, WaitCmp.GE)

    def host(rt):
        base = rt.signal_region("cc", 16)
        errors = []
        try:
            rt.launch(_ident, blocks=1, args=([], "x"), stream="stream 1")
        except ArgumentError as exc:
            errors.append(str(exc))
        s = rt.stream()
        rt.launch(idle, blocks=shmcomm.MAX_BLOCKS - 2, args=(base,), stream=s)
        while rt.ctl.rank_field(rt.rank, 4) < shmcomm.MAX_BLOCKS - 2:  # its slots are taken
            time.sleep(0.01)
        try:
            rt.launch(_ident, blocks=3, args=([], "x"))
        except ArgumentError as exc:
            errors.append(str(exc))
        TNOTIFY(Signal(base), 1, NotifyOp.AtomicAdd)
        s.synchronize()
        rt.launch(_ident, blocks=3, args=([], "x"))  # the slots are free again
        return errors

    errs = shmcomm.run(host, nranks=1, timeout=60)[0]
    assert "stream must be a Stream" in errs[0]
    assert "3 blocks requested" in errs[1] and "MAX_BLOCKS=64" in errs[1]


def test_schedule_mode_takes_stream_launches():
    """Schedule mode starts a stream launch on the host thread, with the turn (so its blocks
    register deterministically); tests/exec/schedule/test_schedule_streams.py explores two-stream kernels."""
    def host(rt):
        log: list = []
        s = rt.stream()
        rt.launch(_ident, blocks=1, args=(log, "x"), stream=s)
        s.synchronize()
        return log

    res = shmcomm.run(host, nranks=2, mode="schedule", seed=1, timeout=60)
    assert res == [[("x", 0, 1, 0, 1)]] * 2
