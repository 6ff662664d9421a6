"""Worker processes.

- :mod:`bookgen.workers.pool`: spawned workers, each initialised once (its own
  engine or model), behind the :class:`~bookgen.workers.pool.TaskRunner`
  interface (grow, refine search, self-play, matches).

Workers ignore Ctrl-C (:func:`bookgen.signals.ignore_interrupts`) and die with
the main process (:mod:`bookgen.children`).
"""
