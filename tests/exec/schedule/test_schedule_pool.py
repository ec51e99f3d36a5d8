"""The pool of rank processes: runs reuse the processes, start from reset memory, a failed run
replaces the pool, and schedule mode replays on a pool as on fresh processes."""

from __future__ import annotations

import os

import numpy as np
import psutil
import pytest

import shmcomm
from shmcomm.comm import TNOTIFY, NotifyOp, Signal
from shmcomm.errors import ArgumentError, RunError
from shmcomm.stress import catalogue

pytestmark = pytest.mark.timeout(300)


def pid_host(rt):
    return os.getpid()


def _dirty_kernel(ctx):
    TNOTIFY(Signal(ctx.signal_base + 9300), 7, NotifyOp.AtomicAdd)


def dirty_host(rt):
    """Sees zeroed signals and heap, then leaves both dirty."""
    clean = not rt.signals.any()
    x = rt.alloc((1024,), np.float32)
    raw = rt.window(rt.rank)[rt.config.signal_bytes:rt.config.signal_bytes + 8192]
    clean = clean and not raw.any()
    rt.launch(_dirty_kernel, blocks=2)
    x[:] = 3.0
    rt.barrier()
    return clean, int(rt.signals[9300])


def failing_host(rt):
    if rt.rank == 1:
        raise ValueError("boom")
    rt.barrier()


def test_runs_reuse_the_processes_and_start_from_reset_memory():
    with shmcomm.Pool(nranks=3) as pool:
        pids = pool.run(pid_host)
        for mode in ("eager", "hazard", "schedule"):
            assert pool.run(dirty_host, mode=mode, seed=2) == [(True, 14)] * 3
        assert pool.run(pid_host) == pids
        assert pool.replaced == 0


def _children() -> set[int]:
    return {p.pid for p in psutil.Process().children()}


def test_a_failed_run_replaces_the_pool():
    before = _children()
    with shmcomm.Pool(nranks=2) as pool:
        pids = pool.run(pid_host)
        with pytest.raises(RunError, match="boom"):
            pool.run(failing_host)
        assert pool.replaced == 1
        new = pool.run(pid_host)
        assert set(new).isdisjoint(pids)
        assert _children() - before == set(new)  # the old ones are reaped
        assert pool.run(dirty_host) == [(True, 14)] * 2


def test_a_deadlock_on_a_pool_is_reported_and_replaces_it():
    entry = catalogue.get("arrival_count_mismatch")
    with shmcomm.Pool(nranks=2) as pool:
        with pytest.raises(shmcomm.DeadlockError):
            pool.run(entry.host, args=(1,), blocks=1, mode="schedule", hazards="pipes",
                     timeout=60)
        assert pool.replaced == 1
        pool.run(pid_host)


def test_schedule_mode_on_a_pool_replays_as_on_fresh_processes(tmp_path):
    entry = catalogue.get("ring_put")
    kw = dict(blocks=2, args=(64,), mode="schedule", seed=11, strategy="pct:2")
    shmcomm.run(entry.host, nranks=2, trace=str(tmp_path / "fork.json"), **kw)
    with shmcomm.Pool(nranks=2) as pool:
        for i in range(3):
            pool.run(entry.host, trace=str(tmp_path / f"pool{i}.json"), **kw)
    want = (tmp_path / "fork.json").read_bytes()
    for i in range(3):
        assert (tmp_path / f"pool{i}.json").read_bytes() == want


def test_bad_pool_runs_raise_clear_errors():
    with shmcomm.Pool(nranks=2) as pool:
        with pytest.raises(ArgumentError, match="nranks is the pool's"):
            pool.run(pid_host, nranks=3)
        with pytest.raises(ArgumentError, match="picklable"):
            pool.run(lambda rt: None)
        with pytest.raises(ArgumentError, match="host must be callable"):
            pool.run(3)
        assert pool.run(pid_host)


def test_closing_the_pool_leaves_no_process_or_segment():
    before = _children()
    pool = shmcomm.Pool(nranks=2)
    pids = pool.run(pid_host)
    assert _children() - before == set(pids)
    pool.close()
    assert _children() - before == set()
    mine = [n for n in os.listdir("/dev/shm") if n.startswith(f"shmcomm.{os.getpid()}.")]
    assert mine == []


def test_a_joining_host_is_enabled_once_its_ranks_blocks_have_left_the_live_list():
    """The scheduler's bookkeeping of live agents: registration order survives removals, and a
    host joining all of its blocks is enabled exactly when none of its rank's blocks is live; one
    joining a launch, when none of that launch's is."""
    import ctypes

    from shmcomm.core import control as C
    from shmcomm.exec.schedule import scheduler as S

    nranks = 2
    buf = ctypes.create_string_buffer(S.shared_bytes(nranks))
    sched = S.Scheduler.__new__(S.Scheduler)
    sched.sh, sched._cells, sched._waits = S.Shared(ctypes.addressof(buf), nranks), {}, {}
    sh = sched.sh
    host0, host1 = S.agent_id(0, C.HOST_SLOT), S.agent_id(1, C.HOST_SLOT)
    blocks0 = [S.agent_id(0, b) for b in range(3)]
    block1 = S.agent_id(1, 0)
    for a in (host0, host1, *blocks0, block1):
        S.register(sh, a)

    def done(a):  # as a scheduling point with DONE does it
        sh.state[a] = S.DONE
        sched._remove_live(a)

    sh.state[host0] = sh.state[host1] = S.JOINING
    for h in (host0, host1):  # every block slot of its rank, as Scheduler.join gives it
        sh.woff[h], sh.wval[h] = 0, C.MAX_BLOCKS
    assert sched.enabled() == [*blocks0, block1]
    done(blocks0[1])
    assert sh.live_ids() == [host0, host1, blocks0[0], blocks0[2], block1]
    done(block1)
    assert sched.enabled() == [host1, blocks0[0], blocks0[2]]
    done(blocks0[0])
    done(blocks0[2])
    sched._remove_live(blocks0[2])  # not live any more: nothing changes
    assert sh.live_ids() == [host0, host1]
    assert sched.enabled() == [host0, host1]
    # a host joining one launch (slots 4..5) while another launch of its rank (slot 6) runs on
    stream = [S.agent_id(0, b) for b in (4, 5, 6)]
    for a in stream:
        S.register(sh, a)
    sh.woff[host0], sh.wval[host0] = 4, 2
    assert sched.enabled() == [host1, *stream]
    for a in stream[:2]:
        done(a)
    assert sched.enabled() == [host0, host1, stream[2]]
    sh.release()


def test_a_blocked_agent_is_judged_by_the_wait_it_published_last():
    """A process keeps what it read of a blocked agent's wait; the agent's next wait (another
    word, value or comparison) is read anew, never judged by the one before."""
    import ctypes
    from types import SimpleNamespace

    from shmcomm.exec.schedule import scheduler as S
    from shmcomm.types import WaitCmp

    buf = ctypes.create_string_buffer(S.shared_bytes(1))
    words = (ctypes.c_int32 * 2)(0, 5)
    sched = S.Scheduler.__new__(S.Scheduler)
    sched.sh, sched._waits = S.Shared(ctypes.addressof(buf), 1), {}
    sched._cells = {0 << 40 | 4 * i: ctypes.c_int32.from_buffer(words, 4 * i) for i in range(2)}
    sh, block = sched.sh, S.agent_id(0, 0)
    S.register(sh, block)

    def blocks_on(index, value, cmp):
        word = SimpleNamespace(offset=4 * index)
        sched.block_on(block, SimpleNamespace(sig_rank=0, words=[word], kind=0), 0, value, cmp)
        sh.state[block] = S.BLOCKED

    blocks_on(0, 1, WaitCmp.GE)
    assert sched.enabled() == []
    blocks_on(1, 5, WaitCmp.EQ)  # another word, whose value holds
    assert sched.enabled() == [block]
    blocks_on(1, 6, WaitCmp.EQ)  # the same word, another value
    assert sched.enabled() == []
    blocks_on(1, 6, WaitCmp.LT)  # the same word and value, another comparison
    assert sched.enabled() == [block]
    words[0] = 1
    blocks_on(0, 1, WaitCmp.GE)  # back to the first word, which now holds
    assert sched.enabled() == [block]
    sh.release()
