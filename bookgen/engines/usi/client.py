"""A USI engine client built for long unattended runs.

``UsiEngine`` starts an engine command (split with :func:`shlex.split`, so
arguments are allowed), speaks USI over its stdin/stdout and never blocks
forever:

- a reader thread moves stdout lines into a queue, so every wait has a
  timeout (:class:`EngineTimeout`);
- another thread drains stderr continuously into a bounded ring buffer
  (gpsusi writes kilobytes of diagnostics per search and would block on a
  full pipe otherwise); its tail is quoted in error messages, and its lines
  go to the transcript while one is on;
- the end of the process or of its stdout raises :class:`EngineCrashed` with
  the exit code and the stderr tail; :meth:`UsiEngine.restart` relaunches the
  engine and re-applies the options set so far.

Lines that are not valid USI are kept in the raw lines of a search and
otherwise ignored. ``info`` lines are parsed into
:class:`~bookgen.engines.usi.protocol.InfoLine` (the parsers, and how mate
scores are read, are in :mod:`bookgen.engines.usi.protocol`).

A ``UsiEngine`` is not thread-safe: use one per thread.
"""

from __future__ import annotations

import io
import os
import queue
import shlex
import signal
import subprocess
import threading
import time
import weakref
from collections.abc import Callable, Mapping, Sequence

from bookgen.children import engine_preexec
from bookgen.engines.usi.protocol import (
    DEFAULT_MATE_CP_THRESHOLD,
    UsiOption,
    UsiSearch,
    decode_output,
    go_limits,
    parse_bestmove,
    parse_info,
    parse_int,
    parse_option,
    printable,
)
from bookgen.errors import BookgenError

__all__ = [
    "EngineCrashed", "EngineStartError", "EngineTimeout", "LineSink", "UsiEngine", "UsiError",
    "UsiOptionError", "default_search_timeout",
]

LineSink = Callable[[str, str], None]
"""Where an engine's transcript goes: called with the direction (``">"``: sent to the
engine, ``"<"``: received from it on stdout, ``"!"``: written by it to stderr) and the
line, from the reader threads for received lines (see :attr:`UsiEngine.transcript`)."""

_STDOUT_LINE_LIMIT = 1 << 20
_EOF = object()


class UsiError(BookgenError):
    """Something went wrong talking to a USI engine."""


class EngineStartError(UsiError):
    """The engine command could not be started."""


class EngineTimeout(UsiError):
    """The engine did not answer within the time allowed."""


class EngineCrashed(UsiError):
    """The engine process exited or closed its stdout."""

    def __init__(self, message: str, returncode: int | None = None, stderr_tail: str = ""):
        super().__init__(message)
        self.returncode = returncode
        self.stderr_tail = stderr_tail


class UsiOptionError(UsiError, ValueError):
    """An option the engine does not declare, or a value its declaration rejects."""


# --------------------------------------------------------------------------
# the engine process


class _RingBuffer:
    """The last ``limit`` bytes written, thread-safe."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.total = 0
        self._data = bytearray()
        self._lock = threading.Lock()

    def write(self, chunk: bytes) -> None:
        with self._lock:
            self.total += len(chunk)
            self._data += chunk
            excess = len(self._data) - self.limit
            if excess > 0:
                del self._data[:excess]

    def text(self) -> str:
        with self._lock:
            return decode_output(bytes(self._data))


class _Tap:
    """The engine's transcript sink, looked up at each line (it changes between games)."""

    sink: LineSink | None = None

    def write(self, direction: str, line: str) -> None:
        sink = self.sink
        if sink is not None:
            try:
                sink(direction, line)
            except Exception:
                pass  # a transcript never stops a game


_STDERR_LINE_LIMIT = 8192
"""A stderr line longer than this (bytes) goes to the transcript in pieces."""


def _stderr_line(raw: bytes) -> str:
    """A stderr line fit for the transcript: undecodable bytes and control
    characters escaped (``\\xff``, ``\\x1b``)."""
    return printable(decode_output(raw.rstrip(b"\r\n")), 4 * _STDERR_LINE_LIMIT)


def _drain_stderr(stream: io.BufferedReader, buffer: _RingBuffer, tap: _Tap) -> None:
    """Keep stderr flowing into ``buffer`` (the tail for error messages) and,
    while a transcript is on, its lines to ``tap`` as ``!``, timed as they arrive."""
    pending = b""
    try:
        while True:
            chunk = stream.read1(65536)
            if not chunk:
                break
            buffer.write(chunk)
            if tap.sink is None:
                pending = b""
                continue
            *lines, pending = (pending + chunk).split(b"\n")
            while len(pending) > _STDERR_LINE_LIMIT:
                lines.append(pending[:_STDERR_LINE_LIMIT])
                pending = pending[_STDERR_LINE_LIMIT:]
            for raw in lines:
                for start in range(0, max(len(raw), 1), _STDERR_LINE_LIMIT):
                    tap.write("!", _stderr_line(raw[start:start + _STDERR_LINE_LIMIT]))
    except (OSError, ValueError):
        pass
    finally:
        if pending:
            tap.write("!", _stderr_line(pending))


def _read_stdout(stream: io.BufferedReader, lines: queue.Queue, tap: _Tap) -> None:
    try:
        while True:
            raw = stream.readline(_STDOUT_LINE_LIMIT)
            if not raw:
                break
            line = decode_output(raw).rstrip("\r\n")
            tap.write("<", line)  # timed as it arrives
            lines.put(line)
    except (OSError, ValueError):
        pass
    finally:
        lines.put(_EOF)


def _kill(proc: subprocess.Popen) -> None:
    """Kill the engine and anything it started (it leads its own session)."""
    if proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError, OSError):
        try:
            proc.kill()
        except OSError:
            pass


SLOW_NPS = 10_000
"""Nodes per second assumed by default timeouts: 50,000 (a slow engine) / 5 (safety)."""


def default_search_timeout(nodes: int | None = None, depth: int | None = None,
                           time_ms: int | None = None) -> float | None:
    """Seconds to wait for ``bestmove`` when the caller gives no timeout.

    - a time limit (byoyomi, movetime, or the clock): the time plus a margin,
      ``1.5 x time + 10 s`` (gpsusi rounds byoyomi up to whole seconds);
    - ``nodes``: ``10 s + nodes / 10,000`` s, a search at 50,000 nodes per
      second (a slow engine) with a safety factor of 5: 20 s for 100,000
      nodes, 110 s for a million;
    - ``depth``: ``10 s + 2 ** (depth / 2) / 16`` s. The effort of an
      alpha-beta search about doubles every two plies (fairy-stockfish on one
      thread of a slow CPU: 3.6 s at depth 16, 12 s at 20, 25-52 s at 22);
      this is 3-7x that: 26 s at depth 16, 74 s at 20, 138 s at 22.

    With several limits the engine stops at the first one reached: the
    smallest wait applies. None without any limit.
    """
    waits = []
    if time_ms:
        waits.append(time_ms / 1000 * 1.5 + 10.0)
    if nodes is not None:
        waits.append(10.0 + nodes / SLOW_NPS)
    if depth is not None:
        waits.append(10.0 + 2 ** (min(depth, 60) / 2) / 16)
    return min(waits) if waits else None


def _describe_returncode(code: int | None) -> str:
    if code is None:
        return "still running"
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"


class UsiEngine:
    """A running USI engine.

    ``command`` is split with :func:`shlex.split`. The constructor starts the
    engine, performs the ``usi`` handshake, applies ``options`` and waits for
    ``readyok``. Timeouts are in seconds: ``startup_timeout`` for ``usiok``,
    ``ready_timeout`` for ``readyok``, ``search_timeout`` for a ``go``
    without any limit; a ``go`` waits for :func:`default_search_timeout` of
    its limits (unless given a timeout), then sends ``stop`` and waits
    ``stop_grace`` more before killing the engine. ``quit_grace`` is how long
    :meth:`close` waits after ``quit`` before killing the process.

    ``clock`` (seconds, default :func:`time.monotonic`) times the searches
    (:attr:`UsiSearch.elapsed`) and the deadlines; tests give a fake one.

    :attr:`transcript` (a :data:`LineSink`, None: off) sees every line sent
    to the engine and every stdout and stderr line received from it, as it happens.
    :attr:`go_options` (tokens, none by default) follow the limits of every
    :meth:`go` and :meth:`go_ponder`.

    The engine runs in its own session (the terminal's Ctrl-C does not reach
    it) and, on Linux, dies with this process (:mod:`bookgen.children`) when
    started from the main thread.
    """

    def __init__(self, command: str, options: Mapping[str, object] | None = None, *,
                 cwd: str | os.PathLike | None = None, env: Mapping[str, str] | None = None,
                 startup_timeout: float = 30.0, ready_timeout: float = 60.0,
                 search_timeout: float = 600.0, stop_grace: float = 5.0,
                 quit_grace: float = 2.0,
                 stderr_limit: int = 65536,
                 mate_cp_threshold: int | None = DEFAULT_MATE_CP_THRESHOLD,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.command = command
        self.clock = clock
        try:
            self.argv = shlex.split(command)
        except ValueError as exc:
            raise EngineStartError(f"bad engine command {command!r}: {exc}") from exc
        if not self.argv:
            raise EngineStartError("empty engine command")
        self.cwd = cwd
        self.env = dict(env) if env is not None else None
        self.startup_timeout = startup_timeout
        self.ready_timeout = ready_timeout
        self.search_timeout = search_timeout
        self.stop_grace = stop_grace
        self.quit_grace = quit_grace
        self.stderr_limit = stderr_limit
        self.mate_cp_threshold = mate_cp_threshold
        self.name: str | None = None
        self.author: str | None = None
        self.options: dict[str, UsiOption] = {}
        self.applied_options: dict[str, str | None] = {}
        self.restarts = 0
        self.handshake_lines: list[str] = []
        self._proc: subprocess.Popen | None = None
        self._lines: queue.Queue = queue.Queue()
        self._stderr = _RingBuffer(stderr_limit)
        self._threads: list[threading.Thread] = []
        self._eof = False
        self._searching = False
        self._search_lines: list[str] = []
        self._search_started = 0.0
        self._stopped_by_us: str | None = None
        self._finalizer: weakref.finalize | None = None
        self._tap = _Tap()
        self.go_options: tuple[str, ...] = ()
        self._launch()
        try:
            for name, value in (options or {}).items():
                self.setoption(name, value)
            self.isready()
        except BaseException:
            self.close()
            raise

    # -- process management ------------------------------------------------

    def _launch(self) -> None:
        try:
            proc = subprocess.Popen(
                self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                stderr=subprocess.PIPE, cwd=self.cwd, env=self.env,
                # Its own session: the terminal's Ctrl-C reaches bookgen, which decides.
                # It dies with this process all the same (kill -9 included).
                start_new_session=True, preexec_fn=engine_preexec())
        except OSError as exc:
            raise EngineStartError(f"cannot start engine {self.command!r}: {exc}") from exc
        self._proc = proc
        self._finalizer = weakref.finalize(self, _kill, proc)
        self._lines = queue.Queue()
        self._stderr = _RingBuffer(self.stderr_limit)
        self._eof = False
        self._searching = False
        self._stopped_by_us = None
        self._threads = [
            threading.Thread(target=_read_stdout, args=(proc.stdout, self._lines, self._tap),
                             name=f"usi-stdout-{proc.pid}", daemon=True),
            threading.Thread(target=_drain_stderr, args=(proc.stderr, self._stderr, self._tap),
                             name=f"usi-stderr-{proc.pid}", daemon=True),
        ]
        for thread in self._threads:
            thread.start()
        try:
            self._handshake()
        except EngineTimeout:
            raise self._timed_out("usiok", self.startup_timeout) from None
        except BaseException:
            self._shutdown(grace=0.0)
            raise

    def _handshake(self) -> None:
        self.options = {}
        self.handshake_lines = []
        self.send("usi")
        deadline = self.clock() + self.startup_timeout
        while True:
            line = self._next_line(deadline, "usiok")
            self.handshake_lines.append(line)
            tokens = line.split()
            if not tokens:
                continue
            if tokens[0] == "usiok":
                return
            if tokens[0] == "id" and len(tokens) >= 2:
                value = printable(" ".join(tokens[2:]), 200)
                if tokens[1] == "name":
                    self.name = value
                elif tokens[1] == "author":
                    self.author = value
            elif tokens[0] == "option":
                option = parse_option(line)
                if option is not None:
                    self.options[option.name] = option

    @property
    def transcript(self) -> LineSink | None:
        """Where every line sent and received goes (None: nowhere); set it any time."""
        return self._tap.sink

    @transcript.setter
    def transcript(self, sink: LineSink | None) -> None:
        self._tap.sink = sink

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    @property
    def returncode(self) -> int | None:
        return self._proc.poll() if self._proc else None

    @property
    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None and not self._eof

    def stderr_tail(self, chars: int = 2000) -> str:
        """The last ``chars`` characters the engine wrote to stderr."""
        return self._stderr.text()[-chars:]

    @property
    def stderr_bytes(self) -> int:
        """Bytes written to stderr since the last (re)start."""
        return self._stderr.total

    def _label(self) -> str:
        return f"engine {self.name or self.command!r}"

    def _crashed(self, waiting_for: str) -> EngineCrashed:
        code = None
        if self._proc is not None:
            try:
                code = self._proc.wait(timeout=2.0)
            except subprocess.TimeoutExpired:
                _kill(self._proc)  # stdout closed but still running: unusable
            else:
                # Let the drain thread read the last words the engine wrote.
                for thread in self._threads[1:]:
                    thread.join(timeout=1.0)
        tail = self.stderr_tail(1500).strip()
        if self._stopped_by_us:
            message = f"{self._label()} is not running ({self._stopped_by_us})"
        else:
            message = (f"{self._label()} stopped ({_describe_returncode(code)}, stdout closed) "
                       f"while waiting for {waiting_for}")
        if tail:
            message += f"; stderr tail: {printable(tail, 600)}"
        return EngineCrashed(message, returncode=code, stderr_tail=tail)

    def _timed_out(self, waiting_for: str, timeout: float, note: str = "") -> EngineTimeout:
        """Kill the engine (its state is unknown) and describe the timeout."""
        self._shutdown(grace=0.0, reason=f"killed after no {waiting_for} in {timeout:.1f} s")
        tail = self.stderr_tail(600).strip()
        message = f"{self._label()} gave no {waiting_for} within {timeout:.1f} s{note}; killed it"
        if tail:
            message += f"; stderr tail: {printable(tail, 300)}"
        return EngineTimeout(message)

    def _next_line(self, deadline: float, waiting_for: str) -> str:
        """The next stdout line; EngineTimeout at ``deadline``, EngineCrashed at EOF."""
        if self._eof:
            raise self._crashed(waiting_for)
        while True:
            remaining = deadline - self.clock()
            if remaining <= 0:
                raise EngineTimeout(waiting_for)
            try:
                item = self._lines.get(timeout=min(remaining, 0.25))
            except queue.Empty:
                # A dead engine whose stdout stays open (held by a child) never
                # gives EOF: notice the exit itself.
                if self._proc is not None and self._proc.poll() is not None:
                    try:
                        item = self._lines.get(timeout=0.5)
                    except queue.Empty:
                        self._eof = True
                        raise self._crashed(waiting_for) from None
                else:
                    continue
            if item is _EOF:
                self._eof = True
                raise self._crashed(waiting_for)
            return item

    def _drain_pending(self) -> list[str]:
        """Lines already received and not consumed (stale output)."""
        stale: list[str] = []
        while True:
            try:
                item = self._lines.get_nowait()
            except queue.Empty:
                return stale
            if item is _EOF:
                self._eof = True
                return stale
            stale.append(item)

    def send(self, command: str) -> None:
        """Write one command line to the engine."""
        if "\n" in command or "\r" in command:
            raise ValueError(f"USI command contains a line break: {command!r}")
        if self._proc is None or self._proc.stdin is None:
            raise EngineCrashed(f"{self._label()} is not running")
        self._tap.write(">", command)
        try:
            self._proc.stdin.write((command + "\n").encode("utf-8"))
            self._proc.stdin.flush()
        except (BrokenPipeError, OSError, ValueError) as exc:
            self._eof = True
            raise self._crashed(f"the engine to read {command.split()[0]!r}") from exc

    # -- commands ------------------------------------------------------------

    def setoption(self, name: str, value: object = None) -> None:
        """``setoption name NAME [value VALUE]``, remembered for :meth:`restart`.

        When the engine declared options, the name must be one of them
        (case-insensitively; ``USI_*`` options are always allowed) and spin,
        check and combo values must fit the declaration.
        """
        name = name.strip()
        if not name:
            raise UsiOptionError("empty option name")
        text = _option_text(value)
        if self.options and not name.startswith("USI_"):
            declared = self.options.get(name)
            if declared is None:
                matches = [o for o in self.options.values() if o.name.lower() == name.lower()]
                declared = matches[0] if matches else None
            if declared is None:
                raise UsiOptionError(
                    f"{self._label()} has no option {name!r} (it declares: "
                    f"{', '.join(sorted(self.options))})")
            name = declared.name
            _check_option_value(declared, text)
        self.applied_options.pop(name, None)
        self.applied_options[name] = text
        self._send_setoption(name, text)

    def _send_setoption(self, name: str, text: str | None) -> None:
        if text is None:
            self.send(f"setoption name {name}")
        else:
            self.send(f"setoption name {name} value {text}")

    def isready(self, timeout: float | None = None) -> None:
        """``isready`` and wait for ``readyok``; other lines are ignored."""
        timeout = self.ready_timeout if timeout is None else timeout
        self._drain_pending()
        self.send("isready")
        deadline = self.clock() + timeout
        while True:
            try:
                line = self._next_line(deadline, "readyok")
            except EngineTimeout:
                raise self._timed_out("readyok", timeout) from None
            if line.strip() == "readyok":
                return

    def new_game(self) -> None:
        """``usinewgame``."""
        self.send("usinewgame")

    def position(self, sfen: str = "startpos", moves: Sequence[str] = ()) -> None:
        """``position startpos|sfen SFEN [moves ...]``.

        ``sfen`` may also be a whole position argument (``startpos moves
        7g7f``, ``sfen ...``) as long as ``moves`` is empty.
        """
        sfen = sfen.strip()
        if sfen.startswith(("startpos", "sfen ")):
            head = f"position {sfen}"
        else:
            head = f"position sfen {sfen}"
        self.send(f"{head} moves {' '.join(moves)}" if moves else head)

    def go(self, *, byoyomi: int | None = None, btime: int | None = None,
           wtime: int | None = None, binc: int | None = None, winc: int | None = None,
           nodes: int | None = None, movetime: int | None = None, depth: int | None = None,
           timeout: float | None = None) -> UsiSearch:
        """Search and wait for ``bestmove``. Times are in milliseconds.

        ``timeout`` (seconds) defaults to :func:`default_search_timeout` of
        the limits, or ``search_timeout`` without any. On timeout the engine is sent
        ``stop``; if it does not answer within ``stop_grace`` it is killed.
        Either way :class:`EngineTimeout` is raised. :attr:`go_options` follow
        the limits.
        """
        limits = go_limits(byoyomi=byoyomi, btime=btime, wtime=wtime, binc=binc, winc=winc,
                            nodes=nodes, movetime=movetime, depth=depth)
        if timeout is None:
            budget_ms = max(movetime or 0, max(btime or 0, wtime or 0) + max(binc or 0, winc or 0)
                            + (byoyomi or 0))
            timeout = default_search_timeout(nodes=nodes, depth=depth, time_ms=budget_ms or None)
            if timeout is None:
                timeout = self.search_timeout
        self._start_search([*limits, *self.go_options])
        # The timeout counts from the go, as the engine's own clock does.
        return self.wait_bestmove(timeout, since=self._search_started)

    def go_ponder(self, **limits: int | None) -> None:
        """Start ``go ponder`` with ``limits`` (and :attr:`go_options`); end it with
        :meth:`ponderhit` (then :meth:`wait_bestmove`) or :meth:`stop`."""
        self._start_search(["ponder", *go_limits(**limits), *self.go_options])

    def ponderhit(self) -> None:
        """``ponderhit``: the pondered move was played. The search's time (its
        :attr:`UsiSearch.elapsed` and a ``since`` of :meth:`wait_bestmove`) counts
        from here, as the engine's clock does (:attr:`search_started`)."""
        if not self._searching:
            raise UsiError(f"{self._label()}: ponderhit without a search running")
        # The time is taken before the line goes out: the engine's answer may come
        # (and its clock move on) before send returns.
        self._search_started = self.clock()
        self.send("ponderhit")

    @property
    def searching(self) -> bool:
        """Whether a ``go`` is waiting for its ``bestmove``."""
        return self._searching

    @property
    def search_started(self) -> float:
        """When the current search's time began (its ``go``, or its ``ponderhit``)."""
        return self._search_started

    def gameover(self, result: str) -> None:
        """``gameover win|lose|draw`` (the engine's result)."""
        if result not in ("win", "lose", "draw"):
            raise ValueError(f"gameover {result!r}: expected win, lose or draw")
        self.send(f"gameover {result}")

    def go_infinite(self, **limits: int) -> None:
        """Start ``go infinite``; end it with :meth:`stop`."""
        self._start_search(["infinite", *go_limits(**limits)])

    def stop(self, timeout: float = 10.0) -> UsiSearch:
        """``stop`` the current search and wait for its ``bestmove``."""
        if not self._searching:
            raise UsiError(f"{self._label()}: stop() without a search running")
        self.send("stop")
        return self.wait_bestmove(timeout, stop_on_timeout=False)

    def _start_search(self, limits: list[str]) -> None:
        if self._searching:
            raise UsiError(f"{self._label()}: a search is already running")
        self._drain_pending()
        self._search_lines = []
        self._search_started = self.clock()
        self.send(" ".join(["go", *limits]))
        self._searching = True

    def wait_bestmove(self, timeout: float, stop_on_timeout: bool = True, *,
                      since: float | None = None) -> UsiSearch:
        """Collect the running search's output until ``bestmove``, for at most
        ``timeout`` seconds from ``since`` (a :attr:`clock` reading; default now)."""
        if not self._searching:
            raise UsiError(f"{self._label()}: no search running")
        result = UsiSearch(bestmove=None, lines=self._search_lines)
        deadline = (self.clock() if since is None else since) + timeout
        stopped = False
        while True:
            try:
                line = self._next_line(deadline, "bestmove")
            except EngineTimeout:
                if stop_on_timeout and not stopped:
                    # Give it a chance to answer ``stop`` so that it stays usable.
                    stopped = True
                    try:
                        self.send("stop")
                    except EngineCrashed:
                        self._searching = False
                        raise
                    deadline = self.clock() + self.stop_grace
                    continue
                self._searching = False
                note = f", nor {self.stop_grace:.1f} s after stop" if stopped else ""
                raise self._timed_out("bestmove", timeout, note=note) from None
            except EngineCrashed:
                self._searching = False
                raise
            result.lines.append(line)
            if line.startswith("info"):
                info = parse_info(line, self.mate_cp_threshold)
                if info is None:
                    continue
                if info.nodes is not None:
                    result.nodes = max(result.nodes or 0, info.nodes)
                if info.has_score or info.pv:
                    result.infos[info.multipv] = info
                continue
            parsed = parse_bestmove(line)
            if parsed is None:
                continue
            self._searching = False
            move, ponder = parsed
            result.elapsed = self.clock() - self._search_started
            if move == "resign":
                result.resign = True
            elif move == "win":
                result.win = True
            elif move is not None and move != "(none)":
                result.bestmove = move
                result.ponder = ponder
            if stopped:
                raise EngineTimeout(
                    f"{self._label()} gave no bestmove within {timeout:.1f} s "
                    "(answered stop; still usable)")
            return result

    # -- lifecycle -------------------------------------------------------------

    def restart(self) -> None:
        """Kill or quit the engine, start it again and re-apply the options."""
        self._shutdown(grace=min(self.quit_grace, 0.5), reason="restarting")
        self.restarts += 1
        self._launch()
        try:
            for name, value in self.applied_options.items():
                self._send_setoption(name, value)
            self.isready()
        except BaseException:
            self._shutdown(grace=0.0)
            raise

    def _shutdown(self, grace: float, reason: str = "closed") -> None:
        proc = self._proc
        if proc is None:
            return
        if self._stopped_by_us is None:
            self._stopped_by_us = reason
        if proc.poll() is None and grace > 0:
            try:
                if self._searching:
                    self.send("stop")
                self.send("quit")
            except UsiError:
                pass
            try:
                proc.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                pass
        _kill(proc)
        try:
            proc.wait(timeout=5.0)
        except subprocess.TimeoutExpired:
            pass
        for stream in (proc.stdin,):
            try:
                if stream:
                    stream.close()
            except OSError:
                pass
        for thread, stream in zip(self._threads, (proc.stdout, proc.stderr)):
            thread.join(timeout=2.0)
            # Closing a pipe that a thread is still blocked reading would block
            # here too (a grandchild outside our process group may hold it open).
            if stream and not thread.is_alive():
                try:
                    stream.close()
                except OSError:
                    pass
        if self._finalizer is not None:
            self._finalizer.detach()
        self._searching = False
        self._eof = True

    def close(self) -> None:
        """``quit``, then kill the engine if it is still running after ``quit_grace``."""
        self._shutdown(grace=self.quit_grace)

    def __enter__(self) -> UsiEngine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"UsiEngine({self.command!r}, name={self.name!r}, pid={self.pid})"


# --------------------------------------------------------------------------
# option values


def _option_text(value: object) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    text = str(value)
    if "\n" in text or "\r" in text:
        raise UsiOptionError(f"option value contains a line break: {text!r}")
    return text


def _check_option_value(option: UsiOption, text: str | None) -> None:
    kind = option.type
    if kind == "button":
        return
    if text is None:
        raise UsiOptionError(f"option {option.name!r} ({kind}) needs a value")
    if kind == "spin":
        number = parse_int(text)
        if number is None:
            raise UsiOptionError(f"option {option.name!r} is a spin: {text!r} is not an integer")
        if ((option.min is not None and number < option.min)
                or (option.max is not None and number > option.max)):
            raise UsiOptionError(f"option {option.name!r}: {number} is outside "
                                 f"[{option.min}, {option.max}]")
    elif kind == "check":
        if text.lower() not in ("true", "false"):
            raise UsiOptionError(f"option {option.name!r} is a check: use true or false, "
                                 f"not {text!r}")
    elif kind == "combo" and option.vars and text not in option.vars:
        raise UsiOptionError(f"option {option.name!r}: {text!r} is not one of "
                             f"{', '.join(option.vars)}")
