"""Small pieces the catalogue's programs share: the signal slots they use and data helpers.

Signal layout of the catalogue programs (int32 words from ``ctx.signal_base``): in the users'
free range of :mod:`shmcomm.kernels.layout`, so clear of every library region (the programs also
run ``DeviceBarrier``, ``EpochBarrier`` and the collectives); each slot group starts on its own
64-byte line so that only the packed-slot bug shares a line on purpose::

    FLAG_SLOT   CAT_BASE + 0    a data-ready flag or counter
    ACK_SLOT    CAT_BASE + 16   an acknowledgement count back to the producer
    PHASE_SLOT  CAT_BASE + 32   a phase word (the EQ-transient bug)
    PACKED_SLOT CAT_BASE + 48   up to 16 Set slots packed on one line (the pto-isa #322 bug)
    RING_SLOT   CAT_BASE + 64   a ring notification (the host-reset bug)
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...comm import TPUT, GlobalTensor
from ...kernels.layout import USER_FREE_START
from ...pipe import DSB_DDR, PIPE_ALL, TLOAD, dsb, pipe_barrier

CAT_BASE = USER_FREE_START + 3072  # words (48 KiB): in the free range of the default 64 KiB matrix
FLAG_SLOT = CAT_BASE
ACK_SLOT = CAT_BASE + 16
PHASE_SLOT = CAT_BASE + 32
PACKED_SLOT = CAT_BASE + 48
RING_SLOT = CAT_BASE + 64

TILE_COLS = 256  # staging tile width: sizes above it make TPUT chunk


def slot(ctx, word: int, rank: int | None = None):
    """Pointer to signal word ``word`` of this rank (or of ``rank``)."""
    p = ctx.signal_base + word
    return p if rank is None else p.on_rank(rank)


def staging(ctx, size: int, dtype=np.float32):
    """A UB staging tile for ``size`` elements (chunked transfers above ``TILE_COLS``)."""
    return ctx.tile((1, min(size, TILE_COLS)), dtype)


def put(ctx, dst, src, size: int, tile) -> None:
    """TPUT ``size`` elements from local ``src`` to ``dst`` (both GM pointers)."""
    TPUT(GlobalTensor(dst, (1, size)), GlobalTensor(src, (1, size)), tile)


def release() -> None:
    """The release fence: drain every pipe, then the DDR fence."""
    pipe_barrier(PIPE_ALL)
    dsb(DSB_DDR)


def read(src, size: int, tile) -> np.ndarray:
    """Read ``size`` elements of GM at ``src`` the PTO way: acquire fence, TLOAD, drain."""
    release()
    out = np.empty(size, dtype=tile.dtype)
    for c0 in range(0, size, tile.cols):
        c1 = min(c0 + tile.cols, size)
        TLOAD(tile, GlobalTensor(src + c0, (1, c1 - c0)))
        pipe_barrier(PIPE_ALL)
        out[c0:c1] = tile.array[0, :c1 - c0]
    return out


def expect(what: str, got: Any, want: Any) -> None:
    """Raise AssertionError (a "wrong result") naming the first wrong element."""
    got = np.asarray(got)
    want = np.broadcast_to(np.asarray(want, dtype=got.dtype), got.shape)
    bad = np.flatnonzero(got != want)
    if bad.size:
        i = int(bad[0])
        raise AssertionError(f"{what}: element {i} is {got.flat[i]}, expected {want.flat[i]} "
                             f"({bad.size} of {got.size} elements wrong)")
