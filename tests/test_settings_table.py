"""The one settings table: Config, its checks, the environment, every command's options, the docs
table and the command-line writer all come from it and agree; bad values are usage errors at
once (exit 2, naming the option and the range), the same in launch, stress and the plugin; the
commands share one style (-n/-b, --version, exit codes, colour only on a terminal). In-process:
no subprocess here."""

from __future__ import annotations

import dataclasses
import io
import textwrap

import pytest
from _helpers import run_in_process

from shmcomm import config as C
from shmcomm.config import BY_NAME, SETTINGS, Config, given, markdown_table, to_argv
from shmcomm.errors import ArgumentError
from shmcomm.launch.cli import LAUNCH_SETTINGS
from shmcomm.launch.cli import build_parser as launch_parser
from shmcomm.launch.options import colour
from shmcomm.stress.cli import STRESS_SETTINGS
from shmcomm.stress.cli import build_parser as stress_parser
from shmcomm.stress.harness import RunSpec, Settings
from shmcomm.stress.report import replay_command, repro_command

pytestmark = pytest.mark.timeout(120)


def test_config_is_the_table():
    fields = dataclasses.fields(Config)
    assert [f.name for f in fields] == [s.name for s in SETTINGS]
    assert all(f.default == BY_NAME[f.name].default for f in fields)
    assert all(f"``{s.name}``" in Config.__doc__ for s in SETTINGS)
    table = markdown_table().splitlines()
    assert len(table) == 2 + len(SETTINGS)
    assert all(f"`{s.env}`" in table[i + 2] and f"`{s.flag}`" in table[i + 2]
               for i, s in enumerate(SETTINGS))


def _sample(s: C.Setting):
    """A value of ``s`` other than its default."""
    if s.type is bool:
        return not s.default
    if s.choices:
        return next(c for c in s.choices if c != s.default)
    if s.low is not None:
        return s.high if s.default != s.high else s.low
    return {"hazards": "pipes,lines", "strategy": "pct:2:100"}.get(s.name, "some-file.json")


@pytest.mark.parametrize("make, names", [(launch_parser, LAUNCH_SETTINGS),
                                         (stress_parser, STRESS_SETTINGS)],
                         ids=["launch", "stress"])
def test_the_writer_and_the_options_agree(make, names):
    p = make()
    values = {n: _sample(BY_NAME[n]) for n in names}
    if make is stress_parser:  # the sweep's axes are lists there
        values.update(nranks=(2, 3), blocks=(1,), mode=("eager", "schedule"))
    argv = to_argv(values) + (["--program", "x:y"] if make is stress_parser else [])
    ns = p.parse_args(argv)
    assert given(ns, names) == values
    assert to_argv(values, values) == []  # what equals the defaults is left out


@pytest.mark.parametrize("cmd", ["launch", "stress"])
@pytest.mark.parametrize("argv, words", [
    (["--nranks", "10000"], "-n/--nranks: --nranks must be in [1, 64]; got 10000"),
    (["-n", "0"], "--nranks must be in [1, 64]; got 0"),
    (["--blocks", "-1"], "-b/--blocks: --blocks must be in [1, 64]; got -1"),
    (["--timeout", "0"], "--timeout must be in [0.1, 604800]"),
    (["--mode", "fast"], "--mode must be one of eager, hazard, schedule"),
    (["--hazards", "pipez"], "--hazards must be 'all' or a comma list of"),
    (["--seed", "-3"], "--seed must be in [0, "),
    (["--signal-bytes", "5000"], "--signal-bytes must be a multiple of 64 bytes"),
])
def test_bad_values_are_usage_errors_at_once(capsys, cmd, argv, words):
    extra = ["--program", "epoch_barrier"] if cmd == "stress" else []
    status, out, err = run_in_process(capsys, cmd, *extra, *argv)
    assert status == 2 and words in err and err.startswith("usage: "), err
    assert "Traceback" not in err and out == ""


def test_stress_lists_refuse_empty_items(capsys):
    status, _, err = run_in_process(capsys, "stress", "--program", "epoch_barrier",
                                    "--nranks", "2,,4")
    assert status == 2 and "without empty items; got '2,,4'" in err
    status, _, err = run_in_process(capsys, "stress", "--program", "epoch_barrier",
                                    "--size", "8,")
    assert status == 2 and "--size" in err


def test_the_plugin_option_checks_as_the_commands_do():
    from argparse import ArgumentTypeError

    with pytest.raises(ArgumentTypeError, match=r"--shmcomm-nranks must be in \[1, 64\]; got 0"):
        C.option_type("nranks", "--shmcomm-nranks", many=True)("2,0")


def test_environment_values_are_checked_with_the_variable_named():
    with pytest.raises(ArgumentError, match=r"SHMCOMM_NRANKS must be in \[1, 64\]; got 99"):
        Config.from_kwargs(env={"SHMCOMM_NRANKS": "99"})
    with pytest.raises(ArgumentError, match="SHMCOMM_DETECT_RACES"):
        Config.from_kwargs(env={"SHMCOMM_DETECT_RACES": "yes"})
    assert Config.from_kwargs(env={"SHMCOMM_BLOCKS": "3"}).blocks == 3


def test_a_per_mode_default_resolves_by_mode(monkeypatch):
    row = dataclasses.replace(BY_NAME["race_exitfirst"], default=None,
                              mode_defaults={"hazard": True})
    monkeypatch.setattr(C, "SETTINGS", tuple(row if s.name == row.name else s for s in SETTINGS))
    assert Config(race_exitfirst=None, mode="hazard").race_exitfirst is True
    assert Config(race_exitfirst=None).race_exitfirst is False
    assert Config(race_exitfirst=False, mode="hazard").race_exitfirst is False


def test_repro_lines_carry_only_what_ran():
    spec = RunSpec(2, 1, 0, "schedule", 5)  # a host without a size
    settings = Settings()
    line = repro_command("epoch_barrier", spec, settings, sized=False)
    assert "--size" not in line and "--hazards" not in line and "None" not in line
    launch = repro_command("epoch_barrier", spec, settings, command="launch", sized=False)
    assert "--arg size" not in launch and "--strategy" not in launch
    replay = replay_command("epoch_barrier", spec, "/tmp/s.json", settings, sized=False)
    assert replay.endswith("--replay /tmp/s.json --runs 1") and "None" not in replay
    import numpy as np

    typed = repro_command("x.py:h", RunSpec(2, 1, 8, "eager", 0), settings,
                          {"dtype": np.float32, "n": 3, "name": "a b"}, sized=True)
    assert "--arg dtype=@numpy:float32" in typed and "--arg n=3" in typed
    assert "'--arg' 'name=a b'" in typed or "'name=a b'" in typed


def test_arg_values_round_trip():
    import numpy as np

    from shmcomm.launch.options import _key_value, format_arg

    for value in (3, 1.5, "text", "3", [1, 2], None, np.float32, np.dtype):
        assert _key_value(format_arg("k", value)) == ("k", value), value
    with pytest.raises(ArgumentError, match="no command line can pass it"):
        format_arg("k", object())


def test_every_command_has_version_and_the_same_short_options(capsys):
    for cmd in ("launch", "stress", "trace", "cleanup"):
        status, out, _ = run_in_process(capsys, cmd, "--version")
        assert status == 0 and out.startswith("shmcomm "), (cmd, out)
    for make in (launch_parser, stress_parser):
        opts = make()._option_string_actions
        assert opts["-n"].dest == "nranks" and opts["-b"].dest == "blocks"
        assert opts["--timeout"].dest == "timeout"
    assert stress_parser()._option_string_actions["--run-timeout"].dest == "timeout"


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_colour_only_on_a_terminal_and_never_with_no_color(monkeypatch):
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("TERM", "xterm")
    assert colour("error", "red", _Tty()) == "\033[31merror\033[0m"
    assert colour("error", "red", io.StringIO()) == "error"
    monkeypatch.setenv("NO_COLOR", "1")
    assert colour("error", "red", _Tty()) == "error"


PROG = '''
def plain(rt):
    rt.barrier()

def needs(rt, size, count):
    return count
'''


@pytest.fixture
def prog(tmp_path, monkeypatch):
    (tmp_path / "tkprog.py").write_text(textwrap.dedent(PROG))
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_a_passing_host_that_returns_none_still_says_so(prog, capsys):
    status, out, _ = run_in_process(capsys, "launch", "-n", "2", "-b", "1", "--program",
                                    "tkprog.py:plain")
    assert status == 0 and "2 rank(s) passed" in out, out


def test_host_arguments_are_checked_once_before_any_run(prog, capsys):
    for host, args, words in (("plain", ["--arg", "bogus=1"], "unexpected keyword argument 'bogus'"),
                              ("needs", [], "missing a required argument: 'count'")):
        status, out, err = run_in_process(capsys, "stress", "--program", f"tkprog.py:{host}",
                                          "-n", "2", "--no-progress", *args)
        assert status == 2 and words in err and err.count("error:") == 1, err
        assert out == "" and not list(prog.glob("results"))


def test_an_interrupted_command_exits_with_the_shells_status(capsys, monkeypatch, tmp_path):
    import signal

    from shmcomm.launch import cleanup, tracecli

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    def terminated(*args, **kwargs):
        signal.raise_signal(signal.SIGTERM)  # the command's own handler turns it into 143

    before = signal.getsignal(signal.SIGTERM)
    trace = tmp_path / "t.json"
    trace.write_text('{"traceEvents": []}')
    monkeypatch.setattr(tracecli, "summarize", interrupted)
    assert run_in_process(capsys, "trace", str(trace))[:1] == (130,)
    monkeypatch.setattr(cleanup, "cleanup", terminated)
    status, _, err = run_in_process(capsys, "cleanup", "--dry-run")
    assert status == 143 and "interrupted by SIGTERM" in err, err
    assert signal.getsignal(signal.SIGTERM) == before  # the command put the handler back


def test_the_typed_shape_of_config_has_every_setting_and_its_type():
    """Type checkers see ``ConfigShape`` (Config is generated): it must not drift from the table."""
    import typing

    from shmcomm.config import SETTINGS, ConfigShape

    hints = typing.get_type_hints(ConfigShape)
    want = {s.name: (s.type if s.mode_defaults is None else s.type | None) for s in SETTINGS}
    assert {k: v for k, v in hints.items()} == want
