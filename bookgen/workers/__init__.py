"""Worker processes, the one place bookgen starts them.

- :mod:`bookgen.workers.pool`: spawned workers, each initialised once (its own
  engine or model), behind the :class:`~bookgen.workers.pool.TaskRunner`
  interface (grow, refine search, self-play, matches);
- :mod:`bookgen.workers.forked`: a function mapped over tasks by forked
  processes that inherit this one's memory (import, refine minimax, refine
  search's index, starts);
- :mod:`bookgen.workers.isolated`: one child process serving requests, so
  that code that may crash or hang (cshogi's record parsers) costs only the
  request;
- :mod:`bookgen.workers.runcontrol`: a long run's side of it: waiting for work
  in flight without making Ctrl-C wait, and counting only what was committed.

Workers ignore Ctrl-C (:func:`bookgen.signals.ignore_interrupts`) and die with
the main process (:mod:`bookgen.children`).
"""
