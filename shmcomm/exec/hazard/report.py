"""Hazard reports: what an exact checker raises, what an advisory one records, and the kernel
line each points at.

An exact checker's report fails the run (:class:`HazardReport`). An advisory checker's finding
is kept in its rank's :class:`Advice` and travels with the run: the launcher prints it as a
"likely cause" beside a failure that something else proved (a race report, a wrong result, a
deadlock or a timeout); a run whose only findings are advisory passes.
"""

from __future__ import annotations

import os
import sys
import threading
from types import FrameType
from typing import TYPE_CHECKING

import numpy as np

from ...errors import ShmcommError

if TYPE_CHECKING:
    from ...core.agent import Agent
    from ...core.model import RankModel

_PKG_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))) + os.sep
_KERNELS_DIR = _PKG_DIR + "kernels" + os.sep
_CATALOGUE_DIR = _PKG_DIR + os.path.join("stress", "catalogue") + os.sep  # user code, not runtime
_THREADING = threading.__file__
_NUMPY_DIR = os.path.dirname(os.path.abspath(np.__file__)) + os.sep  # its frames are not the user's


class HazardReport(ShmcommError):
    """A hazard checker fired; ``checker`` is its name (see ``CHECKERS``)."""

    def __init__(self, checker: str, message: str) -> None:
        self.checker = checker
        super().__init__(message)


MAX_ADVICE = 8  # findings kept per rank: the first ones explain a failure, the rest repeat them


class Advice:
    """The advisory findings of one rank in one run: each once (by checker and kernel line),
    at most :data:`MAX_ADVICE`. Blocks are threads: ``list.append`` and the set's ``add`` are
    atomic under the GIL, and a duplicate slipping past the check only costs a line."""

    def __init__(self) -> None:
        self.texts: list[str] = []
        self.seen: set[tuple[str, str]] = set()

    def add(self, checker: str, site: str, text: str) -> None:
        key = (checker, site)
        if key in self.seen or len(self.texts) >= MAX_ADVICE:
            return
        self.seen.add(key)
        self.texts.append(text)


def advice_of(model: RankModel) -> list[str]:
    """The advisory findings a rank model holds (an observer's: those of the model it wraps)."""
    advice = model.advice
    return list(advice.texts) if isinstance(advice, Advice) else []


def user_site(frame: FrameType | None = None) -> str | None:
    """``file:line`` of the innermost frame of the user's kernel on the stack (plus the library
    kernel it called, if any), or ``None`` when there is none (the block is returning, or runs a
    library kernel launched by itself). The bug catalogue's kernels count as user code."""
    f: FrameType | None = frame if frame is not None else sys._getframe(1)
    inner = ""
    while f is not None:
        fn = f.f_code.co_filename
        if fn == _THREADING:
            break
        if fn.startswith(_NUMPY_DIR):  # numpy reading an array for the user: the user's line
            pass
        elif not fn.startswith(_PKG_DIR) or fn.startswith(_CATALOGUE_DIR):
            site = f"{fn}:{f.f_lineno}"
            return f"{site} (in {inner})" if inner else site
        if fn.startswith(_KERNELS_DIR) and not inner:
            inner = f"{f.f_code.co_name} at {os.path.basename(fn)}:{f.f_lineno}"
        f = f.f_back
    return None


def kernel_site(agent: Agent | None = None, frame: FrameType | None = None) -> str:
    """Where the block is in the user's kernel: :func:`user_site`; without a user frame, the
    innermost line of a library kernel (one launched by itself, as the host helpers do), else
    the definition of the kernel function of ``agent``'s launch (the block is returning)."""
    f: FrameType | None = frame if frame is not None else sys._getframe(1)
    site = user_site(f)
    if site is not None:
        return site
    while f is not None and f.f_code.co_filename != _THREADING:
        fn = f.f_code.co_filename
        if fn.startswith(_KERNELS_DIR):
            return f"{fn}:{f.f_lineno} (in {f.f_code.co_name})"
        f = f.f_back
    code = getattr(getattr(agent, "kernel", None), "__code__", None)
    if code is not None:
        return f"{code.co_filename}:{code.co_firstlineno} (when kernel {code.co_name} returned)"
    return "<unknown>"


def report(agent: Agent, checker: str, detail: str, offset: int | None = None,
           sig_rank: int | None = None, site: str | None = None) -> HazardReport:
    """Build the report of ``checker`` for ``agent`` at ``site`` (default: the kernel's line)."""
    return HazardReport(checker, message(agent, checker, detail, offset, sig_rank,
                                         site or kernel_site(agent)))


def message(agent: Agent, checker: str, detail: str, offset: int | None, sig_rank: int | None,
            where: str) -> str:
    """The text of ``checker``'s finding at ``where`` (also put in the trace, if any)."""
    cfg = agent.rt.config
    sig = "" if offset is None else f", signal offset {offset:#x}" + (
        "" if sig_rank is None else f" of rank {sig_rank}")
    msg = (f"hazard [{checker}] at {where}: {agent.where()}{sig}: {detail} "
           f"(seed {cfg.seed}, hazards={cfg.hazards})")
    tracer = agent.pipes.tracer
    if tracer is not None:
        tracer.instant(f"hazard [{checker}]", message=msg)
    return msg
