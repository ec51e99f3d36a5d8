"""Chrome trace JSON (loadable in Perfetto / chrome://tracing): a track per rank and block.

Every rank process appends its blocks' events to the one file named by ``Config.trace``, under an
exclusive ``flock``, in the JSON array format: each write replaces the closing bracket, so the
file is valid JSON after every write. ``pid`` is the rank, ``tid`` the block; TWAIT / TPUT / TGET are
complete events (``X``) from start to return, TNOTIFY, pipe issues and checker reports are
instants, pipe retirements and remote-store flushes are complete events from issue to
retirement. The first line names the run (its control segment), so a file left by an earlier
run is truncated instead of appended to.
"""

from __future__ import annotations

import fcntl
import json
import os
import time
from typing import Any


def now_us() -> float:
    """Microseconds on the system-wide monotonic clock (comparable across rank processes)."""
    return time.monotonic_ns() / 1000.0


class Tracer:
    """The events of one block, written to the run's trace file by :meth:`flush`."""

    __slots__ = ("path", "run_id", "rank", "block", "events")

    def __init__(self, path: str, run_id: str, rank: int, block: int) -> None:
        self.path, self.run_id, self.rank, self.block = path, run_id, rank, block
        self.events: list[dict[str, Any]] = [
            {"ph": "M", "name": "process_name", "pid": rank, "args": {"name": f"rank {rank}"}},
            {"ph": "M", "name": "thread_name", "pid": rank, "tid": block,
             "args": {"name": f"block {block}"}},
        ]

    def instant(self, name: str, **args: Any) -> None:
        self.events.append({"ph": "i", "s": "t", "name": name, "pid": self.rank, "tid": self.block,
                            "ts": now_us(), "args": args})

    def span(self, name: str, start_us: float, end_us: float | None = None, **args: Any) -> None:
        end = now_us() if end_us is None else end_us
        self.events.append({"ph": "X", "name": name, "pid": self.rank, "tid": self.block,
                            "ts": start_us, "dur": max(end - start_us, 0.0), "args": args})

    def flush(self) -> None:
        """Append the collected events to the trace file (one locked write; valid JSON after)."""
        if not self.events:
            return
        body = ",\n".join(json.dumps(e, default=str) for e in self.events)
        self.events = []
        header = "[\n" + json.dumps({"ph": "M", "name": "shmcomm_run", "pid": 0,
                                     "args": {"run": self.run_id}})
        # the launcher made this file for the run (shmcomm.launch.tracefile): never follow a link
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
