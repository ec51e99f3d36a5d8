"""The deadlock watch: "every live agent waits and no wait can be satisfied" is a deadlock.

The launcher polls it; it reads the control segment (what every agent waits on) and the words
themselves through the transport, and reports at once with the wait-for table instead of after
a long timeout.
"""

from __future__ import annotations

from typing import Any

from ..core import control as C
from ..core.waiting import KIND_HOST_BARRIER, KIND_SYNCALL, first_unsatisfied
from ..transports import Transport, Word
from ..types import CMP_FUNCS, CMP_SYMBOLS


class DeadlockWatch:
    """Declares a deadlock when two snapshots ``deadlock_grace`` apart show every live agent
    waiting on a condition memory does not satisfy, and no agent started a new wait between.

    Only a running agent can change memory, so "all wait, none satisfied, same waits" cannot
    resolve by itself (a deferring model retires its work while its agent waits; it keeps
    ``pending`` non-zero in the agent line so that such a wait is not judged too early).
    """

    def __init__(self, ctl: C.Control, transport: Transport, grace: float) -> None:
        self.ctl = ctl
        self.transport = transport
        self.grace = grace
        self.key: Any = None
        self.since = 0.0
        self.finished: list[int] = []

    def check(self, now: float, live: list[int], finished: list[int]) -> str | None:
        """The deadlock report, once ``live`` ranks (still running) have been stuck for the
        grace period; ``finished`` ranks are named in it."""
        self.finished = finished
        snap = self._snapshot(live)
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

    def _snapshot(self, live: list[int]):
        ctl = self.ctl
        waits = []
        if not live:
            return None
        for r in live:
            agents = ctl.agents_of(r)
            host = agents[C.HOST_SLOT]
            hstate = host[C.A_STATE]
            if hstate == C.WAITING:
                waits.append((r, None, host))
            elif hstate != C.JOINING:
                return None
            # the blocks of every launch running on this rank (streams run several at once)
            slots = ctl.running_slots(r)
            states = agents[slots, C.A_STATE]
            if (states == C.RUNNING).any() or (states == C.IDLE).any():
                return None
            blocked = [(r, int(agents[s, C.A_BLOCK]), agents[s]) for s in slots
                       if agents[s, C.A_STATE] == C.WAITING]
            if hstate == C.JOINING and not blocked:
                return None
            waits.extend(blocked)
        for _r, _b, line in waits:
            if line[C.A_PENDING] or self._satisfied(line):
                return None
        key = (tuple((r, b, int(line[C.A_SEQ])) for r, b, line in waits))
        return key, waits

    def _words(self, line) -> list[Word]:
        rank, off = int(line[C.A_SIG_RANK]), int(line[C.A_SIG_OFF])
        rows, cols, stride = int(line[C.A_ROWS]), int(line[C.A_COLS]), int(line[C.A_STRIDE])
        offsets = [off + 4 * (i * stride + j) for i in range(rows) for j in range(cols)]
        if line[C.A_KIND] == KIND_HOST_BARRIER or rank < 0:
            return [self.transport.control_word(self.ctl.base + o) for o in offsets]
        return [self.transport.word(rank, o) for o in offsets]

    def _satisfied(self, line) -> bool:
        cmp, value = int(line[C.A_CMP]), int(line[C.A_VALUE])
        if not 0 <= cmp < len(CMP_FUNCS):
            return True
        return first_unsatisfied(self._words(line), CMP_FUNCS[cmp], value)[0] < 0

    def _report(self, waits, stable: float) -> str:
        rows = [WAIT_HEADER, *self.rows(waits)]
        finished = self.finished
        tail = f"\n  ranks already finished: {', '.join(map(str, finished))}" if finished else ""
        return (f"deadlock: every live agent waits and no wait can be satisfied (stable for "
                f"{stable:.2f} s)\n{format_table(rows)}{tail}")

    def rows(self, waits) -> list[tuple[str, ...]]:
        """One row of the wait-for table (``WAIT_HEADER``) per ``(rank, block, line)`` wait."""
        now_ms = self.ctl.now_ms()
        rows = []
        for r, b, line in waits:
            words = self._words(line)
            cmp, value = int(line[C.A_CMP]), int(line[C.A_VALUE])
            idx, cur = first_unsatisfied(words, CMP_FUNCS[cmp], value)
            if line[C.A_KIND] == KIND_HOST_BARRIER:
                what = "host barrier (rt.barrier)"
            elif line[C.A_KIND] == KIND_SYNCALL:
                what = "SYNCALL (blocks of one launch)"
            else:
                what = f"signal rank {int(line[C.A_SIG_RANK])} offset {int(line[C.A_SIG_OFF]):#x}"
                if len(words) > 1:
                    what += f" elem {max(idx, 0)}/{len(words)}"
            rows.append((str(r), "host" if b is None else str(b), what, CMP_SYMBOLS[cmp],
                         str(value), str(cur), f"{(now_ms - int(line[C.A_START])) / 1000:.2f} s"))
        return rows


WAIT_HEADER = ("rank", "block", "waits on", "cmp", "expected", "current", "waiting")


def format_table(rows: list[tuple[str, ...]]) -> str:
    """``rows`` as left-aligned columns, indented by two spaces."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join("  " + "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True))
                     for row in rows)
