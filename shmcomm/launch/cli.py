"""The ``python -m shmcomm.launch`` command line (argument parsing, exit codes).

Exit status: 0 when every rank succeeded, 1 when the run failed (the report goes to stderr),
2 for a usage error, 124 when the run timed out, 130 / 143 when interrupted by SIGINT / SIGTERM.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import time
from collections.abc import Callable
from typing import Any

from ..config import MAX_RANKS
from ..errors import ArgumentError, RunError, RunTimeout, ShmcommError
from .supervisor import run

MAX_ITERS = 10**6  # barrier iterations of the default job (~500 s at 8 x 4 here)


def load_program(spec: str) -> Callable[..., Any]:
    """Import ``pkg.mod:function`` and return the function (a host program)."""
    mod_name, sep, func_name = spec.partition(":")
    if not sep or not mod_name or not func_name:
        raise ArgumentError(f"--program must look like pkg.module:function, got {spec!r}")
    try:
        mod = importlib.import_module(mod_name)
    except ImportError as exc:
        raise ArgumentError(f"--program: cannot import module {mod_name!r}: {exc}") from None
    except Exception as exc:  # a syntax error or a failure while the module imports
        raise ArgumentError(f"--program: importing module {mod_name!r} failed: "
                            f"{type(exc).__name__}: {exc}") from None
    func = getattr(mod, func_name, None)
    if not callable(func):
        raise ArgumentError(f"--program: {mod_name!r} has no callable {func_name!r}")
    return func


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m shmcomm.launch",
        description="Run a shmcomm host program on N rank processes (default: the built-in "
                    "barrier and allreduce check).")
    p.add_argument("--nranks", "-n", type=int, default=8, help="rank processes (1..64, default 8)")
    p.add_argument("--blocks", "-b", type=int, default=None, help="blocks per launch (default 4)")
    p.add_argument("--program", default=None, metavar="PKG.MOD:FUNC",
                   help="host function to run in every rank; it receives rt")
    p.add_argument("--iters", type=int, default=200, help="barrier iterations of the default job")
    p.add_argument("--timeout", type=float, default=None, help="seconds for the whole run (exit 124)")
    p.add_argument("--seed", type=int, default=None, help="seed of the run's randomness")
    p.add_argument("--mode", choices=("eager", "hazard", "schedule"), default=None,
                   help="eager (default), hazard or schedule")
    p.add_argument("--wait-policy", choices=("adaptive", "spin", "yield", "futex"), default=None)
    p.add_argument("--hazards", default=None, metavar="LIST",
                   help="hazard-mode sub-models: all (default) or a comma list of "
                        "pipes,visibility,lines,jitter,checkers")
    p.add_argument("--trace", default=None, metavar="PATH",
                   help="hazard mode: write a Chrome trace JSON (open it in Perfetto)")
    add_schedule_options(p)
    add_race_options(p)
    return p


def add_schedule_options(p: argparse.ArgumentParser) -> None:
    """Schedule mode's options (one block, shared by the launch and stress command lines)."""
    g = p.add_argument_group("schedule mode")
    g.add_argument("--strategy", default=None, metavar="random|pct[:D[:K]]",
                   help="who runs each step: random (default) or PCT with depth D (default 3) "
                        "for runs of about K steps (default 400); the stress harness also takes "
                        "exhaustive[:K], every schedule with at most K preemptions")
    g.add_argument("--replay", default=None, metavar="FILE",
                   help="run the schedule recorded in FILE (implies --mode schedule)")
    g.add_argument("--record", default=None, metavar="FILE",
                   help="write the run's schedule to FILE (for --replay)")
    g.add_argument("--schedule-delay", type=int, default=None, metavar="STEPS",
                   help="mean steps per live agent that unsynchronized work stays pending "
                        "(default 16)")


def add_race_options(p: argparse.ArgumentParser) -> None:
    """The race detector's options (the launch and stress CLIs share them)."""
    p.add_argument("--detect-races", action="store_true",
                   help="run the happens-before race detector beside the mode: report two "
                        "unordered conflicting accesses even when the data came out right")
    p.add_argument("--exitfirst", action="store_true",
                   help="with --detect-races: stop the run at the first race (default: report "
                        "every race at the end of the run)")


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    ns = parser.parse_args(argv)
    if not 1 <= ns.nranks <= MAX_RANKS:
        parser.error(f"--nranks must be in [1, {MAX_RANKS}], got {ns.nranks}")
    if not 1 <= ns.iters <= MAX_ITERS:
        parser.error(f"--iters must be in [1, {MAX_ITERS}], got {ns.iters}")
    try:
        settings = dict(nranks=ns.nranks, blocks=ns.blocks, timeout=ns.timeout, seed=ns.seed,
                        mode="schedule" if ns.replay and ns.mode is None else ns.mode,
                        wait_policy=ns.wait_policy, hazards=ns.hazards, trace=ns.trace,
                        strategy=ns.strategy, replay=ns.replay, record=ns.record,
                        schedule_delay=ns.schedule_delay,
                        detect_races=ns.detect_races or None,
                        race_exitfirst=ns.exitfirst or None)
        if ns.exitfirst and not ns.detect_races:
            parser.error("--exitfirst needs --detect-races")
        if ns.program:
            host = load_program(ns.program)
            results = run(host, **settings)
            for rank, res in enumerate(results):
                if res is not None:
                    print(f"rank {rank}: {res!r}")
            return 0
        from .programs import default_job, format_default

        t0 = time.perf_counter()
        results = run(default_job, args=(ns.iters,), **settings)
        print(format_default(results, time.perf_counter() - t0))
        return 0 if all(r["ok"] for r in results) else 1
    except ArgumentError as exc:
        print(f"shmcomm.launch: error: {exc}", file=sys.stderr)
        return 2
    except RunTimeout as exc:
        print(exc, file=sys.stderr)
        return 124
    except RunError as exc:
        print(exc, file=sys.stderr)
        signum = getattr(exc, "signum", None)  # interrupted: the shell's 128 + signal number
        return 128 + signum if exc.kind == "interrupt" and signum else 1
    except KeyboardInterrupt:  # Ctrl-C outside the run (imports, printing): no traceback
        print("shmcomm.launch: interrupted", file=sys.stderr)
        return 130
    except ShmcommError as exc:
        print(f"shmcomm.launch: {exc}", file=sys.stderr)
        return 1

