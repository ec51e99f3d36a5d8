"""The dispatcher behind ``python -m shmcomm`` and the ``shmcomm`` console script: the first word
picks the command; each command also has its own console script (``shmcomm-launch``, ...)."""

from __future__ import annotations

import sys
from collections.abc import Callable

COMMANDS = {
    "launch": "run a host program once on N rank processes",
    "stress": "run a program over many seeds and shapes, report failures and how to rerun them",
    "trace": "summarize a Chrome trace file of a run: who waited on whom, the longest waits",
    "cleanup": "remove segments of dead runs from /dev/shm",
    "suite": "run one of pto-isa's CPU comm suites unchanged, every rank a process",
}


def _command(name: str) -> Callable[..., int]:
    if name == "launch":
        from .launch.cli import main
    elif name == "stress":
        from .stress.cli import main
    elif name == "trace":
        from .launch.tracecli import main
    elif name == "suite":
        from .launch.suite import main
    else:
        from .launch.cleanup import main
    return main


def main(argv: list[str] | None = None) -> int:
    """Run the command named by ``argv[0]`` with the rest of ``argv``; exit status 2 on a usage
    error."""
    args = sys.argv[1:] if argv is None else argv
    prog = "python -m shmcomm" if not sys.argv[0].endswith("shmcomm") else "shmcomm"
    if not args or args[0] in ("-h", "--help"):
        out = sys.stdout if args else sys.stderr
        print(f"usage: {prog} {{{','.join(COMMANDS)}}} [options]   |   {prog} --version\n\n"
              f"commands (`{prog} COMMAND --help` lists a command's options):", file=out)
        for name, what in COMMANDS.items():
            print(f"  {name:<8} {what}", file=out)
        return 0 if args else 2
    name, rest = args[0], args[1:]
    if name in ("--version", "-V"):
        from importlib.metadata import version

        print(f"shmcomm {version('shmcomm')}")
        return 0
    if name not in COMMANDS:
        import difflib

        near = difflib.get_close_matches(name, COMMANDS, n=1)
        hint = f" (did you mean {near[0]!r}?)" if near else ""
        print(f"usage: {prog} {{{','.join(COMMANDS)}}} [options]\n"
              f"{prog}: error: unknown command {name!r}{hint}; choose from {', '.join(COMMANDS)}",
              file=sys.stderr)
        return 2
    return _command(name)(rest, prog=f"{prog} {name}")


def launch() -> int:
    """The ``shmcomm-launch`` console script."""
    return _command("launch")(prog="shmcomm-launch")


def stress() -> int:
    """The ``shmcomm-stress`` console script."""
    return _command("stress")(prog="shmcomm-stress")


def trace() -> int:
    """The ``shmcomm-trace`` console script."""
    return _command("trace")(prog="shmcomm-trace")


def cleanup() -> int:
    """The ``shmcomm-cleanup`` console script."""
    return _command("cleanup")(prog="shmcomm-cleanup")


def suite() -> int:
    """The ``shmcomm-suite`` console script."""
    return _command("suite")(prog="shmcomm-suite")
