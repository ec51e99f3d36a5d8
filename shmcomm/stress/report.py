"""The reports of a sweep: the summary table, the repro command, versioned JSON."""

from __future__ import annotations

import dataclasses
import os
import platform
import shlex
from collections.abc import Callable, Sequence
from dataclasses import asdict
from typing import Any

from ..config import BY_NAME, races_on, sweep_defaults, to_argv
from ..errors import ShmcommError
from ..launch.options import format_arg
from . import catalogue
from .harness import (
    JSON_VERSION,
    KINDS,
    Report,
    RunSpec,
    Settings,
    resolve_program,
    takes_size,
    trace_name,
)

AXES = ("nranks", "blocks", "mode", "seed")


def run_values(spec: RunSpec, settings: Settings) -> dict[str, Any]:
    """The settings a run of ``spec`` ran with, by their table names: the one source of both
    repro commands (and of the replay command)."""
    return dict(settings.values(spec.mode), nranks=spec.nranks, blocks=spec.blocks,
                mode=spec.mode, seed=spec.seed)


def repro_command(program: str, spec: RunSpec, settings: Settings,
                  kwargs: dict[str, Any] | None = None, command: str = "stress",
                  sized: bool | None = None) -> str:
    """The single-configuration command line that reruns ``spec`` exactly, under ``stress``
    (one run) or under ``launch`` (the same program, arguments, shape, mode and seed), written
    from the settings that ran (:func:`shmcomm.config.to_argv`): each command leaves out what
    equals its own default. ``sized``: whether the host takes the size (``None``: look the
    program up)."""
    if sized is None:
        host = _host_of(program)
        sized = host is not None and takes_size(host, kwargs)
    values = run_values(spec, settings)
    args: list[tuple[str, Any]] = sorted((kwargs or {}).items())
    if command == "stress":
        parts = ["python", "-m", "shmcomm.stress", "--program", program]
        # the sweep's axes are always spelled out (stress's own are lists); the rest only when
        # they differ from a sweep's defaults
        stress_defaults = sweep_defaults({}, [k for k in values if k not in AXES])
        parts += to_argv(values, stress_defaults)
        parts += ["--size", str(spec.size)] if sized else []
        parts += ["--runs", "1"]
    else:
        entry = catalogue.get(program)
        spec_text = f"{entry.host.__module__}:{entry.host.__name__}" if entry else program
        parts = ["python", "-m", "shmcomm", "launch", "--program", spec_text]
        launch_defaults = {k: BY_NAME[k].default for k in values}
        launch_defaults.pop("mode")  # always spelled out: a reader sees which mode failed
        parts += to_argv(values, launch_defaults)
        if sized:
            args = [("size", spec.size)] + args
        if settings.trace_dir:
            # the sweep's runs were traced, and tracing changes the timing a race depends on
            parts += ["--trace", os.path.join(settings.trace_dir,
                                              trace_name(program, spec, "-launch"))]
    notes = []
    for key, value in args:
        try:
            parts += ["--arg", format_arg(key, value)]
        except ShmcommError:
            notes.append(key)
    text = shlex.join(parts)
    if notes:
        text += f"   # cannot pass {', '.join(notes)}: not a literal nor an importable object"
    return text


def _host_of(program: str) -> Callable[..., Any] | None:
    """The program's host function, when it can be found again without side effects."""
    entry = catalogue.get(program)
    if entry is not None:
        return entry.host
    try:
        return resolve_program(program)
    except ShmcommError:
        return None


ADVICE_LINES = 3  # advisory checkers' findings shown beside the first failure


def format_report(report: Report, settings: Settings) -> str:
    """The summary table: totals, failures by kind, first failure and its repro, histogram."""
    n = len(report.outcomes)
    rate = n / report.seconds if report.seconds > 0 else 0.0
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    counts = report.counts()
    fails = report.failures
    # the race column only where races can be found (or were)
    races = settings.detect_races is not False and any(races_on(None, o.spec.mode)
                                                        for o in report.outcomes)
    kinds = KINDS if settings.detect_races or races or counts["race"] else tuple(
        k for k in KINDS if k != "race")
    lines = [f"shmcomm stress: {report.program}: {n} runs in {report.seconds:.1f} s "
             f"({rate:.1f} runs/s, load {load})",
             f"failures: {len(fails)}  (" + ", ".join(f"{k} {counts[k]}" for k in kinds) + ")"]
    if fails:
        first = fails[0]
        lines.append(f"first failure: run {report.outcomes.index(first)} ({first.spec.label()} "
                     f"seed={first.spec.seed}): {first.kind}")
        lines += ["  " + m for m in _brief(first.message)]
        lines += ["  likely cause: " + a for a in first.advice[:ADVICE_LINES]]
        if first.trace:
            lines.append(f"  trace kept: {first.trace}")
        lines.append("reproduce: " + repro_command(report.program, first.spec, settings,
                                                   report.kwargs, sized=report.sized))
        lines.append("  or once, under launch: " + repro_command(
            report.program, first.spec, settings, report.kwargs, "launch", report.sized))
        if first.schedule:
            if first.shrunk:
                lines.append(f"schedule shrunk from {first.shrunk[0]} to {first.shrunk[1]} "
                             "preemptions")
            if first.shrink_note:
                lines.append(first.shrink_note)
            lines.append("replay: " + replay_command(report.program, first.spec, first.schedule,
                                                     settings, report.sized, report.kwargs))
    lines.append("outcomes per configuration:")
    hist: dict[str, dict[str, int]] = {}
    for o in report.outcomes:
        row = hist.setdefault(o.spec.label(), dict.fromkeys(("ok",) + KINDS, 0))
        row[o.kind] += 1
    cols = ("ok",) + kinds
    width = max([len(k) for k in hist] + [13])
    lines.append("  " + "configuration".ljust(width) + "".join(f"{c:>{len(c) + 2}}" for c in cols))
    for label, row in hist.items():
        lines.append("  " + label.ljust(width) + "".join(f"{row[c]:>{len(c) + 2}}" for c in cols))
    lines += format_histogram(report)
    return "\n".join(lines)


def replay_command(program: str, spec: RunSpec, schedule: str, settings: Settings,
                   sized: bool | None = None, kwargs: dict[str, Any] | None = None) -> str:
    """The command that replays a failing schedule-mode run from its schedule file."""
    replay = dataclasses.replace(settings, replay=schedule, strategy=BY_NAME["strategy"].default)
    return repro_command(program, spec, replay, kwargs, sized=sized)


def format_histogram(report: Report) -> list[str]:
    """jcstress's table: every outcome (a passing run's returned value, or a failure kind), how
    often it was seen, and the seed of the first run that produced it. Empty when no run
    returned a value."""
    if not any(o.value is not None for o in report.outcomes):
        return []
    seen: dict[str, list[int]] = {}
    for o in report.outcomes:
        key = o.kind if o.kind != "ok" else f"ok {o.value}"
        row = seen.setdefault(key, [0, o.spec.seed])
        row[0] += 1
    width = max(len(k) for k in seen)
    lines = ["outcome histogram (outcome, runs, first seed):"]
    for key, (count, seed) in sorted(seen.items(), key=lambda kv: -kv[1][0]):
        lines.append(f"  {key.ljust(width)}  {count:>8}  seed {seed}")
    return lines


def _brief(message: str) -> list[str]:
    """A failure's first line and, from its traceback, the frame that raised (where to look)."""
    lines = message.strip().splitlines()
    if not lines:
        return []
    frames = [i for i, line in enumerate(lines) if line.lstrip().startswith("File ")
              and "catalogue/_common.py" not in line]  # skip the check helper: show its caller
    # the user's code rather than shmcomm's own frames (a checker's raise, the runtime)
    own = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
    catalogue_dir = os.path.join(own, "stress", "catalogue") + os.sep
    users = [i for i in frames if f'"{own}' not in lines[i] or f'"{catalogue_dir}' in lines[i]]
    frames = users or frames
    out = [lines[0]]
    if frames:
        i = frames[-1]
        cwd = os.getcwd() + os.sep
        out += [line.rstrip().replace(f'"{cwd}', '"') for line in lines[i:i + 2]]  # short paths
    elif len(lines) > 1:  # a deadlock's wait-for table
        out += lines[1:12]
        if len(lines) > 12:
            out.append(f"... ({len(lines) - 12} more lines)")
    return out


def _machine() -> dict[str, Any]:
    return dict(python=platform.python_version(), platform=platform.platform(),
                cpus=os.cpu_count(), loadavg=list(os.getloadavg()))


def report_json(reports: Sequence[Report], settings: Settings, extra: dict | None = None) -> dict:
    """A versioned JSON document of the sweep(s), with machine metadata."""
    return dict(version=JSON_VERSION, tool="shmcomm.stress", machine=_machine(),
                settings=asdict(settings), **(extra or {}),
                reports=[dict(program=r.program, seconds=r.seconds, counts=r.counts(),
                              outcomes=[dict(asdict(o.spec), kind=o.kind, seconds=o.seconds,
                                             message=o.message[:2000], trace=o.trace,
                                             value=o.value, schedule=o.schedule,
                                             advice=o.advice)
                                        for o in r.outcomes])
                         for r in reports])


