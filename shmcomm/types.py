"""PTO's enums and constants, with PTO's numbering, written once.

Sources: ``include/pto/comm/comm_types.hpp`` and ``pto/common/type.hpp`` for the enums, the
AscendC intrinsics for ``PIPE_*``, ``EVENT_ID*``, ``DSB_*`` and the ``dcci`` modes. Never cast the
comparison enum to NVSHMEM's or aclshmem's values: the numbering differs (NVSHMEM's compare order
is EQ, NE, GT, LE, LT, GE; PTO's is EQ, NE, GT, GE, LT, LE).
"""

from __future__ import annotations

import operator
from enum import IntEnum

from .errors import ArgumentError

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1


class NotifyOp(IntEnum):
    """How ``TNOTIFY`` updates a signal: an atomic add, or a plain (single-writer) store."""

    AtomicAdd = 0
    Set = 1


class WaitCmp(IntEnum):
    """The comparison ``TWAIT`` / ``TTEST`` apply as ``signal <cmp> value``."""

    EQ = 0
    NE = 1
    GT = 2
    GE = 3
    LT = 4
    LE = 5


class ReduceOp(IntEnum):
    """Reduction of ``TREDUCE`` and the reducing collectives."""

    Sum = 0
    Max = 1
    Min = 2


class AtomicType(IntEnum):
    """Whether ``TSTORE`` / ``TPUT`` overwrite (``AtomicNone``) or accumulate (``AtomicAdd``)."""

    AtomicNone = 0
    AtomicAdd = 1


class SyncAllMode(IntEnum):
    """``SYNCALL``'s form (``pto/common/type.hpp``): the hardware cross-core barrier, or the
    software barrier on a GM counter."""

    Hard = 0
    Soft = 1


class RoundMode(IntEnum):
    """How ``TCVT`` rounds (``pto/common/type.hpp``)."""

    CAST_NONE = 0
    CAST_RINT = 1  # nearest, ties to even
    CAST_ROUND = 2  # nearest, ties away from zero
    CAST_FLOOR = 3
    CAST_CEIL = 4
    CAST_TRUNC = 5
    CAST_ODD = 6  # round to odd (not emulated)


# the dtypes an AtomicAdd TSTORE accumulates (``SetAtomicAdd<T>``'s static_assert in
# ``pto/common/arch/memory/tstore_common.hpp``): half, float, int16, int32, int8, bfloat16
ATOMIC_ADD_DTYPES = ("float16", "float32", "int16", "int32", "int8", "bfloat16")

# comparisons by WaitCmp value
CMP_FUNCS = (operator.eq, operator.ne, operator.gt, operator.ge, operator.lt, operator.le)
CMP_SYMBOLS = ("==", "!=", ">", ">=", "<", "<=")

# pipes of an AI core
PIPE_S, PIPE_V, PIPE_MTE1, PIPE_MTE2, PIPE_MTE3, PIPE_M, PIPE_ALL, PIPE_FIX = range(8)
PIPE_NAMES = ("PIPE_S", "PIPE_V", "PIPE_MTE1", "PIPE_MTE2", "PIPE_MTE3", "PIPE_M", "PIPE_ALL",
              "PIPE_FIX")
# event ids of set_flag / wait_flag (one 1-bit flag per (src pipe, dst pipe, id))
EVENT_ID0, EVENT_ID1, EVENT_ID2, EVENT_ID3, EVENT_ID4, EVENT_ID5, EVENT_ID6, EVENT_ID7 = range(8)
NUM_EVENTS = 8
# dsb levels
DSB_ALL, DSB_DDR, DSB_UB = 0, 1, 2
# dcci: which lines, and where they go
SINGLE_CACHE_LINE, ENTIRE_DATA_CACHE = 0, 1
CACHELINE_OUT = 0


def check_enum(enum: type[IntEnum], value: object, what: str) -> int:
    """``value`` as an int member of ``enum``, or an ArgumentError naming ``what`` and the range."""
    if type(value) is enum:
        return int(value)
    if (isinstance(value, (bool, IntEnum)) or not isinstance(value, int)
            or value not in enum._value2member_map_):
        allowed = ", ".join(f"{m.name}={m.value}" for m in enum)
        raise ArgumentError(f"{what} must be a {enum.__name__} ({allowed}); got {value!r}")
    return int(value)


def check_atomic_dtype(dtype: object, op: str) -> None:
    """Raise unless an ``AtomicAdd`` of ``op`` may accumulate ``dtype`` (pto-isa's list)."""
    name = getattr(dtype, "name", str(dtype))
    if name not in ATOMIC_ADD_DTYPES:
        raise ArgumentError(f"{op}: AtomicAdd accumulates only {', '.join(ATOMIC_ADD_DTYPES)} "
                            f"(pto-isa's SetAtomicAdd), got {name}")
