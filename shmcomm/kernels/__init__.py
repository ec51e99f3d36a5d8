"""Kernels written in the PTO vocabulary: barriers and collectives; ``layout`` is the table of
the signal-matrix regions they use and of the users' free range."""

from .barrier import CentralBarrier as CentralBarrier
from .barrier import DeviceBarrier as DeviceBarrier
from .barrier import EpochBarrier as EpochBarrier
from .collectives import all_gather as all_gather
from .collectives import all_gather_kernel as all_gather_kernel
from .collectives import all_reduce as all_reduce
from .collectives import all_reduce_kernel as all_reduce_kernel
from .collectives import reduce_scatter as reduce_scatter
from .collectives import reduce_scatter_kernel as reduce_scatter_kernel
from .collectives import share_bounds as share_bounds
