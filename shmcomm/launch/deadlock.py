"""The deadlock watch: "every live agent waits and no wait can be satisfied" is a deadlock.

The launcher polls it; it reads the control segment (what every agent waits on) and the words
themselves through the transport, and reports at once with the wait-for table instead of after
a long timeout. A ``TTEST`` loop is running code (it may give up, as pto-isa's bounded polls
do): it is no deadlock; the stuck-agent report names it at the wait or run timeout.

Nothing a rank wrote is trusted: every field is range-checked before it is used as an index, an
offset or a length, so a rank that scribbles over the control segment gets a clear report
(:class:`CorruptControl`), never an ``IndexError``, a segfault or a hang in the launcher.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..config import MAX_BLOCKS
from ..core import control as C
from ..core.waiting import KIND_HOST_BARRIER, KIND_SYNCALL, KIND_TTEST
from ..errors import ShmcommError
from ..transports import Transport
from ..types import CMP_FUNCS, CMP_SYMBOLS

# a polling agent counts as waiting while its last failed TTEST is at most this old (and at most
# a quarter of deadlock_grace: an agent that tested once and went on computing is no waiter)
POLL_FRESH_MS = 250
_I32 = np.dtype(np.int32)
_WAIT_KINDS = (0, KIND_HOST_BARRIER, KIND_TTEST, KIND_SYNCALL)
_CONTROL_KINDS = (KIND_HOST_BARRIER, KIND_SYNCALL)  # words of the control segment


class CorruptControl(ShmcommError):
    """A rank's line in the control segment holds a value no shmcomm agent writes."""

    def __init__(self, rank: int, block: int | None, message: str, evidence: bytes = b"") -> None:
        self.rank, self.block, self.evidence = rank, block, evidence
        super().__init__(message)


class Wait:
    """One agent's published wait, checked: ``values()`` reads the waited words now."""

    __slots__ = ("rank", "block", "line", "sig_rank", "offset", "rows", "cols", "stride", "cmp",
                 "value", "kind", "start_ms", "_ctl", "_transport")

    def __init__(self, ctl: C.Control, transport: Transport, rank: int, block: int | None,
                 line: np.ndarray) -> None:
        self.rank, self.block, self.line = rank, block, line
        self._ctl, self._transport = ctl, transport
        where = f"rank {rank} " + ("host" if block is None else f"block {block}")
        self.kind = int(line[C.A_KIND])
        self.cmp = int(line[C.A_CMP])
        self.value = int(line[C.A_VALUE])
        self.start_ms = int(line[C.A_START])
        self.sig_rank = int(line[C.A_SIG_RANK])
        self.offset = ctl.offset_of(line)
        self.rows, self.cols, self.stride = (int(line[C.A_ROWS]), int(line[C.A_COLS]),
                                             int(line[C.A_STRIDE]))

        def bad(field: str, value: int, allowed: str) -> CorruptControl:
            return CorruptControl(rank, block, (
                f"corrupted control segment: the agent line of {where} holds {field}={value}, "
                f"outside {allowed}; a rank wrote over shmcomm's control memory (a stray write "
                "through a raw address?)"), line.tobytes())

        if self.kind not in _WAIT_KINDS:
            raise bad("wait kind", self.kind, f"{{{', '.join(map(str, _WAIT_KINDS))}}}")
        if not 0 <= self.cmp < len(CMP_FUNCS):
            raise bad("comparison", self.cmp, f"[0, {len(CMP_FUNCS)})")
        if not (1 <= self.rows and 1 <= self.cols <= self.stride):
            raise bad("rows x cols / stride", self.rows * self.cols,
                      f"rows >= 1 and 1 <= cols <= stride (got {self.rows}x{self.cols} / "
                      f"{self.stride})")
        words = (self.rows - 1) * self.stride + self.cols
        if self.kind in _CONTROL_KINDS:
            limit = ctl.segment.size
        else:
            if not 0 <= self.sig_rank < ctl.nranks:
                raise bad("signal rank", self.sig_rank, f"[0, {ctl.nranks})")
            limit = transport.size
        if self.offset % 4 or not 0 <= self.offset <= limit - 4 * words:
            raise bad("signal offset", self.offset,
                      f"4-byte aligned [0, {limit - 4 * words}] for {words} words")

    def values(self) -> np.ndarray:
        """The waited words as a rows x cols int32 array (read now, in sweep order)."""
        words = (self.rows - 1) * self.stride + self.cols
        if self.kind in _CONTROL_KINDS:
            flat = self._ctl.control_words(self.rank, self.offset // 4, words)
        elif self.sig_rank in self._transport.unmapped:  # a window on another host
            flat = np.empty(words, _I32)
            self._transport.get(self.sig_rank, self.offset, 4 * words, flat.reshape(1, words))
        else:
            flat = self._transport.view(self.sig_rank, self.offset, (words,), _I32)
        return np.lib.stride_tricks.as_strided(flat, (self.rows, self.cols),
                                               (4 * self.stride, 4), writeable=False).copy()

    def first_unsatisfied(self) -> tuple[int, int]:
        """Index and value of the first word failing the condition, or ``(-1, 0)``."""
        vals = self.values().ravel()
        bad = np.flatnonzero(~CMP_FUNCS[self.cmp](vals, self.value))
        return (int(bad[0]), int(vals[bad[0]])) if bad.size else (-1, 0)

    def describe(self) -> str:
        if self.kind == KIND_HOST_BARRIER:
            return "host barrier (rt.barrier)"
        if self.kind == KIND_SYNCALL:
            return "SYNCALL (blocks of one launch)"
        what = f"signal rank {self.sig_rank} offset {self.offset:#x}"
        if self.kind == KIND_TTEST:
            what = "TTEST poll on " + what
        n = self.rows * self.cols
        if n > 1:
            what += f" elem {max(self.first_unsatisfied()[0], 0)}/{n}"
        return what


def agent_lines(ctl: C.Control, rank: int) -> list[tuple[int | None, np.ndarray]]:
    """``(block or None for the host, line)`` of every agent of ``rank``'s running launches
    (several with streams; the block count and block indices checked), host last."""
    agents = ctl.agents_of(rank)
    nb = ctl.rank_field(rank, C.R_BLOCKS)
    if not 0 <= nb <= MAX_BLOCKS:
        raise CorruptControl(rank, None, (
            f"corrupted control segment: rank {rank}'s line holds blocks={nb}, outside "
            f"[0, {MAX_BLOCKS}]; a rank wrote over shmcomm's control memory"), str(nb).encode())
    lines: list[tuple[int | None, np.ndarray]] = []
    b: int | None  # a block index; None for the host's line
    for s in ctl.running_slots(rank):
        b = int(agents[s, C.A_BLOCK])
        if not 0 <= b < MAX_BLOCKS:
            raise CorruptControl(rank, None, (
                f"corrupted control segment: the agent line in rank {rank}'s slot {s} holds "
                f"block index {b}, outside [0, {MAX_BLOCKS}); a rank wrote over shmcomm's "
                "control memory"), agents[s].tobytes())
        lines.append((b, agents[s]))
    lines.append((None, agents[C.HOST_SLOT]))
    for b, line in lines:
        if not 0 <= int(line[C.A_STATE]) < len(C.AGENT_STATES):
            raise CorruptControl(rank, b, (
                f"corrupted control segment: the agent line of rank {rank} "
                f"{'host' if b is None else f'block {b}'} holds state={int(line[C.A_STATE])}, "
                f"outside [0, {len(C.AGENT_STATES)}); a rank wrote over shmcomm's control memory"),
                line.tobytes())
    return lines


def is_waiting(line: np.ndarray, now_ms: int, fresh_ms: int = POLL_FRESH_MS) -> bool:
    """Whether an agent line shows a wait now: registered, or a TTEST loop still testing.
    ``now_ms`` is read before the line: a poller that tested again in between stamped a later
    millisecond (on a loaded box, many later), which is as fresh as a stamp can be."""
    state = int(line[C.A_STATE])
    if state == C.WAITING:
        return True
    return state == C.POLLING and abs(now_ms - int(line[C.A_POLL])) <= fresh_ms


class DeadlockWatch:
    """Declares a deadlock when two snapshots ``deadlock_grace`` apart show every live agent
    waiting on a condition memory does not satisfy, and no agent started a new wait between.

    Only a running agent can change memory, so "all wait, none satisfied, same waits" cannot
    resolve by itself (a deferring model retires its work while its agent waits; it keeps
    ``pending`` non-zero in the agent line so that such a wait is not judged too early).
    A line that fails its range checks twice in a row, unchanged, raises
    :class:`CorruptControl` (once could be a torn read of a line being rewritten).
    """

    def __init__(self, ctl: C.Control, transport: Transport, grace: float) -> None:
        self.ctl = ctl
        self.transport = transport
        self.grace = grace
        self.key: Any = None
        self.since = 0.0
        self.finished: list[int] = []
        self._suspect: Any = None

    def check(self, now: float, live: list[int], finished: list[int]) -> str | None:
        """The deadlock report, once ``live`` ranks (still running) have been stuck for the
        grace period; ``finished`` ranks are named in it."""
        self.finished = finished
        try:
            snap = self._snapshot(live)
        except CorruptControl as exc:
            seen = (exc.rank, exc.block, exc.evidence)
            if seen == self._suspect:
                raise
            self._suspect = seen
            self.key = None
            return None
        self._suspect = None
        if snap is None:
            self.key = None
            return None
        key, waits = snap
        if key != self.key:
            self.key, self.since = key, now
            return None
        if now - self.since < self.grace:
            return None
        return self._report(waits, now - self.since)

    def _snapshot(self, live: list[int]) -> tuple[tuple[tuple[int, int | None, int], ...], list[Wait]] | None:
        ctl = self.ctl
        if not live:
            return None
        waits: list[Wait] = []
        for r in live:
            if ctl.rank_field(r, C.R_HELPERS) > 0:
                return None  # a host helper thread (no agent of ours) may still notify
            lines = agent_lines(ctl, r)
            host = lines[-1][1]
            hstate = int(host[C.A_STATE])
            # a TTEST loop (POLLING) is running code that may give up: never part of a deadlock
            if hstate == C.WAITING:
                waits.append(Wait(ctl, self.transport, r, None, host))
            elif hstate != C.JOINING:
                return None
            # the blocks of every launch running on this rank (streams run several at once)
            blocked = []
            for b, line in lines[:-1]:
                if int(line[C.A_STATE]) == C.WAITING:
                    blocked.append(Wait(ctl, self.transport, r, b, line))
                elif int(line[C.A_STATE]) not in (C.DONE, C.FAILED):
                    return None  # running (or not started): it may still change memory
            if hstate == C.JOINING and not blocked:
                return None
            waits.extend(blocked)
        for w in waits:
            if w.line[C.A_PENDING] or w.first_unsatisfied()[0] < 0:
                return None
        key = tuple((w.rank, w.block, int(w.line[C.A_SEQ])) for w in waits)
        return key, waits

    def rows(self, waits: list[tuple[int, int | None, np.ndarray]]) -> list[tuple[str, ...]]:
        """Rows of the wait-for table for ``(rank, block, line)`` waits (each line range-checked:
        :class:`CorruptControl` on a bad one)."""
        return wait_rows([Wait(self.ctl, self.transport, r, b, line) for r, b, line in waits],
                         self.ctl.now_ms())

    def _report(self, waits: list[Wait], stable: float) -> str:
        table = wait_table(waits, self.ctl.now_ms())
        finished = self.finished
        tail = f"\n  ranks already finished: {', '.join(map(str, finished))}" if finished else ""
        return (f"deadlock: every live agent waits and no wait can be satisfied (stable for "
                f"{stable:.2f} s)\n{table}{tail}")


WAIT_HEADER = ("rank", "block", "waits on", "cmp", "expected", "current", "waiting")


def wait_rows(waits: list[Wait], now_ms: int, ended: dict | None = None) -> list[tuple[str, ...]]:
    """One row of the wait-for table (``WAIT_HEADER``) per wait: what its words hold now.
    ``ended`` maps ``(rank, block)`` of waits that are over (a timeout ended them) to when."""
    rows: list[tuple[str, ...]] = []
    for w in waits:
        idx, cur = w.first_unsatisfied()
        end = (ended or {}).get((w.rank, w.block))
        age = f"{((now_ms if end is None else end) - w.start_ms) / 1000:.2f} s"
        rows.append((str(w.rank), "host" if w.block is None else str(w.block), w.describe(),
                     CMP_SYMBOLS[w.cmp], str(w.value), str(cur) if idx >= 0 else "(holds)",
                     age if end is None else age + ", ended"))
    return rows


def format_table(rows: Sequence[tuple[str, ...]]) -> str:
    """``rows`` as left-aligned columns, indented by two spaces."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join("  " + "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True))
                     for row in rows)


def wait_table(waits: list[Wait], now_ms: int, ended: dict | None = None) -> str:
    """The wait-for table: who waits on which words, for what, and what they hold now."""
    return format_table([WAIT_HEADER, *wait_rows(waits, now_ms, ended)])
