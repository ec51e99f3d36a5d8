"""Shared test fixtures: every test must leave nothing of shmcomm's in /dev/shm."""

from __future__ import annotations

import os

import pytest


def shm_leftovers() -> list[str]:
    try:
        return sorted(n for n in os.listdir("/dev/shm") if "shmcomm" in n)
    except FileNotFoundError:
        return []


@pytest.fixture(autouse=True)
def no_shm_leak():
    before = set(shm_leftovers())
    yield
    leaked = sorted(set(shm_leftovers()) - before)
    assert not leaked, f"test leaked shared-memory segments: {leaked}"
