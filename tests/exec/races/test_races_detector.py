"""The happens-before race detector: races reported whether or not the data came out wrong,
with both sites and the missing edge; no report on correct programs, barriers, collectives."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

import shmcomm
from shmcomm.comm import (
    SYNCALL,
    TBROADCAST,
    TGATHER,
    TGET,
    TNOTIFY,
    TPUT,
    TREDUCE,
    TSCATTER,
    TWAIT,
    GetRemotePtr,
    GlobalTensor,
    NotifyOp,
    ParallelGroup,
    ReduceOp,
    Signal,
    WaitCmp,
)
from shmcomm.kernels import CentralBarrier, DeviceBarrier, EpochBarrier
from shmcomm.pipe import DSB_DDR, PIPE_ALL, PIPE_MTE3, TLOAD, TSTORE, dsb, pipe_barrier
from shmcomm.stress.catalogue import ENTRIES

pytestmark = pytest.mark.timeout(180)

RUN = dict(detect_races=True, timeout=60, deadlock_grace=0.3, wait_timeout=20)
# the catalogue's bugs whose failure is a data race, with a configuration that has the race
RACE_BUGS = [
    ("notify_before_drain", 2, 1, 64),
    ("drain_without_dsb", 2, 1, 64),
    ("set_flag_reuse", 4, 1, 64),
    ("phase_blind_slot", 4, 2, 64),
    ("no_reset_between_launches", 4, 2, 64),
    ("nonatomic_atomicadd", 2, 2, 64),
    ("cumulative_counter", 4, 4, 1000),
    ("missing_wait_flag", 2, 1, 1000),
    ("missing_intra_barrier", 4, 4, 1000),
    ("host_reset_race", 4, 1, 1),
]


def _race(host, nranks=2, blocks=1, args=(), **kw) -> shmcomm.RaceReport:
    with pytest.raises(shmcomm.RaceReport) as info:
        shmcomm.run(host, nranks=nranks, blocks=blocks, args=args, **RUN, **kw)
    err = info.value
    assert err.failures[0].kind == "race"
    return err


# these three race only when the run's own timing leaves the two accesses unordered (eager mode
# has no scheduler to force it): a run whose timing happened to order them is retried, twice
INTERLEAVING_BUGS = {"set_flag_reuse", "phase_blind_slot", "cumulative_counter"}


@pytest.mark.parametrize("name,nranks,blocks,size", RACE_BUGS)
def test_every_race_bug_of_the_catalogue_is_reported_in_eager_mode(name, nranks, blocks, size):
    tries = 3 if name in INTERLEAVING_BUGS else 1
    seed = wrong = 0
    while seed < tries + wrong:
        try:
            shmcomm.run(ENTRIES[name].host, nranks=nranks, blocks=blocks, args=(size,),
                        seed=seed, **RUN)
        except shmcomm.RaceReport as exc:
            err = exc
            break
        except shmcomm.RunError:
            # caught as wrong data before the racing access happened (the reader saw stale
            # bytes and the abort stopped the writer ahead of its store): the bug was found, but
            # this test wants the race report, so such a run is retried (twice at most)
            wrong += 1
            assert wrong <= 2, f"{name}: {wrong} runs failed without a race report"
        seed += 1
    else:
        pytest.fail(f"{name}: no race reported in {tries} run(s)")
    assert err.failures[0].kind == "race"
    text = str(err)
    if name == "host_reset_race":  # a signal word, judged on its clock when one side acts
        assert "data race on signal word" in text and "plain store" in text, text
        return
    assert "data race on rank" in text and "neither happens before the other" in text
    assert text.count(".py:") >= 2  # both sites


@pytest.mark.parametrize("name", ["epoch_barrier", "device_barrier", "ring_put", "reduce_scatter",
                                  "all_gather", "all_reduce"])
@pytest.mark.parametrize("mode,nranks,blocks,size,seed", [
    ("eager", 2, 1, 64, 0), ("eager", 4, 4, 1000, 1), ("hazard", 4, 2, 1000, 2),
    ("hazard", 3, 3, 64, 3),
])
def test_correct_catalogue_programs_get_no_report(name, mode, nranks, blocks, size, seed):
    shmcomm.run(ENTRIES[name].host, nranks=nranks, blocks=blocks, args=(size,), mode=mode,
                seed=seed, **RUN)


# --- library barriers and collectives, 1-8 ranks x 1-4 blocks -----------------------------------

def _barriers_kernel(ctx, buf, n):
    """Each block writes its slot of the next rank's buffer, then a barrier; then reads its own
    buffer (written by the previous rank). Three barriers in turn, twice each."""
    b = ctx.block_idx
    tile = ctx.tile((1, n), np.float32)
    for rnd, barrier in enumerate((EpochBarrier, CentralBarrier, EpochBarrier, CentralBarrier)):
        nxt = (ctx.rank + 1) % ctx.nranks
        dst = GlobalTensor(GetRemotePtr(ctx, buf + (b * n), nxt), (1, n))
        tile.array[:] = rnd
        TSTORE(dst, tile)
        pipe_barrier(PIPE_ALL)
        dsb(DSB_DDR)
        barrier(ctx)
        TLOAD(tile, GlobalTensor(buf + b * n, (1, n)))
        pipe_barrier(PIPE_ALL)
        assert tile.array[0, 0] == rnd
        barrier(ctx)  # nobody overwrites my buffer before I read it


def _seed_barrier_kernel(ctx, buf, n):
    b, nb = ctx.block_idx, ctx.block_num
    tile = ctx.tile((1, n), np.float32)
    nxt = (ctx.rank + 1) % ctx.nranks
    tile.array[:] = 5
    TSTORE(GlobalTensor(GetRemotePtr(ctx, buf + b * n, nxt), (1, n)), tile)
    pipe_barrier(PIPE_ALL)
    dsb(DSB_DDR)
    DeviceBarrier(ctx, ctx.signal_base, 0, ctx.rank, ctx.nranks, b, nb)
    TLOAD(tile, GlobalTensor(buf + b * n, (1, n)))
    pipe_barrier(PIPE_ALL)


def _library_host(rt, n):
    buf = rt.alloc((4 * n,), np.float32)
    rt.launch(_barriers_kernel, args=(buf.ptr, n))
    rt.reset_signals()
    rt.launch(_seed_barrier_kernel, args=(buf.ptr, n))
    x = rt.alloc((3 * n + 1,), np.float32)
    for op in ("sum", "max"):
        x[:] = rt.rank + 1
        rt.all_reduce(x, op=op)
    out = rt.alloc((rt.nranks * 8,), np.float32)
    share = rt.alloc((8,), np.float32)
    share[:] = rt.rank
    rt.all_gather(share, out)
    rt.reduce_scatter(out, share, op="sum")
    return float(x[0])


@pytest.mark.parametrize("nranks,blocks,mode", [
    (1, 1, "eager"), (2, 4, "eager"), (3, 2, "hazard"), (8, 1, "eager"), (8, 4, "eager"),
    (4, 3, "hazard"),
])
def test_library_barriers_and_collectives_get_no_report(nranks, blocks, mode):
    res = shmcomm.run(_library_host, nranks=nranks, blocks=blocks, args=(16,), mode=mode,
                      seed=nranks * 10 + blocks, **RUN)
    assert res == [float(nranks)] * nranks


def _root_kernel(ctx, a, b, n):
    if ctx.rank == 0 and ctx.block_idx == 0:
        t1, t2 = ctx.tile((1, 4), np.float32), ctx.tile((1, 4), np.float32)
        group = ParallelGroup([GlobalTensor(GetRemotePtr(ctx, b, r), (1, n))
                               for r in range(ctx.nranks)], ctx.nranks, 0)
        wgroup = ParallelGroup([GlobalTensor(GetRemotePtr(ctx, b + n, r), (1, n))
                                for r in range(ctx.nranks)], ctx.nranks, 0)
        TBROADCAST(group, GlobalTensor(a, (1, n)), t1)
        TGATHER(wgroup, GlobalTensor(a + n, (ctx.nranks, n)), t1)
        TSCATTER(wgroup, GlobalTensor(a + n, (ctx.nranks, n)), t1)
        TREDUCE(group, GlobalTensor(a, (1, n)), t1, t2, ReduceOp.Sum)
    EpochBarrier(ctx)


def test_root_collectives_between_barriers_get_no_report():
    def host(rt):
        n = 8
        a = rt.alloc(((rt.nranks + 1) * n,), np.float32)
        b = rt.alloc((2 * n,), np.float32)
        a[:] = 1
        b[:] = rt.rank
        rt.barrier()
        rt.launch(_root_kernel, blocks=2, args=(a.ptr, b.ptr, n))

    shmcomm.run(host, nranks=3, blocks=2, **RUN)


def test_root_collective_read_before_its_barrier_is_reported():
    def kernel(ctx, a, b, n):
        if ctx.rank == 0 and ctx.block_idx == 0:
            t = ctx.tile((1, 4), np.float32)
            group = ParallelGroup([GlobalTensor(GetRemotePtr(ctx, b, r), (1, n))
                                   for r in range(ctx.nranks)], ctx.nranks, 0)
            TBROADCAST(group, GlobalTensor(a, (1, n)), t)
        if ctx.rank == 1 and ctx.block_idx == 0:
            t = ctx.tile((1, n), np.float32)
            TLOAD(t, GlobalTensor(b, (1, n)))  # bug: before the barrier that publishes it
        EpochBarrier(ctx)

    def host(rt):
        a, b = rt.alloc((8,), np.float32), rt.alloc((8,), np.float32)
        rt.launch(kernel, blocks=1, args=(a.ptr, b.ptr, 8))

    err = _race(host, 2, 1)
    assert "TBROADCAST (its TSTORE)" in str(err)


# --- the README's example --------------------------------------------------------------------

def _readme_ring_put(ctx, src, dst, n):
    if ctx.block_idx != 0:
        return
    peer = (ctx.rank + 1) % ctx.nranks
    tile = ctx.tile((1, 1024), np.float32)
    TPUT(GlobalTensor(GetRemotePtr(ctx, dst, peer), (1, n)), GlobalTensor(src, (1, n)), tile)
    pipe_barrier(PIPE_ALL)
    dsb(DSB_DDR)
    TNOTIFY(Signal(GetRemotePtr(ctx, ctx.signal_base + 0, peer)), 1, NotifyOp.AtomicAdd)
    TWAIT(Signal(ctx.signal_base + 0), 1, WaitCmp.GE)


def _readme_host(rt):
    n = 4096
    src, dst = rt.alloc((n,), np.float32), rt.alloc((n,), np.float32)
    src[:] = rt.rank
    rt.launch(_readme_ring_put, blocks=4, args=(src.ptr, dst.ptr, n))
    return float(dst[0])


@pytest.mark.parametrize("mode,seed", [("eager", 0), ("hazard", 1), ("hazard", 2)])
def test_readme_example_gets_no_report(mode, seed):
    assert shmcomm.run(_readme_host, nranks=4, mode=mode, seed=seed, **RUN) == [3.0, 0.0, 1.0, 2.0]


# --- the misses of the pattern checkers, now reported ------------------------------------------

def _pull_kernel(ctx, buf, out, n, fence, early_get):
    """Rank 1 fills its own buffer and signals rank 0, which pulls it with TGET."""
    if ctx.block_idx != 0:
        return
    tile = ctx.tile((1, n), np.float32)
    ready = ctx.signal_base + 9216
    if ctx.rank == 1:
        tile.array[:] = 42
        TSTORE(GlobalTensor(buf, (1, n)), tile)
        pipe_barrier(PIPE_MTE3)
        if fence:
            dsb(DSB_DDR)
        TNOTIFY(Signal(GetRemotePtr(ctx, ready, 0)), 1, NotifyOp.AtomicAdd)
    elif ctx.rank == 0:
        src = GlobalTensor(GetRemotePtr(ctx, buf, 1), (1, n))
        if early_get:  # bug: the TGET is issued before the owner's ready signal is observed
            TGET(GlobalTensor(out, (1, n)), src, tile)
        TWAIT(Signal(ready), 1, WaitCmp.GE)
        if not early_get:
            TGET(GlobalTensor(out, (1, n)), src, tile)
        pipe_barrier(PIPE_ALL)


def _pull_host(rt, fence, early_get):
    buf, out = rt.alloc((64,), np.float32), rt.alloc((64,), np.float32)
    rt.launch(_pull_kernel, blocks=1, args=(buf.ptr, out.ptr, 64, fence, early_get))


def test_owner_drains_without_dsb_then_a_peer_pulls_is_reported():
    err = _race(_pull_host, args=(False, False))
    assert "no dsb(DSB_DDR) came between the drain and that notify" in str(err)


def test_tget_before_the_ready_signal_is_reported_even_when_the_owner_was_early():
    def host(rt):
        buf, out = rt.alloc((64,), np.float32), rt.alloc((64,), np.float32)
        if rt.rank == 1:
            rt.launch(_pull_kernel, blocks=1, args=(buf.ptr, out.ptr, 64, True, True))
            rt.barrier()
        else:
            rt.barrier()  # the owner is done before rank 0 starts: the data comes out right
            rt.launch(_pull_kernel, blocks=1, args=(buf.ptr, out.ptr, 64, True, True))
            assert (np.asarray(out) == 42).all()

    # the owner finished before rank 0 launched: the barrier orders them, so it is no race ...
    shmcomm.run(host, nranks=2, **RUN)
    # ... but without that barrier the early TGET races with the owner's store
    err = _race(_pull_host, args=(True, True))
    assert "TGET (its TLOAD)" in str(err)


def test_a_correct_pull_gets_no_report():
    shmcomm.run(_pull_host, nranks=2, args=(True, False), **RUN)


# --- host writes, launches and rt.barrier ------------------------------------------------------

def _reader_kernel(ctx, buf, n):
    if ctx.block_idx == 0 and ctx.rank == 1:
        t = ctx.tile((1, n), np.float32)
        TGET(GlobalTensor(buf, (1, n)), GlobalTensor(GetRemotePtr(ctx, buf, 0), (1, n)), t)
        pipe_barrier(PIPE_ALL)


def test_host_store_racing_a_peer_kernel_is_reported_and_a_barrier_orders_it():
    def host(rt, barrier):
        buf = rt.alloc((32,), np.float32)
        if rt.rank == 0:
            buf[:16] = 3.0  # the host's store into its own window
        if barrier:
            rt.barrier()
        rt.launch(_reader_kernel, blocks=1, args=(buf.ptr, 32))

    shmcomm.run(host, nranks=2, args=(True,), **RUN)
    err = _race(host, args=(False,))
    assert "host store" in str(err) and "bytes [" in str(err)


def test_exitfirst_stops_the_run_at_the_first_race():
    def host(rt):
        ENTRIES["drain_without_dsb"].host(rt, 64)
        rt.barrier()
        rt.launch(_readme_ring_put, blocks=1, args=(rt.alloc((8,), np.float32).ptr,
                                                    rt.alloc((8,), np.float32).ptr, 8))

    err = _race(host, race_exitfirst=True)
    assert "data race" in str(err)


# --- arguments and the command lines ------------------------------------------------------------

def test_bad_settings_are_argument_errors():
    with pytest.raises(shmcomm.ArgumentError, match="detect_races must be a bool"):
        shmcomm.Config(detect_races="yes")
    with pytest.raises(shmcomm.ArgumentError, match="SHMCOMM_DETECT_RACES"):
        shmcomm.Config.from_kwargs(env={"SHMCOMM_DETECT_RACES": "maybe"})
    assert shmcomm.Config.from_kwargs(env={"SHMCOMM_DETECT_RACES": "1"}).detect_races is True


def k_wide(ctx, buf, racy):
    """Every block writes its own element; block 0 then reads them all after a SYNCALL (or,
    ``racy``, without one)."""
    t = ctx.tile((1, 1), np.float32)
    t.array[0, 0] = ctx.block_idx
    TSTORE(GlobalTensor(buf + ctx.block_idx, (1, 1)), t)
    pipe_barrier(PIPE_ALL)
    if not racy:
        SYNCALL()
    if ctx.block_idx == 0:
        TLOAD(ctx.tile((1, ctx.block_num), np.float32), GlobalTensor(buf, (1, ctx.block_num)))
        pipe_barrier(PIPE_ALL)


@pytest.mark.parametrize("mode", ["eager", "hazard", "schedule"])
def test_a_launch_wider_than_blocks_needs_no_setting(mode):
    """The clocks are sized for the widest launch a run may make: a 60-block launch in a run of
    blocks=4 is judged like any other (no blocks= to guess), clean with its SYNCALL and
    reported without it."""
    def host(rt, racy):
        buf = rt.alloc((64,), np.float32)
        rt.launch(k_wide, blocks=60, args=(buf.ptr, racy))

    assert shmcomm.run(host, nranks=1, blocks=4, mode=mode, seed=1, detect_races=True,
                       args=(False,), timeout=120) == [None]
    with pytest.raises(shmcomm.RaceReport, match="data race"):
        shmcomm.run(host, nranks=1, blocks=4, mode=mode, seed=1, detect_races=True,
                    args=(True,), timeout=120)


def test_the_clocks_cover_the_widest_launch_of_any_run():
    from shmcomm.config import MAX_BLOCK_THREADS, MAX_BLOCKS
    from shmcomm.exec.races.clocks import block_slots

    for nranks in (1, 2, 8, 16, 32, 64):
        widest = min(MAX_BLOCKS, MAX_BLOCK_THREADS // nranks)
        assert block_slots(1, nranks) >= widest
        assert block_slots(1, nranks) * nranks <= max(MAX_BLOCK_THREADS, 8 * nranks)


def test_cli_options():
    py = [sys.executable, "-m", "shmcomm.launch", "--nranks", "2", "--iters", "5"]
    ok = subprocess.run(py + ["--detect-races"], capture_output=True, text=True, timeout=120)
    assert ok.returncode == 0, ok.stderr
    bad = subprocess.run(py + ["--no-detect-races", "--race-exitfirst"], capture_output=True,
                         text=True, timeout=60)
    assert bad.returncode == 2 and "--race-exitfirst needs the race detector" in bad.stderr
    st = subprocess.run([sys.executable, "-m", "shmcomm.stress", "--program", "missing_intra_barrier",
                         "--nranks", "2", "--blocks", "2", "--size", "64", "--mode", "eager",
                         "--runs", "1", "--detect-races", "--no-progress"],
                        capture_output=True, text=True, timeout=120)
    assert st.returncode == 1 and "race 1" in st.stdout and "--detect-races" in st.stdout


# --- a long kernel: what every agent has passed is forgotten, what is unordered is kept ---------

def _long_kernel(ctx, data, lone, rounds):
    """Ranks 0 and 1 ping-pong ``rounds`` times over ``data`` (correct); rank 2 writes ``lone``
    in rank 0's window once, early, and never synchronizes: rank 0 reads it at the very end."""
    base = ctx.signal_base
    tile = ctx.tile((1, 8), np.float32)
    flag, ack = base + 9216, base + 9232
    if ctx.rank == 2:
        tile.array[:] = 2
        TSTORE(GlobalTensor(GetRemotePtr(ctx, lone, 0), (1, 8)), tile)
        pipe_barrier(PIPE_ALL)
        dsb(DSB_DDR)
    elif ctx.rank == 0:
        for k in range(1, rounds + 1):
            tile.array[:] = k
            TSTORE(GlobalTensor(GetRemotePtr(ctx, data, 1), (1, 8)), tile)
            pipe_barrier(PIPE_ALL)
            dsb(DSB_DDR)
            TNOTIFY(Signal(GetRemotePtr(ctx, flag, 1)), 1, NotifyOp.AtomicAdd)
            TWAIT(Signal(ack), k, WaitCmp.GE)
        TLOAD(tile, GlobalTensor(lone, (1, 8)))  # bug: nothing orders rank 2's store before it
        pipe_barrier(PIPE_ALL)
    elif ctx.rank == 1:
        for k in range(1, rounds + 1):
            TWAIT(Signal(flag), k, WaitCmp.GE)
            TLOAD(tile, GlobalTensor(data, (1, 8)))
            pipe_barrier(PIPE_ALL)
            TNOTIFY(Signal(GetRemotePtr(ctx, ack, 0)), 1, NotifyOp.AtomicAdd)


def test_a_long_kernel_forgets_ordered_records_and_keeps_the_race():
    def host(rt):
        data, lone = rt.alloc((8,), np.float32), rt.alloc((8,), np.float32)
        rt.launch(_long_kernel, blocks=1, args=(data.ptr, lone.ptr, 600))

    err = _race(host, nranks=3)
    text = str(err)
    assert "1 data race found" in text and "rank 2 block 0 wrote it" in text, text


def test_shadow_forgets_only_what_every_frontier_holds():
    from shmcomm.exec.races.clocks import Layout
    from shmcomm.exec.races.shadow import WRITE, Access, Shadow

    lay = Layout(2, 1)
    sh = Shadow(lay)
    a, b = lay.block(0, 0), lay.block(1, 0)  # the scalar units of rank 0 and rank 1
    snap_a = np.zeros(lay.size, np.uint32)
    snap_a[a] = 1
    snap_b = np.zeros(lay.size, np.uint32)
    snap_b[b] = 1
    x = Access(("gm", 0), 0, 8, WRITE, a, 1, 1, a, 1, "x.py:1", 0, 0, "S", "store")
    sh.add({1: snap_a}, [x])
    # rank 1's frontier does not hold x yet: kept, and an unordered write of rank 1 races
    for rank in (0, 1):
        sh.advance((rank, None), snap_a if rank == 0 else snap_b)
    assert sh.prune() == 0
    y = Access(("gm", 0), 4, 12, WRITE, b, 1, 2, b, 1, "y.py:2", 1, 0, "S", "store")
    assert sh.add({2: snap_b}, [y]) == 1
    # once every frontier holds both, both are forgotten (and the race's snapshots kept)
    both = np.maximum(snap_a, snap_b)
    sh.advance((0, None), both)
    sh.advance((1, None), both)
    assert sh.prune() == 2 and not sh.buckets[("gm", 0)]
    assert set(sh.snaps) == {1, 2}


def test_host_store_after_the_last_launch_is_judged():
    def host(rt):
        buf = rt.alloc((32,), np.float32)
        rt.barrier()
        if rt.rank == 1:
            rt.launch(_reader_kernel, blocks=1, args=(buf.ptr, 32))
        else:
            buf[:] = 5.0  # bug: rank 1's kernel may be reading it right now

    err = _race(host)
    assert "host store" in str(err)


def test_the_detector_composes_with_schedule_mode():
    assert shmcomm.run(_readme_host, nranks=4, mode="schedule", seed=3, **RUN) == [3.0, 0.0, 1.0, 2.0]
    err = _race(ENTRIES["drain_without_dsb"].host, 2, 1, (64,), mode="schedule", seed=1)
    assert "no dsb(DSB_DDR) came between the drain and that notify" in str(err)
