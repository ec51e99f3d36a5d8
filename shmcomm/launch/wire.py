"""The reports a rank process sends its launcher, and how the launcher reads them.

A rank sends one pickled message through its pipe when its host function ends: ``("ok",
result)``, ``("error", {...})`` (a failure), ``("aborted", text)`` or ``("advice", [...])``. The
launcher never trusts it: it unpickles plain data at once and anything that names a class in a
thread with a time limit, checks the message's shape, and clips every text.
"""

from __future__ import annotations

import io
import pickle
import threading
from multiprocessing.reduction import ForkingPickler
from typing import Any

from ..config import MAX_BLOCKS
from ..errors import Aborted, Failure, ShmcommError

MAX_REPORT_BYTES = 1 << 30  # a rank's report larger than this is refused, not read
MAX_ADVICE = 16  # likely causes a failure report prints (each rank keeps its first few)

class _NeedsCode(Exception):
    """The pickle names a class or function: reconstructing it may run code."""


class _DataOnly(pickle.Unpickler):
    """Unpickles plain data only (``None``, numbers, strings, bytes, lists, tuples, dicts,
    sets): a pickle that names no global cannot run any code of its own."""

    def find_class(self, module: str, name: str) -> Any:
        raise _NeedsCode(f"{module}.{name}")


def loads_bounded(data: bytes, limit: float) -> tuple[str, Any]:
    """Unpickle a rank's report within ``limit`` seconds, and check its shape.

    Unpickling a result that names a class runs that class's reconstruction code: that happens
    in a daemon thread so that a result which stalls there costs the launcher ``limit`` seconds,
    never a hang. Plain data (most results, every result of ``None``) is read at once: starting
    a thread for it cost every run a thread per rank."""
    box: list[Any] = []
    try:
        box.append(("ok", _DataOnly(io.BytesIO(data)).load()))
    except _NeedsCode:
        box.clear()
    except Exception as exc:  # noqa: BLE001 -- garbled data: reported below
        box.append(("err", exc))

    def load() -> None:
        try:
            box.append(("ok", ForkingPickler.loads(data)))
        except BaseException as exc:  # noqa: BLE001 -- reported to the user below
            box.append(("err", exc))

    if not box:
        t = threading.Thread(target=load, name="shmcomm-unpickle", daemon=True)
        t.start()
        t.join(limit)
    if not box:
        raise ShmcommError(f"unpickling it did not finish within {limit:g} s")
    how, value = box[0]
    if how == "err":
        raise ShmcommError(f"unpickling it raised {type(value).__name__}: {str(value)[:500]}")
    if not (isinstance(value, tuple) and len(value) == 2 and value[0] in ("ok", "aborted", "error",
                                                                          "advice")):
        raise ShmcommError("its report is not a shmcomm report (garbled pipe data)")
    return value


def failure_from(rank: int, payload: Any) -> Failure:
    """The Failure a rank reported, checked field by field (rank data is never trusted)."""
    if not isinstance(payload, dict):
        return Failure(rank, None, "exception", f"garbled failure report: {payload!r:.200}")
    block = payload.get("block")
    if block is not None and (type(block) is not int or not 0 <= block < MAX_BLOCKS):
        block = None
    text: dict[str, str] = {k: v if isinstance(v := payload.get(k), str) else "" for k in
            ("kind", "message", "traceback")}
    kind = text["kind"] if text["kind"] in ("exception", "crash") else "exception"  # a rank
    return Failure(rank, block, kind,  # cannot claim to be a deadlock or a timeout
                   clip(text["message"], MAX_MESSAGE_CHARS) or "(no message)",
                   clip(text["traceback"], MAX_TRACEBACK_CHARS))


PICKLE_ERROR = [""]
def pickled(rank: int, msg: tuple[str, Any]) -> bytes | None:
    """``msg`` as the bytes ``Connection.recv`` unpickles, or ``None`` (why: ``PICKLE_ERROR``).
    Any exception counts (``ValueError``, ``RecursionError`` from ``__reduce__``, not only
    ``PicklingError``): a result that cannot travel must be reported, never swallowed."""
    try:
        return bytes(ForkingPickler.dumps(msg))
    except BaseException as exc:  # noqa: BLE001 -- user __reduce__ may raise anything
        PICKLE_ERROR[0] = f"{type(exc).__name__}: {str(exc)[:500]}"
        return None


MAX_MESSAGE_CHARS = 8000  # of a failure's message in the report (a 50 MB message is cut)
MAX_TRACEBACK_CHARS = 64000


def clip(text: str, limit: int) -> str:
    """``text`` cut to about ``limit`` characters: its head and tail, and how much was cut."""
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]}\n[... {len(text) - 2 * half} characters cut ...]\n{text[-half:]}"


def failure_msg(rank: int, block: int | None, exc: BaseException, tb: str) -> tuple[str, Any]:
    if isinstance(exc, Aborted):
        return ("aborted", clip(str(exc), MAX_MESSAGE_CHARS))
    try:
        text = str(exc)
    except BaseException as err:  # noqa: BLE001 -- a __str__ that raises still reports
        text = f"(str() of the exception raised {type(err).__name__})"
    return ("error", dict(rank=rank, block=block, kind="exception",
                          message=clip(f"{type(exc).__name__}: {text}", MAX_MESSAGE_CHARS),
                          traceback=clip(tb, MAX_TRACEBACK_CHARS)))
