"""TPUT_ASYNC / TGET_ASYNC as on a2a3 (ports of tests/npu/a2a3/comm/st/testcase/tput_async and
tget_async: root put / get to every peer with one Wait on the last event, the SdmaBaseConfig
cases) and pto-isa's contracts: the empty copy's event, ``Wait() -> bool``, ``valid()``, the
default event, BuildAsyncSession's out-parameter form and its refusals, flat 1-D tensors only,
a longer destination. The DMA engine is not a pipe: in hazard mode a copy lands only at its
``Wait`` / a true ``Test`` (or the kernel's end), never at ``pipe_barrier`` or ``dsb``."""

from __future__ import annotations

import numpy as np
import pytest

import shmcomm
from shmcomm import ArgumentError
from shmcomm.comm import (
    TGET_ASYNC,
    TNOTIFY,
    TPUT_ASYNC,
    TWAIT,
    AsyncEvent,
    AsyncSession,
    BuildAsyncSession,
    DmaEngine,
    GetRemotePtr,
    GlobalTensor,
    NotifyOp,
    SdmaBaseConfig,
    Signal,
    WaitCmp,
)
from shmcomm.core.model import BlockModel
from shmcomm.pipe import DSB_DDR, PIPE_ALL, dsb, pipe_barrier

pytestmark = pytest.mark.timeout(180)
MODES = ["eager", "hazard"]
ROOT = 0


def _session(ctx, ws, config=None, sync_id=0):
    scratch = ctx.tile((1, 256), np.uint8)  # Tile<Vec, uint8_t, 1, UB_ALIGN_SIZE>
    session = AsyncSession()
    assert not session.valid
    ok = BuildAsyncSession(scratch, ws, session, sync_id, config) if config else \
        BuildAsyncSession(scratch, ws, session, sync_id)
    assert ok and session.valid
    return session


def k_root_put(ctx, buf, ws, count, n, offset_elems, config):
    """TPutAsyncKernelImpl / TPutAsyncConfigKernelImpl: the root puts its send buffer into every
    peer's receive buffer and waits on the last event only (quiet: all earlier ones land)."""
    send, recv = buf, buf + count
    if ctx.rank == ROOT:
        session = _session(ctx, ws, config)
        last = AsyncEvent()
        assert not last.valid()
        for peer in range(ctx.nranks):
            if peer != ROOT:
                last = TPUT_ASYNC(GlobalTensor(GetRemotePtr(ctx, recv, peer), (n,)),
                                  GlobalTensor(send, (n,)), session)
        assert last.valid() and last.Wait(session) is True
    pipe_barrier(PIPE_ALL)
    del offset_elems


def k_root_get(ctx, buf, ws, count, n, offset_elems, config):
    """TGetAsync's root get: the root gets every peer's send buffer into its own slots."""
    send, recv = buf, buf + count
    if ctx.rank == ROOT:
        session = _session(ctx, ws, config)
        last = AsyncEvent()
        for peer in range(ctx.nranks):
            if peer != ROOT:
                last = TGET_ASYNC(GlobalTensor(recv + peer * count, (n,)),
                                  GlobalTensor(GetRemotePtr(ctx, send, peer), (n,)), session)
        assert last.Wait(session) is True
    del offset_elems


def _root(kernel, mode, nranks, dtype, count, block_bytes=1 << 20, offset_bytes=0, queue_num=1):
    offset_elems = offset_bytes // np.dtype(dtype).itemsize
    n = count - offset_elems

    def host(rt):
        buf = rt.alloc(((nranks + 1) * count,), dtype)
        ws = rt.alloc((64,), np.uint8)
        buf[:count] = (np.arange(count) + rt.rank * 10000) % (256 if dtype == np.uint8 else 1 << 30)
        rt.barrier()
        config = SdmaBaseConfig(block_bytes, offset_bytes, queue_num)
        rt.launch(kernel, blocks=1, args=(buf.ptr, ws.ptr, count, n, offset_elems, config))
        rt.barrier()
        return np.array(buf)

    out = shmcomm.run(host, nranks=nranks, mode=mode, seed=1, timeout=150)

    def want(r):
        mod = 256 if dtype == np.uint8 else 1 << 30
        return ((np.arange(count) + r * 10000) % mod).astype(dtype)[offset_elems:]
    return out, want, offset_elems


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype,count,nranks", [(np.float32, 256, 4), (np.int32, 4096, 2),
                                                (np.uint8, 512, 3)])
def test_root_put(mode, dtype, count, nranks):
    out, want, off = _root(k_root_put, mode, nranks, dtype, count)
    for r in range(1, nranks):
        assert np.array_equal(out[r][count + off:2 * count], want(ROOT)), r


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("block_bytes,offset,queue_num", [(4096, 0, 2), (4096, 0, 1),
                                                          (2 << 20, 0, 1), (1 << 20, 1024 * 4, 1)])
def test_root_put_with_config(mode, block_bytes, offset, queue_num):
    """Vec_Int32_QueueNum2, SmallBlockBytes, LargeBlockBytes, CommOffset: the session's
    comm_block_offset is added to both addresses."""
    count = 4096 if offset == 0 else 2048
    out, want, off = _root(k_root_put, mode, 2, np.float32, count, block_bytes, offset, queue_num)
    got = out[1][count:2 * count]
    assert np.array_equal(got[off:], want(ROOT))  # src + offset -> dst + offset
    assert not got[:off].any()  # before the offset: untouched


@pytest.mark.parametrize("mode", MODES)
def test_root_get(mode):
    count, nranks = 256, 3
    out, want, _ = _root(k_root_get, mode, nranks, np.float32, count)
    for peer in range(1, nranks):
        assert np.array_equal(out[ROOT][count * (1 + peer):count * (2 + peer)], want(peer)), peer


# --- pto-isa's contracts -------------------------------------------------------------------------

def k_contracts(ctx, ws, a, b, log):
    s = _session(ctx, ws)
    log.append(("session", s.comm_block_offset, s.queue_num, s.commBlockOffset, s.queueNum))
    empty = TPUT_ASYNC(GlobalTensor(b, (0,)), GlobalTensor(a, (0,)), s)
    log.append(("empty", empty.handle, empty.valid(), empty.Wait(s), empty.Test(s)))
    default = AsyncEvent()
    log.append(("default", default.handle, default.valid(), default.Wait(s), default.Test(s)))
    ev = TPUT_ASYNC(GlobalTensor(b, (16,)), GlobalTensor(a, (8,)), s)  # dst longer: allowed
    log.append(("longer", ev.valid(), ev.Wait(s), ev.Test(s)))
    scratch = ctx.tile((1, 256), np.uint8)
    refused = []
    for kw in (dict(sync_id=8), dict(base_config=SdmaBaseConfig(queue_num=0)),
               dict(base_config=SdmaBaseConfig(queue_num=49)),
               dict(base_config=SdmaBaseConfig(queue_num=4), channel_group_idx=12)):
        bad = AsyncSession()
        refused.append((BuildAsyncSession(scratch, ws, bad, **kw), bad.valid))
    bad = AsyncSession()
    refused.append((BuildAsyncSession(scratch, None, bad), bad.valid))
    log.append(("refused", refused))
    errors = []
    for fn in (lambda: BuildAsyncSession(scratch, ws, AsyncSession(), engine=DmaEngine.URMA),
               lambda: BuildAsyncSession(ctx, DmaEngine.RDMA),
               lambda: TPUT_ASYNC(GlobalTensor(b, (2, 8)), GlobalTensor(a, (2, 8)), s),
               lambda: TPUT_ASYNC(GlobalTensor(b, (8,)), GlobalTensor(a, (2, 4), row_stride=8), s),
               lambda: TPUT_ASYNC(GlobalTensor(b, (4,)), GlobalTensor(a, (8,)), s),
               lambda: TPUT_ASYNC(GlobalTensor(b, (8,)), GlobalTensor(a, (8,)), bad)):
        try:
            fn()
        except ArgumentError as exc:
            errors.append(str(exc).split(":")[0])
    log.append(("errors", errors))


@pytest.mark.parametrize("mode", MODES)
def test_pto_isa_contracts(mode):
    def host(rt):
        ws = rt.alloc((64,), np.uint8)
        a, b = rt.alloc((32,), np.float32), rt.alloc((32,), np.float32)
        a[:] = np.arange(32) + 1
        log: list = []
        rt.launch(k_contracts, blocks=1, args=(ws.ptr, a.ptr, b.ptr, log))
        return log, np.array(b)

    log, b = shmcomm.run(host, nranks=1, mode=mode, seed=1, timeout=60)[0]
    assert log[0] == ("session", 0, 1, 0, 1)
    assert log[1] == ("empty", 0, False, True, True)
    assert log[2] == ("default", 0, False, True, True)
    assert log[3] == ("longer", True, True, True)
    assert log[4] == ("refused", [(False, False)] * 5)
    assert log[5] == ("errors", ["BuildAsyncSession", "BuildAsyncSession", "TPUT_ASYNC",
                                 "TPUT_ASYNC", "TPUT_ASYNC", "TPUT_ASYNC"])
    assert np.array_equal(b[:8], np.arange(8) + 1) and not b[8:].any()


# --- the engine is not a pipe ------------------------------------------------------------------

def k_late_wait(ctx, data, flag, ack, n, log):
    """The bug: the producer drains and fences its pipes, then notifies, and waits for the copy
    only after the consumer has read. On a2a3 the SDMA copy may still be in flight."""
    if ctx.rank == 0:
        s = BuildAsyncSession(ctx)
        ev = TPUT_ASYNC(GlobalTensor(GetRemotePtr(ctx, data, 1), (n,)), GlobalTensor(data, (n,)), s)
        pipe_barrier(PIPE_ALL)  # neither completes the DMA engine
        dsb(DSB_DDR)
        TNOTIFY(Signal(GetRemotePtr(ctx, flag, 1)), 1, NotifyOp.AtomicAdd)
        TWAIT(Signal(ack), 1, WaitCmp.GE)
        log.append(ev.Wait(s))
    else:
        TWAIT(Signal(flag), 1, WaitCmp.GE)
        log.append(float(GlobalTensor(data, (n,)).view()[0]))
        TNOTIFY(Signal(GetRemotePtr(ctx, ack, 0)), 1, NotifyOp.AtomicAdd)


def _late_wait(mode):
    def host(rt):
        n = 64
        data = rt.alloc((n,), np.float32)
        data[:] = 7.0 if rt.rank == 0 else -1.0
        flag, ack = rt.signal_region("flag", 1), rt.signal_region("ack", 1)
        log: list = []
        rt.barrier()
        rt.launch(k_late_wait, blocks=1, args=(data.ptr, flag, ack, n, log))
        rt.barrier()
        return log, float(data[0])

    return shmcomm.run(host, nranks=2, mode=mode, seed=1, timeout=90)


def test_a_late_wait_is_caught_in_hazard_mode():
    """Hazard mode keeps the copy in flight past pipe_barrier and dsb: the consumer reads the
    old data, as it may on the NPU (before: pipe_barrier completed it, the bug went unseen)."""
    (log0, _), (log1, after) = _late_wait("hazard")
    assert log0 == [True]
    assert log1 == [-1.0]  # read before the copy landed
    assert after == 7.0  # landed at the Wait


def test_eager_lands_at_once():
    (log0, _), (log1, after) = _late_wait("eager")
    assert log0 == [True] and log1 == [7.0] and after == 7.0


def k_hooks(ctx, a, b, out):
    s = BuildAsyncSession(ctx)
    ev = TPUT_ASYNC(GlobalTensor(b, (8,)), GlobalTensor(a, (8,)), s)
    out.append(len(_SEEN))
    while not ev.Test(s):
        pass
    ev.Wait(s)
    out.extend(_SEEN)


_SEEN: list = []


def test_async_issue_and_complete_hooks(monkeypatch):
    """The seam's async_issue (right after the post) and async_complete (once, at the first true
    Test; the Wait after it reports nothing more)."""
    monkeypatch.setattr(BlockModel, "async_issue", lambda self, ev: _SEEN.append(("issue", ev.handle)))
    monkeypatch.setattr(BlockModel, "async_complete",
                        lambda self, ev: _SEEN.append(("complete", ev.handle)))

    def host(rt):
        a, b = rt.alloc((8,), np.float32), rt.alloc((8,), np.float32)
        out: list = []
        rt.launch(k_hooks, blocks=1, args=(a.ptr, b.ptr, out))
        return out

    out = shmcomm.run(host, nranks=1, mode="hazard", seed=1, timeout=60, hazards="all")[0]
    assert out == [1, ("issue", 1), ("complete", 1)]


def k_urma(ctx, ws, a, b, log):
    scratch = ctx.tile((1, 256), np.uint8)
    s = AsyncSession()
    log.append(BuildAsyncSession(scratch, ws, s, engine=DmaEngine.URMA))
    log.append(s.engine.name)
    peer = (ctx.rank + 1) % ctx.nranks
    ev = TPUT_ASYNC(GlobalTensor(GetRemotePtr(ctx, b, peer), (8,)), GlobalTensor(a, (8,)), s)
    log.append(ev.Wait(s))
    try:
        BuildAsyncSession(scratch, ws, AsyncSession(), engine=DmaEngine.RDMA)
    except ArgumentError as exc:
        log.append(str(exc).split(":")[0])


@pytest.mark.parametrize("mode", MODES)
def test_urma_exists_on_an_a5_target_only(mode):
    def host(rt):
        ws = rt.alloc((64,), np.uint8)
        a, b = rt.alloc((8,), np.float32), rt.alloc((8,), np.float32)
        a[:] = rt.rank + 1
        log: list = []
        rt.launch(k_urma, blocks=1, args=(ws.ptr, a.ptr, b.ptr, log))
        rt.barrier()
        return log, np.array(b)

    res = shmcomm.run(host, nranks=2, mode=mode, target="a5", timeout=120)
    for rank, (log, b) in enumerate(res):
        assert log == [True, "URMA", True, "BuildAsyncSession"]
        assert b.tolist() == [float((rank + 1) % 2 + 1)] * 8  # the previous rank's vector
    with pytest.raises(shmcomm.RunError, match=r"DmaEngine.URMA is an Ascend950 .*target='a5'"):
        shmcomm.run(host, nranks=2, mode=mode, timeout=120)
