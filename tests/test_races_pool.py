"""The race detector on a pool: many runs in the same rank processes, each judged on its own
accesses (the word clocks are zeroed and the record pipes drained between runs), a real race
reported, correct programs passed, nothing carried from one run into the next."""

from __future__ import annotations

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
