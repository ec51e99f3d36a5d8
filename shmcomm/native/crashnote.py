"""The crash note of a rank process that died in native code.

A native kernel's signal handler (``shmcomm/entry.hpp``) writes, before the rank dies of the
signal, which rank and block crashed, after which kernel line, and a native backtrace, to
standard error and to ``<tmp>/shmcomm-native-crash-<pid>`` (created exclusive, mode 0600, never
through a symlink). The launcher takes that note when it records the rank's death, so the
run's report names the rank, the block and the C++ line.
"""

from __future__ import annotations

import os
import re
import tempfile

MAX_NOTE_CHARS = 6000
_BLOCK = re.compile(r" in rank \d+ block (\d+)")


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
    return text, int(m.group(1)) if m else None
