"""The catalogue's kill matrix: every bug run until caught, every correct program for the same
budget (``python -m shmcomm.stress --catalogue``)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass

from . import catalogue
from .harness import CATCH_KINDS, Outcome, Report, Settings, configs, sweep
from .report import repro_command


@dataclass
class Kill:
    """One row of the kill matrix."""

    entry: catalogue.Entry
    report: Report | None  # None: not run (its mode is not available)
    note: str = ""

    @property
    def catch(self) -> Outcome | None:
        if self.report is None:
            return None
        return next((o for o in self.report.outcomes if o.kind in CATCH_KINDS), None)

    def to_catch(self) -> tuple[int, float] | None:
        """Runs and run-seconds up to and including the first catch."""
        c = self.catch
        if c is None or self.report is None:
            return None
        idx = self.report.outcomes.index(c) + 1
        return idx, sum(o.seconds for o in self.report.outcomes[:idx])


def entry_configs(entry: catalogue.Entry, modes: Sequence[str],
                  bug_modes: Sequence[str] | None = None) -> list[tuple[int, int, int, str]]:
    """The sweep of a catalogue entry: its own mode (or ``bug_modes``) for a bug, ``modes`` for a
    correct one."""
    if entry.bug:
        modes = tuple(bug_modes) if bug_modes else (entry.mode,)
    return configs(entry.nranks, entry.blocks, entry.sizes, modes)


def kill_matrix(budget_s: float = 60.0, max_runs: int | None = None, seed: int = 0,
                settings: Settings | None = None, names: Sequence[str] | None = None,
                correct: bool = True, progress: bool = False,
                modes: Sequence[str] | None = None,
                pool: bool = True) -> tuple[list[Kill], list[Report]]:
    """Run every bug until caught (within ``budget_s`` / ``max_runs`` each), then each correct
    program for the full budget. Returns the kill rows and the correct programs' reports.
    ``modes``: run every entry in these modes (default: a bug in its own, the correct programs
    in eager and hazard)."""
    settings = settings or Settings()
    bug_modes = tuple(modes) if modes else None
    modes = bug_modes or ("eager", "hazard")
    kills = []
    for entry in catalogue.BUGS:
        if names and entry.name not in names:
            continue
        rep = sweep(entry.host, entry_configs(entry, modes, bug_modes), seed=seed, runs=max_runs,
                    seconds=budget_s, settings=settings, stop_at_first=True, program=entry.name,
                    progress=progress, pool=pool)
        kills.append(Kill(entry, rep))
    reports = []
    if correct:
        for entry in catalogue.CORRECT:
            if names and entry.name not in names:
                continue
            reports.append(sweep(entry.host, entry_configs(entry, modes), seed=seed, runs=max_runs,
                                 seconds=budget_s, settings=settings, program=entry.name,
                                 progress=progress, pool=pool))
    return kills, reports


def format_kill_matrix(kills: Sequence[Kill], reports: Sequence[Report], settings: Settings) -> str:
    """The kill matrix table, then the correct programs' alarms and the repro of any."""
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    rows = [("bug", "mode", "caught", "how", "runs", "seconds", "seed", "source")]
    for k in kills:
        c = k.catch
        if c is None:
            runs = "-" if k.report is None else str(len(k.report.outcomes))
            secs = "-" if k.report is None else f"{k.report.seconds:.1f}"
            mode = k.report.outcomes[0].spec.mode if k.report and k.report.outcomes else k.entry.mode
            rows.append((k.entry.name, mode, "NO", k.note or "-", runs, secs, "-",
                         k.entry.summary))
        else:
            idx, took = k.to_catch()  # type: ignore[misc]
            rows.append((k.entry.name, c.spec.mode, "yes", c.kind, str(idx), f"{took:.2f}",
                         str(c.spec.seed), k.entry.summary))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    caught = sum(1 for k in kills if k.catch is not None)
    lines = [f"shmcomm stress --catalogue: kill matrix (load {load})"]
    for row in rows:
        src = row[-1] if len(row[-1]) <= 70 else row[-1][:67] + "..."
        lines.append("  " + "  ".join(c.ljust(w) for c, w in zip(row[:-1], widths, strict=True))
                     + "  " + src)
    lines.append(f"caught {caught} of {len(kills)} bugs; each catch reruns with:")
    for k in kills:
        if k.catch is not None:
            lines.append(f"  {repro_command(k.entry.name, k.catch.spec, settings)}")
    if reports:
        total = sum(len(r.outcomes) for r in reports)
        alarms = sum(len(r.failures) for r in reports)
        spent = sum(r.seconds for r in reports)
        lines.append(f"correct programs: {total} runs in {spent:.1f} s, {alarms} alarms")
        for r in reports:
            counts = r.counts()
            lines.append(f"  {r.program:<16} {len(r.outcomes):>6} runs  {len(r.failures)} alarms"
                         + ("" if not r.failures else "  (" + ", ".join(
                             f"{k} {v}" for k, v in counts.items() if v) + ")"))
            if r.failures:
                lines.append(f"    reproduce: {repro_command(r.program, r.failures[0].spec, settings)}")
    return "\n".join(lines)


# --- command line --------------------------------------------------------------------------------

