"""The ``suite`` command: run one of pto-isa's CPU comm suites, unchanged, truly concurrently.

``python -m shmcomm suite --pto-isa PATH tgather [--nranks N] [--gtest_filter=...]`` builds
the suite against the checkout behind shmcomm's shadow and harness shim
(:mod:`shmcomm.native.suite`), then runs its gtest main in every one of N rank processes over
shmcomm's shared windows. Every rank's result counts: a test passes only if every rank of each
of its harness calls passed. gtest's own output comes from rank 0; a summary follows, one line
per test, naming the ranks that failed and whether pto-isa's sequential harness would have
accepted the case anyway.

Exit status: 0 when every test passed or was skipped, 1 when a test failed or the run failed
(the report goes to stderr), 2 for a usage error, 124 when the run timed out, 130 / 143 when
interrupted.
"""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .._startup import interrupts_as_usual
from ..config import BY_NAME, add_options, given
from ..errors import ArgumentError, ShmcommError
from ..native import ptoisa
from ..native import suite as S
from . import options as opt
from .supervisor import run

DEFAULT_NRANKS = 4  # the most any of pto-isa's four CPU comm suites asks for (SKIP_IF_RANKS_LT(4))
DEFAULT_WINDOW = 64 << 20
# the run's settings this command takes (the rest of the table: a kernel's, not a suite's)
SUITE_SETTINGS = ("mode", "seed", "timeout", "wait_timeout", "deadlock_grace", "target",
                  "set_semantics", "hazards", "strategy", "detect_races", "trace")
DEFAULTS = {"timeout": 3600.0, "wait_timeout": 600.0}
EXIT_STATUS_HELP = ("exit status: 0 every test passed or was skipped, 1 a test or the run failed (the "
                    "run's report on stderr), 2 usage error, 124 run timeout, 130 / 143 interrupted by "
                    "SIGINT / SIGTERM")


@dataclass
class SuiteResult:
    """What a suite run found: gtest's exit code (rank 0's) and every test's :class:`Case`."""

    suite: str
    exit_code: int
    cases: list[S.Case]

    @property
    def failed(self) -> list[S.Case]:
        return [c for c in self.cases if c.verdict == "failed"]

    def summary(self) -> str:
        """One line per test, then the totals."""
        width = max((len(c.name) for c in self.cases), default=0)
        lines = []
        for c in self.cases:
            verdict = c.verdict.upper() if c.verdict == "failed" else c.verdict
            note = c.note()
            lines.append(f"  {c.name:<{width}}  {verdict}" + (f": {note}" if note else ""))
        n = {v: sum(c.verdict == v for c in self.cases) for v in ("passed", "failed", "skipped")}
        seq = sum(c.only_sequential for c in self.cases)
        total = (f"{self.suite}: {len(self.cases)} tests, {n['passed']} passed, {n['failed']} failed"
                 + (f" ({seq} of them pass under pto-isa's sequential harness)" if seq else "")
                 + f", {n['skipped']} skipped")
        return "\n".join([f"shmcomm summary of {self.suite} (every rank's result counts):", *lines, total])


def run_suite(suite: str, pto_isa: str | Path | None = None, nranks: int = DEFAULT_NRANKS,
              gtest_args: list[str] | tuple[str, ...] = (), window_bytes: int = DEFAULT_WINDOW,
              **settings: Any) -> SuiteResult:
    """Build suite ``suite`` (a suite name of the checkout's ``tests/cpu/comm/st/testcase/``,
    or a suite directory) against ``pto_isa`` (default: ``$SHMCOMM_PTO_ISA``) and run it on
    ``nranks`` rank processes, each with a suite window of ``window_bytes``; ``gtest_args``
    go to gtest (``--gtest_filter=...``), ``settings`` to the run (``target="a5"`` for the
    URMA suites, ``mode``, ``timeout``...). Raises :class:`~shmcomm.RunError` when the run
    fails (a hang, a crash, an exception), with shmcomm's report."""
    if isinstance(window_bytes, bool) or not isinstance(window_bytes, int) or window_bytes < 1:
        raise ArgumentError(f"suite: window_bytes must be an int >= 1, got {window_bytes!r}")
    if isinstance(gtest_args, str) or not all(isinstance(a, str) for a in gtest_args):
        raise ArgumentError(f"suite: gtest_args must be a list of str, got {gtest_args!r}")
    pto = pto_isa if pto_isa is not None else os.environ.get(ptoisa.ENV)
    if not pto:
        raise ArgumentError(f"suite: name the pto-isa checkout (pto_isa=, --pto-isa or ${ptoisa.ENV})")
    ptoisa.check(pto)  # a checkout first: then its suites
    d = S.locate(suite, pto)
    path = S.build(str(d), pto)
    for k, v in DEFAULTS.items():
        settings.setdefault(k, v)
    heap = window_bytes + (4 << 20)  # the window, and room for the rest of the rank's heap
    results = run(S.rank_host, nranks=nranks, blocks=1, window_bytes=heap,
                  args=(str(path), window_bytes, list(gtest_args)), **settings)
    code, report = results[0]
    return SuiteResult(d.name, code, S.parse_report(report))


def _bytes(text: str) -> int:
    units = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
    t = text.strip().lower().removesuffix("ib").removesuffix("b")
    try:
        return int(float(t[:-1]) * units[t[-1]]) if t and t[-1] in units else int(t)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (bytes, or with K / M / G)") from None


def build_parser(prog: str | None = None) -> argparse.ArgumentParser:
    p = opt.parser(prog or opt.prog_name("suite"),
                   "Build one of pto-isa's CPU comm suites (tests/cpu/comm/st/testcase/NAME: "
                   "main.cpp and NAME_kernel.cpp, unchanged) against shmcomm's shadow and run "
                   "it on N rank processes at once over shared windows. Every rank's result "
                   "counts; a test that fails on some rank but passes under pto-isa's "
                   "sequential harness (which stops at the first rank that passes) is reported "
                   "with the failing rank. Arguments starting with --gtest_ go to gtest. The "
                   "URMA suites (tput_async_urma, tget_async_urma) are a5 tests: run them with "
                   "--target a5.", epilog=EXIT_STATUS_HELP)
    p.add_argument("suite", help="a suite name (tscatter, tgather, tput_async_urma, "
                                 "tget_async_urma) of the checkout, or a suite directory")
    p.add_argument("--pto-isa", metavar="PATH", default=None,
                   help=f"the pto-isa checkout (default: ${ptoisa.ENV})")
    p.add_argument("-n", "--nranks", type=int, default=DEFAULT_NRANKS,
                   help=f"rank processes; a test needing more is skipped (default: {DEFAULT_NRANKS})")
    p.add_argument("--window-bytes", type=_bytes, default=DEFAULT_WINDOW, metavar="BYTES",
                   help="each rank's suite window (TestContext / UrmaTestContext memory); the "
                        "large-MR URMA cases need about 800M (default: 64M)")
    add_options(p, SUITE_SETTINGS, defaults=DEFAULTS)
    return p


def main(argv: list[str] | None = None, prog: str | None = None) -> int:
    """Entry point of ``suite``; returns the exit status."""
    interrupts_as_usual()
    parser = build_parser(prog)
    prog = parser.prog
    args = sys.argv[1:] if argv is None else list(argv)
    gtest = [a for a in args if a.startswith("--gtest_")]
    ns = parser.parse_args([a for a in args if not a.startswith("--gtest_")])
    if not 1 <= ns.nranks <= BY_NAME["nranks"].high:
        return opt.usage_error(parser, f"--nranks must be in [1, {BY_NAME['nranks'].high}], got {ns.nranks}")
    try:
        settings = given(ns, SUITE_SETTINGS)
        result = run_suite(ns.suite, ns.pto_isa, ns.nranks, gtest, ns.window_bytes, **settings)
    except ArgumentError as exc:
        return opt.usage_error(parser, str(exc))
    except (ShmcommError, KeyboardInterrupt) as exc:  # a failed run, Ctrl-C, an error: no traceback
        return opt.failure_status(prog, exc)
    sys.stdout.flush()
    print(result.summary(), flush=True)
    return opt.EXIT_OK if result.exit_code == 0 and not result.failed else opt.EXIT_FAILED
