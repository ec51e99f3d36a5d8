"""The bridge from a native instruction to shmcomm's own instruction.

In hazard and schedule mode (and under the race detector or a trace: whenever the block's
execution model sees instructions, ``agent.hooks`` or ``agent.fences`` set) every native
instruction calls :func:`_op` through one ctypes callback, which calls the public Python
instruction (``shmcomm.comm`` / ``shmcomm.pipe``) on ``GMPtr`` s, ``Signal`` s and ``Tile`` s
over the same bytes, so the models see a native kernel exactly as a Python one. In eager mode
only the rare paths come here (a TWAIT's abort or timeout, any wait under a non-adaptive wait
policy, a failed TTEST, AtomicAdd copies, SYNCALL), so they keep shmcomm's own behaviour.

Each call runs the instruction from a frame whose file and line are the C++ call site, so
every report (and a traceback) names the kernel's C++ line, as it names a Python kernel's (an
instruction that a library's wrapper called: the user's line of that call, :mod:`.sites`).
"""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Callable
from typing import Any

import numpy as np

from .. import comm, pipe
from ..core.agent import current
from ..core.gm import GlobalTensor, GMPtr
from ..core.tile import Tile
from ..core.waiting import first_unsatisfied
from ..dma import AUTO_CHANNEL_GROUP
from ..errors import ArgumentError, WaitTimeout
from ..types import CMP_FUNCS, CMP_SYMBOLS, AtomicType, NotifyOp, ReduceOp, WaitCmp
from .sites import site as user_site
from .tilecopy import issue as issue_tile_copy

OP_NOTIFY, OP_WAIT, OP_TEST, OP_PIPE_BARRIER, OP_SET_FLAG, OP_WAIT_FLAG, OP_DSB, OP_DCCI = range(1, 9)
OP_LOAD, OP_STORE, OP_PUT, OP_GET, OP_SYNCALL, OP_ST_ATOMIC, OP_WAIT_EXPIRED = range(9, 16)
OP_ASYNC, OP_ASYNC_WAIT, OP_ASYNC_TEST = range(16, 19)
OP_ASYNC_SESSION, OP_COLLECTIVE = 19, 20  # the pto-isa shadow's BuildAsyncSession and root collectives
_COLLECTIVES = (comm.TBROADCAST, comm.TSCATTER, comm.TGATHER, comm.TREDUCE)  # by the shadow's kind word
OP_TILE_COPY = 25  # pto-isa's own TLOAD / TSTORE, performed when the model lands them (tilecopy)
DTYPES: dict[int, np.dtype] = {1: np.dtype(np.float32), 2: np.dtype(np.float64), 3: np.dtype(np.int8),
          4: np.dtype(np.int16), 5: np.dtype(np.int32), 6: np.dtype(np.int64),
          7: np.dtype(np.uint8), 8: np.dtype(np.uint16), 9: np.dtype(np.uint32),
          10: np.dtype(np.uint64), 11: np.dtype(np.float16)}

_tls = threading.local()  # the exception a bridged instruction raised, until the kernel unwinds
_codes: dict[tuple[str, int], Any] = {}

OP_FUNC = ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_int32, ctypes.POINTER(ctypes.c_uint64), ctypes.c_int32,
                           ctypes.c_char_p, ctypes.c_int32)


class Block(ctypes.Structure):
    """``struct shmcomm_block`` of ``shmcomm/pto.hpp``."""

    _fields_ = [("block_idx", ctypes.c_uint32), ("block_num", ctypes.c_uint32),
                ("rank", ctypes.c_int32), ("nranks", ctypes.c_int32),
                ("bridged", ctypes.c_int32), ("spin", ctypes.c_int32),
                ("set_read_add", ctypes.c_int32), ("ncores", ctypes.c_int32),
                ("line", ctypes.c_uint64), ("active_word", ctypes.c_uint64),
                ("t0_ns", ctypes.c_int64), ("timeout_ns", ctypes.c_int64),
                ("abort_word", ctypes.c_void_p), ("win_size", ctypes.c_uint64),
                ("bases", ctypes.c_void_p), ("op", OP_FUNC)]


def at_line(file: str, line: int) -> Any:
    """A code object that calls ``f(*a)`` at ``file:line``: the C++ call site as a frame."""
    key = (file, line)
    code = _codes.get(key)
    if code is None:
        code = _codes[key] = compile("\n" * max(line - 1, 0) + "f(*a)", file, "eval")
    return code


def pending() -> BaseException | None:
    """The exception the calling block's last bridged instruction raised (taken)."""
    exc = getattr(_tls, "exc", None)
    _tls.exc = None
    return exc


def _signed(v: int) -> int:
    return v - (1 << 64) if v >= 1 << 63 else v


class _Decoder:
    """Turns argument words back into shmcomm objects for the calling block."""

    def __init__(self, agent: Any, bases: list[int]) -> None:
        self.windows = agent.rt.windows
        self.bases = bases
        self.size = self.windows.size
        self.tiles: dict[tuple, Tile] = {}
        self.calls: dict[tuple, tuple] = {}  # a pure instruction's prepared call, by site and words
        self.agent = agent
        self.sessions: dict[int, Any] = {}  # the C++ AsyncSession's address -> shmcomm's session
        self.events: dict[int, Any] = {}  # bridged_id -> shmcomm's AsyncEvent

    def session(self, addr: int) -> Any:
        s = self.sessions.get(addr)
        if s is None:
            s = self.sessions[addr] = comm.BuildAsyncSession(None)
        return s

    def build_session(self, a: Any) -> bool:
        """pto-isa's ``BuildAsyncSession`` (SDMA form): shmcomm's, kept under the C++ session's
        address for the copies posted in it."""
        session = comm.AsyncSession()
        workspace = self.ptr(a[1], 7) if a[1] else None
        group = AUTO_CHANNEL_GROUP if a[6] == (1 << 64) - 1 else a[6]
        ok = comm.BuildAsyncSession(self.tile(a, 7), workspace, session, a[2],
                                    comm.SdmaBaseConfig(a[3], a[4], a[5]), group)
        self.sessions[a[0]] = session
        return bool(ok)

    def collective(self, a: Any) -> Any:
        """A root collective of the pto-isa shadow: shmcomm's on a ParallelGroup over the same
        bytes (the members' tensor words are read from the C++ caller's array)."""
        kind, op, n, root = a[0], a[1], a[2], a[3]
        words = (ctypes.c_uint64 * (12 * n)).from_address(a[4])
        group = comm.ParallelGroup([self.tensor(words, 12 * i) for i in range(n)], n, root)
        tiles = [self.tile(a, 18 + 6 * k) for k in range(a[17])]
        extra = (ReduceOp(op),) if kind == 3 else ()
        return _COLLECTIVES[kind](group, self.tensor(a, 5), *tiles, *extra)

    def post(self, fn: Callable[..., Any], dst: GlobalTensor, src: GlobalTensor, session: Any) -> int:
        """Issue an asynchronous copy; its id for the C++ AsyncEvent."""
        ev = fn(dst, src, session)
        key = len(self.events) + 1
        self.events[key] = ev
        return key

    def ptr(self, addr: int, code: int) -> GMPtr:
        dt = DTYPES.get(code)
        if dt is None:
            raise ArgumentError(f"native: element type code {code} has no shmcomm dtype")
        for r, b in enumerate(self.bases):
            if b <= addr < b + self.size:
                return GMPtr(self.windows, r, addr - b, dt)
        raise ArgumentError(f"native: address {addr:#x} lies in no rank's window (a GM pointer "
                            "must point into rt.alloc'd memory or the signal matrix)")

    def word(self, addr: int) -> GMPtr | None:
        """The int32 word holding byte ``addr`` of a window (``None``: no window's)."""
        for r, b in enumerate(self.bases):
            if b <= addr < b + self.size:
                return GMPtr(self.windows, r, (addr - b) & ~3, DTYPES[5])
        return None

    def signal(self, a: Any) -> Any:
        ptr = self.ptr(a[0], 5)
        rows, cols, stride = a[1], a[2], a[3]
        if rows * cols == 1:
            return comm.Signal(ptr)
        return comm.Signal2D(ptr, rows, cols, stride)

    def tensor(self, a: Any, i: int) -> GlobalTensor:
        shape = tuple(a[i + 2:i + 7])
        strides = tuple(a[i + 7:i + 12])
        return GlobalTensor(self.ptr(a[i], a[i + 1]), shape, strides)

    def tile(self, a: Any, i: int) -> Tile:
        addr, code, rows, cols, vr, vc = (a[i + k] for k in range(6))
        key = (addr, code, rows, cols)
        t = self.tiles.get(key)
        if t is None:
            dt = DTYPES[code]
            buf = (ctypes.c_char * (rows * cols * dt.itemsize)).from_address(addr)
            arr = np.frombuffer(buf, dtype=dt).reshape(rows, cols)
            t = self.tiles[key] = Tile((rows, cols), dt, (vr, vc), array=arr)
        elif (t.valid_row, t.valid_col) != (vr, vc):
            t.set_valid(vr, vc)
        return t


def _expired(sig: Any, value: int, cmp: WaitCmp) -> None:
    """A native registered wait ran out of ``wait_timeout``: the error a Python TWAIT raises."""
    agent = current()
    site = sig.site
    idx, cur = first_unsatisfied(site.words, CMP_FUNCS[cmp], value)
    raise WaitTimeout(f"TWAIT: {agent.where()} timed out (wait_timeout={agent.wait_timeout:g} s) "
                      f"waiting on {site.describe(max(idx, 0))} for value {CMP_SYMBOLS[cmp]} {value}; "
                      f"it holds {cur}")


def _call(code: int, a: list[int], d: _Decoder) -> tuple[Callable[..., Any], tuple]:
    """The Python instruction and its arguments for native instruction ``code``."""
    if code == OP_NOTIFY:
        return comm.TNOTIFY, (d.signal(a), int(np.int32(_signed(a[4]))), NotifyOp(a[5]))
    if code in (OP_WAIT, OP_TEST):
        test: Callable[..., Any] = comm.TWAIT if code == OP_WAIT else comm.TTEST
        return test, (d.signal(a), int(np.int32(_signed(a[4]))), WaitCmp(a[5]))
    if code == OP_WAIT_EXPIRED:
        return _expired, (d.signal(a), int(np.int32(_signed(a[4]))), WaitCmp(a[5]))
    if code == OP_ASYNC:
        fn = comm.TPUT_ASYNC if a[25] == 0 else comm.TGET_ASYNC
        flat_dst, flat_src = d.tensor(a, 0), d.tensor(a, 12)
        dst = GlobalTensor(flat_dst.ptr, (flat_dst.rows * flat_dst.cols,))
        src = GlobalTensor(flat_src.ptr, (flat_src.rows * flat_src.cols,))
        return d.post, (fn, dst, src, d.session(a[24]))
    if code == OP_ASYNC_SESSION:
        return d.build_session, (a,)
    if code == OP_COLLECTIVE:
        return d.collective, (a,)
    if code in (OP_ASYNC_WAIT, OP_ASYNC_TEST):
        ev = d.events[a[0]]
        return (ev.Wait if code == OP_ASYNC_WAIT else ev.Test), (ev.session,)
    if code == OP_PIPE_BARRIER:
        return pipe.pipe_barrier, (a[0],)
    if code == OP_SET_FLAG:
        return pipe.set_flag, (a[0], a[1], a[2])
    if code == OP_WAIT_FLAG:
        return pipe.wait_flag, (a[0], a[1], a[2])
    if code == OP_DSB:
        return pipe.dsb, (a[0],)
    if code == OP_DCCI:
        return _dcci, (d.word(a[2]) if len(a) > 2 else None, a[0], a[1])
    if code == OP_LOAD:
        return pipe.TLOAD, (d.tile(a, 0), d.tensor(a, 6))
    if code == OP_STORE:
        return pipe.TSTORE, (d.tensor(a, 6), d.tile(a, 0), AtomicType(a[18]))
    if code in (OP_PUT, OP_GET):
        copy: Callable[..., Any] = comm.TPUT if code == OP_PUT else comm.TGET
        extra = (AtomicType(a[30]),) if code == OP_PUT and a[30] else ()
        return copy, (d.tensor(a, 0), d.tensor(a, 12), d.tile(a, 24), *extra)
    if code == OP_SYNCALL:
        return comm.SYNCALL, ()
    if code == OP_TILE_COPY:
        return issue_tile_copy, (d, a)
    if code == OP_ST_ATOMIC:
        ptr = d.ptr(a[0], a[1])
        raw = a[2]
        value: Any = (np.frombuffer(raw.to_bytes(8, "little"), np.float64)[0]
                      if ptr.dtype.kind == "f" else _signed(raw))
        return comm.st_atomic, (ptr.dtype.type(value), ptr)
    raise ArgumentError(f"native: unknown instruction code {code}")


def _dcci(word: GMPtr | None, mode: int, dst: int) -> None:
    """A native kernel's ``dcci``: shmcomm's (of the whole cache, as before: the models keep no
    line of a native kernel's plain loads), then the observers learn the line's word, the only
    trace of the plain loads and stores that native code makes of it."""
    pipe.dcci(None, mode, dst)
    if word is not None:
        for o in getattr(current().pipes, "obs", ()):
            o.native_dcci(word, mode)


# instructions whose Python call is a pure function of their argument words (no tile whose
# valid shape may change): their call is made once per block and call site, then reused
_PURE = frozenset((OP_NOTIFY, OP_WAIT, OP_TEST, OP_PIPE_BARRIER, OP_SET_FLAG, OP_WAIT_FLAG, OP_DSB,
                   OP_DCCI, OP_SYNCALL))
MAX_CACHED_CALLS = 4096


def _op(code: int, args: Any, n: int, file: bytes, line: int) -> int:
    try:
        d = agent_decoder(current())
        a = args[:n]
        key = (code, line, file, *a)
        call = d.calls.get(key)
        if call is None:
            fn, call_args = _call(code, a, d)
            call = (at_line(*user_site(file, line)), {"f": fn, "a": call_args})
            if code in _PURE and len(d.calls) < MAX_CACHED_CALLS:
                d.calls[key] = call
        result = eval(call[0], call[1])  # the frame at the C++ file:line (see at_line)
        return int(result) if isinstance(result, (bool, int)) else 0
    except BaseException as exc:  # kept, re-raised in the block once the C++ frames unwound
        _tls.exc = exc
        return -1


OP_CALLBACK = OP_FUNC(_op)  # one per process: the trampolines never outlive it
_decoders: dict[int, _Decoder] = {}


def agent_decoder(agent: Any) -> _Decoder:
    d = _tls.__dict__.get("decoder")
    if d is None or d[0] is not agent:
        from .context import window_bases
        d = _tls.decoder = (agent, _Decoder(agent, window_bases(agent.rt.windows)))
    return d[1]
