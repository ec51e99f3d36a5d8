"""Hazard checkers: rules that a kernel's synchronization breaks, reported with file:line.

Names (each report starts with ``hazard [name]``):

``stale-at-launch``  a TWAIT on this rank's signal matrix is satisfied by a value the word
                     already held when the launch started (a relaunch without
                     ``rt.reset_signals()``). Only checked when the launch-time snapshot is clean:
                     no peer rank had started this launch when it was taken.
``phase-reuse``      a block waits ``GE`` / ``GT`` on a slot it already waited on in this launch,
                     with a threshold the earlier wait already reached: the second round waits
                     for nothing (the seed's ``DeviceBarrier`` called twice ignores ``phase``).
                     A ``Set`` to the slot by any block of the rank in between forgets the earlier
                     wait.
``line-shared``      a Set's 64-byte line changed under its cached copy before the write-back:
                     Set slots of different writers share a line (pto-isa #322); the line model
                     (``lines``) must be on.
``notify-unfenced``  TNOTIFY after MTE3 work (TSTORE, TPUT) without ``pipe_barrier`` (drain) and,
                     if the stores went to another rank, ``dsb(DSB_DDR)`` (fence).
``flag-unbalanced``  a ``set_flag`` never consumed by ``wait_flag`` when the kernel returns
                     (``wait_flag`` without ``set_flag`` raises at once, in every mode).
``event-twice``      ``set_flag`` on an event that is already set and not yet waited for.
``arrival-count``    a kernel of :mod:`shmcomm.kernels` called with a block count
                     (``num_comm_blocks`` / ``num_blocks``) other than the launch's real one: its
                     intra-rank arrival count hangs (more) or is reached early (fewer).

Checks of waits need TWAIT's arguments; hazard mode observes them with a per-thread profile
function (``sys.setprofile``) on the block threads, so the TWAIT fast path stays untouched.
"""

from __future__ import annotations

import os
import sys
from types import FrameType
from typing import TYPE_CHECKING, Any

from .. import _atomics as at
from .. import control as C
from ..errors import ShmcommError

if TYPE_CHECKING:
    from ..agent import Agent
    from ..context import RankRuntime

CHECKERS = ("stale-at-launch", "phase-reuse", "line-shared", "notify-unfenced", "flag-unbalanced",
            "event-twice", "arrival-count")
_PKG_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
_KERNELS_DIR = _PKG_DIR + "kernels" + os.sep
_CATALOGUE_DIR = _PKG_DIR + "catalogue" + os.sep  # the bug catalogue is user code, not runtime


class HazardReport(ShmcommError):
    """A hazard checker fired; ``checker`` is its name (see :data:`CHECKERS`)."""

    def __init__(self, checker: str, message: str) -> None:
        self.checker = checker
        super().__init__(message)


def kernel_site(frame: FrameType | None = None) -> str:
    """``file:line`` of the first frame outside the shmcomm runtime (plus the shmcomm kernel it
    called); the bug catalogue's kernels count as user code."""
    f = frame if frame is not None else sys._getframe(1)
    inner = ""
    while f is not None:
        fn = f.f_code.co_filename
        if not fn.startswith(_PKG_DIR) or fn.startswith(_CATALOGUE_DIR):
            site = f"{fn}:{f.f_lineno}"
            return f"{site} (in {inner})" if inner else site
        if fn.startswith(_KERNELS_DIR) and not inner:
            inner = f"{f.f_code.co_name} at {os.path.basename(fn)}:{f.f_lineno}"
        f = f.f_back
    return inner or "<unknown>"


def report(agent: Agent, checker: str, detail: str, offset: int | None = None,
           sig_rank: int | None = None, site: str | None = None) -> HazardReport:
    """Build the report of ``checker`` for ``agent`` at ``site`` (default: the kernel's line)."""
    cfg = agent.rt.config
    where = site or kernel_site(sys._getframe(2))
    sig = "" if offset is None else f", signal offset {offset:#x}" + (
        "" if sig_rank is None else f" of rank {sig_rank}")
    msg = (f"hazard [{checker}] at {where}: {agent.where()}{sig}: {detail} "
           f"(seed {cfg.seed}, hazards={cfg.hazards})")
    tracer = getattr(agent.pipes, "tracer", None)
    if tracer is not None:
        tracer.instant(f"hazard [{checker}]", message=msg)
    return HazardReport(checker, msg)


class LaunchState:
    """What the checkers of one rank remember about the current launch (on ``rt``)."""

    __slots__ = ("launch", "stale", "sets")

    def __init__(self, launch: int, stale: dict[int, int] | None) -> None:
        self.launch = launch
        self.stale = stale  # offset -> non-zero value at launch; None when the snapshot is unsafe
        self.sets: dict[tuple[int, int], int] = {}  # (rank, offset) -> Sets by this rank's blocks


def launch_snapshot(rt: RankRuntime) -> None:
    """Before a hazard-mode launch: remember this rank's non-zero signal words.

    Taken before this rank publishes its launch count, and kept only if no peer had published
    the same launch count by the end of the snapshot: then no peer block of this launch can have
    notified yet, so every non-zero word is left over from earlier. (Of two racing ranks at
    least one always gets a clean snapshot.)
    """
    sigs = rt.signals.copy()  # peers may write while we look: scan a copy
    nz = sigs.nonzero()[0]
    stale = {int(i) * 4: int(sigs[i]) for i in nz}
    ctl = rt.ctl
    clean = all(at.load(ctl.rank_addr(r, C.R_LAUNCHES)) < rt.launches
                for r in range(rt.nranks) if r != rt.rank)
    rt.__dict__["_hazard_launch"] = LaunchState(rt.launches, stale if clean else None)


def launch_state(rt: RankRuntime) -> LaunchState:
    st = rt.__dict__.get("_hazard_launch")
    if st is None or st.launch != rt.launches:
        st = rt.__dict__["_hazard_launch"] = LaunchState(rt.launches, None)
    return st


def wait_args(sig: Any) -> tuple[int, int, tuple] | None:
    """``(rank, offset, word addresses)`` of a Signal / Signal2D, or None for anything else."""
    from ..comm import Signal, Signal2D

    t = type(sig)
    if t is Signal:
        return sig.ptr.rank, sig.ptr.offset, (sig.cp,)
    if t is Signal2D:
        return sig.ptr.rank, sig.ptr.offset, sig.addrs
    return None
