"""benchmarks/collectives.py checks every result: --quick (every type and op) shows #wrong = 0,
a deliberately broken kernel shows #wrong > 0 and exit status 1, bad input is a usage error.
No timing is asserted (the box is shared: the test must never be flaky)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys

import pytest
from _helpers import ROOT
from test_launch_cli import assert_every_option_documented

# MPI jobs in one xdist group: two at once would see (and clean up) each other's MPICH files
pytestmark = [pytest.mark.timeout(180), pytest.mark.xdist_group("mpi")]
SCRIPT = os.path.join(str(ROOT), "benchmarks", "collectives.py")


def _module():
    spec = importlib.util.spec_from_file_location("bench_collectives", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _wrong_column(out: str) -> list[int]:
    lines = out.splitlines()
    hdr = next(i for i, line in enumerate(lines) if line.startswith("collective"))
    start = lines[hdr].index("busbw(GiB/s)") + len("busbw(GiB/s)")
    end = lines[hdr].index("#wrong") + len("#wrong")
    rows = []
    for line in lines[hdr + 2:]:
        if not line or line.startswith(("#", "wrote")):  # a blank line ends the table
            break
        rows.append(line)
    return [int(line[start:end]) for line in rows]


def _labels(out: str) -> list[str]:
    lines = out.splitlines()
    hdr = next(i for i, line in enumerate(lines) if line.startswith("collective"))
    return [line.split()[0] for line in lines[hdr + 2:hdr + 2 + len(_wrong_column(out))]]


def test_quick_checks_every_type_and_op_and_finds_nothing_wrong(tmp_path, capsys):
    mod = _module()
    assert mod.main(["--quick", "--no-plot", "--out", str(tmp_path / "c")]) == 0
    out = capsys.readouterr().out
    wrong = _wrong_column(out)
    assert wrong and set(wrong) == {0}
    assert "# wrong elements: 0 (OK)" in out
    doc = json.loads((tmp_path / "c.json").read_text())
    seen = {(r["coll"], r["dtype"], r["redop"]) for r in doc["rows"]}
    assert len(seen) == 3 * 5 + 3 * 5 + 5  # RS and AR: 5 types x 3 ops; AG: 5 types
    assert all(r["wrong"] == 0 for r in doc["rows"])


def test_a_broken_kernel_shows_wrong_elements(tmp_path, capsys):
    mod = _module()

    def broken_all_reduce(ctx, src, dst, n, op):
        mod.reduce_scatter(ctx, src, dst, n, op)  # forgets the AllGather half

    mod.KERNELS["ar"] = broken_all_reduce  # the rank processes are forked: they inherit it
    status = mod.main(["-b", "4K", "-e", "4K", "--nranks", "2", "--blocks", "1", "-n", "2",
                       "--collectives", "rs,ar", "--no-plot", "--out", str(tmp_path / "c")])
    out = capsys.readouterr().out
    assert status == 1
    rs, ar = _wrong_column(out)
    assert rs == 0 and ar > 0
    assert "FAILED" in out


@pytest.mark.timeout(300)
def test_mpi_rows_are_checked_beside_shm(tmp_path, capsys):
    """--mpi at its smallest: AllReduce on shm, on the mpi transport and as MPI_Allreduce, each
    result checked (#wrong = 0, never N/A), and the side-by-side table printed."""
    pytest.importorskip("mpi4py")
    mod = _module()
    status = mod.main(["--mpi", "-b", "4K", "-e", "4K", "--nranks", "2", "--blocks", "1", "-n", "2",
                       "--collectives", "ar", "--no-plot", "--out", str(tmp_path / "c")])
    out = capsys.readouterr().out
    assert status == 0, out
    assert _labels(out) == ["AllReduce", "AllReduce/mpi", "MPI_Allreduce"]
    assert _wrong_column(out) == [0, 0, 0]
    assert "MPI_Allreduce (one thread per rank)" in out and "# wrong elements: 0 (OK)" in out
    doc = json.loads((tmp_path / "c.json").read_text())
    assert sorted(r["transport"] for r in doc["rows"]) == ["mpi", "mpich", "shm"]
    assert all(r["wrong"] == 0 and r["count"] == 1024 for r in doc["rows"])


@pytest.mark.parametrize("argv, words", [
    (["--nranks", "0"], "--nranks"), (["--nranks", "2,x"], "--nranks"),
    (["-b", "0"], "--minbytes"), (["-b", "4Q"], "--minbytes"), (["-b", "1M", "-e", "4K"], "<="),
    (["-f", "1"], "--stepfactor"), (["-n", "0"], "--iters"), (["-d", "float64"], "--datatype"),
    (["-o", "avg"], "--op"), (["-c", "2"], "--check"),
    (["--mpi", "--collectives", "rs"], "--collectives must include ar"),
])
def test_bad_input_is_a_usage_error(argv, words):
    p = subprocess.run([sys.executable, SCRIPT, *argv, "--no-plot"], capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == 2 and words in p.stderr and "Traceback" not in p.stderr, p.stderr


def test_every_option_has_help_and_default():
    assert_every_option_documented(_module().build_parser())
