"""The signal layout: one table of the library's regions, the users' free range, rt.signal_region,
and the overlap errors that name both parties (user signal vs library region, library vs library).
"""

from __future__ import annotations

import re

import numpy as np
import pytest

import shmcomm
from shmcomm import ArgumentError, RunError, SignalOverlapError
from shmcomm.comm import TNOTIFY, TWAIT, GetRemotePtr, NotifyOp, Signal, Signal2D, WaitCmp
from shmcomm.core.regions import SignalRegions
from shmcomm.kernels import CentralBarrier, DeviceBarrier, EpochBarrier, all_reduce, layout
from shmcomm.kernels.layout import (
    CENTRAL_BARRIER,
    COLLECTIVES,
    EPOCH_BARRIER,
    EPOCH_BARRIER_OFFSET,
    EPOCH_INTRA,
    REGIONS,
    USER_FREE_START,
)
from shmcomm.stress.catalogue import _common as catalogue_slots

DEFAULT_WORDS = shmcomm.Config().signal_bytes // 4
FIX = "rt.signal_region(name, words)"


def _first_line(info) -> str:
    return str(info.value).splitlines()[0]


# --- the table ---------------------------------------------------------------------------------

def test_regions_do_not_overlap_and_fit_the_default_signal_matrix():
    spans = sorted((r.first, r.end, r.name) for r in REGIONS)
    for (_, end, name), (start, _, nxt) in zip(spans, spans[1:], strict=False):
        assert end <= start, f"{name} overlaps {nxt}"
    for r in REGIONS:
        assert r.words > 0 and r.first % 16 == 0, f"{r.name} must start on a 64-byte line"
        assert r.end <= DEFAULT_WORDS, f"{r.name} does not fit the default signal matrix"
        assert r.kernel and r.holds
    assert len({r.name for r in REGIONS}) == len(REGIONS)


def test_free_range_follows_every_region_aligned_and_nonempty_by_default():
    assert USER_FREE_START >= max(r.end for r in REGIONS)
    assert USER_FREE_START % 16 == 0  # 64-byte aligned
    start, end = layout.free_range(shmcomm.Config().signal_bytes)
    assert (start, end) == (USER_FREE_START, DEFAULT_WORDS) and end - start >= 4096


def test_docstring_table_matches_the_regions():
    doc = layout.__doc__
    for r in REGIONS:
        assert re.search(rf"{r.name}\s+\[{r.first}, {r.end}\)", doc), f"docstring row of {r.name}"
    assert f"[{USER_FREE_START}, end)" in doc


def test_catalogue_slots_live_in_the_free_range():
    assert catalogue_slots.CAT_BASE >= USER_FREE_START
    assert catalogue_slots.RING_SLOT + 16 <= DEFAULT_WORDS


# --- the registry alone (one process, no run) -------------------------------------------------

def test_registry_merges_one_kernels_claims_and_refuses_another_kernels():
    r = SignalRegions(1024)
    r.free_start = 512
    a = r.claim("seed_barrier", "DeviceBarrier", 0, 66, "DeviceBarrier")
    assert r.claim("seed_barrier", "DeviceBarrier", 0, 66, "DeviceBarrier") is a  # idempotent
    r.claim("seed_barrier", "DeviceBarrier", 0, 67, "DeviceBarrier")  # next phase: merges
    assert r.claims() == [("seed_barrier", 0, 67)]
    with pytest.raises(SignalOverlapError) as info:
        r.claim("epoch_barrier", "EpochBarrier", 64, 160, "EpochBarrier")
    msg = str(info.value)
    assert msg.startswith("EpochBarrier: ") and "[64, 160)" in msg and "[0, 67)" in msg
    assert "'seed_barrier' of DeviceBarrier" in msg and "[512, 1024)" in msg and FIX in msg


def test_registry_user_words_against_claims_both_orders():
    r = SignalRegions(1024)
    r.note_user("Signal", 0, ((300, 301),))
    want = r"^EpochBarrier: .*\[256, 352\).*user signal words \[300, 301\)"
    with pytest.raises(SignalOverlapError, match=want):
        r.claim("epoch_barrier", "EpochBarrier", 256, 352, "EpochBarrier")
    r.claim("central_barrier", "CentralBarrier", 512, 544, "CentralBarrier")
    with pytest.raises(SignalOverlapError, match=r"^Signal2D: user signal words \[500, 520\)"):
        r.note_user("Signal2D", 1, ((500, 502), (518, 520)))
    r.note_user("Signal2D", 1, ((600, 602), (618, 620)))  # clear of every claim


def test_registry_reserve_aligns_names_and_runs_out_clearly():
    r = SignalRegions(1024)
    assert r.reserve("a", 3, 1000) == 1008  # 64-byte aligned
    with pytest.raises(ArgumentError, match=r"'a' is already taken.*\[1008, 1011\)"):
        r.reserve("a", 1, 1000)
    with pytest.raises(ArgumentError, match=r"'b' needs words=20 but only 0 words are left"):
        r.reserve("b", 20, 1000)
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ArgumentError, match="words must be an int >= 1"):
            r.reserve("c", bad, 1000)
    with pytest.raises(ArgumentError, match="name must be a non-empty str"):
        r.reserve("", 1, 1000)


# --- user kernels against library regions in a run -------------------------------------------

def _user_on_word(ctx, word):
    """A user kernel that notifies word ``word`` of the next rank and waits for its own."""
    nxt = (ctx.rank + 1) % ctx.nranks
    if ctx.block_idx == 0:
        TNOTIFY(Signal(GetRemotePtr(ctx, ctx.signal_base + word, nxt)), 1, NotifyOp.AtomicAdd)
        TWAIT(Signal(ctx.signal_base + word), 1, WaitCmp.GE)


def _epoch(ctx):
    EpochBarrier(ctx)


def _run_fails(host, **kw) -> str:
    with pytest.raises(RunError) as info:
        shmcomm.run(host, nranks=2, blocks=2, **kw)
    assert "SignalOverlapError" in str(info.value)
    return _first_line(info).split("SignalOverlapError: ", 1)[1]


@pytest.mark.timeout(60)
def test_user_signal_then_epoch_barrier_fails_naming_both():
    def host(rt):
        rt.launch(_user_on_word, args=(EPOCH_BARRIER_OFFSET + EPOCH_INTRA,))  # word 320
        rt.launch(_epoch)

    msg = _run_fails(host)
    assert msg.startswith("EpochBarrier: the signal region 'epoch_barrier' of EpochBarrier, "
                          "words [256, 352), overlaps user signal words [320, 321)")
    assert f"words [{USER_FREE_START}, {DEFAULT_WORDS})" in msg and FIX in msg


@pytest.mark.timeout(60)
def test_epoch_barrier_then_user_signal_fails_naming_both():
    def host(rt):
        rt.launch(_epoch)
        rt.launch(_user_on_word, args=(EPOCH_BARRIER_OFFSET + EPOCH_INTRA,))

    msg = _run_fails(host)
    assert re.match(r"Signal: user signal words \[320, 321\) of rank \d's window overlap the signal "
                    r"region 'epoch_barrier' of EpochBarrier, words \[256, 352\)", msg), msg
    assert FIX in msg


@pytest.mark.timeout(60)
def test_epoch_barrier_then_cached_word_in_hazard_mode_fails_the_same_way():
    # the library's Signals are not in the shared cache: Signal(ptr) on its word takes the
    # checked slow path, in hazard mode too (no "missing reset" blamed)
    def kernel(ctx):
        EpochBarrier(ctx)
        assert (ctx.signal_base + EPOCH_BARRIER_OFFSET + EPOCH_INTRA)._sig is None
        Signal(ctx.signal_base + EPOCH_BARRIER_OFFSET + EPOCH_INTRA)

    msg = _run_fails(lambda rt: rt.launch(kernel), mode="hazard", seed=3)
    assert msg.startswith("Signal: user signal words [320, 321)") and "'epoch_barrier'" in msg


@pytest.mark.timeout(60)
def test_user_signal2d_inside_central_barrier_region_fails():
    def kernel(ctx):
        CentralBarrier(ctx)
        Signal2D(ctx.signal_base + CENTRAL_BARRIER.first - 2, 2, 4, row_stride=8)

    msg = _run_fails(lambda rt: rt.launch(kernel))
    assert msg.startswith(f"Signal2D: user signal words [{CENTRAL_BARRIER.first - 2}, "
                          f"{CENTRAL_BARRIER.first + 10})")
    c = CENTRAL_BARRIER
    assert f"'central_barrier' of CentralBarrier, words [{c.first}, {c.end})" in msg


@pytest.mark.timeout(60)
def test_user_signal_then_rt_all_reduce_fails_naming_both():
    def host(rt):
        x = rt.alloc((64,), np.float32)
        rt.launch(_user_on_word, args=(2000,))
        rt.all_reduce(x)

    msg = _run_fails(host)
    assert msg.startswith(f"all_reduce: the signal region 'collectives' of {COLLECTIVES.kernel}, "
                          f"words [{COLLECTIVES.first}, {COLLECTIVES.end}), overlaps user signal "
                          "words [2000, 2001)")
    assert FIX in msg


@pytest.mark.timeout(60)
def test_rt_all_reduce_then_user_signal_fails_naming_both():
    def host(rt):
        x = rt.alloc((64,), np.float32)
        rt.all_reduce(x)
        rt.launch(_user_on_word, args=(2000,))

    msg = _run_fails(host)
    assert re.match(rf"Signal: user signal words \[2000, 2001\) of rank \d's window overlap the "
                    rf"signal region 'collectives' of .*, words \[{COLLECTIVES.first}, "
                    rf"{COLLECTIVES.end}\)", msg), msg


def _seed_at(ctx, word):
    DeviceBarrier(ctx, ctx.signal_base + word, 0, ctx.rank, ctx.nranks, ctx.block_idx, ctx.block_num)


@pytest.mark.timeout(60)
def test_device_barrier_with_custom_base_in_the_collectives_region_fails_both_orders():
    def seed_first(rt):
        x = rt.alloc((64,), np.float32)
        rt.launch(_seed_at, args=(2048,))
        rt.all_reduce(x)

    def collectives_first(rt):
        x = rt.alloc((64,), np.float32)
        rt.all_reduce(x)
        rt.launch(_seed_at, args=(2048,))

    msg = _run_fails(seed_first)
    assert msg.startswith(f"all_reduce: the signal region 'collectives' of {COLLECTIVES.kernel}, "
                          f"words [{COLLECTIVES.first}, {COLLECTIVES.end}), overlaps the signal region "
                          "'seed_barrier' of DeviceBarrier at a custom signal_base, words [2048, 2114)")
    assert "give DeviceBarrier a signal_base of its own" in msg and FIX in msg
    msg = _run_fails(collectives_first)
    assert msg.startswith("DeviceBarrier: the signal region 'seed_barrier' of DeviceBarrier at a "
                          "custom signal_base, words [2048, 2114), overlaps the signal region "
                          "'collectives'")
    assert "give DeviceBarrier a signal_base of its own" in msg


@pytest.mark.timeout(60)
def test_collectives_need_their_region_in_the_signal_matrix():
    def host(rt):
        rt.all_reduce(rt.alloc((8,), np.float32))

    with pytest.raises(RunError) as info:
        shmcomm.run(host, nranks=2, blocks=1, signal_bytes=4096)
    assert f"all_reduce: needs signal_bytes >= {4 * COLLECTIVES.end}" in _first_line(info)


# --- the free range beside every library kernel ------------------------------------------------

def _everything(ctx, x, n, ring, raw_word):
    me, nranks = ctx.rank, ctx.nranks
    nxt = (me + 1) % nranks
    DeviceBarrier(ctx, ctx.signal_base, 0, me, nranks, ctx.block_idx, ctx.block_num)
    EpochBarrier(ctx)
    CentralBarrier(ctx)
    all_reduce(ctx, x, x, n)
    b = ctx.block_idx
    # user signals: a named region, and a raw word of the free range
    TNOTIFY(Signal(GetRemotePtr(ctx, ring + b, nxt)), 1, NotifyOp.AtomicAdd)
    TWAIT(Signal(ring + b), 1, WaitCmp.GE)
    TNOTIFY(Signal(GetRemotePtr(ctx, ctx.signal_base + raw_word + b, nxt)), 1, NotifyOp.AtomicAdd)
    TWAIT(Signal2D(ctx.signal_base + raw_word, 1, ctx.block_num), 1, WaitCmp.GE)
    EpochBarrier(ctx)


@pytest.mark.timeout(90)
@pytest.mark.parametrize("mode", ["eager", "hazard"])
def test_user_signals_in_the_free_range_run_beside_every_library_kernel(mode):
    n = 100

    def host(rt):
        x = rt.alloc((n,), np.float32)
        x[:] = rt.rank + 1
        ring = rt.signal_region("ring", 16)
        raw = DEFAULT_WORDS - 64  # a raw word near the end: free, as no library kernel uses it
        rt.reset_signals()
        rt.launch(_everything, blocks=2, args=(x.ptr, n, ring, raw))
        rt.all_reduce(x)
        return x.copy(), ring.offset // 4, rt.windows.regions.claims()

    nranks = 3
    results = shmcomm.run(host, nranks=nranks, blocks=2, mode=mode, seed=5)
    total = sum(range(1, nranks + 1))
    for x, ring_word, claims in results:
        assert (x == total * nranks).all()  # two AllReduces of the ranks' values
        assert ring_word == USER_FREE_START
        assert [c[0] for c in claims] == ["seed_barrier", "epoch_barrier", "central_barrier",
                                          "collectives"]


# --- rt.signal_region --------------------------------------------------------------------------

def _ring_kernel(ctx, a, b):
    me, nxt = ctx.rank, (ctx.rank + 1) % ctx.nranks
    blk = ctx.block_idx
    TNOTIFY(Signal(GetRemotePtr(ctx, a + blk, nxt)), me + 1, NotifyOp.AtomicAdd)
    TNOTIFY(Signal(GetRemotePtr(ctx, b + blk, nxt)), 10 * (me + 1), NotifyOp.AtomicAdd)
    EpochBarrier(ctx)


@pytest.mark.timeout(60)
def test_signal_region_gives_disjoint_zeroed_aligned_regions_the_same_on_every_rank():
    def host(rt):
        rt.signals[USER_FREE_START:] = 7  # garbage a previous use left: the regions come zeroed
        a = rt.signal_region("a", 3)
        b = rt.signal_region("b", 40)
        c = rt.signal_region("c", 1)
        spans = [(p.offset // 4, p.offset // 4 + w) for p, w in ((a, 3), (b, 40), (c, 1))]
        zero = all(not rt.signals[s:e].any() for s, e in spans)
        rt.barrier()  # no peer notifies into my regions before I looked
        rt.launch(_ring_kernel, blocks=2, args=(a, b))
        got = tuple(rt.signals[s:s + 2].tolist() for s, _ in spans[:2])
        return spans, [p.offset % 64 for p in (a, b, c)], zero, got, rt.windows.regions.named()

    nranks = 3
    results = shmcomm.run(host, nranks=nranks, blocks=2)
    spans0 = results[0][0]
    for rank, (spans, align, zero, got, named) in enumerate(results):
        assert spans == spans0  # the same offsets on every rank
        assert spans[0][0] == USER_FREE_START and align == [0, 0, 0]
        for (_, e), (s, _) in zip(spans, spans[1:], strict=False):
            assert e <= s  # disjoint, in call order
        assert zero
        prev = (rank - 1) % nranks
        assert got == ([prev + 1] * 2, [10 * (prev + 1)] * 2)
        assert named == {"a": spans[0], "b": spans[1], "c": spans[2]}


@pytest.mark.timeout(60)
def test_signal_region_errors_when_exhausted_or_named_twice():
    free = DEFAULT_WORDS - USER_FREE_START

    def exhausted(rt):
        rt.signal_region("big", free - 16)
        rt.signal_region("more", 32)

    with pytest.raises(RunError) as info:
        shmcomm.run(exhausted, nranks=2)
    assert ("ArgumentError: rt.signal_region: 'more' needs words=32 but only 16 words are left of "
            f"the free range [{USER_FREE_START}, {DEFAULT_WORDS}) (signal_bytes=65536); raise "
            "signal_bytes") in _first_line(info)

    def twice(rt):
        rt.signal_region("flags", 4)
        rt.signal_region("flags", 4)

    with pytest.raises(RunError) as info:
        shmcomm.run(twice, nranks=2)
    assert (f"rt.signal_region: the name 'flags' is already taken in this run (words "
            f"[{USER_FREE_START}, {USER_FREE_START + 4}))") in _first_line(info)


@pytest.mark.timeout(60)
def test_signal_region_refuses_ranks_that_ask_differently():
    def host(rt):
        rt.signal_region("flags", 4 if rt.rank == 0 else 8)

    with pytest.raises(RunError) as info:
        shmcomm.run(host, nranks=3)
    assert "rt.signal_region: signal regions are not symmetric (ranks [1, 2] differ from rank 0" \
        in str(info.value)


@pytest.mark.timeout(60)
def test_signal_region_grows_with_signal_bytes_and_is_not_claimable_twice():
    # a bigger matrix has a bigger free range; a library barrier may live in a named region
    def host(rt):
        base = rt.signal_region("epoch", layout.EPOCH_BARRIER_WORDS)
        big = rt.signal_region("big", 20000)
        rt.launch(lambda ctx: [EpochBarrier(ctx, base) for _ in range(3)], blocks=2)
        return big.offset // 4 + 20000 <= rt.signals.size, rt.windows.regions.claims()

    for fits, claims in shmcomm.run(host, nranks=2, signal_bytes=256 * 1024):
        assert fits
        assert claims == [("epoch_barrier", USER_FREE_START, USER_FREE_START + EPOCH_BARRIER.words)]


def _pool_user_word(rt):
    rt.launch(_user_on_word, args=(EPOCH_BARRIER_OFFSET + EPOCH_INTRA,))


def _pool_epoch(rt):
    rt.launch(_epoch)


def _pool_epoch_then_user_word(rt):
    rt.launch(_epoch)
    rt.launch(_user_on_word, args=(EPOCH_BARRIER_OFFSET + EPOCH_INTRA,))


@pytest.mark.timeout(120)
def test_a_pool_keeps_its_signals_but_each_run_notes_its_own_words():
    """A pool's rank keeps the Signals a run made, for its next runs; what a run notes of the
    words is its own: a word a user's Signal took in one run is free for a library kernel in
    the next, and taken again (overlap error) only where the next run makes that Signal."""
    with shmcomm.Pool(nranks=2) as pool:
        pool.run(_pool_user_word, blocks=2)  # a user's Signal on the barrier's word 320
        pool.run(_pool_epoch, blocks=2)  # the library's claim, in a run without that Signal
        with pytest.raises(RunError) as info:
            pool.run(_pool_epoch_then_user_word, blocks=2)
        msg = _first_line(info).split("SignalOverlapError: ", 1)[1]
        assert msg.startswith("Signal: user signal words [320, 321)") and "'epoch_barrier'" in msg
        pool.run(_pool_user_word, blocks=2)
