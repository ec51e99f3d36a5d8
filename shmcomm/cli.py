"""The dispatcher behind ``python -m shmcomm``: the first word picks the command."""

from __future__ import annotations

import sys

COMMANDS = {
    "launch": "run a host program on N rank processes (python -m shmcomm launch --help)",
    "stress": "run a program over many seeds and shapes (python -m shmcomm stress --help)",
    "cleanup": "remove segments of dead runs from /dev/shm (python -m shmcomm cleanup --help)",
}


def main(argv: list[str] | None = None) -> int:
    """Run the command named by ``argv[0]`` with the rest of ``argv``; exit status 2 on a usage
    error."""
    args = sys.argv[1:] if argv is None else argv
    if not args or args[0] in ("-h", "--help"):
        out = sys.stdout if args else sys.stderr
        print("usage: python -m shmcomm {launch,stress,cleanup} [options]\n", file=out)
        for name, what in COMMANDS.items():
            print(f"  {name:<8} {what}", file=out)
        return 0 if args else 2
    name, rest = args[0], args[1:]
    if name == "--version":
        from importlib.metadata import version

        print(f"shmcomm {version('shmcomm')}")
        return 0
    if name == "launch":
        from .launch.cli import main as run_main
    elif name == "stress":
        from .stress.cli import main as run_main
    elif name == "cleanup":
        from .launch.cleanup import main as run_main
    else:
        print(f"python -m shmcomm: error: unknown command {name!r}; choose from "
              f"{', '.join(COMMANDS)}", file=sys.stderr)
        return 2
    return run_main(rest)
