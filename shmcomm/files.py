"""Every file shmcomm writes (traces, recorded and kept schedules, stress JSON) goes through here.

A path a user names may sit in a directory other users can write (``/tmp``), and shmcomm may run
as root. So a file is never opened at its path for writing: the content goes to a fresh file
beside it (``O_CREAT | O_EXCL | O_NOFOLLOW``, never an existing one) which is then renamed over
the path. A rename replaces the name only; nothing is ever written through a symlink or into a
file another user prepared. What the path may already be:

========================================  ================================================
nothing                                   the file is created
a regular file of the calling user        it is replaced (renamed over, not truncated)
a symlink, another user's file, a device, refused with :class:`OutputError` naming the path
a FIFO, a socket or a directory           and why; nothing is written
========================================  ================================================

The checks run before the file is created and again just before the rename. Between the second
check and the rename another user could still plant something at the path; the rename then
replaces that entry's name without following or writing it, so the worst case is that a file of
theirs loses its name, never that one of shmcomm's writes lands in it.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import stat
from typing import Any

from .errors import ArgumentError

_KINDS = ((stat.S_ISLNK, "a symbolic link"), (stat.S_ISDIR, "a directory"),
          (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISSOCK, "a socket"),
          (stat.S_ISREG, "a regular file"))


class OutputError(ArgumentError):
    """A file shmcomm was asked to write cannot be written safely (or at all); the message names
    what (``trace``, ``record``, ``--json``), the path and the reason, and says nothing was
    written."""


def _kind(mode: int) -> str:
    for test, name in _KINDS:
        if test(mode):
            return name
    return "not a regular file"


def check_target(what: str, path: str) -> None:
    """Refuse ``path`` as the output ``what`` unless it does not exist or is a regular file the
    calling user owns (judged by ``lstat``: a symlink is never followed)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    except OSError as exc:
        raise OutputError(f"{what}: cannot use {path!r}: {exc.strerror} (nothing was written)") \
            from None
    if not stat.S_ISREG(st.st_mode):
        kind = _kind(st.st_mode)
        if stat.S_ISLNK(st.st_mode):
            try:
                kind += f" (to {_kind(os.stat(path).st_mode)})"
            except OSError:
                kind += " (dangling)"
        raise OutputError(f"{what}: {path!r} is {kind}; shmcomm replaces only a "
                          "regular file of your own or writes a new path (nothing was written)")
    if st.st_uid != os.geteuid():
        raise OutputError(f"{what}: {path!r} belongs to another user (uid {st.st_uid}); "
                          "shmcomm does not replace it: name another file (nothing was written)")


def create_aside(what: str, path: str) -> tuple[int, str]:
    """A new, empty file beside ``path`` (same directory, so a rename can move it there), open for
    writing: ``(fd, aside path)``. ``path`` is checked first (:func:`check_target`)."""
    path = os.path.abspath(path)
    check_target(what, path)
    folder, name = os.path.split(path)
    aside = os.path.join(folder, f".{name}.shmcomm-{os.getpid()}-{secrets.token_hex(4)}.tmp")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        return os.open(aside, flags, 0o644), aside
    except OSError as exc:
        raise OutputError(f"{what}: cannot create a file in {folder!r}: {exc.strerror} "
                          "(nothing was written)") from None


def move_into_place(what: str, aside: str, path: str) -> None:
    """Rename ``aside`` over ``path`` after checking ``path`` again; on any refusal or error the
    aside file is removed and :class:`OutputError` raised."""
    path = os.path.abspath(path)
    try:
        check_target(what, path)  # again: the path may have changed since the file was made
        os.rename(aside, path)
    except OutputError:
        discard(aside)
        raise
    except OSError as exc:
        discard(aside)
        raise OutputError(f"{what}: could not write {path!r}: {exc.strerror} "
                          "(nothing was written)") from None


def discard(aside: str) -> None:
    """Remove a file made by :func:`create_aside` (already gone is fine)."""
    with contextlib.suppress(OSError):
        os.unlink(aside)


def write_file(what: str, path: str, text: str) -> None:
    """Write ``text`` to ``path`` safely (see the module): done when it returns, else
    :class:`OutputError` and nothing was written."""
    fd, aside = create_aside(what, path)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
    except OSError as exc:
        discard(aside)
        raise OutputError(f"{what}: could not write {os.path.abspath(path)!r}: {exc.strerror} "
                          "(nothing was written)") from None
    move_into_place(what, aside, path)


def make_dirs(what: str, folder: str) -> None:
    """Create ``folder`` and its parents if missing (mode 0700 for new ones); an error names
    ``what``."""
    if not folder:
        return
    try:
        os.makedirs(folder, mode=0o700, exist_ok=True)
    except OSError as exc:
        raise OutputError(f"{what}: cannot create the directory {folder!r}: {exc.strerror} "
                          "(nothing was written)") from None


# --- reading --------------------------------------------------------------------------------

MAX_DEPTH = 32  # a schedule is 3 deep and a trace 5; deeper is not one of shmcomm's files
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.S)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")


def nesting(text: str) -> int:
    """How deep the arrays and objects of the JSON ``text`` nest (strings skipped), found without
    parsing it, so a file nested a million deep is refused before the parser recurses."""
    brackets = _NOT_BRACKET.sub("", _STRING.sub("", text))
    depth = deepest = 0
    for c in brackets:
        depth += 1 if c in "[{" else -1
        deepest = max(deepest, depth)
    return deepest


def load_json(what: str, path: str, max_depth: int = MAX_DEPTH) -> Any:
    """The JSON document at ``path``; :class:`ArgumentError` naming ``what`` and the path when it
    cannot be read, is not JSON, or nests deeper than ``max_depth``."""
    try:
        with open(path) as f:
            text = f.read()
    except OSError as exc:
        raise ArgumentError(f"{what}: cannot read {path!r}: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise ArgumentError(f"{what}: {path!r} is not JSON (not UTF-8 text)") from None
    depth = nesting(text)
    if depth > max_depth:
        raise ArgumentError(f"{what}: {path!r} nests arrays and objects {depth} deep, more than "
                            f"the {max_depth} a shmcomm file has; it is not one")
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise ArgumentError(f"{what}: {path!r} is not JSON: {exc}") from None
