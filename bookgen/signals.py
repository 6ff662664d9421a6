"""Signals: how bookgen's processes treat Ctrl-C.

The terminal sends Ctrl-C (SIGINT) to the whole process group: to bookgen and
to every worker process it started. Only the main process decides what a
Ctrl-C stops; a worker ignores it (:func:`ignore_interrupts`) and is stopped
by its parent.
"""

from __future__ import annotations

import signal

__all__ = ["ignore_interrupts"]


def ignore_interrupts() -> None:
    """Ignore Ctrl-C (SIGINT) in this process from now on: for worker processes,
    whose parent decides what to stop."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
