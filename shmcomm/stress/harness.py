"""The sweep: run a program over seeds and configurations and classify each outcome.

A program is a host function ``host(rt)`` or ``host(rt, size)`` that raises when its result is
wrong: a catalogue entry (:mod:`shmcomm.stress.catalogue`) or a user's ``pkg.mod:host``. Run
``i`` takes configuration ``i mod len(configs)`` and seed ``seed + i``; each outcome is
classified by exception type.

Outcome kinds: ``ok``; ``wrong result`` (the program's own check: ``AssertionError`` or
``ValueError``); ``deadlock`` (the deadlock detector, a ``WaitTimeout``, the run timeout);
``crash`` (a rank process died); ``checker`` (a hazard-mode checker from :mod:`shmcomm.exec.hazard`,
or the runtime's own pipe checks); ``error`` (anything else, e.g. a bad argument: never a catch).
"""

from __future__ import annotations

import dataclasses
import inspect
import itertools
import os
import re
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..config import Config
from ..errors import ArgumentError, RunError
from ..exec.hazard import HazardReport
from ..launch.supervisor import run
from . import catalogue

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
    transport: str = "shm"  # mpi: every process of an mpiexec job runs the same sweep

    def config(self) -> dict[str, float | str]:
        return dict(wait_timeout=self.wait_timeout, deadlock_grace=self.deadlock_grace,
                    timeout=self.run_timeout, transport=self.transport)


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

def resolve_program(spec: str) -> Callable[..., Any]:
    """A catalogue entry's host by name, or ``pkg.mod:function`` imported."""
    entry = catalogue.get(spec)
    if entry is not None:
        return entry.host
    if ":" not in spec:
        names = ", ".join(catalogue.ENTRIES)
        raise ArgumentError(f"--program: {spec!r} is neither a catalogue program ({names}) "
                            "nor pkg.module:function")
    from ..launch.cli import load_program

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

_TRACE_RE = re.compile(r"(/[\w./+-]*trace[\w./+-]*)")


def classify(exc: BaseException) -> tuple[str, str]:
    """``(kind, message)`` of a failed run, by the root cause's exception type."""
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
    if name in (HazardReport.__name__, "ShmcommError"):
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


