"""pto-isa's manual a2a3 kernel ``kernels/manual/a2a3/moe_dispatch``, compiled unchanged from
``moe_dispatch_kernel.cpp`` in a real pto-isa checkout (never part of this project) and driven by
a Python host equivalent to its ``main.cpp``, in every mode. Skipped unless ``SHMCOMM_PTO_ISA``
names the checkout:

    SHMCOMM_PTO_ISA=PATH python -m pytest -m pto_isa tests/native/test_pto_isa_moe.py

main.cpp's CONFIG_* macros are its own: the kernel takes EP, experts per rank and the output
size at run time and fixes the hidden size (128) in its ``_K128`` entry points, so the file is
built once, with no ``-D``. The kernel file keeps its host launchers (``<<<>>>``) and includes
``acl/acl.h`` and its own ``comm_context.h``, which defines ``CommDeviceContext`` as pto-isa's
CPU stub does: shmcomm's build blanks the launchers, serves ``acl/acl.h`` from pto-isa's CPU
back end and lets the kernel's own ``CommDeviceContext`` stand (see the documentation page
"Native kernels"). The vector instructions of the WithSync path (``TADDS``, ``TADD``) and every
``TLOAD`` / ``TSTORE`` are pto-isa's own CPU tile library (the copies queued on shmcomm's pipes
in hazard and schedule mode). In those modes the race detector reports WithSync's "DataAsFlag"
exchange, rightly (docs/pto-parity.md); the test requires exactly that report, then checks the
data with the race accepted.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

import shmcomm
from shmcomm import native

ROOT = os.environ.get("SHMCOMM_PTO_ISA")
MODES = ["eager", "hazard", "schedule"]
pytestmark = [pytest.mark.timeout(600)]

# moe_dispatch_config.h and the kernel's `_K128` entry points
HIDDEN = 128                  # CONFIG_HIDDEN_SIZE, fixed by MoeDispatch*_K128
UB_ALIGN = 32
ROW = HIDDEN + UB_ALIGN       # ShmemRowStride: int8 token, then the float scale padded to 32 bytes
SYNCALL_SOFT_WORKSPACE_INT32 = 16


def padded_expert_num(ep: int, epr: int) -> int:
    return (ep * epr + 7) & ~7


@dataclass(frozen=True)
class Case:
    """main.cpp's parameters: EP ranks, experts per rank, max tokens per source rank, max
    output rows; ``path`` is main.cpp's DISPATCH_MODE. ``blocks`` is EP in main.cpp (0); fewer
    blocks take the kernel's strided path (a block serves several ranks)."""

    path: str
    ep: int = 2
    epr: int = 1
    max_tokens: int = 64
    max_output: int = 512
    seed: int = 42
    blocks: int = 0


def routing(case: Case, me: int):
    """RoutingTables::Generate: the same tables on every rank (one seed), then this rank's
    cumsumMM and preSumBeforeRank. numpy's generator stands in for std::mt19937 (the draw law
    and the per-source bound are main.cpp's)."""
    ep, epr = case.ep, case.epr
    rng = np.random.default_rng(case.seed)
    tpe = np.zeros(ep * ep * epr, np.int32)
    for src in range(ep):
        total = 0
        for dst in range(ep):
            for g in range(epr):
                count = int(rng.integers(0, case.max_tokens // (ep * epr) + 1, endpoint=True))
                count = min(count, case.max_tokens - total)
                tpe[src * ep * epr + dst * epr + g] = count
                total += count
    cumsum = np.zeros(ep * epr, np.int32)
    for g in range(epr):
        s = 0
        for src in range(ep):
            s += tpe[src * ep * epr + me * epr + g]
            cumsum[src * epr + g] = s
    psbr = np.zeros(ep * epr, np.int32)
    for src in range(ep):
        offset = 0
        for dst in range(ep):
            for g in range(epr):
                if dst == me:
                    psbr[src * epr + g] = offset
                offset += tpe[src * ep * epr + dst * epr + g]
    return tpe, cumsum, psbr


def shmem_rows(case: Case, rank: int, rows: int) -> np.ndarray:
    """GenerateShmemData: ``rows`` rows of [int8 token x HIDDEN][float scale, zero padding]."""
    rng = np.random.default_rng(case.seed + rank * 1000)
    out = np.zeros((rows, ROW), np.uint8)
    tokens = rng.integers(-127, 127, size=(rows, HIDDEN), endpoint=True).astype(np.int8)
    out[:, :HIDDEN] = tokens.view(np.uint8)
    scales = rng.uniform(0.001, 1.0, size=rows).astype(np.float32)
    out[:, HIDDEN:HIDDEN + 4] = scales.view(np.uint8).reshape(rows, 4)
    return out


def golden(case: Case, me: int):
    """ComputeGolden: the compact tokens and the 32-byte scale rows this rank must receive."""
    ep, epr = case.ep, case.epr
    tpe, cumsum, psbr = routing(case, me)
    shmem = [shmem_rows(case, r, int(tpe[r * ep * epr:(r + 1) * ep * epr].sum())) for r in range(ep)]
    tokens = np.zeros((case.max_output, HIDDEN), np.uint8)
    scales = np.zeros((case.max_output, UB_ALIGN), np.uint8)
    prev_sum = [int(psbr[r * epr]) for r in range(ep)]
    prev_group = 0
    for g in range(epr):
        current = int(cumsum[(ep - 1) * epr + g])
        for src in range(ep):
            start = prev_group + (int(cumsum[(src - 1) * epr + g]) if src else 0)
            if start >= case.max_output:
                continue
            rows = min(int(tpe[src * ep * epr + me * epr + g]), case.max_output - start)
            if rows == 0:
                continue
            block = shmem[src][prev_sum[src]:prev_sum[src] + rows]
            prev_sum[src] += rows
            tokens[start:start + rows] = block[:, :HIDDEN]
            scales[start:start + rows] = block[:, HIDDEN:]
        prev_group += current
    return tokens, scales


def moe_host(rt, lib, case: Case):
    """RunMoeDispatch: every buffer main.cpp allocates, one launch on EP blocks (or
    ``case.blocks``), then main.cpp's check (the first min(totalDstTokens, maxOutputSize) rows
    of tokens and scales) and, beyond it, that nothing else of either output was written."""
    ep, epr, me = case.ep, case.epr, rt.rank
    assert rt.nranks == ep
    tpe, cumsum, psbr = routing(case, me)
    mine = shmem_rows(case, me, int(tpe[me * ep * epr:(me + 1) * ep * epr].sum()))
    pad = padded_expert_num(ep, epr)
    # the window allocation (WindowAlloc): token rows, then (WithSync) the TPE exchange area, at
    # the same offset on every rank
    uniform = case.max_tokens * ROW
    tpe_area = ep * pad * 4 if case.path == "sync" else 0
    shmem = rt.alloc((uniform + tpe_area,), np.uint8)
    shmem[:] = 0
    shmem[:mine.size] = mine.reshape(-1)
    gm_a = rt.alloc((case.max_output * HIDDEN,), np.int8)
    gm_scale = rt.alloc((case.max_output * UB_ALIGN // 4,), np.float32)
    sync_ws = rt.alloc((SYNCALL_SOFT_WORKSPACE_INT32,), np.int32)
    for a in (gm_a, gm_scale, sync_ws):
        a[:] = 0
    if case.path == "sync":
        routing_ws = rt.alloc((ep * pad + ep * epr + ep * pad,), np.int32)  # SyncWorkspaceBytes
        routing_ws[:] = 0
        row = np.zeros(pad, np.int32)
        row[:ep * epr] = tpe[me * ep * epr:(me + 1) * ep * epr]        # this rank's localTokenPerExpert
        shmem[uniform + me * pad * 4:uniform + (me + 1) * pad * 4] = row.view(np.uint8)
    else:
        d_cumsum, d_tpe, d_psbr = (rt.alloc(x.shape, np.int32) for x in (cumsum, tpe, psbr))
        d_cumsum[:], d_tpe[:], d_psbr[:] = cumsum, tpe, psbr
    rt.barrier()                                                       # HcclHostBarrier
    ctx, n, blocks = rt.device_context, case.max_output, case.blocks or ep
    if case.path == "direct":
        rt.launch(lib.MoeDispatchDirect_K128, blocks=blocks,
                  args=(gm_a.ptr, gm_scale.ptr, d_cumsum.ptr, d_tpe.ptr, d_psbr.ptr, shmem.ptr, ctx,
                        sync_ws.ptr, ep, epr, n, 0))
    elif case.path == "viagm":
        temp = rt.alloc((n * ROW,), np.int8)
        temp[:] = 0
        rt.launch(lib.MoeDispatchViaGM_K128, blocks=blocks,
                  args=(gm_a.ptr, gm_scale.ptr, temp.ptr, d_cumsum.ptr, d_tpe.ptr, d_psbr.ptr, shmem.ptr, ctx,
                        sync_ws.ptr, ep, epr, n, 0))
    else:
        rt.launch(lib.MoeDispatchWithSync_K128, blocks=blocks,
                  args=(gm_a.ptr, gm_scale.ptr, shmem.ptr, ctx, routing_ws.ptr, sync_ws.ptr, ep, epr, n, 0,
                        uniform))
    rt.barrier()
    want_tokens, want_scales = golden(case, me)
    got_tokens = gm_a[:].view(np.uint8).reshape(n, HIDDEN)
    got_scales = gm_scale[:].view(np.uint8).reshape(n, UB_ALIGN)
    checked = min(int(sum(tpe[src * ep * epr + me * epr + g] for src in range(ep) for g in range(epr))), n)
    bad = []
    for name, got, want in (("token", got_tokens, want_tokens), ("scale", got_scales, want_scales)):
        rows = np.nonzero((got != want).any(axis=1))[0]
        if rows.size:
            bad.append(f"{name} mismatch at rows {rows[:8].tolist()} (checked rows: {checked})")
    return bad, checked


CASES = {
    # main.cpp's defaults (run.sh --ep 2), every path
    "direct": Case("direct"),
    "viagm": Case("viagm"),
    "sync": Case("sync"),
    # two experts per rank and up to 17 rows per (source, expert): several MOVE_NUM chunks, the
    # cross-rank ping-pong and the group loop; a max output of 40 rows cuts the last groups off
    "direct_2experts_clipped": Case("direct", epr=2, max_output=40, seed=7),
    "sync_2experts": Case("sync", epr=2, seed=7),
    # run.sh --ep 4: four ranks of four blocks
    "direct_4ranks": Case("direct", ep=4, seed=3),
    "viagm_4ranks": Case("viagm", ep=4, seed=3),
    "sync_4ranks": Case("sync", ep=4, seed=3),
    # four ranks on two blocks: each block serves two ranks (dstEpIdx += coreNum)
    "direct_4ranks_2blocks": Case("direct", ep=4, seed=3, blocks=2),
    "sync_4ranks_2blocks": Case("sync", ep=4, seed=3, blocks=2),
}


@pytest.fixture(scope="module")
def moe():
    assert ROOT is not None
    kernel = Path(ROOT) / "kernels" / "manual" / "a2a3" / "moe_dispatch" / "moe_dispatch_kernel.cpp"
    return native.load(kernel, pto_isa=True)


def test_the_host_generates_what_main_cpp_checks():
    """The host's own tables and golden rows (no checkout needed): bounded per source rank,
    clipped at the output size, zero beyond."""
    case = Case("direct", epr=2, max_output=40, seed=7)
    tpe, _, _ = routing(case, 0)
    assert all(tpe[s * 4:(s + 1) * 4].sum() <= case.max_tokens for s in range(2))
    tokens, scales = golden(case, 0)
    total = int(sum(tpe[s * 4 + g] for s in range(2) for g in range(2)))  # rows routed to rank 0
    assert total > 40  # the case clips
    assert (tokens[min(total, 40):] == 0).all() and (scales[min(total, 40):] == 0).all()
    assert (scales[:min(total, 40), 4:] == 0).all()


def _line_of(text: str, code: str) -> int:
    (line,) = [i for i, ln in enumerate(text.splitlines(), 1) if ln.strip() == code]
    return line


def data_as_flag(kernel) -> tuple[int, int]:
    """WithSync's "DataAsFlag" exchange: the lines of phase A's TSTORE of a rank's token counts
    into a peer's window and of phase B.1's TLOAD that reads them after a TWAIT on their first
    word (docs/pto-parity.md: a TSTORE promises no order among its bytes)."""
    text = kernel.source.read_text()
    return _line_of(text, "TSTORE(remoteDstG, tpeTile);"), _line_of(text, "TLOAD(tpeRowTile, srcG);")


_RACE = re.compile(r"data race on rank \d+'s window, bytes \[\d+, \d+\): "
                   r"rank \d+ block \d+ wrote it \(TSTORE on MTE3\) at (\S+):(\d+); "
                   r"rank \d+ block \d+ read it \(TLOAD on MTE2\) at (\S+):(\d+);")


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.pto_isa
@pytest.mark.skipif(not ROOT, reason="set SHMCOMM_PTO_ISA to a pto-isa checkout to run these")
@pytest.mark.filterwarnings("ignore:.*races? suppressed")
def test_moe_dispatch(moe, name, mode):
    case = CASES[name]
    extra = {}
    if case.path == "sync" and mode != "eager":
        # the race detector (hazard and schedule mode) reports the DataAsFlag race, and nothing
        # else; accepted, the run's data is then checked as main.cpp checks it
        store, load = data_as_flag(moe)
        with pytest.raises(shmcomm.RaceReport) as err:
            shmcomm.run(moe_host, nranks=case.ep, mode=mode, seed=0, args=(moe, case))
        msg = str(err.value)
        found = _RACE.findall(msg)
        assert found and msg.count("data race on") == len(found), msg
        assert {(int(a), int(b)) for _, a, _, b in found} == {(store, load)}, msg
        assert "a copy publishes nothing" in msg or "observed no signal" in msg, msg
        name_ = Path(moe.source).name
        extra = {"race_suppressions": f"race:{name_}:{store} {name_}:{load}"}
    res = shmcomm.run(moe_host, nranks=case.ep, mode=mode, seed=0, args=(moe, case), **extra)
    for rank, (bad, checked) in enumerate(res):
        assert checked > 0, f"rank {rank}: the case routes no rows to it"
        assert not bad, f"rank {rank}: {bad}"
