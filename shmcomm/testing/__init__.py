"""Helpers for testing kernels with pytest (or any test runner).

:func:`check` runs a host program over rank counts, block counts, modes, sizes and seeds (the
stress harness's sweep) and raises :class:`SweepFailed` with the harness's report, which names
the first failure, where it was raised, and the commands that rerun it under ``stress`` and
``launch``.

Under pytest (the plugin :mod:`shmcomm.testing.plugin`, registered as ``shmcomm``) a test marked
with :func:`sweep` becomes one test item per configuration and seed range, each with a readable
id (``hazard-n2-b1-s64``), so ``-k`` picks configurations and pytest-xdist splits
them; the fixture ``shmcomm_sweep`` runs the item's runs.

Where a sweep's settings come from, last one wins: the settings table's sweep defaults
(:data:`shmcomm.config.SETTINGS`), the ``shmcomm_*`` ini keys, the test's own values (marker or
call), the ``SHMCOMM_*`` environment variables, the ``--shmcomm-*`` command-line options.
"""

from __future__ import annotations

import dataclasses
import inspect
import itertools
import os
import time
import warnings
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ..config import BY_NAME, MODES, from_env
from ..errors import ArgumentError
from ..exec.compose import reads
from ..launch.traceplot import plot_beside
from ..stress.harness import (
    RUN_SETTINGS,
    Outcome,
    Pools,
    Report,
    RunSpec,
    Settings,
    check_host_args,
    configs,
    run_one,
    specs,
    takes_size,
)
from ..stress.report import format_report
from .expect import CAUSES, Expect, check_expect, unmet

__all__ = ["CAUSES", "Case", "SweepFailed", "check", "plan", "program_spec", "run_case", "sweep"]

DEFAULT_NRANKS = (2, 4)
DEFAULT_BLOCKS = (1, 2)
DEFAULT_MODES = ("eager", "hazard")
DEFAULT_SIZE = 64
DEFAULT_SEEDS = 2
# environment variables a sweep cannot honour: every run would write the one path they name
REFUSED_ENV = ("SHMCOMM_TRACE", "SHMCOMM_RECORD")
AXIS_KEYS = ("nranks", "blocks", "modes", "mode", "sizes", "seeds", "seed", "chunk")
# ``mode="hazard"`` reads as the run setting it names elsewhere: the one-mode ``modes`` axis
AXIS_ALIASES = {"mode": "modes"}
# what a sweep hands its host: every keyword that is neither an axis nor a run setting
HOST_KEYWORDS = "host keywords (neither a sweep axis nor a setting)"
# an axis's pytest option / ini name where it differs from the axis: the settings table's and
# the other commands' words (``--mode`` as in launch and stress; ``runs`` as stress's count)
OPTION_NAMES = {"modes": "mode", "seeds": "runs"}
# keywords of a sweep that are neither an axis nor a setting of the table nor the host's
SWEEP_OPTIONS = ("expect", "trace_dir", "stop_at_first")
# older spellings, still taken with a DeprecationWarning: old -> the one name
DEPRECATED_KEYWORDS = {"run_timeout": "timeout"}


def split_options(options: Mapping[str, Any], stacklevel: int = 3
                  ) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any], dict[str, Any]]:
    """The one set of keywords the fixture, the marker and :func:`check` take, split into
    ``(axes, settings, sweep options, host keywords)``: axes (:data:`AXIS_KEYS`), the settings
    table's per-run settings by their table names (``timeout``, ``wait_timeout``, ...),
    :data:`SWEEP_OPTIONS`, and every other keyword for the host."""
    axes: dict[str, Any] = {}
    own: dict[str, Any] = {}
    extra: dict[str, Any] = {}
    kwargs: dict[str, Any] = {}
    for key, value in options.items():
        if key in DEPRECATED_KEYWORDS:
            new = DEPRECATED_KEYWORDS[key]
            warnings.warn(f"the sweep keyword {key}= is deprecated; use {new}=",
                          DeprecationWarning, stacklevel=stacklevel)
            if new in options:
                raise ArgumentError(f"give {new} or {key}, not both")
            key = new
        if key in AXIS_KEYS:
            axes[key] = value
        elif key in RUN_SETTINGS:
            own[key] = value
        elif key in SWEEP_OPTIONS:
            extra[key] = value
        else:
            kwargs[key] = value
    return axes, own, extra, kwargs


class SweepFailed(AssertionError):
    """A run of the sweep failed; ``report`` holds every outcome, ``str()`` the printed report,
    whose first line is the cause."""

    def __init__(self, text: str, report: Report) -> None:
        super().__init__(text)
        self.report = report


def program_spec(host: Callable[..., Any]) -> str:
    """How the command lines name ``host``: ``path/to/file.py:host`` (relative to the working
    directory when inside it) for a user's file, ``pkg.module:host`` for shmcomm's own."""
    name = getattr(host, "__qualname__", "")
    module = getattr(host, "__module__", "") or ""
    if not name.isidentifier():
        raise ArgumentError(f"host must be a module-level function (the repro command imports it), "
                            f"got {name or host!r}")
    if module.startswith("shmcomm."):
        return f"{module}:{name}"
    try:
        path = inspect.getsourcefile(host)
    except TypeError:
        path = None
    if not path:
        return f"{module}:{name}"
    rel = os.path.relpath(path)
    return f"{rel if not rel.startswith('..') else path}:{name}"


def refuse_env(env: Mapping[str, str] | None = None) -> None:
    """Raise for ``SHMCOMM_*`` variables a sweep cannot honour (rather than ignore them)."""
    env = os.environ if env is None else env
    for var in REFUSED_ENV:
        if env.get(var):
            raise ArgumentError(f"{var}={env[var]} names one file for every run of a sweep; "
                                "unset it (under pytest: --shmcomm-trace keeps the traces of the "
                                "failing runs; stress: --trace-dir)")


def _ints(name: str, values: Any, low: int = 1) -> tuple[int, ...]:
    out = (values,) if isinstance(values, int) else tuple(values)
    if not out or any(isinstance(v, bool) or not isinstance(v, int) for v in out):
        raise ArgumentError(f"{name} must be an int or a non-empty list of ints, got {values!r}")
    for v in out:
        if name in BY_NAME:
            BY_NAME[name].validate(v, name)
        elif v < low:
            raise ArgumentError(f"{name} must be ints >= {low}, got {values!r}")
    return out


def _modes(values: Any) -> tuple[str, ...]:
    out = (values,) if isinstance(values, str) else tuple(values)
    out = tuple(m.strip() for v in out for m in str(v).split(","))
    bad = [m for m in out if m not in MODES]
    if bad or not out:
        raise ArgumentError(f"modes must be a non-empty list of {', '.join(MODES)}, got {values!r}")
    return out


@dataclass(frozen=True)
class Case:
    """One test item of a sweep: one configuration and a range of seeds."""

    nranks: int
    blocks: int
    size: int  # 0: the host takes no size
    mode: str
    seed: int  # the first seed
    count: int  # seeds seed .. seed + count - 1

    whole: bool = True  # the item runs all of the configuration's seeds

    @property
    def id(self) -> str:
        """The pytest id, short so the cause still fits a CI terminal's line: ``hazard-n2-b1-s64``
        (``-k hazard-n2`` selects it). It names no seed count, so ``--lf`` finds the item again
        when only ``--shmcomm-runs`` changed; an item of a chunked sweep adds its first seed
        (``hazard-n2-b1-s64-seed4``)."""
        size = f"-s{self.size}" if self.size else ""
        seeds = "" if self.whole else f"-seed{self.seed}"
        return f"{self.mode}-n{self.nranks}-b{self.blocks}{size}{seeds}"

    def specs(self) -> list[RunSpec]:
        return [RunSpec(self.nranks, self.blocks, self.size, self.mode, s)
                for s in range(self.seed, self.seed + self.count)]


def plan(axes: Mapping[str, Any], host: Callable[..., Any] | None = None,
         env: Mapping[str, str] | None = None, overrides: Mapping[str, Any] | None = None,
         kwargs: Mapping[str, Any] | None = None) -> tuple[list[Case], list[str]]:
    """The cases of a sweep and notes on what replaced the test's own axes.

    ``axes``: the test's ``nranks``, ``blocks``, ``modes`` (or one ``mode``), ``sizes``, ``seeds`` (runs per
    configuration), ``seed`` (the first) and ``chunk`` (seeds per item; default all); ``None``
    or missing = the default. ``SHMCOMM_NRANKS`` / ``_BLOCKS`` / ``_MODE`` / ``_SEED`` and then
    ``overrides`` (the command line's) replace them. ``kwargs``: the host's own keywords (one
    may take the place a size would have).
    """
    unknown = sorted(set(axes) - set(AXIS_KEYS))
    if unknown:
        raise ArgumentError(f"unknown sweep axes {', '.join(unknown)}; known: "
                            f"{', '.join(AXIS_KEYS)}")
    values = {k: v for k, v in axes.items() if v is not None}
    for alias, key in AXIS_ALIASES.items():
        if alias in values:
            if key in values:
                raise ArgumentError(f"give {key} or {alias}, not both (got {key}="
                                    f"{values[key]!r} and {alias}={values[alias]!r})")
            values[key] = values.pop(alias)
    notes: list[str] = []
    for name, value in from_env(env, ("nranks", "blocks", "mode", "seed")).items():
        key = "modes" if name == "mode" else name
        var = BY_NAME[name].env
        notes.append(f"{var}={value} replaces {key} {values.get(key, 'default')!r}")
        values[key] = value
    for key, value in (overrides or {}).items():
        if value is not None:
            flag = f"--shmcomm-{OPTION_NAMES.get(key, key)}"
            notes.append(f"{flag}={value} replaces {key} {values.get(key, 'default')!r}")
            values[key] = value
    nranks = _ints("nranks", values.get("nranks", DEFAULT_NRANKS))
    blocks = _ints("blocks", values.get("blocks", DEFAULT_BLOCKS))
    modes = _modes(values.get("modes", DEFAULT_MODES))
    seeds = _ints("seeds", values.get("seeds", DEFAULT_SEEDS))
    seed = _ints("seed", values.get("seed", 0))
    if len(seeds) != 1 or len(seed) != 1:
        raise ArgumentError("seeds (runs per configuration) and seed (the first) are single ints")
    chunk = _ints("chunk", values.get("chunk", seeds[0]))[0]
    takes = host is not None and takes_size(host, kwargs)
    sized = values.get("sizes") is not None or takes
    if values.get("sizes") is not None and host is not None and not takes:
        raise ArgumentError("sizes has no effect: the host takes no size parameter")
    sizes = _ints("sizes", values.get("sizes", DEFAULT_SIZE)) if sized else (0,)
    cases = []
    for n, b, s, m in configs(nranks, blocks, sizes, modes):
        for first in range(seed[0], seed[0] + seeds[0], chunk):
            cases.append(Case(n, b, s, m, first, min(chunk, seed[0] + seeds[0] - first),
                              whole=chunk >= seeds[0]))
    return cases, notes


def run_settings(own: Mapping[str, Any], *, ini: Mapping[str, Any] | None = None,
                 cli: Mapping[str, Any] | None = None, env: Mapping[str, str] | None = None,
                 **fields: Any) -> Settings:
    """The per-run settings of a sweep: sweep defaults < ``ini`` < the test's ``own`` <
    ``SHMCOMM_*`` < ``cli``; ``fields`` are :class:`Settings`' own (trace_dir, ...)."""
    refuse_env(env)
    values: dict[str, Any] = {}
    for layer in (ini or {}, own, from_env(env, RUN_SETTINGS), cli or {}):
        values.update({k: v for k, v in layer.items() if v is not None})
    if "run_timeout" in values:
        values["timeout"] = values.pop("run_timeout")
    return Settings.resolve(values, env={}, **fields)


def cause(outcome: Outcome) -> str:
    """A failure's one-line cause, the first line of the test's failure (pytest's summary)."""
    first = next((line.strip() for line in outcome.message.splitlines() if line.strip()), "")
    spec = outcome.spec
    return f"{outcome.cause}: {first} [{spec.label()} seed={spec.seed}]"


def failure_text(report: Report, settings: Settings, notes: Iterable[str] = ()) -> str:
    """A failed sweep's text: the cause (one line), notes, the report, then the first failure's
    whole message (a hang's wait-for table and every rank's stack, a traceback)."""
    first = report.failures[0]
    lines = [cause(first), *(f"note: {n}" for n in notes), format_report(report, settings)]
    full = first.message.strip().splitlines()
    if len(full) > 2:
        cut = full[:FULL_LINES] + ([f"... ({len(full) - FULL_LINES} more lines)"]
                                   if len(full) > FULL_LINES else [])
        lines += ["the first failure in full:", *("  " + x for x in cut)]
    return "\n".join(lines)


FULL_LINES = 200


def run_case(host: Callable[..., Any], case: Case, settings: Settings, *, program: str = "",
             kwargs: Mapping[str, Any] | None = None, stop_at_first: bool = False,
             deadline: float | None = None, notes: Iterable[str] = (),
             expect: Expect = None) -> Report:
    """Run the case's seeds; raise :class:`SweepFailed` (first line: the cause) if any failed.

    ``deadline`` (``time.monotonic()``): the time the test itself is given (pytest-timeout);
    each run's timeout is cut to end before it, so a hang is reported by shmcomm, with every
    rank's stack, rather than killed from outside. ``expect``: see :func:`check`.
    """
    return run_specs(host, case.specs(), settings, program=program, kwargs=kwargs,
                     stop_at_first=stop_at_first, deadline=deadline, notes=notes,
                     sized=bool(case.size), expect=expect)


def run_specs(host: Callable[..., Any], runs: Iterable[RunSpec], settings: Settings, *,
              program: str = "", kwargs: Mapping[str, Any] | None = None,
              stop_at_first: bool = False, deadline: float | None = None,
              notes: Iterable[str] = (), sized: bool = False, pool: bool = False,
              expect: Expect = None) -> Report:
    """Run ``runs`` in order (see :func:`run_case`); ``pool``: on persistent rank processes
    (faster; but a hang's report then has no stacks of the ranks)."""
    kwargs = dict(kwargs or {})
    expect = check_expect(expect)
    if expect is not None:  # every configuration must be seen to fail; no time on shrinking
        stop_at_first = False
        settings = dataclasses.replace(settings, shrink_tries=0)
    check_host_args(host, kwargs, program, HOST_KEYWORDS)
    runs = list(runs)
    report = Report(program or program_spec(host), kwargs=kwargs, sized=sized)
    pools = Pools() if pool else None
    t0 = time.perf_counter()
    short = None
    try:
        for spec in runs:
            this = settings
            if deadline is not None:
                left = deadline - time.monotonic()
                if left < 1.0:
                    short = (f"the test's timeout leaves no time for seed {spec.seed}: ran "
                             f"{len(report.outcomes)} of {len(runs)} runs")
                    break
                if left < settings.run_timeout:  # to 0.1 s: a report prints no float's noise
                    this = dataclasses.replace(settings, run_timeout=int(left * 10) / 10)
            out = run_one(host, spec, this, report.program, pools,
                          shrink_first=not report.failures, kwargs=kwargs)
            report.outcomes.append(out)
            if stop_at_first and out.kind != "ok":
                break
    finally:
        report.seconds = time.perf_counter() - t0
        if pools is not None:
            pools.close()
    pictures = [p for o in report.failures if o.trace and (p := plot_beside(o.trace))]
    if pictures:  # a failing run's timeline beside its kept trace
        notes = [*notes, f"timeline of the first failing run: {pictures[0]}"]
    if expect is not None and short is None:
        why = unmet(report, expect)
        if why is None:
            return report
        text = why if not report.failures else f"{why}\n{failure_text(report, settings, notes)}"
        raise SweepFailed(text, report)
    if report.failures:
        raise SweepFailed(failure_text(report, settings, notes), report)
    if short is not None:
        raise SweepFailed(f"error: {short}; raise the test's timeout or give fewer seeds",
                          report)
    return report


def check(host: Callable[..., Any], *, nranks: int | Iterable[int] | None = None,
          blocks: int | Iterable[int] | None = None, modes: str | Iterable[str] | None = None,
          sizes: int | Iterable[int] | None = None, seeds: int | None = None,
          seed: int | None = None, expect: Expect = None, trace_dir: str = "",
          stop_at_first: bool = False, env: Mapping[str, str] | None = None,
          **options: Any) -> Report:
    """Run ``host(rt, **kwargs)`` (plus ``size=`` when it takes a ``size``) once for every
    combination of ``nranks`` x ``blocks`` x ``sizes`` x ``modes``, ``seeds`` times with
    different seeds (run ``i`` gets seed ``seed + i``); raise :class:`SweepFailed` with the report
    if any run failed, else return the report.

    The keywords are the fixture's and the marker's: the axes (``mode=`` for one mode,
    ``chunk``), every per-run setting of the settings table by its name (``timeout``,
    ``wait_timeout``, ``deadlock_grace``, ``hazards``, ``detect_races``, ...), ``expect``,
    ``trace_dir``, ``stop_at_first``; any other keyword goes to the host.

    Defaults: nranks 2,4; blocks 1,2; modes eager,hazard; sizes 64 (needs a host with a
    ``size`` parameter); seeds 2; seed 0. ``SHMCOMM_NRANKS`` / ``_BLOCKS`` / ``_MODE`` /
    ``_SEED`` replace the axes; other ``SHMCOMM_*`` settings replace the per-run ones.
    ``expect``: the sweep is a buggy kernel's test; it passes only when every run fails with
    that cause (``"race"``, ``"deadlock"``, ``"wrong-result"``, ``"timeout"``, ``"crash"``,
    ``"checker"``) or when the callable given the :class:`Report` returns true, and raises
    :class:`SweepFailed` (first line ``not caught: ...``) otherwise.
    ``trace_dir``: trace every run and keep the failing runs' traces there ("" = no tracing).
    ``stop_at_first``: stop at the first failing run (pytest's ``-x`` sets it in the fixture).
    The per-run bounds are the stress harness's: a deadlock is reported after
    ``deadlock_grace`` seconds, one ``TWAIT`` gives up after ``wait_timeout``, a run after
    ``timeout`` (``run_timeout``: its older name). ``detect_races``: the race detector (default:
    on in hazard and schedule mode, off in eager mode; ``False`` off, ``True`` on in every mode).
    """
    if seeds is not None and (isinstance(seeds, bool) or not isinstance(seeds, int) or seeds < 1):
        raise ArgumentError(f"seeds must be an int >= 1 (runs per configuration), got {seeds!r}")
    axes, own, extra, kwargs = split_options(options)
    axes.update(nranks=nranks, blocks=blocks, modes=axes.get("modes", modes),
                sizes=sizes, seeds=seeds, seed=seed)
    axes.pop("chunk", None)  # one go: items are the fixture's
    if extra:
        raise ArgumentError(f"{', '.join(extra)} given twice")
    return sweep_all(host, axes, own, env=env, trace_dir=trace_dir, stop_at_first=stop_at_first,
                     kwargs=kwargs, expect=expect)


def sweep_all(host: Callable[..., Any], axes: Mapping[str, Any], own: Mapping[str, Any], *,
              env: Mapping[str, str] | None = None, overrides: Mapping[str, Any] | None = None,
              ini: Mapping[str, Any] | None = None, cli: Mapping[str, Any] | None = None,
              trace_dir: str = "", stop_at_first: bool = False,
              kwargs: Mapping[str, Any] | None = None, pool: bool = True,
              deadline: float | None = None, expect: Expect = None) -> Report:
    """The whole sweep in one go (:func:`check`, and a test calling ``shmcomm_sweep`` without
    the marker): run ``i`` takes configuration ``i mod len(configs)`` and seed ``seed + i``."""
    cases, notes = plan(axes, host, env, overrides, kwargs)
    modes = {c.mode for c in cases}
    if own.get("hazards") is not None and not any(reads(m, "hazards") for m in modes):
        raise ArgumentError("hazards has no effect without hazard or schedule mode in modes")
    settings = run_settings(own, ini=ini, cli=cli, env=env, trace_dir=trace_dir)
    kwargs = dict(kwargs or {})
    check_host_args(host, kwargs, given=HOST_KEYWORDS)
    program = program_spec(host)
    cfgs = list(dict.fromkeys((c.nranks, c.blocks, c.size, c.mode) for c in cases))
    n_seeds = sum(c.count for c in cases) // len(cfgs)
    runs = itertools.islice(specs(cfgs, cases[0].seed), len(cfgs) * n_seeds)
    return run_specs(host, runs, settings, program=program, kwargs=kwargs,
                     stop_at_first=stop_at_first, deadline=deadline, notes=notes,
                     sized=bool(cases[0].size), pool=pool, expect=expect)


def sweep_marker(host: Callable[..., Any] | None = None, **axes_and_options: Any) -> Any:
    """``@shmcomm.testing.sweep(host=None, nranks=..., blocks=..., modes=..., sizes=...,
    seeds=..., seed=..., chunk=..., **settings_and_host_kwargs)``: under the pytest plugin, the
    test becomes one item per configuration (and per ``chunk`` seeds), and its
    ``shmcomm_sweep`` fixture runs that item's runs. ``host`` may be given here or to the
    fixture; per-run settings (``hazards=``, ``wait_timeout=``, ...) and the host's own keyword
    arguments go with the axes."""
    import pytest

    return pytest.mark.shmcomm_sweep(host, **axes_and_options)


sweep = sweep_marker  # the public name
