"""pto-isa's CPU comm suites, built unchanged against shmcomm's shadow and its harness shim.

A suite is a directory of pto-isa's ``tests/cpu/comm/st/testcase/`` (``tscatter``, ``tgather``,
``tput_async_urma``, ``tget_async_urma``): a gtest ``main.cpp`` and a ``<name>_kernel.cpp`` whose
host functions call the harness of ``../common.hpp`` (and ``../urma_context.hpp``). shmcomm
compiles both files as they are into one shared library, treated mechanically in the generated
unit (the files themselves are never edited):

* ``#include "...common.hpp"`` / ``"...urma_context.hpp"`` become shmcomm's harness shim
  (``shadow/shmcomm_shadow/cpu_suite_common.hpp`` / ``cpu_suite_urma.hpp``), written to the
  same names and signatures: real shared windows, barriers over the test's ranks, every rank's
  result counted;
* ``int main(`` of ``main.cpp`` becomes ``int shmcomm_suite_user_main(``, which shmcomm's entry
  (``shadow/shmcomm_shadow/suite_entry.hpp``) calls on one shmcomm block of every rank process,
  so every test body, and each kernel it calls as a plain function, runs on a shmcomm block;
* ``#line`` keeps each file's own name and line numbers;
* ``-DSHMCOMM_PTO_ISA_SUITE`` makes the shadow's ``cpu_stub.hpp`` take the harness macros
  (``SKIP_IF_RANKS_LT``, ``HcclHostBarrier``) from the shim; gtest comes from the system
  (``libgtest-dev``).

:func:`rank_host` is what every rank process runs (``shmcomm.launch.suite`` starts the run).
"""

from __future__ import annotations

import ctypes
import json
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ArgumentError, ShmcommError
from . import build as B
from . import ptoisa
from .build import NativeBuildError
from .library import Loaded, unit

SUITES_DIR = Path("tests/cpu/comm/st/testcase")  # in a pto-isa checkout
ENTRY = "ShmcommSuiteMain"
USER_MAIN = "shmcomm_suite_user_main"
SYNC_WORDS = 64 + 64 * 16  # shmcomm_shadow/suite.hpp: SYNC_WORDS
# a quoted include of the suite harness: its file name -> shmcomm's shim of it
SHIMS = {"common.hpp": "shmcomm_shadow/cpu_suite_common.hpp",
         "urma_context.hpp": "shmcomm_shadow/cpu_suite_urma.hpp"}
_INCLUDE = re.compile(r'^(\s*#\s*include\s*)"((?:[^"]*/)?(' + "|".join(map(re.escape, SHIMS)) + r'))"', re.M)
_MAIN = re.compile(r"\bint(\s+)main(\s*)\(")
# pto-isa's CMake adds these to every compile of a CPU suite (CMAKE_CPP_COMPILE_OPTIONS)
PREINCLUDES = ("-include", "stdint.h", "-include", "stddef.h")
# gtest's static library whole (the build's command line names the unit after its flags), and
# every symbol resolved at build time: a missing library fails the build, not each rank's load
LINK = ("-Wl,--whole-archive", "-lgtest", "-Wl,--no-whole-archive", "-Wl,--no-undefined")


class SuiteError(ShmcommError):
    """A suite directory that is not one, or a suite that did not run."""


def locate(suite: str, pto_isa: str | Path | None) -> Path:
    """The suite's directory: ``suite`` itself when it is a directory, else the directory of
    that name under the checkout's ``tests/cpu/comm/st/testcase/``."""
    p = Path(suite).expanduser()
    if p.is_dir():
        return p.resolve()
    if pto_isa is None:
        raise ArgumentError(f"suite: {suite!r} is no directory; name a suite of a pto-isa checkout "
                            "with --pto-isa PATH (or SHMCOMM_PTO_ISA)")
    d = Path(pto_isa).expanduser().resolve() / SUITES_DIR / suite
    if not d.is_dir():
        base = Path(pto_isa).expanduser().resolve() / SUITES_DIR
        have = sorted(x.name for x in base.iterdir() if x.is_dir()) if base.is_dir() else []
        raise ArgumentError(f"suite: no suite {suite!r} in {base}" +
                            (f" (suites: {', '.join(have)})" if have else ""))
    return d


def sources(d: Path) -> tuple[Path, Path | None]:
    """``main.cpp`` and ``<dir>_kernel.cpp`` (if any) of suite directory ``d``, as pto-isa's
    CMake function ``pto_cpu_sim_comm_st`` picks them."""
    main = d / "main.cpp"
    if not main.is_file():
        raise SuiteError(f"suite: {d} has no main.cpp (a pto-isa CPU comm suite keeps its gtest main there)")
    kernel = d / f"{d.name}_kernel.cpp"
    return main, kernel if kernel.is_file() else None


def treated(path: Path, rename_main: bool) -> str:
    """One file of the suite as the generated unit compiles it (see the module's docstring)."""
    text = path.read_text()
    text = _INCLUDE.sub(lambda m: f'{m.group(1)}"{SHIMS[m.group(3)]}"', text)
    if rename_main:
        text, count = _MAIN.subn(rf"int\1{USER_MAIN}\2(", text, count=1)
        if count != 1:
            raise SuiteError(f"suite: {path} defines no `int main(`")
    return f'#line 1 "{path}"\n{text}\n'


def unit_text(d: Path) -> str:
    """The suite's generated unit: its kernel file, its main.cpp, shmcomm's entry."""
    main, kernel = sources(d)
    parts = [treated(kernel, False)] if kernel is not None else []
    parts += [treated(main, True), '#line 1 "<shmcomm suite entry>"',
              '#include "shmcomm_shadow/suite_entry.hpp"']
    return unit(main, [ENTRY], "\n".join(parts))


def build(suite: str, pto_isa: str | Path) -> Path:
    """Compile suite ``suite`` (a name under the checkout's CPU comm suites, or a directory)
    against ``pto_isa`` behind shmcomm's shadow; the library's path (cached per content)."""
    d = locate(suite, pto_isa)
    inc = ptoisa.check(pto_isa)
    cxx = ptoisa.pick_compiler(inc)
    flags = B.flags([], ["SHMCOMM_PTO_ISA_SUITE=1"], [*PREINCLUDES, *LINK], head=ptoisa.flags(inc, d))
    try:
        path, _ = B.build(unit_text(d), flags, cxx)
    except NativeBuildError as exc:
        if "gtest/gtest.h" in exc.output or "-lgtest" in exc.output:
            raise NativeBuildError(f"{exc}\nsuite: gtest is missing: install it (Debian/Ubuntu: "
                                   "`apt-get install libgtest-dev`)", exc.diagnostics, exc.output) from None
        raise
    return path


class _Source:  # what NativeKernel reads of its library
    def __init__(self, path: Path) -> None:
        self.source = path


def rank_host(rt: Any, path: str, window_bytes: int, args: list[str]) -> tuple[int, str]:
    """Every rank process: load the suite, give it a window of ``window_bytes`` and the run's
    suite words, run its gtest main on one block; (gtest's exit code, rank 0's report)."""
    from . import NativeKernel

    loaded = Loaded(Path(path), [ENTRY])
    entry, kinds = loaded.entries[ENTRY]
    kernel = NativeKernel(_Source(Path(path)), ENTRY, entry, kinds, loaded)  # type: ignore[arg-type]
    dll = loaded.dll
    dll.shmcomm_suite_set_args.argtypes = [ctypes.c_char_p]
    dll.shmcomm_suite_report.restype = ctypes.c_char_p
    dll.shmcomm_suite_exit_code.restype = ctypes.c_int
    window = rt.alloc((window_bytes,), np.uint8)
    sync = rt.signal_region("pto-isa suite", SYNC_WORDS)
    argv = list(args) if rt.rank == 0 else [a for a in args if not a.startswith("--gtest_output")]
    dll.shmcomm_suite_set_args("\n".join(["suite", *argv]).encode())
    a5 = int(rt.config.target == "a5")
    rt.launch(kernel, blocks=1, args=(window.ptr, window_bytes, sync, a5))
    return int(dll.shmcomm_suite_exit_code()), (dll.shmcomm_suite_report() or b"").decode()


@dataclass
class Call:
    """One harness call of a test (``ForkAndRunWithHcclRootInfo``, ``RunUrmaTestMpiLaunch``):
    each rank's result (``True`` passed, ``False`` failed) and where the suite made the call."""

    harness: str
    ranks: list[bool]
    line: str

    @property
    def failed(self) -> list[int]:
        return [r for r, ok in enumerate(self.ranks) if not ok]

    @property
    def sequential_passes(self) -> bool:
        """pto-isa's harness (``res = res || perRankFn(i)``) returns true once one rank passed."""
        return any(self.ranks)


@dataclass
class Case:
    """One gtest case: its verdict (``passed`` / ``failed`` / ``skipped``) and harness calls."""

    name: str
    verdict: str
    calls: list[Call] = field(default_factory=list)

    @property
    def only_sequential(self) -> bool:
        """Failed here, though every harness call had a passing rank: pto-isa's sequential
        harness accepts such a run."""
        bad = [c for c in self.calls if c.failed]
        return self.verdict == "failed" and bool(bad) and all(c.sequential_passes for c in bad)

    def note(self) -> str:
        """What failed, per call, and what pto-isa's sequential harness would have made of it."""
        out = []
        for c in self.calls:
            if not c.failed:
                continue
            s = f"rank {', '.join(map(str, c.failed))} failed ({c.harness} over {len(c.ranks)} ranks)"
            if c.sequential_passes:
                first = c.ranks.index(True)
                before = [r for r in c.failed if r < first]
                after = [r for r in c.failed if r > first]
                why = []
                if before:
                    why.append(f"ignores the failure of rank {', '.join(map(str, before))}")
                if after:
                    why.append(f"never runs rank {', '.join(map(str, after))}")
                s += (f"; pto-isa's sequential harness (res = res || perRankFn(i)) passes this case: it "
                      f"returns true at rank {first}, and {' and '.join(why)}")
            out.append(s)
        return "; ".join(out)


def parse_report(text: str) -> list[Case]:
    """Rank 0's report: one JSON object per test."""
    cases = []
    for line in text.splitlines():
        if not line.strip():
            continue
        d = json.loads(line)
        calls = [Call(c["harness"], [v == 1 for v in c["ranks"]], c["line"]) for c in d["calls"]]
        cases.append(Case(d["test"], d["verdict"], calls))
    return cases


def have_gtest() -> bool:
    """Whether the system has gtest's header (``libgtest-dev``)."""
    return Path("/usr/include/gtest/gtest.h").is_file() or shutil.which("gtest-config") is not None
