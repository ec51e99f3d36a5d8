"""Same-bytes write-write races and race suppressions: pto-isa's ``Vec_Float_MultiCoreIndep``
cases have every core copy the same buffer to the same destination; the report says the two
stores wrote the same bytes, and a suppression (by kernel file:line, in a setting or a file, as
ThreadSanitizer's) accepts the race, which the run's summary then lists."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

import shmcomm
from shmcomm.comm import TPUT_ASYNC, BuildAsyncSession, GetRemotePtr, GlobalTensor
from shmcomm.errors import ShmcommWarning
from shmcomm.pipe import (
    EVENT_ID0,
    PIPE_ALL,
    PIPE_MTE2,
    PIPE_MTE3,
    PIPE_V,
    TLOAD,
    TSTORE,
    pipe_barrier,
    set_flag,
    wait_flag,
)

pytestmark = pytest.mark.timeout(300)
N = 64
MODES = ["eager", "hazard", "schedule"]


def k_every_core_copies(ctx, src, dst, differ):
    """Every block copies ``src`` to ``dst`` (``differ``: block b adds b first)."""
    t = ctx.tile((1, N), np.float32)
    TLOAD(t, GlobalTensor(src, (1, N)))
    if differ:  # (the tile is written once the load landed: MTE2 -> V, then V -> MTE3)
        set_flag(PIPE_MTE2, PIPE_V, EVENT_ID0)
        wait_flag(PIPE_MTE2, PIPE_V, EVENT_ID0)
        t.array[:] += ctx.block_idx
        set_flag(PIPE_V, PIPE_MTE3, EVENT_ID0)
        wait_flag(PIPE_V, PIPE_MTE3, EVENT_ID0)
    else:  # (the store follows the load in the queue: its bytes are known once it landed)
        set_flag(PIPE_MTE2, PIPE_MTE3, EVENT_ID0)
        wait_flag(PIPE_MTE2, PIPE_MTE3, EVENT_ID0)
    TSTORE(GlobalTensor(dst, (1, N)), t)  # STORE_LINE
    pipe_barrier(PIPE_ALL)


def _store_line() -> str:
    """``file.py:LINE`` of the kernel's TSTORE (what a report and a rule name)."""
    src, first = inspect.getsourcelines(k_every_core_copies)
    return f"test_races_suppressions.py:{first + next(i for i, s in enumerate(src) if '# STORE_LINE' in s)}"


STORE_LINE = _store_line()


def _host(differ):
    def host(rt):
        src, dst = rt.alloc((N,), np.float32), rt.alloc((N,), np.float32)
        src[:] = np.arange(N)
        rt.launch(k_every_core_copies, blocks=2, args=(src.ptr, dst.ptr, differ))
    return host


@pytest.mark.parametrize("mode", MODES)
def test_a_same_bytes_race_says_so_and_a_different_one_does_not(mode):
    with pytest.raises(shmcomm.RaceReport) as info:
        shmcomm.run(_host(False), nranks=1, mode=mode, seed=1, detect_races=True, timeout=60)
    text = str(info.value)
    assert "both stored the same bytes" in text and f"race:{STORE_LINE} {STORE_LINE}" in text, text
    with pytest.raises(shmcomm.RaceReport) as info:
        shmcomm.run(_host(True), nranks=1, mode=mode, seed=1, detect_races=True, timeout=60)
    assert "same bytes" not in str(info.value)


@pytest.mark.parametrize("mode", MODES)
def test_a_suppression_accepts_the_race_and_the_summary_lists_it(mode, tmp_path):
    with pytest.warns(ShmcommWarning, match=rf"(?s)1 race suppressed .*{STORE_LINE} x .*"
                                            rf"{STORE_LINE}.*race:{STORE_LINE}"):
        assert shmcomm.run(_host(False), nranks=1, mode=mode, seed=1, detect_races=True,
                           timeout=60, race_suppressions=f"race:{STORE_LINE} {STORE_LINE}") \
            == [None]
    rules = tmp_path / "races.supp"
    rules.write_text(f"# the cores copy the same bytes on purpose\nrace:{STORE_LINE}\n")
    with pytest.warns(ShmcommWarning, match="1 race suppressed"):
        shmcomm.run(_host(True), nranks=1, mode=mode, seed=1, detect_races=True, timeout=60,
                    race_suppressions=str(rules))


def test_a_rule_for_other_lines_suppresses_nothing():
    with pytest.raises(shmcomm.RaceReport) as info:
        shmcomm.run(_host(False), nranks=1, seed=1, detect_races=True, timeout=60,
                    race_suppressions="race:other.py:12 other.py:13")
    assert "data race" in str(info.value)
    assert "suppressed" not in getattr(info.value, "summary", "")


def test_bad_rules_are_argument_errors():
    for bad in ("bogus", "race:", "race:k.py", "race:k.py:x", "race:a.py:1 b.py:2 c.py:3"):
        with pytest.raises(shmcomm.ArgumentError, match="race_suppressions must be a file of rules"):
            shmcomm.Config(race_suppressions=bad)


def k_multicore_indep(ctx, send, recv):
    """TPutAsync's Vec_Float_MultiCoreIndep: every core of the root puts the whole send buffer
    into the same receive buffer of the peer."""
    if ctx.rank == 0:
        s = BuildAsyncSession(ctx)
        ev = TPUT_ASYNC(GlobalTensor(GetRemotePtr(ctx, recv, 1), (N,)), GlobalTensor(send, (N,)), s)
        ev.Wait(s)
    pipe_barrier(PIPE_ALL)


@pytest.mark.parametrize("mode", MODES)
def test_async_copies_of_the_same_bytes_say_so(mode):
    def host(rt):
        send, recv = rt.alloc((N,), np.float32), rt.alloc((N,), np.float32)
        send[:] = np.arange(N)
        rt.barrier()
        rt.launch(k_multicore_indep, blocks=2, args=(send.ptr, recv.ptr))

    with pytest.raises(shmcomm.RaceReport) as info:
        shmcomm.run(host, nranks=2, mode=mode, seed=1, detect_races=True, timeout=60)
    text = str(info.value)
    assert "TPUT_ASYNC (the DMA copy)" in text and "both stored the same bytes" in text, text
