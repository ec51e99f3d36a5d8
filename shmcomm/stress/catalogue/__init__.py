"""The bug catalogue: buggy programs modelling real bugs, and the correct baselines.

Every :class:`Entry` names a host program ``host(rt, size)`` and the sweep the stress harness
gives it (rank and block counts, sizes, mode). ``BUGS`` must each be caught by
``python -m shmcomm.stress --catalogue``; ``CORRECT`` must never raise an alarm. A bug entry's
``mode`` says what it needs: ``eager`` bugs show up under real concurrency alone (wrong data,
a deadlock, the eager model's own checks), ``hazard`` bugs need the hazard model's sub-models of
queued pipes, delayed visibility or 64-byte lines.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from . import bugs, correct, pipelined


@dataclass(frozen=True)
class Entry:
    """One program of the catalogue and the sweep it runs under."""

    name: str
    host: Callable[..., Any]
    mode: str  # the mode it needs ("eager" or "hazard"); correct entries run in every mode
    nranks: tuple[int, ...] = (2, 4)
    blocks: tuple[int, ...] = (1, 2)
    sizes: tuple[int, ...] = (64, 1000)
    bug: bool = True

    @property
    def summary(self) -> str:
        """The first line of the program's docstring: the bug and where it was reported."""
        return (self.host.__doc__ or self.name).strip().splitlines()[0].replace("``", "")


BUGS: tuple[Entry, ...] = (
    Entry("notify_before_drain", bugs.bug_notify_before_drain, "hazard"),
    Entry("drain_without_dsb", bugs.bug_drain_without_dsb, "hazard"),
    Entry("set_flag_reuse", bugs.bug_set_flag_reuse, "eager"),
    Entry("packed_set_slots", bugs.bug_packed_set_slots, "hazard", nranks=(8, 4, 2), sizes=(1,)),
    Entry("phase_blind_slot", bugs.bug_phase_blind_slot, "eager", nranks=(4, 2), blocks=(2, 1)),
    Entry("no_reset_between_launches", bugs.bug_no_reset_between_launches, "eager",
          nranks=(4, 2), blocks=(2, 1)),
    Entry("arrival_count_mismatch", bugs.bug_arrival_count_mismatch, "eager", sizes=(1,)),
    Entry("nonatomic_atomicadd", bugs.bug_nonatomic_atomicadd, "eager", nranks=(4, 2),
          blocks=(4, 2), sizes=(64,)),
    Entry("cumulative_counter", bugs.bug_cumulative_counter, "eager", blocks=(2, 4)),
    Entry("host_reset_race", bugs.bug_host_reset_race, "eager", nranks=(4, 2, 8), sizes=(1,)),
    Entry("eq_transient", bugs.bug_eq_transient, "eager", sizes=(1,)),
    Entry("event_id_clash", bugs.bug_event_id_clash, "eager"),
    Entry("missing_wait_flag", bugs.bug_missing_wait_flag, "hazard", sizes=(1000,)),
    Entry("missing_intra_barrier", bugs.bug_missing_intra_barrier, "eager", blocks=(4, 2)),
)

CORRECT: tuple[Entry, ...] = (
    Entry("epoch_barrier", correct.epoch_barrier, "any", nranks=(2, 4, 8), blocks=(1, 2, 4),
          bug=False),
    Entry("device_barrier", correct.device_barrier, "any", nranks=(2, 4, 8), blocks=(1, 2, 4),
          bug=False),
    Entry("ring_put", correct.ring_put, "any", nranks=(2, 4, 8), blocks=(1, 2), bug=False),
    Entry("reduce_scatter", correct.reduce_scatter, "any", nranks=(2, 4, 8), blocks=(1, 2, 4),
          sizes=(64, 1003), bug=False),
    Entry("all_gather", correct.all_gather, "any", nranks=(2, 4, 8), blocks=(1, 2, 4),
          sizes=(64, 1003), bug=False),
    Entry("all_reduce", correct.all_reduce, "any", nranks=(2, 4, 8), blocks=(1, 2, 4),
          sizes=(64, 1003), bug=False),
)

# A bug that a checker sees in hazard mode but that gives wrong data only in schedule mode (the
# producer's last act is the unfenced notify), and its fixed twin; run by name (--program).
SCHEDULE: tuple[Entry, ...] = (
    Entry("ag_pipelined_unfenced", pipelined.bug_ag_pipelined_unfenced, "schedule",
          nranks=(4, 2, 8), blocks=(2,), sizes=(256,)),
    Entry("ag_pipelined", pipelined.ag_pipelined, "any", nranks=(4, 2, 8), blocks=(2,),
          sizes=(256,), bug=False),
)

ENTRIES: dict[str, Entry] = {e.name: e for e in BUGS + CORRECT + SCHEDULE}


def get(name: str) -> Entry | None:
    """The catalogue entry called ``name``, or ``None``."""
    return ENTRIES.get(name)


__all__ = ["Entry", "BUGS", "CORRECT", "SCHEDULE", "ENTRIES", "get"]
