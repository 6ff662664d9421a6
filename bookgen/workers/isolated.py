"""One child process serving requests, for code that may crash or hang.

Some C++ code (cshogi's CSA parser, on some malformed records) crashes the
whole interpreter instead of raising. :class:`IsolatedWorker` runs such a
function in a child process that answers one request at a time over a pipe: a
crash (:class:`WorkerCrashed`) or a request that takes longer than the timeout
(:class:`WorkerTimeout`, the child is killed) costs only that request, and the
next call starts a new child.

The child is forked (fast) when this process runs no other thread and has not
loaded torch (whose thread pools do not survive a fork), else spawned; it
ignores Ctrl-C (the parent decides, and stops it) and dumps no traceback when
it crashes (pytest and ``python -X faulthandler`` enable one): a crash is
expected here, and reported by the parent.
"""

from __future__ import annotations

import faulthandler
import multiprocessing
import sys
import threading
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any, Generic, TypeVar

from bookgen.signals import ignore_interrupts

__all__ = ["IsolatedWorker", "WorkerCrashed", "WorkerFailed", "WorkerTimeout"]

Q = TypeVar("Q")
A = TypeVar("A")


class WorkerFailed(Exception):
    """The child gave no answer to a request."""


class WorkerTimeout(WorkerFailed):
    """The child did not answer within the timeout; it was killed."""


class WorkerCrashed(WorkerFailed):
    """The child died (or broke the pipe) before answering; ``exitcode`` says how."""

    def __init__(self, message: str, exitcode: int | None) -> None:
        super().__init__(message)
        self.exitcode = exitcode


def _serve(conn: Connection, handler: Callable[[Any], Any]) -> None:
    """The child's loop: a request in, ``handler(request)`` out; None ends it."""
    ignore_interrupts()  # the parent handles Ctrl-C and stops us
    # A crash here is expected and reported by the parent: no traceback dump.
    faulthandler.disable()
    while True:
        try:
            request = conn.recv()
        except (EOFError, OSError):
            return
        if request is None:
            return
        conn.send(handler(request))


def _context() -> Any:
    # fork is fast; spawn when forking is unsafe (threads, torch's thread pools).
    if ("fork" in multiprocessing.get_all_start_methods() and threading.active_count() == 1
            and "torch" not in sys.modules):
        return multiprocessing.get_context("fork")
    return multiprocessing.get_context("spawn")


class IsolatedWorker(Generic[Q, A]):
    """``handler`` (a module-level function; requests and answers are pickled, and
    a request may not be None) run in a child process, started on the first
    :meth:`call` and again after a crash or a timeout. ``timeout_s`` is the longest
    wait for one answer; ``name`` names the child process."""

    def __init__(self, handler: Callable[[Q], A], *, timeout_s: float, name: str) -> None:
        self.handler = handler
        self.timeout_s = timeout_s
        self.name = name
        self._process: Any = None
        self._conn: Connection | None = None

    def __enter__(self) -> IsolatedWorker[Q, A]:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _start(self) -> Connection:
        context = _context()
        parent, child = context.Pipe()
        process = context.Process(target=_serve, args=(child, self.handler), daemon=True,
                                  name=self.name)
        process.start()
        child.close()
        self._process, self._conn = process, parent
        return parent

    def _stop(self) -> int | None:
        process, conn = self._process, self._conn
        self._process = self._conn = None
        if conn is not None:
            conn.close()
        if process is None:
            return None
        process.join(0.5)
        if process.is_alive():
            process.kill()
            process.join()
        return process.exitcode

    def call(self, request: Q) -> A:
        """``handler(request)`` as the child computed it; raises
        :class:`WorkerTimeout` or :class:`WorkerCrashed` (the child is gone then)."""
        conn = self._conn or self._start()
        answered = timed_out = False
        answer: Any = None
        try:
            conn.send(request)
            if conn.poll(self.timeout_s):
                answer = conn.recv()
                answered = True
            else:
                timed_out = True
        except (EOFError, OSError):
            pass
        if not answered:
            code = self._stop()
            if timed_out:
                raise WorkerTimeout(f"{self.name}: no answer within {self.timeout_s:g} s")
            raise WorkerCrashed(f"{self.name}: the child process died (exit code {code})",
                                code)
        return answer

    def close(self) -> None:
        """Ask the child to end, then make sure it has."""
        if self._conn is not None:
            try:
                self._conn.send(None)
            except OSError:
                pass
        self._stop()
