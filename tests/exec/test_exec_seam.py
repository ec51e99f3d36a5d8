"""The execution-model seam holds: models learn everything from the instructions' calls.

* profilers and tracers a kernel installs (cProfile, ``sys.setprofile``, ``sys.settrace``, as a
  coverage tool would) neither switch the hazard checkers off nor lose their own data;
* every report's ``file:line`` is the user's kernel line of the instruction that made the hazard
  (marked ``# @name`` below; the tests look the line up, nothing is hard-coded), never
  threading.py or a file of the package;
* eager mode binds no hooks and no fences; hazard mode binds exactly the sub-models that need
  them; a custom model plugged in through ``Launcher(model=...)`` receives every hook call
  with its arguments (root collectives' copies included).

Every run is seeded, and the failing kernels fail by construction (a checker rule, or work kept
pending for ``hazard_delay`` = 60 s), so nothing depends on timing.
"""

from __future__ import annotations

import cProfile
import inspect
import json
import os
import pstats
import re
import sys
import threading

import numpy as np
import pytest

import shmcomm
from shmcomm.comm import (
    TGET,
    TNOTIFY,
    TPUT,
    TTEST,
    TWAIT,
    GetRemotePtr,
    GlobalTensor,
    NotifyOp,
    Signal,
    Signal2D,
    WaitCmp,
)
from shmcomm.config import Config
from shmcomm.core import agent as agent_mod
from shmcomm.core.model import RankModel
from shmcomm.exec.eager import EagerBlockModel
from shmcomm.exec.hazard import report as report_mod
from shmcomm.group import TBROADCAST, TGATHER, TSCATTER, ParallelGroup
from shmcomm.kernels.barrier import EpochBarrier
from shmcomm.launch.supervisor import Launcher
from shmcomm.pipe import (
    DSB_DDR,
    EVENT_ID0,
    EVENT_ID1,
    PIPE_ALL,
    PIPE_MTE2,
    PIPE_MTE3,
    dsb,
    pipe_barrier,
    set_flag,
    wait_flag,
)

N = 16
_SRC_LINES = open(__file__, encoding="utf-8").read().splitlines()
_PKG_DIR = os.path.dirname(os.path.abspath(shmcomm.__file__)) + os.sep
_SITE = re.compile(r"hazard \[(?P<checker>[a-z-]+)\] at (?P<file>[^\s:]+):(?P<line>\d+)"
                   r"(?: \(in (?P<inner>\w+) at (?P<ifile>[\w.]+):(?P<iline>\d+)\))?: ")


def line_of(marker: str) -> int:
    """The line of this file whose code ends with the comment ``# @marker``."""
    hits = [i + 1 for i, text in enumerate(_SRC_LINES) if text.rstrip().endswith("# @" + marker)]
    assert len(hits) == 1, (marker, hits)
    return hits[0]


def _run(host, nranks=1, blocks=1, mode="hazard", seed=3, **kw):
    kw.setdefault("detect_races", False)  # the seam of the mode's own model and checkers
    return shmcomm.run(host, nranks=nranks, blocks=blocks, mode=mode, seed=seed, timeout=60,
                       wait_timeout=30, **kw)


def _report(host, checker, **kw) -> re.Match:
    """Run ``host``; it must fail with ``checker``'s report. Returns the parsed site."""
    with pytest.raises(shmcomm.RunError) as ei:
        _run(host, **kw)
    text = str(ei.value)
    assert f"hazard [{checker}]" in text, text
    m = _SITE.search(text)
    assert m and m["checker"] == checker, text
    assert "threading.py" not in m["file"] and not m["file"].startswith(_PKG_DIR), text
    return m


def _assert_site(m: re.Match, marker: str) -> None:
    assert os.path.samefile(m["file"], __file__), m.group(0)
    assert int(m["line"]) == line_of(marker), m.group(0)


# --- the buggy kernels ------------------------------------------------------------------------

def k_unfenced(ctx, dst, src):
    """TPUT then TNOTIFY with no pipe_barrier / dsb in between: ``notify-unfenced``."""
    TPUT(GlobalTensor(dst, (1, N)), GlobalTensor(src, (1, N)), ctx.tile((1, N), np.float32))
    TNOTIFY(Signal(ctx.signal_base), 1, NotifyOp.AtomicAdd)  # @unfenced


def k_unbalanced(ctx, dst, src):
    """A set_flag never waited for: ``flag-unbalanced`` when the kernel returns."""
    set_flag(PIPE_MTE3, PIPE_MTE2, EVENT_ID1)
    wait_flag(PIPE_MTE3, PIPE_MTE2, EVENT_ID1)
    set_flag(PIPE_MTE2, PIPE_MTE3, EVENT_ID0)  # @unbalanced
    pipe_barrier(PIPE_ALL)


def k_twice(ctx, dst, src):
    """The same event set twice before its wait: ``event-twice`` at the second set."""
    set_flag(PIPE_MTE3, PIPE_MTE2, EVENT_ID0)
    set_flag(PIPE_MTE3, PIPE_MTE2, EVENT_ID0)  # @twice
    wait_flag(PIPE_MTE3, PIPE_MTE2, EVENT_ID0)


BUGGY = {"unfenced": (k_unfenced, "notify-unfenced"), "unbalanced": (k_unbalanced, "flag-unbalanced"),
         "twice": (k_twice, "event-twice")}


def host_buggy(rt, bug, profiler=None, out=None):
    dst, src = rt.alloc((N,), np.float32), rt.alloc((N,), np.float32)
    src[:] = np.arange(N)
    kernel = BUGGY[bug][0]
    if profiler is None:
        rt.launch(kernel, blocks=1, args=(dst.ptr, src.ptr))
    else:
        rt.launch(k_profiled, blocks=1, args=(kernel, profiler, out, dst.ptr, src.ptr))
    # notify-unfenced is advisory: it is reported as the likely cause of a failure that
    # something else proved, here the host's own check
    assert bug != "unfenced", "the host's data check failed"
    return 0


# --- 1. profilers and tracers do not switch the checkers off -----------------------------------

def k_profiled(ctx, kernel, profiler, out, dst, src):
    """Run ``kernel`` under a profiler or tracer this block installs itself, then save what the
    profiler saw (the run fails, so the data leaves through a file)."""
    events: list[tuple[str, str]] = []

    def hook(frame, event, arg):
        events.append((event, frame.f_code.co_name))
        return hook if profiler == "settrace" else None

    prof = None
    if profiler == "cprofile":
        prof = cProfile.Profile()
        prof.enable()
    elif profiler == "setprofile":
        sys.setprofile(hook)
    else:
        sys.settrace(hook)
    installed = prof if prof is not None else hook
    out = f"{out}.b{ctx.block_idx}"
    try:
        kernel(ctx, dst, src)
    finally:
        # still ours: shmcomm neither replaced nor removed it; the setprofile / settrace hooks
        # stay on after the kernel returns (as a coverage tool's would)
        get = sys.gettrace if profiler == "settrace" else sys.getprofile
        kept = get() is installed
        seen = events[:]  # the hook keeps appending while the rest of this block runs
        if prof is not None:
            prof.dump_stats(out + ".prof")
        with open(out + ".json", "w") as f:
            f.write(json.dumps({"kept": kept, "events": seen}))


@pytest.mark.timeout(120)
@pytest.mark.parametrize("profiler", ("cprofile", "setprofile", "settrace"))
@pytest.mark.parametrize("bug", ("unfenced", "unbalanced"))
def test_profilers_do_not_switch_checkers_off(tmp_path, profiler, bug):
    kernel, checker = BUGGY[bug]
    out = str(tmp_path / "profile")
    m = _report(host_buggy, checker, args=(bug, profiler, out))
    _assert_site(m, bug)
    out += ".b0"
    with open(out + ".json") as f:
        saved = json.load(f)
    assert saved["kept"], "the kernel's profiler was replaced or removed"
    instruction = "TNOTIFY" if bug == "unfenced" else "set_flag"
    if profiler == "cprofile":
        names = {func for (_file, _line, func) in pstats.Stats(out + ".prof").stats}
        assert {kernel.__name__, instruction} <= names, sorted(names)
    else:
        calls = {name for event, name in saved["events"] if event == "call"}
        assert {kernel.__name__, instruction} <= calls, sorted(calls)
        if profiler == "settrace":  # line events inside the user's kernel
            assert ["line", kernel.__name__] in saved["events"]


@pytest.mark.timeout(60)
def test_profiled_correct_kernel_still_passes(tmp_path):
    """The other side: a profiler on a correct kernel raises no alarm (no checker depends on
    the profile hook being free)."""
    def host(rt):
        dst, src = rt.alloc((N,), np.float32), rt.alloc((N,), np.float32)
        src[:] = np.arange(N)
        rt.launch(k_profiled, blocks=2, args=(k_fenced, "setprofile", str(tmp_path / f"p{rt.rank}"),
                                              dst.ptr, src.ptr))
        return dst.tolist()

    assert _run(host, nranks=2) == [list(range(N))] * 2


def k_fenced(ctx, dst, src):
    if ctx.block_idx == 0:
        TPUT(GlobalTensor(dst, (1, N)), GlobalTensor(src, (1, N)), ctx.tile((1, N), np.float32))
        pipe_barrier(PIPE_ALL)
        dsb(DSB_DDR)
        TNOTIFY(Signal(ctx.signal_base), 1, NotifyOp.AtomicAdd)
    else:
        TWAIT(Signal(ctx.signal_base), 1, WaitCmp.GE)


# --- 2. report sites point at the user's kernel line --------------------------------------------

@pytest.mark.timeout(60)
@pytest.mark.parametrize("bug", ("unfenced", "unbalanced", "twice"))
def test_site_is_the_offending_instruction(bug):
    # mid-kernel (notify-unfenced, event-twice) and at block end (flag-unbalanced: the set_flag)
    _assert_site(_report(host_buggy, BUGGY[bug][1], args=(bug,)), bug)


SLOTS = 1024  # words into the signal matrix: past the barrier regions
GO, DONE = 0, 1


def k_packed_sets(ctx, fence_after_wait):
    """Ranks 1 and 2 Set neighbouring words of one 64-byte line of rank 0, rank 1 first. Rank
    1's line stays cached (hazard_delay = 60 s) until its dsb or its kernel's end, and then
    restores rank 2's word: ``line-shared``, at rank 1's Set."""
    base = ctx.signal_base
    if ctx.rank == 1:
        TNOTIFY(Signal(GetRemotePtr(ctx, base + SLOTS + 1, 0)), 1, NotifyOp.Set)  # @set
        TNOTIFY(Signal(GetRemotePtr(ctx, base + GO, 2)), 1, NotifyOp.AtomicAdd)
        TWAIT(Signal(base + DONE), 1, WaitCmp.GE)
        if fence_after_wait:
            dsb(DSB_DDR)  # @writeback
    elif ctx.rank == 2:
        TWAIT(Signal(base + GO), 1, WaitCmp.GE)
        TNOTIFY(Signal(GetRemotePtr(ctx, base + SLOTS + 2, 0)), 1, NotifyOp.Set)
        dsb(DSB_DDR)
        TNOTIFY(Signal(GetRemotePtr(ctx, base + DONE, 1)), 1, NotifyOp.AtomicAdd)


def host_packed_sets(rt, fence_after_wait):
    rt.reset_signals()
    rt.launch(k_packed_sets, blocks=1, args=(fence_after_wait,))
    return 0


@pytest.mark.timeout(60)
@pytest.mark.parametrize("fence_after_wait", (False, True), ids=("at-kernel-end", "at-dsb"))
def test_line_shared_site_is_the_set(fence_after_wait):
    with pytest.raises(shmcomm.RunError) as ei:
        _run(host_packed_sets, nranks=3, hazards="lines,checkers", hazard_delay=60.0,
             args=(fence_after_wait,))
    text = str(ei.value)
    m = _SITE.search(text)
    assert m and m["checker"] == "line-shared", text
    _assert_site(m, "set")
    if fence_after_wait:
        assert f"write-back (at {m['file']}:{line_of('writeback')})" in text, text
    else:
        assert "write-back (when the kernel returned)" in text, text
    assert "rank 1 block 0, signal offset 0x1008 of rank 0" in text, text


def k_wrong_arrivals(ctx):
    EpochBarrier(ctx, num_blocks=ctx.block_num + 1)  # @epoch


def _expect_blocks_line() -> int:
    lines, first = inspect.getsourcelines(EpochBarrier)
    hits = [first + i for i, text in enumerate(lines) if "ctx.expect_blocks(" in text]
    assert len(hits) == 1
    return hits[0]


@pytest.mark.timeout(60)
def test_site_of_a_library_kernel_is_the_users_call():
    m = _report(lambda rt: rt.launch(k_wrong_arrivals, blocks=2), "arrival-count")
    _assert_site(m, "epoch")
    assert (m["inner"], m["ifile"], int(m["iline"])) == (
        "EpochBarrier", "barrier.py", _expect_blocks_line()), m.group(0)


@pytest.mark.timeout(30)
def test_kernel_site_without_a_user_frame():
    """A library kernel launched by itself (as the host helpers launch theirs): no user line is
    on the block's stack, so the site is the library's own line, not the kernel's definition
    with a wrong "when it returned"; with no kernel frame at all, the kernel's definition."""
    kernels_dir = os.path.join(_PKG_DIR, "kernels")
    fake = os.path.join(kernels_dir, "fake_kernel.py")
    ns: dict = {"kernel_site": report_mod.kernel_site}
    exec(compile("def lib_kernel(out):\n    out.append(kernel_site())\n", fake, "exec"), ns)

    class FakeAgent:
        kernel = k_wrong_arrivals

    runtime = os.path.join(_PKG_DIR, "core", "fake_runtime.py")  # package code, not a kernel
    exec(compile("def returning(out, agent):\n    out.append(kernel_site(agent))\n", runtime,
                 "exec"), ns)
    out: list[str] = []
    for target, args in ((ns["lib_kernel"], (out,)), (ns["returning"], (out, FakeAgent()))):
        t = threading.Thread(target=target, args=args)
        t.start()
        t.join()
    assert out[0] == f"{fake}:2 (in lib_kernel)"
    code = k_wrong_arrivals.__code__
    assert out[1] == f"{code.co_filename}:{code.co_firstlineno} (when kernel k_wrong_arrivals returned)"


# --- 3. what each model binds -----------------------------------------------------------------

def k_bindings(ctx, seen):
    a = agent_mod.current()
    seen.append({"hooks": None if a.hooks is None else ("model" if a.hooks is a.pipes else "other"),
                 "fences": None if a.fences is None else ("model" if a.fences is a.pipes else "other"),
                 "pipes": type(a.pipes).__name__, "hooked": agent_mod.FLAGS.hooked})


def host_bindings(rt, blocks):
    seen: list[dict] = []
    rt.launch(k_bindings, blocks=blocks, args=(seen,))
    return seen


@pytest.mark.timeout(60)
@pytest.mark.parametrize("mode, hazards, hooks, fences", [
    ("eager", "all", None, None),
    ("hazard", "all", "model", "model"),
    ("hazard", "checkers", "model", "model"),
    ("hazard", "lines", "model", "model"),
    ("hazard", "jitter", "model", "model"),
    ("hazard", "pipes", None, "model"),
    ("hazard", "visibility", None, "model"),
    ("hazard", "pipes,visibility", None, "model"),
])
def test_models_bind_hooks_and_fences(mode, hazards, hooks, fences):
    results = _run(host_bindings, nranks=2, mode=mode, hazards=hazards, args=(3,))
    pipes = "EagerBlockModel" if mode == "eager" else "HazardBlockModel"
    # HOOKED: once any block of the process has hooks, TNOTIFY / TWAIT look them up
    want = {"hooks": hooks, "fences": fences, "pipes": pipes, "hooked": hooks is not None}
    assert results == [[want] * 3] * 2


# --- 3b. a custom model plugged in through the seam receives every hook call -------------------

class RecordingBlock(EagerBlockModel):
    """Eager pipe work; records every call the seam makes (``log``: this block's calls)."""

    acts_on_fences = True  # so pipe_barrier and dsb reach the model too

    def __init__(self, agent, log):
        super().__init__(agent)
        self.log = log

    def _sig(self, sig):
        return (sig.ptr.rank, sig.ptr.offset // 4, len(sig.words))

    def start(self):
        self.log.append(("start",))

    def finish(self):
        self.log.append(("finish",))
        super().finish()

    def load(self, tile, src):
        self.log.append(("load", src.ptr.rank))
        super().load(tile, src)

    def store(self, dst, tile, atomic):
        self.log.append(("store", dst.ptr.rank, int(atomic)))
        super().store(dst, tile, atomic)

    def barrier(self, pipe):
        self.log.append(("barrier", pipe))

    def dsb(self, mode):
        self.log.append(("dsb", mode))

    def notify(self, sig, value, op):
        self.log.append(("notify", self._sig(sig), value, NotifyOp(op).name))

    def wait(self, sig, value, cmp):
        self.log.append(("wait", self._sig(sig), value, WaitCmp(cmp).name))

    def waited(self, sig, value, cmp):
        self.log.append(("waited", self._sig(sig), value, WaitCmp(cmp).name))

    def test(self, sig, value, cmp):
        self.log.append(("test", self._sig(sig), value, WaitCmp(cmp).name))

    def copy_begin(self, op, dst, src):
        self.log.append(("copy_begin", op, dst.ptr.rank, src.ptr.rank))

    def copy_end(self, op):
        self.log.append(("copy_end", op))

    def expect_blocks(self, kernel, param, count):
        self.log.append(("expect_blocks", kernel, param, count))


class RecordingRank(RankModel):
    def __init__(self, rt):
        super().__init__(rt)
        self.launches: list[str] = []
        self.logs: dict[int, list] = {}

    def launch_start(self):
        self.launches.append("start")

    def launch_end(self):
        self.launches.append("end")

    def block(self, agent):
        model = RecordingBlock(agent, self.logs.setdefault(agent.block_idx, []))
        agent.hooks = model
        return model


W = 64  # words: each block's own signals start at W * (block_idx + 1)


def k_every_hook(ctx, dst, src, back):
    peer = 1 - ctx.rank
    base = ctx.signal_base + W * (ctx.block_idx + 1)
    TNOTIFY(Signal(base), 3, NotifyOp.AtomicAdd)
    TNOTIFY(Signal(GetRemotePtr(ctx, base + 1, peer)), 7, NotifyOp.Set)
    TWAIT(Signal(base + 1), 7, WaitCmp.EQ)  # the peer's Set
    TWAIT(Signal2D(base, 1, 2), 3, WaitCmp.GE)
    TTEST(Signal(base), 4, WaitCmp.LT)
    rows = GlobalTensor(dst + N * ctx.block_idx, (1, N))
    TPUT(GlobalTensor(GetRemotePtr(ctx, dst + N * ctx.block_idx, peer), (1, N)),
         GlobalTensor(src, (1, N)), ctx.tile((1, N), np.float32))
    pipe_barrier(PIPE_ALL)
    dsb(DSB_DDR)
    TNOTIFY(Signal(GetRemotePtr(ctx, base + 2, peer)), 1, NotifyOp.AtomicAdd)
    TWAIT(Signal(base + 2), 1, WaitCmp.GE)
    TGET(GlobalTensor(back + N * ctx.block_idx, (1, N)), rows, ctx.tile((1, N), np.float32))
    ctx.expect_blocks(2, "k_every_hook", "nblocks")


def host_every_hook(rt):
    dst = rt.alloc((2 * N,), np.float32)
    src = rt.alloc((N,), np.float32)
    back = rt.alloc((2 * N,), np.float32)
    src[:] = np.arange(N) + 100 * rt.rank
    rt.launch(k_every_hook, blocks=2, args=(dst.ptr, src.ptr, back.ptr))
    model = rt.model
    return {"type": type(model).__name__, "launches": model.launches, "logs": model.logs,
            "hooked": agent_mod.FLAGS.hooked, "back": back.tolist()}


@pytest.mark.timeout(60)
def test_custom_model_receives_every_hook():
    config = Config.from_kwargs(nranks=2, blocks=2, seed=5, timeout=60, wait_timeout=30)
    results = Launcher(config, host_every_hook, (), model=RecordingRank).run()
    for rank, res in enumerate(results):
        peer = 1 - rank
        assert res["type"] == "RecordingRank" and res["hooked"]
        assert res["launches"] == ["start", "end"]
        # the data moved through the eager pipe work of the model
        assert res["back"] == (np.tile(np.arange(N) + 100 * peer, 2)).tolist()
        for b in (0, 1):
            w = W * (b + 1)
            own, remote = (rank, w, 1), (peer, w + 1, 1)
            # one piece (fits the tile): pto-isa's TPUT has no pipe_barrier on this path, TGET has
            put = [("copy_begin", "TPUT", peer, rank), ("load", rank),
                   ("store", peer, 0), ("copy_end", "TPUT")]
            get = [("copy_begin", "TGET", rank, rank), ("load", rank), ("barrier", PIPE_ALL),
                   ("store", rank, 0), ("copy_end", "TGET")]
            assert res["logs"][b] == [
                ("start",),
                ("notify", own, 3, "AtomicAdd"), ("barrier", PIPE_ALL),  # TNOTIFY's own barrier
                ("notify", remote, 7, "Set"), ("barrier", PIPE_ALL),
                ("wait", (rank, w + 1, 1), 7, "EQ"), ("waited", (rank, w + 1, 1), 7, "EQ"),
                ("wait", (rank, w, 2), 3, "GE"), ("waited", (rank, w, 2), 3, "GE"),
                ("test", own, 4, "LT"),
                *put,
                ("barrier", PIPE_ALL), ("dsb", DSB_DDR),
                ("notify", (peer, w + 2, 1), 1, "AtomicAdd"), ("barrier", PIPE_ALL),
                ("wait", (rank, w + 2, 1), 1, "GE"), ("waited", (rank, w + 2, 1), 1, "GE"),
                *get,
                ("expect_blocks", "k_every_hook", "nblocks", 2),
                ("finish",), ("barrier", PIPE_ALL),
            ], (rank, b)


def k_root_collectives(ctx, member, whole):
    """Rank 0 broadcasts, scatters and gathers; the other ranks only hold their tensors."""
    if ctx.rank != 0:
        return
    tile = ctx.tile((1, N), np.float32)

    def group(ptr, shape):
        return ParallelGroup([GlobalTensor(GetRemotePtr(ctx, ptr, r), shape)
                              for r in range(ctx.nranks)])

    TBROADCAST(group(member, (1, N)), GlobalTensor(member, (1, N)), tile)
    TSCATTER(group(member, (1, N)), GlobalTensor(whole, (ctx.nranks, N)), tile)
    TGATHER(group(member, (1, N)), GlobalTensor(whole, (ctx.nranks, N)), tile)


def host_root_collectives(rt):
    member, whole = rt.alloc((N,), np.float32), rt.alloc((rt.nranks * N,), np.float32)
    rt.launch(k_root_collectives, blocks=1, args=(member.ptr, whole.ptr))
    return rt.model.logs[0]


@pytest.mark.timeout(60)
def test_custom_model_sees_root_collective_copies():
    config = Config.from_kwargs(nranks=3, blocks=1, seed=5, timeout=60, wait_timeout=30)
    logs = Launcher(config, host_root_collectives, (), model=RecordingRank).run()
    assert logs[1] == logs[2] == [("start",), ("finish",), ("barrier", PIPE_ALL)]

    def moved(op, dst, src):
        return [("copy_begin", op, dst, src), ("load", src), ("store", dst, 0), ("copy_end", op)]

    assert logs[0] == [
        ("start",),
        # one load, stored to both other members; the root's own tensor is the source
        ("copy_begin", "TBROADCAST", 1, 0), ("copy_begin", "TBROADCAST", 2, 0),
        ("load", 0), ("store", 1, 0), ("store", 2, 0),  # pto-isa: no pipe_barrier here
        ("copy_end", "TBROADCAST"), ("copy_end", "TBROADCAST"),
        *moved("TSCATTER", 0, 0), *moved("TSCATTER", 1, 0), *moved("TSCATTER", 2, 0),
        *moved("TGATHER", 0, 0), *moved("TGATHER", 0, 1), *moved("TGATHER", 0, 2),
        ("finish",), ("barrier", PIPE_ALL),
    ]


def test_run_keeps_choosing_the_model_from_the_config():
    """``run()`` passes no model: the launcher takes ``compose(config)``; a bare rank model
    plugged in runs with the base run model's no-op launcher hooks."""
    from shmcomm.core.model import RunModel
    from shmcomm.exec.eager import EagerRankModel
    from shmcomm.exec.hazard import HazardRankModel

    assert Launcher(Config(mode="eager"), print, ()).model.rank_model is EagerRankModel
    hazard = Launcher(Config(mode="hazard", detect_races=False), print, ()).model
    assert hazard.rank_model is HazardRankModel
    observed = Launcher(Config(mode="hazard"), print, ()).model  # the detector is on by default
    assert observed.inner.rank_model is HazardRankModel
    plugged = Launcher(Config(), print, (), model=RecordingRank).model
    assert type(plugged) is RunModel and plugged.rank_model is RecordingRank


def test_models_forward_nothing_implicitly():
    # a wrapping model (the race detector) says what it takes from the model it wraps: an
    # attribute reached through __getattr__ is one the seam does not declare, and a class
    # attribute of the seam's base silently wins over it (the way concurrent_launches did)
    import importlib
    import pkgutil

    import shmcomm.exec as ex
    from shmcomm.core.model import BlockModel, RankModel, RunModel

    seen = []
    for info in pkgutil.walk_packages(ex.__path__, ex.__name__ + "."):
        mod = importlib.import_module(info.name)
        for obj in vars(mod).values():
            if isinstance(obj, type) and issubclass(obj, (BlockModel, RankModel, RunModel)):
                seen.append(obj)
                assert "__getattr__" not in vars(obj), f"{obj.__qualname__} forwards by __getattr__"
    assert len(seen) >= 8
