"""The user's line of a native instruction that a library's wrapper called.

pto-isa's public instructions (``TPUT``, ``TNOTIFY``, ``TLOAD``, ... in its headers) call the
``*_IMPL`` that shmcomm's shadow defines without passing their caller's file and line, so the
``__builtin_FILE()`` / ``__builtin_LINE()`` the shadow's ``*_IMPL`` take name the wrapper's
header. Each such ``*_IMPL`` therefore also records its own PC (``mark_pc`` of
``shmcomm/runtime.hpp``: one instruction and a store, so eager mode pays nothing more); every
function in the chain is inlined into the user's kernel, so the DWARF inline information of that
PC names the chain down to the user's call. Only when the site is needed (a bridged instruction's
frame, which reports name; a native error's message) is the PC resolved here, with
``addr2line -i``, to the first frame outside shmcomm's own and pto-isa's headers; once per site
and process (one ``addr2line`` process per library, reading addresses as they come). When the
PC cannot be resolved (no ``addr2line``, no debug information) the wrapper's line stays.
"""

from __future__ import annotations

import atexit
import ctypes
import os
import re
import select
import shutil
import subprocess
import threading
import time
from pathlib import Path

MARK = b"\x01"  # runtime.hpp's site_file: "\x01<pc hex>\x01<file>"
MAX_SITES = 4096
RESOLVE_TIMEOUT_S = 10.0
_SENTINEL = "0xffffffffffffffff"  # an address after each query: its echo ends the query's frames
_NATIVE_DIR = str(Path(__file__).resolve().parent) + os.sep  # the shadow and shmcomm's headers
_SITE = re.compile(r".*?:\d+: (.*)\Z", re.S)  # "file:line: what" -> what
_LIBRARY_HEADERS = os.sep + os.path.join("include", "pto") + os.sep  # pto-isa's (and a stand-in's)

_lock = threading.Lock()
_sites: dict[bytes, tuple[str, int]] = {}
_symbolizers: dict[str, _Addr2line | None] = {}  # library -> its addr2line (None: none works)


class _DlInfo(ctypes.Structure):
    _fields_ = [("dli_fname", ctypes.c_char_p), ("dli_fbase", ctypes.c_void_p),
                ("dli_sname", ctypes.c_char_p), ("dli_saddr", ctypes.c_void_p)]


_dladdr = ctypes.CDLL(None).dladdr
_dladdr.argtypes = [ctypes.c_void_p, ctypes.POINTER(_DlInfo)]
_dladdr.restype = ctypes.c_int


def site(raw: bytes, line: int) -> tuple[str, int]:
    """The (file, line) of a bridged instruction whose ``file`` is ``raw`` (marked with a PC:
    the user's line; else ``raw`` itself)."""
    hit = _sites.get(raw)
    if hit is not None:
        return hit
    if not raw.startswith(MARK):
        return raw.decode(errors="replace"), line
    _, pc_hex, file = raw.split(MARK, 2)
    found = user_frame(int(pc_hex, 16))
    res = found if found is not None else (file.decode(errors="replace"), line)
    with _lock:
        if len(_sites) < MAX_SITES:
            _sites[raw] = res
    return res


def message(raw: bytes) -> str:
    """A native error's ``file:line: what``, its site resolved when it carries a PC."""
    if not raw.startswith(MARK):
        return raw.decode(errors="replace")
    _, pc_hex, rest = raw.split(MARK, 2)
    text = rest.decode(errors="replace")
    found = user_frame(int(pc_hex, 16)) if pc_hex else None
    m = _SITE.match(text)
    if found is None or m is None:
        return text
    return f"{found[0]}:{found[1]}: {m.group(1)}"


def user_frame(pc: int) -> tuple[str, int] | None:
    """The first frame of ``pc``'s inline chain outside shmcomm's and pto-isa's headers."""
    info = _DlInfo()
    if pc == 0 or _dladdr(ctypes.c_void_p(pc), ctypes.byref(info)) == 0 or not info.dli_fname:
        return None
    return library_frame(info.dli_fname.decode(errors="replace"), pc - (info.dli_fbase or 0))


def library_frame(lib: str, off: int, keep: bool = True) -> tuple[str, int] | None:
    """The first frame of the inline chain at offset ``off`` of library ``lib`` (a PC there)
    outside shmcomm's and pto-isa's headers. ``keep``: leave the library's ``addr2line``
    running for the next query (a rank process, which reaps it at exit); else one process for
    this query only (the launcher: no helper process outlives its report)."""
    with _lock:
        if not keep:
            sym = _symbolizers.get(lib) or _Addr2line.start(lib)
            frames = [] if sym is None else sym.frames(off - 1)
            if sym is not None and sym is not _symbolizers.get(lib):
                sym.close()
        else:
            if lib in _symbolizers:
                sym = _symbolizers[lib]
            else:
                sym = _symbolizers[lib] = _Addr2line.start(lib)
            if sym is None:
                return None
            frames = sym.frames(off - 1)  # (-1: inside the instruction)
    for f, ln in frames:
        if not f.startswith(_NATIVE_DIR) and _LIBRARY_HEADERS not in f and ln > 0:
            return f, ln
    return None


class _Addr2line:
    """One ``addr2line -i -a`` process over a library, queried one address at a time."""

    def __init__(self, proc: subprocess.Popen) -> None:
        self.proc = proc
        self.buf = b""

    @classmethod
    def start(cls, lib: str) -> _Addr2line | None:
        tool = shutil.which("addr2line")
        if tool is None:
            return None
        try:
            proc = subprocess.Popen([tool, "-i", "-a", "-e", lib], stdin=subprocess.PIPE,
                                    stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        except OSError:
            return None
        return cls(proc)

    def frames(self, off: int) -> list[tuple[str, int]]:
        """The inline chain at ``off`` (innermost first), or [] when ``addr2line`` fails."""
        p = self.proc
        if p.poll() is not None or p.stdin is None or p.stdout is None:
            return []
        try:
            p.stdin.write(f"{off:#x}\n{_SENTINEL}\n".encode())
            p.stdin.flush()
            lines = self._until_sentinel()
        except OSError:
            lines = None
        if lines is None:
            self.close()
            return []
        out = []
        for ln in lines[1:]:  # (the first: the address's echo)
            where = ln.split(" (discriminator")[0]
            f, _, num = where.rpartition(":")
            out.append((f, int(num) if num.isdigit() else 0))
        return out

    def _until_sentinel(self) -> list[str] | None:
        """The lines before the sentinel's echo, once its frame line came too (bounded wait)."""
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        deadline = time.monotonic() + RESOLVE_TIMEOUT_S
        marker = f"\n{_SENTINEL}\n".encode()
        while True:
            k = self.buf.find(marker)
            if k >= 0:
                end = self.buf.find(b"\n", k + len(marker))
                if end >= 0:
                    text = self.buf[:k].decode(errors="replace")
                    self.buf = self.buf[end + 1:]
                    return text.splitlines()
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                return None
            chunk = os.read(fd, 65536)
            if not chunk:
                return None
            self.buf += chunk

    def close(self) -> None:
        p = self.proc
        try:
            if p.stdin is not None:
                p.stdin.close()
            p.wait(timeout=2)
        except (OSError, subprocess.TimeoutExpired):
            p.kill()
            p.wait()


@atexit.register
def close_all() -> None:
    """End and reap this process's ``addr2line`` helpers (a rank process calls it before its
    ``os._exit``; other processes at exit)."""
    with _lock:
        syms = [s for s in _symbolizers.values() if s is not None]
        _symbolizers.clear()
    for sym in syms:
        sym.close()
