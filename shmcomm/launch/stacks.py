"""Rank stack dumps made readable: each waiting agent's own kernel line, and stacks trimmed to
the user's frames.

A rank dumps every thread's stack with :mod:`faulthandler` (see :mod:`shmcomm.launch.stuck`),
which names a thread by its Python ident; each agent publishes that ident in its control line,
so a report can say at which line of the user's kernel each waiting block waits, and at which
line of the host the launch was made, instead of leaving the reader to find them among frames
of shmcomm, pytest and the standard library. Those frames are folded into one line per run of
them; ``SHMCOMM_FULL_STACKS=1`` shows them all.
"""

from __future__ import annotations

import os
import re
import sysconfig
from collections.abc import Iterable, Mapping

from ..core import control as C
from ..native import sites
from .deadlock import CorruptControl, agent_lines, is_waiting

FULL_ENV = "SHMCOMM_FULL_STACKS"  # "1": every frame of every stack
_THREAD_RE = re.compile(r"^(Current thread|Thread) (0x[0-9a-fA-F]+)(?: \[.*?\])? \(most recent "
                        r"call first\):\s*$")
_FRAME_RE = re.compile(r'^\s+File "(.*)", line (\d+) in (.*?)\s*$')
_PKG = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
_STDLIB = os.path.realpath(sysconfig.get_paths()["stdlib"]) + os.sep
# frames of the test runner: folded like shmcomm's own
_RUNNER_PARTS = (f"{os.sep}_pytest{os.sep}", f"{os.sep}pluggy{os.sep}", f"{os.sep}xdist{os.sep}",
                 f"{os.sep}execnet{os.sep}", f"{os.sep}pytest_timeout.py", f"{os.sep}pytest.py")

Frame = tuple[str, int, str]  # (file, line, function)
# a native kernel's block in a registered wait, as entry.hpp's handler writes it into the dump
_NATIVE_RE = re.compile(r"^shmcomm native wait: block (\d+) at (.*):(\d+)(?: pc (/.*)\+0x([0-9a-f]+))?\s*$")


def is_user_frame(path: str) -> bool:
    """Is ``path`` the user's code (not shmcomm's, the test runner's or the standard library's)?"""
    if path.startswith("<") or path.startswith(_PKG):
        return False
    if any(part in path for part in _RUNNER_PARTS):
        return False
    real = os.path.realpath(path)
    return not (real.startswith(_STDLIB) and "site-packages" not in real)


def parse_dump(text: str) -> dict[int, tuple[bool, list[Frame]]]:
    """A faulthandler dump: thread ident -> (is the dumping thread, frames innermost first)."""
    out: dict[int, tuple[bool, list[Frame]]] = {}
    frames: list[Frame] | None = None
    for line in text.splitlines():
        m = _THREAD_RE.match(line)
        if m:
            frames = []
            out[int(m.group(2), 16)] = (m.group(1) == "Current thread", frames)
            continue
        f = _FRAME_RE.match(line)
        if f and frames is not None:
            frames.append((f.group(1), int(f.group(2)), f.group(3)))
    return out


def native_waits(text: str) -> dict[int, str]:
    """Where each native kernel's block waits, from a rank's dump: block -> ``file:line``
    (a site in a library's header resolved to the user's line when its PC can be)."""
    out: dict[int, str] = {}
    for line in text.splitlines():
        m = _NATIVE_RE.match(line)
        if m is None:
            continue
        where = (m.group(2), int(m.group(3)))
        if m.group(4):
            where = sites.library_frame(m.group(4), int(m.group(5), 16), keep=False) or where
        out[int(m.group(1))] = f"{show_path(where[0])}:{where[1]} (native)"
    return out


def show_path(path: str) -> str:
    """``path`` relative to the working directory when inside it."""
    try:
        rel = os.path.relpath(path)
    except ValueError:
        return path
    return path if rel.startswith("..") else rel


def site(frames: Iterable[Frame]) -> str:
    """The innermost user frame as ``file:line in function`` ("" if none)."""
    for path, line, func in frames:
        if is_user_frame(path):
            return f"{show_path(path)}:{line} in {func}"
    return ""


def idents(ctl: C.Control, rank: int) -> dict[int | None, int]:
    """Each agent of ``rank`` (block index, ``None`` for the host) -> its thread's ident."""
    out: dict[int | None, int] = {}
    try:
        lines = agent_lines(ctl, rank)
    except CorruptControl:
        return out
    for block, line in lines:
        ident = (int(line[C.A_IDENT_HI]) & 0xFFFFFFFF) << 32 | int(line[C.A_IDENT_LO]) & 0xFFFFFFFF
        if ident:
            out[block] = ident
    return out


def waiting_agents(ctl: C.Control, live: Iterable[int]) -> list[tuple[int, int | None]]:
    """``(rank, block)`` of every agent of the ``live`` ranks that waits now."""
    now_ms = ctl.now_ms()
    out = []
    for rank in sorted(live):
        try:
            lines = agent_lines(ctl, rank)
        except CorruptControl:
            continue
        out += [(rank, block) for block, line in lines if is_waiting(line, now_ms)]
    return out


def wait_sites(ctl: C.Control, agents: Iterable[tuple[int, int | None]],
               dumps: Mapping[int, str | None],
               running: Iterable[tuple[int, int | None]] = ()) -> list[str]:
    """One line per agent: where in the user's code it waits (or, for the ``running`` ones,
    runs), and the host line of its launch."""
    running = set(running)
    out = []
    parsed = {r: parse_dump(t) for r, t in dumps.items() if t}
    native = {r: native_waits(t) for r, t in dumps.items() if t}
    by_rank: dict[int, dict[int | None, int]] = {}
    for rank, block in agents:
        threads = parsed.get(rank)
        if threads is None:
            continue
        ids = by_rank.setdefault(rank, idents(ctl, rank))
        mine = threads.get(ids.get(block, -1))
        if mine is None:
            continue
        where = site(mine[1]) or native.get(rank, {}).get(block if block is not None else -1, "")
        verb = "runs" if (rank, block) in running else "waits"
        if block is None:
            if where:
                out.append(f"    rank {rank} host {verb} at {where}")
            continue
        host = threads.get(ids.get(None, -1)) or next(
            (t for t in threads.values() if t[0]), None)
        launched = site(host[1]) if host is not None else ""
        out.append(f"    rank {rank} block {block} {verb} at {where or '(no line of yours)'}"
                   + (f", launched at {launched}" if launched else ""))
    return (["  where each agent is (innermost line of your code):", *out] if out else [])


def trim(text: str, full: bool | None = None) -> str:
    """A stack dump with the frames of shmcomm, the test runner and the standard library folded
    (one line per run of them); a thread with no frame of the user's becomes one line."""
    if full is None:
        full = os.environ.get(FULL_ENV, "") not in ("", "0")
    if full:
        return text
    out: list[str] = []
    folded = 0
    thread: list[str] = []
    user = False

    def flush() -> None:
        nonlocal folded, thread, user
        if folded:
            thread.append(f"  ... {folded} frame{'s' if folded != 1 else ''} of shmcomm, the "
                          "test runner or Python folded")
        if thread:
            if user:
                out.extend(thread)
            else:
                out.append(thread[0].rstrip(":") + ": shmcomm's own (no frame of yours)")
        folded, thread, user = 0, [], False

    for line in text.splitlines():
        if _THREAD_RE.match(line):
            flush()
            thread = [line]
            continue
        f = _FRAME_RE.match(line)
        if f is None:
            if line.strip() and not thread:
                out.append(line)
            continue
        if is_user_frame(f.group(1)):
            if folded:
                thread.append(f"  ... {folded} frame{'s' if folded != 1 else ''} of shmcomm, "
                              "the test runner or Python folded")
                folded = 0
            thread.append(line)
            user = True
        else:
            folded += 1
    flush()
    if not full:
        out.append(f"    ({FULL_ENV}=1 shows every frame)")
    return "\n".join(out)
