"""The sweep: run a program over seeds and configurations and classify each outcome.

A program is a host function ``host(rt)`` or ``host(rt, size)`` that raises when its result is
wrong: a catalogue entry (:mod:`shmcomm.stress.catalogue`) or a user's ``pkg.mod:host``. Run
``i`` takes configuration ``i mod len(configs)`` and seed ``seed + i``; each outcome is
classified by exception type.

Outcome kinds: ``ok``; ``wrong result`` (the program's own check: ``AssertionError`` or
``ValueError``); ``deadlock`` (the deadlock detector, a ``WaitTimeout``, the run timeout);
``crash`` (a rank process died); ``checker`` (a hazard-mode checker from :mod:`shmcomm.exec.hazard`,
or the runtime's own pipe checks); ``race`` (the race detector, with ``--detect-races``); ``error``
(anything else, e.g. a bad argument: never a catch).
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import itertools
import os
import pickle
import re
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..config import BY_NAME, MODES, sweep_defaults
from ..errors import ArgumentError, RunError
from ..exec.hazard import HazardReport
from ..launch.pool import Pool
from ..launch.supervisor import run
from . import catalogue

KINDS = ("wrong result", "deadlock", "crash", "checker", "race", "error")
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
        size = f" size={self.size}" if self.size else ""  # 0: the host takes no size
        return f"nranks={self.nranks} blocks={self.blocks}{size} mode={self.mode}"


@dataclass
class Outcome:
    """What one run gave: ``kind`` is ``"ok"`` or one of :data:`KINDS`."""

    spec: RunSpec
    kind: str
    seconds: float
    message: str = ""
    trace: str | None = None
    value: str | None = None  # what the program returned (repr of the per-rank results), if ok
    schedule: str | None = None  # schedule mode: the failing run's schedule file (--replay)
    shrunk: tuple[int, int] | None = None  # preemptions of the schedule before and after shrinking
    shrink_note: str = ""  # why shrinking stopped early (its budget), if it did
    advice: list[str] = field(default_factory=list)  # advisory checkers' likely causes (a failure)
    timed_out: bool = False  # a "deadlock" that was the run timeout, not the detector's finding

    @property
    def cause(self) -> str:
        """The failure's cause in the words a test names it: ``race``, ``deadlock``, ``wrong
        result``, ``timeout``, ``crash``, ``checker``, ``error`` (``ok`` for a passing run)."""
        return "timeout" if self.timed_out else self.kind


def _sweep(name: str) -> Any:
    return BY_NAME[name].sweep_default


# settings of the table that a sweep's runs take from Settings (the axes come from the RunSpec)
RUN_SETTINGS = tuple(n for n in BY_NAME if n not in ("nranks", "blocks", "mode", "seed", "trace",
                                                    "record"))


@dataclass
class Settings:
    """The per-run settings every run of a sweep gets; defaults from the settings table's sweep
    column (:data:`shmcomm.config.SETTINGS`).

    A hang is found by the deadlock detector after ``deadlock_grace`` (short, so a hang costs
    little); ``wait_timeout`` is only the backstop for hangs it cannot see, and generous because
    on a 2-core box shared with other work a healthy wait can starve for seconds (a 1 s
    ``wait_timeout`` raised false alarms at load 50). ``run_timeout`` is the table's ``timeout``.
    ``trace_dir``: trace every run there and keep the failing runs' traces ("" = no tracing:
    a trace slows a run and shifts the timing a race depends on). ``schedule_dir``: where a
    failing schedule-mode run's schedule is kept (``None``: a temporary directory made at the
    first failure; "" = keep none). ``other``: any further setting of the table, by name.
    """

    wait_timeout: float = _sweep("wait_timeout")
    deadlock_grace: float = _sweep("deadlock_grace")
    run_timeout: float = _sweep("timeout")
    trace_dir: str = ""
    strategy: str = _sweep("strategy")  # schedule mode's strategy
    hazards: str = _sweep("hazards")  # hazard and schedule modes' sub-models
    replay: str = ""  # schedule mode: run this schedule file
    schedule_dir: str | None = None
    shrink_tries: int = 10  # runs spent shrinking a sweep's first failing schedule (0: none)
    shrink_seconds: float = 20.0  # ... and at most this long (a hang's replays are slow)
    # the race detector beside the mode (a race: kind "race"); None: on in hazard and schedule
    detect_races: bool | None = _sweep("detect_races")
    race_exitfirst: bool = _sweep("race_exitfirst")
    transport: str = _sweep("transport")  # mpi: every process of an mpiexec job runs the sweep
    other: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def resolve(cls, values: dict[str, Any] | None = None, env: Any = None, **fields: Any
                ) -> Settings:
        """Settings from the table's sweep defaults, ``SHMCOMM_*`` variables over them, then
        ``values`` (settings by their table names, ``None`` = not given) over those; ``fields``
        are Settings' own (``trace_dir``, ``schedule_dir``, ...)."""
        merged = sweep_defaults(env, RUN_SETTINGS)
        merged.update({k: v for k, v in (values or {}).items() if v is not None})
        unknown = sorted(set(merged) - set(RUN_SETTINGS))
        if unknown:
            raise ArgumentError(f"not a per-run setting of a sweep: {', '.join(unknown)}")
        for name, value in merged.items():
            BY_NAME[name].validate(value, name)
        own = {f.name for f in dataclasses.fields(cls)}
        named = {("run_timeout" if k == "timeout" else k): v for k, v in merged.items()}
        other = {k: v for k, v in named.items() if k not in own}
        return cls(**{k: v for k, v in named.items() if k in own}, other=other, **fields)

    def values(self, mode: str | None = None) -> dict[str, Any]:
        """Every per-run setting by its table name (those ``mode`` reads, when given)."""
        out = dict(self.other, wait_timeout=self.wait_timeout, deadlock_grace=self.deadlock_grace,
                   timeout=self.run_timeout, strategy=self.strategy, hazards=self.hazards,
                   replay=self.replay, detect_races=self.detect_races,
                   race_exitfirst=self.race_exitfirst, transport=self.transport)
        if mode is not None:
            out = {k: v for k, v in out.items() if mode in BY_NAME[k].modes}
            if not out.get("replay"):
                out.pop("replay", None)
        return out

    def config(self) -> dict[str, Any]:
        """The settings every mode reads."""
        return {k: v for k, v in self.values().items() if BY_NAME[k].modes == MODES}

    def mode_config(self, mode: str) -> dict[str, Any]:
        """The settings only ``mode`` takes."""
        return {k: v for k, v in self.values(mode).items() if BY_NAME[k].modes != MODES}

    def keep_dir(self) -> str:
        """The directory failing schedules go to (made on first use)."""
        if self.schedule_dir is None:
            self.schedule_dir = tempfile.mkdtemp(prefix="shmcomm-stress-")
        return self.schedule_dir


@dataclass
class Report:
    """All outcomes of one sweep of one program."""

    program: str
    outcomes: list[Outcome] = field(default_factory=list)
    seconds: float = 0.0
    kwargs: dict[str, Any] = field(default_factory=dict)  # the host's --arg values
    sized: bool | None = None  # does the host take the size (None: not known)

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
                            "nor pkg.module:host or path/to/file.py:host")
    from ..launch.options import load_program

    return load_program(spec)


def host_call(host: Callable[..., Any], size: int,
              kwargs: dict[str, Any] | None = None) -> tuple[Callable[..., Any], tuple]:
    """``(host, args)`` that ``run`` calls as ``host(rt, *args)``: ``size`` goes to a host that
    takes it (a ``size`` parameter, ``**kwargs``, or a second positional parameter without a
    default), and ``kwargs`` (the ``--arg`` values) always."""
    kwargs = dict(kwargs or {})
    args: tuple = ()
    try:
        params = list(inspect.signature(host).parameters.values())
    except (TypeError, ValueError):
        params = []
    names = {p.name for p in params}
    if "size" in names or any(p.kind == p.VAR_KEYWORD for p in params):
        kwargs.setdefault("size", size)
    else:  # the older form host(rt, n): a second positional parameter without a default
        pos = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        if len(pos) >= 2 and pos[1].default is pos[1].empty and pos[1].name not in kwargs:
            args = (size,)
    return (functools.partial(host, **kwargs) if kwargs else host), args


def check_host_args(host: Callable[..., Any], kwargs: dict[str, Any], program: str = "",
                    given: str = "--arg") -> None:
    """Raise :class:`ArgumentError` unless ``host(rt, **kwargs)`` (plus the sweep's size) binds
    to the host's signature: a wrong or missing ``--arg`` is one usage error, not a traceback
    from every run. ``given``: how the user gave the host's keywords (an option, a call)."""
    try:
        sig = inspect.signature(host)
    except (TypeError, ValueError):
        return
    call, args = host_call(host, 0, kwargs)
    final = dict(call.keywords) if isinstance(call, functools.partial) else {}
    try:
        sig.bind(None, *args, **final)
    except TypeError as exc:
        takes = [p for p in list(sig.parameters)[1:]]
        raise ArgumentError(f"{given}: {program or host.__name__}{sig} cannot be called with "
                            f"{', '.join(f'{k}=' for k in kwargs) or f'no {given}'}: {exc} "
                            f"(its parameters after rt: {', '.join(takes) or 'none'})") from None


def _with_size(host: Callable[..., Any]) -> bool:
    """The older name of :func:`takes_size`."""
    return takes_size(host)


def takes_size(host: Callable[..., Any], kwargs: Mapping[str, Any] | None = None) -> bool:
    """Does ``host`` receive the sweep's size, when it is also given ``kwargs`` (a keyword that
    fills its second positional parameter leaves no place for the size)?"""
    call, args = host_call(host, 0, dict(kwargs or {}))
    return bool(args) or (isinstance(call, functools.partial) and "size" in call.keywords)


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
    if first.kind == "race":
        return "race", text
    if first.kind == "interrupt":  # the CLI exits 128 + the signal, after the partial summary
        stop = KeyboardInterrupt()
        stop.signum = getattr(exc, "signum", None)  # type: ignore[attr-defined]
        raise stop
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
    """Where a run writes its trace (when this build's Config has ``trace``)."""
    if not settings.trace_dir or "trace" not in BY_NAME:
        return None
    return os.path.abspath(os.path.join(settings.trace_dir, trace_name(program, spec)))


def trace_name(program: str, spec: RunSpec, suffix: str = "") -> str:
    """The file name of a run's trace: program, shape, size and seed."""
    name = re.sub(r"[^\w.-]+", "_", program or "program").strip("_")
    return f"{name}-{spec.nranks}x{spec.blocks}-n{spec.size}-seed{spec.seed}{suffix}.json"


class Pools:
    """One :class:`~shmcomm.launch.pool.Pool` per rank count, kept for a whole sweep: runs reuse
    the rank processes instead of forking them (a failed run replaces its pool)."""

    def __init__(self) -> None:
        self.pools: dict[int, Pool] = {}

    def runner(self, host: Callable[..., Any], nranks: int) -> Callable[..., list[Any]]:
        try:
            pickle.dumps(host)
        except Exception:  # a local function cannot cross the pool's pipe: fork per run
            return functools.partial(run, host, nranks=nranks)
        pool = self.pools.get(nranks)
        if pool is None:
            pool = self.pools[nranks] = Pool(nranks)
        return functools.partial(pool.run, host)

    def close(self) -> None:
        for p in self.pools.values():
            p.close()
        self.pools = {}


def run_one(host: Callable[..., Any], spec: RunSpec, settings: Settings,
            program: str = "", pools: Pools | None = None, shrink_first: bool = False,
            kwargs: dict[str, Any] | None = None) -> Outcome:
    """Run ``host`` once under ``spec``; never raises for a failing run (only for Ctrl-C).

    ``kwargs`` go to the host as keyword arguments (the command lines' ``--arg``). A run writes a
    trace file when ``settings.trace_dir`` is set; it is deleted when the run passes and kept (its
    path in ``Outcome.trace``) when it fails. ``pools``: run on persistent rank processes.
    ``shrink_first``: a failing schedule-mode run's schedule is shrunk to fewer preemptions
    (``settings.shrink_tries`` more runs) before it is kept.
    """
    host, args = host_call(host, spec.size, kwargs)
    extra: dict[str, Any] = {}
    trace = _trace_path(program, spec, settings)
    if trace is not None:
        os.makedirs(os.path.dirname(trace), exist_ok=True)
        extra["trace"] = trace
    extra.update(settings.mode_config(spec.mode))
    t0 = time.perf_counter()
    try:
        call = (functools.partial(run, host, nranks=spec.nranks) if pools is None
                else pools.runner(host, spec.nranks))
        call = functools.partial(call, blocks=spec.blocks, seed=spec.seed, mode=spec.mode,
                                 args=args, **settings.config())
        results = call(**extra)
    except RunError as exc:
        kind, message = classify(exc)
        kept = trace if trace and os.path.isfile(trace) else _trace_of(str(exc))
        out = Outcome(spec, kind, time.perf_counter() - t0, message, kept,
                      advice=list(getattr(exc, "advice", [])),
                      timed_out=bool(exc.failures) and exc.failures[0].kind == "timeout")
        out.schedule = settings.replay or _keep_schedule(exc, program, spec, settings)
        if out.schedule and settings.shrink_tries and shrink_first and not settings.replay:
            try:
                _shrink_outcome(out, exc, call, args, extra, settings)
            except KeyboardInterrupt as stop:  # the failure is found: the summary must show it
                out.shrink_note = ("shrink interrupted; the schedule is kept as found"
                                   if not out.shrunk else out.shrink_note)
                stop.outcome = out  # type: ignore[attr-defined]
                raise
        return out
    except ArgumentError as exc:
        return Outcome(spec, "error", time.perf_counter() - t0, f"ArgumentError: {exc}")
    if trace is not None and os.path.isfile(trace):
        os.unlink(trace)
    return Outcome(spec, "ok", time.perf_counter() - t0, value=value_of(results))


def _shrink_outcome(out: Outcome, exc: RunError, call: Callable[..., Any], args: tuple,
                    extra: dict[str, Any], settings: Settings) -> None:
    """Replace a failing run's kept schedule by a shrunk one with fewer preemptions, if found."""
    from .shrink import shrink, signature

    schedule = exc.schedule  # type: ignore[attr-defined]
    opts = {k: v for k, v in extra.items() if k not in ("replay", "trace", "strategy")}
    notes: list[str] = []
    smaller = shrink(functools.partial(call, **opts), schedule, signature(out.kind, out.message),
                     classify, settings.shrink_tries, settings.shrink_seconds, out.seconds, notes)
    out.shrink_note = "; ".join(notes)
    if smaller is not None and out.schedule:
        smaller.save(out.schedule)
        out.shrunk = (schedule.preemptions, smaller.preemptions)


def value_of(results: Sequence[Any]) -> str | None:
    """The outcome value of a passing run for the histogram: the ranks' results, or ``None``
    when every rank returned ``None``."""
    if all(r is None for r in results):
        return None
    text = repr(results[0]) if all(r == results[0] for r in results) else repr(list(results))
    return text if len(text) <= 80 else text[:77] + "..."


def _keep_schedule(exc: RunError, program: str, spec: RunSpec, settings: Settings) -> str | None:
    """Write a failing schedule-mode run's schedule where ``--replay`` can take it."""
    schedule = getattr(exc, "schedule", None)
    if schedule is None or settings.schedule_dir == "":
        return None
    name = re.sub(r"[^\w.-]+", "_", program or "program")
    path = os.path.abspath(os.path.join(
        settings.keep_dir(), f"{name}-{spec.nranks}x{spec.blocks}-n{spec.size}-seed{spec.seed}.json"))
    try:
        schedule.save(path, "kept schedule")
    except (OSError, ArgumentError):
        return None
    return path


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
          stop_at_first: bool = False, program: str = "", progress: bool = False,
          pool: bool = True, kwargs: dict[str, Any] | None = None) -> Report:
    """Run ``host`` over ``cfgs`` for ``runs`` runs or ``seconds`` (whichever ends first);
    ``pool``: on persistent rank processes (one pool per rank count) rather than a fork per run;
    ``kwargs`` go to every run's host (see :func:`run_one`)."""
    if runs is None and seconds is None:
        runs = len(cfgs)
    settings = settings or Settings()
    report = Report(program, kwargs=dict(kwargs or {}), sized=takes_size(host, kwargs))
    bar = _progress(program, runs, progress)
    pools = Pools() if pool else None
    t0 = time.perf_counter()
    try:
        for i, spec in enumerate(specs(cfgs, seed)):
            if runs is not None and i >= runs:
                break
            if seconds is not None and time.perf_counter() - t0 >= seconds:
                break
            out = run_one(host, spec, settings, program, pools,
                          shrink_first=not report.failures, kwargs=kwargs)
            report.outcomes.append(out)
            if bar is not None:
                bar.update(1)
                bar.set_postfix(failures=len(report.failures), refresh=False)
            if stop_at_first and out.kind in CATCH_KINDS:
                break
    except KeyboardInterrupt as exc:  # the runs so far still make a summary
        found = getattr(exc, "outcome", None)  # a failure whose shrinking was interrupted
        if found is not None and found not in report.outcomes:
            report.outcomes.append(found)
        exc.report = report  # type: ignore[attr-defined]
        raise
    finally:
        report.seconds = time.perf_counter() - t0
        if pools is not None:
            pools.close()
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


