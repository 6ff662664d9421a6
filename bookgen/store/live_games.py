"""The games a match is playing right now, beside its results file (the live view).

While ``bookgen match`` runs, each game in flight has one small file in the folder
``RESULTS.live/`` beside the results file ``RESULTS`` (:func:`live_folder`): its
match, players, opening, start position and the moves played so far. The process
that plays the game (the runner, or the worker process running it) rewrites the
file after every move (:class:`LiveGameWriter`) and removes it when the game ends;
``bookgen serve --results RESULTS`` reads the folder (:func:`read_live_games`). The
results file itself is not touched: its schema does not change, and finished games
are read from it.

Cost: a file renamed over another (:func:`bookgen.files.atomic_write`'s way) costs
about 2 ms on ext4, which flushes the data of a file replaced by a rename; so the
writer keeps its file open and overwrites it in place (``pwrite``, never synced:
about 10 microseconds a move, ``benchmarks/bench_live.py``). A reader can meet a
file half rewritten, so each version carries its length and CRC-32 in a first
line, ``bookgen-live 1 LENGTH CRC32\n``, then the JSON; a reader that finds them
wrong reads again, and skips the game for this time after a few tries.

The files are state, not records: a game killed with its process leaves its file,
which readers skip when its process (``pid``, on this ``host``) is gone and the next
match on the same results file removes (:func:`clear_stale`). Writing is best effort:
a folder that cannot be written (a Ray worker on another machine) turns the writer
off for the rest of its game, never failing the game.

File name: ``PID-KEY.json`` (KEY: the game's key in the match, made safe for a
file name). JSON (``LIVE_FORMAT`` 1): ``format``, ``match_id``, ``game_key``,
``pair``, ``round``, ``opening_index``, ``opening`` (as in the openings file),
``start_sfen``, ``black``, ``white``, ``moves`` (USI, from ``start_sfen``),
``scores`` (each mover's score in cp before its move, null: none given),
``started_at``, ``updated_at`` (UTC, ISO 8601), ``pid``, ``host``.
"""

from __future__ import annotations

import json
import os
import re
import socket
import zlib
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from bookgen.files import process_alive
from bookgen.timestamps import utc_now

__all__ = ["LIVE_FORMAT", "LiveFolder", "LiveGame", "LiveGameWriter", "clear_stale", "live_folder",
           "read_live_games", "remove_folder"]

LIVE_FORMAT = 1
_MAGIC = b"bookgen-live"
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
_PID = re.compile(r"^(\d+)-")
_HOST = socket.gethostname()


def live_folder(results: str | os.PathLike[str]) -> Path:
    """``RESULTS.live``: where the games in flight of ``results``' matches are."""
    path = Path(results)
    return path.with_name(path.name + ".live")


@dataclass
class LiveGame:
    """One game in flight, as its live file has it (see the module docstring)."""

    match_id: int
    game_key: str
    pair: int
    round: int
    opening_index: int | None
    opening: str
    start_sfen: str
    black: str
    white: str
    moves: list[str] = field(default_factory=list)
    scores: list[int | None] = field(default_factory=list)
    started_at: str = ""
    updated_at: str = ""
    pid: int = 0
    host: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {"format": LIVE_FORMAT, **asdict(self)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> LiveGame:
        names = cls.__dataclass_fields__
        return cls(**{k: v for k, v in data.items() if k in names})

    @property
    def alive(self) -> bool:
        """False when its process is known to be gone (a game killed with it)."""
        return self.host != _HOST or process_alive(self.pid)


class LiveGameWriter:
    """The live file of one game: :meth:`start` writes it, :meth:`move` rewrites it in
    place after each move, :meth:`end` removes it. Any ``OSError`` turns it off."""

    def __init__(self, folder: Path, game: LiveGame) -> None:
        self.game = game
        game.pid, game.host = os.getpid(), _HOST
        self.path: Path | None = folder / f"{game.pid}-{_UNSAFE.sub('_', game.game_key)}.json"
        self.fd: int | None = None
        self.size = 0
        self.moves_text = ""    # the JSON of the moves and scores so far, without brackets
        self.scores_text = ""

    def _body(self) -> bytes:
        g = self.game
        fixed = {"format": LIVE_FORMAT, "match_id": g.match_id, "game_key": g.game_key,
                 "pair": g.pair, "round": g.round, "opening_index": g.opening_index,
                 "opening": g.opening, "start_sfen": g.start_sfen, "black": g.black,
                 "white": g.white, "started_at": g.started_at, "updated_at": utc_now(),
                 "pid": g.pid, "host": g.host}
        return (json.dumps(fixed)[:-1] + f', "moves": [{self.moves_text}], '
                f'"scores": [{self.scores_text}]}}').encode()

    def _write(self) -> None:
        if self.path is None:
            return
        body = self._body()
        data = b"%s %d %08x\n%s" % (_MAGIC, len(body), zlib.crc32(body), body)
        try:
            if self.fd is None:
                try:
                    self.fd = os.open(self.path, os.O_WRONLY | os.O_CREAT, 0o644)
                except FileNotFoundError:   # the folder went with another match's end
                    self.path.parent.mkdir(exist_ok=True)
                    self.fd = os.open(self.path, os.O_WRONLY | os.O_CREAT, 0o644)
            os.pwrite(self.fd, data, 0)
            if len(data) < self.size:
                os.ftruncate(self.fd, len(data))
            self.size = len(data)
        except OSError:
            self._close()
            self.path = None

    def _close(self) -> None:
        if self.fd is not None:
            try:
                os.close(self.fd)
            except OSError:
                pass
            self.fd = None

    def start(self) -> None:
        self.game.started_at = utc_now()
        self._write()

    def move(self, move: str, score: int | None) -> None:
        """The game after one more ``move`` (USI), ``score`` its mover's score (cp)."""
        self.game.moves.append(move)
        self.game.scores.append(score)
        sep = ", " if self.moves_text else ""
        self.moves_text += sep + json.dumps(move)
        self.scores_text += sep + ("null" if score is None else str(int(score)))
        self._write()

    def end(self) -> None:
        self._close()
        if self.path is not None:
            try:
                self.path.unlink(missing_ok=True)
            except OSError:
                pass
            self.path = None


@dataclass(frozen=True)
class LiveFolder:
    """Where the games of match ``match_id`` write their live files (picklable: the
    runner gives it to its worker processes)."""

    path: Path
    match_id: int

    def writer(self, game_key: str, pair: int, round: int, opening_index: int | None,
               opening: str, start_sfen: str, black: str, white: str) -> LiveGameWriter:
        return LiveGameWriter(self.path, LiveGame(self.match_id, game_key, pair, round,
                                                  opening_index, opening, start_sfen,
                                                  black, white))


def _files(folder: Path) -> list[Path]:
    try:
        return sorted(p for p in folder.iterdir() if p.suffix == ".json"
                      and not p.name.startswith("."))
    except OSError:   # no folder: no match running
        return []


def _read(path: Path, tries: int = 3) -> LiveGame | None:
    """The game in the live file ``path``; None when it is gone, not a live file, or
    still half rewritten after ``tries`` reads."""
    for _ in range(tries):
        try:
            data = path.read_bytes()
        except OSError:
            return None   # the game ended meanwhile
        head, _, body = data.partition(b"\n")
        fields = head.split()
        if len(fields) != 3 or fields[0] != _MAGIC:
            return None
        try:
            whole = int(fields[1]) == len(body) and int(fields[2], 16) == zlib.crc32(body)
        except ValueError:
            return None
        if not whole:
            continue   # met in the middle of a rewrite
        try:
            decoded = json.loads(body)
            if decoded.get("format") != LIVE_FORMAT:
                return None
            return LiveGame.from_dict(decoded)
        except (ValueError, TypeError, AttributeError):
            return None
    return None


def read_live_games(results: str | os.PathLike[str], match_id: int | None = None
                    ) -> list[LiveGame]:
    """The games in flight of ``results``' matches (only match ``match_id`` when given),
    by start; files of processes that are gone and files that are not live files are
    skipped."""
    games: list[LiveGame] = []
    for path in _files(live_folder(results)):
        game = _read(path)
        if game is not None and game.alive and (match_id is None or game.match_id == match_id):
            games.append(game)
    return sorted(games, key=lambda g: (g.started_at, g.pair, g.game_key))


def clear_stale(results: str | os.PathLike[str]) -> None:
    """Remove the live files of processes gone from this machine (kill -9); called when
    a match starts. The folder is made when missing; errors are ignored (the live view
    is best effort)."""
    folder = live_folder(results)
    try:
        folder.mkdir(exist_ok=True)
    except OSError:
        return
    try:
        paths = list(folder.iterdir())
    except OSError:
        return
    for path in paths:
        found = _PID.match(path.name)
        if found and not process_alive(int(found[1])):
            path.unlink(missing_ok=True)


def remove_folder(results: str | os.PathLike[str]) -> None:
    """Remove ``RESULTS.live`` when no game is left in it (the match has ended)."""
    try:
        live_folder(results).rmdir()
    except OSError:
        pass
