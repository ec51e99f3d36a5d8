"""Loading mpi4py: the optional dependency, the thread level, and the MPI errors we expect.

Blocks are threads and every block issues one-sided operations on its own, so the transport needs
``MPI_THREAD_MULTIPLE``; an MPI library that cannot give it is refused at start with a clear
error rather than left to corrupt its state under concurrent calls.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from typing import Any

from ...errors import LibraryError

INSTALL_HINT = "pip install 'shmcomm[mpi]' (mpi4py and the MPICH wheel)"


def load_mpi() -> Any:
    """The ``mpi4py.MPI`` module, initialized with ``MPI_THREAD_MULTIPLE``.

    Raises :class:`LibraryError` when mpi4py is missing, when MPI was initialized elsewhere with
    a lower thread level, or when the library does not provide ``MPI_THREAD_MULTIPLE``.
    """
    try:
        import mpi4py
    except ImportError:
        raise LibraryError(f"the mpi transport needs mpi4py: {INSTALL_HINT}") from None
    mpi4py.rc.thread_level = "multiple"  # before the first `from mpi4py import MPI`
    try:
        from mpi4py import MPI
    except ImportError as exc:  # mpi4py without a usable MPI library
        raise LibraryError(f"the mpi transport cannot load an MPI library ({exc}); "
                           f"{INSTALL_HINT}") from None
    provided = MPI.Query_thread()
    if provided != MPI.THREAD_MULTIPLE:
        names = {MPI.THREAD_SINGLE: "MPI_THREAD_SINGLE", MPI.THREAD_FUNNELED: "MPI_THREAD_FUNNELED",
                 MPI.THREAD_SERIALIZED: "MPI_THREAD_SERIALIZED"}
        raise LibraryError(
            f"the mpi transport runs blocks as threads that each call MPI, so it needs "
            f"MPI_THREAD_MULTIPLE; {MPI.Get_library_version().splitlines()[0].strip()} provides "
            f"{names.get(provided, provided)} (was MPI initialized before shmcomm, or built "
            "without thread support?)")
    return MPI


def mpi_available() -> bool:
    """Whether mpi4py can be imported (without initializing MPI)."""
    try:
        import mpi4py  # noqa: F401
    except ImportError:
        return False
    return True


def find_mpiexec() -> str | None:
    """The ``mpiexec`` next to this interpreter (where the MPICH wheel installs it), else one on
    ``PATH``; ``None`` without mpi4py."""
    if not mpi_available():
        return None
    local = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    return local if os.access(local, os.X_OK) else shutil.which("mpiexec")


def run_script(mpiexec: str, nranks: int, argv: list[str], timeout: float,
               ) -> tuple[int, str, str]:
    """``mpiexec -n nranks python argv``: ``(status, stdout, stderr)``. The job runs in its own
    process group, so on a timeout or an interrupt no rank outlives the caller (an orphaned MPICH
    job leaves its segment in /dev/shm): SIGTERM first (mpiexec tears its job down and unlinks its
    files), SIGKILL after 3 s."""
    cmd = [mpiexec, "-n", str(nranks), sys.executable, *argv]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    out, err = "", ""
    try:
        out, err = proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=3)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
    return proc.returncode, out, err
