"""The CPU a scheduled run keeps its ranks on, claimed for the run.

A scheduled run executes one agent at a time and passes the turn at every scheduling point:
the holder wakes the next agent and goes to sleep. With the two on one CPU that is a context
switch (3 us on a 2-core virtual machine); with the next agent on another CPU the kernel has to
wake that CPU (30 us there: an inter-processor interrupt), and rank processes pinned round robin
put most of a run's hand-offs across CPUs. So the launcher pins every rank of a scheduled run to
one CPU, and it is free to: only one agent runs at any moment.

Two scheduled runs on one CPU would share it while another CPU idles, so a run claims its CPU
for as long as it lasts: a Unix socket bound to an abstract name per CPU (``bind`` fails while
another process holds it; the claim ends when the socket is closed or its process dies, and no
file is ever made). With every CPU claimed the run spreads its ranks as other runs do.
"""

from __future__ import annotations

import os
import socket
import weakref

# the names claims are bound to (abstract namespace: nothing on disk, gone with the socket); a
# test that asserts which CPU a run gets sets a private one, apart from the machine's other runs
NAMESPACE = "\0shmcomm-turn-cpu-"
_held: weakref.WeakSet[CpuClaim] = weakref.WeakSet()  # this process's claims (closed in a child)


class CpuClaim:
    """A claim on ``cpu`` for one run; :meth:`release` ends it (so does this process's end)."""

    def __init__(self, cpu: int, sock: socket.socket) -> None:
        self.cpu = cpu
        self._sock: socket.socket | None = sock
        _held.add(self)

    def release(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None
        _held.discard(self)


def claim_cpu(cpus: list[int]) -> CpuClaim | None:
    """The first CPU of ``cpus`` that no other run holds, now claimed; ``None`` when every one
    is taken (or sockets are unavailable)."""
    start = os.getpid() % len(cpus) if cpus else 0  # launchers started together try apart
    for i in range(len(cpus)):
        cpu = cpus[(start + i) % len(cpus)]
        try:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        except OSError:
            return None
        try:
            sock.bind(f"{NAMESPACE}{cpu}")
        except OSError:  # EADDRINUSE: another run holds it
            sock.close()
            continue
        return CpuClaim(cpu, sock)
    return None


def _forget_in_child() -> None:
    """A forked rank must not hold its launcher's claim: it could outlive the run."""
    for claim in list(_held):
        claim.release()


os.register_at_fork(after_in_child=_forget_in_child)
