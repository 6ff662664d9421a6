"""Ctrl-C while the ``bookgen`` command starts: a quiet exit with code 130.

Loading the command line (click) and, once click has parsed the options of
a command, numpy and cshogi (:func:`bookgen.cli.support.reports_errors`) takes
a few tenths of a second. A Ctrl-C then would end bookgen with a
``KeyboardInterrupt`` traceback (or an ``ImportError`` when it lands inside an
extension module's import), and one while click parses the options with
"Aborted!" and exit code 1.
:func:`quit_on_ctrl_c`, called by the entry points before anything heavy is
imported, makes a Ctrl-C exit at once with one line and code 130;
:func:`command_started` (called by
:func:`bookgen.cli.support.reports_errors`) hands Ctrl-C back to Python once
the command runs, where it stops the command cleanly. Importing bookgen as a
library changes no signal handler.

Standard library only, so that it is in place before anything heavy is loaded.
"""

from __future__ import annotations

import os
import signal
import threading
from types import FrameType

INTERRUPTED_EXIT = 130
"""The exit code of every command stopped by Ctrl-C (128 + SIGINT, as shells use)."""


def _quit(_signum: int, _frame: FrameType | None) -> None:
    os.write(2, b"bookgen: interrupted\n")
    os._exit(INTERRUPTED_EXIT)  # nothing to clean up yet; no exception to be mangled


def quit_on_ctrl_c() -> None:
    """Until :func:`command_started`, Ctrl-C exits quietly with code 130 (unless
    SIGINT is ignored or has a handler of the caller's own)."""
    if threading.current_thread() is threading.main_thread() and \
            signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        signal.signal(signal.SIGINT, _quit)


_interrupted = False


def _interrupt(_signum: int, _frame: FrameType | None) -> None:
    global _interrupted
    _interrupted = True
    raise KeyboardInterrupt


def command_started() -> None:
    """From here on Ctrl-C raises ``KeyboardInterrupt`` again, and is remembered
    (:func:`interrupted`)."""
    global _interrupted
    if threading.current_thread() is threading.main_thread() and \
            signal.getsignal(signal.SIGINT) is _quit:
        _interrupted = False
        signal.signal(signal.SIGINT, _interrupt)


def interrupted() -> bool:
    """Whether a Ctrl-C came since :func:`command_started`. A Ctrl-C inside the
    import of an extension module (a command loading pandas, for example) comes
    out as an ``ImportError``, not a ``KeyboardInterrupt``: the command line
    asks this to tell such an error from a real one."""
    return _interrupted
