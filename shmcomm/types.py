"""PTO's enums, with PTO's numbering (``include/pto/comm/comm_types.hpp``, ``pto/common/type.hpp``).

Never cast these to NVSHMEM's or aclshmem's values: the numbering differs (NVSHMEM's compare
order is EQ, NE, GT, LE, LT, GE; PTO's is EQ, NE, GT, GE, LT, LE).
"""

from __future__ import annotations

from enum import IntEnum


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


def check_enum(enum: type[IntEnum], value: object, what: str) -> int:
    """``value`` as an int member of ``enum``, or an ArgumentError naming ``what`` and the range."""
    from .errors import ArgumentError

    if type(value) is enum:
        return int(value)  # type: ignore[call-overload]
    if (isinstance(value, (bool, IntEnum)) or not isinstance(value, int)
            or value not in enum._value2member_map_):
        allowed = ", ".join(f"{m.name}={m.value}" for m in enum)
        raise ArgumentError(f"{what} must be a {enum.__name__} ({allowed}); got {value!r}")
    return int(value)
