"""One composition: a run's execution (semantics x interleaving x observers) is decided once
from its configuration (``Execution``) and built by one function (``compose``); the launcher
talks to the result through ``RunModel``'s declared hooks only.

* every combination that exists builds through ``compose`` and runs a small 2-rank kernel
  (a put, a drain, a fence, a notify) to the right result;
* a combination that does not exist raises ``ArgumentError`` naming the setting;
* ``RunModel``'s hooks are no-ops by default, and a minimal custom subclass plugged into the
  launcher gets every one of them called (shared area, pipes, collect, finish, hint);
* the launcher's source probes no model attribute (no ``getattr`` / ``hasattr`` on it);
* every layer's block model stays under CPython's limit of shared instance attribute keys.
"""

from __future__ import annotations

import ctypes
import inspect
import json
import re
from multiprocessing.connection import Pipe

import numpy as np
import pytest

import shmcomm
from shmcomm.comm import TNOTIFY, TPUT, TWAIT, GetRemotePtr, GlobalTensor, NotifyOp, Signal, WaitCmp
from shmcomm.config import Config
from shmcomm.core.model import BlockModel, RankModel, RunModel
from shmcomm.core.observer import ObservedRun, Observer, _block_class
from shmcomm.errors import ArgumentError, Failure
from shmcomm.exec import Execution, compose, model_for
from shmcomm.exec.compose import reads
from shmcomm.exec.eager import EagerBlockModel
from shmcomm.exec.hazard.model import HazardBlockModel
from shmcomm.exec.races import RaceDetector
from shmcomm.exec.races.block import RaceBlockModel
from shmcomm.exec.schedule import ScheduleMode
from shmcomm.exec.schedule.model import ScheduleBlockModel
from shmcomm.launch import mpi, pool, supervisor
from shmcomm.launch.supervisor import Launcher
from shmcomm.pipe import DSB_DDR, PIPE_ALL, dsb, pipe_barrier

pytestmark = pytest.mark.timeout(120)
N = 16
BOUNDS = dict(timeout=60, wait_timeout=20, deadlock_grace=2.0)


def k_put_notify(ctx, data, src):
    """Rank 0 puts ``src`` into rank 1's ``data`` (drained, fenced), then signals; rank 1 waits
    and copies what it sees into its ``src``."""
    sig = ctx.signal_base
    if ctx.rank == 0:
        TPUT(GlobalTensor(GetRemotePtr(ctx, data, 1), (1, N)), GlobalTensor(src, (1, N)),
             ctx.tile((1, N), np.float32))
        pipe_barrier(PIPE_ALL)
        dsb(DSB_DDR)
        TNOTIFY(Signal(GetRemotePtr(ctx, sig, 1)), 1, NotifyOp.AtomicAdd)
    else:
        TWAIT(Signal(sig), 1, WaitCmp.GE)
        GlobalTensor(src, (1, N)).view()[:] = GlobalTensor(data, (1, N)).view()


def host_put_notify(rt):
    data, src = rt.alloc((N,), np.float32), rt.alloc((N,), np.float32)
    data[:] = 0
    src[:] = np.arange(N) if rt.rank == 0 else -1
    rt.barrier()
    rt.launch(k_put_notify, blocks=1, args=(data.ptr, src.ptr))
    rt.barrier()
    return bool(np.array_equal(src, np.arange(N)))


# --- the decision -----------------------------------------------------------------------------

@pytest.mark.parametrize("settings, semantics, interleaving, strategy, observers", [
    (dict(), "eager", "free", "", set()),
    (dict(mode="eager", detect_races=True, trace="t.json"), "eager", "free", "", {"races", "trace"}),
    # the race detector is on by default in hazard and schedule mode
    (dict(mode="hazard"), "hazard", "free", "", {"checkers", "races"}),
    (dict(mode="hazard", detect_races=False), "hazard", "free", "", {"checkers"}),
    (dict(mode="hazard", hazards="pipes,lines"), "hazard", "free", "", {"races"}),
    (dict(mode="schedule"), "hazard", "scheduled", "random", {"checkers", "races"}),
    (dict(mode="schedule", strategy="pct:2", detect_races=True), "hazard", "scheduled", "pct",
     {"checkers", "races"}),
    (dict(mode="schedule", strategy="exhaustive:1", detect_races=False), "hazard", "scheduled",
     "exhaustive", {"checkers"}),
    (dict(mode="schedule", replay="s.json"), "hazard", "scheduled", "replay",
     {"checkers", "races"}),
])
def test_execution_is_derived_from_the_config(settings, semantics, interleaving, strategy,
                                              observers):
    ex = Execution.of(Config(nranks=2, **settings))
    assert (ex.semantics, ex.interleaving, ex.strategy, set(ex.observers)) == \
        (semantics, interleaving, strategy, observers)
    assert ex.reads("hazards") == (semantics == "hazard")  # hazard semantics read it, only they
    assert ex.trace_writer == ("schedule" if interleaving == "scheduled" else "events")
    assert ex.hazards == (frozenset() if semantics == "eager" else
                          shmcomm.config.parse_hazards(settings.get("hazards", "all")))


def test_which_mode_reads_which_setting():
    from shmcomm.launch.options import check_mode_options
    from shmcomm.stress.harness import Settings

    assert [m for m in ("eager", "hazard", "schedule") if reads(m, "hazards")] == \
        ["hazard", "schedule"]
    assert [m for m in ("eager", "hazard", "schedule") if reads(m, "strategy")] == ["schedule"]
    assert all(reads(m, "seed") for m in ("eager", "hazard", "schedule"))
    # the CLI and the stress harness ask the same question, so they agree with the models
    for mode in ("eager", "hazard", "schedule"):
        assert (check_mode_options((mode,), "pipes") is None) == reads(mode, "hazards")
        assert ("hazards" in Settings().mode_config(mode)) == reads(mode, "hazards")


@pytest.mark.parametrize("settings, named", [
    (dict(mode="eager", replay="s.json"), "replay"),
    (dict(mode="hazard", replay="s.json"), "replay"),
    (dict(mode="schedule", transport="mpi"), "mode"),
    (dict(mode="hazard", transport="mpi", detect_races=True), "detect_races"),
])
def test_a_combination_that_does_not_exist_names_its_setting(settings, named):
    with pytest.raises(ArgumentError, match=rf"^{named}\b"):
        Execution.of(Config(nranks=2, **settings))
    with pytest.raises(ArgumentError, match=rf"^{named}\b"):
        compose(Config(nranks=2, **settings))


@pytest.mark.parametrize("strategy", ["exhaustive", "replay"])
def test_a_strategy_that_is_not_one_run_names_strategy(strategy):
    """``exhaustive`` runs many schedules (the stress explorer), ``replay`` needs a file."""
    with pytest.raises(ArgumentError, match=r"^strategy\b"):
        compose(Config(nranks=2, mode="schedule", strategy=strategy))


# --- what compose builds ----------------------------------------------------------------------

def test_compose_builds_one_run_model_per_combination():
    from shmcomm.exec.eager import EagerRankModel
    from shmcomm.exec.hazard import HazardRankModel

    assert model_for is compose
    eager = compose(Config(nranks=2))
    hazard = compose(Config(nranks=2, mode="hazard", detect_races=False))
    assert type(eager) is RunModel and eager.rank_model is EagerRankModel
    assert type(hazard) is RunModel and hazard.rank_model is HazardRankModel
    assert type(compose(Config(nranks=2, mode="schedule", detect_races=False))) is ScheduleMode
    on = compose(Config(nranks=2, mode="hazard"))  # the detector is on by default
    assert isinstance(on, ObservedRun) and [type(o) for o in on.observers] == [RaceDetector]
    for mode, inner in (("eager", RunModel), ("hazard", RunModel), ("schedule", ScheduleMode)):
        run = compose(Config(nranks=2, mode=mode, detect_races=True))
        assert isinstance(run, ObservedRun) and type(run.inner) is inner
        assert isinstance(run.observers[0], RaceDetector)
        assert run.shared_bytes == -(-run.inner.shared_bytes // 64) * 64  # the detector: none
        counted = compose(Config(nranks=2, mode=mode, detect_races=True), ["notify-count"])
        assert [o.name for o in counted.observers] == ["races", "notify-count"]
        assert counted.observers[1].shared_offset == run.shared_bytes  # after the model's


def _run(**settings):
    return shmcomm.run(host_put_notify, nranks=2, blocks=1, seed=3, **BOUNDS, **settings)


@pytest.mark.parametrize("settings", [
    dict(mode="eager"),
    dict(mode="eager", detect_races=True),
    dict(mode="hazard"),
    dict(mode="hazard", hazards="pipes,visibility"),
    dict(mode="hazard", detect_races=True),
    dict(mode="schedule", strategy="random"),
    dict(mode="schedule", strategy="pct:2"),
    dict(mode="schedule", strategy="random", detect_races=True),
], ids=lambda s: ",".join(f"{k}={v}" for k, v in s.items()))
def test_every_combination_runs_the_kernel(settings):
    assert _run(**settings) == [True, True]


@pytest.mark.parametrize("mode, races", [("eager", False), ("hazard", False),
                                         ("schedule", False), ("schedule", True)])
def test_every_mode_writes_its_trace(mode, races, tmp_path):
    """The trace lands at its path whoever writes it (the ranks, or the scheduler behind the
    race detector: the detector moves its inner model's trace too)."""
    path = tmp_path / "t.json"
    assert _run(mode=mode, trace=str(path), detect_races=races) == [True, True]
    doc = json.loads(path.read_text())
    events = doc["traceEvents"] if isinstance(doc, dict) else doc
    assert events
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.json"]  # nothing left beside it


def test_a_recorded_schedule_replays_through_compose(tmp_path):
    path = tmp_path / "s.json"
    assert _run(mode="schedule", strategy="pct:2", record=str(path)) == [True, True]
    assert _run(mode="schedule", replay=str(path), detect_races=True) == [True, True]


# --- the launcher's protocol ------------------------------------------------------------------

def test_run_model_defaults_are_no_ops():
    cfg = Config(nranks=2)
    m = RunModel(cfg)
    failures = [Failure(0, None, "exception", "kept")]
    reader, writer = Pipe(duplex=False)
    try:
        assert m.prepare(object()) is None
        assert m.receive(reader) == [] and m.finish() == []
        assert m.collect(object(), failures) is None and [f.message for f in failures] == ["kept"]
    finally:
        reader.close()
        writer.close()
    assert m.hint(host_put_notify, ()) == "" and m.schedule is None
    assert m.shared_bytes == 0 and m.conns == [] and m.config is cfg
    assert m.first_rank is None and not m.one_at_a_time and m.turn_cpu is None
    with pytest.raises(NotImplementedError, match="rank_model"):
        m(object())
    m.set_trace("/tmp/x.json")
    assert m.config.trace == "/tmp/x.json" and m.config.replace(trace="") == cfg


def test_launcher_probes_no_model_attribute():
    """The launcher calls the declared hooks; it never asks a model what it has."""
    for module in (supervisor, pool, mpi):
        src = inspect.getsource(module)
        assert not re.search(r"(getattr|hasattr)\((self\.)?model\b", src), module.__name__
        assert not re.search(r"\bmode [!=]=", src), module.__name__  # Execution decides
    assert "__getattr__" not in vars(RaceDetector)  # no launcher-level forwarding
    assert issubclass(RaceDetector, Observer) and issubclass(ScheduleMode, RunModel)
    assert issubclass(ObservedRun, RunModel)
    with pytest.raises(ArgumentError, match="^model: a RunModel"):
        Launcher(Config(nranks=2), host_put_notify, (), model=lambda rt: None)


def _defined(cls: type) -> set[str]:
    """The block protocol's names that ``cls`` (or a class between it and BlockModel) defines."""
    names: set[str] = set()
    for k in cls.__mro__[:cls.__mro__.index(BlockModel)]:
        names |= set(vars(k))
    return names & {n for n in vars(BlockModel) if not n.startswith("__")}


def test_wrapping_block_models_forward_everything_a_model_below_defines():
    """An interleaving or an observer that left a method to BlockModel's default would run the
    default instead of the model below it: the semantics would change under observation (the
    detector once skipped hazard's TNOTIFY drain, which lets queued copies reach their due
    time). ``acts_on_fences`` is the observer's own: its clocks need every barrier and dsb."""
    below = [HazardBlockModel, EagerBlockModel]
    for wrapper, inner in ((ScheduleBlockModel, below),
                           (_block_class((RaceBlockModel,)), [*below, ScheduleBlockModel])):
        for cls in inner:
            missing = _defined(cls) - _defined(wrapper) - {"acts_on_fences"}
            assert not missing, f"{wrapper.__name__} leaves {sorted(missing)} of {cls.__name__}"


MAGIC = 0x5EED


class _EchoRank(RankModel):
    """Tells its run model, through the run model's pipe, what the shared area held."""

    def __init__(self, rt, writer):
        super().__init__(rt)
        self.writer = writer

    def block(self, agent):
        return EagerBlockModel(agent)

    def launch_end(self):
        seen = ctypes.c_int64.from_address(self.rt.ctl.extra_base).value
        self.writer.send((self.rt.rank, seen))


class _EchoRun(RunModel):
    """The smallest model with a launcher side: a shared word, one pipe, a finding."""

    shared_bytes = 64

    def __init__(self, config):
        super().__init__(config)
        reader, self.writer = Pipe(duplex=False)
        self.conns = [reader]
        self.calls: list[str] = []
        self.seen: dict[int, int] = {}

    def __call__(self, rt):
        return _EchoRank(rt, self.writer)

    def prepare(self, ctl):
        self.calls.append("prepare")
        ctypes.c_int64.from_address(ctl.extra_base).value = MAGIC

    def receive(self, conn):
        rank, seen = conn.recv()
        self.seen[rank] = seen
        return []

    def finish(self):
        self.calls.append("finish")
        for conn in self.conns:
            while conn.poll(0):
                self.receive(conn)
        return [Failure(None, None, "exception", f"echo model saw {sorted(self.seen.items())}")]

    def collect(self, ctl, failures):
        self.calls.append("collect")

    def hint(self, host, args):
        return "echo: rerun me"


def test_a_custom_run_model_gets_every_hook_called():
    cfg = Config(nranks=2, blocks=1, seed=1, **BOUNDS)
    model = _EchoRun(cfg)
    with pytest.raises(shmcomm.RunError) as ei:
        Launcher(cfg, host_put_notify, (), model=model).run()
    assert f"echo model saw {[(0, MAGIC), (1, MAGIC)]}" in str(ei.value)
    assert ei.value.hint == "echo: rerun me" and ei.value.schedule is None
    assert model.calls == ["prepare", "finish", "collect"]


def test_a_pool_runs_the_race_detector():
    """The detector's clocks and pipes are made with a pool's ranks: its runs take them."""
    from shmcomm.launch.pool import Pool

    with Pool(2, window_bytes=1 << 16) as p:
        assert p.run(host_put_notify, detect_races=True) == [True, True]
        assert p.run(host_put_notify, blocks=1, mode="schedule", **BOUNDS) == [True, True]


def _model_sizes(ctx, out):
    """The instance attribute counts of this block's models, outermost first."""
    from shmcomm.core.agent import current

    m, sizes = current().pipes, []
    while m is not None:
        sizes.append((type(m).__name__, len(vars(m))))
        sizes += [(type(o).__name__, len(vars(o))) for o in getattr(m, "obs", ())]  # observers
        m = getattr(m, "inner", None) or getattr(m, "sem", None)
    out[ctx.block_idx] = sizes


def _sizes_host(rt):
    out = [None] * 2
    rt.launch(_model_sizes, blocks=2, args=(out,))
    return out


@pytest.mark.timeout(120)
@pytest.mark.parametrize("mode", ["hazard", "schedule"])
def test_block_models_keep_under_cpythons_shared_attribute_keys(mode):
    """Every launch makes a model per block per layer, a scheduled run on the turn's CPU: with
    30 instance attributes or more, CPython stops sharing a class's attribute keys between its
    instances and making one costs half again."""
    got = shmcomm.run(_sizes_host, nranks=2, mode=mode, detect_races=True)
    names = {n for per_rank in got for block in per_rank for n, _ in block}
    assert {"RaceBlockModel", "HazardBlockModel"} <= names, names
    for per_rank in got:
        for block in per_rank:
            for name, n in block:
                assert n < 30, (name, n)
