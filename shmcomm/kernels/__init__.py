"""Kernels written in the PTO vocabulary: barriers now, collectives next."""

from .barrier import DeviceBarrier as DeviceBarrier
from .barrier import EpochBarrier as EpochBarrier
