"""Execution models: how a block's instructions execute (see :mod:`shmcomm.core.model`).

A run's execution is a semantics (``eager``: everything completes at issue, as pto-isa's CPU
simulator; ``hazard``: queued pipes, delayed visibility, the line model, jitter,
:mod:`shmcomm.exec.hazard`), an interleaving (free threads, or one agent at a time under a
replayable strategy, :mod:`shmcomm.exec.schedule`) and observers (the race detector
:mod:`shmcomm.exec.races`, on by default in hazard and schedule mode; the trace
:mod:`shmcomm.exec.trace`; the hazard checkers).
:func:`compose` builds the run's :class:`~shmcomm.core.model.RunModel` from its configuration,
once, in the launcher; :class:`Execution` is what it decided (:mod:`shmcomm.exec.compose`).
"""

from __future__ import annotations

from .compose import Execution, compose

model_for = compose  # the former name

__all__ = ["Execution", "compose", "model_for"]
