"""Helpers the command-line and plugin tests share: run a command in-process (fast: argparse
errors, usage checks) or as a subprocess (what a user types), and pick the printed repro lines."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def env_with(path: Path | str | None = None, **extra: str) -> dict[str, str]:
    """The environment of a subprocess: this tree (and ``path``) first on PYTHONPATH."""
    env = dict(os.environ, **extra)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), str(path) if path else None,
                                                      env.get("PYTHONPATH")]))
    return env


def run_cli(*argv: str, cwd: Path | str | None = None, env: dict | None = None,
            module: tuple[str, ...] = ("-m", "shmcomm"), timeout: float = 90
            ) -> subprocess.CompletedProcess:
    """``python -m shmcomm ARGV`` as a subprocess (``env`` gets this tree on PYTHONPATH)."""
    e = dict(os.environ if env is None else env)
    e["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), e.get("PYTHONPATH")]))
    return subprocess.run([sys.executable, *module, *argv], capture_output=True, text=True,
                          timeout=timeout, cwd=cwd, env=e)


def run_in_process(capsys: Any, *argv: str) -> tuple[int, str, str]:
    """``shmcomm ARGV`` in this process: ``(status, stdout, stderr)``; argparse's exits count."""
    import warnings

    from shmcomm.cli import main

    with warnings.catch_warnings():  # the command installs its own warning printer
        try:
            status = main(list(argv))
        except SystemExit as exc:
            status = int(exc.code or 0)
    out = capsys.readouterr()
    return status, out.out, out.err


def line_after(text: str, prefix: str) -> list[str]:
    """The argv of the first printed line starting with (or containing) ``prefix``."""
    for line in text.splitlines():
        if prefix in line:
            return shlex.split(line.split(prefix, 1)[1].split("   #")[0])
    raise AssertionError(f"no line with {prefix!r} in:\n{text}")


def rerun(argv: list[str], cwd: Path | str | None = None, env: dict | None = None,
          timeout: float = 90) -> subprocess.CompletedProcess:
    """Run a printed ``python -m ...`` command line as it is (with this interpreter)."""
    assert argv[0] == "python", argv
    return subprocess.run([sys.executable, *argv[1:]], capture_output=True, text=True, cwd=cwd,
                          env=env or env_with(cwd), timeout=timeout)
