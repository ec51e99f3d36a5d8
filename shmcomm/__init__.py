"""shmcomm: run PTO-ISA-style communication kernels on a Linux CPU, truly concurrently.

Ranks are processes, blocks are threads, signal matrices live in POSIX shared memory and change
only through hardware atomics. Kernels import their instructions from :mod:`shmcomm.comm` and
:mod:`shmcomm.pipe`; hosts start with :func:`shmcomm.run` (or :class:`shmcomm.Pool` for many runs).
"""

from . import _startup  # noqa: F401  -- first: a Ctrl-C during a command's start-up is quiet
from .comm import GMPtr as GMPtr
from .config import MAX_BLOCKS as MAX_BLOCKS
from .config import MAX_RANKS as MAX_RANKS
from .config import Config as Config
from .core.runtime import DeviceContext as DeviceContext
from .core.runtime import KernelError as KernelError
from .errors import Aborted as Aborted
from .errors import ArgumentError as ArgumentError
from .errors import DeadlockError as DeadlockError
from .errors import Failure as Failure
from .errors import LibraryError as LibraryError
from .errors import RaceReport as RaceReport
from .errors import RunError as RunError
from .errors import RunTimeout as RunTimeout
from .errors import ShmcommError as ShmcommError
from .errors import ShmcommWarning as ShmcommWarning
from .errors import SignalOverlapError as SignalOverlapError
from .errors import WaitTimeout as WaitTimeout
from .kernels.host import RankRuntime as RankRuntime
from .launch.pool import Pool as Pool
from .launch.supervisor import run as run

__version__ = "0.1.0"
