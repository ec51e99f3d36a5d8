"""The verdict corpus: correct programs written from the patterns kernel authors use (credit
rings that copy out and credit without a fence, host-granted credits, versioned flags, counters
across launches, re-waits, subset barriers, pulls, events, async copies, streams, scalar
atomics; ``tests/corpus``) run in every mode with the race detector on, and none may fail: no
race report, no checker report, no wrong data, no hang. Advisory checkers may recognize their
patterns in these programs; they must not fail a run.

Cells that fail only because of a known gap of the runtime (``corpus.NEEDS``) are marked
``xfail`` (not strict); a gap that hangs its run is not run by default (the slow sweep runs it
with a short timeout).
"""

from __future__ import annotations

import zlib

import pytest
from corpus import MODES, NEEDS, PROGRAMS

import shmcomm

pytestmark = pytest.mark.timeout(120)

RUN = dict(detect_races=True, timeout=60, wait_timeout=30, deadlock_grace=1.0)
HANG_RUN = dict(RUN, timeout=8, wait_timeout=5)  # a cell of a hanging gap: fail it fast
SWEEP_SEEDS = range(10)


def _seed(name: str, mode: str) -> int:
    """One fixed seed per cell, different across programs and modes."""
    return zlib.crc32(f"{name}/{mode}".encode()) % 10_000


def _cells(sweep: bool):
    for p in PROGRAMS:
        for mode in MODES:
            gaps = p.gaps(mode)
            marks = []
            if gaps:
                reason = "; ".join(f"{g}: {NEEDS[g][1]}" for g in gaps)
                hang = p.hangs(mode)
                marks.append(pytest.mark.xfail(strict=False, reason=reason,
                                               run=sweep or not hang))
            yield pytest.param(p, mode, id=f"{p.name}-{mode}", marks=marks)


def _run(p, mode: str, seed: int) -> None:
    opts = HANG_RUN if p.hangs(mode) else RUN
    shmcomm.run(p.host, nranks=p.nranks, blocks=p.blocks, seed=seed, **MODES[mode], **opts)


def test_corpus_is_big_and_every_pattern_is_there():
    assert len(PROGRAMS) >= 80
    assert len({p.name for p in PROGRAMS}) == len(PROGRAMS)
    patterns = {p.pattern for p in PROGRAMS}
    assert patterns >= {"credit_rings", "flags", "launches", "barriers", "pull", "events",
                        "async_copies", "streams", "atomics"}
    for p in PROGRAMS:
        assert (p.host.__doc__ or "").strip(), f"{p.name}: say what pattern it shows"
        assert 1 <= p.nranks <= 8 and 1 <= p.blocks <= 4, p.name


@pytest.mark.parametrize(("program", "mode"), list(_cells(sweep=False)))
def test_correct_program_passes(program, mode):
    _run(program, mode, _seed(program.name, mode))


@pytest.mark.slow
@pytest.mark.timeout(3600)
@pytest.mark.parametrize(("program", "mode"), list(_cells(sweep=True)))
def test_correct_program_passes_over_many_seeds(program, mode):
    failed = []
    for seed in SWEEP_SEEDS:
        try:
            _run(program, mode, 1000 + seed)
        except shmcomm.RunError as exc:
            failed.append(f"seed {1000 + seed}: {str(exc)[:600]}")
    assert not failed, "\n".join(failed)
