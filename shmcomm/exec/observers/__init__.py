"""The observers a run can ask for by name (``shmcomm.run(..., observers=[NAME])``,
``launch --observe NAME``, ``Pool.run(..., observers=...)``).

An observer watches a run without changing it (:mod:`shmcomm.core.observer`). To add one:
write its :class:`~shmcomm.core.observer.Observer` (and its rank and block parts) in a module
of its own, here or anywhere, and add one line to :data:`OBSERVERS`. A user's own observer
class (or instance) may be passed to ``observers=`` without registering it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ...core.observer import Observer
from ...errors import ArgumentError
from .notify_count import NotifyCount

# name -> the class (or a factory taking the run's Config) of each observer runs can ask for
OBSERVERS: dict[str, Callable[[Any], Observer]] = {
    NotifyCount.name: NotifyCount,
}


def make_observer(spec: Any, config: Any) -> Observer:
    """The run's observer for ``spec``: a registered name, an :class:`Observer` subclass
    (made with ``config``) or an instance (used as it is)."""
    if isinstance(spec, Observer):
        return spec
    if isinstance(spec, type) and issubclass(spec, Observer):
        return spec(config)
    if isinstance(spec, str) and spec in OBSERVERS:
        return OBSERVERS[spec](config)
    raise ArgumentError(f"observers: each entry must be one of {', '.join(sorted(OBSERVERS))}, "
                        f"an Observer subclass or an Observer instance; got {spec!r}")


__all__ = ["OBSERVERS", "NotifyCount", "make_observer"]
