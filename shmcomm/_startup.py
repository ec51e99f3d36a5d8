"""Ctrl-C while a shmcomm command line starts: its imports take seconds on a loaded box, and an
interrupt there must end it quietly (exit 130), not with a traceback through numpy's imports.

Only when this process *is* a shmcomm command (``python -m shmcomm...`` or one of its console
scripts): a program that merely imports shmcomm keeps Python's KeyboardInterrupt. The command's
``main`` puts Python's handler back (:func:`interrupts_as_usual`) once it can handle it."""

from __future__ import annotations

import os
import signal
import sys

_SCRIPTS = ("shmcomm", "shmcomm-launch", "shmcomm-stress")


def _is_command() -> bool:
    argv = list(getattr(sys, "orig_argv", ()))
    if "-m" in argv[:-1]:
        mod = argv[argv.index("-m") + 1]
        return mod == "shmcomm" or mod.startswith("shmcomm.")
    return os.path.basename(sys.argv[0] if sys.argv else "") in _SCRIPTS


def _quiet(signum: int, frame: object) -> None:
    sys.stderr.write("shmcomm: interrupted while starting\n")
    raise SystemExit(128 + signum)


def quiet_interrupts() -> None:
    """While a shmcomm command starts: Ctrl-C exits 130 without a traceback."""
    if _is_command() and signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        signal.signal(signal.SIGINT, _quiet)


def interrupts_as_usual() -> None:
    """The command can handle KeyboardInterrupt itself now."""
    if signal.getsignal(signal.SIGINT) is _quiet:
        signal.signal(signal.SIGINT, signal.default_int_handler)


quiet_interrupts()  # on import: shmcomm's __init__ imports this module first
