"""Game records: CSA and KIF read, CSA written, PGN read and written.

Reading CSA and KIF (:func:`find_records`, :func:`read_games`): evaluations are
the engine scores written in the records: CSA ``'** N ...`` comment lines
(floodgate, ``cshogi.cli``, our self-play) and KIF ``評価値 N`` comments
(ShogiGUI, ``cshogi.KIF.Exporter.info``), both from black's point of view and
both attached to the move the engine chose: the score recorded with move k is
the evaluation of the position that move was played from. The final position
of a game therefore has none.

Records are read with cshogi's parsers (``CSA.Parser``, ``KIF.Parser``), in a
child process (:class:`RecordParser`): the CSA parser is C++ and crashes the
whole interpreter on some malformed records (an incomplete ``P1``..``P9``
board, a bad piece code, a score comment before the first move). A record that
crashes it, cannot be decoded (UTF-8 and CP932/Shift_JIS are tried), holds
neither a move nor a result (an empty or header-only file) or has an invalid
start position comes back as ``(where, reason)`` instead of a game; its moves
are checked by whoever replays them (:class:`BadRecord`).

Writing CSA (:func:`write_csa_record`, self-play and match records):
``cshogi.CSA.Exporter``, each move's score as an ``'** N`` comment from
black's point of view (the convention dlshogi's ``csa_to_hcpe.py`` reads back)
and the game's end by :func:`bookgen.play.rules.csa_endgame`.

PGN (:func:`read_pgn`, :func:`write_pgn_game`): files written by bookgen's
match runner and by other tools (cutechess, ``cshogi.cli``; sente is "White"
there), read into :class:`bookgen.store.results.GameResult` records.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import cshogi
from cshogi import CSA, KIF  # submodules: 'import cshogi' alone does not load them

from bookgen.errors import BookgenError
from bookgen.files import atomic_output
from bookgen.play.rules import Outcome, csa_endgame
from bookgen.position import InvalidPosition, parse_sfen
from bookgen.store.results import RESULT_BLACK, RESULT_DRAW, RESULT_WHITE, GameResult
from bookgen.values import MATE_VALUE, clip_score
from bookgen.workers.isolated import IsolatedWorker, WorkerCrashed, WorkerTimeout

__all__ = ["RECORD_FORMATS", "BadRecord", "RecordParser", "RecordedGame", "csa_value",
           "find_records", "kif_value", "read_games", "read_pgn", "write_csa_record",
           "write_pgn_game"]

RECORD_FORMATS = {".csa": "csa", ".kif": "kif", ".kifu": "kif"}
PARSE_TIMEOUT = 60.0

_CSA_SEPARATOR = re.compile(r"^/[ \t]*$", re.MULTILINE)
_CSA_SCORE = re.compile(r"\**\s*([+-]?\d+)(?:\s|$)")
_KIF_SCORE = re.compile(r"評価値\s*[:=：]?\s*(?:([+-]?\d+)|([+-])詰)")
_KIF_BOD_FRAME = re.compile(r"^\s*\+-{9,}\+\s*$", re.MULTILINE)
_KIF_VARIATION = re.compile(r"^変化：", re.MULTILINE)


class BadRecord(Exception):
    """A record (a file or one game of it) that cannot be used, with the reason."""


@dataclass(frozen=True, slots=True)
class RawGame:
    """What cshogi's parser gives for one game (plain data, sent between processes)."""

    sfen: str
    moves: list[int]
    comments: list[str | None]
    ratings: tuple[float, float] | None
    ended: bool = False       # a result is recorded (resignation, ...)


@dataclass(frozen=True, slots=True)
class RecordedGame:
    """One game record, its start position checked (moves not yet)."""

    where: str
    start: str
    moves: list[int]
    values: list[int | None]
    ratings: tuple[float | None, float | None]


# --------------------------------------------------------------------------
# finding and decoding records


def find_records(sources: Iterable[str | Path]) -> list[Path]:
    """Record files named by ``sources``: files, and directories searched
    recursively for ``*.csa``, ``*.kif`` and ``*.kifu`` (any case)."""
    found: dict[Path, Path] = {}

    def add(path: Path) -> None:
        found.setdefault(path.resolve(), path)

    for source in sources:
        path = Path(source)
        if path.is_dir():
            for root, dirs, files in os.walk(path):
                dirs.sort()
                for name in sorted(files):
                    if Path(name).suffix.lower() in RECORD_FORMATS:
                        add(Path(root) / name)
        elif path.is_file():
            if path.suffix.lower() not in RECORD_FORMATS:
                raise BookgenError(f"{path}: not a game record (expected .csa, .kif or .kifu)")
            add(path)
        elif not path.exists():
            raise BookgenError(f"{path}: no such file or directory")
        else:
            raise BookgenError(f"{path}: not a file or a directory")
    return list(found.values())


def _decode(data: bytes) -> str:
    """UTF-8 (with or without BOM), else CP932; newlines normalised to ``\\n``."""
    if b"\0" in data:
        raise BadRecord("binary data, not a text record")
    for encoding in ("utf-8-sig", "cp932"):
        try:
            text = data.decode(encoding)
            break
        except UnicodeDecodeError:
            continue
    else:
        raise BadRecord("not UTF-8 or CP932 (Shift_JIS) text")
    return text.replace("\r\n", "\n").replace("\r", "\n")


def _ascii(line: str) -> str:
    return line.encode("ascii", "replace").decode("ascii") if not line.isascii() else line


def _csa_games(text: str) -> list[tuple[str, tuple[bool, bool]]]:
    """The games of a CSA text (separated by ``/`` lines), each made safe for
    cshogi, with whether black's and white's ratings are recorded.

    cshogi decodes comments as ASCII (a non-ASCII comment raises on access) and
    writes a ``'**`` score met before the first move out of bounds (a crash):
    comment text is made ASCII and such scores are dropped. cshogi reports an
    absent rating as 0, so presence is read from the ``'black_rate:`` lines.
    """
    games = []
    for chunk in _CSA_SEPARATOR.split(text):
        lines = []
        rated = [False, False]
        moved = False
        content = False
        for line in chunk.split("\n"):
            if line.startswith("'"):
                if line.startswith("'black_rate:"):
                    rated[0] = True
                elif line.startswith("'white_rate:"):
                    rated[1] = True
                elif line.startswith("'** ") and not moved:
                    continue
                line = _ascii(line)
            elif line.strip():
                content = True
                if line.startswith(("+", "-")) and len(line) > 1:
                    moved = True
                    line = _ascii(line)
            lines.append(line)
        if content:
            games.append(("\n".join(lines) + "\n", (rated[0], rated[1])))
    return games


def _prepare_kif(text: str) -> str:
    """The main line of a KIF text; board diagrams are refused (cshogi ignores them
    and would replay the moves from the initial position)."""
    if _KIF_BOD_FRAME.search(text):
        raise BadRecord("board diagram (BOD) start positions are not supported")
    variation = _KIF_VARIATION.search(text)
    return text[:variation.start()] if variation else text


# --------------------------------------------------------------------------
# cshogi's parsers in a child process


def _parse_with_cshogi(kind: str, text: str) -> RawGame:
    if kind == "csa":
        parsers = CSA.Parser.parse_str(text)
        if len(parsers) != 1:
            raise ValueError(f"{len(parsers)} games where one was expected")
        parser = parsers[0]
        ratings = parser.ratings
        return RawGame(parser.sfen, list(parser.moves), list(parser.comments),
                       (float(ratings[0]), float(ratings[1])), bool(parser.endgame))
    parser = KIF.Parser.parse_str(text)
    return RawGame(parser.sfen, list(parser.moves), list(parser.comments), None,
                   bool(parser.endgame))


def _describe(error: Exception) -> str:
    if isinstance(error, KeyError):
        return f"cannot parse: unknown {error}"
    text = str(error) or type(error).__name__
    if isinstance(error, (ValueError, KIF.ParserException)):
        return f"cannot parse: {text}"
    return f"cannot parse ({type(error).__name__}: {text})"


def _parse_request(request: tuple[str, str]) -> tuple[str, Any]:
    """The child's answer to ``(kind, text)``: ``("ok", RawGame)`` or ``("error", reason)``."""
    try:
        return "ok", _parse_with_cshogi(*request)
    except Exception as error:  # noqa: BLE001 - any parser failure is the record's fault
        return "error", _describe(error)


class RecordParser:
    """cshogi's record parsers in a child process (:class:`IsolatedWorker`),
    restarted after a crash.

    A crash or a hang (``timeout`` seconds) costs only the record being parsed,
    which is reported as a :class:`BadRecord`.
    """

    def __init__(self, timeout: float = PARSE_TIMEOUT) -> None:
        self.timeout = timeout
        self._worker: IsolatedWorker[tuple[str, str], tuple[str, Any]] = IsolatedWorker(
            _parse_request, timeout_s=timeout, name="bookgen-record-parser")

    def __enter__(self) -> RecordParser:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def parse(self, kind: str, text: str) -> RawGame:
        """Parse one game (``kind`` ``csa`` or ``kif``); raises BadRecord."""
        try:
            status, payload = self._worker.call((kind, text))
        except WorkerTimeout:
            raise BadRecord(f"cshogi's parser took more than {self.timeout:g} s on it") from None
        except WorkerCrashed as crash:
            raise BadRecord(f"cshogi's parser crashed on it (exit code {crash.exitcode})"
                            ) from None
        if status != "ok":
            raise BadRecord(payload)
        return payload

    def close(self) -> None:
        self._worker.close()


# --------------------------------------------------------------------------
# games


def csa_value(comment: str | None) -> int | None:
    """The score of a CSA move comment as cshogi gives it (``'** 123 pv`` ->
    ``"123 pv"``; inline ``,'* 123`` -> ``"* 123"``), or None."""
    match = _CSA_SCORE.match(comment.strip()) if comment else None
    return int(match.group(1)) if match else None


def kif_value(comment: str | None) -> int | None:
    """The ``評価値`` of a KIF move comment (``+詰``/``-詰`` as +-MATE_VALUE), or None."""
    match = _KIF_SCORE.search(comment) if comment else None
    if match is None:
        return None
    if match.group(1) is not None:
        return int(match.group(1))
    return MATE_VALUE if match.group(2) == "+" else -MATE_VALUE


def _game(where: str, kind: str, raw: RawGame, rated: tuple[bool, bool]) -> RecordedGame:
    if not raw.moves and not raw.ended:
        raise BadRecord("no moves and no result: an empty or header-only record")
    if not raw.sfen:
        raise BadRecord("no start position")
    try:
        position = parse_sfen(raw.sfen)
    except InvalidPosition as error:
        raise BadRecord(f"invalid start position: {error}") from None
    read = csa_value if kind == "csa" else kif_value
    comments = raw.comments
    values = [read(comments[i]) if i < len(comments) else None for i in range(len(raw.moves))]
    ratings: tuple[float | None, float | None] = (None, None)
    if raw.ratings is not None:
        ratings = (raw.ratings[0] if rated[0] else None, raw.ratings[1] if rated[1] else None)
    return RecordedGame(where, f"{position.sfen} {position.ply or 1}", raw.moves, values, ratings)


def read_games(path: Path, parser: RecordParser) -> Iterator[RecordedGame | tuple[str, str]]:
    """The games of one record file; a bad record comes as ``(where, reason)``."""
    kind = RECORD_FORMATS[path.suffix.lower()]
    try:
        text = _decode(path.read_bytes())
        if kind == "csa":
            chunks = _csa_games(text)
        else:
            chunks = [(_prepare_kif(text), (False, False))]
        if not chunks:
            raise BadRecord("no game in it")
    except OSError as error:
        yield str(path), f"cannot read ({error.strerror})"
        return
    except BadRecord as error:
        yield str(path), str(error)
        return
    for number, (chunk, rated) in enumerate(chunks, 1):
        where = f"{path}: game {number}" if len(chunks) > 1 else str(path)
        try:
            yield _game(where, kind, parser.parse(kind, chunk), rated)
        except BadRecord as error:
            yield where, str(error)


# --------------------------------------------------------------------------
# writing CSA


def write_csa_record(path: Path, *, start_sfen: str, names: tuple[str, str],
                     moves: list[str], scores: list[int | None], outcome: Outcome,
                     comment: str = "", side_controls: tuple[str, str] | None = None) -> None:
    """Write one game as a CSA record (to a temporary file, then renamed).

    ``scores`` are each mover's own scores (None: none), written as ``'** N``
    comments from black's point of view. ``side_controls`` (black's, white's
    control, described) are written as one comment line per side after
    ``comment``, ``'time control + NAME: 60 s +0.1 s``: CSA V2.2's
    ``$TIME_LIMIT`` is one control for both sides.
    """
    lines = [comment] if comment else []
    if side_controls is not None:
        lines += [f"time control {mark} {name}: {control}"
                  for mark, name, control in zip("+-", names, side_controls)]
    with atomic_output(path) as temporary:
        board = cshogi.Board(start_sfen)
        exporter = CSA.Exporter(str(temporary))
        try:
            # cshogi writes the comment as "'" + comment: more lines joined by "\n'".
            exporter.info(init_board=board, names=list(names), version="V2.2",
                          comment="\n'".join(lines) or None)
            for usi, score in zip(moves, scores):
                move = board.move_from_usi(usi)
                note = None
                if score is not None:
                    black_view = score if board.turn == cshogi.BLACK else -score
                    note = f"** {clip_score(black_view)}"
                exporter.move(move, comment=note)
                board.push(move)
            exporter.endgame(csa_endgame(outcome, board.turn))
        finally:
            exporter.close()


# --------------------------------------------------------------------------
# PGN

_PGN_RESULTS = {RESULT_BLACK: "1-0", RESULT_WHITE: "0-1", RESULT_DRAW: "1/2-1/2"}
_TAG = re.compile(r'^\[(\w+)\s+"((?:[^"\\]|\\.)*)"\]\s*$')
_RESULT_TOKEN = re.compile(r"(1-0|0-1|1/2-1/2|\*)\s*$")


def _pgn_blocks(path: Path) -> Iterator[tuple[int, dict[str, str], str]]:
    """(first line number, tags, movetext) of each game in a PGN file."""
    try:
        text = path.read_text(encoding="utf-8-sig", errors="replace")
    except OSError as error:
        raise BookgenError(f"{path}: cannot read ({error.strerror})") from None
    tags: dict[str, str] = {}
    moves: list[str] = []
    start = 0
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        match = _TAG.match(stripped)
        if match:
            if moves:
                yield start, tags, " ".join(moves)
                tags, moves = {}, []
            if not tags:
                start = number
            tags[match.group(1)] = match.group(2).replace('\\"', '"').replace("\\\\", "\\")
        elif stripped and not stripped.startswith("%"):
            if not tags and not moves:
                raise BookgenError(f"{path}:{number}: movetext before any tag pair "
                                   "(not a PGN file?)")
            moves.append(stripped)
    if tags:
        yield start, tags, " ".join(moves)


def read_pgn(path: str | Path) -> list[GameResult]:
    """Games of a PGN file (sente is "White"); unfinished games (``*``) are skipped.

    Colour-swapped pairs are taken from the ``Pair`` tag bookgen writes
    (games finish out of order with ``--concurrency``); without it, two
    consecutive games with the players swapped and the same start position
    (``FEN``/``SFEN`` tag) are a pair.
    """
    path = Path(path)
    games: list[GameResult] = []
    tagged: list[str | None] = []
    for line, tags, movetext in _pgn_blocks(path):
        result = tags.get("Result")
        if result is None:
            token = _RESULT_TOKEN.search(movetext)
            result = token.group(1) if token else None
        if result is None:
            raise BookgenError(f"{path}:{line}: game without a Result tag")
        if result == "*":
            continue
        names = {"1-0": RESULT_BLACK, "0-1": RESULT_WHITE, "1/2-1/2": RESULT_DRAW}
        if result not in names:
            raise BookgenError(f"{path}:{line}: bad Result {result!r} "
                               "(expected 1-0, 0-1, 1/2-1/2 or *)")
        if "White" not in tags or "Black" not in tags:
            raise BookgenError(f"{path}:{line}: game without White and Black tags")
        opening = tags.get("SFEN") or tags.get("FEN")
        plies = int(tags["PlyCount"]) if tags.get("PlyCount", "").isdigit() else 0
        games.append(GameResult(tags["White"], tags["Black"], names[result],
                          tags.get("Termination", ""), plies, None, opening, str(path)))
        tagged.append(tags.get("Pair"))
    if games and all(tagged):
        return [_with_pair(game, f"{path}#{pair}") for game, pair in zip(games, tagged)]
    return _pair_consecutive(games, path)


def _pair_consecutive(games: list[GameResult], path: Path) -> list[GameResult]:
    paired: list[GameResult] = []
    i = 0
    while i < len(games):
        first = games[i]
        if i + 1 < len(games):
            second = games[i + 1]
            if (second.black, second.white) == (first.white, first.black) \
                    and second.opening == first.opening and first.black != first.white:
                key = f"{path}#pgn:{i}"
                paired += [_with_pair(first, key), _with_pair(second, key)]
                i += 2
                continue
        paired.append(first)
        i += 1
    return paired


def _with_pair(game: GameResult, key: str) -> GameResult:
    return GameResult(game.black, game.white, game.result, game.reason, game.plies, key,
                game.opening, game.source)


def _pgn_escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", " ")


def write_pgn_game(handle: Any, *, event: str, round_label: str, black: str, white: str,
                   result: str, reason: str, start_sfen: str, moves: Sequence[str],
                   pair: str | None = None, date: str | None = None,
                   tags: Sequence[tuple[str, str]] = ()) -> None:
    """Append one game to an open PGN text file, sente as "White".

    Shogi moves are not SAN, so the USI moves go into a comment that chess
    tools (Ordo, BayesElo) skip; the start position is in an ``SFEN`` tag,
    the colour-swapped pair the game belongs to in a ``Pair`` tag. ``tags``
    are more tags, after those (a match's per-side time controls).
    """
    header = [("Event", event), ("Site", "bookgen"),
            ("Date", date or datetime.now(UTC).strftime("%Y.%m.%d")),
            ("Round", round_label), ("White", black), ("Black", white),
            ("Result", _PGN_RESULTS[result]), ("SFEN", start_sfen),
            ("Termination", reason), ("PlyCount", str(len(moves)))]
    if pair is not None:
        header.append(("Pair", pair))
    for name, value in [*header, *tags]:
        handle.write(f'[{name} "{_pgn_escape(value)}"]\n')
    body = f"{{usi {' '.join(moves)}}} " if moves else ""
    handle.write(f"\n{body}{_PGN_RESULTS[result]}\n\n")
