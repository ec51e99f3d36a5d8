"""Bad input, fuzzed: every public entry point answers garbage with a shmcomm error, nothing else.

The property, for every generated input: the call either works, or raises a
:class:`~shmcomm.ShmcommError` whose message names the argument and says what is allowed. Any
other exception (TypeError from numpy, ctypes errors ...) fails the test with the input that
caused it; a segfault shows up as a crashed rank, a hang as a timeout.

Kernel-API inputs are fuzzed inside ONE run, in a block thread of rank 0 (hypothesis runs there,
derandomized, no example database), so a crash is a crash report rather than a dead pytest.
Each fuzz body counts the inputs it tried; ``test_fuzz_counts`` prints the totals.
"""

from __future__ import annotations

import contextlib
import io
import re
import sys
import textwrap
from collections import Counter

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import shmcomm
from shmcomm import ArgumentError, Config, ShmcommError
from shmcomm import config as config_mod
from shmcomm.comm import (
    TGET,
    TNOTIFY,
    TPUT,
    TTEST,
    TWAIT,
    AtomicType,
    GetRemotePtr,
    GlobalTensor,
    NotifyOp,
    Signal,
    Signal2D,
    WaitCmp,
)
from shmcomm.pipe import TLOAD, TSTORE, dcci, dsb, pipe_barrier, set_flag, wait_flag

pytestmark = pytest.mark.timeout(120)

FUZZ = settings(derandomize=True, database=None, deadline=None, print_blob=False,
                suppress_health_check=list(HealthCheck))


def fuzz(n: int) -> settings:
    return settings(FUZZ, max_examples=n)


N = 150  # examples per fuzz body (derandomized: the same inputs every run)

# says what is allowed: a range, a set of choices, a bound
ALLOWED = re.compile(r"\[|must|one of|outside|differs|does not fit|expected|>=|at least|exceed|"
                     r"not symmetric|unknown|no set_flag|only \d+ .*left| but ")

SPECIAL_INTS = [0, -1, 1, 2, 3, 7, 8, 63, 64, 65, 255, 256, 2**31 - 1, 2**31, -(2**31) - 1,
                2**32, 2**63 - 1, 2**63, 2**64, -(2**63), 10**30]
numpy_ints = st.one_of(
    st.integers(-(2**31), 2**31 - 1).map(np.int32),
    st.integers(-(2**63), 2**63 - 1).map(np.int64),
    st.integers(0, 255).map(np.uint8),
    st.integers(0, 2**64 - 1).map(np.uint64),
)
ints = st.one_of(st.sampled_from(SPECIAL_INTS), st.integers(-(2**70), 2**70), st.integers(-3, 70))
junk = st.one_of(
    ints, numpy_ints, st.booleans(), st.none(), st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=4), st.binary(max_size=3), st.lists(st.integers(-2, 4), max_size=3),
    st.tuples(st.integers(-2, 4)), st.just(object()), st.just(np.float32(1.5)),
    st.just(np.array([1, 2])), st.just(np.array(3)), st.just(1 + 2j),
)
small_or_junk = st.one_of(st.integers(-2, 70), junk)
shapes = st.one_of(
    st.lists(st.one_of(st.integers(-2, 40), st.sampled_from([0, 2**31, 2**62]), numpy_ints,
                       st.floats(-1, 5), st.booleans()), min_size=0, max_size=7).map(tuple),
    junk,
)
dtypes = st.one_of(
    st.sampled_from([np.float32, np.float16, np.int32, np.int16, np.int8, np.uint8, np.int64,
                     np.float64, "float32", "int32", "<i4", ">i4", "complex64", "U4", "O", "V8",
                     bool, object, None, "nonsense", 3, np.dtype([("a", "i4")])]),
    junk,
)
enum_values = st.one_of(
    st.sampled_from(list(NotifyOp) + list(WaitCmp) + list(AtomicType)), st.integers(-3, 10), junk)


def clean(counts: Counter, key: str, call, names: str) -> None:
    """Run ``call``: it must succeed or raise a ShmcommError naming ``names`` and what is allowed."""
    counts[key] += 1
    try:
        call()
    except ShmcommError as exc:
        msg = str(exc)
        if isinstance(exc, ArgumentError) or not isinstance(exc, (shmcomm.WaitTimeout,)):
            assert re.search(names, msg), f"{key}: the message does not name {names!r}: {msg!r}"
            assert ALLOWED.search(msg), f"{key}: the message does not say what is allowed: {msg!r}"
    except Exception as exc:  # anything else is a bug: report it with the input (hypothesis)
        raise AssertionError(f"{key}: {type(exc).__name__} instead of a shmcomm error: {exc}") from exc


# --- Config, shmcomm.run, environment: in the test process (nothing starts) ---------------------

FIELDS = sorted(config_mod._FIELDS)


@fuzz(400)
@given(field=st.sampled_from(FIELDS + ["window_bytes", "bogus_key", "nrank"]), value=junk)
def test_fuzz_config_and_run_settings(field, value):
    key = {"window_bytes": "heap_bytes"}.get(field, field)
    try:
        Config.from_kwargs(**{key: value})
    except ArgumentError as exc:
        msg = str(exc)
        assert key in msg and ALLOWED.search(msg), msg
        # run() rejects the same input before creating any process or segment
        with pytest.raises(ArgumentError):
            shmcomm.run(lambda rt: None, **{field: value})
    except Exception as exc:
        raise AssertionError(f"Config({key}={value!r}): {type(exc).__name__}: {exc}") from exc
    else:
        if value is not None and key in config_mod._FIELDS:
            spec = config_mod._FIELDS[key]
            if spec[0] is str:
                assert isinstance(value, str) and (spec[1] is None or value in spec[1])
            elif spec[0] is bool:
                assert isinstance(value, bool)
            else:
                assert spec[1] <= value <= spec[2]


@fuzz(200)
@given(field=st.sampled_from(FIELDS), raw=st.one_of(
    st.text(max_size=8), st.sampled_from(["0", "-1", "65", "1e99", "nan", "inf", "0x10", " 3",
                                          "3.5", "true", "999999999999999999999"])))
def test_fuzz_environment_variables(field, raw):
    try:
        Config.from_kwargs(env={"SHMCOMM_" + field.upper(): raw})
    except ArgumentError as exc:
        assert "SHMCOMM_" + field.upper() in str(exc), str(exc)
    except Exception as exc:
        raise AssertionError(f"SHMCOMM_{field.upper()}={raw!r}: {type(exc).__name__}: {exc}") from exc


@pytest.mark.parametrize("host", [None, 3, "main", [lambda rt: None]])
def test_run_rejects_a_host_that_is_not_callable(host):
    with pytest.raises(ArgumentError, match="host must be callable"):
        shmcomm.run(host, nranks=1)


@pytest.mark.parametrize("nranks", [0, -1, 65, 10**12, 2.0, True, "8", np.int64(1) * 0])
def test_run_rejects_bad_nranks(nranks):
    with pytest.raises(ArgumentError, match=r"nranks must be .*\[1, 64\]"):
        shmcomm.run(lambda rt: None, nranks=nranks)


# --- the CLI: argv fuzz, in process (valid combinations really run, kept cheap) -------------------

CLI_PROG = textwrap.dedent('''
    def ok(rt):
        return rt.rank
    not_callable = 3
''')


@pytest.fixture(scope="module")
def cli_modules(tmp_path_factory):
    d = tmp_path_factory.mktemp("cliprog")
    (d / "fuzzprog_ok.py").write_text(CLI_PROG)
    (d / "fuzzprog_syntax.py").write_text("def broken(:\n")
    (d / "fuzzprog_raises.py").write_text("raise RuntimeError('import-time failure')\n")
    sys.path.insert(0, str(d))
    yield
    sys.path.remove(str(d))
    for m in ("fuzzprog_ok", "fuzzprog_syntax", "fuzzprog_raises"):
        sys.modules.pop(m, None)


OPTS = {
    "--nranks": st.one_of(st.sampled_from(["1", "2"]), st.sampled_from(["0", "-1", "65", "99999999999",
                                                                       "2.5", "x", "", "0x2"])),
    "--blocks": st.one_of(st.just("1"), st.sampled_from(["0", "-3", "65", "1.0", "b"])),
    "--iters": st.one_of(st.sampled_from(["1", "3"]), st.sampled_from(["0", "-5", "1e3", "z"])),
    "--timeout": st.one_of(st.just("30"), st.sampled_from(["0", "-1", "nan", "inf", "1e400", "t"])),
    "--seed": st.one_of(st.just("7"), st.sampled_from(["-1", "2**64", "18446744073709551616", "s"])),
    "--mode": st.sampled_from(["eager", "lazy", "", "EAGER"]),
    "--wait-policy": st.sampled_from(["yield", "futex", "busy", ""]),
    "--program": st.sampled_from(["fuzzprog_ok:ok", "fuzzprog_ok:missing", "fuzzprog_ok:not_callable",
                                  "fuzzprog_syntax:broken", "fuzzprog_raises:x", "no_such_mod_zz:f",
                                  "fuzzprog_ok", ":ok", "fuzzprog_ok:", "a..b:c", "os.path:nope"]),
}
argv_item = st.one_of(
    st.sampled_from(list(OPTS)).flatmap(lambda o: OPTS[o].map(lambda v: [o, v])),
    st.sampled_from([["--nranks"], ["--bogus"], ["-n", "2"], ["-b"], ["extra"], ["--help"], ["-h"],
                     ["--iters=2"], ["--nranks=1"], ["--"], ["-"]]),
    st.text(max_size=6).map(lambda s: [s]),
)


@fuzz(N)
@given(parts=st.lists(argv_item, max_size=5))
def test_fuzz_cli_argv(cli_modules, parts):
    from shmcomm.launch.cli import main

    argv = [a for p in parts for a in p]
    if not any(a.startswith("--nranks") or a == "-n" for a in argv):
        argv = ["--nranks", "1"] + argv  # the default, 8 ranks, is too slow to fuzz with
    if not any(a.startswith("--iters") for a in argv):
        argv += ["--iters", "2"]
    out, err = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(argv)
    except SystemExit as exc:  # argparse: usage errors (2) and --help (0)
        code = exc.code
    except BaseException as exc:
        raise AssertionError(f"argv {argv!r}: {type(exc).__name__}: {exc}\n{err.getvalue()}") from exc
    text = err.getvalue()
    assert "Traceback" not in text, (argv, text)
    assert code in (0, 1, 2), (argv, code, text)
    if code == 2:
        assert "usage:" in text or "shmcomm.launch: error:" in text, (argv, text)
    if code == 1:
        assert "shmcomm run failed" in text, (argv, text)


VALID_ARGV = ["--nranks", "1", "--blocks", "1", "--iters", "2", "--timeout", "30"]


@fuzz(N)
@given(option=st.sampled_from(sorted(OPTS)), value=st.one_of(
    st.sampled_from(["0", "-1", "-5", "65", "1e3", "nan", "inf", "-inf", "", " ", "0x10", "1_0",
                     "99999999999999999999", "1.5", "None", "--nranks", "fuzzprog_ok:"]),
    st.text(max_size=6)))
def test_fuzz_cli_one_bad_option(cli_modules, option, value):
    """Every option alone, with everything else valid: a bad value is a usage error (exit 2)."""
    from shmcomm.launch.cli import main

    argv = VALID_ARGV + [option, value]
    out, err = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(argv)
    except SystemExit as exc:
        code = exc.code
    except BaseException as exc:
        raise AssertionError(f"argv {argv!r}: {type(exc).__name__}: {exc}\n{err.getvalue()}") from exc
    text = err.getvalue()
    assert "Traceback" not in text, (argv, text)
    assert code in (0, 2), (argv, code, text)  # a run with valid settings succeeds
    if code == 2:
        assert option.lstrip("-").split("-")[0] in text, (argv, text)  # names the option


# --- the kernel API, fuzzed inside one run ---------------------------------------------------------

def _kernel_api_fuzz(ctx, counts: Counter, group: tuple[str, ...]) -> None:
    """Runs in rank 0, block 0: hypothesis loops over generated inputs of every instruction."""
    w = ctx.windows
    heap = w.signal_bytes  # byte offset of the heap: plain data lives there
    good_sig = Signal(ctx.signal_base + 40)
    f32 = ctx.ptr(0, heap, np.float32)
    tile = ctx.tile((4, 8), np.float32)
    ub_after_setup = ctx._agent.ub_used

    @fuzz(N)
    @given(rank=small_or_junk, offset=st.one_of(ints, st.integers(0, w.size + 8), junk), dtype=dtypes)
    def pointers(rank, offset, dtype):
        clean(counts, "ctx.ptr", lambda: ctx.ptr(rank, offset, dtype), r"rank|offset|dtype")

    @fuzz(N)
    @given(n=st.one_of(ints, junk), rank=small_or_junk)
    def arithmetic(n, rank):
        clean(counts, "ptr + n", lambda: f32 + n, r"pointer|\bn\b")
        clean(counts, "ptr - n", lambda: f32 - n, r"pointer|\bn\b")
        clean(counts, "GetRemotePtr", lambda: GetRemotePtr(ctx, f32, rank), r"rank")
        clean(counts, "cast", lambda: f32.cast(n), r"dtype")

    @fuzz(N)
    @given(offset=st.one_of(st.integers(-8, 80), st.integers(w.size - 16, w.size + 16)),
           dtype=st.sampled_from([np.int32, np.int16, np.float32, np.int64, np.uint32]),
           rank=st.integers(-1, 2), obj=st.one_of(st.none(), junk))
    def signals(offset, dtype, rank, obj):
        def make():
            return Signal(ctx.ptr(rank, offset, dtype))

        clean(counts, "Signal", make, r"Signal|rank|offset|dtype")
        clean(counts, "Signal(junk)", lambda: Signal(obj), r"Signal")

    @fuzz(N)
    @given(rows=small_or_junk, cols=small_or_junk, stride=st.one_of(st.none(), small_or_junk),
           at=st.one_of(st.integers(0, 64), st.integers(w.signal_bytes // 4 - 70, w.size // 4 + 2)))
    def signals_2d(rows, cols, stride, at):
        clean(counts, "Signal2D", lambda: Signal2D(ctx.signal_base + at, rows, cols, stride),
              r"Signal2D|rows|cols|row_stride|pointer")

    @fuzz(N)
    @given(value=st.one_of(ints, junk), op=enum_values, sig=st.one_of(st.just(good_sig), junk))
    def notify_wait_test(value, op, sig):
        clean(counts, "TNOTIFY", lambda: TNOTIFY(sig, value, op), r"TNOTIFY")
        clean(counts, "TTEST", lambda: TTEST(sig, value, op), r"TTEST")
        # wait_timeout is short in this run: an unsatisfiable wait ends in WaitTimeout
        clean(counts, "TWAIT", lambda: TWAIT(sig, value, op), r"TWAIT")
        good_sig_reset()

    def good_sig_reset():
        TNOTIFY(good_sig, 0, NotifyOp.Set)

    @fuzz(N)
    @given(shape=shapes, stride=st.one_of(st.none(), small_or_junk),
           at=st.one_of(st.integers(0, 16), st.integers(w.heap_bytes // 4 - 40, w.heap_bytes // 4)),
           ptr=st.one_of(st.none(), junk))
    def tensors(shape, stride, at, ptr):
        clean(counts, "GlobalTensor", lambda: GlobalTensor(f32 + at, shape, stride),
              r"GlobalTensor|shape|row_stride")
        clean(counts, "GlobalTensor(junk ptr)", lambda: GlobalTensor(ptr, (2, 2)), r"GlobalTensor")
        clean(counts, "ptr.tensor", lambda: (f32 + at).tensor(shape), r"GlobalTensor|shape")

    @fuzz(N)
    @given(shape=shapes, dtype=dtypes)
    def tiles(shape, dtype):
        ctx._agent.ub_used = ub_after_setup  # each example starts with the same UB budget
        clean(counts, "ctx.tile", lambda: ctx.tile(shape, dtype), r"tile|ctx\.tile|shape|dtype")

    @fuzz(N)
    @given(rows=st.integers(0, 10), cols=st.integers(0, 12),
           dtype=st.sampled_from([np.float32, np.int32, np.float16]), atomic=enum_values,
           dst_at=st.sampled_from([0, 64, w.heap_bytes // 4 - 8]), junk_arg=junk)
    def data_moves(rows, cols, dtype, atomic, dst_at, junk_arg):
        src = GlobalTensor(f32, (max(rows, 1), max(cols, 1))) if dtype is np.float32 else \
            GlobalTensor(f32.cast(dtype), (max(rows, 1), max(cols, 1)))

        def dst():
            return GlobalTensor(ctx.ptr(1, heap, np.float32) + dst_at, (rows, cols))

        clean(counts, "TLOAD", lambda: TLOAD(tile, src), r"TLOAD")
        clean(counts, "TSTORE", lambda: TSTORE(dst(), tile, atomic), r"TSTORE|GlobalTensor")
        clean(counts, "TPUT", lambda: TPUT(dst(), src, tile, atomic), r"TPUT|GlobalTensor")
        clean(counts, "TGET", lambda: TGET(src, dst(), tile), r"TGET|GlobalTensor")
        clean(counts, "TPUT(junk)", lambda: TPUT(junk_arg, src, tile), r"TPUT")
        clean(counts, "TLOAD(junk)", lambda: TLOAD(junk_arg, src), r"TLOAD")

    @fuzz(N)
    @given(a=small_or_junk, b=small_or_junk, e=small_or_junk, mode=small_or_junk)
    def pipes_and_events(a, b, e, mode):
        clean(counts, "set_flag", lambda: set_flag(a, b, e), r"set_flag")
        clean(counts, "wait_flag", lambda: wait_flag(a, b, e), r"wait_flag")
        clean(counts, "pipe_barrier", lambda: pipe_barrier(a), r"pipe_barrier")
        clean(counts, "dsb", lambda: dsb(mode), r"dsb")
        clean(counts, "dcci", lambda: dcci(None, mode), r"dcci")

    bodies = locals()
    for name in group:
        bodies[name]()


def _fuzz_host(rt, group):
    counts: Counter = Counter()
    if rt.rank == 0:  # rank 1 only provides a remote window; it must not wait on rank 0
        rt.launch(_kernel_api_fuzz, blocks=1, args=(counts, group))
    return dict(counts)


KERNEL_COUNTS: dict[str, int] = {}


@pytest.mark.parametrize("group", [
    ("pointers", "arithmetic", "signals"),
    ("signals_2d", "notify_wait_test", "pipes_and_events"),
    ("tensors", "tiles", "data_moves"),
], ids=lambda g: g[0])
def test_fuzz_kernel_api_inside_a_rank(group):
    counts = shmcomm.run(_fuzz_host, nranks=2, window_bytes=1 << 16, wait_timeout=0.01,
                         timeout=110, args=(group,))[0]
    KERNEL_COUNTS.update(counts)
    assert sum(counts.values()) >= len(group) * N, counts


def _host_api_fuzz(rt):
    counts: Counter = Counter()

    @fuzz(N)
    @given(shape=shapes, dtype=dtypes)
    def allocs(shape, dtype):
        rt.heap.reset()  # every example starts from an empty heap (one rank: alloc is local)
        clean(counts, "rt.alloc", lambda: rt.alloc(shape, dtype), r"alloc")

    @fuzz(N)
    @given(kernel=junk, blocks=st.one_of(st.none(), small_or_junk), args=junk, kwargs=junk)
    def launches(kernel, blocks, args, kwargs):
        def nop(ctx, *a, **k):
            pass

        # one bad argument at a time, so that each check is reached
        clean(counts, "rt.launch kernel", lambda: rt.launch(kernel, blocks=1), r"launch")
        clean(counts, "rt.launch blocks", lambda: rt.launch(nop, blocks=blocks), r"launch")
        clean(counts, "rt.launch args", lambda: rt.launch(nop, blocks=1, args=args), r"launch")
        clean(counts, "rt.launch kwargs", lambda: rt.launch(nop, blocks=1, kwargs=kwargs), r"launch")

    @fuzz(N)
    @given(rank=small_or_junk)
    def windows(rank):
        clean(counts, "rt.window", lambda: rt.window(rank), r"rank")

    allocs()
    launches()
    windows()
    return dict(counts)


def test_fuzz_host_api_inside_a_rank():
    counts = shmcomm.run(_host_api_fuzz, nranks=1, window_bytes=1 << 20, timeout=110)[0]
    KERNEL_COUNTS.update(counts)
    assert sum(counts.values()) >= 3 * N, counts


def test_fuzz_counts(capsys):
    """Print how many inputs the fuzzers tried (for the report); runs after them."""
    if KERNEL_COUNTS:
        with capsys.disabled():
            total = sum(KERNEL_COUNTS.values())
            print(f"\nkernel/host API inputs tried: {total} "
                  + ", ".join(f"{k} {v}" for k, v in sorted(KERNEL_COUNTS.items())))
