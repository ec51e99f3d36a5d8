"""Shared test fixtures: every test must leave nothing of shmcomm's in /dev/shm."""

from __future__ import annotations

import os

import psutil
import pytest


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


@pytest.fixture(autouse=True)
def no_shm_leak():
    before = set(shm_leftovers())
    yield
    leaked = sorted(n for n in set(shm_leftovers()) - before if _ours_or_orphaned(n))
    assert not leaked, f"test leaked shared-memory segments: {leaked}"
