"""One trace for an MPI job, whatever hosts its ranks ran on.

Every rank appends its events to the run's trace path (one file under ``flock``, valid JSON after
every write, so an aborted job still leaves a trace that loads). Ranks whose host shares the
file system with world rank 0 write into rank 0's file; a host with a file system of its own
writes its own file at that path. When the run ends, rank 0 asks for the events of every rank
its file lacks: each such host's first rank sends them, shifted onto rank 0's clock when the
host runs another kernel boot (another monotonic clock; offset from a ping-pong, error at most
half a round trip). Rank 0 then rewrites the file once (:func:`shmcomm.exec.trace.finalize`):
names, metadata, flow arrows across hosts, events in time order.
"""

from __future__ import annotations

import json
from typing import Any

from ..exec.trace import finalize, load, now_us
from ..files import write_file

_TAG_CLOCK = 73
PINGS = 8


def _boot_id() -> str:
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            return f.read().strip()
    except OSError:
        return "?"


def _offset_to_root(comm: Any, rank: int, peer: int) -> float:
    """Microseconds to add to ``peer``'s clock to read rank 0's (called by both, rank 0 and
    ``peer``): the ping-pong of the least round trip."""
    if rank == 0:
        best = None
        for _ in range(PINGS):
            t0 = now_us()
            comm.send(None, dest=peer, tag=_TAG_CLOCK)
            tp = comm.recv(source=peer, tag=_TAG_CLOCK)
            t1 = now_us()
            if best is None or t1 - t0 < best[0]:
                best = (t1 - t0, (t0 + t1) / 2 - tp)
        assert best is not None  # PINGS >= 1
        comm.send(best[1], dest=peer, tag=_TAG_CLOCK)
        return best[1]
    for _ in range(PINGS):
        comm.recv(source=0, tag=_TAG_CLOCK)
        comm.send(now_us(), dest=0, tag=_TAG_CLOCK)
    return comm.recv(source=0, tag=_TAG_CLOCK)


def _events(path: str) -> list[dict[str, Any]]:
    try:
        return load(path)
    except (OSError, ValueError):
        return []


def merge_trace(comm: Any, node: Any, rank: int, path: str, metadata: dict[str, Any]) -> None:
    """Collective over ``comm`` (``node``: this host's ranks): rank 0's file at ``path`` gets
    every rank's events, then is finalized. Call after every rank's tracers flushed."""
    comm.Barrier()
    have = None
    if rank == 0:
        have = sorted({e["pid"] for e in _events(path) if "pid" in e and e.get("ph") != "M"})
    have = comm.bcast(have, root=0)
    boot = comm.bcast(_boot_id() if rank == 0 else None, root=0)
    host_ranks = node.allgather(rank)
    missing = [r for r in host_ranks if r not in have]
    sends = node.Get_rank() == 0 and rank != 0 and bool(missing)
    shifted = comm.allgather(sends and _boot_id() != boot)
    offset = 0.0
    for peer, shift in enumerate(shifted):  # the clock of every host that sends from elsewhere
        if shift and rank in (0, peer):
            offset = _offset_to_root(comm, rank, peer)
    mine = None
    if sends:
        mine = [e for e in _events(path) if e.get("pid") in missing and e.get("ph") != "M"]
        for e in mine:
            if "ts" in e:
                e["ts"] += offset
    got = comm.gather(mine, root=0)
    if rank != 0:
        return
    extra = [e for part in got if part for e in part]
    if extra:
        events = _events(path) + extra
        write_file("trace", path, json.dumps(events, default=str))
    finalize(path, metadata)
