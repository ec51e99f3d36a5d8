"""The pipe engine seam: how one block's queued pipe work executes.

Every data-moving or ordering instruction of a block (``TLOAD``, ``TSTORE``, ``set_flag``,
``wait_flag``, ``pipe_barrier``, ``dsb``, ``dcci``) reaches the block's engine through
:mod:`shmcomm.pipe`; an engine may also set ``agent.notify_hook``, which ``TNOTIFY`` calls first
(``None`` in eager mode, so the scalar hot path pays nothing), and ``idle`` runs while a wait
blocks. Kernels never see the engine, so a
run can swap :class:`EagerEngine` (everything completes at once, as pto-isa's CPU simulator) for
the hazard engine (queued pipes, delayed visibility) without a kernel noticing.

An engine keeps per-pipe queues of issued work; the eager one retires each item on issue, so its
queues are always empty, but the structure (and the event-flag bookkeeping) is the same.
"""

from __future__ import annotations

import os
import time
from collections import deque
from typing import TYPE_CHECKING

import numpy as np

from . import _atomics as at
from .errors import Aborted, ShmcommError, WaitTimeout

if TYPE_CHECKING:
    from .agent import Agent
    from .comm import GlobalTensor
    from .pipe import Tile

PIPE_S, PIPE_V, PIPE_MTE1, PIPE_MTE2, PIPE_MTE3, PIPE_M, PIPE_ALL, PIPE_FIX = range(8)
PIPE_NAMES = ("PIPE_S", "PIPE_V", "PIPE_MTE1", "PIPE_MTE2", "PIPE_MTE3", "PIPE_M", "PIPE_ALL",
              "PIPE_FIX")
NUM_EVENTS = 8


class Engine:
    """Base engine: the bookkeeping both modes share (event flags, queues, UB reads)."""

    def __init__(self, agent: Agent) -> None:
        self.agent = agent
        self.queues: list[deque] = [deque() for _ in range(len(PIPE_NAMES))]
        self.flags: set[tuple[int, int, int]] = set()

    # -- instructions ------------------------------------------------------------------------

    def load(self, tile: Tile, src: GlobalTensor) -> None:  # MTE2: GM -> UB
        raise NotImplementedError

    def store(self, dst: GlobalTensor, tile: Tile, atomic: int) -> None:  # MTE3: UB -> GM
        raise NotImplementedError

    def set_flag(self, src: int, dst: int, event: int) -> None:
        self.flags.add((src, dst, event))

    def wait_flag(self, src: int, dst: int, event: int) -> None:
        key = (src, dst, event)
        if key not in self.flags:
            raise ShmcommError(
                f"wait_flag({PIPE_NAMES[src]}, {PIPE_NAMES[dst]}, EVENT_ID{event}) on "
                f"{self.agent.where()}: no set_flag is pending for this event; on hardware "
                "the pipe would stall forever"
            )
        self.flags.discard(key)

    def barrier(self, pipe: int) -> None:
        pass

    def dsb(self, mode: int) -> None:
        pass

    def dcci(self, addr: int, mode: int) -> None:
        pass

    # -- hooks ---------------------------------------------------------------------------------

    def start(self) -> None:
        """Called in the block's thread just before the kernel runs."""

    def stop(self) -> None:
        """Called in the block's thread when the kernel raised (``finish`` is not called)."""

    def idle(self) -> None:
        """Called while the block waits: a deferring engine may retire work here."""

    def finish(self) -> None:
        """Called when the kernel function returns: complete everything still queued."""
        self.barrier(PIPE_ALL)


class EagerEngine(Engine):
    """Every pipe operation completes when issued; stores are visible at once."""

    def load(self, tile: Tile, src: GlobalTensor) -> None:
        rows, cols = src.rows, src.cols
        tile.valid = (rows, cols)
        np.copyto(tile.array[:rows, :cols], src.view2d())

    def store(self, dst: GlobalTensor, tile: Tile, atomic: int) -> None:
        rows, cols = dst.rows, dst.cols
        data = tile.array[:rows, :cols]
        if atomic:
            atomic_add(self.agent, dst, data)
        else:
            np.copyto(dst.view2d(), data)


# --- data AtomicAdd ---------------------------------------------------------------------------

def atomic_add(agent: Agent, dst: GlobalTensor, data: np.ndarray) -> None:
    """``dst += data``, atomic with respect to every other ``atomic_add`` on the same memory,
    from any block of any rank.

    The hardware adds in the memory system; here each 4 KiB stripe of the destination window is
    guarded by a spin-lock word in the control segment (taken with a real atomic exchange, in
    ascending stripe order so two adders never deadlock) and numpy adds under the locks. Signal
    atomics never need these locks: they are single-word hardware atomics.
    """
    ctl = agent.ctl
    first = dst.ptr.offset
    last = first + dst.extent_bytes - 1
    from .control import LOCK_STRIPE_BYTES, LOCK_STRIPES

    count = last // LOCK_STRIPE_BYTES - first // LOCK_STRIPE_BYTES + 1
    stripes = sorted({(first // LOCK_STRIPE_BYTES + i) % LOCK_STRIPES
                      for i in range(min(count, LOCK_STRIPES))})
    base = ctl.lock_addr(dst.ptr.rank, 0)
    taken: list[int] = []
    try:
        for s in stripes:
            addr = base + 4 * s
            _lock(agent, addr)
            taken.append(addr)
        view = dst.view2d()
        np.add(view, data, out=view, casting="unsafe")
    finally:
        for addr in taken:
            at.store(addr, 0)


def _lock(agent: Agent, addr: int) -> None:
    if at.exchange(addr, 1) == 0:
        return
    deadline = time.perf_counter() + agent.wait_timeout
    while True:
        os.sched_yield()
        if at.load(addr) == 0 and at.exchange(addr, 1) == 0:
            return
        if at.load(agent.ctl.abort_addr):
            raise Aborted(f"TSTORE(AtomicAdd): {agent.where()} stopped by an abort while "
                          "waiting for a data lock")
        if time.perf_counter() > deadline:
            raise WaitTimeout(f"TSTORE(AtomicAdd): {agent.where()} could not take a data lock "
                              f"within wait_timeout={agent.wait_timeout:g} s")


def make_engine(agent: Agent) -> Engine:
    """The engine for the run's mode (``eager`` now; the hazard engine plugs in here)."""
    mode = agent.rt.config.mode
    if mode == "hazard":
        try:
            from .race.hazard import HazardEngine  # type: ignore[import-not-found]
        except ImportError:
            raise ShmcommError("mode='hazard' is not available in this build") from None
        return HazardEngine(agent)
    return EagerEngine(agent)
