"""Seeded jitter: sleeps and GIL switches at sync points, so block interleavings vary by seed.

At every sync point and data move the hazard model calls :meth:`Jitter.point`; with the seeded stream
of the block it does nothing, releases the GIL (``time.sleep(0)``: another block of the rank may
run) or sleeps a few tens of microseconds (other ranks run). A small ``sys.setswitchinterval``
makes the interpreter switch blocks of one rank between bytecodes far more often.
"""

from __future__ import annotations

import random
import sys
import time

SWITCH_INTERVAL_S = 5e-5
P_SWITCH = 0.25  # release the GIL
P_SLEEP = 0.05  # sleep up to MAX_SLEEP_S
MAX_SLEEP_S = 2e-4


class Jitter:
    """The jitter of one block, drawing from the block's seeded stream."""

    __slots__ = ("rng",)

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        if sys.getswitchinterval() > SWITCH_INTERVAL_S:
            sys.setswitchinterval(SWITCH_INTERVAL_S)

    def point(self) -> None:
        r = self.rng.random()
        if r < P_SLEEP:
            time.sleep(self.rng.random() * MAX_SLEEP_S)
        elif r < P_SLEEP + P_SWITCH:
            time.sleep(0)
