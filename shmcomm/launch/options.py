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
import inspect
import os
import sys
import threading
import traceback
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..config import MODES
from ..errors import ArgumentError, RunError, RunTimeout, ShmcommError
from ..exec.compose import reads

# the exit codes of every command: the same number means the same thing everywhere
EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_IMPORT = 0, 1, 2, 3
EXIT_TIMEOUT, EXIT_SIGINT, EXIT_SIGTERM = 124, 130, 143

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
            print(f"{prog}: {colour('warning', 'yellow')}: {message}", file=sys.stderr)

    warnings.showwarning = show
    warnings.simplefilter("always", ShmcommWarning)  # deduplicated by the message above
    warn_unknown_env()


_COLOURS = {"red": "31", "green": "32", "yellow": "33", "bold": "1"}


def colour(text: str, name: str, stream: Any = None) -> str:
    """``text`` in colour ``name`` when ``stream`` (stderr) is a terminal and ``NO_COLOR`` is not
    set (no-color.org); else as it is. A pipe or a file never gets escape codes."""
    stream = sys.stderr if stream is None else stream
    if os.environ.get("NO_COLOR") or os.environ.get("TERM") == "dumb":
        return text
    try:
        tty = stream.isatty()
    except (AttributeError, ValueError):
        tty = False
    return f"\033[{_COLOURS[name]}m{text}\033[0m" if tty else text


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:  # argparse's own errors in the one style, coloured
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"{self.prog}: {colour('error', 'red')}: {message}\n")


def failure_status(prog: str, exc: BaseException) -> int:
    """Print a failed run's report (or ``prog: interrupted`` / ``prog: error: ...``) to standard
    error; the command's exit status for it."""
    if isinstance(exc, RunTimeout):
        print(exc, file=sys.stderr)
        return EXIT_TIMEOUT
    if isinstance(exc, RunError):
        print(exc, file=sys.stderr)
        signum = getattr(exc, "signum", None)  # interrupted: the shell's 128 + signal number
        return 128 + signum if exc.kind == "interrupt" and signum else EXIT_FAILED
    if isinstance(exc, KeyboardInterrupt):  # Ctrl-C outside the run (imports, a build, printing)
        print(f"{prog}: interrupted", file=sys.stderr)
        return EXIT_SIGINT
    print(f"{prog}: error: {exc}", file=sys.stderr)
    return EXIT_FAILED


def usage_error(p: argparse.ArgumentParser, message: str) -> int:
    """The one error style of every command, argparse's: the usage line, then
    ``PROG: error: MESSAGE`` on stderr; status 2."""
    p.print_usage(sys.stderr)
    print(f"{p.prog}: {colour('error', 'red')}: {message}", file=sys.stderr)
    return EXIT_USAGE


def parser(prog: str, description: str, epilog: str = EXIT_STATUS_HELP) -> argparse.ArgumentParser:
    """An argument parser whose errors, help and ``--version`` look the same in every command."""
    p = _Parser(prog=prog, description=description, epilog=epilog)
    p.add_argument("--version", "-V", action="version", version=f"shmcomm {_version()}",
                   help="print shmcomm's version and exit (default: off)")
    return p


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("shmcomm")
    except PackageNotFoundError:
        return "unknown"


# --- the program ---------------------------------------------------------------------------------

def add_program(p: argparse.ArgumentParser | Any, *, extra: str = "", required: bool = False) -> None:
    """``--program SPEC`` and ``--arg key=value``."""
    p.add_argument("--program", default=None, metavar="MOD:HOST|FILE.py:HOST", required=required,
                   help="host function run in every rank as host(rt, **args): pkg.module:host or "
                        f"path/to/file.py:host{extra} (default: none)")


def add_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--arg", action="append", default=[], metavar="KEY=VALUE", type=_key_value,
                   help="keyword argument for the host, repeatable; VALUE is a Python literal, "
                        "@pkg.module:name for an importable object (a dtype class), "
                        "@dtype:NAME for a numpy dtype (@dtype:float16), or else a string "
                        "(default: none)")


def _key_value(text: str) -> tuple[str, Any]:
    key, sep, raw = text.partition("=")
    key = key.strip()
    if not sep or not key.isidentifier():
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE with KEY a Python name, got {text!r}")
    if raw.startswith("@"):  # an importable object: @pkg.module:name, or a dtype: @dtype:NAME
        try:
            if raw.startswith(_DTYPE):
                return key, _dtype(raw[len(_DTYPE):])
            return key, _importable(raw[1:])
        except ArgumentError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
    try:
        value = ast.literal_eval(raw)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        value = raw
    return key, value


_DTYPE = "@dtype:"


def _dtype(name: str) -> np.dtype:
    try:
        return np.dtype(name)
    except (TypeError, ValueError):
        raise ArgumentError(f"--arg: @dtype:{name} names no numpy dtype (expected a name such as "
                            "@dtype:float16)") from None


def _importable(spec: str) -> Any:
    module, _, name = spec.partition(":")
    try:
        obj: Any = importlib.import_module(module)
        for part in name.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError, ValueError):
        raise ArgumentError(f"--arg: @{spec} names no importable object (expected "
                            "@pkg.module:name)") from None
    return obj


def host_kwargs(pairs: Sequence[tuple[str, Any]]) -> dict[str, Any]:
    """``--arg`` pairs as a dict; a key given twice is an error."""
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise ArgumentError(f"--arg: {key} given twice")
        out[key] = value
    return out


def check_host_signature(host: Callable[..., Any], kwargs: dict[str, Any], program: str) -> None:
    """Raise :class:`ArgumentError` unless ``host(rt, **kwargs)`` binds: an ``--arg`` the host
    does not take, or a parameter it needs that no ``--arg`` gives, is a usage error before any
    rank starts, naming the argument and the ones the host accepts."""
    try:
        sig = inspect.signature(host)
    except (TypeError, ValueError):
        return
    params = list(sig.parameters.values())[1:]  # after rt
    named = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    accepted = [p.name for p in params if p.kind in named]
    takes = f"{program} accepts {', '.join(accepted) or 'no --arg'}"
    if not any(p.kind == p.VAR_KEYWORD for p in params):
        for key in kwargs:
            if key not in accepted:
                near = difflib.get_close_matches(key, accepted, n=1)
                hint = f" (did you mean {near[0]}?)" if near else ""
                raise ArgumentError(f"--arg {key}: the host takes no argument {key!r}{hint}; "
                                    f"{takes}")
    missing = [p.name for p in params if p.kind in named and p.default is p.empty
               and p.name not in kwargs]
    if missing:
        raise ArgumentError(f"--arg {missing[0]}=VALUE is missing: the host's parameter "
                            f"{missing[0]!r} has no default; {takes}")
    try:
        sig.bind(None, **kwargs)
    except TypeError as exc:
        raise ArgumentError(f"--program {program}: the host cannot be called with the --arg "
                            f"values: {exc}; {takes}") from None


def format_arg(key: str, value: Any) -> str:
    """``key=value`` that :func:`_key_value` parses back to ``value``: a Python literal, a plain
    string, ``@dtype:NAME`` for a numpy dtype, or ``@pkg.module:name`` for an importable object
    (a class such as a dtype's scalar type); raises :class:`ArgumentError` for a value no
    command line can carry."""
    if isinstance(value, np.dtype) and value.fields is None:  # not a structured dtype
        for name in (value.name, value.str):  # float16; else the exact '>i4', '|S5'
            try:
                if _dtype(name) == value:
                    return f"{key}={_DTYPE}{name}"
            except ArgumentError:
                pass
    if isinstance(value, str) and not value.startswith("@"):
        try:
            ast.literal_eval(value)
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            return f"{key}={value}"  # reads back as the same string
    text = repr(value)
    try:
        if ast.literal_eval(text) == value:
            return f"{key}={text}"
    except (ValueError, SyntaxError, MemoryError, RecursionError, TypeError):
        pass
    module, name = getattr(value, "__module__", None), getattr(value, "__qualname__", None)
    if module and name and "<" not in name:
        try:
            if _importable(f"{module}:{name}") is value:
                return f"{key}=@{module}:{name}"
        except ArgumentError:
            pass
    raise ArgumentError(f"--arg {key}: {text[:60]} is neither a Python literal nor an "
                        "importable object; no command line can pass it")


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

def add_trace_dir(p: argparse.ArgumentParser) -> None:
    p.add_argument("--trace-dir", default="", metavar="DIR",
                   help="trace every run and keep the Chrome traces of the failing ones in DIR, "
                        "one file per run (tracing slows a run and shifts the timing races "
                        "depend on) (default: no tracing)")


def check_mode_options(modes: Sequence[str], hazards: str | None) -> str | None:
    """An error message when an option has no effect in the chosen modes, else ``None``."""
    if hazards is not None and not any(reads(m, "hazards") for m in modes):
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
    """A comma list of integers >= 1 (sizes), without empty items."""
    try:
        values = tuple(int(v) for v in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a comma list of integers >= 1 without "
                                         f"empty items, got {text!r}") from None
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"expected integers >= 1, got {text!r}")
    return values


def interruptible(main: Callable[..., int]) -> Callable[..., int]:
    """Ctrl-C or SIGTERM ends a command with the shell's status (130 / 143) and one line, not a
    traceback: the same in every command."""
    import functools
    import signal

    @functools.wraps(main)
    def wrapper(argv: list[str] | None = None, prog: str | None = None) -> int:
        def term(signum: int, frame: Any) -> None:
            raise KeyboardInterrupt(signum)

        old = (signal.signal(signal.SIGTERM, term)
               if threading.current_thread() is threading.main_thread() else None)
        try:
            return main(argv, prog)
        except KeyboardInterrupt as exc:
            signum = exc.args[0] if exc.args else signal.SIGINT
            print(f"{prog or prog_name(main.__module__.rsplit('.', 1)[-1])}: interrupted by "
                  f"{signal.Signals(signum).name}", file=sys.stderr)
            return 128 + signum
        finally:
            if old is not None:
                signal.signal(signal.SIGTERM, old)

    return wrapper


def report_import_error(prog: str, exc: ProgramImportError) -> int:
    """The user's module failed at import: its traceback, then our one-line error; status 3."""
    print(exc.details.rstrip(), file=sys.stderr)
    print(f"{prog}: error: {exc}", file=sys.stderr)
    return EXIT_IMPORT
