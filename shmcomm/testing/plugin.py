"""The pytest plugin (entry point ``pytest11``, name ``shmcomm``): sweeps as test items.

A test marked ``@shmcomm.testing.sweep(host, nranks=[2, 4], modes=["eager", "hazard"], ...)``
that takes the fixture ``shmcomm_sweep`` becomes one test item per configuration (and per
``chunk`` seeds), with ids such as ``test_ring[hazard-n2-b1-s64]``: ``-k hazard-n2``
selects configurations, pytest-xdist (``-n 2``) splits them, and a failing item's first line
(pytest's short summary) is the cause. Without the marker, ``shmcomm_sweep(host, nranks=...)``
runs the whole sweep in one item, as before.

Options (and ini keys ``shmcomm_<name>``): ``--shmcomm-nranks``, ``--shmcomm-blocks``,
``--shmcomm-mode`` (one or a comma list, as ``stress --mode``), ``--shmcomm-sizes``,
``--shmcomm-runs`` (runs per configuration: each item's), ``--shmcomm-seed`` (the first),
``--shmcomm-chunk`` (seeds per item), ``--shmcomm-trace`` (trace every run, keep the failing
runs' traces under the test's ``tmp_path``) or ``--shmcomm-trace-dir DIR`` (keep them in DIR,
as ``stress --trace-dir``), and every
per-run setting of the settings table as ``--shmcomm-<setting>``; ``--shmcomm-modes`` and
``--shmcomm-seeds`` (and their ini keys) are older spellings, taken with a deprecation warning.
``SHMCOMM_*`` variables are
honoured (``SHMCOMM_MODE=schedule`` sweeps in schedule mode) or refused with an error.

A hang is reported by shmcomm with every rank's stack: each run's timeout is cut to end before
the test's pytest-timeout would fire. With ``-x`` a sweep stops at its first failing run.
"""

from __future__ import annotations

import argparse
import difflib
import time
from collections.abc import Callable
from typing import Any

import pytest

from ..config import _KNOWN_ENV as KNOWN_ENV
from ..config import BY_NAME, add_options, from_env, option_type, shmcomm_env
from ..errors import ArgumentError
from ..stress.harness import RUN_SETTINGS, Report
from . import OPTION_NAMES, SweepFailed, plan, run_case, run_settings, split_options, sweep_all
from .expect import cause_word

MARKER = "shmcomm_sweep"
TIMEOUT_MARGIN = 0.2  # of the test's timeout kept for shmcomm's own report (2 to 10 s)


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {text!r}")
    return value


def _sizes(text: str) -> tuple[int, ...]:
    items = text.split(",")
    if any(not i.strip() for i in items):
        raise argparse.ArgumentTypeError(f"expected a comma list of integers >= 1, got {text!r}")
    return tuple(_positive(i) for i in items)


def _seed(text: str) -> int:
    return option_type("seed", "--shmcomm-seed")(text)


# the sweep's axes: axis -> (type, help); the option and ini key take the axis's name from the
# settings table and the other commands (OPTION_NAMES), so one setting has one name everywhere
AXES: dict[str, tuple[Callable[[str], Any], str]] = {
    "nranks": (option_type("nranks", "--shmcomm-nranks", many=True),
               "rank counts of every sweep, a comma list (replaces the tests')"),
    "blocks": (option_type("blocks", "--shmcomm-blocks", many=True),
               "block counts of every sweep, a comma list (replaces the tests')"),
    "modes": (option_type("mode", "--shmcomm-mode", many=True),
              "modes of every sweep: eager, hazard, schedule or a comma list (as stress --mode)"),
    "sizes": (_sizes, "sizes of every sweep whose host takes a size, a comma list"),
    "seeds": (_positive, "runs (seeds) per configuration, each item's runs (as stress --runs "
                         "for one configuration)"),
    "seed": (_seed, "the first seed"),
    "chunk": (_positive, "seeds per test item (default: all of a configuration's in one)"),
}
# older spellings of options and ini keys: still taken, with a deprecation warning
DEPRECATED_OPTIONS = {"modes": "mode", "seeds": "runs"}


def _option(axis: str) -> str:
    return OPTION_NAMES.get(axis, axis)


class _Group:
    """What :func:`shmcomm.config.add_options` calls ``add_argument`` on, adding pytest options
    ``--shmcomm-<setting>`` instead (pytest keeps lower-case short options for itself)."""

    def __init__(self, group: Any) -> None:
        self.group = group

    def add_argument(self, *flags: str, **kw: Any) -> None:
        long = next(f for f in flags if f.startswith("--"))
        name = long[2:].replace("-", "_")
        flag = "--shmcomm-" + long[2:]
        if kw.get("action") is argparse.BooleanOptionalAction:
            self.group.addoption(flag, action="store_const", const=True, dest=f"shmcomm_{name}",
                                 default=None, help=kw["help"])
            self.group.addoption("--shmcomm-no-" + long[2:], action="store_const", const=False,
                                 dest=f"shmcomm_{name}", default=None,
                                 help=f"turn --shmcomm-{long[2:]} off")
            return
        kw["type"] = option_type(name, flag)
        self.group.addoption(flag, dest=f"shmcomm_{name}", **kw)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("shmcomm", "shmcomm sweeps (the shmcomm_sweep fixture)")
    for name, (kind, text) in AXES.items():
        opt = _option(name)
        group.addoption(f"--shmcomm-{opt}", dest=f"shmcomm_{name}", type=kind, default=None,
                        help=text)
        parser.addini(f"shmcomm_{opt}", text)
    for old, new in DEPRECATED_OPTIONS.items():
        group.addoption(f"--shmcomm-{old}", dest=f"shmcomm_old_{old}", type=AXES[old][0],
                        default=None, help=f"deprecated spelling of --shmcomm-{new}")
        parser.addini(f"shmcomm_{old}", f"deprecated spelling of shmcomm_{new}")
    group.addoption("--shmcomm-trace", action="store_true", default=None, dest="shmcomm_trace",
                    help="trace every run and keep the failing runs' Chrome traces under the "
                         "test's tmp_path (off: tracing slows runs and shifts the timing races "
                         "depend on)")
    group.addoption("--shmcomm-trace-dir", default=None, metavar="DIR", dest="shmcomm_trace_dir",
                    help="trace every run and keep the failing runs' Chrome traces in DIR (as "
                         "stress --trace-dir) (default: none, or the test's tmp_path with "
                         "--shmcomm-trace)")
    parser.addini("shmcomm_trace", "trace every run (see --shmcomm-trace)", type="bool",
                  default=False)
    add_options(_Group(group), RUN_SETTINGS, defaults={n: BY_NAME[n].sweep_default
                                                       for n in RUN_SETTINGS})
    for name in RUN_SETTINGS:
        parser.addini(f"shmcomm_{name}", f"the sweeps' {name} (see --shmcomm-"
                      f"{name.replace('_', '-')})")


def env_problem(env: Any = None) -> str:
    """What is wrong with the ``SHMCOMM_*`` environment, in one line ("" = nothing): a value a
    setting refuses, or a name no setting has (a misspelling, with the nearest name)."""
    try:
        from_env(env)
    except ArgumentError as exc:
        return str(exc)
    for var in sorted(v for v in shmcomm_env(env) if v not in KNOWN_ENV):
        near = difflib.get_close_matches(var, KNOWN_ENV, n=1)
        hint = f"did you mean {near[0]}?" if near else "no setting has that name"
        return f"unknown environment variable {var}: {hint} (unset or rename it)"
    return ""


def pytest_configure(config: pytest.Config) -> None:
    problem = env_problem()
    if problem:  # one line before any test is collected, not a traceback per test file
        raise pytest.UsageError(f"shmcomm: {problem}")
    for old, new in DEPRECATED_OPTIONS.items():
        value = config.getoption(f"shmcomm_old_{old}", None)
        raw = config.getini(f"shmcomm_{old}")
        if value is not None:
            config.issue_config_time_warning(pytest.PytestDeprecationWarning(
                f"--shmcomm-{old} is deprecated; use --shmcomm-{new}"), stacklevel=2)
            if config.getoption(f"shmcomm_{old}", None) is None:
                setattr(config.option, f"shmcomm_{old}", value)
        if isinstance(raw, str) and raw.strip():
            config.issue_config_time_warning(pytest.PytestDeprecationWarning(
                f"the ini key shmcomm_{old} is deprecated; use shmcomm_{new}"), stacklevel=2)
    config.addinivalue_line(
        "markers", f"{MARKER}(host=None, nranks=..., blocks=..., modes=..., sizes=..., seeds=..., "
        "seed=..., chunk=..., **settings_and_host_kwargs): one test item per configuration of "
        "the sweep (shmcomm.testing.sweep)")


def _layer(config: pytest.Config, names: Any, kinds: Callable[[str], Callable[[str], Any]]
           ) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(ini, cli)``: the values the ini file and the command line give for ``names``."""
    ini: dict[str, Any] = {}
    cli: dict[str, Any] = {}
    for name in names:
        value = config.getoption(f"shmcomm_{name}", None)
        if value is not None:
            cli[name] = value
        key = f"shmcomm_{_option(name)}"
        raw = config.getini(key)
        if not (isinstance(raw, str) and raw.strip()) and name in DEPRECATED_OPTIONS:
            key = f"shmcomm_{name}"  # the older spelling (warned about at configure)
            raw = config.getini(key)
        if isinstance(raw, str) and raw.strip():
            try:
                ini[name] = kinds(name)(raw.strip())
            except argparse.ArgumentTypeError as exc:
                raise pytest.UsageError(f"ini key {key}: {exc}") from None
    return ini, cli


def _axis_layers(config: pytest.Config) -> tuple[dict[str, Any], dict[str, Any]]:
    return _layer(config, AXES, lambda n: AXES[n][0])


def _setting_layers(config: pytest.Config) -> tuple[dict[str, Any], dict[str, Any]]:
    return _layer(config, RUN_SETTINGS,
                  lambda n: option_type(n, "shmcomm_" + n))


def _split(marker: Any) -> tuple[Any, dict[str, Any], dict[str, Any], dict[str, Any],
                               dict[str, Any]]:
    """A marker's ``(host, axes, per-run settings, sweep options, host kwargs)``."""
    host = marker.args[0] if marker.args else marker.kwargs.get("host")
    options = {k: v for k, v in marker.kwargs.items() if k != "host"}
    return (host, *split_options(options, stacklevel=4))


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    marker = metafunc.definition.get_closest_marker(MARKER)
    if marker is None or "shmcomm_case" not in metafunc.fixturenames:
        return
    host, axes, _own, _extra, kwargs = _split(marker)
    ini, cli = _axis_layers(metafunc.config)
    try:
        cases, _notes = plan({**ini, **axes}, host, overrides=cli, kwargs=kwargs)
    except ArgumentError as exc:
        raise pytest.UsageError(f"{metafunc.definition.nodeid}: {exc}") from None
    metafunc.parametrize("shmcomm_case", cases, ids=[c.id for c in cases], indirect=True)


@pytest.fixture
def shmcomm_case(request: pytest.FixtureRequest) -> Any:
    """The configuration and seeds of this item of a marked sweep (``None`` without one)."""
    return getattr(request, "param", None)


def _deadline(item: pytest.Item, start: float) -> float | None:
    """When shmcomm must be done for the test's pytest-timeout not to fire first."""
    timeout = None
    marker = item.get_closest_marker("timeout")
    if marker is not None:
        timeout = marker.args[0] if marker.args else marker.kwargs.get("timeout")
    if timeout is None:
        timeout = item.config.getoption("timeout", None)
    if timeout is None:
        try:
            raw = item.config.getini("timeout")
        except ValueError:  # pytest-timeout is not installed
            raw = None
        timeout = float(raw) if raw not in (None, "") else None
    if not timeout or float(timeout) <= 0:
        return None
    timeout = float(timeout)
    return start + timeout - min(max(2.0, TIMEOUT_MARGIN * timeout), 0.5 * timeout, 10.0)


@pytest.fixture
def shmcomm_sweep(request: pytest.FixtureRequest, shmcomm_case: Any) -> Callable[..., Report]:
    """A function that runs this item's runs of a sweep (or, without the ``shmcomm_sweep``
    marker, the whole sweep given to it) and fails the test on any failing run."""
    config = request.config
    exitfirst = config.getoption("maxfail", 0) == 1  # -x is --maxfail=1
    start = time.monotonic()
    marker = request.node.get_closest_marker(MARKER)

    def trace_dir() -> str:
        given = config.getoption("shmcomm_trace_dir", None)
        if given:
            return str(given)
        wanted = config.getoption("shmcomm_trace", None)
        if wanted is None:
            wanted = config.getini("shmcomm_trace")
        return str(request.getfixturevalue("tmp_path") / "shmcomm-traces") if wanted else ""

    def run_sweep(host: Callable[..., Any] | None = None, **options: Any) -> Report:
        ini_s, cli_s = _setting_layers(config)
        try:
            axes, own, extra, kwargs = split_options(options)
            if shmcomm_case is None:  # no marker: the whole sweep, in this one item
                ini_a, cli_a = _axis_layers(config)
                if host is None:
                    raise ArgumentError("shmcomm_sweep(host, ...) needs the host function")
                return sweep_all(host, {**ini_a, **axes}, own, overrides=cli_a, ini=ini_s,
                                 cli=cli_s, trace_dir=extra.get("trace_dir") or trace_dir(),
                                 stop_at_first=extra.get("stop_at_first", exitfirst),
                                 kwargs=kwargs, pool=False,  # fork per run: stacks on a hang
                                 deadline=_deadline(request.node, start),
                                 expect=extra.get("expect"))
            m_host, _axes, m_own, m_extra, m_kwargs = _split(marker)
            host = host or m_host
            if host is None:
                raise ArgumentError("give the host to the marker or to shmcomm_sweep(host)")
            if axes:
                raise ArgumentError(f"{', '.join(sorted(axes))}: a marked sweep's axes belong "
                                    "in the marker (they make the test items)")
            m_own.update(own)
            m_extra.update(extra)
            m_kwargs.update(kwargs)
            _cases, notes = plan({}, None, overrides=None)  # env notes only
            settings = run_settings(m_own, ini=ini_s, cli=cli_s,
                                    trace_dir=m_extra.get("trace_dir") or trace_dir())
            return run_case(host, shmcomm_case, settings, kwargs=m_kwargs,
                            stop_at_first=m_extra.get("stop_at_first", exitfirst),
                            deadline=_deadline(request.node, start), notes=notes,
                            expect=m_extra.get("expect"))
        except SweepFailed as exc:
            text = str(exc)
        except ArgumentError as exc:
            text = f"error: {exc}"
        word = cause_word(text)
        if word:  # the short summary's first word (pytest_report_teststatus)
            request.node.user_properties.append(("shmcomm_cause", word))
        pytest.fail(text, pytrace=False)  # outside the except: no chained traceback

    return run_sweep


@pytest.hookimpl(tryfirst=True)
def pytest_report_teststatus(report: pytest.TestReport, config: pytest.Config) -> Any:
    """A failing sweep's status word carries the cause (``FAILED race``), so pytest's short
    summary names it before the item's id, whatever the terminal's width."""
    if report.when != "call" or not report.failed:
        return None
    word = next((v for k, v in getattr(report, "user_properties", ()) if k == "shmcomm_cause"),
                None)
    if not word:
        return None
    return "failed", "F", (f"FAILED {word}", {"red": True})
