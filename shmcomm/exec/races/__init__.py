"""The happens-before race detector (``shmcomm.run(..., detect_races=True)``).

It reports two accesses to the same bytes of a window or UB tile, at least one a write and not
both atomic, that no synchronization of the kernel API orders, whether or not the data came
out wrong in this run: vector clocks per block pipe and host (:mod:`.clocks`), range records
checked in the launcher (:mod:`.shadow`), and reports with both sites and the missing edge
(:mod:`.report`). One module per process side: :mod:`.launcher` (the run model, made before
the ranks fork; it reads the records and reports), :mod:`.rank` (each rank's model: launches,
the host, SYNCALL, the outbox) and :mod:`.block` (each block's clocks and accesses). It works
with every mode (eager, hazard, ...): it observes, it does not execute.

Happens-before edges (see :mod:`.clocks` for the components):

* ``TNOTIFY`` releases the scalar unit's clock into the word's clock; ``TWAIT`` (when it
  returns) and ``TTEST`` acquire it. A notify releases only what the scalar unit knows: pipe
  work it has not drained (``pipe_barrier``, ``wait_flag``) is not in it, and MTE3 stores are
  visible to other ranks only through ``G3``, which only ``dsb(DSB_DDR)`` / ``dsb(DSB_ALL)``
  advances (to what was drained).
* ``TLOAD`` / ``TSTORE`` run on MTE2 / MTE3 after what the scalar unit issued before them;
  ``set_flag(src, dst, e)`` -> ``wait_flag(src, dst, e)`` orders ``src``'s earlier work before
  ``dst``'s later work; ``pipe_barrier`` orders the pipe's work before the scalar unit.
* A launch's blocks start after their host's clock; the host continues after all of them
  (the kernel's end drains and fences); ``rt.barrier()`` joins every host's clock. A stream
  launch starts after the host's clock at its issue and after its stream's previous launch;
  the host acquires its end only at ``synchronize()`` / ``Launch.wait()`` (or a
  ``Launch.done`` that returned True).
* ``SYNCALL`` (hard and soft): every participant's clock at its arrival joins, and each
  acquires the join when it leaves.
* Scalar atomics on an int32 word (``gm_atomic_store``, ``gm_atomic_add``, ``st_atomic``)
  release into the word's clock; ``gm_load``, ``TWAIT`` and ``TTEST`` that read the word acquire
  it (an int32 ``gm_load`` is an atomic read: it does not race with the atomics).
* ``TPUT_ASYNC`` / ``TGET_ASYNC``: the copy's reads and writes run on the block's DMA engine
  clock, after what the scalar unit issued before it; ``AsyncEvent.Wait`` and a ``Test`` that
  returned True acquire it (and the session's earlier copies); no pipe_barrier or dsb does.

Accesses (:mod:`.shadow`): the GM ranges of ``TLOAD`` / ``TSTORE`` (so of ``TPUT``, ``TGET`` and
the root collectives, which run through them), the UB tile they fill or read, the DMA copies,
scalar GM accesses and the host's stores into and reads of symmetric arrays (the accesses
:class:`~shmcomm.core.heap.SymmetricArray` shows its observers: ``x[...] = v``, element reads,
ufuncs, ``np.array_equal``; not ``np.asarray(x)``, ``tolist()`` or ``bytes(x)``).
Each rank sends its records to the launcher at a launch's end once a few launches' worth have
gathered (at every launch's end with ``race_exitfirst``), with the host's own records, and at the
rank's end; the launcher checks them against everything recorded and raises
:class:`~shmcomm.errors.RaceReport` at the end of the run (at the first race with
``race_exitfirst``).
"""

from typing import Any

from .block import RaceBlockModel
from .launcher import RaceDetector
from .rank import RaceRankModel


def race_detector(config: Any) -> RaceDetector:
    """The run's detector (an observer), with its rank side."""
    return RaceDetector(config, RaceRankModel)


__all__ = ["RaceBlockModel", "RaceDetector", "RaceRankModel", "race_detector"]
