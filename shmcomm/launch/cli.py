"""The ``launch`` command line: run a host program once on N rank processes.

Exit status: 0 when every rank succeeded, 1 when the run failed (the report goes to stderr),
2 for a usage error, 3 when the program's module failed to import (its traceback on stderr),
124 when the run timed out, 130 / 143 when interrupted by SIGINT / SIGTERM.
"""

from __future__ import annotations

import argparse
import functools
import os
import stat
import sys
import time

from .._startup import interrupts_as_usual
from ..config import BY_NAME, Config, add_options, given
from ..errors import ArgumentError, ShmcommError
from . import options as opt
from .options import load_program  # noqa: F401  (the historical import path of the loader)
from .supervisor import run

MAX_ITERS = 10**6  # barrier iterations of the default job (~500 s at 8 x 4 here)
DEFAULT_ITERS = 200


def _print(text: str) -> None:
    """Print the results; a reader that stopped reading (``| head -1``) is no failure."""
    if not text:
        return
    try:
        print(text, flush=True)
    except BrokenPipeError:
        # the interpreter would flush again at exit and print a traceback: point stdout at
        # /dev/null instead (as the Python docs advise for SIGPIPE)
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)


# every setting of the table is an option of launch (the rest of the table is the sweeps')
LAUNCH_SETTINGS = tuple(BY_NAME)


def build_parser(prog: str | None = None) -> argparse.ArgumentParser:
    p = opt.parser(prog or opt.prog_name("launch"),
                   "Run a shmcomm host program once on N rank processes (default: the built-in "
                   "barrier and AllReduce check).")
    job = p.add_mutually_exclusive_group()
    opt.add_program(job)
    job.add_argument("--iters", type=int, default=None,
                     help=f"barrier iterations of the built-in job, 1..{MAX_ITERS} "
                          f"(default: {DEFAULT_ITERS})")
    opt.add_args(p)
    from ..exec.observers import OBSERVERS

    p.add_argument("--observe", action="append", default=[], metavar="NAME",
                   choices=sorted(OBSERVERS),
                   help="watch the run with this observer and print its report, on a passing "
                        f"run too (repeatable): {', '.join(sorted(OBSERVERS))} (default: none)")
    add_options(p, LAUNCH_SETTINGS)
    return p


def _quiet() -> bool:
    """Under the mpi transport only world rank 0 prints results and errors."""
    from .mpi import is_root

    try:
        return not is_root()
    except ShmcommError:  # no usable MPI: every process says why
        return False


def main(argv: list[str] | None = None, prog: str | None = None) -> int:
    """Entry point of ``launch``; returns the exit status."""
    interrupts_as_usual()  # from here on a Ctrl-C is this command's to report
    parser = build_parser(prog)
    prog = parser.prog
    opt.show_warnings(prog)
    ns = parser.parse_args(argv)
    if ns.iters is not None and not 1 <= ns.iters <= MAX_ITERS:
        return opt.usage_error(parser, f"--iters must be in [1, {MAX_ITERS}], got {ns.iters}")
    if ns.arg and not ns.program:
        return opt.usage_error(parser, "--arg is passed to --program's host; the built-in job takes none")
    status = None
    before = _identity(ns.trace)
    try:
        status = _run(parser, ns)
        return status
    finally:
        after = _identity(ns.trace)
        if after is not None and after != before:  # a new file of ours at the path: written
            cut = status is None or status == opt.EXIT_TIMEOUT or status > 128
            print(f"{prog}: trace written to {ns.trace}"
                  + (", incomplete: the run was cut short (it holds what each agent last "
                     "waited for)" if cut else "")
                  + f" (summary: python -m shmcomm trace {ns.trace}; picture: --plot OUT.svg)",
                  file=sys.stderr)


def _observers(names: list[str], settings: dict) -> list:
    """The observers ``--observe`` names, made for the run's configuration."""
    from ..exec.observers import make_observer

    config = Config.from_kwargs(**{k: v for k, v in settings.items() if k != "observers"})
    return [make_observer(n, config) for n in names]


def _identity(path: str | None) -> tuple[int, int, int] | None:
    """What is at ``path`` now, if it is a regular file of this user (a trace is moved into
    place by a rename, so a written trace is a new inode): ``(dev, inode, mtime)`` or None."""
    if not path:
        return None
    try:
        st = os.lstat(path)
    except OSError:
        return None
    if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid():
        return None
    return st.st_dev, st.st_ino, st.st_mtime_ns


def _run(parser: argparse.ArgumentParser, ns: argparse.Namespace) -> int:
    watching: list = []
    try:
        return _run_job(parser, ns, watching)
    finally:
        for o in watching:  # their reports, passed or failed
            if o.summary():
                _print(f"{o.name}: {o.summary()}")


def _run_job(parser: argparse.ArgumentParser, ns: argparse.Namespace, watching: list) -> int:
    prog = parser.prog
    # under mpiexec (--transport mpi or SHMCOMM_TRANSPORT=mpi) only world rank 0 prints
    mpi = (ns.transport or os.environ.get("SHMCOMM_TRANSPORT", "")) == "mpi"
    try:
        settings = given(ns, LAUNCH_SETTINGS)
        if ns.race_exitfirst and ns.detect_races is False:
            return opt.usage_error(parser, "--race-exitfirst needs the race detector (drop "
                                           "--no-detect-races)")
        if ns.replay and ns.mode is None:
            settings["mode"] = "schedule"  # --replay implies schedule mode
        if ns.hazards is not None:
            mode = settings.get("mode") or os.environ.get("SHMCOMM_MODE") or Config.mode
            error = opt.check_mode_options((mode,), ns.hazards)
            if error:
                return opt.usage_error(parser, error)
        if ns.observe:
            watching += _observers(ns.observe, settings)
            settings["observers"] = watching
        if ns.program:
            kwargs = opt.host_kwargs(ns.arg)
            host = load_program(ns.program)
            opt.check_host_signature(host, kwargs, ns.program)  # before any rank starts
            if kwargs:
                host = functools.partial(host, **kwargs)
            results = run(host, **settings)
            if mpi and _quiet():
                return opt.EXIT_OK
            shown = [f"rank {rank}: {res!r}" for rank, res in enumerate(results) if res is not None]
            # a passing host that returns nothing still says that the run passed
            _print("\n".join(shown) or f"{opt.colour('ok', 'green', sys.stdout)}: "
                   f"{len(results)} rank(s) passed (every host returned None)")
            return opt.EXIT_OK
        from .programs import default_job, format_default

        t0 = time.perf_counter()
        iters = DEFAULT_ITERS if ns.iters is None else ns.iters
        results = run(default_job, args=(iters,), **settings)
        if not mpi or not _quiet():
            _print(format_default(results, time.perf_counter() - t0))
        return opt.EXIT_OK if all(r["ok"] for r in results) else opt.EXIT_FAILED
    except opt.ProgramImportError as exc:
        return opt.report_import_error(prog, exc)
    except ArgumentError as exc:
        if mpi and _quiet():
            return opt.EXIT_USAGE
        return opt.usage_error(parser, str(exc))
    except (ShmcommError, KeyboardInterrupt) as exc:  # a failed run, Ctrl-C, an error: no traceback
        return opt.failure_status(prog, exc)
