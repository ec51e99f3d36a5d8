"""The stuck-agent report on a host whose last wait was made by a thread of the user's that has
ended since: the host is alive (its main thread), and the report says what that thread does
instead of "its thread is gone"."""

from __future__ import annotations

import threading
import time

import pytest

import shmcomm

pytestmark = pytest.mark.timeout(120)

LOCK = threading.Lock()


def _kernel(ctx) -> None:
    pass


def _host(rt):
    helper = threading.Thread(target=lambda: (rt.launch(_kernel, blocks=2), rt.barrier()))
    helper.start()
    helper.join()  # the host agent's last wait was this thread's; it has ended now
    with LOCK:  # the rank's main thread now sits in a sleep while holding a Python lock
        time.sleep(60)


def test_a_host_whose_waiting_thread_ended_is_described_by_its_main_thread():
    with pytest.raises(shmcomm.RunTimeout) as info:
        shmcomm.run(_host, 1, timeout=4.0, window_bytes=1 << 16)
    text = str(info.value)
    assert "rank 0 host" in text, text
    assert "its thread is gone" not in text, text
    assert "the rank's main thread: blocked in a system call" in text, text
