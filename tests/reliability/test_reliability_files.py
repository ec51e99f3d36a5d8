"""Every file shmcomm writes is made aside and renamed into place: a symlink at the path or a file
another user prepared there (a planted ``/tmp`` path, a run as root) is refused with an error
naming the setting and left as it was; success is printed only for a file that was written.
``cleanup`` judges entries by ``lstat`` and never follows or removes another user's link."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

import shmcomm
from shmcomm.files import OutputError, write_file

pytestmark = pytest.mark.timeout(120)

SMALL = dict(window_bytes=1 << 16, timeout=60.0, wait_timeout=50.0)
OTHER_UID = 12345  # an unprivileged user who does not run anything here
as_root = pytest.mark.skipif(os.geteuid() != 0, reason="making another user's file needs root")


def _kernel(ctx) -> None:
    pass


def _host(rt):
    rt.launch(_kernel, blocks=1)
    rt.barrier()
    return rt.rank


def _victim(tmp_path, name="victim", mode=0o644):
    victim = tmp_path / name
    victim.write_text("precious")
    os.chmod(victim, mode)
    return victim


def _planted_link(tmp_path, target, name="out.json"):
    link = tmp_path / name
    link.symlink_to(target)
    if os.geteuid() == 0:
        os.lchown(link, OTHER_UID, OTHER_UID)  # as another user would plant it in /tmp
    return link


def _no_leftovers(tmp_path) -> None:
    assert [p.name for p in tmp_path.iterdir() if ".tmp" in p.name] == [], "an aside file stayed"


# --- the helper ------------------------------------------------------------------------------

def test_write_file_replaces_an_own_file_by_rename_not_in_place(tmp_path):
    path = _victim(tmp_path, "out.json")
    other_name = tmp_path / "hardlink"
    os.link(path, other_name)
    write_file("--json", str(path), "new\n")
    assert path.read_text() == "new\n" and other_name.read_text() == "precious"
    _no_leftovers(tmp_path)


def test_write_file_refuses_a_symlink_and_leaves_both_ends(tmp_path):
    victim = _victim(tmp_path)
    link = _planted_link(tmp_path, victim)
    with pytest.raises(OutputError, match=r"--json: .* is a symbolic link \(to a regular file\)"):
        write_file("--json", str(link), "new\n")
    assert victim.read_text() == "precious" and link.is_symlink()
    _no_leftovers(tmp_path)


@as_root
def test_write_file_refuses_another_users_world_writable_file(tmp_path):
    path = _victim(tmp_path, "out.json", 0o666)
    os.chown(path, OTHER_UID, OTHER_UID)
    with pytest.raises(OutputError, match="belongs to another user"):
        write_file("record", str(path), "new\n")
    assert path.read_text() == "precious" and os.stat(path).st_uid == OTHER_UID
    _no_leftovers(tmp_path)


# --- the writers ----------------------------------------------------------------------------

def test_record_never_writes_through_a_symlink(tmp_path):
    victim = _victim(tmp_path)
    link = _planted_link(tmp_path, victim)
    with pytest.raises(shmcomm.ArgumentError, match="record: .* symbolic link"):
        shmcomm.run(_host, 2, mode="schedule", record=str(link), **SMALL)
    assert victim.read_text() == "precious" and link.is_symlink()
    _no_leftovers(tmp_path)


@as_root
def test_record_refuses_a_file_another_user_prepared(tmp_path):
    path = _victim(tmp_path, "sched.json", 0o666)
    os.chown(path, OTHER_UID, OTHER_UID)
    with pytest.raises(shmcomm.ArgumentError, match="record: .* another user"):
        shmcomm.run(_host, 2, mode="schedule", record=str(path), **SMALL)
    assert path.read_text() == "precious"


def test_record_to_a_new_path_is_written(tmp_path):
    path = tmp_path / "sched.json"
    shmcomm.run(_host, 2, mode="schedule", record=str(path), **SMALL)
    assert json.loads(path.read_text())["nranks"] == 2
    _no_leftovers(tmp_path)


def test_trace_refuses_a_symlink_and_follows_nothing(tmp_path):
    victim = _victim(tmp_path)
    link = _planted_link(tmp_path, victim, "trace.json")
    with pytest.raises(shmcomm.ArgumentError, match="trace: .* symbolic link"):
        shmcomm.run(_host, 1, trace=str(link), **SMALL)
    assert victim.read_text() == "precious" and link.is_symlink()
    _no_leftovers(tmp_path)


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "shmcomm", *args], capture_output=True,
                          text=True, timeout=90)


@as_root
def test_launch_says_trace_written_only_when_it_wrote_one(tmp_path):
    path = _victim(tmp_path, "trace.json")
    os.chown(path, OTHER_UID, OTHER_UID)
    p = _cli("launch", "--nranks", "1", "--trace", str(path))
    assert p.returncode == 2, p.stdout + p.stderr
    assert "another user" in p.stderr and "trace written" not in p.stderr, p.stderr
    assert path.read_text() == "precious"


def test_stress_json_refuses_a_symlink_before_the_sweep(tmp_path):
    victim = _victim(tmp_path)
    link = _planted_link(tmp_path, victim)
    p = subprocess.run([sys.executable, "-m", "shmcomm.stress", "--program", "arrival_count_mismatch",
                        "--nranks", "2", "--blocks", "1", "--runs", "1", "--json", str(link),
                        "--no-progress", "--trace-dir", ""],
                       capture_output=True, text=True, timeout=90)
    assert p.returncode == 2, p.stdout + p.stderr
    assert "--json" in p.stderr and "symbolic link" in p.stderr, p.stderr
    assert victim.read_text() == "precious" and link.is_symlink()


# --- cleanup --------------------------------------------------------------------------------

def _dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def test_cleanup_never_follows_or_removes_a_planted_link(tmp_path):
    from shmcomm.launch.cleanup import STALE, cleanup

    shm = tmp_path / "shm"
    shm.mkdir()
    victim = _victim(tmp_path)
    name = f"shmcomm.{_dead_pid()}.{'ab' * 12}.signals"
    link = shm / name
    link.symlink_to(victim)
    if os.geteuid() == 0:
        os.lchown(link, OTHER_UID, OTHER_UID)
    entries = {e.name: e for e in cleanup(shm_dir=str(shm), hydra=False)}
    assert link.is_symlink() and victim.read_text() == "precious"
    assert entries[name].status != STALE and not entries[name].removed, entries[name]
    assert "never followed" in entries[name].why


def test_trace_plot_never_writes_through_a_symlink(tmp_path):
    trace = tmp_path / "t.json"
    trace.write_text(json.dumps({"traceEvents": [], "otherData": {}}))
    victim = _victim(tmp_path)
    link = _planted_link(tmp_path, victim, "out.svg")
    p = _cli("trace", str(trace), "--plot", str(link))
    assert p.returncode == 2 and "--plot" in p.stderr and "symbolic link" in p.stderr, p.stderr
    assert victim.read_text() == "precious" and link.is_symlink()
    _no_leftovers(tmp_path)
