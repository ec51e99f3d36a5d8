"""What the ``launch`` and ``stress`` command lines share: the program, its arguments, the run
settings, one error style and the exit codes.

A program is named the same way everywhere: ``pkg.module:host`` (imported) or
``path/to/file.py:host`` (loaded from the file), and ``--arg key=value`` (repeatable) passes
``key=value`` to ``host(rt, **kwargs)``; a value that reads as a Python literal (``64``,
``1.5``, ``'a'``, ``[1, 2]``) is that literal, anything else a string. So a failure found by
``stress`` reruns under ``launch`` with the same program, arguments, shape, mode and seed.

Options of one feature go in one small ``add_*`` function here, so both command lines get them
from one definition.
"""

from __future__ import annotations

import argparse
import ast
import difflib
import importlib
import importlib.util
import os
import sys
import traceback
import warnings
from collections.abc import Callable, Sequence
from typing import Any

from ..config import HAZARDS, MODES, Config
from ..errors import ArgumentError, ShmcommError

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_IMPORT = 0, 1, 2, 3
EXIT_TIMEOUT, EXIT_SIGINT = 124, 130

STRESS_EXIT_STATUS_HELP = (
    "exit status: 0 every run passed, 1 a run failed (or, with --catalogue, a bug was missed), "
    "2 usage error, 3 the program's module failed to import (its traceback on stderr), 130 / "
    "143 interrupted by SIGINT / SIGTERM (after the summary of the runs that finished)")
EXIT_STATUS_HELP = (
    "exit status: 0 success, 1 the run failed (report on stderr), 2 usage error, 3 the program's "
    "module failed to import (its traceback on stderr), 124 run timeout, 130 / 143 interrupted "
    "by SIGINT / SIGTERM")


class ProgramImportError(ShmcommError):
    """The user's program module raised while it was imported; ``details`` is its traceback."""

    def __init__(self, message: str, details: str) -> None:
        super().__init__(message)
        self.details = details


def prog_name(command: str) -> str:
    """How the user called us: ``shmcomm-launch`` from the console script, else ``python -m ...``."""
    base = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else ""
    if base.startswith("shmcomm"):
        return base if base != "shmcomm" else f"shmcomm {command}"
    return f"python -m shmcomm {command}"


def show_warnings(prog: str) -> None:
    """Print each of shmcomm's warnings once, as a ``PROG: warning: MESSAGE`` line rather than
    Python's ``file:line: Category`` pair (a command reads its settings more than once), and warn
    about unknown ``SHMCOMM_*`` variables now, before a usage error could end the command."""
    from ..config import warn_unknown_env
    from ..errors import ShmcommWarning

    plain = warnings.showwarning
    seen: set[str] = set()

    def show(message: Any, category: type[Warning], filename: str, lineno: int,
             file: Any = None, line: str | None = None) -> None:
        if not issubclass(category, ShmcommWarning):
            plain(message, category, filename, lineno, file, line)
        elif str(message) not in seen:
            seen.add(str(message))
            print(f"{prog}: warning: {message}", file=sys.stderr)

    warnings.showwarning = show
    warnings.simplefilter("always", ShmcommWarning)  # deduplicated by the message above
    warn_unknown_env()


def usage_error(p: argparse.ArgumentParser, message: str) -> int:
    """The one error style of every command, argparse's: the usage line, then
    ``PROG: error: MESSAGE`` on stderr; status 2."""
    p.print_usage(sys.stderr)
    print(f"{p.prog}: error: {message}", file=sys.stderr)
    return EXIT_USAGE


def parser(prog: str, description: str, epilog: str = EXIT_STATUS_HELP) -> argparse.ArgumentParser:
    """An argument parser whose errors and help look the same in every command."""
    return argparse.ArgumentParser(prog=prog, description=description, epilog=epilog)


# --- the program ---------------------------------------------------------------------------------

def add_program(p: argparse.ArgumentParser | Any, *, extra: str = "", required: bool = False) -> None:
    """``--program SPEC`` and ``--arg key=value``."""
    p.add_argument("--program", default=None, metavar="MOD:HOST|FILE.py:HOST", required=required,
                   help="host function run in every rank as host(rt, **args): pkg.module:host or "
                        f"path/to/file.py:host{extra} (default: none)")


def add_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--arg", action="append", default=[], metavar="KEY=VALUE", type=_key_value,
                   help="keyword argument for the host, repeatable; VALUE is a Python literal "
                        "or a string (default: none)")


def _key_value(text: str) -> tuple[str, Any]:
    key, sep, raw = text.partition("=")
    key = key.strip()
    if not sep or not key.isidentifier():
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE with KEY a Python name, got {text!r}")
    try:
        value = ast.literal_eval(raw)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        value = raw
    return key, value


def host_kwargs(pairs: Sequence[tuple[str, Any]]) -> dict[str, Any]:
    """``--arg`` pairs as a dict; a key given twice is an error."""
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise ArgumentError(f"--arg: {key} given twice")
        out[key] = value
    return out


def format_arg(key: str, value: Any) -> str:
    """``key=value`` that :func:`_key_value` parses back to ``value``."""
    if isinstance(value, str):
        try:
            ast.literal_eval(value)
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            return f"{key}={value}"  # reads back as the same string
    return f"{key}={value!r}"


def load_program(spec: str) -> Callable[..., Any]:
    """Import ``pkg.mod:function`` or load ``path/to/file.py:function``; return the function.

    A module that raises while importing raises :class:`ProgramImportError` with its traceback;
    a spec that names nothing raises :class:`ArgumentError`.
    """
    target, sep, func_name = spec.rpartition(":")
    if not sep or not target or not func_name.isidentifier():
        raise ArgumentError(f"--program must look like pkg.module:host or path/to/file.py:host, "
                            f"got {spec!r}")
    if target.endswith(".py") or os.sep in target:
        mod = _load_file(target)
    else:
        mod = _import(target)
    func = getattr(mod, func_name, None)
    if not callable(func):
        names = [n for n, v in vars(mod).items() if callable(v) and not n.startswith("_")]
        near = difflib.get_close_matches(func_name, names, n=1)
        hint = f"; did you mean {near[0]!r}?" if near else ""
        raise ArgumentError(f"--program: {target!r} has no function {func_name!r}{hint}")
    return func


def _import(name: str) -> Any:
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):  # a parent package that is missing or fails
        spec = None
    if spec is None:
        raise ArgumentError(f"--program: no module named {name!r} (is its directory on "
                            "PYTHONPATH? a file is given as path/to/file.py:host)")
    try:
        return importlib.import_module(name)
    except BaseException as exc:
        if isinstance(exc, KeyboardInterrupt):
            raise
        raise ProgramImportError(f"--program: importing module {name!r} {_failed(exc)}",
                                 traceback.format_exc()) from None


def _failed(exc: BaseException) -> str:
    """How a module's import ended: a ``sys.exit`` there is named as such, not as a crash."""
    if isinstance(exc, SystemExit):
        return f"called sys.exit({exc.code!r})"
    return f"failed: {type(exc).__name__}: {exc}"


def _load_file(path: str) -> Any:
    if not os.path.isfile(path):
        raise ArgumentError(f"--program: no file {path!r}")
    name = os.path.splitext(os.path.basename(path))[0]
    mod_spec = importlib.util.spec_from_file_location(name, path)
    if mod_spec is None or mod_spec.loader is None:
        raise ArgumentError(f"--program: {path!r} is not a Python file")
    mod = importlib.util.module_from_spec(mod_spec)
    # the module's own directory is importable, as for `python path/to/file.py`
    folder = os.path.dirname(os.path.abspath(path))
    if folder not in sys.path:
        sys.path.insert(0, folder)
    sys.modules[name] = mod  # so its functions pickle by reference like any module's
    try:
        mod_spec.loader.exec_module(mod)
    except BaseException as exc:
        sys.modules.pop(name, None)
        if isinstance(exc, KeyboardInterrupt):
            raise
        raise ProgramImportError(f"--program: loading {path!r} {_failed(exc)}",
                                 traceback.format_exc()) from None
    return mod


# --- run settings --------------------------------------------------------------------------------

def add_hazards(p: argparse.ArgumentParser) -> None:
    p.add_argument("--hazards", default=None, metavar="LIST",
                   help="hazard-mode sub-models: all or a comma list of " + ",".join(HAZARDS)
                        + " (default: all; an error without hazard mode)")


def add_trace_file(p: argparse.ArgumentParser) -> None:
    p.add_argument("--trace", default=None, metavar="PATH",
                   help="write a Chrome trace JSON of the run here, in any mode (open it in "
                        "Perfetto, or summarize it with `python -m shmcomm trace PATH`) "
                        "(default: none, or SHMCOMM_TRACE)")


def add_trace_dir(p: argparse.ArgumentParser, default: str) -> None:
    p.add_argument("--trace-dir", default=default, metavar="DIR",
                   help="keep the Chrome trace of every failing run in DIR, one file per run "
                        "('' keeps none) (default: %(default)s)")


def add_waits(p: argparse.ArgumentParser, wait_timeout: float | None,
              deadlock_grace: float | None) -> None:
    def shown(value: float | None, name: str) -> str:
        dflt = getattr(Config, name)
        return f"{value:g}" if value is not None else f"{dflt:g}, or SHMCOMM_{name.upper()}"

    p.add_argument("--wait-timeout", type=float, default=wait_timeout, metavar="S",
                   help="one TWAIT's deadline in seconds (default: "
                        f"{shown(wait_timeout, 'wait_timeout')})")
    p.add_argument("--deadlock-grace", type=float, default=deadlock_grace, metavar="S",
                   help="how long every agent must wait with nothing changing to be a deadlock, "
                        f"in seconds (default: {shown(deadlock_grace, 'deadlock_grace')})")


def add_schedule_options(p: argparse.ArgumentParser) -> None:
    """Schedule mode's options (one block, shared by the launch and stress command lines)."""
    g = p.add_argument_group("schedule mode")
    g.add_argument("--strategy", default=None, metavar="random|pct[:D[:K]]",
                   help="who runs each step: random or PCT with depth D (default 3) for runs of "
                        "about K steps (default 400); the stress harness also takes "
                        "exhaustive[:K], every schedule with at most K preemptions "
                        "(default: random, or SHMCOMM_STRATEGY)")
    g.add_argument("--replay", default=None, metavar="FILE",
                   help="run the schedule recorded in FILE (implies --mode schedule) (default: none)")
    g.add_argument("--record", default=None, metavar="FILE",
                   help="write the run's schedule to FILE (for --replay) (default: none)")
    g.add_argument("--schedule-delay", type=int, default=None, metavar="STEPS",
                   help="mean steps per live agent that unsynchronized work stays pending "
                        "(default: 16, or SHMCOMM_SCHEDULE_DELAY)")


def add_race_options(p: argparse.ArgumentParser) -> None:
    """The race detector's options (the launch and stress CLIs share them)."""
    p.add_argument("--detect-races", action=argparse.BooleanOptionalAction, default=None,
                   help="run the happens-before race detector beside the mode: report two "
                        "unordered conflicting accesses even when the data came out right "
                        "(default: on in hazard and schedule mode, off in eager mode, or "
                        "SHMCOMM_DETECT_RACES)")
    p.add_argument("--race-exitfirst", action="store_true",
                   help="with the race detector: stop the run at the first race (default: report "
                        "every race at the end of the run)")


def add_transport(p: argparse.ArgumentParser) -> None:
    """Where the ranks' windows live (one block: easy to move)."""
    p.add_argument("--transport", choices=("shm", "mpi"), default=None,
                   help="shm: this command forks the ranks; mpi: start it under mpiexec -n N, "
                        "every MPI process is one rank and rank 0 prints (default: shm, or "
                        "SHMCOMM_TRANSPORT)")


def check_mode_options(modes: Sequence[str], hazards: str | None) -> str | None:
    """An error message when an option has no effect in the chosen modes, else ``None``."""
    if hazards is not None and not {"hazard", "schedule"} & set(modes):
        return (f"--hazards has no effect without hazard or schedule mode (modes: "
                f"{', '.join(modes)}); add --mode hazard or drop --hazards")
    return None


def mode_list(text: str) -> tuple[str, ...]:
    values = tuple(v.strip() for v in text.split(",") if v.strip())
    bad = [v for v in values if v not in MODES]
    if bad or not values:
        raise argparse.ArgumentTypeError(f"modes must be a comma list of {', '.join(MODES)}, "
                                         f"got {text!r}")
    return values


def int_list(text: str) -> tuple[int, ...]:
    try:
        values = tuple(int(v) for v in text.split(",") if v.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None
    if not values:
        raise argparse.ArgumentTypeError("expected at least one value")
    return values


def report_import_error(prog: str, exc: ProgramImportError) -> int:
    """The user's module failed at import: its traceback, then our one-line error; status 3."""
    print(exc.details.rstrip(), file=sys.stderr)
    print(f"{prog}: error: {exc}", file=sys.stderr)
    return EXIT_IMPORT
