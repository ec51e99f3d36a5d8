"""Starting and supervising a run: the ``python -m shmcomm.launch`` command line
(:mod:`.cli`), the launcher that forks, watches and cleans up (:mod:`.supervisor`), the pool of
rank processes that serves many runs (:mod:`.pool`), the deadlock
watch (:mod:`.deadlock`), the stale-segment cleanup (:mod:`.cleanup`) and the default job
(:mod:`.programs`)."""

from .supervisor import run as run
