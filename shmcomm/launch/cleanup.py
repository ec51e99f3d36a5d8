"""``python -m shmcomm cleanup [--dry-run]``: remove stale shmcomm segments of dead runs.

A run unlinks every segment microseconds after creating it (see :mod:`shmcomm.transports.shm.segments`), so a
name can only be left in ``/dev/shm`` when its creator died inside that window (SIGKILL, power
loss of a container, a debugger stop). Names look like ``shmcomm.<creator pid>.<hex>.<tag>``;
the creator pid tells whether the run may still be alive:

* pid not running, or running but started after the segment was created (the pid was reused):
  the run is dead and the segment is **stale**: removed (listed only with ``--dry-run``);
* pid running and older than the segment: a **live** run's segment, never touched;
* a name with the ``shmcomm.`` prefix but not this pattern: **unknown**, left alone.

MPICH's own files (``mpich_shm_*``: an MPI job's windows, left when a rank or ``mpiexec`` is
killed before MPI unlinks them) carry no pid: such a file is **stale** when no process maps it
(every ``/proc/<pid>/maps`` read) and it is older than a second; **live** while some process maps
it; **unknown** (left alone) while a process's maps cannot be read.

MPICH's ``mpiexec`` writes the machine's topology to ``/tmp/hydra_hwloc_xmlfile_*`` and deletes
it when the job ends, but not when the job is aborted (a failing shmcomm rank aborts it). Such
a file is **stale** when no ``mpiexec`` of this user that started before it (so may have made
it) is running, and it is older than a second; **live** while such an ``mpiexec`` runs.

Sweeps keep the schedules of failing schedule-mode runs in ``$TMPDIR/shmcomm-stress-*`` (the
report prints the ``--replay`` command that reads one): those directories are listed, never
removed.

Entries are judged by ``lstat``: a symlink (or any entry that is not a regular file) is never
followed and is left alone, so a link another user plants in ``/tmp`` or ``/dev/shm`` cannot make
cleanup (run as root) judge or remove what it points to. Segments of other users are listed but
left alone (``/dev/shm`` is sticky: only the owner may
unlink). Exit status 0, or 1 if a stale segment could not be removed.
"""

from __future__ import annotations

import argparse
import os
import re
import stat
import sys
import tempfile
import time
from dataclasses import dataclass

import posix_ipc
import psutil

from .._startup import interrupts_as_usual
from ..transports.shm.segments import PREFIX, SHM_DIR

# the name memory.segment_name makes (without the leading slash)
NAME_RE = re.compile(r"^" + re.escape(PREFIX) + r"(?P<pid>[0-9]+)\.(?P<token>[0-9a-f]{24})\.(?P<tag>\w+)$")
# a process whose start time is at most this much after the segment's still counts as its creator
# (process start times have a coarse clock-tick resolution)
START_SLACK_S = 1.0

STALE, LIVE, UNKNOWN, FOREIGN = "stale", "live", "unknown", "foreign"


@dataclass
class Entry:
    """One ``shmcomm.*`` name found in ``/dev/shm`` and what cleanup makes of it."""

    name: str
    status: str  # STALE, LIVE, UNKNOWN or FOREIGN
    pid: int | None
    size: int
    why: str
    removed: bool = False
    error: str = ""


MPI_PREFIX = "mpich_shm_"  # MPICH's shared-memory files (the mpi transport's windows)
HYDRA_PREFIX = "hydra_hwloc_xmlfile_"  # mpiexec's topology file, in /tmp whatever TMPDIR says
HYDRA_DIR = "/tmp"
HYDRA_PROCS = frozenset({"mpiexec", "mpiexec.hydra", "mpirun"})  # the file's makers


def _mpi_mappers(path: str) -> tuple[list[int], list[int]]:
    """The pids that map ``path``, and the pids whose maps could not be read."""
    mappers, unreadable = [], []
    for pid in (int(p) for p in os.listdir("/proc") if p.isdigit()):
        try:
            with open(f"/proc/{pid}/maps") as f:
                if any(line.rstrip("\n").endswith(" " + path) for line in f):
                    mappers.append(pid)
        except FileNotFoundError:  # it ended meanwhile
            continue
        except OSError:
            # pid 1 (this pid namespace's init, e.g. a sandbox agent whose maps even root may not
            # read) is never a rank: an MPI job's ranks are children of mpiexec's proxies
            if pid != 1:
                unreadable.append(pid)
    return mappers, unreadable


def _foreign_or_new(name: str, st: os.stat_result, what: str) -> Entry | None:
    """An MPI-side file that is another user's, or made too recently to judge (``what`` it is,
    for the report); ``None`` otherwise."""
    if st.st_uid != os.getuid():
        return Entry(name, FOREIGN, None, st.st_size, f"owned by uid {st.st_uid}; left alone")
    if time.time() - min(st.st_mtime, st.st_ctime) < START_SLACK_S:
        return Entry(name, LIVE, None, st.st_size, f"{what} made just now")
    return None


def _classify_mpi(name: str, st: os.stat_result, shm_dir: str) -> Entry:
    early = _foreign_or_new(name, st, "an MPI file")
    if early is not None:
        return early
    mappers, unreadable = _mpi_mappers(os.path.join(shm_dir, name))
    if mappers:
        return Entry(name, LIVE, mappers[0], st.st_size,
                     f"an MPI file mapped by pid {', '.join(map(str, mappers[:4]))}")
    if unreadable:
        return Entry(name, UNKNOWN, None, st.st_size, "an MPI file; the maps of pid "
                     f"{unreadable[0]} cannot be read, so it may be in use; left alone")
    return Entry(name, STALE, None, st.st_size, "an MPI file no process maps (its job is gone)")


def _hydra_makers(made: float) -> list[int]:
    """The pids of this user's running ``mpiexec`` processes that started before ``made`` (a
    later one cannot have made a file of that time)."""
    uid = os.getuid()
    pids = []
    for proc in psutil.process_iter(["name", "uids", "create_time"]):
        try:
            if (proc.info["name"] in HYDRA_PROCS and proc.info["uids"].real == uid
                    and proc.info["create_time"] <= made + START_SLACK_S):
                pids.append(proc.pid)
        except (psutil.Error, AttributeError, TypeError):
            continue
    return pids


def _classify_hydra(name: str, st: os.stat_result) -> Entry:
    early = _foreign_or_new(name, st, "an mpiexec topology file")
    if early is not None:
        return early
    makers = _hydra_makers(min(st.st_mtime, st.st_ctime))
    if makers:
        return Entry(name, LIVE, makers[0], st.st_size, "an mpiexec topology file; mpiexec "
                     f"pid {', '.join(map(str, makers[:4]))} runs and may have made it")
    return Entry(name, STALE, None, st.st_size,
                 "an mpiexec topology file of an aborted job (no mpiexec runs)")


def classify(name: str, shm_dir: str = SHM_DIR) -> Entry | None:
    """What ``name`` (a file name in ``shm_dir``; an mpiexec topology file is in
    ``HYDRA_DIR``) is; ``None`` if it vanished meanwhile."""
    hydra = name.startswith(HYDRA_PREFIX)
    try:  # lstat: a link planted by another user is judged as itself, never by its target
        st = os.lstat(os.path.join(HYDRA_DIR if hydra else shm_dir, name))
    except FileNotFoundError:
        return None
    if not stat.S_ISREG(st.st_mode):  # shmcomm, MPICH and mpiexec make regular files only
        return Entry(name, UNKNOWN, None, st.st_size, "not a regular file (a link or special "
                     f"file, owned by uid {st.st_uid}); never followed, left alone")
    if hydra:
        return _classify_hydra(name, st)
    if name.startswith(MPI_PREFIX):
        return _classify_mpi(name, st, shm_dir)
    m = NAME_RE.match(name)
    if m is None:
        return Entry(name, UNKNOWN, None, st.st_size, "not a shmcomm segment name; left alone")
    pid = int(m.group("pid"))
    if st.st_uid != os.getuid():
        return Entry(name, FOREIGN, pid, st.st_size, f"owned by uid {st.st_uid}; left alone")
    try:
        proc = psutil.Process(pid)
        started = proc.create_time()
        alive = proc.status() != psutil.STATUS_ZOMBIE
    except (psutil.NoSuchProcess, psutil.ZombieProcess):
        return Entry(name, STALE, pid, st.st_size, f"creator pid {pid} is gone")
    except psutil.AccessDenied:  # it exists and is not ours to inspect: assume it is the creator
        return Entry(name, LIVE, pid, st.st_size, f"creator pid {pid} is running")
    if not alive:
        return Entry(name, STALE, pid, st.st_size, f"creator pid {pid} is a zombie")
    if started > min(st.st_mtime, st.st_ctime) + START_SLACK_S:  # mtime: set when created
        return Entry(name, STALE, pid, st.st_size,
                     f"pid {pid} was reused (its process started after the segment was created)")
    return Entry(name, LIVE, pid, st.st_size, f"creator pid {pid} ({_proc_name(proc)}) is running")


def scan(shm_dir: str = SHM_DIR, hydra: bool = True) -> list[Entry]:
    """Every ``shmcomm.*`` and ``mpich_shm_*`` name in ``shm_dir`` and (``hydra``) every
    ``hydra_hwloc_xmlfile_*`` in ``HYDRA_DIR``, classified, sorted by name; then (a scan of the
    real ``/dev/shm``) the directories of kept schedules, listed but left alone."""
    names = _names(shm_dir, (PREFIX, MPI_PREFIX)) + (
        _names(HYDRA_DIR, (HYDRA_PREFIX,)) if hydra else [])
    found = [e for e in (classify(n, shm_dir) for n in sorted(names)) if e is not None]
    return found + (kept_schedules() if shm_dir == SHM_DIR else [])


SCHEDULES_PREFIX = "shmcomm-stress-"  # where a sweep keeps failing schedule-mode runs' schedules


def kept_schedules(folder: str | None = None) -> list[Entry]:
    """The temporary directories in which sweeps kept failing schedule-mode runs' schedules
    (their reports print the ``--replay`` command that reads them): listed so they are not
    forgotten, never removed (they are the user's to rerun)."""
    folder = folder or tempfile.gettempdir()
    out = []
    for name in sorted(_names(folder, (SCHEDULES_PREFIX,))):
        path = os.path.join(folder, name)
        try:
            st = os.lstat(path)
            files = [os.path.join(path, f) for f in os.listdir(path)]
            size = sum(os.lstat(f).st_size for f in files)
        except OSError:
            continue
        if st.st_uid != os.getuid() or not os.path.isdir(path):
            continue
        out.append(Entry(path, UNKNOWN, None, size,
                         f"{len(files)} kept schedule(s) of failing schedule-mode runs (rerun "
                         f"with --replay); left alone: remove it when done"))
    return out


def _names(folder: str, prefixes: tuple[str, ...]) -> list[str]:
    try:
        return [n for n in os.listdir(folder) if n.startswith(prefixes)]
    except FileNotFoundError:
        return []


def cleanup(dry_run: bool = False, shm_dir: str = SHM_DIR, hydra: bool = True) -> list[Entry]:
    """Scan and remove the stale segments and files (none with ``dry_run``; mpiexec's topology
    files only with ``hydra``); return every entry found."""
    entries = scan(shm_dir, hydra)
    if dry_run:
        return entries
    for e in entries:
        if e.status != STALE:
            continue
        again = classify(e.name, shm_dir)  # re-check right before removing: never a live run's
        if again is None:
            e.why += "; already gone"
            continue
        if again.status != STALE:
            e.status, e.why = again.status, again.why
            continue
        try:
            if e.name.startswith(HYDRA_PREFIX):
                os.unlink(os.path.join(HYDRA_DIR, e.name))
            elif shm_dir == SHM_DIR:
                posix_ipc.unlink_shared_memory("/" + e.name)
            else:
                os.unlink(os.path.join(shm_dir, e.name))
            e.removed = True
        except posix_ipc.ExistentialError:
            e.why += "; already gone"
        except (OSError, posix_ipc.Error) as exc:
            e.error = str(exc)
    return entries


def format_report(entries: list[Entry], dry_run: bool) -> str:
    """One line per entry, then a summary line."""
    lines = []
    for e in entries:
        if e.status == STALE:
            verb = "would remove" if dry_run else ("removed" if e.removed else
                                                  "FAILED to remove" if e.error else "skipped")
        else:
            verb = "kept"
        detail = e.why + (f" ({e.error})" if e.error else "")
        lines.append(f"{verb:<16} {e.name}  {_size(e.size):>9}  {detail}")
    stale = [e for e in entries if e.status == STALE]
    removed = sum(e.removed for e in stale)
    kept = len(entries) - len(stale)
    if dry_run:
        lines.append(f"dry run: {len(stale)} stale segment(s) would be removed, {kept} kept")
    else:
        lines.append(f"removed {removed} stale segment(s) "
                     f"({_size(sum(e.size for e in stale if e.removed))}), {kept} kept")
    return "\n".join(lines)


def build_parser(prog: str | None = None) -> argparse.ArgumentParser:
    from .options import parser, prog_name

    p = parser(prog or prog_name("cleanup"),
               "List and remove shmcomm shared-memory segments left in /dev/shm by runs "
               "whose creating process is dead, MPICH's files no process maps, and the "
               "topology files mpiexec leaves in /tmp when a job is aborted. Segments of live "
               "runs are never touched.",
               "exit status: 0 success, 1 a stale segment could not be removed, 2 usage error, "
               "130 / 143 interrupted by SIGINT / SIGTERM")
    p.add_argument("--dry-run", "-n", action="store_true",
                   help="only list what would be removed (default: off)")
    return p


def main(argv: list[str] | None = None, prog: str | None = None) -> int:
    """The command line; returns the exit status (130 / 143 when interrupted)."""
    from .options import interruptible

    return interruptible(_main)(argv, prog)


def _main(argv: list[str] | None = None, prog: str | None = None) -> int:
    interrupts_as_usual()  # from here on a Ctrl-C is this command's to report
    ns = build_parser(prog).parse_args(argv)
    entries = cleanup(dry_run=ns.dry_run)
    print(format_report(entries, ns.dry_run))
    return 1 if any(e.error for e in entries) else 0


def _proc_name(proc: psutil.Process) -> str:
    try:
        return proc.name()
    except psutil.Error:
        return "?"


def _size(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


if __name__ == "__main__":
    sys.exit(main())
