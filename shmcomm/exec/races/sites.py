"""Where an access is in the user's kernel, cheaply: the detector names a site in every record.

The same answer as :func:`shmcomm.exec.hazard.report.kernel_site` (the innermost user frame, plus
the library kernel it called; else the innermost library kernel frame), but each code object's
kind is decided once (a dict look-up per frame instead of path comparisons), and each site's
string is made once: records of one line share one string object, which a batch pickles once.
"""

from __future__ import annotations

import inspect
import os
import sys
from typing import Any

from ..hazard.report import _CATALOGUE_DIR, _KERNELS_DIR, _PKG_DIR, _THREADING, kernel_site

_RUNTIME, _KERNEL, _USER, _THREAD = 0, 1, 2, 3
# generator, coroutine, iterable coroutine, async generator
_RESUMABLE = inspect.CO_GENERATOR | inspect.CO_COROUTINE | inspect.CO_ITERABLE_COROUTINE \
    | inspect.CO_ASYNC_GENERATOR
_kinds: dict[Any, int] = {}
_sites: dict[tuple, str] = {}


def _kind(filename: str) -> int:
    if filename == _THREADING:
        return _THREAD
    if not filename.startswith(_PKG_DIR) or filename.startswith(_CATALOGUE_DIR):
        return _USER
    return _KERNEL if filename.startswith(_KERNELS_DIR) else _RUNTIME


def site(agent: Any) -> str:
    """``file:line`` of the calling block's kernel (see the module docstring)."""
    return _walk(sys._getframe(1), agent)


class SiteCache:
    """One block's last site, and the first frame outside the runtime it was found from, at
    which line. While that frame lives (the cache holds it) and stands at that line, every frame
    above it stands where it stood: the site is the same (a TREDUCE's loads and stores, a
    broadcast's copies to every member). The block clears it when its kernel ends."""

    __slots__ = ("frame", "line", "site")

    def __init__(self) -> None:
        self.frame: Any = None
        self.line = 0
        self.site = ""

    def clear(self) -> None:
        self.frame = None


def cached_site(cache: SiteCache, agent: Any) -> str:
    """:func:`site`, from ``cache`` when the calling frames above the runtime are its frame's."""
    f: Any = sys._getframe(1)
    kinds = _kinds
    while f is not None:  # the runtime's frames (the detector's, the API's) do not name sites
        code = f.f_code
        kind = kinds.get(code)
        if kind is None:
            kind = kinds[code] = _kind(code.co_filename)
        if kind != _RUNTIME:
            break
        f = f.f_back
    if f is None or kind == _THREAD:
        return kernel_site(agent)
    if f.f_code.co_flags & _RESUMABLE:  # a generator's frame resumes under other callers
        return _walk(f, agent)
    line = f.f_lineno
    if f is cache.frame and line == cache.line:
        return cache.site
    s = _walk(f, agent)
    cache.frame, cache.line, cache.site = f, line, s
    return s


def _walk(f: Any, agent: Any) -> str:
    inner: tuple | None = None
    kinds = _kinds
    while f is not None:
        code = f.f_code
        kind = kinds.get(code)
        if kind is None:
            kind = kinds[code] = _kind(code.co_filename)
        if kind == _USER:
            key: Any = (code, f.f_lineno, inner)
            s = _sites.get(key)
            if s is None:
                s = f"{code.co_filename}:{f.f_lineno}"
                if inner is not None:
                    s += f" (in {inner[0].co_name} at {os.path.basename(inner[0].co_filename)}:" \
                         f"{inner[1]})"
                s = _sites[key] = s
            return s
        if kind == _THREAD:
            break
        if kind == _KERNEL and inner is None:
            inner = (code, f.f_lineno)
        f = f.f_back
    if inner is not None:
        key = (None, 0, inner)
        s = _sites.get(key)
        if s is None:
            s = _sites[key] = f"{inner[0].co_filename}:{inner[1]} (in {inner[0].co_name})"
        return s
    return kernel_site(agent)
