"""The ``stress`` command line of the stress harness.

A program is a host function ``host(rt, **args)`` (with a ``size`` parameter when it wants the
sweep's size) that raises when its result is wrong: a catalogue entry
(:mod:`shmcomm.stress.catalogue`) or a user's ``--program pkg.mod:host`` / ``file.py:host``. The
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
the runtime's own pipe checks); ``error`` (anything else, e.g. a bad argument: never a catch).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading

from .._startup import interrupts_as_usual
from ..config import BY_NAME, add_options, from_env, given, sweep_defaults
from ..errors import ArgumentError
from ..exec.schedule.strategies import parse_strategy
from ..files import check_target, make_dirs, write_file
from ..launch import options as opt
from . import catalogue
from .harness import (
    DEFAULT_BLOCKS,
    DEFAULT_NRANKS,
    DEFAULT_SIZES,
    RUN_SETTINGS,
    Report,
    RunSpec,
    Settings,
    check_host_args,
    configs,
    host_call,
    resolve_program,
    sweep,
    takes_size,
    trace_name,
)
from .killmatrix import format_kill_matrix, kill_matrix
from .report import format_report, replay_command, report_json

DEFAULT_RUNS = 100


# the settings of the table that stress takes: the sweep's axes as comma lists, the rest once
STRESS_SETTINGS = tuple(n for n in BY_NAME if n not in ("trace", "record"))
AXES = ("nranks", "blocks", "mode")


def build_parser(prog: str | None = None) -> argparse.ArgumentParser:
    p = opt.parser(prog or opt.prog_name("stress"),
                   "Run a shmcomm program many times over seeds, rank and block counts, sizes "
                   "and modes; report failures by kind and how to reproduce the first.",
                   opt.STRESS_EXIT_STATUS_HELP)
    what = p.add_mutually_exclusive_group(required=True)
    opt.add_program(what, extra=", or a catalogue program (" + ", ".join(catalogue.ENTRIES)
                    + "); it receives size= if it takes a size parameter; raise when its result "
                    "is wrong")
    what.add_argument("--catalogue", action="store_true",
                      help="run every catalogued bug and print the kill matrix, then the correct "
                           "programs (default: off)")
    opt.add_args(p)
    p.add_argument("--only", metavar="NAMES", default=None,
                   help="with --catalogue: comma-separated entries to run (default: all)")
    sweep_dflt = dict(sweep_defaults({}, STRESS_SETTINGS), nranks=DEFAULT_NRANKS,
                      blocks=DEFAULT_BLOCKS, mode=("eager", "hazard"))
    add_options(p, STRESS_SETTINGS, many=AXES, defaults=sweep_dflt, help_extra=dict(
        nranks="of the sweep (or the catalogue entry's)",
        blocks="of the sweep (or the catalogue entry's)",
        mode="of the sweep (a bug's own mode for a catalogue bug)",
        seed="of the first run; run i gets seed + i",
        timeout="(one run's)"))
    p.add_argument("--run-timeout", dest="timeout", type=p._option_string_actions[
        "--timeout"].type or float, default=None, help=argparse.SUPPRESS)  # the older name of --timeout
    p.add_argument("--size", type=opt.int_list, default=None,
                   help="problem sizes in elements, given to a host taking size (default: "
                        + _csv(DEFAULT_SIZES) + ", or the catalogue entry's)")
    p.add_argument("--runs", type=int, default=None,
                   help=f"number of runs, per entry with --catalogue (default: {DEFAULT_RUNS}, "
                        "or unlimited with --seconds)")
    p.add_argument("--seconds", type=float, default=None,
                   help="time budget in seconds, per entry with --catalogue; with --runs, "
                        "whichever ends first (default: none, 60 with --catalogue)")
    p.add_argument("-x", "--exitfirst", action="store_true",
                   help="stop at the first failing run (default: off)")
    p.add_argument("--json", metavar="PATH", default=None,
                   help="write every outcome as JSON (default: none)")
    opt.add_trace_dir(p)
    p.add_argument("--no-progress", action="store_true",
                   help="no progress bar (default: a bar when stderr is a terminal)")
    p.add_argument("--no-pool", action="store_true",
                   help="fork the rank processes for every run instead of reusing a pool "
                        "(default: off)")
    return p


def _csv(values: tuple[int, ...]) -> str:
    return ",".join(map(str, values))


def _usage_problem(ns: argparse.Namespace) -> str | None:
    """What is wrong with the command line on its face (``None``: nothing)."""
    for name in ("runs", "seconds"):
        v = getattr(ns, name)
        if v is not None and v <= 0:
            return f"--{name} must be > 0, got {v}"
    if ns.runs is not None and ns.runs > 10**9:
        return "--runs must be at most 1e9"
    if ns.catalogue:
        for flag, value in (("--arg", ns.arg), ("--nranks", ns.nranks), ("--blocks", ns.blocks),
                            ("--size", ns.size), ("--hazards", ns.hazards),
                            ("-x/--exitfirst", ns.exitfirst)):
            if value:
                return (f"{flag} has no effect with --catalogue (every entry runs its own "
                        "sweep); drop it")
    elif ns.only:
        return "--only selects catalogue entries; it needs --catalogue"
    if ns.race_exitfirst and ns.detect_races is False:
        return "--race-exitfirst needs the race detector (drop --no-detect-races)"
    return None


def _resolve(ns: argparse.Namespace) -> Settings:
    """The run settings, and the sweep's axes: the command line, else SHMCOMM_NRANKS /
    _BLOCKS / _MODE, else defaults (ArgumentError for a bad value)."""
    env_axes = {k: (v,) for k, v in from_env(None, AXES).items()}
    if ns.seed is None:
        ns.seed = from_env(None, ("seed",)).get("seed", 0)
    settings = Settings.resolve(given(ns, RUN_SETTINGS), trace_dir=ns.trace_dir)
    for name in AXES:
        if getattr(ns, name) is None and name in env_axes:
            setattr(ns, name, env_axes[name])
    if ns.replay:
        if ns.mode not in (None, ("schedule",)):
            raise ArgumentError("--replay runs in schedule mode only")
        ns.mode = ("schedule",)
    return settings


def main(argv: list[str] | None = None, prog: str | None = None) -> int:
    """Entry point of ``stress``; returns the exit status."""
    interrupts_as_usual()  # from here on a Ctrl-C is this command's to report
    parser = build_parser(prog)
    prog = parser.prog
    opt.show_warnings(prog)
    ns = parser.parse_args(argv)
    problem = _usage_problem(ns)
    if problem:
        return opt.usage_error(parser, problem)
    settings = None
    try:
        settings = _resolve(ns)
        if ns.json:  # refused before the sweep, not after minutes of runs
            check_target("--json", os.path.abspath(ns.json))
    except ArgumentError as exc:
        return opt.usage_error(parser, str(exc))
    progress = not ns.no_progress
    quiet = False  # under mpi, ranks other than 0 print nothing
    if settings.transport == "mpi":
        quiet = _mpi_sweep_checks(parser, ns)
        settings.trace_dir = ""  # every rank would write and delete the same trace files
        progress = progress and not quiet
    # SIGTERM between two runs (each run handles it itself) stops the sweep as Ctrl-C does
    old_term = _term_as_interrupt()
    try:
        if ns.catalogue:
            return _run_catalogue(parser, ns, settings, progress)
        return _run_program(parser, ns, settings, progress, quiet)
    except opt.ProgramImportError as exc:
        return opt.report_import_error(prog, exc)
    except ArgumentError as exc:
        return opt.usage_error(parser, str(exc))
    except KeyboardInterrupt as exc:
        return _interrupted(prog, exc, settings, ns.json if not quiet else None)
    finally:
        if old_term is not None:
            signal.signal(signal.SIGTERM, old_term)


def _run_catalogue(parser: argparse.ArgumentParser, ns: argparse.Namespace, settings: Settings,
                   progress: bool) -> int:
    """``--catalogue``: the kill matrix of the bug catalogue (and its correct programs)."""
    names = [n.strip() for n in ns.only.split(",")] if ns.only else None
    unknown = [n for n in names or () if n not in catalogue.ENTRIES]
    if unknown:
        return opt.usage_error(parser, f"--only: unknown entries {', '.join(unknown)}")
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


def _run_program(parser: argparse.ArgumentParser, ns: argparse.Namespace, settings: Settings,
                 progress: bool, quiet: bool) -> int:
    """A sweep of ``--program`` (or a bounded exhaustive search of its schedules)."""
    kwargs = opt.host_kwargs(ns.arg)
    host = resolve_program(ns.program)
    entry = catalogue.get(ns.program)
    default_modes: tuple[str, ...] = ("eager", "hazard")
    if entry is not None and entry.bug:
        default_modes = (entry.mode,)
    modes = ns.mode or default_modes
    exhaustive = settings.strategy.startswith("exhaustive")  # schedule mode, whatever --mode
    error = opt.check_mode_options(("schedule",) if exhaustive else modes, ns.hazards)
    if error:
        return opt.usage_error(parser, error)
    if ns.size and not takes_size(host, kwargs):
        return opt.usage_error(parser, f"--size has no effect: {ns.program} takes no size "
                                       "parameter; drop --size or add size to the host")
    if "size" in kwargs:
        return opt.usage_error(parser, "--arg size=...: the sweep gives size; use --size")
    check_host_args(host, kwargs, ns.program)  # once, not once per run
    sizes = ns.size or (entry.sizes if entry else DEFAULT_SIZES)
    cfgs = configs(ns.nranks or (entry.nranks if entry else DEFAULT_NRANKS),
                   ns.blocks or (entry.blocks if entry else DEFAULT_BLOCKS),
                   sizes if takes_size(host, kwargs) else (0,), modes)  # 0: no size axis
    runs = ns.runs if ns.runs is not None or ns.seconds is not None else DEFAULT_RUNS
    if exhaustive:
        return _exhaustive(host, cfgs, ns, settings, kwargs)
    rep = sweep(host, cfgs, seed=ns.seed, runs=runs, seconds=ns.seconds, settings=settings,
                program=ns.program, progress=progress, stop_at_first=ns.exitfirst,
                kwargs=kwargs, pool=not ns.no_pool)
    if quiet:
        return 1 if rep.failures else 0
    _print_report(format_report(rep, settings))
    if ns.json:
        _write_json(ns.json, report_json([rep], settings))
    return 1 if rep.failures else 0


def _interrupted(prog: str, exc: KeyboardInterrupt, settings: Settings | None,
                 json_path: str | None) -> int:
    """SIGINT / SIGTERM stopped the sweep: what it found so far, and the shell's status."""
    signum = getattr(exc, "signum", None) or signal.SIGINT
    rep = getattr(exc, "report", None)
    if rep is not None and settings is not None and rep.outcomes:
        _interrupted_report(rep, settings, json_path, prog)
    print(f"{prog}: interrupted by {signal.Signals(signum).name} "
          f"(after {len(rep.outcomes) if rep is not None else 0} complete run(s))",
          file=sys.stderr)
    return 128 + signum


def _interrupted_report(rep: Report, settings: Settings, json_path: str | None,
                        prog: str) -> None:
    """What an interrupted sweep found so far: the summary (with the failure found, its
    reproduce and replay lines), the ``--json`` file, the kept schedule's path. A second
    interrupt while this is written does not lose the rest."""
    def write() -> None:
        if json_path:
            _write_json(json_path, report_json([rep], settings))

    for step in (lambda: _print_report(format_report(rep, settings)), write):
        try:
            step()
        except KeyboardInterrupt:
            continue
        except ArgumentError as exc:  # --json refused (the path changed during the sweep)
            print(f"{prog}: {exc}", file=sys.stderr)
    kept = next((o.schedule for o in rep.failures if o.schedule), None)
    if kept:
        print(f"{prog}: the failing run's schedule is kept at {kept}", file=sys.stderr)


def _print_report(text: str) -> None:
    """The summary; its failures line red (or green) on a terminal, unless NO_COLOR is set."""
    head, sep, rest = text.partition("\nfailures: ")
    if sep:
        count, _, tail = rest.partition("  ")
        text = head + "\n" + opt.colour(f"failures: {count}", "red" if count != "0" else "green",
                                        sys.stdout) + "  " + tail
    print(text)


def _term_as_interrupt():
    """SIGTERM raises a KeyboardInterrupt carrying its number; returns the old handler."""
    if threading.current_thread() is not threading.main_thread():
        return None

    def handler(signum: int, frame) -> None:
        stop = KeyboardInterrupt()
        stop.signum = signum  # type: ignore[attr-defined]
        raise stop

    return signal.signal(signal.SIGTERM, handler)


def _exhaustive(host, cfgs, ns: argparse.Namespace, settings: Settings,
                kwargs: dict) -> int:
    """``--strategy exhaustive:K``: every schedule with at most K preemptions, per configuration
    (at most ``--runs`` runs each, default 1000), until one fails."""
    from ..config import Config
    from .explore import explore

    bound = parse_strategy(settings.strategy)[1][0]
    sized = takes_size(host, kwargs)
    for nranks, blocks, size, _mode in dict.fromkeys((n, b, s, "schedule") for n, b, s, _m in cfgs):
        cfg = Config.from_kwargs(nranks=nranks, blocks=blocks, seed=ns.seed, mode="schedule",
                                 hazards=settings.hazards, **settings.config())
        call, args = host_call(host, size, kwargs)
        found = explore(call, cfg, args, bound, ns.runs or 1000)
        label = f"nranks={nranks} blocks={blocks}" + (f" size={size}" if sized else "")
        if found.failure is None:
            print(f"{label}: {found.runs} schedules with <= {bound} preemptions, no failure"
                  + ("" if found.complete else " (stopped at the run budget: not all tried)"))
            continue
        spec = RunSpec(nranks, blocks, size, "schedule", ns.seed)
        path = os.path.join(settings.keep_dir(), trace_name(ns.program, spec, "-exhaustive"))
        assert found.schedule is not None  # a failure keeps its schedule
        found.schedule.save(path)
        print(f"{label}: schedule {found.runs} failed: {found.failure.failures[0]}".splitlines()[0])
        print("replay: " + replay_command(ns.program, spec, path, settings, sized, kwargs))
        return 1
    return 0


def _mpi_sweep_checks(parser: argparse.ArgumentParser, ns: argparse.Namespace) -> bool:
    """Every process of the mpiexec job must make the same runs: refuse what would differ, fix
    ``--nranks`` to the job's size. Returns whether this process stays quiet (not rank 0)."""
    from ..transports.mpi import load_mpi

    if ns.catalogue:
        parser.error("--catalogue runs buggy kernels until they fail, and under --transport mpi "
                     "the first failure aborts the job: give --program")
    if ns.seconds is not None:
        parser.error("--seconds: the ranks of an mpi job would stop after different runs; give "
                     "--runs")
    world = load_mpi().COMM_WORLD
    size = world.Get_size()
    if ns.nranks is not None and set(ns.nranks) != {size}:
        parser.error(f"--nranks under --transport mpi must be the job's size ({size}, from "
                     f"mpiexec -n), got {','.join(map(str, ns.nranks))}")
    ns.nranks = (size,)
    ns.no_pool = True  # the pool forks rank processes of its own; under mpiexec MPI makes them
    return world.Get_rank() != 0


def _write_json(path: str, doc: dict) -> None:
    make_dirs("--json", os.path.dirname(path))
    write_file("--json", path, json.dumps(doc, indent=1) + "\n")

