"""Schedule mode over eager semantics (``hazards="none"``): a pure interleaving search. Every
instruction still is a scheduling point, but pipe work completes at issue and stores are
visible at once, so only bugs of the interleaving show (an unsynchronised read-modify-write,
an arrival count that never completes), never a missing pipe sync by itself: that is the race
detector's to judge, and it is on by default in schedule mode."""

from __future__ import annotations

import pytest

import shmcomm
from shmcomm.errors import ArgumentError
from shmcomm.stress import catalogue

pytestmark = pytest.mark.timeout(180)

SETTINGS = dict(mode="schedule", hazards="none", timeout=120, wait_timeout=100)


@pytest.mark.parametrize("strategy", ["random", "pct"])
def test_a_correct_program_passes(strategy):
    entry = catalogue.get("all_reduce")
    assert shmcomm.run(entry.host, nranks=2, blocks=2, args=(64,), seed=1, strategy=strategy,
                       **SETTINGS) == [None, None]


def test_an_interleaving_bug_is_found_and_replays(tmp_path):
    entry = catalogue.get("nonatomic_atomicadd")
    texts = []
    for i in range(2):
        with pytest.raises(shmcomm.RunError) as info:
            shmcomm.run(entry.host, nranks=entry.nranks[0], blocks=entry.blocks[0],
                        args=(entry.sizes[0],), seed=0, trace=str(tmp_path / f"t{i}.json"),
                        **SETTINGS)
        texts.append(info.value.failures[0].message.splitlines()[0])
    # the lost update is a data race too: the detector names it before the host's check fails
    assert ("AssertionError" in texts[0] or "data race" in texts[0]) and texts[0] == texts[1]
    assert (tmp_path / "t0.json").read_bytes() == (tmp_path / "t1.json").read_bytes()
    assert "hazards='none'" in info.value.hint


def test_a_missing_pipe_sync_is_not_a_bug_of_eager_semantics_but_the_detector_sees_it():
    entry = catalogue.get("missing_wait_flag")
    shape = dict(nranks=entry.nranks[0], blocks=entry.blocks[0], args=(entry.sizes[0],))
    for seed in (0, 1):  # the data comes out right: pipe work completes at issue
        shmcomm.run(entry.host, seed=seed, detect_races=False, **shape, **SETTINGS)
    with pytest.raises(shmcomm.RaceReport, match="MTE2 -> MTE3"):
        shmcomm.run(entry.host, seed=0, **shape, **SETTINGS)


def test_none_is_the_only_empty_spelling():
    with pytest.raises(ArgumentError, match="hazards must be 'all' or a comma list"):
        shmcomm.run(lambda rt: None, nranks=1, mode="schedule", hazards="")


@pytest.mark.parametrize("soft", [False, True], ids=["hard", "soft"])
def test_syncall_and_a_livelock_over_eager_semantics(soft):
    from test_schedule_hangs import _rounds_host, _spin_host

    assert shmcomm.run(_rounds_host, nranks=2, args=(2, soft), seed=4, **SETTINGS) == [[3, 3]] * 2
    with pytest.raises(shmcomm.DeadlockError, match="livelock"):
        shmcomm.run(_spin_host, nranks=1, seed=4, livelock_seconds=1.0, **SETTINGS)
