"""The crash note of a rank process that died in native code.

A native kernel's signal handler (``shmcomm/entry.hpp``) writes, before the rank dies of the
signal, which rank and block crashed, after which kernel line, and a native backtrace (library
and offset of each frame, resolved here to ``file:line`` with ``addr2line``), to
standard error and to ``<tmp>/shmcomm-native-crash-<pid>`` (created exclusive, mode 0600, never
through a symlink). The launcher takes that note when it records the rank's death, so the
run's report names the rank, the block and the C++ line.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile

MAX_NOTE_CHARS = 6000
_BLOCK = re.compile(r" in rank \d+ block (\d+)")
_FRAME = re.compile(r"^(?P<head>\s*#\d+ )(?P<lib>/\S+)\+0x(?P<off>[0-9a-f]+)(?P<rest>.*)$")
MAX_RESOLVED = 12  # frames resolved to file:line (the kernel's are the first ones)


def prefix() -> str:
    """The note's path without the pid (what the handler appends the pid to)."""
    return os.path.join(tempfile.gettempdir(), "shmcomm-native-crash-")


def take(pid: int) -> tuple[str, int | None] | None:
    """The note of rank process ``pid`` and the block it names (removed once read), or
    ``None`` when it left none. A file that is not the user's own is ignored."""
    path = prefix() + str(pid)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if st.st_uid != os.getuid():
            return None
        text = os.read(fd, MAX_NOTE_CHARS).decode(errors="replace").strip()
    finally:
        os.close(fd)
        try:
            os.unlink(path)
        except OSError:
            pass
    m = _BLOCK.search(text)
    return resolve(text), int(m.group(1)) if m else None


def resolve(text: str) -> str:
    """The note with each frame in a shared library resolved to ``file:line (function)`` by
    ``addr2line`` (the libraries carry debug information); unchanged where that fails."""
    lines = text.splitlines()
    want: dict[str, list[tuple[int, str, str]]] = {}
    for i, ln in enumerate(lines):
        m = _FRAME.match(ln)
        if m and sum(len(v) for v in want.values()) < MAX_RESOLVED:
            want.setdefault(m.group("lib"), []).append((i, m.group("off"), m.group("head")))
    tool = shutil.which("addr2line")
    if tool is None:
        return text
    for lib, frames in want.items():
        try:
            out = subprocess.run([tool, "-e", lib, "-f", "-C", *("0x" + off for _, off, _ in frames)],
                                 capture_output=True, text=True, timeout=5, check=False).stdout.splitlines()
        except (OSError, subprocess.SubprocessError):
            continue
        for k, (i, _, head) in enumerate(frames):
            if 2 * k + 1 < len(out) and not out[2 * k + 1].startswith("??"):
                where = out[2 * k + 1].split(" (discriminator")[0]
                lines[i] = f"{head}{where} ({out[2 * k]})"
    return "\n".join(lines)
