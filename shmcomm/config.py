"""The one strict configuration object of a run.

Every knob of a run lives in :class:`Config`, with its default and its allowed range written once
in ``_FIELDS``. Unknown keys are rejected, values are checked when the object is built, and every
field can also be set from the environment as ``SHMCOMM_<NAME>`` (a bad value raises and names
the variable). Explicit arguments win over the environment.
"""

from __future__ import annotations

import dataclasses
import difflib
import os
import warnings
from dataclasses import dataclass
from typing import Any

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
STRATEGIES = ("random", "pct", "replay", "exhaustive")
MAX_PCT_DEPTH = 16
TRANSPORTS = ("shm", "mpi")  # shmcomm.transports: shared memory (forked ranks) or MPI (mpiexec)
MPI_PEERS = ("shared", "rma")  # mpi: map the windows of the host's ranks, or reach all by RMA
# hazard-mode sub-models (shmcomm.exec.hazard); "all" turns every one on
HAZARDS = ("pipes", "visibility", "lines", "jitter", "checkers")
# what TNOTIFY(..., NotifyOp.Set) does: a2a3's plain store, or pto-isa's proposed read-then-add
SET_SEMANTICS = ("store", "read-add")
KiB, MiB, GiB = 1 << 10, 1 << 20, 1 << 30


@dataclass(frozen=True)
class Config:
    """Settings of one run; see the field table in ``_FIELDS`` for ranges.

    ``nranks``: rank processes. ``blocks``: default block threads per launch.
    ``signal_bytes`` / ``heap_bytes``: each rank window's signal matrix and data heap; the library
    kernels' regions take the matrix's first 36 KiB, the rest is the users' free range
    (``shmcomm.kernels.layout``, ``rt.signal_region``).
    ``ub_bytes``: per-block tile (UB) capacity, 192 KiB as on A2/A3.
    ``timeout``: whole run, seconds. ``wait_timeout``: one TWAIT's deadline, seconds.
    ``deadlock_grace``: how long "everyone waits, nothing changes" must last to be a deadlock.
    ``wait_policy``: how a blocked wait burns or yields the CPU. ``spin_us``: adaptive spin budget.
    ``switch_interval``: ``sys.setswitchinterval`` in rank processes (finer block interleaving).
    ``seed``: the run's seed (jitter and hazard models draw from it). ``mode``: eager or hazard.
    ``hazards``: the hazard-mode sub-models, ``"all"`` or a comma list of ``HAZARDS``.
    ``hazard_delay``: mean seconds a queued pipe op or an unfenced remote store stays pending.
    ``trace``: write a Chrome trace JSON of the run (Perfetto) to this path, in any mode ("" =
    none); in schedule mode the schedule's trace (one event per scheduling step).
    ``strategy``: schedule mode's choice of the next agent: ``random``, ``pct`` / ``pct:D``
    (depth D, default 3) or ``replay`` (needs ``replay``). ``replay``: a schedule file to run
    (implies ``strategy="replay"``). ``record``: write the run's schedule to this file.
    ``schedule_delay``: mean scheduling steps per live agent that queued pipe work or an unfenced
    remote store stays pending in schedule mode (the step clock replaces ``hazard_delay``).
    ``detect_races``: run the happens-before race detector beside the mode (``RaceReport``);
    ``None`` (the default): on in hazard and schedule mode, off in eager mode.
    ``race_exitfirst``: stop the run at the first race instead of reporting at its end.
    ``transport``: ``shm`` (the launcher forks the ranks) or ``mpi`` (every process that
    ``mpiexec`` starts is one rank and calls ``run`` itself). ``mpi_peers``: ``shared`` maps the
    windows of ranks on the same host; ``rma`` reaches every other rank through MPI's one-sided
    operations only, as if on another host (the multi-host paths, on one machine).
    ``set_semantics``: ``TNOTIFY``'s ``Set``: ``"store"`` (a2a3: a plain store of the word, whose
    cache line the ``lines`` hazard model writes back whole) or ``"read-add"`` (pto-isa's
    proposed change: read the word, then atomically add the difference; not atomic against
    another writer between the two).
    """

    nranks: int = 8
    blocks: int = 4
    signal_bytes: int = 64 * KiB
    heap_bytes: int = 64 * MiB
    ub_bytes: int = 192 * KiB
    timeout: float = 300.0
    wait_timeout: float = 60.0
    deadlock_grace: float = 1.0
    wait_policy: str = "adaptive"
    spin_us: float = 50.0
    switch_interval: float = 0.001
    seed: int = 0
    mode: str = "eager"
    hazards: str = "all"
    hazard_delay: float = 0.002
    trace: str = ""
    strategy: str = "random"
    replay: str = ""
    record: str = ""
    schedule_delay: int = 16
    detect_races: bool | None = None  # resolved in __post_init__ (races_on)
    race_exitfirst: bool = False
    transport: str = "shm"
    mpi_peers: str = "shared"
    set_semantics: str = "store"

    def __post_init__(self) -> None:
        if self.detect_races is None:  # kept apart so that replace(mode=...) resolves it again
            object.__setattr__(self, "detect_races", races_on(None, self.mode))
            object.__setattr__(self, "_races_auto", True)
        for f in dataclasses.fields(self):
            _check(f.name, getattr(self, f.name), f.name)
        check_block_threads(self.nranks, self.blocks, "blocks")

    @classmethod
    def from_kwargs(cls, env: dict[str, str] | None = None, **kwargs: Any) -> Config:
        """Build a Config from ``SHMCOMM_*`` environment variables overlaid by ``kwargs``.

        ``None`` values in ``kwargs`` mean "not given". Unknown keys raise ArgumentError.
        """
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(kwargs) - names)
        if unknown:
            raise ArgumentError(
                f"unknown configuration key(s) {', '.join(unknown)}; known: {', '.join(sorted(names))}"
            )
        env = os.environ if env is None else env
        values: dict[str, Any] = {}
        for name in names:
            raw = env.get("SHMCOMM_" + name.upper())
            if raw is not None and raw != "":
                values[name] = _parse_env(name, raw)
        given = {k: v for k, v in kwargs.items() if v is not None}
        values.update(given)
        cfg = cls(**values)
        _warn_ineffective(cfg, env, given)
        return cfg

    def replace(self, **changes: Any) -> Config:
        """A copy with ``changes`` applied (checked like the original)."""
        if getattr(self, "_races_auto", False):
            changes.setdefault("detect_races", None)
        return dataclasses.replace(self, **changes)


def races_on(detect_races: bool | None, mode: str) -> bool:
    """Whether the race detector runs: ``detect_races``, or when not given (``None``) in the
    modes that model the hardware's ordering (hazard, schedule), where a missing edge is the
    bug hunted."""
    return mode in ("hazard", "schedule") if detect_races is None else detect_races


# name: (type, low, high) for numbers, or (str, choices)
_FIELDS: dict[str, tuple] = {
    "nranks": (int, 1, MAX_RANKS),
    "blocks": (int, 1, MAX_BLOCKS),
    "signal_bytes": (int, 4 * KiB, 64 * MiB),
    "heap_bytes": (int, 0, 16 * GiB),
    "ub_bytes": (int, 1 * KiB, 64 * MiB),
    "timeout": (float, 0.1, 7 * 24 * 3600.0),
    "wait_timeout": (float, 0.01, 7 * 24 * 3600.0),
    "deadlock_grace": (float, 0.05, 3600.0),
    "wait_policy": (str, WAIT_POLICIES),
    "spin_us": (float, 0.0, 1e6),
    "switch_interval": (float, 1e-6, 1.0),
    "seed": (int, 0, 2**63 - 1),
    "mode": (str, MODES),
    "hazards": (str, None),
    "hazard_delay": (float, 0.0, 60.0),
    "trace": (str, None),
    "strategy": (str, None),
    "replay": (str, None),
    "record": (str, None),
    "schedule_delay": (int, 1, 1_000_000),
    "detect_races": (bool, False, True),
    "race_exitfirst": (bool, False, True),
    "transport": (str, TRANSPORTS),
    "mpi_peers": (str, MPI_PEERS),
    "set_semantics": (str, SET_SEMANTICS),
}


def _check(name: str, value: Any, label: str) -> None:
    spec = _FIELDS[name]
    if spec[0] is bool:
        if not isinstance(value, bool):
            raise ArgumentError(f"{label} must be a bool (True or False); got {value!r}")
        return
    if spec[0] is str:
        if not isinstance(value, str):
            raise ArgumentError(f"{label} must be a str; got {value!r}")
        if name == "hazards":
            parse_hazards(value, label)
            return
        if name == "strategy":
            parse_strategy(value, label)
            return
        if spec[1] is not None and value not in spec[1]:
            raise ArgumentError(f"{label} must be one of {', '.join(spec[1])}; got {value!r}")
        return
    kind, low, high = spec
    ok_type = isinstance(value, (int, float)) if kind is float else isinstance(value, int)
    if isinstance(value, bool) or not ok_type:
        raise ArgumentError(f"{label} must be {kind.__name__} in [{low}, {high}]; got {value!r}")
    if not low <= value <= high:
        raise ArgumentError(f"{label} must be in [{low}, {high}]; got {value!r}")
    if name == "signal_bytes" and value % 64:
        raise ArgumentError(f"{label} must be a multiple of 64 bytes; got {value}")


def check_block_threads(nranks: int, blocks: int, label: str) -> None:
    """Raise unless ``nranks x blocks`` block threads stay within ``MAX_BLOCK_THREADS``."""
    if nranks * blocks > MAX_BLOCK_THREADS:
        raise ArgumentError(
            f"{label}: nranks x blocks = {nranks} x {blocks} = {nranks * blocks} block threads, "
            f"more than {MAX_BLOCK_THREADS}; each block is an OS thread and so many of them "
            "cannot finish a barrier in reasonable time (64 x 64 did not finish one in 170 s on "
            "2 cores); lower blocks or nranks")


def parse_hazards(value: str, label: str = "hazards") -> frozenset[str]:
    """The set of sub-model names in ``value`` (``"all"`` or a comma list of ``HAZARDS``)."""
    if value.strip() == "all":
        return frozenset(HAZARDS)
    names = [n.strip() for n in value.split(",")]
    bad = [n for n in names if n not in HAZARDS]
    if bad or not names:
        raise ArgumentError(f"{label} must be 'all' or a comma list of {', '.join(HAZARDS)}; "
                            f"got {value!r}")
    return frozenset(names)


# settings that only some modes read, and those modes
MODE_ONLY = {"hazards": ("hazard", "schedule"), "hazard_delay": ("hazard",),
             "schedule_delay": ("schedule",)}
# SHMCOMM_* variables that are not Config fields but are read elsewhere (none today)
OTHER_ENV: frozenset[str] = frozenset()


def warn_unknown_env(env: Any = None, stacklevel: int = 2) -> None:
    """Warn about every ``SHMCOMM_*`` environment variable that is no setting (a misspelling is
    otherwise silently ignored), with the nearest known name."""
    env = os.environ if env is None else env
    known = {"SHMCOMM_" + f.name.upper() for f in dataclasses.fields(Config)} | OTHER_ENV
    for var in sorted(v for v in env if v.startswith("SHMCOMM_") and v not in known):
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


def parse_strategy(value: str, label: str = "strategy") -> tuple[str, int, int]:
    """``(name, depth, steps)`` of a strategy spec: ``random``, ``replay``, ``pct``, ``pct:D``
    or ``pct:D:K`` (depth D, default 3; K the steps a run is expected to take, 0 = default), or
    ``exhaustive[:K]`` (depth: the preemption bound K, default 1)."""
    name, _, rest = value.strip().partition(":")
    args = rest.split(":") if rest else []
    if name == "pct" and len(args) <= 2:
        try:
            depth = int(args[0]) if args else 3
            steps = int(args[1]) if len(args) > 1 else 0
        except ValueError:
            depth = steps = -1
        if not 1 <= depth <= MAX_PCT_DEPTH or not 0 <= steps <= 10**8:
            raise ArgumentError(f"{label}: pct:D[:K] takes a depth D in [1, {MAX_PCT_DEPTH}] and "
                                f"an expected step count K in [1, 1e8]; got {value!r}")
        return name, depth, steps
    if name == "exhaustive" and len(args) <= 1:
        try:
            bound = int(args[0]) if args else 1
        except ValueError:
            bound = -1
        if not 0 <= bound <= 8:
            raise ArgumentError(f"{label}: exhaustive:K takes a preemption bound K in [0, 8]; "
                                f"got {value!r}")
        return name, bound, 0
    if name not in STRATEGIES or args or name in ("pct", "exhaustive"):
        raise ArgumentError(f"{label} must be one of random, pct, pct:D, pct:D:K (D in [1, "
                            f"{MAX_PCT_DEPTH}]), exhaustive[:K] or replay; got {value!r}")
    return name, 0, 0


def _parse_env(name: str, raw: str) -> Any:
    var = "SHMCOMM_" + name.upper()
    kind = _FIELDS[name][0]
    if kind is bool:
        if raw.strip().lower() not in ("0", "1", "true", "false"):
            raise ArgumentError(f"environment variable {var}={raw!r} must be 0, 1, true or false")
        return raw.strip().lower() in ("1", "true")
    try:
        value = kind(raw) if kind is str else kind(float(raw)) if kind is float else int(raw, 0)
    except ValueError:
        raise ArgumentError(f"environment variable {var}={raw!r} is not a valid {kind.__name__}") from None
    _check(name, value, f"environment variable {var}")
    return value
