"""Helpers for testing kernels with pytest (or any test runner).

:func:`check` runs a host program over rank counts, block counts, modes, sizes and seeds (the
stress harness's sweep) and raises :class:`SweepFailed` with the harness's report, which names
the first failure, where it was raised, and the commands that rerun it under ``stress`` and
``launch``. The pytest plugin (:mod:`shmcomm.testing.plugin`, registered as ``shmcomm``) wraps it
as the fixture ``shmcomm_sweep``, with traces under the test's ``tmp_path``.
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Callable, Iterable
from typing import Any

from ..config import MODES
from ..errors import ArgumentError
from ..stress.harness import Report, Settings, configs, sweep, takes_size
from ..stress.report import format_report

__all__ = ["SweepFailed", "check", "program_spec"]


class SweepFailed(AssertionError):
    """A run of the sweep failed; ``report`` holds every outcome, ``str()`` the printed report."""

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


def _ints(name: str, values: int | Iterable[int]) -> tuple[int, ...]:
    out = (values,) if isinstance(values, int) else tuple(values)
    if not out or any(isinstance(v, bool) or not isinstance(v, int) for v in out):
        raise ArgumentError(f"{name} must be an int or a non-empty list of ints, got {values!r}")
    return out


def check(host: Callable[..., Any], *, nranks: int | Iterable[int] = (2, 4),
          blocks: int | Iterable[int] = (1, 2), modes: str | Iterable[str] = ("eager", "hazard"),
          sizes: int | Iterable[int] | None = None, seeds: int = 2, seed: int = 0,
          hazards: str | None = None, wait_timeout: float = 10.0, deadlock_grace: float = 0.3,
          run_timeout: float = 30.0, trace_dir: str = "", stop_at_first: bool = False,
          detect_races: bool | None = None, **kwargs: Any) -> Report:
    """Run ``host(rt, **kwargs)`` (plus ``size=`` when it takes a ``size``) once for every
    combination of ``nranks`` x ``blocks`` x ``sizes`` x ``modes``, ``seeds`` times with
    different seeds (run ``i`` gets seed ``seed + i``); raise :class:`SweepFailed` with the report
    if any run failed, else return the report.

    ``sizes`` (default 64) needs a host with a ``size`` parameter.
    ``trace_dir``: keep the Chrome trace of every failing run there ("" keeps none).
    ``stop_at_first``: stop at the first failing run (pytest's ``-x`` sets it in the fixture).
    The per-run bounds are the stress harness's: a deadlock is reported after
    ``deadlock_grace`` seconds, one ``TWAIT`` gives up after ``wait_timeout``, a run after
    ``run_timeout``. ``detect_races``: the race detector (default: on in hazard and schedule
    mode, off in eager mode; ``False`` turns it off, ``True`` on in every mode).
    """
    mode_list = (modes,) if isinstance(modes, str) else tuple(modes)
    bad = [m for m in mode_list if m not in MODES]
    if bad or not mode_list:
        raise ArgumentError(f"modes must be a non-empty list of {', '.join(MODES)}, got {modes!r}")
    if isinstance(seeds, bool) or not isinstance(seeds, int) or seeds < 1:
        raise ArgumentError(f"seeds must be an int >= 1 (runs per configuration), got {seeds!r}")
    if hazards is not None and "hazard" not in mode_list:
        raise ArgumentError("hazards has no effect without hazard mode in modes")
    if sizes is not None and not takes_size(host):
        raise ArgumentError("sizes has no effect: the host takes no size parameter")
    cfgs = configs(_ints("nranks", nranks), _ints("blocks", blocks),
                   _ints("sizes", 64 if sizes is None else sizes), mode_list)
    settings = Settings(wait_timeout, deadlock_grace, run_timeout, trace_dir,
                        hazards=hazards or "all", detect_races=detect_races)
    program = program_spec(host)
    rep = sweep(host, cfgs, seed=seed, runs=len(cfgs) * seeds, settings=settings,
                stop_at_first=stop_at_first, program=program, kwargs=kwargs)
    if rep.failures:
        raise SweepFailed(format_report(rep, settings), rep)
    return rep
