"""Schedule-mode strategies: one module each, and one line each in :data:`STRATEGIES`.

A strategy is built in the launcher (``make``), seeds the run's shared state once before the
ranks fork (``new_execution``) and then, in whichever process holds the turn, picks the agent of
each step (``next_agent``) from the enabled ones. Its state lives in the shared area
(:class:`~shmcomm.exec.schedule.scheduler.Shared`), never in a process, so every process
continues one deterministic sequence. ``next_u64`` is the shared PRNG (splitmix64).

The registry owns what the rest of shmcomm says about strategies: the spec grammar
(``NAME[:ARG...]``, each class's ``params``), the ``strategy`` setting's help, metavar and
allowed values (the settings table, ``--help`` and the errors read them from here), and
``run(strategy=...)`` takes a strategy object too. A new strategy is its module (a class with
``name``, ``params``, ``help``, ``runs``, ``from_spec`` and the two methods) and its line below.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ....config import Config, describe
from ....errors import ArgumentError
from .base import Param, Strategy, next_u64, seed_rng
from .exhaustive import Exhaustive
from .pct import PCT
from .random import RandomWalk
from .replay import Replay

# name -> strategy class, in the order --help lists them
STRATEGIES: dict[str, Any] = {
    RandomWalk.name: RandomWalk,
    PCT.name: PCT,
    Exhaustive.name: Exhaustive,
    Replay.name: Replay,
}


def _spec(cls: Any) -> str:
    """``pct[:D[:K]]``: the class's spec with its optional arguments."""
    return cls.name + "".join(f"[:{p.letter}" for p in cls.params) + "]" * len(cls.params)


def allowed() -> str:
    """Every spec, in words (the errors and the settings table)."""
    specs = [_spec(c) + (f" ({', '.join(p.text() for p in c.params)})" if c.params else "")
             for c in STRATEGIES.values()]
    return ", ".join(specs[:-1]) + " or " + specs[-1]


def parse_strategy(value: str, label: str = "strategy") -> tuple[str, tuple[int, ...]]:
    """``(name, args)`` of a strategy spec (every argument given or defaulted); ArgumentError
    naming ``label`` and every allowed spec for one that is not."""
    name, _, rest = value.strip().partition(":")
    cls = STRATEGIES.get(name)
    parts = rest.split(":") if rest else []
    if cls is None or len(parts) > len(cls.params):
        raise ArgumentError(f"{label} must be one of {allowed()}; got {value!r}")
    args = []
    for i, p in enumerate(cls.params):
        try:
            v = int(parts[i]) if i < len(parts) else p.default
        except ValueError:
            v = p.low - 1
        if not p.low <= v <= p.high:
            raise ArgumentError(f"{label}: {_spec(cls)} takes "
                                f"{' and '.join(q.text() for q in cls.params)}; got {value!r}")
        args.append(v)
    return name, tuple(args)


def make(config: Config, choices: Sequence[int] | None = None) -> Strategy:
    """The strategy of ``config`` (``choices``: the schedule a replay follows)."""
    if config.replay or choices is not None:
        return Replay(list(choices or ()))
    name, args = parse_strategy(config.strategy)
    cls = STRATEGIES[name]
    if cls.runs == "many":
        raise ArgumentError(f"strategy: '{name}' runs many schedules, not one: use python -m "
                            f"shmcomm.stress --strategy {_spec(cls)} (or "
                            "shmcomm.stress.explore.explore)")
    if cls.runs == "file":
        raise ArgumentError(f"strategy: '{name}' needs a schedule file (replay=PATH / --replay "
                            "FILE)")
    return cls.from_spec(*args)


def _check(value: str, label: str) -> None:
    parse_strategy(value, label)


# the strategy setting's words are the registry's (the table, --help and its errors read them)
describe("strategy", check=_check, allowed=allowed(),
         help="who runs each schedule-mode step: "
              + "; ".join(f"{_spec(c)}: {c.help}" for c in STRATEGIES.values()),
         metavar="|".join(_spec(c) for c in STRATEGIES.values() if c.runs != "file"))

__all__ = ["STRATEGIES", "Param", "Strategy", "allowed", "make", "next_u64", "parse_strategy",
           "seed_rng"]
