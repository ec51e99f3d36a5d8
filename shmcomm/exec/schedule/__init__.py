"""Schedule mode: one agent of the run at a time, chosen by a strategy, replayable exactly.

``shmcomm.run(host, mode="schedule", seed=S, strategy="pct:3")`` or ``python -m shmcomm.launch
--mode schedule --strategy pct:3 --seed S`` runs every agent (each block thread of each rank
process, and each rank's host code) only while the cross-process scheduler gives it the turn
(:mod:`.scheduler`). Every kernel-API instruction is a scheduling point; the hazard models run
on a step clock (:mod:`.model`). Strategies: ``random``, ``pct[:D]``, replay of a recorded
schedule (:mod:`.strategies`). The same seed, program and options give the same interleaving,
outcome and trace; ``record=PATH`` writes the schedule, ``replay=PATH`` runs it
(:mod:`.record`). A run never hangs silently: no enabled agent is a deadlock, a long stretch of
polls that read nothing new is a livelock (:mod:`.scheduler`), and a turn held outside the API
past ``turn_timeout`` names its holder and stack (:mod:`.turnwatch`).
"""

from __future__ import annotations

import ctypes
import os
import shlex
from typing import Any

from ...config import Config
from ...core import control as C
from ...core.model import RunModel
from ...errors import ArgumentError, Failure
from ...files import OutputError
from ..semantics import semantics_model, semantics_of
from .model import ScheduleBlockModel, ScheduleRankModel
from .record import Schedule, load, write_trace
from .scheduler import (
    H_LAST,
    H_RECORD_EN,
    H_STEP,
    H_STUCK,
    RUNNABLE,
    ST_DEADLOCK,
    ST_STUCK,
    ScheduleError,
    Shared,
    choices_of,
    record_enabled,
    register,
    shared_bytes,
    summarize,
)
from .strategies import make


class ScheduleMode(RunModel):
    """The factory of schedule mode's rank models, with the launcher's part of the run: it
    sizes and seeds the shared state before the ranks fork (``prepare``) and reads the
    schedule back after they end (``collect``; then ``schedule`` holds it). ``config`` is the
    run's configuration: a replay takes the recorded run's seed and schedule options."""

    one_at_a_time = True

    def __init__(self, config: Config, choices: list[int] | None = None,
                 record_enabled: bool = False, strategy: Any = None) -> None:
        super().__init__(config)
        self.record_enabled = record_enabled  # note every step's enabled agents (exhaustive search)
        self.deciders: list[int] = []  # after collect: the agent that decided each step
        self.enabled: list[list[int]] = []  # after collect, when recorded
        if choices is None and config.replay:
            recorded = load(config.replay)
            if recorded.nranks != config.nranks:
                raise ArgumentError(f"replay: {config.replay!r} was recorded with nranks="
                                    f"{recorded.nranks}, this run has nranks={config.nranks}")
            choices = recorded.choices
            # the recorded run's seed and options decide: the models draw their due times from them
            opts = {k: v for k, v in recorded.options.items()
                    if k in ("blocks", "hazards", "schedule_delay")}
            self.config = config = config.replace(seed=recorded.seed, **opts)
        # (a strategy object of the user's: run(strategy=obj))
        self.strategy = strategy if strategy is not None and choices is None else make(config,
                                                                                      choices)
        self.semantics = semantics_model(semantics_of(config))  # after a replay's options
        self.shared_bytes = shared_bytes(config.nranks)
        self.schedule: Schedule | None = None

    def prepare(self, ctl: Any) -> None:
        sh = Shared(ctl.extra_base, ctl.nranks)
        try:
            # a pool's second run: every part before the records, the enabled agents' starts
            # (256 KiB) only when they are recorded (read only then)
            en_start, en_bytes, _fmt = sh.layout.parts["en_start"]
            ctypes.memset(sh.base, 0, en_start + (en_bytes if self.record_enabled else 0))
            self.strategy.new_execution(sh, self.config.seed)
            hosts = [r * C.SLOTS + C.HOST_SLOT for r in range(ctl.nranks)]
            for h in hosts:
                register(sh, h, RUNNABLE)
            first = self.strategy.next_agent(sh, hosts, -1, 0)
            if self.record_enabled:
                sh.hdr[H_RECORD_EN] = 1
                record_enabled(sh, 0, hosts)
            if first < 0:
                raise ScheduleError(f"schedule: strategy {self.strategy.name!r} chose no agent at "
                                    "step 0 (a replayed schedule that does not fit this run)")
            sh.rec_next[0], sh.rec_me[0], sh.rec_op[0] = first, -1, 0
            sh.hdr[H_STEP] = 1
            sh.hdr[H_LAST] = first
            ctypes.c_int32.from_address(sh.go_addr(first)).value = 1  # no rank runs yet
            self.first_rank = first // C.SLOTS  # its rank starts first: the others wait for it
        finally:
            sh.release()

    def __call__(self, rt: Any) -> ScheduleRankModel:
        return ScheduleRankModel(rt, self.strategy, self.semantics, self.turn_cpu)

    def collect(self, ctl: Any, failures: list[Failure]) -> None:
        sh = Shared(ctl.extra_base, ctl.nranks)
        try:
            s = summarize(sh)
            stuck = sh.hdr[H_STUCK]
        finally:
            sh.release()
        cfg = self.config
        strategy = "replay" if self.strategy.name == "replay" else cfg.strategy
        self.schedule = Schedule(cfg.nranks, cfg.seed, strategy, list(choices_of(s["next"])),
                                 s["preemptions"], dict(blocks=cfg.blocks, hazards=cfg.hazards,
                                                        schedule_delay=cfg.schedule_delay))
        self.deciders = list(choices_of(s["me"]))
        self.enabled = s["enabled"]
        if s["status"] == ST_DEADLOCK and not any(f.kind == "deadlock" for f in failures):
            _drop_echoes(failures, None)
            failures.insert(0, Failure(None, None, "deadlock", s["report"]))
        elif s["status"] == ST_STUCK:
            rank, slot = divmod(stuck, C.SLOTS)
            _drop_echoes(failures, rank)
            failures.insert(0, Failure(rank, None if slot == C.HOST_SLOT else slot, "timeout",
                                       s["report"]))
        if cfg.record:
            try:
                self.schedule.save(cfg.record)
            except OutputError as exc:  # the path changed during the run: refused, not written
                failures.append(Failure(None, None, "exception", str(exc)))
        if cfg.trace:
            write_trace(cfg.trace, cfg.nranks, choices_of(s["me"]), s["ops"],
                        choices_of(s["next"]), dict(blocks=cfg.blocks, hazards=cfg.hazards))

    def hint(self, host: Any, args: tuple) -> str:
        """The one-line command that replays this run (when ``host`` is importable)."""
        cfg = self.config
        mod, name = getattr(host, "__module__", None), getattr(host, "__qualname__", "")
        if args or not mod or "<" in name or mod == "__main__":
            hazards = "" if cfg.hazards == Config.hazards else f", hazards={cfg.hazards!r}"
            return (f"replay: the same program with mode='schedule', seed={cfg.seed}, "
                    f"strategy={cfg.strategy!r}{hazards} (or record=PATH, then replay=PATH)")
        parts = ["python", "-m", "shmcomm.launch", "--nranks", str(cfg.nranks), "--blocks",
                 str(cfg.blocks), "--program", f"{mod}:{name}", "--mode", "schedule"]
        if cfg.replay:
            parts += ["--replay", os.path.abspath(cfg.replay)]
        else:
            parts += ["--strategy", cfg.strategy, "--seed", str(cfg.seed)]
            default = Config(nranks=cfg.nranks)
            if cfg.hazards != default.hazards:
                parts += ["--hazards", cfg.hazards]
            if cfg.schedule_delay != default.schedule_delay:
                parts += ["--schedule-delay", str(cfg.schedule_delay)]
        return "replay: " + shlex.join(parts)


def _drop_echoes(failures: list[Failure], rank: int | None) -> None:
    """Drop what the launcher inferred from the end this model's report explains: that no rank
    named the abort's cause, and the death of ``rank`` (the stuck agent's process ends itself)."""
    failures[:] = [f for f in failures if not (
        f.cause == "unreported-abort"
        or (rank is not None and f.rank == rank and f.kind == "crash"))]


__all__ = ["ScheduleMode", "shared_bytes", "ScheduleBlockModel", "ScheduleRankModel", "Schedule",
           "ScheduleError", "load"]
