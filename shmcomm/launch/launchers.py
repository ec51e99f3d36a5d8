"""Which launcher runs a transport's ranks: the transport decides, not the supervisor or the pool.

``shm``: this process forks the ranks (the supervisor, or a pool's kept processes). ``mpi``:
``mpiexec`` started this process as one rank of the job, and :func:`shmcomm.launch.mpi.run_mpi`
runs the host code in it. A new transport whose ranks some other tool starts adds its entry here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

# transport name -> "module:function" of a launcher run(host, config, args, nranks) -> results
_EXTERNAL = {"mpi": "mpi:run_mpi"}


def external_launcher(transport: str) -> Callable[..., Any] | None:
    """The launcher of a transport whose ranks are started outside this process (``None``:
    the caller forks them itself). Imported on demand: mpi4py loads only under ``mpi``."""
    entry = _EXTERNAL.get(transport)
    if entry is None:
        return None
    import importlib

    module, func = entry.split(":")
    return getattr(importlib.import_module(f"{__package__}.{module}"), func)
