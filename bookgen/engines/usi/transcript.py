"""A game's USI transcript: every line its engines were sent and answered, timestamped.

A :class:`Transcript` is started with the game; each engine writes to its own
sink (:meth:`Transcript.sink`, a :data:`~bookgen.engines.usi.client.LineSink`
set as :attr:`UsiEngine.transcript <bookgen.engines.usi.client.UsiEngine.transcript>`),
from the thread that sends and the thread that reads. :meth:`Transcript.text`
renders one line per entry::

    # bookgen match 1a2b3c4d pair 3 ...           (notes, as given)
         12 fsf > position sfen ... moves 7g7f
        431 fsf < bestmove 3c3d ponder 2g2f
        512 gps ! info: 1234 nodes                     (a line it wrote to stderr)

milliseconds since the transcript began, the engine's name, ``>`` for a line
sent to the engine, ``<`` for a line received from its stdout and ``!`` for one
from its stderr (undecodable bytes and control characters escaped as ``\\xNN``).
:meth:`Transcript.save` writes it gzip-compressed, atomically (:mod:`bookgen.files`).
"""

from __future__ import annotations

import gzip
import os
import threading
import time
from collections.abc import Callable

from bookgen.engines.usi.client import LineSink
from bookgen.files import atomic_write
from bookgen.timestamps import utc_now

__all__ = ["Transcript"]


class Transcript:
    """Timestamped lines of one game's engines (thread-safe); see the module docstring.

    ``clock`` (seconds) times the entries; the default is the real one.
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.started = clock()
        self.started_at = utc_now()
        self.notes: list[str] = [f"started {self.started_at}"]
        self.entries: list[tuple[int, str, str, str]] = []
        self._lock = threading.Lock()

    def add(self, name: str, direction: str, line: str) -> None:
        """One line to (``">"``) or from (``"<"``: stdout, ``"!"``: stderr) the engine
        ``name``, timed now."""
        ms = round((self.clock() - self.started) * 1000)
        with self._lock:
            self.entries.append((ms, name, direction, line))

    def sink(self, name: str) -> LineSink:
        """The sink of the engine ``name``."""
        return lambda direction, line: self.add(name, direction, line)

    def note(self, text: str) -> None:
        """A ``#`` line at the top (what the game was, how it ended)."""
        with self._lock:
            self.notes.extend(text.splitlines() or [""])

    def text(self) -> str:
        with self._lock:
            notes, entries = list(self.notes), list(self.entries)
        out = [f"# {note}" for note in notes]
        out += [f"{ms:>8} {name} {direction} {line}" for ms, name, direction, line in entries]
        return "\n".join(out) + "\n"

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write :meth:`text` gzip-compressed to ``path``, whole or not at all."""
        atomic_write(path, gzip.compress(self.text().encode("utf-8"), mtime=0))
