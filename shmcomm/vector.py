"""PTO's tile vector instructions on ``PIPE_V``, with pto-isa's names and argument order.

``TADD(dst, src0, src1)``, ``TADDS(dst, src, scalar)``, ``TEXP(dst, src)``, ... compute on the
**valid region** of ``dst`` (``GetValidRow`` x ``GetValidCol``); as pto-isa asserts, every source
tile must have the same valid region (the row / column reductions: the matching dimension).
Elements outside the valid region are left alone. Each takes trailing event tokens (waited for
first, PTO's ``WaitEvents&...``) and returns ``RECORD`` (PTO's ``RecordEvent``).

They run on the block's vector pipe: in eager mode at once; in hazard mode queued on ``PIPE_V``
and retired in order, so a vector instruction is ordered against ``TLOAD`` (MTE2) and ``TSTORE``
(MTE3) only by ``set_flag`` / ``wait_flag`` with ``PIPE_V`` or by ``pipe_barrier``, as on the NPU:

    TLOAD(t, src); set_flag(PIPE_MTE2, PIPE_V, EVENT_ID0); wait_flag(PIPE_MTE2, PIPE_V, EVENT_ID0)
    TADDS(t, t, 1.0); set_flag(PIPE_V, PIPE_MTE3, EVENT_ID0); wait_flag(PIPE_V, PIPE_MTE3, EVENT_ID0)
    TSTORE(dst, t)

The race detector records each as UB accesses on ``PIPE_V`` (reads of its sources, a write of
its destination), so a vector write into a tile whose ``TSTORE`` is still in flight is reported.
``tile.array`` stays readable for inspection; in hazard mode read it after ``pipe_barrier``.

Not here: the matrix (cube) instructions (``TMATMUL``: PIPE_M), the other ``TMOV`` forms (with
a tmp / relu / quantization), ``TCVT``'s ``CAST_ODD``, and the many further vector instructions
of ``pto_instr.hpp`` (``TRECIP``, ``TRELU``, ``TNEG``, ``TROWMAX``, ...).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .core import agent as _agent
from .core.tile import Tile, VectorOp
from .errors import ArgumentError
from .pipe import RECORD, RecordEvent
from .pipe import wait_events as _wait_events
from .types import RoundMode, check_enum

__all__ = [
    "TADD", "TSUB", "TMUL", "TDIV", "TMAX", "TMIN", "TADDS", "TSUBS", "TMULS", "TDIVS", "TMAXS",
    "TMINS", "TEXP", "TLOG", "TSQRT", "TABS", "TCVT", "TMOV", "TEXPANDS", "TROWSUM", "TCOLSUM",
    "RoundMode",
]

# dtypes by name (bfloat16's dtype comes from a package imported on first use; a tile's dtype
# passed shmcomm's check, so its name says which it is)
_FLOATS = frozenset(("float16", "float32"))
_ARITH = _FLOATS | {"int16", "int32", "bfloat16"}
_ABS = _FLOATS | {"int16", "int32"}


def _tile(op: str, name: str, t: Any) -> Tile:
    if not isinstance(t, Tile):
        raise ArgumentError(f"{op}: {name} must be a Tile from ctx.tile(), got {type(t).__name__}")
    return t


def _region(t: Tile) -> tuple[int, int]:
    return t.valid_row, t.valid_col


def _dtypes(op: str, dst: Tile, srcs: tuple[Tile, ...], allowed: frozenset) -> None:
    d = dst.dtype
    for i, t in enumerate(srcs):
        if t.dtype != d:
            name = "src" if len(srcs) == 1 else f"src{i}"
            raise ArgumentError(f"{op}: {name} dtype {t.dtype} differs from dst's {d} "
                                "(TCVT converts)")
    if d.name not in allowed:
        names = ", ".join(sorted(allowed))
        raise ArgumentError(f"{op}: dtype must be one of {names}, got {d}")


def _same_region(op: str, dst: Tile, srcs: tuple[Tile, ...]) -> tuple[int, int]:
    vr, vc = dst.valid_row, dst.valid_col
    for i, s in enumerate(srcs):
        if s.valid_row != vr or s.valid_col != vc:
            name = "src" if len(srcs) == 1 else f"src{i}"
            raise ArgumentError(f"{op}: {name}'s valid region {s.valid_row}x{s.valid_col} differs "
                                f"from dst's {vr}x{vc}")
    return vr, vc


def _scalar(op: str, dst: Tile, scalar: Any) -> Any:
    if isinstance(scalar, bool) or not isinstance(scalar, (int, float, np.integer, np.floating)):
        raise ArgumentError(f"{op}: scalar must be a number, got {scalar!r}")
    if dst.dtype.kind in "iu":
        if not float(scalar).is_integer():
            raise ArgumentError(f"{op}: scalar must be an int for a {dst.dtype} tile, got {scalar!r}")
        info = np.iinfo(dst.dtype)
        if not info.min <= scalar <= info.max:
            raise ArgumentError(f"{op}: scalar must be in [{info.min}, {info.max}] for {dst.dtype}, "
                                f"got {scalar}")
    return np.asarray(scalar, dtype=dst.dtype)[()]


def _issue(op: str, dst: Tile, region: tuple[int, int], srcs: tuple, fn: Any,
           events: tuple) -> RecordEvent:
    if events:
        _wait_events(events, op)
    _agent.current().pipes.vector(VectorOp(op, dst, region, srcs, fn))
    return RECORD


def _binary(op: str, fn: Any, allowed: frozenset = _ARITH) -> Callable[..., RecordEvent]:
    def instr(dst: Tile, src0: Tile, src1: Tile, *events: Any) -> RecordEvent:
        _tile(op, "dst", dst)
        _tile(op, "src0", src0)
        _tile(op, "src1", src1)
        _dtypes(op, dst, (src0, src1), allowed)
        region = _same_region(op, dst, (src0, src1))
        return _issue(op, dst, region, ((src0, region), (src1, region)), fn, events)
    instr.__name__ = instr.__qualname__ = op
    instr.__doc__ = f"``{op}(dst, src0, src1)``: ``dst = {fn.__name__}(src0, src1)`` element-wise " \
                    "on dst's valid region (PIPE_V)."
    return instr


def _with_scalar(op: str, fn: Any, allowed: frozenset = _ARITH) -> Callable[..., RecordEvent]:
    def instr(dst: Tile, src: Tile, scalar: Any, *events: Any) -> RecordEvent:
        _tile(op, "dst", dst)
        _tile(op, "src", src)
        _dtypes(op, dst, (src,), allowed)
        region = _same_region(op, dst, (src,))
        s = _scalar(op, dst, scalar)
        return _issue(op, dst, region, ((src, region),), lambda a: fn(a, s), events)
    instr.__name__ = instr.__qualname__ = op
    instr.__doc__ = f"``{op}(dst, src, scalar)``: ``dst = {fn.__name__}(src, scalar)`` element-wise " \
                    "on dst's valid region (PIPE_V)."
    return instr


def _unary(op: str, fn: Any, allowed: frozenset = _FLOATS) -> Callable[..., RecordEvent]:
    def instr(dst: Tile, src: Tile, *events: Any) -> RecordEvent:
        _tile(op, "dst", dst)
        _tile(op, "src", src)
        _dtypes(op, dst, (src,), allowed)
        region = _same_region(op, dst, (src,))
        return _issue(op, dst, region, ((src, region),), fn, events)
    instr.__name__ = instr.__qualname__ = op
    instr.__doc__ = f"``{op}(dst, src)``: ``dst = {fn.__name__}(src)`` element-wise on dst's " \
                    "valid region (PIPE_V)."
    return instr


def _div(a: np.ndarray, b: Any) -> np.ndarray:
    return np.true_divide(a, b, dtype=a.dtype)


TADD = _binary("TADD", np.add)
TSUB = _binary("TSUB", np.subtract)
TMUL = _binary("TMUL", np.multiply)
TDIV = _binary("TDIV", _div, _FLOATS)
TMAX = _binary("TMAX", np.maximum)
TMIN = _binary("TMIN", np.minimum)
TADDS = _with_scalar("TADDS", np.add)
TSUBS = _with_scalar("TSUBS", np.subtract)
TMULS = _with_scalar("TMULS", np.multiply)
TDIVS = _with_scalar("TDIVS", _div, _FLOATS)
TMAXS = _with_scalar("TMAXS", np.maximum)
TMINS = _with_scalar("TMINS", np.minimum)
TEXP = _unary("TEXP", np.exp)
TLOG = _unary("TLOG", np.log)
TSQRT = _unary("TSQRT", np.sqrt)
TABS = _unary("TABS", np.abs, _ABS)


def TMOV(dst: Tile, src: Tile, *events: Any) -> RecordEvent:
    """``TMOV(dst, src)``: copy ``src``'s valid region into ``dst`` (same dtype; PIPE_V)."""
    _tile("TMOV", "dst", dst)
    _tile("TMOV", "src", src)
    if src.dtype != dst.dtype:
        raise ArgumentError(f"TMOV: src dtype {src.dtype} differs from dst's {dst.dtype} (TCVT "
                            "converts)")
    region = _same_region("TMOV", dst, (src,))
    return _issue("TMOV", dst, region, ((src, region),), lambda a: a, events)


def TEXPANDS(dst: Tile, scalar: Any, *events: Any) -> RecordEvent:
    """``TEXPANDS(dst, scalar)``: fill dst's valid region with ``scalar`` (PIPE_V)."""
    _tile("TEXPANDS", "dst", dst)
    s = _scalar("TEXPANDS", dst, scalar)
    return _issue("TEXPANDS", dst, _region(dst), (), lambda: s, events)


def TROWSUM(dst: Tile, src: Tile, tmp: Tile, *events: Any) -> RecordEvent:
    """``TROWSUM(dst, src, tmp)``: ``dst[r, 0]`` = the sum of row ``r`` of src's valid region, for
    each of its valid rows (dst's valid rows must match; ``tmp``, pto-isa's scratch tile, is
    accepted and not used)."""
    for name, t in (("dst", dst), ("src", src), ("tmp", tmp)):
        _tile("TROWSUM", name, t)
    _dtypes("TROWSUM", dst, (src,), _ARITH)
    vr, vc = _region(src)
    if dst.valid_row != vr:
        raise ArgumentError(f"TROWSUM: dst's valid rows ({dst.valid_row}) differ from src's ({vr})")
    return _issue("TROWSUM", dst, (vr, 1), ((src, (vr, vc)),),
                  lambda a: a.sum(axis=1, keepdims=True, dtype=a.dtype), events)


def TCOLSUM(dst: Tile, src: Tile, *more: Any) -> RecordEvent:
    """``TCOLSUM(dst, src)`` or ``TCOLSUM(dst, src, tmp, is_binary)``: ``dst[0, c]`` = the sum of
    column ``c`` of src's valid region (dst's valid columns must match; the binary-tree form
    gives the same sums here)."""
    _tile("TCOLSUM", "dst", dst)
    _tile("TCOLSUM", "src", src)
    events: tuple = more
    if more and isinstance(more[0], Tile):
        if len(more) < 2 or not isinstance(more[1], bool):
            raise ArgumentError("TCOLSUM: expected (dst, src) or (dst, src, tmp, is_binary) with "
                                "is_binary a bool")
        events = more[2:]
    _dtypes("TCOLSUM", dst, (src,), _ARITH)
    vr, vc = _region(src)
    if dst.valid_col != vc:
        raise ArgumentError(f"TCOLSUM: dst's valid columns ({dst.valid_col}) differ from src's ({vc})")
    return _issue("TCOLSUM", dst, (1, vc), ((src, (vr, vc)),),
                  lambda a: a.sum(axis=0, keepdims=True, dtype=a.dtype), events)


_ROUND: dict[RoundMode, Callable[[np.ndarray], np.ndarray]] = {
    RoundMode.CAST_RINT: np.rint, RoundMode.CAST_FLOOR: np.floor, RoundMode.CAST_CEIL: np.ceil,
    RoundMode.CAST_TRUNC: np.trunc,
    RoundMode.CAST_ROUND: lambda a: np.sign(a) * np.floor(np.abs(a) + 0.5),
}


def TCVT(dst: Tile, src: Tile, *more: Any) -> RecordEvent:
    """``TCVT(dst, src, mode)`` (also ``(dst, src, tmp, mode)`` and ``(dst, src, mode, sat)``):
    convert src's valid region to dst's dtype, rounding by ``mode`` (a :class:`RoundMode`).

    A float converted to an integer dtype is rounded by ``mode`` (``CAST_NONE``: to nearest-even)
    and saturates at the dtype's range. Any other conversion is numpy's cast (a narrowed float
    rounds to nearest-even whatever ``mode`` says). ``CAST_ODD`` is not emulated."""
    _tile("TCVT", "dst", dst)
    _tile("TCVT", "src", src)
    args = list(more)
    if args and isinstance(args[0], Tile):
        args.pop(0)  # the tmp tile of the (dst, src, tmp, mode) form
    if not args:
        raise ArgumentError("TCVT: mode is required (a RoundMode)")
    mode = RoundMode(check_enum(RoundMode, args.pop(0), "TCVT: mode"))
    if args and isinstance(args[0], int) and not callable(getattr(args[0], "wait", None)):
        args.pop(0)  # SaturationMode: a float -> int conversion always saturates here
    if mode is RoundMode.CAST_ODD:
        raise ArgumentError("TCVT: RoundMode.CAST_ODD (round to odd) is not emulated; use "
                            "CAST_RINT")
    region = _same_region("TCVT", dst, (src,))
    to = dst.dtype
    rnd = _ROUND.get(mode)
    to_int = to.kind in "iu" and src.dtype.kind == "f"

    def convert(a: np.ndarray) -> np.ndarray:
        if to_int:
            x = (rnd or np.rint)(a.astype(np.float64))
            info = np.iinfo(to)
            return np.clip(x, info.min, info.max)
        return a  # numpy's cast: a float narrowed rounds to nearest-even whatever the mode
    return _issue("TCVT", dst, region, ((src, region),), convert, tuple(args))
