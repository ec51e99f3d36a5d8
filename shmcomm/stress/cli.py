"""``python -m shmcomm.stress``: the command line of the stress harness.

A program is a host function ``host(rt)`` or ``host(rt, size)`` that raises when its result is
wrong: a catalogue entry (:mod:`shmcomm.stress.catalogue`) or a user's ``--program pkg.mod:host``. The
harness sweeps rank counts, block counts, sizes and modes (run ``i`` takes configuration
``i mod len(configs)`` and seed ``--seed + i``), classifies each outcome by exception type, and
prints a summary: failures by kind, the first failing configuration with the exact command that
reproduces it, and a jcstress-style outcome histogram per configuration. Exit status 1 when any
run failed, 2 on a usage error.

``--catalogue`` runs every catalogued bug until it is caught (or its budget runs out) and prints
the kill matrix, then runs the correct programs for the same budget and counts their alarms.

Outcome kinds: ``ok``; ``wrong result`` (the program's own check: ``AssertionError`` or
``ValueError``); ``deadlock`` (the deadlock detector, a ``WaitTimeout``, the run timeout);
``crash`` (a rank process died); ``checker`` (a hazard-mode checker from :mod:`shmcomm.exec.hazard`, or
the runtime's own pipe checks); ``race`` (the race detector, with ``--detect-races``; ``--exitfirst``
stops a run at its first race); ``error`` (anything else, e.g. a bad argument: never a catch).
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from ..config import MODES, parse_hazards, parse_strategy
from ..errors import ArgumentError
from ..launch.cli import add_race_options, add_schedule_options
from . import catalogue
from .harness import (
    DEFAULT_BLOCKS,
    DEFAULT_NRANKS,
    DEFAULT_SIZES,
    Settings,
    configs,
    resolve_program,
    sweep,
)
from .killmatrix import format_kill_matrix, kill_matrix
from .report import format_report, report_json


def _int_list(text: str) -> tuple[int, ...]:
    try:
        values = tuple(int(v) for v in text.split(",") if v.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None
    if not values:
        raise argparse.ArgumentTypeError("expected at least one value")
    return values


def _mode_list(text: str) -> tuple[str, ...]:
    values = tuple(v.strip() for v in text.split(",") if v.strip())
    bad = [v for v in values if v not in MODES]
    if bad or not values:
        raise argparse.ArgumentTypeError(f"modes must be a comma list of {', '.join(MODES)}, "
                                         f"got {text!r}")
    return values


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m shmcomm.stress",
        description="Run a shmcomm program many times over seeds, rank and block counts, sizes "
                    "and modes; report failures by kind and how to reproduce the first.")
    p.add_argument("--program", metavar="NAME|PKG.MOD:HOST", default=None,
                   help="a catalogue program (" + ", ".join(catalogue.ENTRIES) + ") or a host "
                        "function host(rt[, size]) that raises when its result is wrong")
    p.add_argument("--catalogue", action="store_true",
                   help="run every catalogued bug and print the kill matrix, then the correct programs")
    p.add_argument("--only", metavar="NAMES", default=None,
                   help="with --catalogue: comma-separated entries to run")
    p.add_argument("--nranks", type=_int_list, default=None, help="rank counts, e.g. 2,4,8")
    p.add_argument("--blocks", type=_int_list, default=None, help="block counts, e.g. 1,2,4")
    p.add_argument("--size", type=_int_list, default=None, help="problem sizes (elements)")
    p.add_argument("--mode", type=_mode_list, default=None, help="eager, hazard, schedule or a comma list")
    p.add_argument("--seed", type=int, default=0, help="seed of the first run (run i: seed + i)")
    p.add_argument("--runs", type=int, default=None, help="number of runs (per entry with --catalogue)")
    p.add_argument("--seconds", type=float, default=None,
                   help="time budget in seconds (per entry with --catalogue, default 60 there)")
    p.add_argument("--json", metavar="PATH", default=None, help="write every outcome as JSON")
    p.add_argument("--wait-timeout", type=float, default=Settings.wait_timeout,
                   help="one TWAIT's deadline in s (default %(default)s)")
    p.add_argument("--deadlock-grace", type=float, default=Settings.deadlock_grace,
                   help="deadlock detector grace in s (default %(default)s)")
    p.add_argument("--run-timeout", type=float, default=Settings.run_timeout,
                   help="one run's timeout in s (default %(default)s)")
    p.add_argument("--trace-dir", default=Settings.trace_dir,
                   help="where hazard runs write traces; a failing run's is kept (default %(default)s)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--hazards", default="all", metavar="LIST",
                   help="hazard and schedule modes' sub-models: all (default) or a comma list of "
                        "pipes,visibility,lines,jitter,checkers")
    p.add_argument("--no-pool", action="store_true",
                   help="fork the rank processes for every run instead of reusing a pool")
    add_schedule_options(p)
    add_race_options(p)
    return p


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m shmcomm.stress``; returns the exit status."""
    parser = build_parser()
    ns = parser.parse_args(argv)
    if ns.catalogue == bool(ns.program):
        parser.error("give exactly one of --program or --catalogue")
    for name in ("runs", "seconds"):
        v = getattr(ns, name)
        if v is not None and v <= 0:
            parser.error(f"--{name} must be > 0, got {v}")
    if ns.runs is not None and ns.runs > 10**9:
        parser.error("--runs must be at most 1e9")
    if ns.seed < 0:
        parser.error(f"--seed must be >= 0, got {ns.seed}")
    if ns.exitfirst and not ns.detect_races:
        parser.error("--exitfirst needs --detect-races")
    if ns.record is not None or ns.schedule_delay is not None:
        parser.error("--record and --schedule-delay belong to python -m shmcomm.launch; the stress "
                     "harness keeps every failing run's schedule")
    try:
        parse_strategy(ns.strategy or "random", "--strategy")
    except ArgumentError as exc:
        parser.error(str(exc))
    settings = Settings(ns.wait_timeout, ns.deadlock_grace, ns.run_timeout, ns.trace_dir,
                        strategy=ns.strategy or "random", replay=ns.replay or "",
                        hazards=ns.hazards, detect_races=ns.detect_races,
                        race_exitfirst=ns.exitfirst)
    try:
        parse_hazards(ns.hazards, "--hazards")
    except ArgumentError as exc:
        parser.error(str(exc))
    if ns.replay:
        if ns.mode not in (None, ("schedule",)):
            parser.error("--replay runs in schedule mode only")
        ns.mode = ("schedule",)
    progress = not ns.no_progress
    try:
        if ns.catalogue:
            names = [n.strip() for n in ns.only.split(",")] if ns.only else None
            unknown = [n for n in names or () if n not in catalogue.ENTRIES]
            if unknown:
                parser.error(f"--only: unknown entries {', '.join(unknown)}")
            budget = 60.0 if ns.seconds is None else ns.seconds
            kills, reports = kill_matrix(budget, ns.runs, ns.seed, settings, names,
                                         progress=progress, modes=ns.mode, pool=not ns.no_pool)
            print(format_kill_matrix(kills, reports, settings))
            if ns.json:
                extra = dict(kill_matrix=[dict(
                    bug=k.entry.name, mode=k.entry.mode, source=k.entry.summary,
                    caught=k.catch is not None, how=k.catch.kind if k.catch else None,
                    seed=k.catch.spec.seed if k.catch else None,
                    runs=(k.to_catch() or (None,))[0], seconds=(k.to_catch() or (None, None))[1],
                    note=k.note) for k in kills])
                _write_json(ns.json, report_json([k.report for k in kills if k.report] + reports,
                                                 settings, extra))
            missed = any(k.catch is None for k in kills)
            return 1 if missed or any(r.failures for r in reports) else 0
        host = resolve_program(ns.program)
        entry = catalogue.get(ns.program)
        default_modes: tuple[str, ...] = ("eager", "hazard")
        if entry is not None and entry.bug:
            default_modes = (entry.mode,)
        modes = ns.mode or default_modes
        cfgs = configs(ns.nranks or (entry.nranks if entry else DEFAULT_NRANKS),
                       ns.blocks or (entry.blocks if entry else DEFAULT_BLOCKS),
                       ns.size or (entry.sizes if entry else DEFAULT_SIZES), modes)
        runs = ns.runs if ns.runs is not None or ns.seconds is not None else 100
        if settings.strategy.startswith("exhaustive"):
            return _exhaustive(host, cfgs, ns, settings)
        rep = sweep(host, cfgs, seed=ns.seed, runs=runs, seconds=ns.seconds, settings=settings,
                    program=ns.program, progress=progress, pool=not ns.no_pool)
        print(format_report(rep, settings))
        if ns.json:
            _write_json(ns.json, report_json([rep], settings))
        return 1 if rep.failures else 0
    except ArgumentError as exc:
        print(f"shmcomm.stress: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("shmcomm.stress: interrupted", file=sys.stderr)
        return 130


def _exhaustive(host, cfgs, ns: argparse.Namespace, settings: Settings) -> int:
    """``--strategy exhaustive:K``: every schedule with at most K preemptions, per configuration
    (at most ``--runs`` runs each, default 1000), until one fails."""
    from ..config import Config
    from .explore import explore
    from .harness import _with_size

    bound = parse_strategy(settings.strategy)[1]
    failed = False
    for nranks, blocks, size, _mode in dict.fromkeys((n, b, s, "schedule") for n, b, s, _m in cfgs):
        cfg = Config.from_kwargs(nranks=nranks, blocks=blocks, seed=ns.seed, hazards=ns.hazards,
                                 **settings.config())
        found = explore(host, cfg, (size,) if _with_size(host) else (), bound, ns.runs or 1000)
        label = f"nranks={nranks} blocks={blocks} size={size}"
        if found.failure is None:
            print(f"{label}: {found.runs} schedules with <= {bound} preemptions, no failure"
                  + ("" if found.complete else " (stopped at the run budget: not all tried)"))
            continue
        failed = True
        path = os.path.abspath(os.path.join(settings.schedule_dir or ".",
                            f"{ns.program.replace(':', '_')}-{nranks}x{blocks}-n{size}-exhaustive.json"))
        found.schedule.save(path)
        print(f"{label}: schedule {found.runs} failed: {found.failure.failures[0]}".splitlines()[0])
        print(f"replay: python -m shmcomm.stress --program {ns.program} --nranks {nranks} "
              f"--blocks {blocks} --size {size} --mode schedule --runs 1 --replay {path}"
              + (f" --hazards {ns.hazards}" if ns.hazards != "all" else ""))
        break
    return 1 if failed else 0


def _write_json(path: str, doc: dict) -> None:
    d = os.path.dirname(path)
    if d:
        os.makedirs(d, exist_ok=True)
    with open(path, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")

