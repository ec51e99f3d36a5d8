"""The race detector on a pool: many runs in the same rank processes, each judged on its own
accesses (the word clocks are zeroed and the record pipes drained between runs), a real race
reported, correct programs passed, nothing carried from one run into the next."""

from __future__ import annotations

import numpy as np
import pytest

import shmcomm
from shmcomm.stress.catalogue import ENTRIES

pytestmark = pytest.mark.timeout(300)

RUN = dict(detect_races=True, timeout=60, deadlock_grace=0.3, wait_timeout=20)
CORRECT = ("ring_put", "epoch_barrier", "all_reduce")


def _race(pool: shmcomm.Pool, name: str, **kw) -> shmcomm.RaceReport:
    with pytest.raises(shmcomm.RaceReport) as info:
        pool.run(ENTRIES[name].host, args=(64,), blocks=1, **RUN, **kw)
    err = info.value
    assert err.failures[0].kind == "race", err
    assert "data race on rank" in str(err) and "neither happens before the other" in str(err)
    return err


@pytest.mark.parametrize("mode", ["eager", "hazard", "schedule"])
def test_correct_runs_pass_in_one_pool_and_a_race_is_reported_after_them(mode):
    with shmcomm.Pool(nranks=2) as pool:
        pids = pool.run(ENTRIES["ring_put"].host, args=(64,), blocks=2, mode=mode, seed=0, **RUN)
        for seed in range(6):  # their word clocks and records would make a later run race
            pool.run(ENTRIES[CORRECT[seed % 3]].host, args=(64,), blocks=2, mode=mode,
                     seed=seed, **RUN)
        assert pool.replaced == 0  # the same processes served every run
        assert pool.runs == 7 and len(pids) == 2
        _race(pool, "drain_without_dsb", mode=mode, seed=1)


def test_a_race_report_does_not_leak_into_the_next_runs():
    with shmcomm.Pool(nranks=2) as pool:
        first = _race(pool, "drain_without_dsb")
        for seed in range(4):  # the racy run's records are gone: these pass
            pool.run(ENTRIES["ring_put"].host, args=(64,), blocks=1, seed=seed, **RUN)
        again = _race(pool, "drain_without_dsb")  # reported again, the same race only
        assert str(again.failures[0]).count("data race") == \
            str(first.failures[0]).count("data race")


def test_runs_with_and_without_the_detector_share_a_pool():
    with shmcomm.Pool(nranks=2) as pool:
        _race(pool, "notify_before_drain")
        pool.run(ENTRIES["drain_without_dsb"].host, args=(64,), blocks=1)  # no detector: passes
        pool.run(ENTRIES["ring_put"].host, args=(64,), blocks=4, **RUN)  # another clock layout
        _race(pool, "drain_without_dsb")


def test_a_pool_table_keeps_its_slots_but_not_what_an_earlier_run_made():
    from shmcomm.exec.races.clocks import CLOCK, SLOTS, Layout
    from shmcomm.exec.races.launcher import PoolState

    state = PoolState(2)
    layout = Layout(2, 8)
    try:
        first = state.clocks(layout)
        s = first.slot(1, 64)
        assert first.find(1, 64) == s
        first.release(s, np.ones(layout.size, CLOCK), False)
        first.reset()
        second = state.clocks(layout)  # (the same view, for a new run)
        assert second.find(1, 64) is None  # the earlier run's word: no clock in this run
        assert not second.clocks[s].any()
        assert second.host_store(1, 0, 128, 0, np.zeros(layout.size, CLOCK)) == []
        assert not second.stores[s].any()  # (a store marks only the words of this run)
        assert second.slot(1, 64) == s and second.find(1, 64) == s  # the same slot again
        for off in range(SLOTS + 1):  # more words than the table keeps across runs
            second.slot(0, 4 * off)
        before = set(np.flatnonzero(second.keys).tolist())
        second.reset()
        third = state.clocks(layout)
        assert not third.keys.any() and not third.index  # the keys and the maps of them went
        assert third.find(1, 64) is None
        made = {third.slot(1, 8 * off) for off in range(len(before))}  # as many keys again
        s = min(made - before)  # (a slot the keys before the clearing did not hold)
        third.release(s, np.ones(layout.size, CLOCK), False)
        third.reset()
        assert not state.clocks(layout).clocks[s].any()
    finally:
        state.close()


def _ring_kernel(ctx):
    from shmcomm.comm import TNOTIFY, TWAIT, GetRemotePtr, NotifyOp, Signal, WaitCmp

    word = ctx.signal_base + 9216 + ctx.block_idx  # (the users' free range)
    TNOTIFY(Signal(GetRemotePtr(ctx, word, (ctx.rank + 1) % ctx.nranks)), 1, NotifyOp.AtomicAdd)
    TWAIT(Signal(word), 1, WaitCmp.GE)


def _signals_only(rt):
    rt.launch(_ring_kernel)


def test_a_run_without_records_sends_the_launcher_nothing(monkeypatch):
    from shmcomm.exec.races.launcher import RaceDetector

    got = []
    receive = RaceDetector._receive_one
    monkeypatch.setattr(RaceDetector, "_receive_one",
                        lambda self, conn: got.append(conn) or receive(self, conn))
    with shmcomm.Pool(nranks=2) as pool:
        for seed in range(3):
            pool.run(_signals_only, blocks=2, mode="hazard", seed=seed, **RUN)
        assert got == []  # frontiers alone, after which no record came: not sent
        _race(pool, "drain_without_dsb")  # a run with records sends them
        assert got
