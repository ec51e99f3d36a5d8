"""Chrome trace JSON of a run, in every mode (open it in Perfetto / chrome://tracing, or summarize
it with ``python -m shmcomm trace FILE``).

``pid`` is the rank, ``tid`` the block; the host code of a rank is the track ``HOST_TID``. Events:

* ``TWAIT``: a complete event (``X``) from start to return, with the words' values it saw;
  ``TNOTIFY``: a zero-length ``X`` with the value and op; ``TTEST`` an instant;
* ``TPUT`` / ``TGET`` / ... : ``X`` with size in bytes, source and destination rank and offset;
* ``set_flag`` / ``wait_flag``: instants naming the pipes and event id;
* ``launch``: one ``X`` per launch on the host track (kernel name, blocks), ``kernel`` one per block;
* flow arrows (``s`` -> ``f``, category ``release``) from each ``TNOTIFY`` to the ``TWAIT`` it
  released: the last notify on a word the wait watched, before the wait returned;
* hazard mode adds pipe issue / retirement, remote-store flushes, line clobbers and checker
  reports (:mod:`shmcomm.exec.hazard.model`). Work queued on a pipe is a slice on that pipe's
  own track (``tid`` :func:`pipe_tid`), from when the pipe started it to its retirement, so the
  slices of one track nest and never partly overlap;
* schedule mode stamps the same events with the step count instead of microseconds (the same
  run gives the same bytes) and adds an instant per step (:mod:`shmcomm.exec.schedule.record`).

While a run goes, every rank process appends its blocks' events to the one file, under an
exclusive ``flock``, in the JSON array format (valid JSON after every write, so a killed run
still leaves a trace that loads). When the run ends the launcher calls :func:`finalize`, which
rewrites it once as a JSON object: process and thread names once, the run's metadata, the flow
arrows, events in time order.
"""

from __future__ import annotations

import bisect
import contextlib
import fcntl
import json
import os
import time
from collections import defaultdict
from collections.abc import Callable
from typing import Any

from ..core.observer import BlockObserver, Observer, RankObserver
from ..errors import ArgumentError
from ..files import OutputError, load_json, write_file
from ..types import CMP_SYMBOLS, PIPE_NAMES

HOST_TID = 1000  # the host track of a rank (blocks are 0..63)
PIPE_TID_BASE = 2000  # the pipe tracks of a rank's blocks: PIPE_TID_BASE + 8 * block + pipe
PIPE_TRACKS = PIPE_NAMES  # PTO's numbering
_FLOW_CAT = "release"


def pipe_tid(block: int, pipe: str) -> int:
    """The track of ``pipe``'s queued work in ``block`` (a pipe name of :data:`PIPE_TRACKS`)."""
    return PIPE_TID_BASE + 8 * block + PIPE_TRACKS.index(pipe)


def track_name(tid: int) -> str:
    """The thread name of a track: ``host``, ``block B`` or ``block B PIPE_X``."""
    if tid == HOST_TID:
        return "host"
    if tid >= PIPE_TID_BASE:
        block, pipe = divmod(tid - PIPE_TID_BASE, 8)
        return f"block {block} {PIPE_TRACKS[pipe]}"
    return f"block {tid}"


def _track_order(tid: int) -> int:
    """Blocks in order, each followed by its pipe tracks, then the host."""
    if tid == HOST_TID:
        return 1 << 20
    if tid >= PIPE_TID_BASE:
        block, pipe = divmod(tid - PIPE_TID_BASE, 8)
        return block * 16 + 1 + pipe
    return tid * 16


def now_us() -> float:
    """Microseconds on the system-wide monotonic clock (comparable across rank processes)."""
    return time.monotonic_ns() / 1000.0


def _words(sig: Any) -> list[int]:
    """Byte offsets of the words a ``Signal`` / ``Signal2D`` covers (at most 64)."""
    p = sig.ptr
    rows, cols = getattr(sig, "rows", 1), getattr(sig, "cols", 1)
    stride = getattr(sig, "row_stride", cols)
    return [p.offset + 4 * (r * stride + c) for r in range(rows) for c in range(cols)][:64]


class Tracer:
    """The events of one block (or of a rank's host track), written by :meth:`flush`."""

    __slots__ = ("path", "run_id", "rank", "block", "events", "spans", "clock", "pipe_end")

    def __init__(self, path: str, run_id: str, rank: int, block: int) -> None:
        self.path, self.run_id, self.rank, self.block = path, run_id, rank, block
        self.events: list[dict[str, Any]] = []
        self.spans: list[tuple[str, float, dict[str, Any]]] = []  # open TWAIT / copy spans
        self.clock: Callable[[], float] = now_us
        self.pipe_end: dict[int, float] = {}  # pipe track -> end of its last slice

    def now(self) -> float:
        """The trace's clock: microseconds, or the step count in schedule mode."""
        return self.clock()

    def use_clock(self, clock: Callable[[], float]) -> None:
        """Stamp from now on with ``clock`` (schedule mode's step count); open spans restart."""
        self.clock = clock
        t = clock()
        self.spans = [(name, t, args) for name, _t0, args in self.spans]

    def instant(self, name: str, **args: Any) -> None:
        self.events.append({"ph": "i", "s": "t", "name": name, "pid": self.rank, "tid": self.block,
                            "ts": self.clock(), "args": args})

    def span(self, name: str, start_us: float, end_us: float | None = None, **args: Any) -> None:
        end = self.clock() if end_us is None else end_us
        self.events.append({"ph": "X", "name": name, "pid": self.rank, "tid": self.block,
                            "ts": start_us, "dur": max(end - start_us, 0.0), "args": args})

    def pipe_span(self, pipe: str, name: str, issued: float, **args: Any) -> None:
        """Queued work that retires now, on ``pipe``'s track. A pipe runs its queue in order, so
        the slice starts when it was issued or when the pipe's previous work retired, whichever
        is later: the slices of a track follow each other instead of partly overlapping."""
        tid = pipe_tid(self.block, pipe)
        end = self.clock()
        start = min(max(issued, self.pipe_end.get(tid, issued)), end)
        self.pipe_end[tid] = end
        self.events.append({"ph": "X", "name": name, "pid": self.rank, "tid": tid, "ts": start,
                            "dur": max(end - start, 0.0), "args": dict(args, issued=issued)})

    # -- the seam's scalar instructions, as every model that traces records them ---------------

    def notify(self, sig: Any, value: int, op: int) -> None:
        p = sig.ptr
        self.span("TNOTIFY", self.clock(), None, rank=p.rank, offset=p.offset, value=value,
                  op="Set" if op else "AtomicAdd")
        self.events[-1]["dur"] = 0.0

    def wait(self, sig: Any, value: int, cmp: str) -> None:
        p = sig.ptr
        args: dict[str, Any] = {"rank": p.rank, "offset": p.offset, "value": value, "cmp": cmp}
        words = _words(sig)
        if len(words) > 1:
            args["offsets"] = words
        self.spans.append(("TWAIT", self.clock(), args))

    def waited(self, sig: Any) -> None:
        if self.spans:
            name, t0, args = self.spans.pop()
            args["seen"] = [w.load() for w in sig.words][:64]
            self.span(name, t0, **args)

    def test(self, sig: Any, value: int, cmp: str) -> None:
        p = sig.ptr
        self.instant("TTEST", rank=p.rank, offset=p.offset, value=value, cmp=cmp,
                     seen=[w.load() for w in sig.words][:64])

    def copy_begin(self, op: str, dst: Any, src: Any) -> None:
        self.spans.append((op, self.clock(), {
            "bytes": dst.rows * dst.cols * dst.dtype.itemsize, "dtype": str(dst.dtype),
            "dst_rank": dst.ptr.rank, "dst_offset": dst.ptr.offset,
            "src_rank": src.ptr.rank, "src_offset": src.ptr.offset}))

    def copy_end(self, op: str) -> None:
        if self.spans:
            name, t0, args = self.spans.pop()
            self.span(name, t0, **args)

    def flag(self, name: str, src: str, dst: str, event: int) -> None:
        self.instant(name, src=src, dst=dst, event=event)

    def flush(self) -> None:
        """Append the collected events to the trace file (one locked write; valid JSON after)."""
        if not self.events:
            return
        body = ",\n".join(json.dumps(e, default=str) for e in self.events)
        self.events = []
        header = "[\n" + json.dumps({"ph": "M", "name": "shmcomm_run", "pid": 0,
                                     "args": {"run": self.run_id}})
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            size = os.fstat(fd).st_size
            if size < len(header) + 3 or os.pread(fd, len(header), 0).decode(errors="replace") != header:
                os.ftruncate(fd, 0)  # empty, or left by another run
                os.pwrite(fd, (header + "\n]\n").encode(), 0)
                size = len(header) + 3
            os.pwrite(fd, (",\n" + body + "\n]\n").encode(), size - 3)  # over the closing "\n]\n"
        finally:
            os.close(fd)  # closing releases the lock


class HostTrace:
    """A rank's host track: one span per launch (kernel name, blocks); flushed after each."""

    def __init__(self, path: str, run_id: str, rank: int) -> None:
        self.tracer = Tracer(path, run_id, rank, HOST_TID)
        self.t0 = 0.0
        self.kernel = "?"
        self.blocks = 0

    def launch_start(self) -> None:
        self.t0, self.blocks = now_us(), 0

    def block(self, agent: Any) -> None:
        self.kernel = getattr(agent.kernel, "__qualname__", None) or repr(agent.kernel)
        self.blocks += 1

    def launch_end(self, launch: int) -> None:
        self.tracer.span(f"launch {self.kernel}", self.t0, launch=launch, blocks=self.blocks)
        self.tracer.flush()


class _TraceBlock(BlockObserver):
    """A block's instructions, as the trace records them in every mode (the semantics add
    their own events to the same tracer: hazard mode's pipe slices, flushes, clobbers)."""

    def __init__(self, agent: Any, tracer: Tracer) -> None:
        super().__init__(agent)
        self.tracer = tracer

    def notify(self, sig: Any, value: int, op: int) -> None:
        self.tracer.notify(sig, value, op)

    def wait(self, sig: Any, value: int, cmp: int) -> None:
        self.tracer.wait(sig, value, CMP_SYMBOLS[cmp])

    def waited(self, sig: Any, value: int, cmp: int) -> None:
        self.tracer.waited(sig)

    def test(self, sig: Any, value: int, cmp: int) -> None:
        self.tracer.test(sig, value, CMP_SYMBOLS[cmp])

    def copy_begin(self, op: str, dst: Any, src: Any) -> None:
        self.tracer.copy_begin(op, dst, src)

    def copy_end(self, op: str) -> None:
        self.tracer.copy_end(op)

    def set_flag(self, src: int, dst: int, event: int) -> None:
        self.tracer.flag("set_flag", PIPE_NAMES[src], PIPE_NAMES[dst], event)

    def wait_flag(self, src: int, dst: int, event: int) -> None:
        self.tracer.flag("wait_flag", PIPE_NAMES[src], PIPE_NAMES[dst], event)

    def finish(self) -> None:  # (on the block's turn: a replay closes it at the same step)
        close_block(self.tracer, failed=False)

    def stop(self) -> None:
        close_block(self.tracer, failed=True)


class _TraceRank(RankObserver):
    """A rank's tracks: its host's launches (unless the scheduler writes the host's track) and
    a tracer per block, which it hands the block's semantics too (``agent.tracer``)."""

    def __init__(self, rt: Any, host_track: bool) -> None:
        super().__init__(rt)
        self.host_trace = (HostTrace(rt.config.trace, rt.ctl.segment.name, rt.rank) if host_track
                     else None)

    def block(self, agent: Any) -> _TraceBlock | None:
        tracer = agent.tracer = block_tracer(agent)
        if self.host_trace is not None:
            self.host_trace.block(agent)
        return None if tracer is None else _TraceBlock(agent, tracer)

    def launch_start(self) -> None:
        if self.host_trace is not None:
            self.host_trace.launch_start()

    def launch_end(self) -> None:
        if self.host_trace is not None:
            self.host_trace.launch_end(self.rt.launches)


class TraceObserver(Observer):
    """The run's Chrome trace (``Config.trace``): every rank appends its blocks' events to the
    file while the run goes; the launcher finalizes it. ``host_track``: whether the ranks write
    their hosts' launch spans (a scheduled run's scheduler writes the host track itself)."""

    name = "trace"

    def __init__(self, config: Any, host_track: bool = True) -> None:
        super().__init__(config)
        self.host_track = host_track

    def rank(self, rt: Any) -> _TraceRank:
        return _TraceRank(rt, self.host_track)


def block_tracer(agent: Any) -> Tracer | None:
    """The block's tracer when the run writes a trace (``Config.trace``), with its kernel span
    opened; ``None`` otherwise."""
    cfg = agent.rt.config
    if not cfg.trace:
        return None
    t = Tracer(cfg.trace, agent.ctl.segment.name, agent.rank, agent.block_idx)
    kernel = getattr(agent.kernel, "__qualname__", None) or repr(agent.kernel)
    t.spans.append((f"kernel {kernel}", now_us(), {"launch": agent.rt.launches}))
    return t


def close_block(t: Tracer, failed: bool) -> None:
    """The kernel returned (or raised): close its span (and any open one) and write the events."""
    while t.spans:  # innermost first, the kernel's own span last
        name, t0, args = t.spans.pop()
        if failed:
            args["unfinished"] = True
        t.span(name, t0, **args)
    t.flush()


# --- after the run -------------------------------------------------------------------------------

def load(path: str) -> list[dict[str, Any]]:
    """The events of a trace file, either format (array or ``{"traceEvents": [...]}``).
    A file that cannot be read, nests too deep, or has an event of the wrong shape raises
    :class:`~shmcomm.errors.ArgumentError` (a ``ValueError``) naming the event and field."""
    doc = load_json("trace", path)
    events = doc.get("traceEvents") if isinstance(doc, dict) else doc
    if not isinstance(events, list):
        raise ArgumentError(f"trace: {path!r} is not a Chrome trace (no event list)")
    for i, e in enumerate(events):
        problem = _malformed(e)
        if problem:
            raise ArgumentError(f"trace: {path!r} is not a well-formed Chrome trace: event {i} "
                                f"{problem}")
    return events


_NUMBER, _INT, _TEXT = (int, float), (int,), (str,)
_FIELDS = (("ts", _NUMBER), ("dur", _NUMBER), ("pid", _INT), ("tid", _INT), ("name", _TEXT),
           ("ph", _TEXT), ("args", (dict,)))
_ARGS = (("rank", _INT), ("block", _INT), ("offset", _INT), ("offsets", (list,)),
         ("released_by", (dict,)), ("message", _TEXT))


def _malformed(e: Any) -> str | None:
    """What is wrong with one trace event (the fields the summary and the flows read)."""
    if not isinstance(e, dict):
        return f"must be an object, got {json.dumps(e, default=str)[:40]}"
    for fields, where, obj in ((_FIELDS, "field", e), (_ARGS, "field args.", e.get("args", {}))):
        for key, types in fields:
            v = obj.get(key)
            if v is not None and (not isinstance(v, types) or isinstance(v, bool)):
                kind = " or ".join(t.__name__ for t in types)
                return (f"{where}{key!r} must be {'an' if kind[0] in 'aeiou' else 'a'} {kind}, "
                        f"got {json.dumps(v, default=str)[:40]}").replace("field args.'",
                                                                         "field 'args.")
    if e.get("ph") in ("X", "i") and ("name" not in e or "ts" not in e):
        return "(an instruction or span) needs the fields 'name' and 'ts'"
    by = e.get("args", {}).get("released_by")
    if by is not None and not all(isinstance(by.get(k), int) for k in ("rank", "block")):
        return "field 'args.released_by' must name an integer rank and block"
    return None


def flows(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Flow arrows from each notify to every wait it released: the last notify on a watched word
    that happened before the wait returned; for a counting wait (``>=`` / ``>`` on one word fed
    by ``AtomicAdd``), every add it counted (:func:`_counted`)."""
    notifies: dict[tuple[int, int], list[tuple[float, dict]]] = defaultdict(list)
    for e in events:
        if e.get("name") == "TNOTIFY" and e.get("ph") in ("X", "i"):
            a = e.get("args", {})
            notifies[(a.get("rank"), a.get("offset"))].append((e["ts"], e))
    times: dict[tuple[int, int], list[float]] = {}
    for key, lst in notifies.items():
        lst.sort(key=lambda x: x[0])
        times[key] = [t for t, _ in lst]
    out: list[dict[str, Any]] = []
    # (waiter, word) -> (the first add its counting waits have not counted, the sum counted)
    before: dict[tuple, tuple[int, int]] = {}
    waits = [w for w in events if w.get("name") == "TWAIT" and w.get("ph") == "X"
             and not w.get("args", {}).get("cut")]  # a wait the run's end cut: nothing released it
    for w in sorted(waits, key=lambda w: w["ts"] + w.get("dur", 0.0)):
        a = w.get("args", {})
        end = w["ts"] + w.get("dur", 0.0)
        best = None
        for off in a.get("offsets") or [a.get("offset")]:
            key = (a.get("rank"), off)
            lst = notifies.get(key, [])
            i = bisect.bisect_right(times.get(key, []), end)
            if i and (best is None or lst[i - 1][0] > best["ts"]):
                best = lst[i - 1][1]
        if best is None:
            continue
        a["released_by"] = {"rank": best["pid"], "block": best["tid"], "value": best["args"].get("value")}
        for n in _counted(w, best, notifies, times, before, end):
            out.append({"ph": "s", "id": len(out) // 2 + 1, "cat": _FLOW_CAT,
                        "name": "notify -> wait", "pid": n["pid"], "tid": n["tid"], "ts": n["ts"]})
            out.append({"ph": "f", "bp": "e", "id": len(out) // 2 + 1, "cat": _FLOW_CAT,
                        "name": "notify -> wait", "pid": w["pid"], "tid": w["tid"],
                        "ts": max(w["ts"], end - 0.001)})
    return out


def _counted(w: dict[str, Any], best: dict[str, Any], notifies: dict, times: dict,
             before: dict, end: float) -> list[dict[str, Any]]:
    """The notifies a wait counted (see :func:`flows`): ``[best]`` unless it is a counting wait,
    which takes, in time order, the adds its agent's earlier waits on the word did not count,
    until they make up its count (an add counts for one wait only)."""
    a = w.get("args", {})
    value = a.get("value")
    if a.get("offsets") or a.get("cmp") not in (">=", ">") or not isinstance(value, int):
        return [best]
    key = (a.get("rank"), a.get("offset"))
    slot = (w["pid"], w["tid"], *key)
    i, held = before.get(slot, (0, 0))
    need = value - held + (1 if a.get("cmp") == ">" else 0)
    lst = notifies.get(key, [])
    stop = bisect.bisect_right(times.get(key, []), end)
    out: list[dict[str, Any]] = []
    total = 0
    while i < stop and total < need:
        n = lst[i][1]
        i += 1
        if n.get("args", {}).get("op") == "AtomicAdd":
            out.append(n)
            total += int(n["args"].get("value") or 0)
    before[slot] = (i, held + total)
    return out or [best]


def _order(e: dict[str, Any]) -> tuple:
    """Time order, ties broken by track and content: the same events give the same bytes."""
    return (e.get("ts", 0.0), e.get("pid", 0), _track_order(e.get("tid", 0)), e.get("ph", ""),
            str(e.get("name", "")), -e.get("dur", 0.0), json.dumps(e.get("args", {}), sort_keys=True,
                                                                    default=str))


def document(events: list[dict[str, Any]], metadata: dict[str, Any],
             names: dict[int, str] | None = None) -> dict[str, Any]:
    """The trace as one JSON object: process and thread names once, the run's metadata, flow
    arrows from each notify to the wait it released, events in a deterministic time order.
    ``names`` renames processes (pid -> name; default ``rank N``)."""
    body = [e for e in events if e.get("ph") != "M"]
    body.sort(key=_order)
    body += flows(body)
    tracks = sorted({(e["pid"], e["tid"]) for e in body if "pid" in e and "tid" in e})
    meta: list[dict[str, Any]] = []
    for pid in sorted({p for p, _ in tracks}):
        name = (names or {}).get(pid, f"rank {pid}")
        meta.append({"ph": "M", "name": "process_name", "pid": pid, "args": {"name": name}})
        meta.append({"ph": "M", "name": "process_sort_index", "pid": pid, "args": {"sort_index": pid}})
    for pid, tid in tracks:
        meta.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid,
                     "args": {"name": track_name(tid)}})
        meta.append({"ph": "M", "name": "thread_sort_index", "pid": pid, "tid": tid,
                     "args": {"sort_index": _track_order(tid)}})
    return {"traceEvents": meta + body, "displayTimeUnit": "ms", "otherData": metadata}


def write_document(path: str, doc: dict[str, Any]) -> None:
    """Write ``doc`` aside and rename it over ``path`` in one step (:mod:`shmcomm.files`: never
    through a link, never over another user's file; :class:`~shmcomm.files.OutputError` if
    refused)."""
    write_file("trace", path, json.dumps(doc, default=str, sort_keys=True) + "\n")


def finalize(path: str, metadata: dict[str, Any]) -> None:
    """Rewrite the run's trace once it is over (see :func:`document`). A file that is missing
    (nothing traced) or not a trace is left as it is."""
    try:
        events = load(path)
    except (OSError, ValueError):
        return
    with contextlib.suppress(OutputError):  # the trace stays as the ranks wrote it
        write_document(path, document(events, metadata))
