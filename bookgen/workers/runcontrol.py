"""Long runs (grow, refine search, self-play, matches): waiting for work in
flight without making Ctrl-C wait, and counting only what was committed.

Ctrl-C stops a run within seconds, whatever its engines do: while the run
waits for work in flight (:func:`collect_or_abandon`), the work is abandoned
at once: the worker processes are killed, or this process's engines closed
(killed if they do not quit at once). What was finished and recorded stays;
the command says what it dropped and exits with code 130
(:func:`bookgen.cli.support.exit_if_interrupted`); rerunning it continues.
Elsewhere (recording a result, committing) Ctrl-C only sets the stop event
(:func:`bookgen.signals.stop_on_interrupt`), and the run stops at its next
wait. Marking the runs of dead processes is the store's
(:func:`bookgen.store.runs.mark_dead_runs`).
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TypeVar

from bookgen.signals import Interrupted, RunStop
from bookgen.workers.pool import TaskRunner

__all__ = ["collect_or_abandon", "in_flight", "shut_down", "uncounted_on_failure"]

R = TypeVar("R")
T = TypeVar("T")


def collect_or_abandon(runner: TaskRunner[T, R], stop: RunStop) -> list[R] | None:
    """``runner.collect()``; None when Ctrl-C came (before or while waiting): the
    runner is then terminated, its tasks in flight abandoned and its engines
    killed."""
    try:
        with stop.abortable():
            return runner.collect()
    except Interrupted:
        runner.terminate()
        return None


def shut_down(runner: TaskRunner[T, R] | None, *, abandon: bool) -> None:
    """End a run's runner: terminate it when the run failed or was interrupted
    (``abandon``: tasks in flight dropped, engines killed), else close it (its
    engines quit)."""
    if runner is None:
        return
    if abandon:
        runner.terminate()
    else:
        runner.close()


def in_flight(count: int, noun: str) -> str:
    """``"2 expansions in flight dropped"``, for a run's stop reason."""
    return f"{count} {noun}{'' if count == 1 else 's'} in flight dropped"


@contextmanager
def uncounted_on_failure(*counters: object) -> Iterator[None]:
    """For recording one result: the run's counters (dataclass instances) are
    updated in the block and written in the same transaction as the result.
    If the block raises (a full disk: the transaction rolled back), they get
    their values back, so that the run's last row does not count work that
    was not committed."""
    saved = [copy.deepcopy(vars(counter)) for counter in counters]
    try:
        yield
    except BaseException:
        for counter, values in zip(counters, saved):
            vars(counter).update(values)
        raise
