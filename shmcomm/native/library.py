"""Kernel discovery, the generated trampolines, and the loaded library's kernels.

Every ``__global__ [AICORE] void NAME(`` in the source is a kernel (found with a regular
expression over the source with its comments removed). A non-template kernel gets a trampoline
at load; a template kernel gets one per instantiation asked for (``lib.kernel("K<float, 256>")``
or ``load(..., kernels=[...])``), each a rebuild with that instantiation added (cached too).
A trampoline unpacks the launch's argument words with the kernel's own parameter types
(``shmcomm::native::run``) and exports the parameters' kinds, so Python checks every launch's
arguments before any C++ runs.
"""

from __future__ import annotations

import ctypes
import os
import re
from pathlib import Path
from typing import Any

from ..errors import ArgumentError
from .crashnote import prefix as crash_note_prefix

_KERNEL = re.compile(r"(?P<tpl>template\s*<[^;{}]*>\s*)?__global__\s+(?:(?:AICORE|__aicore__|inline|static"
                     r"|extern\s+\"C\")\s+)*void\s+(?P<name>[A-Za-z_]\w*)\s*\(")
_COMMENTS = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)
_INST = re.compile(r"^\s*(?P<name>[A-Za-z_]\w*)\s*(?P<targs><.*>)?\s*$", re.S)
KINDS = {"c": "a device context (rt.device_context)", "p": "a GM pointer (GMPtr)",
         "s": "a struct of the kernel's own in a window (GMPtr; see shmcomm.native.place)",
         "i": "an int", "f": "a float"}


def discover(text: str) -> dict[str, bool]:
    """Kernel name -> whether it is a template, in source order."""
    found: dict[str, bool] = {}
    for m in _KERNEL.finditer(_COMMENTS.sub(" ", text)):
        found.setdefault(m.group("name"), m.group("tpl") is not None)
    return found


def unit(source: Path, names: list[str], text: str | None = None) -> str:
    """The translation unit: the entry header, the user's source, one trampoline per name.
    With ``text`` (a pto-isa build: the kernel file as treated by :mod:`.ptoisa`), that text
    first, then the entry header, which builds on the checkout's own declarations."""
    if text is None:
        lines = ['#include "shmcomm/entry.hpp"', f'#include "{source}"', ""]
    else:
        lines = [text, '#line 1 "<shmcomm entry points>"', '#include "shmcomm/entry.hpp"', ""]
    for i, name in enumerate(names):
        lines += [
            f'extern "C" int shmcomm_run_{i}(shmcomm_block* b, const uint64_t* a, char* e, unsigned long n) '
            f"{{ return shmcomm::native::run(&{name}, b, a, e, n); }}",
            f'extern "C" const char* shmcomm_sig_{i}() {{ return shmcomm::native::signature(&{name}); }}',
        ]
    return "\n".join(lines) + "\n"


def parse_instance(spec: str) -> tuple[str, str]:
    """``"K<float, 256>"`` -> ``("K", "<float, 256>")``; a bare name -> ``(name, "")``."""
    if not isinstance(spec, str):
        raise ArgumentError(f"native: a kernel name must be a str, got {type(spec).__name__}")
    m = _INST.match(spec)
    if m is None:
        raise ArgumentError(f"native: {spec!r} is no kernel name (a name, or a name<template args>)")
    return m.group("name"), " ".join((m.group("targs") or "").split())


_dump: tuple[int, int] | None = None  # (signal, fd): where the rank process dumps its stacks


def dump_stacks_to(sig: int, fd: int) -> None:
    """Tell native kernels that this process dumps its stacks into ``fd`` on ``sig``: the
    libraries launched from here on add where each of their blocks waits to that dump."""
    global _dump
    _dump = (sig, fd)


class Loaded:
    """One built shared library and its trampolines, by kernel spelling."""

    def __init__(self, path: Path, names: list[str]) -> None:
        self.path = path
        self._noted = 0  # the process that put this library's wait notes in its stack dumps
        self.dll = ctypes.CDLL(str(path))  # CDLL: the GIL is released during every call
        self.entries: dict[str, tuple[Any, str]] = {}
        for i, name in enumerate(names):
            run = getattr(self.dll, f"shmcomm_run_{i}")
            run.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_ulong]
            run.restype = ctypes.c_int
            sig = getattr(self.dll, f"shmcomm_sig_{i}")
            sig.restype = ctypes.c_char_p
            self.entries[name] = (run, sig().decode())
        self.dll.shmcomm_install_crash_handlers(crash_note_prefix().encode())

    def note_waits(self) -> None:
        """Once per process that dumps its stacks: this library's waiting blocks are named in
        the dump (a native block has no Python frame of the user's)."""
        pid = os.getpid()
        if self._noted != pid and _dump is not None:
            self._noted = pid
            self.dll.shmcomm_install_stack_notes(ctypes.c_int(_dump[0]), ctypes.c_int(_dump[1]))
