"""The one strict configuration object of a run, and the one table of its settings.

Every setting is one row of :data:`SETTINGS`: its name, type, default, allowed range or choices,
``SHMCOMM_<NAME>`` environment variable, help text, the modes that read it, and the default the
sweeps (``stress``, the pytest plugin) use when theirs differs. From that table come
:class:`Config` (its fields and their checks), the environment reading, the argparse options of
every command (:func:`add_options`), the command-line writer (:func:`to_argv`) and the settings
table of the docs (:func:`markdown_table`). Unknown keys are rejected, values are checked when the
object is built, a bad environment value raises and names the variable, and explicit arguments
win over the environment.
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import functools
import os
import warnings
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .errors import ArgumentError, ShmcommWarning

MAX_RANKS = 64  # as pto-isa's CommDeviceContext (kMaxRankNum)
MAX_BLOCKS = 64
# Block threads of one run (nranks x blocks): every block is an OS thread under its rank's GIL.
# On a 2-core box 32 ranks x 32 blocks finish a barrier launch in 1.5 s, while 64 x 64 (4,096
# threads) did not finish one in 170 s and drove the load average past 1,700.
MAX_BLOCK_THREADS = 1024
WAIT_POLICIES = ("adaptive", "spin", "yield", "futex")
MODES = ("eager", "hazard", "schedule")
# schedule-mode strategies (shmcomm.exec.schedule.strategies); "pct" takes an optional depth
TRANSPORTS = ("shm", "mpi")  # shmcomm.transports: shared memory (forked ranks) or MPI (mpiexec)
MPI_PEERS = ("shared", "rma")  # mpi: map the windows of the host's ranks, or reach all by RMA
# hazard-mode sub-models (shmcomm.exec.hazard); "all" turns every one on
HAZARDS = ("pipes", "visibility", "lines", "cache", "jitter", "checkers")
# what TNOTIFY(..., NotifyOp.Set) does: a2a3's plain store, or pto-isa's proposed read-then-add
SET_SEMANTICS = ("store", "read-add")
# the NPU the kernels are built for: a2a3 (its DMA engine is SDMA only) or a5 (Ascend950,
# NPU_ARCH 3510, which adds the URMA engine that pto-isa's a5 back end and CPU suites drive)
TARGETS = ("a2a3", "a5")
KiB, MiB, GiB = 1 << 10, 1 << 20, 1 << 30
WEEK_S = 7 * 24 * 3600.0

_SAME = object()  # "the sweeps use the table's default"


@dataclass(frozen=True)
class Setting:
    """One row of the settings table.

    ``low``/``high`` bound a number, ``choices`` a string; ``check`` validates what neither can
    say (raises :class:`ArgumentError`). ``modes``: the modes that read it (another mode warns
    when it is given). ``sweep``: the default of the sweeps when it differs (their per-run
    bounds are tighter: a hang should cost little). ``mode_defaults``: for a ``default`` of
    ``None``, the value each mode resolves it to. ``short``: the one-letter option.
    ``allowed``: what ``check`` allows, in words. A registry of a layer above may own a row's
    words (:func:`describe`: the schedule strategies own ``strategy``'s).
    """

    name: str
    type: type
    default: Any
    help: str
    low: Any = None
    high: Any = None
    choices: tuple[str, ...] | None = None
    check: Callable[[Any, str], Any] | None = None
    modes: tuple[str, ...] = MODES
    sweep: Any = _SAME
    mode_defaults: Mapping[str, Any] | None = None
    short: str | None = None
    metavar: str | None = None
    allowed: str | None = None  # what a ``check`` allows, in words

    @functools.cached_property
    def env(self) -> str:
        return "SHMCOMM_" + self.name.upper()

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")

    @property
    def sweep_default(self) -> Any:
        return self.default if self.sweep is _SAME else self.sweep

    def range_text(self) -> str:
        """What is allowed, in words (error messages, --help, the docs table)."""
        if self.type is bool:
            return "true or false"
        if self.choices:
            return "one of " + ", ".join(self.choices)
        if self.low is not None:
            return f"{self.type.__name__} in [{_num(self.low)}, {_num(self.high)}]"
        return self.allowed or "any string"

    def validate(self, value: Any, label: str | None = None) -> None:
        """Raise :class:`ArgumentError` naming ``label`` and the range unless ``value`` fits."""
        label = label or self.name
        if value is None and self.mode_defaults is not None:
            return  # resolved per mode
        if self.type is bool:
            if not isinstance(value, bool):
                raise ArgumentError(f"{label} must be a bool (True or False); got {value!r}")
        elif self.type is str:
            if not isinstance(value, str):
                raise ArgumentError(f"{label} must be a str; got {value!r}")
            if self.choices is not None and value not in self.choices:
                raise ArgumentError(f"{label} must be one of {', '.join(self.choices)}; "
                                    f"got {value!r}")
        else:
            ok = (isinstance(value, (int, float)) if self.type is float
                  else isinstance(value, int))
            if isinstance(value, bool) or not ok:
                raise ArgumentError(f"{label} must be {self.range_text()}; got {value!r}")
            if not self.low <= value <= self.high:
                raise ArgumentError(f"{label} must be in [{_num(self.low)}, {_num(self.high)}]; "
                                    f"got {value!r}")
        if self.check is not None:
            self.check(value, label)

    def parse(self, raw: str, label: str) -> Any:
        """``raw`` text (an option's or a variable's value) as this setting's type, checked."""
        text = raw.strip()
        if self.type is bool:
            if text.lower() not in ("0", "1", "true", "false"):
                raise ArgumentError(f"{label}={raw!r} must be 0, 1, true or false")
            value: Any = text.lower() in ("1", "true")
        elif self.type is str:
            value = raw
        else:
            try:
                value = float(text) if self.type is float else int(text, 0)
            except ValueError:
                raise ArgumentError(f"{label}={raw!r} is not a valid {self.type.__name__} "
                                    f"(allowed: {self.range_text()})") from None
        self.validate(value, label)
        return value


def _num(x: Any) -> str:
    if isinstance(x, int) and x >= 1 << 20 and x % KiB == 0:
        return next(f"{x // u} {n}" for u, n in ((GiB, "GiB"), (MiB, "MiB"), (KiB, "KiB"))
                    if x % u == 0) if x < 2**40 else f"{x:.3g}"
    return f"{x:g}" if isinstance(x, float) else str(x)


def _multiple_of_64(value: int, label: str) -> None:
    if value % 64:
        raise ArgumentError(f"{label} must be a multiple of 64 bytes; got {value}")


def _check_hazards(value: str, label: str) -> None:
    parse_hazards(value, label)


def parse_suppressions(value: str, label: str = "race_suppressions"
                       ) -> tuple[tuple[str, str | None], ...]:
    """The race suppressions of ``value``: a path to a file of them, or the rules themselves
    (``;`` or new lines between them). A rule is ``race:FILE:LINE`` (any race one of whose
    accesses is at that line) or ``race:FILE:LINE FILE:LINE`` (a race between those two lines),
    ``FILE`` the end of the kernel file's path; ``#`` starts a comment, as in ThreadSanitizer's
    suppression files. Returns ``(site, other site or None)`` per rule."""
    if not value.strip():
        return ()
    text = value
    if os.path.isfile(value):
        try:
            with open(value, encoding="utf-8") as f:
                text = f.read()
        except OSError as exc:
            raise ArgumentError(f"{label}: cannot read {value!r}: {exc}") from None
    rules = []
    for raw in text.replace(";", "\n").splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        kind, _, rest = line.partition(":")
        sites = rest.split()
        if kind.strip() != "race" or not 1 <= len(sites) <= 2 or not all(
                s.rpartition(":")[2].isdigit() and s.rpartition(":")[0] for s in sites):
            raise ArgumentError(f"{label} must be a file of rules or rules such as "
                                f"'race:kernel.py:12 kernel.py:30'; got {line!r}")
        rules.append((sites[0], sites[1] if len(sites) == 2 else None))
    return tuple(rules)


def _check_suppressions(value: str, label: str) -> None:
    parse_suppressions(value, label)


SCHEDULE = ("schedule",)
SETTINGS: tuple[Setting, ...] = (
    Setting("nranks", int, 8, "rank processes", 1, MAX_RANKS, short="-n"),
    Setting("blocks", int, 4, "block threads per launch", 1, MAX_BLOCKS, short="-b"),
    Setting("signal_bytes", int, 64 * KiB, "each rank window's signal matrix in bytes (the "
            "library kernels' regions take its first 36 KiB, the rest is the users')",
            4 * KiB, 64 * MiB, check=_multiple_of_64, metavar="BYTES"),
    Setting("heap_bytes", int, 64 * MiB, "each rank window's data heap in bytes", 0, 16 * GiB,
            metavar="BYTES"),
    Setting("ub_bytes", int, 192 * KiB, "per-block tile (UB) capacity in bytes, as on A2/A3",
            1 * KiB, 64 * MiB, metavar="BYTES"),
    Setting("timeout", float, 300.0, "seconds for one whole run (past it: a timeout)",
            0.1, WEEK_S, sweep=30.0, metavar="S"),
    Setting("wait_timeout", float, 60.0, "one TWAIT's deadline in seconds", 0.01, WEEK_S,
            sweep=10.0, metavar="S"),
    Setting("deadlock_grace", float, 1.0, "seconds every agent must wait with nothing changing "
            "to be a deadlock", 0.05, 3600.0, sweep=0.3, metavar="S"),
    Setting("wait_policy", str, "adaptive", "how a blocked TWAIT uses the CPU",
            choices=WAIT_POLICIES),
    Setting("spin_us", float, 50.0, "the adaptive wait policy's spin budget, microseconds",
            0.0, 1e6, metavar="US"),
    Setting("switch_interval", float, 0.001, "sys.setswitchinterval in rank processes (finer "
            "block interleaving)", 1e-6, 1.0, metavar="S"),
    Setting("pin_ranks", bool, True, "with at least as many ranks as CPUs the launcher may use, "
            "pin each rank process to one of them, round robin, so that they stay spread evenly; "
            "in schedule mode (one agent at a time) every rank takes its turns on one CPU no "
            "other scheduled run holds, so that each hand-off of the turn stays on it, and sets "
            "up and ends on the others; its threads then run in the batch policy, so that an "
            "agent woken for its turn does not preempt the one passing it (the shm transport; "
            "the MPI transport leaves placement to mpiexec)"),
    Setting("seed", int, 0, "seed of the run's randomness (jitter, hazard models, schedules)",
            0, 2**63 - 1),
    Setting("mode", str, "eager", "eager: everything completes at once; hazard: queued pipes, "
            "delayed visibility and checkers; schedule: one agent at a time, in the order the "
            "strategy picks", choices=MODES),
    Setting("hazards", str, "all", "the hazard sub-models: all, none (schedule mode over eager "
            "semantics: interleavings only) or a comma list", check=_check_hazards,
            modes=("hazard", "schedule"), metavar="LIST",
            allowed="all or a comma list of " + ",".join(HAZARDS)),
    Setting("hazard_delay", float, 0.002, "mean seconds a queued pipe op or an unfenced remote "
            "store stays pending", 0.0, 60.0, modes=("hazard",), metavar="S"),
    Setting("trace", str, "", "write a Chrome trace JSON of the run to this path (Perfetto, or "
            "`shmcomm trace PATH`); '' = none", metavar="PATH"),
    # its help, metavar, check and allowed values are the strategies' registry's (describe)
    Setting("strategy", str, "random", "who runs each schedule-mode step", modes=SCHEDULE),
    Setting("replay", str, "", "run the schedule recorded in this file (implies schedule mode)",
            modes=SCHEDULE, metavar="FILE"),
    Setting("record", str, "", "write the run's schedule to this file (for replay)",
            modes=SCHEDULE, metavar="FILE"),
    Setting("schedule_delay", int, 16, "mean steps per live agent that unsynchronized work "
            "stays pending in schedule mode", 1, 1_000_000, modes=SCHEDULE, metavar="STEPS"),
    Setting("turn_timeout", float, 5.0, "schedule mode ends the run, naming the agent and its "
            "stack, when one agent holds the turn away from any scheduling point, asleep for "
            "this many seconds or running for four times as long", 0.1, 7 * 24 * 3600.0,
            modes=SCHEDULE, metavar="S"),
    Setting("livelock_seconds", float, 10.0, "schedule mode reports a poll loop as a livelock "
            "only once its unanswered polls (every agent that could step polling words nobody "
            "changed, past the step bound) went on for this many seconds: a bounded poll that "
            "gives up sooner passes", 0.05, WEEK_S, modes=SCHEDULE, metavar="S"),
    Setting("detect_races", bool, None, "run the happens-before race detector beside the mode: "
            "report two unordered conflicting accesses even when the data came out right "
            "(default: on in hazard and schedule mode, off in eager mode)",
            mode_defaults={"hazard": True, "schedule": True}),
    Setting("race_exitfirst", bool, False, "with detect_races: stop the run at the first race"),
    Setting("race_suppressions", str, "", "with detect_races: races to accept, as "
            "ThreadSanitizer's suppressions: a file of rules, or rules ('race:k.py:12 "
            "k.py:30', ';' between them); the run's summary lists what they suppressed",
            check=_check_suppressions, metavar="FILE|RULES"),
    Setting("transport", str, "shm", "shm: the launcher forks the ranks; mpi: every process "
            "mpiexec starts is one rank", choices=TRANSPORTS),
    Setting("mpi_peers", str, "shared", "mpi: map the windows of ranks on the same host, or "
            "reach every other rank by one-sided RMA only (the multi-host paths)",
            choices=MPI_PEERS),
    Setting("set_semantics", str, "store", "TNOTIFY's Set: a2a3's plain store, or pto-isa's "
            "proposed read-then-add", choices=SET_SEMANTICS),
    Setting("target", str, "a2a3", "the NPU the kernels are built for: a2a3 (asynchronous "
            "copies on SDMA only) or a5 (Ascend950: TPUT_ASYNC / TGET_ASYNC may also name "
            "DmaEngine.URMA, as pto-isa's URMA suites do)", choices=TARGETS),
)
BY_NAME: dict[str, Setting] = {s.name: s for s in SETTINGS}
# the older view of the table: name -> (type, low, high) for numbers, (str, choices) for strings
_FIELDS: dict[str, tuple] = {s.name: (s.type, s.low, s.high) if s.low is not None
                             else (s.type, s.choices) for s in SETTINGS}
# settings that only some modes read, and those modes
MODE_ONLY = {s.name: s.modes for s in SETTINGS if s.modes != MODES}
# variables that are no setting of a run: SHMCOMM_FULL_STACKS=1 shows every frame of a report's
# stacks (shmcomm's and the test runner's too); SHMCOMM_PTO_ISA names the pto-isa checkout that
# shmcomm.native.load(..., pto_isa=True) builds against (read before any run exists)
OTHER_ENV: frozenset[str] = frozenset({"SHMCOMM_FULL_STACKS", "SHMCOMM_PTO_ISA"})
_KNOWN_ENV = frozenset(s.env for s in SETTINGS) | OTHER_ENV  # every name a variable may have


def _post_init(self: Any) -> None:
    for s in SETTINGS:
        s.validate(getattr(self, s.name), s.name)
    for s in SETTINGS:  # once every value is checked (a default may depend on another setting)
        if getattr(self, s.name) is None and s.mode_defaults is not None:  # the mode's default
            auto = s.mode_defaults.get(self.mode, False)
            if s.name == "detect_races" and self.transport != "shm":
                auto = False  # the detector's launcher side exists for the shm launcher only
            object.__setattr__(self, s.name, auto)
            # remembered, so that replace(mode=...) works the default out again
            object.__setattr__(self, "_auto", getattr(self, "_auto", frozenset()) | {s.name})
    check_block_threads(self.nranks, self.blocks, "blocks")


def _from_kwargs(cls: type, env: Mapping[str, str] | None = None, **kwargs: Any) -> Any:
    """Build a Config from ``SHMCOMM_*`` environment variables overlaid by ``kwargs``.

    ``None`` values in ``kwargs`` mean "not given". Unknown keys raise ArgumentError.
    """
    unknown = sorted(set(kwargs) - set(BY_NAME))
    if unknown:
        raise ArgumentError(f"unknown configuration key(s) {', '.join(unknown)}; "
                            f"known: {', '.join(sorted(BY_NAME))}")
    env = shmcomm_env(env)  # (one scan of the environment for both readers below)
    values = from_env(env)
    given = {k: v for k, v in kwargs.items() if v is not None}
    values.update(given)
    cfg = cls(**values)
    _warn_ineffective(cfg, env, given)
    return cfg


def _replace(self: Any, **changes: Any) -> Any:
    """A copy with ``changes`` applied (checked like the original); a setting left to its
    mode's default is worked out again for the copy's mode."""
    for name in getattr(self, "_auto", ()):
        changes.setdefault(name, None)
    return dataclasses.replace(self, **changes)


def races_on(detect_races: bool | None, mode: str) -> bool:
    """Whether the race detector runs: ``detect_races``, or when not given (``None``) the
    default of ``mode`` (on in hazard and schedule mode, where a missing edge is the bug hunted)."""
    if detect_races is not None:
        return detect_races
    return bool((BY_NAME["detect_races"].mode_defaults or {}).get(mode, False))


def _config_doc() -> str:
    rows = "\n".join(f"``{s.name}`` ({s.range_text()}; default {s.default!r}): {s.help}."
                     for s in SETTINGS)
    return ("Settings of one run, one field per row of :data:`SETTINGS`; each also reads "
            "``SHMCOMM_<NAME>``.\n\n" + rows)


class ConfigShape:
    """The generated :class:`Config` as type checkers see it: its fields (kept equal to
    :data:`SETTINGS` by a test) and methods. Never instantiated."""

    nranks: int
    blocks: int
    signal_bytes: int
    heap_bytes: int
    ub_bytes: int
    timeout: float
    wait_timeout: float
    deadlock_grace: float
    wait_policy: str
    spin_us: float
    switch_interval: float
    pin_ranks: bool
    seed: int
    mode: str
    hazards: str
    hazard_delay: float
    trace: str
    strategy: str
    replay: str
    record: str
    schedule_delay: int
    turn_timeout: float
    livelock_seconds: float
    detect_races: bool | None
    race_exitfirst: bool
    race_suppressions: str
    transport: str
    mpi_peers: str
    set_semantics: str
    target: str

    def __init__(self, **values: Any) -> None: ...

    @classmethod
    def from_kwargs(cls, env: Mapping[str, str] | None = None, **kwargs: Any) -> Config:
        raise NotImplementedError

    def replace(self, **changes: Any) -> Config:
        raise NotImplementedError


if TYPE_CHECKING:
    Config = ConfigShape
else:
    Config = dataclasses.make_dataclass(
        "Config", [(s.name, s.type if s.mode_defaults is None else s.type | None,
                    dataclasses.field(default=s.default)) for s in SETTINGS],
        frozen=True,
        namespace={"__post_init__": _post_init, "from_kwargs": classmethod(_from_kwargs),
                   "replace": _replace, "__doc__": _config_doc()})
    Config.__module__ = __name__  # pickles (a rank process rebuilds it) by this module's name


def from_env(env: Mapping[str, str] | None = None, names: Iterable[str] | None = None
             ) -> dict[str, Any]:
    """The settings that ``SHMCOMM_*`` variables give (parsed and checked), by name."""
    found = shmcomm_env(env)
    out: dict[str, Any] = {}
    if not found:
        return out
    for name in BY_NAME if names is None else names:
        s = BY_NAME[name]
        raw = found.get(s.env)
        if raw is not None and raw != "":
            out[name] = s.parse(raw, f"environment variable {s.env}")
    return out


def shmcomm_env(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """The ``SHMCOMM_*`` variables of ``env`` (default: the environment), in one scan: a
    lookup per setting in ``os.environ`` encodes every key, and even a scan decodes every name,
    so the process environment's names are matched undecoded."""
    if env is None or env is os.environ:
        data = getattr(os.environ, "_data", None)  # (CPython: the encoded names and values)
        if isinstance(data, dict):
            return {os.fsdecode(k): os.fsdecode(v) for k, v in data.items()
                    if isinstance(k, bytes) and k.startswith(b"SHMCOMM_")}
        env = os.environ
    return {k: env[k] for k in env if k.startswith("SHMCOMM_")}


def check_block_threads(nranks: int, blocks: int, label: str) -> None:
    """Raise unless ``nranks x blocks`` block threads stay within ``MAX_BLOCK_THREADS``."""
    if nranks * blocks > MAX_BLOCK_THREADS:
        raise ArgumentError(
            f"{label}: nranks x blocks = {nranks} x {blocks} = {nranks * blocks} block threads, "
            f"more than {MAX_BLOCK_THREADS}; each block is an OS thread and so many of them "
            "cannot finish a barrier in reasonable time (64 x 64 did not finish one in 170 s on "
            "2 cores); lower blocks or nranks")


def parse_hazards(value: str, label: str = "hazards") -> frozenset[str]:
    """The set of sub-model names in ``value`` (``"all"``, ``"none"``: no sub-model, or a comma
    list of ``HAZARDS``). Every block model asks at every launch: the answers are kept."""
    got = _HAZARD_SETS.get(value)
    if got is None:
        got = _HAZARD_SETS[value] = _parse_hazards(value, label)
    return got


_HAZARD_SETS: dict[str, frozenset[str]] = {}


def _parse_hazards(value: str, label: str) -> frozenset[str]:
    if value.strip() == "all":
        return frozenset(HAZARDS)
    if value.strip() == "none":  # schedule mode over eager semantics: interleavings only
        return frozenset()
    names = [n.strip() for n in value.split(",")]
    bad = [n for n in names if n not in HAZARDS]
    if bad or not names:
        raise ArgumentError(f"{label} must be 'all' or a comma list of {', '.join(HAZARDS)} "
                            f"(or 'none'); got {value!r}")
    return frozenset(names)


def warn_unknown_env(env: Any = None, stacklevel: int = 2) -> None:
    """Warn about every ``SHMCOMM_*`` environment variable that is no setting (a misspelling is
    otherwise silently ignored), with the nearest known name."""
    known = _KNOWN_ENV
    for var in sorted(v for v in shmcomm_env(env) if v not in known):
        near = difflib.get_close_matches(var, known, n=1)
        hint = f"; did you mean {near[0]}?" if near else f"; known: {', '.join(sorted(known))}"
        warnings.warn(f"unknown environment variable {var} is ignored{hint}", ShmcommWarning,
                      stacklevel=stacklevel + 1)


def _warn_ineffective(cfg: Config, env: Any, given: dict[str, Any]) -> None:
    """Warn about settings that would be silently ignored: unknown ``SHMCOMM_*`` variables (with
    the nearest known name) and hazard-mode settings of a run in another mode."""
    warn_unknown_env(env, stacklevel=4)
    for name, modes in MODE_ONLY.items():
        if cfg.mode not in modes:
            var = "SHMCOMM_" + name.upper()
            if name in given:
                if given[name] == getattr(Config, name):
                    continue  # the default, spelled out (a test over both modes): nothing lost
                how = f"{name}={given[name]!r}"
            elif env.get(var):
                how = f"{var}={env[var]}"
            else:
                continue
            warnings.warn(f"{how} has no effect in {cfg.mode} mode (only {' and '.join(modes)} "
                          f"mode reads it)", ShmcommWarning, stacklevel=4)


def describe(name: str, **words: Any) -> None:
    """Let the registry that owns a setting's values describe them (``help``, ``metavar``,
    ``check``, ``allowed``): the table, ``--help`` and the errors then read its words. The
    registry calls it when it is imported, which ``import shmcomm`` does before any setting is
    read."""
    global SETTINGS
    row = BY_NAME[name] = dataclasses.replace(BY_NAME[name], **words)
    SETTINGS = tuple(row if s.name == name else s for s in SETTINGS)
    if not TYPE_CHECKING:
        Config.__doc__ = _config_doc()


def _check(name: str, value: Any, label: str) -> None:
    """Check ``value`` against the row ``name`` of the table (the older entry point)."""
    BY_NAME[name].validate(value, label)


# --- the command lines: options from the table, and the writer that gives them back -------------

class _OptionValue:
    """argparse ``type=`` of a setting: parses and checks at once, so a bad value is a usage
    error (exit 2) naming the option and the range before anything runs; ``many``: a comma
    list of values."""

    def __init__(self, s: Setting, flag: str, many: bool) -> None:
        self.s, self.flag, self.many = s, flag, many
        self.__name__ = s.type.__name__  # argparse names the type in its messages

    def __call__(self, text: str) -> Any:
        try:
            if not self.many:
                return self.s.parse(text, self.flag)
            items = text.split(",")
            if not text.strip() or any(not i.strip() for i in items):
                raise ArgumentError(f"{self.flag} takes a comma list of {self.s.range_text()} "
                                    f"without empty items; got {text!r}")
            return tuple(dict.fromkeys(self.s.parse(i.strip(), self.flag) for i in items))
        except ArgumentError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None


def option_type(name: str, flag: str, many: bool = False) -> Callable[[str], Any]:
    """The argparse ``type=`` of setting ``name`` under option ``flag`` (``many``: a comma list)."""
    return _OptionValue(BY_NAME[name], flag, many)


def add_options(p: Any, names: Iterable[str], *, many: Iterable[str] = (),
                defaults: Mapping[str, Any] | None = None, env: bool = True,
                help_extra: Mapping[str, str] | None = None) -> None:
    """Add the options of the settings ``names`` to parser (or group) ``p``, from the table.

    Every option's value defaults to ``None`` ("not given": the environment or the command's own
    default decides); ``defaults`` are the command's own defaults, shown in the help; ``many``
    names the settings that take a comma list (a sweep's axes); ``help_extra`` adds a sentence.
    """
    many, defaults, help_extra = set(many), defaults or {}, help_extra or {}
    for name in names:
        s = BY_NAME[name]
        flags = ([s.short] if s.short else []) + [s.flag]
        dflt = defaults.get(name, s.default)
        shown = (",".join(map(str, dflt)) if isinstance(dflt, tuple) else
                 "none" if dflt == "" else "per mode" if dflt is None else str(dflt).lower()
                 if isinstance(dflt, bool) else str(dflt))
        extra = f" {help_extra[name]}" if name in help_extra else ""
        text = (f"{s.help}{extra} ({'comma list, each ' if name in many else ''}"
                f"{s.range_text()}; default: {shown}" + (f", or {s.env}" if env else "") + ")")
        text = text.replace("%", "%%")
        if s.type is bool:
            p.add_argument(*flags, action=argparse.BooleanOptionalAction, default=None,
                           help=text)
        else:
            p.add_argument(*flags, type=_OptionValue(s, s.flag, name in many), default=None,
                           metavar=_metavar(s, name in many), help=text)


def _metavar(s: Setting, many: bool) -> str:
    if many:
        return "LIST"
    if s.choices:
        return "{" + ",".join(s.choices) + "}"
    return s.metavar or s.type.__name__.upper()


def given(ns: argparse.Namespace, names: Iterable[str]) -> dict[str, Any]:
    """The settings among ``names`` that the command line gave (not ``None``)."""
    return {n: getattr(ns, n) for n in names if getattr(ns, n, None) is not None}


def to_argv(values: Mapping[str, Any], defaults: Mapping[str, Any] | None = None) -> list[str]:
    """The options that give ``values`` back (in the table's order), leaving out those equal to
    ``defaults``: the one writer behind every printed command line. A tuple is a comma list."""
    defaults = defaults or {}
    out: list[str] = []
    for s in SETTINGS:
        if s.name not in values:
            continue
        v = values[s.name]
        if v is None or (s.name in defaults and defaults[s.name] == v):
            continue
        if s.type is bool:
            out.append(s.flag if v else "--no-" + s.flag[2:])
        elif isinstance(v, (tuple, list)):
            out += [s.flag, ",".join(map(_text, v))]
        else:
            out += [s.flag, _text(v)]
    return out


def _text(v: Any) -> str:
    """A value as an option's text: ``30`` rather than ``30.0``, full precision otherwise."""
    if isinstance(v, float) and v.is_integer() and abs(v) < 1e15:
        return str(int(v))
    return str(v)


def sweep_defaults(env: Mapping[str, str] | None = None, names: Iterable[str] | None = None
                   ) -> dict[str, Any]:
    """The sweeps' defaults of ``names`` (all settings), with ``SHMCOMM_*`` variables on top."""
    names = list(BY_NAME if names is None else names)
    out = {n: BY_NAME[n].sweep_default for n in names}
    out.update(from_env(env, names))
    return out


def markdown_table() -> str:
    """The settings table of the docs, rendered from :data:`SETTINGS`."""
    lines = ["| setting | option | environment | allowed | default | sweep default | modes "
             "| what |", "|---|---|---|---|---|---|---|---|"]
    for s in SETTINGS:
        opt = f"`{s.flag}`" + (f" `{s.short}`" if s.short else "")
        sweep = "" if s.sweep is _SAME else f"`{s.sweep!r}`"
        modes = "all" if s.modes == MODES else ", ".join(s.modes)
        lines.append(f"| `{s.name}` | {opt} | `{s.env}` | {s.range_text()} | `{s.default!r}` "
                     f"| {sweep} | {modes} | {s.help.replace('|', '/')} |")
    return "\n".join(lines)
