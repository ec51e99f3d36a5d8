"""A pool's rank process: it serves run after run until its job pipe closes, and checks after
each that the host left no thread running and no module patched (such a process must not
serve again: :class:`Leftover` tells the launcher, which replaces the pool).

Only a pool's rank processes run this code; the launcher's side is :mod:`.pool`.
"""

from __future__ import annotations

import ctypes
import functools
import itertools
import operator
import sys
import threading
import types
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any

from ..core import control as C
from ..core.gm import Windows
from ..core.heap import SymmetricArray
from ..core.threads import IDLE_NAME
from ..transports.shm import ShmTransport
from .descendants import RunProcesses
from .rank import collect_after_run, rank_process_setup, serve_run
from .stuck import dump_stacks_on_signal


def serve_pool_rank(rank: int, parent: int, transport: ShmTransport, ctl: C.Control, jobs: Connection,
           results: Connection, procs: RunProcesses, states: Any, stacks: Any = None) -> int:
    """A pool's rank process: serve runs until the pipe closes. ``stacks``: the file its
    threads' stacks are dumped into on the launcher's signal (a hang's report)."""
    procs.enter()
    if not rank_process_setup(parent):
        return 1
    if stacks is not None:
        dump_stacks_on_signal(stacks)
    modules = ModuleState()
    observers = list(SymmetricArray.observers)
    read_observers = list(SymmetricArray.read_observers)
    windows = Windows(transport)  # kept from run to run, with the pointers and Signals made
    runs = 0
    while True:
        try:
            config, host, args, model = jobs.recv()
        except (EOFError, OSError):
            return 0
        except Exception as exc:  # a host that does not unpickle here
            results.send(("error", dict(rank=rank, block=None, kind="exception",
                                        message=f"the job could not be received: {exc!r}")))
            return 1
        model.use_pool(states, rank)  # the observers' (this rank's end of the detector's pipe)
        if serve_run(rank, config, transport, ctl, results, host, args, model,
                     functools.partial(_checked_result, modules), windows) != 0:
            return 1  # a failed run: the launcher replaces the pool
        # the run's models watched host accesses: the next run's must not see them
        SymmetricArray.observers[:] = observers
        SymmetricArray.read_observers[:] = read_observers
        config = host = args = model = None  # garbage now, for the collection
        runs += 1
        collect_after_run(runs)


class Leftover:
    """A rank's result from a run that left a thread or a patched module in its process."""

    def __init__(self, result: Any, why: str) -> None:
        self.result, self.why = result, why


def _dict_version_reader() -> Callable[[dict], Any] | None:
    """A reader of a dict's modification stamp (CPython's ``ma_version_tag``, PEP 509: a new
    value at every change of the dict), or ``None`` where this interpreter's dicts do not show
    one where it is looked for. The reader gives the stamp's cell (its ``value`` reads it;
    made once per dict: a dict object never moves while it lives). Checked on
    sample dicts before it is trusted; without it every check compares every attribute."""
    if sys.implementation.name != "cpython" or sys.version_info >= (3, 14):
        return None
    used_at, tag_at = 2 * ctypes.sizeof(ctypes.c_void_p), 3 * ctypes.sizeof(ctypes.c_void_p)

    def stamp(d: dict) -> Any:
        return ctypes.c_uint64.from_address(id(d) + tag_at)

    sample: dict[str, int] = {}
    try:
        cell = stamp(sample)
        for n in range(5):
            before = cell.value
            sample[f"k{n}"] = n
            if ctypes.c_ssize_t.from_address(id(sample) + used_at).value != len(sample):
                return None
            after = cell.value
            sample[f"k{n}"] = n + 1  # a rebinding is a change too
            if not before != after != cell.value or cell.value != cell.value:
                return None
    except Exception:  # noqa: BLE001 -- any surprise: no stamps
        return None
    return stamp


_VERSION = _dict_version_reader()


class ModuleState:
    """Every loaded module's public attributes (names and values) as the pool's process
    started, with its dict's modification stamp and the stamp's cell (``entries``: name ->
    [module, names, values, stamp, cell, dict]). Private ones (``_name``) do not count:
    libraries rebind their own private state as they run (hypothesis's gc timers, threading's
    counters), which is no patch. ``cells`` and ``stamps``: those of the true module objects
    (whose dict never changes identity), read in one pass first."""

    __slots__ = ("entries", "cells", "stamps", "fast", "others")

    def __init__(self) -> None:
        self.entries: dict[str, list[Any]] = {}
        for name, mod in list(sys.modules.items()):
            d = getattr(mod, "__dict__", None)
            if isinstance(d, dict):
                keys = tuple(k for k in d if isinstance(k, str) and not k.startswith("_"))
                cell = _VERSION(d) if _VERSION else None  # d stays referenced: the cell reads it
                self.entries[name] = [mod, keys, tuple(d[k] for k in keys),
                                      cell.value if cell is not None else None, cell, d]
        # names whose stamps the first pass reads: modules proper (another object in
        # sys.modules may hand out a new __dict__ each time: checked one by one)
        self.fast = tuple(name for name, e in self.entries.items()
                          if e[4] is not None and type(e[0]) is types.ModuleType)
        self.cells = [self.entries[n][4] for n in self.fast]
        self.stamps = [self.entries[n][3] for n in self.fast]
        fast = set(self.fast)
        self.others = tuple(n for n in self.entries if n not in fast)  # checked one by one


_VALUE = operator.attrgetter("value")


def _patched(state: ModuleState) -> list[str]:
    """``module.attribute`` names whose value is no longer the object it was (a monkeypatch);
    attributes added since (lazy imports) do not count. Every run of a pool pays this check in
    every rank: when no module's dict has changed since the modules were last found clean
    (their stamps, read in one pass) the check ends there; else a module whose stamp has not
    changed is skipped without touching its values."""
    unchanged = bool(state.cells) and list(map(_VALUE, state.cells)) == state.stamps
    out = []
    for name in (state.others if unchanged else state.entries):
        entry = state.entries[name]
        mod, keys, values, stamp, cell, d0 = entry
        d = mod.__dict__
        if cell is not None and d is d0:
            now = cell.value
            if now == stamp:
                continue
        try:
            if tuple(map(d.get, keys, itertools.repeat(_MISSING))) == values:
                if cell is not None and d is d0:
                    entry[3] = now  # clean as of this stamp (only private names changed)
                continue
        except Exception:  # noqa: BLE001,S110 -- a replaced value whose == raises: look closer
            pass
        out += [f"{name}.{k}" for k, v in zip(keys, values, strict=True)
                if d.get(k, _MISSING) is not v]
    if not unchanged:
        state.stamps = [state.entries[n][3] for n in state.fast]
    return out


_MISSING = object()


def _leftover_threads() -> list[str]:
    me = threading.current_thread()
    # schedule mode's turn watch stops when the rank's model closes, right after this check
    alive = [t for t in threading.enumerate()
             if t is not me and not t.name.startswith(("shmcomm-turnwatch", IDLE_NAME))]
    for t in alive:
        if t.name == "shmcomm-stream":  # a stream's worker returns right after its last launch
            t.join(1.0)
    return [t.name for t in alive if t.is_alive()]


def _checked_result(modules: ModuleState, result: Any) -> Any:
    """A passing run's ``result`` in a pool rank, after the host and every launch ended and the
    model closed (in schedule mode the rank no longer holds the turn: the checks keep no other
    agent waiting): whatever the run left in the process (a thread, a patched module) retires
    the process after this run."""
    why = []
    threads = _leftover_threads()
    if threads:
        why.append(f"threads still running: {', '.join(threads)}")
    patched = _patched(modules)
    if patched:
        why.append(f"module attributes changed: {', '.join(patched[:10])}")
    if why:
        return Leftover(result, "; ".join(why))
    return result
