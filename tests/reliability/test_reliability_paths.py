"""The files a run is named by the user: a device node, a FIFO, a directory (or a symlink to
one) is refused with an error naming the setting, and is left exactly as it was."""

from __future__ import annotations

import os
import stat

import pytest
from _helpers import ROOT

import shmcomm
from shmcomm.errors import ArgumentError

pytestmark = pytest.mark.timeout(120)

SMALL = dict(window_bytes=1 << 16, timeout=60.0, wait_timeout=50.0)


def _kernel(ctx) -> None:
    pass


def _host(rt):
    rt.launch(_kernel, blocks=1)
    rt.barrier()
    return rt.rank


def _special(tmp_path, kind: str):
    path = tmp_path / kind
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "device":
        if os.geteuid() != 0:
            pytest.skip("creating a device node (a copy of /dev/null in tmp_path) needs root")
        os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(1, 3))
    else:
        path.mkdir()
    return str(path)


def _unchanged(path: str, mode: int) -> None:
    assert stat.S_IFMT(os.lstat(path).st_mode) == stat.S_IFMT(mode), "the special file was replaced"


@pytest.mark.parametrize("kind", ["fifo", "device", "dir"])
@pytest.mark.parametrize("setting", ["trace", "record"])
def test_output_paths_refuse_special_files_and_leave_them(tmp_path, kind, setting):
    path = _special(tmp_path, kind)
    mode = os.lstat(path).st_mode
    extra = dict(mode="schedule") if setting == "record" else {}
    with pytest.raises(ArgumentError, match=setting):
        shmcomm.run(_host, 2, **{setting: path}, **extra, **SMALL)
    _unchanged(path, mode)
    assert sorted(os.listdir(tmp_path)) == [kind], "a file was left beside it"


def test_a_symlink_to_a_device_node_is_refused_and_left(tmp_path):
    dev = _special(tmp_path, "device")
    link = tmp_path / "link"
    link.symlink_to(dev)
    with pytest.raises(ArgumentError, match="character device"):
        shmcomm.run(_host, 2, trace=str(link), **SMALL)
    assert os.path.islink(link) and stat.S_ISCHR(os.stat(dev).st_mode)


def test_shmcomm_trace_in_the_environment_is_checked_too(tmp_path, monkeypatch):
    fifo = _special(tmp_path, "fifo")
    monkeypatch.setenv("SHMCOMM_TRACE", fifo)
    with pytest.raises(ArgumentError, match="FIFO"):
        shmcomm.run(_host, 2, **SMALL)
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


@pytest.mark.parametrize("source", ["fifo", "/dev/zero", "dir"])
def test_replay_reads_only_a_regular_file(tmp_path, source):
    path = source if source.startswith("/") else _special(tmp_path, source)
    with pytest.raises(ArgumentError, match="replay"):  # refused at once: never read, never blocks
        shmcomm.run(_host, 2, mode="schedule", replay=path, **SMALL)


def test_a_regular_trace_path_still_works(tmp_path):
    path = tmp_path / "t.json"
    path.write_text("old")
    assert shmcomm.run(_host, 2, trace=str(path), **SMALL) == [0, 1]
    assert path.read_text() != "old" and sorted(os.listdir(tmp_path)) == ["t.json"]


def test_a_trace_cut_by_the_file_size_limit_is_not_reported_as_written(tmp_path):
    import subprocess
    import sys
    import textwrap

    out = tmp_path / "t.json"
    code = f"""
        import resource, shmcomm
        def kernel(ctx):
            pass
        def host(rt):
            for _ in range(200):
                rt.launch(kernel, blocks=2)
        resource.setrlimit(resource.RLIMIT_FSIZE, (100000, 100000))
        try:
            shmcomm.run(host, 2, window_bytes=1 << 12, trace={str(out)!r}, timeout=100)
        except shmcomm.RunError as exc:
            print(exc)
            raise SystemExit(1)
        """
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    p = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                       text=True, timeout=150, env=env)
    assert p.returncode == 1, (p.stdout, p.stderr[-2000:])
    assert "RLIMIT_FSIZE" in p.stdout and "/dev/shm" not in p.stdout, p.stdout
    assert os.listdir(tmp_path) == [], "a cut trace (or its hidden .tmp) was left"


def test_a_sigkilled_launcher_leaves_no_hidden_trace_file(tmp_path):
    import signal
    import subprocess
    import sys
    import textwrap
    import time

    ready = tmp_path / "ready"
    code = f"""
        import time, shmcomm
        def kernel(ctx):
            open({str(ready)!r}, "w").close()
            time.sleep(600)
        def host(rt):
            rt.launch(kernel, blocks=1)
        shmcomm.run(host, 1, window_bytes=1 << 16, trace={str(tmp_path / "t.json")!r},
                    timeout=600, wait_timeout=590)
        """
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    p = subprocess.Popen([sys.executable, "-c", textwrap.dedent(code)], env=env)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not ready.exists():
        time.sleep(0.1)
    assert ready.exists()
    p.send_signal(signal.SIGKILL)
    p.wait(60)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and len(os.listdir(tmp_path)) > 1:
        time.sleep(0.1)
    assert os.listdir(tmp_path) == ["ready"]
