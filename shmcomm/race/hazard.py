"""``HazardEngine``: the pipe engine of hazard mode (sub-models ``pipes``, ``visibility``,
``lines``, ``jitter``, ``checkers``; see :mod:`shmcomm.race`).

Pipes. ``TLOAD`` queues on ``PIPE_MTE2``, ``TSTORE`` on ``PIPE_MTE3``; each pipe retires in
order, an item no earlier than its seeded due time (``hazard_delay`` x U(0.5, 1.5)) unless a sync
forces it. A load reads GM and fills the tile when it retires, a store reads the tile when it
retires. ``set_flag(src, dst, e)`` records how much ``src`` work was issued; ``wait_flag`` then
makes ``dst`` wait for it: for a queued ``dst`` (MTE2 / MTE3) a fence item joins ``dst``'s
queue, so later ``dst`` work retires only after that ``src`` work (the scalar unit does not block);
for any other ``dst`` (S, V, M, ...: work the Python code does at once) the ``src`` work retires
now. ``pipe_barrier(p)`` retires everything issued to ``p`` (every pipe for ``PIPE_ALL``).
TNOTIFY and signal reads are scalar and happen at once. While a wait blocks, ``idle`` retires
what is due; the kernel's end retires everything. While work is pending the agent's
``A_PENDING`` word is 1, so the deadlock watch waits for the retirement instead of reporting.

Visibility and lines: :mod:`shmcomm.race.visibility`. Jitter: :mod:`shmcomm.race.jitter`.
Checkers: :mod:`shmcomm.race.checkers`. Trace: :mod:`shmcomm.race.trace`.
"""

from __future__ import annotations

import random
import sys
import time
from typing import TYPE_CHECKING, Any

import numpy as np

from .. import _atomics as at
from .. import control as C
from ..config import parse_hazards
from ..engine import PIPE_ALL, PIPE_MTE2, PIPE_MTE3, PIPE_NAMES, Engine, atomic_add
from ..wait import CMP_FUNCS, CMP_SYMBOLS, first_unsatisfied
from .checkers import kernel_site, launch_state, report, wait_args
from .jitter import Jitter
from .trace import Tracer, now_us
from .visibility import LineModel, RemoteStores

if TYPE_CHECKING:
    from ..agent import Agent
    from ..pipe import Tile
    from ..tensor import GlobalTensor

_LOAD, _STORE, _FENCE = 0, 1, 2
_KIND_NAMES = ("TLOAD", "TSTORE", "fence")
_QUEUED = (PIPE_MTE2, PIPE_MTE3)
_DSB_ALL, _DSB_DDR = 0, 1
_GE, _GT = 3, 2
_perf = time.perf_counter



def _codes() -> tuple:
    from .. import comm

    return comm.TWAIT.__code__, comm.TPUT.__code__, comm.TGET.__code__


_COUNT_PARAMS = ("num_comm_blocks", "num_blocks")


def _count_codes() -> dict:
    """Code objects of the shmcomm kernels that take an arrival (block) count -> parameter."""
    from .. import kernels

    found = {}
    for name in dir(kernels):
        code = getattr(getattr(kernels, name), "__code__", None)
        if code is not None:
            params = code.co_varnames[:code.co_argcount]
            for p in _COUNT_PARAMS:
                if p in params:
                    found[code] = p
    return found


class HazardEngine(Engine):
    """Queued pipes, delayed remote visibility, line model, jitter and checkers of one block."""

    def __init__(self, agent: Agent) -> None:
        super().__init__(agent)
        cfg = agent.rt.config
        models = parse_hazards(cfg.hazards)
        self.m_pipes = "pipes" in models
        self.m_check = "checkers" in models
        self.delay = cfg.hazard_delay
        self.rng = random.Random(agent.rng.getrandbits(64))  # due times: one stream
        self.vis = RemoteStores(self._apply) if "visibility" in models else None
        self.lines = LineModel(self._clobber) if "lines" in models else None
        # jitter and idle draw from their own stream: how often a wait idles depends on timing
        self.jitter = Jitter(random.Random(agent.rng.getrandbits(64))) if "jitter" in models else None
        self.tracer = (Tracer(cfg.trace, agent.ctl.segment.name, agent.rank, agent.block_idx)
                       if cfg.trace else None)
        self.issued = [0] * len(PIPE_NAMES)
        self.retired = [0] * len(PIPE_NAMES)
        self.marks: dict[tuple[int, int, int], tuple[int, str]] = {}
        self.pending_addr = agent.line + 4 * C.A_PENDING
        self.pending = False
        self.mte3 = 0  # checker state: 0 clean, 1 stores not drained, 2 drained but not fenced
        self.mte3_remote = False
        self.waited: dict[tuple, tuple[int, int]] = {}  # slot -> (threshold reached, notifies)
        self.launch = launch_state(agent.rt)
        self.spans: list[tuple[str, float, Any]] = []
        if self.lines or self.m_check or self.jitter or self.tracer:
            agent.notify_hook = self._on_notify
        self.profiling = self.m_check or self.tracer is not None
        if self.profiling:
            self.codes = _codes()
            self.count_codes = _count_codes() if self.m_check else {}

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> None:
        at.store(self.pending_addr, 0)
        if self.profiling:
            sys.setprofile(self._profile)

    def finish(self) -> None:
        try:
            self.barrier(PIPE_ALL)
            if self.vis:
                self.vis.flush()
            if self.lines:
                self.lines.flush()
            self._sync_pending()
            if self.m_check and self.flags:
                src, dst, ev = key = min(self.flags)
                raise report(self.agent, "flag-unbalanced",
                             f"set_flag({PIPE_NAMES[src]}, {PIPE_NAMES[dst]}, EVENT_ID{ev}) is never "
                             "consumed by wait_flag before the kernel returns",
                             site=self.marks.get(key, (0, ""))[1] or None)
        finally:
            if self.profiling:
                sys.setprofile(None)
            if self.tracer:
                self.tracer.flush()

    def stop(self) -> None:
        """The kernel raised: drop the profile function and write what the trace holds."""
        if self.profiling:
            sys.setprofile(None)
        if self.tracer:
            self.tracer.flush()

    # -- pipe instructions -------------------------------------------------------------------

    def load(self, tile: Tile, src: GlobalTensor) -> None:
        tile.valid = (src.rows, src.cols)
        if self.jitter:
            self.jitter.point()
        if self.m_pipes:
            self._enqueue(PIPE_MTE2, (_LOAD, self._due(), now_us() if self.tracer else 0.0,
                                      tile, src, 0))
        else:
            np.copyto(tile.array[:src.rows, :src.cols], src.view2d())

    def store(self, dst: GlobalTensor, tile: Tile, atomic: int) -> None:
        self.mte3 = 1
        if dst.ptr.rank != self.agent.rank:
            self.mte3_remote = True
        if self.jitter:
            self.jitter.point()
        if self.m_pipes:
            self._enqueue(PIPE_MTE3, (_STORE, self._due(), now_us() if self.tracer else 0.0,
                                      dst, tile, atomic))
        else:
            self._complete_store(dst, tile.array[:dst.rows, :dst.cols], atomic)

    def set_flag(self, src: int, dst: int, event: int) -> None:
        key = (src, dst, event)
        if self.m_check and key in self.flags:
            raise report(self.agent, "event-twice",
                         f"set_flag({PIPE_NAMES[src]}, {PIPE_NAMES[dst]}, EVENT_ID{event}) while the "
                         f"same event set at {self.marks[key][1]} is not yet waited for (a 1-bit "
                         "flag: the second set is lost)")
        self.flags.add(key)
        self.marks[key] = (self.issued[src], kernel_site() if self.m_check else "")
        if self.jitter:
            self.jitter.point()

    def wait_flag(self, src: int, dst: int, event: int) -> None:
        super().wait_flag(src, dst, event)
        mark = self.marks.pop((src, dst, event), (0, ""))[0]
        if self.jitter:
            self.jitter.point()
        if src not in _QUEUED or self.retired[src] >= mark:
            if dst not in _QUEUED:  # a pipe-to-pipe event drains nothing for the scalar unit
                self._after_sync(src)
            return
        if dst in _QUEUED:  # a pipe waits, not the scalar unit: a fence in dst's queue
            q = self.queues[src]
            due = max(item[1] for item in list(q)[:mark - self.retired[src]])
            self._enqueue(dst, (_FENCE, due, now_us() if self.tracer else 0.0, src, mark, 0))
        else:
            self._retire_upto(src, mark)
            self._after_sync(src)

    def barrier(self, pipe: int) -> None:
        if self.jitter:
            self.jitter.point()
        pipes = _QUEUED if pipe == PIPE_ALL else (pipe,) if pipe in _QUEUED else ()
        for p in pipes:
            self._retire_upto(p, self.issued[p])
        # fences may have queued nothing new, but a drained MTE2 can still hold a fence on MTE3
        if pipe == PIPE_ALL:
            while any(self.queues[p] for p in _QUEUED):
                for p in _QUEUED:
                    self._retire_upto(p, self.issued[p])
        if pipe in (PIPE_ALL, PIPE_MTE3):
            self._after_sync(PIPE_MTE3)
        self._sync_pending()

    def dsb(self, mode: int) -> None:
        if self.jitter:
            self.jitter.point()
        if mode in (_DSB_ALL, _DSB_DDR):
            if self.vis:
                n = self.vis.flush()
                if n and self.tracer:
                    self.tracer.instant("dsb flush", stores=n)
            if self.lines:
                self.lines.flush()
            if self.mte3 == 2:
                self.mte3, self.mte3_remote = 0, False
            self._sync_pending()

    def dcci(self, addr: int, mode: int) -> None:
        if self.lines:
            self.lines.flush(addr=addr if mode == 0 and addr else None)
            self._sync_pending()

    def idle(self) -> None:
        if self.jitter:
            self.jitter.point()
        if self.pending:
            self._tick()

    # -- queues ------------------------------------------------------------------------------

    def _due(self) -> float:
        return _perf() + self.delay * (0.5 + self.rng.random())

    def _enqueue(self, pipe: int, item: tuple) -> None:
        self.queues[pipe].append(item)
        self.issued[pipe] += 1
        if self.tracer:
            self.tracer.instant(f"{_KIND_NAMES[item[0]]} issue", pipe=PIPE_NAMES[pipe])
        self._tick()

    def _tick(self) -> None:
        """Retire what is due (pipe heads in order, remote stores, line write-backs)."""
        now = _perf()
        for p in _QUEUED:
            q = self.queues[p]
            while q and q[0][1] <= now:
                self._retire_one(p)
        if self.vis and self.vis.items:
            self.vis.flush(now)
        if self.lines and self.lines.lines:
            self.lines.flush(now)
        self._sync_pending()

    def _retire_one(self, pipe: int) -> None:
        kind, _due, t0, a, b, c = self.queues[pipe].popleft()
        self.retired[pipe] += 1
        if kind == _LOAD:
            np.copyto(a.array[:b.rows, :b.cols], b.view2d())
        elif kind == _STORE:
            self._complete_store(a, b.array[:a.rows, :a.cols], c)
        else:
            self._retire_upto(a, b)
        if self.tracer:
            self.tracer.span(f"{_KIND_NAMES[kind]} on {PIPE_NAMES[pipe]}", t0)

    def _retire_upto(self, pipe: int, mark: int) -> None:
        while self.retired[pipe] < mark:
            self._retire_one(pipe)

    def _after_sync(self, src: int) -> None:
        if src == PIPE_MTE3 and self.mte3 == 1 and self.retired[PIPE_MTE3] == self.issued[PIPE_MTE3]:
            self.mte3 = 2

    def _sync_pending(self) -> None:
        pending = bool(self.queues[PIPE_MTE2] or self.queues[PIPE_MTE3]
                       or (self.vis and self.vis.items) or (self.lines and self.lines.lines))
        if pending != self.pending:
            self.pending = pending
            at.store(self.pending_addr, int(pending))

    # -- stores and visibility ---------------------------------------------------------------

    def _complete_store(self, dst: GlobalTensor, data: np.ndarray, atomic: int) -> None:
        if self.vis is not None and dst.ptr.rank != self.agent.rank:
            self.vis.add(_perf() + self.delay * (0.5 + self.rng.random()), dst, data.copy(), atomic)
        else:
            self._apply(dst, data, atomic)

    def _apply(self, dst: GlobalTensor, data: np.ndarray, atomic: int) -> None:
        if atomic:
            atomic_add(self.agent, dst, data)
        else:
            np.copyto(dst.view2d(), data)

    def _clobber(self, addr: int, stale: int, cur: int, site: str) -> bool:
        rank, off = self._locate(addr)
        if self.m_check:
            raise report(self.agent, "line-shared",
                         f"the Set at {site} cached the 64-byte line at offset {off & ~63:#x}; "
                         f"before its write-back the word at {off:#x} changed {stale} -> {cur} (another "
                         f"writer on the same line): the write-back restores {stale} (pto-isa #322; "
                         "give each writer's Set slot its own 64-byte line)", off, rank)
        if self.tracer:
            self.tracer.instant("line clobber", rank=rank, offset=off, stale=stale, lost=cur)
        return True

    def _locate(self, addr: int) -> tuple[int, int]:
        w = self.agent.rt.windows
        for r, base in enumerate(w.bases):
            if base <= addr < base + w.size:
                return r, addr - base
        return -1, addr

    # -- scalar hooks: TNOTIFY, TWAIT / TPUT / TGET (profile) --------------------------------

    def _on_notify(self, sig: Any, op: int) -> None:
        if self.jitter:
            self.jitter.point()
        ptr = sig.ptr
        if self.tracer:
            self.tracer.instant("TNOTIFY", rank=ptr.rank, offset=ptr.offset,
                                op="Set" if op else "AtomicAdd")
        if self.m_check:
            key = (ptr.rank, ptr.offset)
            sets = self.launch.sets
            sets[key] = sets.get(key, 0) + 1
            if self.mte3 == 1 or (self.mte3 == 2 and self.mte3_remote):
                what = ("TSTORE / TPUT work may still be queued on PIPE_MTE3 (no pipe_barrier or "
                        "wait_flag(PIPE_MTE3, ...) drained it)" if self.mte3 == 1 else
                        "stores to another rank were drained but not fenced (no dsb(DSB_DDR))")
                raise report(self.agent, "notify-unfenced",
                             f"TNOTIFY after {what}: the peer may see the signal before the data; "
                             "use pipe_barrier(PIPE_ALL) + dsb(DSB_DDR) first", ptr.offset, ptr.rank)
        if self.lines:
            if op:
                # the hook gets (sig, op); the Set's value is TNOTIFY's argument, one frame up
                value = sys._getframe(1).f_locals.get("value", 0)
                self.lines.fill(sig.addr, int(value), _perf() + self.delay * (0.5 + self.rng.random()),
                                kernel_site() if self.m_check else "")
            else:
                self.lines.touch(sig.addr)
            self._sync_pending()

    def _profile(self, frame: Any, event: str, arg: Any) -> None:
        if event == "call":
            code = frame.f_code
            codes = self.codes
            if code is codes[0]:
                self._wait_start(frame.f_locals)
            elif (code is codes[1] or code is codes[2]) and self.tracer:
                self.spans.append(("TPUT" if code is codes[1] else "TGET", now_us(), None))
            elif code in self.count_codes:
                self._check_count(code, frame.f_locals)
        elif event == "return" and self.tracer:
            code = frame.f_code
            codes = self.codes
            if (code is codes[0] or code is codes[1] or code is codes[2]) and self.spans:
                name, t0, args = self.spans.pop()
                self.tracer.span(name, t0, **(args or {}))

    def _check_count(self, code: Any, loc: dict) -> None:
        param = self.count_codes[code]
        n = loc.get(param)
        real = self.agent.block_num
        if n is not None and n != real:
            how = "can never be reached (a hang)" if n > real else "is reached before every block arrived"
            raise report(self.agent, "arrival-count",
                         f"{code.co_name}({param}={n}) in a launch of {real} blocks: its intra-rank "
                         f"arrival count {how}")

    def _wait_start(self, loc: dict) -> None:
        sig, value, cmp = loc.get("sig"), loc.get("value"), loc.get("cmp")
        wa = wait_args(sig)
        ok = wa is not None and type(value) is int and isinstance(cmp, int) and 0 <= cmp < 6
        if self.tracer:
            self.spans.append(("TWAIT", now_us(), {"rank": wa[0], "offset": wa[1], "value": value,
                                                   "cmp": CMP_SYMBOLS[cmp]} if ok else None))
        if not ok or not self.m_check:
            return
        rank, off, addrs = wa
        fn = CMP_FUNCS[cmp]
        if first_unsatisfied(addrs, fn, value)[0] >= 0:
            self._record_wait(rank, off, len(addrs), cmp, value)
            return  # it really waits: nothing already satisfied it
        what = f"TWAIT({CMP_SYMBOLS[cmp]} {value})"
        st = self.launch
        if rank == self.agent.rank and st.stale is not None:
            base = addrs[0].value
            stale = [st.stale.get(off + a.value - base, 0) for a in addrs]
            if any(stale) and all(fn(v, value) for v in stale):
                raise report(self.agent, "stale-at-launch",
                             f"{what} is satisfied by {stale if len(stale) > 1 else stale[0]}, "
                             "which the signal already held when this launch started (left from an "
                             "earlier launch: rt.reset_signals() missing, or a threshold that does "
                             "not count launches)", off, rank)
        if cmp in (_GE, _GT):
            key = (rank, off, len(addrs))
            prev = self.waited.get(key)
            thr = value if cmp == _GE else value + 1
            if prev is not None and prev[1] == st.sets.get((rank, off), 0) and thr <= prev[0]:
                raise report(self.agent, "phase-reuse",
                             f"{what} is satisfied before it starts: this block already waited on "
                             f"this slot for >= {prev[0]} earlier in this launch, so this round waits "
                             "for nothing (a second phase needs its own slot, a reset, or a higher "
                             "threshold)", off, rank)
        self._record_wait(rank, off, len(addrs), cmp, value)

    def _record_wait(self, rank: int, off: int, n: int, cmp: int, value: int) -> None:
        if cmp not in (_GE, _GT):
            return
        key = (rank, off, n)
        thr = value if cmp == _GE else value + 1
        sets = self.launch.sets.get((rank, off), 0)
        prev = self.waited.get(key)
        if prev is not None and prev[1] == sets:
            thr = max(thr, prev[0])
        self.waited[key] = (thr, sets)


__all__ = ["HazardEngine", "kernel_site"]

