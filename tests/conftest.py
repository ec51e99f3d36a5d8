"""Shared test fixtures: every test must leave nothing of shmcomm's in /dev/shm."""

from __future__ import annotations

import os
import tempfile
import time

import psutil
import pytest
from _paths import add_test_dirs

add_test_dirs()  # (test modules import each other's hosts and kernels across the folders)

LEAK_SETTLE_S = 10.0  # a leftover must outlive this to count as a leak


def shm_leftovers() -> list[str]:
    try:
        return sorted(n for n in os.listdir("/dev/shm") if "shmcomm" in n)
    except FileNotFoundError:
        return []


def _ours_or_orphaned(name: str) -> bool:
    """A name this process created, or one whose creator is dead (a true leak). Names of other
    live processes (another test session on the same machine) are not this test's business."""
    parts = name.split(".")
    try:
        pid = int(parts[1])
    except (IndexError, ValueError):
        return True
    return pid == os.getpid() or not psutil.pid_exists(pid)


@pytest.fixture(autouse=True, scope="session")
def kept_files_in_pytest_tmp(tmp_path_factory):
    """The stress harness keeps failing schedules in a new directory under the temp dir for the
    user to replay; the tests' (and their subprocesses') go to pytest's own temp tree instead of
    piling up in /tmp."""
    where = str(tmp_path_factory.mktemp("kept"))
    with pytest.MonkeyPatch.context() as mp:  # (the monkeypatch fixture is per test)
        mp.setenv("TMPDIR", where)
        mp.setattr(tempfile, "tempdir", where)
        yield


@pytest.fixture(autouse=True)
def no_shm_leak():
    before = set(shm_leftovers())
    yield
    leaked = sorted(n for n in set(shm_leftovers()) - before if _ours_or_orphaned(n))
    deadline = time.monotonic() + LEAK_SETTLE_S
    while leaked and time.monotonic() < deadline:  # another session's test (killing creators on
        time.sleep(0.1)  # purpose, as the cleanup tests do) removes its names within seconds
        leaked = [n for n in leaked if n in set(shm_leftovers())]
    assert not leaked, f"test leaked shared-memory segments: {leaked}"


@pytest.fixture(autouse=True)
def no_mpiexec_leftovers(request):
    """MPICH's mpiexec keeps its topology file in /tmp after an aborted job (the MPI tests abort
    jobs on purpose): the files the test's own jobs left go, as ``python -m shmcomm cleanup``
    removes them (only once no mpiexec that may have made them runs)."""
    group = request.node.get_closest_marker("xdist_group")
    if group is None or tuple(group.args[:1]) != ("mpi",):
        yield
        return
    from shmcomm.launch.cleanup import HYDRA_DIR, HYDRA_PREFIX, STALE, START_SLACK_S, classify

    def files() -> set[str]:
        return {n for n in os.listdir(HYDRA_DIR) if n.startswith(HYDRA_PREFIX)}

    before = files()
    yield
    new = sorted(files() - before)
    if new:
        time.sleep(START_SLACK_S)  # cleanup keeps a file made less than this ago
    for name in new:
        entry = classify(name)
        if entry is not None and entry.status == STALE:
            os.unlink(os.path.join(HYDRA_DIR, name))
