"""``python -m shmcomm.stress``: run a program many times over seeds and configurations.

A program is a host function ``host(rt)`` or ``host(rt, size)`` that raises when its result is
wrong: a catalogue entry (:mod:`shmcomm.catalogue`) or a user's ``--program pkg.mod:host``. The
harness sweeps rank counts, block counts, sizes and modes (run ``i`` takes configuration
``i mod len(configs)`` and seed ``--seed + i``), classifies each outcome by exception type, and
prints a summary: failures by kind, the first failing configuration with the exact command that
reproduces it, and a jcstress-style outcome histogram per configuration. Exit status 1 when any
run failed, 2 on a usage error.

``--catalogue`` runs every catalogued bug until it is caught (or its budget runs out) and prints
the kill matrix, then runs the correct programs for the same budget and counts their alarms.

Outcome kinds: ``ok``; ``wrong result`` (the program's own check: ``AssertionError`` or
``ValueError``); ``deadlock`` (the deadlock detector, a ``WaitTimeout``, the run timeout);
``crash`` (a rank process died); ``checker`` (a hazard-mode checker from :mod:`shmcomm.race`, or
the runtime's own pipe checks); ``error`` (anything else, e.g. a bad argument: never a catch).
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import inspect
import itertools
import json
import os
import platform
import re
import shlex
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from . import catalogue
from .config import Config
from .errors import ArgumentError, RunError, ShmcommError
from .runner import run

KINDS = ("wrong result", "deadlock", "crash", "checker", "error")
CATCH_KINDS = frozenset(KINDS) - {"error"}
WRONG_RESULT_TYPES = frozenset({"AssertionError", "ValueError"})
HANG_TYPES = frozenset({"WaitTimeout"})
JSON_VERSION = 1

DEFAULT_NRANKS = (2, 4, 8)
DEFAULT_BLOCKS = (1, 2, 4)
DEFAULT_SIZES = (64, 1000)


@dataclass(frozen=True)
class RunSpec:
    """One configuration of one run."""

    nranks: int
    blocks: int
    size: int
    mode: str
    seed: int

    def label(self) -> str:
        return f"nranks={self.nranks} blocks={self.blocks} size={self.size} mode={self.mode}"


@dataclass
class Outcome:
    """What one run gave: ``kind`` is ``"ok"`` or one of :data:`KINDS`."""

    spec: RunSpec
    kind: str
    seconds: float
    message: str = ""
    trace: str | None = None


@dataclass
class Settings:
    """The per-run bounds every run of a sweep gets.

    A hang is found by the deadlock detector after ``deadlock_grace`` (short, so a hang costs
    little); ``wait_timeout`` is only the backstop for hangs it cannot see, and generous because
    on a 2-core box shared with other work a healthy wait can starve for seconds (a 1 s
    ``wait_timeout`` raised false alarms at load 50).
    """

    wait_timeout: float = 10.0
    deadlock_grace: float = 0.3
    run_timeout: float = 30.0
    trace_dir: str = os.path.join("results", "stress-traces")  # hazard runs; kept on failure

    def config(self) -> dict[str, float]:
        return dict(wait_timeout=self.wait_timeout, deadlock_grace=self.deadlock_grace,
                    timeout=self.run_timeout)


@dataclass
class Report:
    """All outcomes of one sweep of one program."""

    program: str
    outcomes: list[Outcome] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def failures(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.kind != "ok"]

    def counts(self) -> dict[str, int]:
        c = dict.fromkeys(KINDS, 0)
        for o in self.failures:
            c[o.kind] += 1
        return c


# --- programs ------------------------------------------------------------------------------------

def hazard_available() -> bool:
    """True when this build has the hazard engine (``mode="hazard"``)."""
    try:
        importlib.import_module("shmcomm.race.hazard")
    except ImportError:
        return False
    return True


def resolve_program(spec: str) -> Callable[..., Any]:
    """A catalogue entry's host by name, or ``pkg.mod:function`` imported."""
    entry = catalogue.get(spec)
    if entry is not None:
        return entry.host
    if ":" not in spec:
        names = ", ".join(catalogue.ENTRIES)
        raise ArgumentError(f"--program: {spec!r} is neither a catalogue program ({names}) "
                            "nor pkg.module:function")
    from .cli import load_program

    return load_program(spec)


def _with_size(host: Callable[..., Any]) -> bool:
    """Does ``host`` take the size as a second argument (``host(rt, size)``)?"""
    try:
        params = [p for p in inspect.signature(host).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.VAR_POSITIONAL)]
    except (TypeError, ValueError):
        return False
    return len(params) >= 2 or any(p.kind == p.VAR_POSITIONAL for p in params)


# --- classification ------------------------------------------------------------------------------

def _checker_names() -> frozenset[str]:
    """Names of the ShmcommError subclasses that shmcomm.race defines (its checkers)."""
    names = set()
    try:
        race = importlib.import_module("shmcomm.race")
    except ImportError:
        return frozenset()
    import pkgutil

    mods = [race] + [importlib.import_module(f"shmcomm.race.{m.name}")
                     for m in pkgutil.iter_modules(race.__path__)]
    for mod in mods:
        for obj in vars(mod).values():
            if isinstance(obj, type) and issubclass(obj, ShmcommError):
                names.add(obj.__name__)
    return frozenset(names)


_CHECKERS: frozenset[str] | None = None
_TRACE_RE = re.compile(r"(/[\w./+-]*trace[\w./+-]*)")


def classify(exc: BaseException) -> tuple[str, str]:
    """``(kind, message)`` of a failed run, by the root cause's exception type."""
    global _CHECKERS
    if not isinstance(exc, RunError):
        return "error", f"{type(exc).__name__}: {exc}"
    first = exc.failures[0] if exc.failures else None
    if first is None:
        return "error", str(exc)
    text = str(first)
    if first.kind in ("deadlock", "timeout"):
        return "deadlock", text
    if first.kind == "crash":
        return "crash", text
    if first.kind == "interrupt":
        raise KeyboardInterrupt
    name = first.message.split(":", 1)[0].strip()
    if name in WRONG_RESULT_TYPES:
        return "wrong result", text
    if name in HANG_TYPES:
        return "deadlock", text
    if _CHECKERS is None:
        _CHECKERS = _checker_names()
    if name in _CHECKERS or name == "ShmcommError":
        return "checker", text
    return "error", text


def _trace_of(message: str) -> str | None:
    """A trace file the run's report names (hazard mode keeps it when a run fails)."""
    for path in _TRACE_RE.findall(message):
        path = path.rstrip(".,;)")
        if os.path.isfile(path):
            return path
    return None


# --- running -------------------------------------------------------------------------------------

def _trace_path(program: str, spec: RunSpec, settings: Settings) -> str | None:
    """Where a hazard run writes its trace (when this build's Config has ``trace``)."""
    if spec.mode != "hazard" or not settings.trace_dir or \
            "trace" not in {f.name for f in dataclasses.fields(Config)}:
        return None
    name = re.sub(r"[^\w.-]+", "_", program or "program")
    return os.path.abspath(os.path.join(
        settings.trace_dir, f"{name}-{spec.nranks}x{spec.blocks}-n{spec.size}-seed{spec.seed}.json"))


def run_one(host: Callable[..., Any], spec: RunSpec, settings: Settings,
            program: str = "") -> Outcome:
    """Run ``host`` once under ``spec``; never raises for a failing run (only for Ctrl-C).

    A hazard run writes a trace file; it is deleted when the run passes and kept (its path in
    ``Outcome.trace``) when it fails.
    """
    args = (spec.size,) if _with_size(host) else ()
    extra: dict[str, Any] = {}
    trace = _trace_path(program, spec, settings)
    if trace is not None:
        os.makedirs(os.path.dirname(trace), exist_ok=True)
        extra["trace"] = trace
    t0 = time.perf_counter()
    try:
        run(host, nranks=spec.nranks, blocks=spec.blocks, seed=spec.seed, mode=spec.mode,
            args=args, **settings.config(), **extra)
    except RunError as exc:
        kind, message = classify(exc)
        kept = trace if trace and os.path.isfile(trace) else _trace_of(str(exc))
        return Outcome(spec, kind, time.perf_counter() - t0, message, kept)
    except ArgumentError as exc:
        return Outcome(spec, "error", time.perf_counter() - t0, f"ArgumentError: {exc}")
    if trace is not None and os.path.isfile(trace):
        os.unlink(trace)
    return Outcome(spec, "ok", time.perf_counter() - t0)


def configs(nranks: Sequence[int], blocks: Sequence[int], sizes: Sequence[int],
            modes: Sequence[str]) -> list[tuple[int, int, int, str]]:
    """Every combination, in a stable order."""
    return list(itertools.product(nranks, blocks, sizes, modes))


def specs(cfgs: Sequence[tuple[int, int, int, str]], seed: int) -> Iterator[RunSpec]:
    """Run ``i`` gets configuration ``i mod len(cfgs)`` and seed ``seed + i`` (endless)."""
    for i in itertools.count():
        n, b, s, m = cfgs[i % len(cfgs)]
        yield RunSpec(n, b, s, m, seed + i)


def sweep(host: Callable[..., Any], cfgs: Sequence[tuple[int, int, int, str]], *, seed: int = 0,
          runs: int | None = None, seconds: float | None = None, settings: Settings | None = None,
          stop_at_first: bool = False, program: str = "", progress: bool = False) -> Report:
    """Run ``host`` over ``cfgs`` for ``runs`` runs or ``seconds`` (whichever ends first)."""
    if runs is None and seconds is None:
        runs = len(cfgs)
    settings = settings or Settings()
    report = Report(program)
    bar = _progress(program, runs, progress)
    t0 = time.perf_counter()
    try:
        for i, spec in enumerate(specs(cfgs, seed)):
            if runs is not None and i >= runs:
                break
            if seconds is not None and time.perf_counter() - t0 >= seconds:
                break
            out = run_one(host, spec, settings, program)
            report.outcomes.append(out)
            if bar is not None:
                bar.update(1)
                bar.set_postfix(failures=len(report.failures), refresh=False)
            if stop_at_first and out.kind in CATCH_KINDS:
                break
    finally:
        report.seconds = time.perf_counter() - t0
        if bar is not None:
            bar.close()
    return report


def _progress(program: str, total: int | None, enabled: bool):
    if not enabled:
        return None
    try:
        from tqdm import tqdm
    except ImportError:  # the bar is a nicety (the `stress` extra); runs go on without it
        return None
    return tqdm(total=total, desc=program or "stress", unit="run", file=sys.stderr,
                disable=not sys.stderr.isatty(), dynamic_ncols=True)


# --- reporting -----------------------------------------------------------------------------------

def repro_command(program: str, spec: RunSpec, settings: Settings) -> str:
    """The single-configuration command line that reruns ``spec`` exactly."""
    parts = ["python", "-m", "shmcomm.stress", "--program", program, "--nranks", str(spec.nranks),
             "--blocks", str(spec.blocks), "--size", str(spec.size), "--mode", spec.mode,
             "--seed", str(spec.seed), "--runs", "1"]
    default = Settings()
    for flag, value, dflt in (("--wait-timeout", settings.wait_timeout, default.wait_timeout),
                              ("--deadlock-grace", settings.deadlock_grace, default.deadlock_grace),
                              ("--run-timeout", settings.run_timeout, default.run_timeout)):
        if value != dflt:
            parts += [flag, f"{value:g}"]
    return shlex.join(parts)


def format_report(report: Report, settings: Settings) -> str:
    """The summary table: totals, failures by kind, first failure and its repro, histogram."""
    n = len(report.outcomes)
    rate = n / report.seconds if report.seconds > 0 else 0.0
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    counts = report.counts()
    fails = report.failures
    lines = [f"shmcomm stress: {report.program}: {n} runs in {report.seconds:.1f} s "
             f"({rate:.1f} runs/s, load {load})",
             f"failures: {len(fails)}  (" + ", ".join(f"{k} {counts[k]}" for k in KINDS) + ")"]
    if fails:
        first = fails[0]
        lines.append(f"first failure: run {report.outcomes.index(first)} ({first.spec.label()} "
                     f"seed={first.spec.seed}): {first.kind}")
        lines += ["  " + m for m in _brief(first.message)]
        if first.trace:
            lines.append(f"  trace kept: {first.trace}")
        lines.append(f"reproduce: {repro_command(report.program, first.spec, settings)}")
    lines.append("outcomes per configuration:")
    hist: dict[str, dict[str, int]] = {}
    for o in report.outcomes:
        row = hist.setdefault(o.spec.label(), dict.fromkeys(("ok",) + KINDS, 0))
        row[o.kind] += 1
    cols = ("ok",) + KINDS
    width = max([len(k) for k in hist] + [13])
    lines.append("  " + "configuration".ljust(width) + "".join(f"{c:>{len(c) + 2}}" for c in cols))
    for label, row in hist.items():
        lines.append("  " + label.ljust(width) + "".join(f"{row[c]:>{len(c) + 2}}" for c in cols))
    return "\n".join(lines)


def _brief(message: str) -> list[str]:
    """A failure's first line and, from its traceback, the frame that raised (where to look)."""
    lines = message.strip().splitlines()
    if not lines:
        return []
    frames = [i for i, line in enumerate(lines) if line.lstrip().startswith("File ")
              and "catalogue/_common.py" not in line]  # skip the check helper: show its caller
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
                                             message=o.message[:2000], trace=o.trace)
                                        for o in r.outcomes])
                         for r in reports])


# --- the catalogue's kill matrix -----------------------------------------------------------------

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


def entry_configs(entry: catalogue.Entry, modes: Sequence[str]) -> list[tuple[int, int, int, str]]:
    """The sweep of a catalogue entry: its own mode for a bug, ``modes`` for a correct one."""
    return configs(entry.nranks, entry.blocks, entry.sizes, (entry.mode,) if entry.bug else modes)


def kill_matrix(budget_s: float = 60.0, max_runs: int | None = None, seed: int = 0,
                settings: Settings | None = None, names: Sequence[str] | None = None,
                correct: bool = True, progress: bool = False) -> tuple[list[Kill], list[Report]]:
    """Run every bug until caught (within ``budget_s`` / ``max_runs`` each), then each correct
    program for the full budget. Returns the kill rows and the correct programs' reports."""
    settings = settings or Settings()
    hazard = hazard_available()
    modes = ("eager", "hazard") if hazard else ("eager",)
    kills = []
    for entry in catalogue.BUGS:
        if names and entry.name not in names:
            continue
        if entry.mode == "hazard" and not hazard:
            kills.append(Kill(entry, None, "needs mode=hazard (shmcomm.race) in this build"))
            continue
        rep = sweep(entry.host, entry_configs(entry, modes), seed=seed, runs=max_runs,
                    seconds=budget_s, settings=settings, stop_at_first=True, program=entry.name,
                    progress=progress)
        kills.append(Kill(entry, rep))
    reports = []
    if correct:
        for entry in catalogue.CORRECT:
            if names and entry.name not in names:
                continue
            reports.append(sweep(entry.host, entry_configs(entry, modes), seed=seed, runs=max_runs,
                                 seconds=budget_s, settings=settings, program=entry.name,
                                 progress=progress))
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
            rows.append((k.entry.name, k.entry.mode, "NO", k.note or "-", runs, secs, "-",
                         k.entry.summary))
        else:
            idx, secs = k.to_catch()  # type: ignore[misc]
            rows.append((k.entry.name, k.entry.mode, "yes", c.kind, str(idx), f"{secs:.2f}",
                         str(c.spec.seed), k.entry.summary))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    caught = sum(1 for k in kills if k.catch is not None)
    lines = [f"shmcomm stress --catalogue: kill matrix (load {load})"]
    for r in rows:
        src = r[-1] if len(r[-1]) <= 70 else r[-1][:67] + "..."
        lines.append("  " + "  ".join(c.ljust(w) for c, w in zip(r[:-1], widths, strict=True))
                     + "  " + src)
    lines.append(f"caught {caught} of {len(kills)} bugs; each catch reruns with:")
    for k in kills:
        if k.catch is not None:
            lines.append(f"  {repro_command(k.entry.name, k.catch.spec, settings)}")
    if reports:
        total = sum(len(r.outcomes) for r in reports)
        alarms = sum(len(r.failures) for r in reports)
        secs = sum(r.seconds for r in reports)
        lines.append(f"correct programs: {total} runs in {secs:.1f} s, {alarms} alarms")
        for r in reports:
            c = r.counts()
            lines.append(f"  {r.program:<16} {len(r.outcomes):>6} runs  {len(r.failures)} alarms"
                         + ("" if not r.failures else "  (" + ", ".join(
                             f"{k} {v}" for k, v in c.items() if v) + ")"))
            if r.failures:
                lines.append(f"    reproduce: {repro_command(r.program, r.failures[0].spec, settings)}")
    return "\n".join(lines)


# --- command line --------------------------------------------------------------------------------

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
    bad = [v for v in values if v not in ("eager", "hazard")]
    if bad or not values:
        raise argparse.ArgumentTypeError(f"modes must be eager and/or hazard, got {text!r}")
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
    p.add_argument("--mode", type=_mode_list, default=None, help="eager, hazard or eager,hazard")
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
    settings = Settings(ns.wait_timeout, ns.deadlock_grace, ns.run_timeout, ns.trace_dir)
    progress = not ns.no_progress
    try:
        if ns.catalogue:
            names = [n.strip() for n in ns.only.split(",")] if ns.only else None
            unknown = [n for n in names or () if n not in catalogue.ENTRIES]
            if unknown:
                parser.error(f"--only: unknown entries {', '.join(unknown)}")
            budget = 60.0 if ns.seconds is None else ns.seconds
            kills, reports = kill_matrix(budget, ns.runs, ns.seed, settings, names,
                                         progress=progress)
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
        hazard = hazard_available()
        default_modes = ("eager", "hazard") if hazard else ("eager",)
        if entry is not None and entry.bug:
            default_modes = (entry.mode,)
        modes = ns.mode or default_modes
        if "hazard" in modes and not hazard:
            raise ArgumentError("--mode hazard: this build has no hazard engine (shmcomm.race)")
        cfgs = configs(ns.nranks or (entry.nranks if entry else DEFAULT_NRANKS),
                       ns.blocks or (entry.blocks if entry else DEFAULT_BLOCKS),
                       ns.size or (entry.sizes if entry else DEFAULT_SIZES), modes)
        runs = ns.runs if ns.runs is not None or ns.seconds is not None else 100
        rep = sweep(host, cfgs, seed=ns.seed, runs=runs, seconds=ns.seconds, settings=settings,
                    program=ns.program, progress=progress)
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


def _write_json(path: str, doc: dict) -> None:
    d = os.path.dirname(path)
    if d:
        os.makedirs(d, exist_ok=True)
    with open(path, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    sys.exit(main())
