"""The trace of a run that was cut short: a hang is when a trace is needed most.

Ranks append their blocks' events when a block ends; a run that times out, is interrupted or
loses a rank process is stopped before its hung blocks end, so their events never reach the
file (a timed-out run used to leave no trace at all). The launcher still knows what every agent
was waiting for: its wait log (:class:`shmcomm.launch.stuck.WaitLog`) keeps each agent's last
published wait. So the trace gets those waits as spans cut at the end of the run (``args.cut``),
an instant ``run cut`` on every rank, and ``otherData.incomplete`` naming why, beside whatever
events the ranks did write.
"""

from __future__ import annotations

import json
from typing import Any

from ..core import control as C
from ..core.waiting import KIND_HOST_BARRIER, KIND_SYNCALL, KIND_TTEST
from ..errors import Failure
from ..exec.trace import HOST_TID, document, load, now_us, write_document
from ..types import CMP_SYMBOLS
from .deadlock import Wait
from .stuck import WaitLog

CUT_KINDS = {"timeout": "the run timed out", "interrupt": "the run was interrupted",
             "crash": "a rank process died"}


def cut_reason(failures: list[Failure]) -> str:
    """Why the ranks could not write all their events ("" if they could)."""
    return CUT_KINDS.get(failures[0].kind, "") if failures else ""


def _name(w: Wait) -> str:
    if w.kind == KIND_HOST_BARRIER:
        return "rt.barrier"
    if w.kind == KIND_SYNCALL:
        return "SYNCALL"
    return "TTEST poll" if w.kind == KIND_TTEST else "TWAIT"


def cut_events(log: WaitLog | None, ctl: C.Control | None, end_us: float,
               ranks: range) -> list[dict[str, Any]]:
    """The waits the launcher last saw, as spans ending at ``end_us`` (or when they ended), and
    a ``run cut`` instant on every rank."""
    out: list[dict[str, Any]] = []
    if log is not None and ctl is not None:
        base = ctl.t0 * 1e6
        for (rank, block), w in sorted(log.waits.items(), key=lambda kv: (kv[0][0],
                                                                            kv[0][1] or -1)):
            start = base + w.start_ms * 1000.0
            ended = log.ended.get((rank, block))
            end = base + ended * 1000.0 if ended is not None else end_us
            args: dict[str, Any] = {"cut": ended is None, "value": w.value,
                                    "cmp": CMP_SYMBOLS[w.cmp] if w.cmp < len(CMP_SYMBOLS) else "?"}
            if w.kind not in (KIND_HOST_BARRIER, KIND_SYNCALL):
                args.update(rank=w.sig_rank, offset=w.offset)
            out.append({"ph": "X", "name": _name(w), "pid": rank,
                        "tid": HOST_TID if block is None else block, "ts": min(start, end),
                        "dur": max(end - start, 0.0), "args": args})
    for rank in ranks:
        out.append({"ph": "i", "s": "p", "name": "run cut", "pid": rank, "tid": HOST_TID,
                    "ts": end_us, "args": {}})
    return out


def finish_cut(path: str, metadata: dict[str, Any], reason: str, log: WaitLog | None,
               ctl: C.Control | None, nranks: int) -> None:
    """Write the trace of a run cut short: the ranks' events, the launcher's view of the waits,
    and ``otherData.incomplete``."""
    try:
        events = load(path)
    except (OSError, ValueError):  # nothing written (or a write cut in half): start afresh
        events = []
    events += cut_events(log, ctl, now_us(), range(nranks))
    meta = dict(metadata, incomplete=(f"{reason}: the events of agents that had not ended are "
                                      "missing; their waits, as the launcher last saw them, "
                                      "end at the cut (args.cut)"))
    write_document(path, document(events, meta))


def annotate(path: str, outcome: dict[str, Any]) -> None:
    """Add the run's outcome to the metadata of a trace a model wrote itself (schedule mode's),
    keeping what it says."""
    try:
        with open(path) as f:
            doc = json.load(f)
    except (OSError, ValueError):
        return
    if not isinstance(doc, dict) or not isinstance(doc.get("otherData", {}), dict):
        return
    meta = doc.setdefault("otherData", {})
    for key, value in outcome.items():
        meta.setdefault(key, value)
    write_document(path, doc)
