"""The trace file of a run, made safe: checked at the start, written aside, renamed at the end.

A run asked for ``trace=PATH`` never opens ``PATH`` itself. At the start the launcher creates a
fresh file beside it (``O_CREAT | O_EXCL | O_NOFOLLOW``, so no symlink is followed and no existing
file is truncated or appended to) and the ranks write the trace there; at the end the file is
renamed over ``PATH``, which replaces the name only: a symlink at ``PATH`` is replaced, never
followed, and the content of a file someone else owns is never touched. A path that cannot work
(a missing directory, a directory, another user's file) is an error before any rank starts.
"""

from __future__ import annotations

import os
import resource

from ..errors import ArgumentError
from ..files import OutputError, create_aside, discard, move_into_place
from .paths import check_output


class TraceFile:
    """``aside``: where the ranks write; :meth:`finish` moves it to ``path``."""

    def __init__(self, path: str) -> None:
        self.path = os.path.abspath(path)
        if os.path.isdir(self.path) and not os.path.islink(self.path):
            raise ArgumentError(f"trace: {path!r} is a directory; name a file")
        check_output("trace", self.path)  # a link, device node, FIFO or other user's file
        fd, self.aside = create_aside("trace", self.path)
        os.close(fd)  # the ranks open it by name (``O_NOFOLLOW``) and append under a lock

    def finish(self) -> str | None:
        """Move the trace to its path (nothing if no rank wrote one); an error message or None."""
        try:
            size = os.stat(self.aside, follow_symlinks=False).st_size
            if size == 0:
                os.unlink(self.aside)
                return None
            cut = _cut(self.aside, size)
            if cut:
                os.unlink(self.aside)
                return f"trace: not written to {self.path!r}: {cut}"
            move_into_place("trace", self.aside, self.path)
        except OutputError as exc:
            return str(exc)
        except OSError as exc:
            return f"trace: could not move the trace to {self.path!r}: {exc.strerror}"
        return None

    def discard(self) -> None:
        discard(self.aside)


def _cut(path: str, size: int) -> str | None:
    """Why the trace file is incomplete (``None`` if it ends as a finished trace does)."""
    soft = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
    if soft != resource.RLIM_INFINITY and size >= soft:
        return (f"it was cut at {size} bytes by the process's file-size limit (RLIMIT_FSIZE, "
                f"ulimit -f, is {soft} bytes); raise the limit")
    with open(path, "rb") as f:
        f.seek(max(size - 2, 0))
        tail = f.read()
    if tail.rstrip()[-1:] not in (b"}", b"]"):  # every writer ends the document and a newline
        return f"it is incomplete ({size} bytes, not a whole JSON document: a write failed)"
    return None
