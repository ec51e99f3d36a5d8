"""``python -m shmcomm trace FILE --plot OUT.svg`` draws a run's timeline: agents as rows, waits
as spans, notifies as arrows to the waits they released, a race's two accesses and a hang's
unreleased waits marked; the SVG is written directly and parses as XML."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

import numpy as np
import pytest

import shmcomm
from shmcomm.comm import TNOTIFY, TPUT, TWAIT, GetRemotePtr, GlobalTensor, NotifyOp, Signal, WaitCmp
from shmcomm.errors import RunError
from shmcomm.exec.trace import load
from shmcomm.launch.tracecli import main as trace_main
from shmcomm.launch.traceplot import LABEL_W, WIDTH, race_accesses

pytestmark = pytest.mark.timeout(90)
SVG = "{http://www.w3.org/2000/svg}"


def _ring(ctx, src, dst, n):
    if ctx.block_idx != 0:
        return
    peer = (ctx.rank + 1) % ctx.nranks
    tile = ctx.tile((1, 1024), np.float32)
    TPUT(GlobalTensor(GetRemotePtr(ctx, dst, peer), (1, n)), GlobalTensor(src, (1, n)), tile)
    TNOTIFY(Signal(GetRemotePtr(ctx, ctx.signal_base + 0, peer)), 1, NotifyOp.AtomicAdd)
    TWAIT(Signal(ctx.signal_base + 0), 1, WaitCmp.GE)


def unfenced(rt, size):
    src, dst = rt.alloc((size,), np.float32), rt.alloc((size,), np.float32)
    src[:] = rt.rank + 1
    rt.launch(_ring, args=(src.ptr, dst.ptr, size))
    assert np.all(dst == (rt.rank - 1) % rt.nranks + 1)


def _hang(ctx):
    if ctx.block_idx == 0 and ctx.rank != 0:
        TWAIT(Signal(ctx.signal_base + 1), 1, WaitCmp.GE)


def hang(rt):
    rt.launch(_hang)


def _draw(trace, tmp_path, capsys):
    out = tmp_path / "run.svg"
    assert trace_main([str(trace), "--plot", str(out)]) == 0
    assert f"timeline drawn to {out}" in capsys.readouterr().out
    root = ET.parse(out).getroot()
    texts = [e.text or "" for e in root.iter(SVG + "text")]
    return root, texts


@pytest.mark.parametrize("mode", ["hazard", "schedule"])
def test_the_racing_runs_picture_marks_its_two_accesses(tmp_path, capsys, mode):
    trace = tmp_path / "race.json"
    with pytest.raises(RunError):
        shmcomm.run(unfenced, nranks=2, blocks=1, mode=mode, seed=1, args=(3000,),
                    trace=str(trace))
    root, texts = _draw(trace, tmp_path, capsys)
    marks = [t for t in texts if t.startswith("race: ")]
    assert any(re.fullmatch(r"race: wrote at test_launch_trace_plot\.py:\d+", t) for t in marks), marks
    assert any(re.fullmatch(r"race: read at test_launch_trace_plot\.py:\d+", t) for t in marks), marks
    diamonds = [p for p in root.iter(SVG + "path") if "race:" in "".join(p.itertext())]
    assert len(diamonds) >= 2
    for d in diamonds:
        x = float(re.match(r"M([\d.]+),", d.attrib["d"]).group(1))
        assert LABEL_W <= x <= WIDTH, d.attrib
    assert any(t.startswith("rank 1 block 0") for t in texts)  # agents as rows


def test_a_deadlocks_picture_marks_the_unreleased_waits(tmp_path, capsys):
    trace = tmp_path / "hang.json"
    with pytest.raises(RunError):
        shmcomm.run(hang, nranks=3, blocks=1, deadlock_grace=0.3, trace=str(trace))
    _root, texts = _draw(trace, tmp_path, capsys)
    stuck = sorted(t for t in texts if t.startswith("never released: TWAIT"))
    assert stuck == ["never released: TWAIT on rank 1 +0x4 >= 1",
                     "never released: TWAIT on rank 2 +0x4 >= 1"], texts


def test_plot_refuses_a_name_that_is_not_svg(tmp_path, capsys):
    trace = tmp_path / "hang.json"
    trace.write_text('{"traceEvents": [], "otherData": {}}')
    assert trace_main([str(trace), "--plot", str(tmp_path / "x.png")]) == 2
    assert "name it *.svg" in capsys.readouterr().err


def test_race_accesses_reads_a_report():
    text = ("data race on rank 0's window, bytes [0, 8): rank 1 block 0 wrote it (TPUT (its "
            "TSTORE) on MTE3) at k.py:14; rank 0 host read it at k.py:25; neither happens")
    assert race_accesses(text) == [((1, 0, "wrote", "TPUT (its TSTORE) on MTE3", "k.py:14"),
                                    (0, 1000, "read", "", "k.py:25"))]


def _gather(ctx, rounds):
    if ctx.block_idx != 0:
        return
    for k in range(1, rounds + 1):
        if ctx.rank == 0:  # a counting wait: every other rank's add, round after round
            TWAIT(Signal(ctx.signal_base + 0), k * (ctx.nranks - 1), WaitCmp.GE)
        else:
            TNOTIFY(Signal(GetRemotePtr(ctx, ctx.signal_base + 0, 0)), 1, NotifyOp.AtomicAdd)


def gather(rt, rounds):
    rt.launch(_gather, args=(rounds,))


def test_a_counting_wait_gets_an_arrow_from_every_add_it_counted(tmp_path):
    trace = tmp_path / "gather.json"
    shmcomm.run(gather, nranks=4, blocks=1, args=(2,), trace=str(trace))
    events = load(str(trace))
    starts = {e["id"]: e for e in events if e["ph"] == "s"}
    ends = [e for e in events if e["ph"] == "f"]
    assert len(starts) == len(ends) == 6, (starts, ends)  # 3 adds x 2 rounds, not 1 per wait
    assert sorted(s["pid"] for s in starts.values()) == [1, 1, 2, 2, 3, 3]
    assert {e["pid"] for e in ends} == {0}
