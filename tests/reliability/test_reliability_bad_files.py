"""Replay and trace files are input a user (or another user) hands shmcomm: a run length past the
step limit, a document nested a million deep, a field of the wrong type are each a usage error
(exit 2) naming the field, read in bounded memory and time, never a traceback."""

from __future__ import annotations

import json
import resource
import subprocess
import sys

import pytest

pytestmark = pytest.mark.timeout(120)



def _limited() -> None:
    """The child's address space is capped: expanding a huge run length fails fast on a
    MemoryError instead of taking the machine's memory."""
    resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "shmcomm", *args], capture_output=True,
                          text=True, timeout=60, preexec_fn=_limited)


def _schedule(tmp_path, **fields) -> str:
    from shmcomm.exec.schedule.record import Schedule

    doc = dict(Schedule(2, 0, "random", [0, 65, 65], 0, {}).to_json(), **fields)
    path = tmp_path / "sched.json"
    path.write_text(json.dumps(doc))
    return str(path)


def _replay(path: str) -> subprocess.CompletedProcess:
    return _cli("launch", "--nranks", "2", "--mode", "schedule", "--replay", path,
                "--timeout", "30")


def _usage_error(p: subprocess.CompletedProcess, *words: str) -> None:
    assert p.returncode == 2, (p.returncode, p.stderr[-2000:])
    assert "Traceback" not in p.stderr, p.stderr[-2000:]
    for w in words:
        assert w in p.stderr, p.stderr[-2000:]


def test_a_run_length_past_the_step_limit_is_refused_at_once(tmp_path):
    p = _replay(_schedule(tmp_path, choices=[[0, 1], [65, 10 ** 11]]))
    _usage_error(p, "'choices[1]'", "step limit")


@pytest.mark.parametrize("field,value", [("nranks", "two"), ("seed", 1.5), ("strategy", 3),
                                         ("options", [1]), ("choices", {"a": 1}),
                                         ("choices", [[0, -1]]), ("choices", [[1000, 1]]),
                                         ("choices", [[0, 1, 2]]), ("choices", [7])])
def test_a_malformed_schedule_field_is_named(tmp_path, field, value):
    p = _replay(_schedule(tmp_path, **{field: value}))
    _usage_error(p, repr(field) if field != "choices" or not isinstance(value, list)
                 else "'choices[0]'")


def _nested(depth: int) -> str:
    return "[" * depth + "]" * depth


def test_a_replay_file_nested_a_million_deep_is_refused(tmp_path):
    path = tmp_path / "deep.json"
    path.write_text(_nested(1_000_000))
    _usage_error(_replay(str(path)), "nests", "deep")


def test_a_trace_file_nested_a_million_deep_is_refused(tmp_path):
    path = tmp_path / "deep.json"
    path.write_text('{"traceEvents": ' + _nested(1_000_000) + "}")
    _usage_error(_cli("trace", str(path)), "nests")


@pytest.mark.parametrize("events,words", [
    ([1, 2, 3], ("event 0", "must be an object")),
    ([{"ph": "X", "name": "TWAIT", "ts": "soon", "pid": 0, "tid": 0}], ("event 0", "'ts'")),
    ([{"ph": "X", "name": "TWAIT", "ts": 1.0, "pid": "a", "tid": 0}], ("'pid'",)),
    ([{"ph": "X", "name": 5, "ts": 1.0, "pid": 0, "tid": 0}], ("'name'",)),
    ([{"ph": "X", "name": "TWAIT", "ts": 1.0, "pid": 0, "tid": 0, "args": [1]}], ("'args'",)),
    ([{"ph": "X", "name": "TWAIT", "ts": 1.0, "pid": 0, "tid": 0,
       "args": {"offset": "0x10"}}], ("'args.offset'",)),
    ([{"ph": "X", "name": "TWAIT", "ts": 1.0, "pid": 0, "tid": 0,
       "args": {"released_by": {"rank": "r"}}}], ("'args.released_by'",)),
    ([{"ph": "i", "pid": 0, "tid": 0}], ("event 0", "'name'")),
])
def test_shmcomm_trace_names_the_malformed_field(tmp_path, events, words):
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": events, "otherData": {}}))
    _usage_error(_cli("trace", str(path)), *words)


def test_shmcomm_trace_refuses_other_data_of_the_wrong_type(tmp_path):
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": [], "otherData": [1]}))
    _usage_error(_cli("trace", str(path)), "'otherData'")


def test_a_well_formed_replay_still_loads(tmp_path):
    from shmcomm.exec.schedule.record import load

    s = load(_schedule(tmp_path))
    assert s.choices == [0, 65, 65] and s.nranks == 2
