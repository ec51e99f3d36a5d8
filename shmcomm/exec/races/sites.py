"""Where an access is in the user's kernel, cheaply: the detector names a site in every record.

The same answer as :func:`shmcomm.exec.hazard.report.kernel_site` (the innermost user frame, plus
the library kernel it called; else the innermost library kernel frame), but each code object's
kind is decided once (a dict look-up per frame instead of path comparisons), and each site's
string is made once: records of one line share one string object, which a batch pickles once.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from ..hazard.report import _CATALOGUE_DIR, _KERNELS_DIR, _PKG_DIR, _THREADING, kernel_site

_RUNTIME, _KERNEL, _USER, _THREAD = 0, 1, 2, 3
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
    f: Any = sys._getframe(1)
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
