"""``bookgen suite --from-records``: balanced-position suites cut from game records.

dlshogi's ``csa_to_gokakusfen`` rule: from games of at least ``min_moves``
moves (and, with ``min_rating``, between players both rated at least that),
take the positions at the selected plies whose recorded evaluation is within
``max_value`` of 0. dlshogi's defaults are the positions after 24 and 36 moves
(plies 25 and 37 here, where the start position is ply 1), ``|eval| <= 100``,
50 moves and rating 3800; ``max_line_value`` is its second bound (170), on every
evaluation recorded before the selected position.

Evaluations are the engine scores written in the records: CSA ``'** N ...``
comment lines (floodgate, ``cshogi.cli``, our self-play) and KIF ``評価値 N``
comments (ShogiGUI, ``cshogi.KIF.Exporter.info``), both from black's point
of view and both attached to the move the engine chose: the score recorded
with move k is the evaluation of the position that move was played from. The
final position of a game therefore has none. Summaries show values from the
side to move's point of view, like the book suite's.

Records are read with cshogi's parsers (``CSA.Parser``, ``KIF.Parser``), in a
child process: the CSA parser is C++ and crashes the whole interpreter on some
malformed records (an incomplete ``P1``..``P9`` board, a bad piece code, a
score comment before the first move). A record that crashes it, cannot be
decoded (UTF-8 and CP932/Shift_JIS are tried), holds neither a move nor a
result (an empty or header-only file), has an invalid start position or an
illegal move is reported as ``FILE: reason`` and skipped, or with
``strict`` ends the run before the output is touched.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import cshogi
from cshogi import CSA, KIF  # submodules: 'import cshogi' alone does not load them

from bookgen.analysis.suites import SuiteLine, ply_filter, write_suite
from bookgen.errors import BookgenError
from bookgen.position import STARTPOS_SFEN, InvalidPosition, board_key, parse_sfen
from bookgen.workers.isolated import IsolatedWorker, WorkerCrashed, WorkerTimeout

RECORD_FORMATS = {".csa": "csa", ".kif": "kif", ".kifu": "kif"}
MATE_VALUE = 30000
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


def _replay(game: RecordedGame, wanted: Collection[int], last_ply: int, *, max_value: int,
            max_line_value: int | None, ignore_values: bool,
            rejected: Counter[str] | None = None) -> list[tuple[str, SuiteLine]]:
    """Check every move of ``game``; return its positions that qualify, each
    with its key (normalised sfen). ``rejected`` counts the positions at the
    wanted plies left out, by reason (``no_value``, ``max_value``,
    ``max_line_value``), and games that end before the first wanted ply
    (``ends_early``)."""
    board = cshogi.Board(game.start)
    start = None if board_key(board) == STARTPOS_SFEN else game.start
    usi: list[str] = []
    picked: list[tuple[int, int | None]] = []
    keys: list[str] = []
    line_ok = True
    for index in range(len(game.moves) + 1):
        ply = index + 1
        value = game.values[index] if index < len(game.moves) else None
        at_wanted = ply <= last_ply and ply in wanted
        if at_wanted and line_ok and (
                ignore_values or (value is not None and abs(value) <= max_value)):
            stm_value = value if value is None or board.turn == cshogi.BLACK else -value
            picked.append((index, stm_value))
            keys.append(board_key(board))
        elif at_wanted and rejected is not None:
            rejected["max_line_value" if not line_ok else
                     "no_value" if value is None else "max_value"] += 1
        if max_line_value is not None and value is not None and abs(value) > max_line_value:
            line_ok = False
        if index == len(game.moves):
            break
        move = game.moves[index]
        legal = set(board.legal_moves)
        found = move if move in legal else None
        if found is None and move:
            # Parsers may set bits outside the 16-bit move differently.
            found = next((m for m in legal if cshogi.move16(m) == cshogi.move16(move)), None)
        if found is None:
            raise BadRecord(f"move {ply} is illegal or unreadable")
        usi.append(cshogi.move_to_usi(found))
        board.push(found)
    if rejected is not None and wanted and len(game.moves) + 1 < min(wanted):
        rejected["ends_early"] += 1
    return [(key, SuiteLine(tuple(usi[:index]), value, start))
            for key, (index, value) in zip(keys, picked)]


def _line_key(line: SuiteLine) -> tuple[bool, int, str]:
    """Which line stands for a position met more than once: from the initial
    position if possible, then the shortest, then the first in text order."""
    return line.start is not None, len(line.moves), line.text()


def _empty_suite_reason(output: str | Path, files: int, skipped: int, counts: dict[str, int],
                        rejected: Counter[str], min_moves: int, max_value: int,
                        max_line_value: int | None) -> str:
    """Why no position qualified, in one line, with the count of every rule that
    left something out."""
    def some(parts: list[tuple[int, str]]) -> str:
        return ", ".join(f"{n} {text}" for n, text in parts if n)

    read = f"{files} file{'s' if files != 1 else ''}, {counts['read']} games read"
    if skipped:
        read += f" ({skipped} skipped as bad records)"
    games = some([(counts["too_short"], f"shorter than --min-moves {min_moves}"),
                  (counts["unrated"], "without both ratings (--min-rating; see "
                                      "--allow-unrated)"),
                  (counts["below_min_rating"], "below --min-rating")])
    positions = some([
        (rejected["no_value"], "without a recorded evaluation (see --ignore-values)"),
        (rejected["max_value"], f"beyond --max-value {max_value}"),
        (rejected["max_line_value"], f"after an evaluation beyond --max-line-value "
                                     f"{max_line_value}")])
    text = f"no position qualified, {output} not written: {read}"
    if games:
        text += f"; games left out: {games}"
    text += f"; {counts['used']} games used"
    if rejected["ends_early"]:
        text += f", {rejected['ends_early']} of them ending before the selected plies"
    if positions:
        text += f"; their positions at the selected plies: {positions}"
    return text


def make_suite_from_records(
        output: str | Path, sources: Sequence[str | Path], *, max_value: int = 100,
        min_ply: int = 1, max_ply: int = 1000, plies: Collection[int] | None = None,
        min_moves: int = 50, min_rating: float | None = None, allow_unrated: bool = False,
        ignore_values: bool = False, max_line_value: int | None = None,
        limit: int | None = None, per_line_cap: int | None = None, cap_plies: int = 4,
        seed: int = 0, strict: bool = False,
        on_bad: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Write the balanced positions of the games in ``sources`` (record files or
    directories); returns the summary.

    A position qualifies when its game has at least ``min_moves`` moves, both
    players are rated at least ``min_rating`` (if given; games without both
    ratings recorded are left out unless ``allow_unrated``), its ply is selected
    (``plies``, else ``min_ply``..``max_ply``; the start position is ply 1), and
    its recorded evaluation is within ``max_value`` of 0, and every evaluation
    recorded before it within ``max_line_value`` (if given). ``ignore_values``
    takes the positions at the selected plies whatever their evaluation, or
    none. A position reached in several games or by several move orders is
    written once. Lines are ``startpos moves ...``, or ``sfen SFEN moves ...``
    for games that did not start from the initial position.

    Bad records are passed to ``on_bad`` as ``FILE: reason`` and skipped, or
    with ``strict`` raise BookgenError before the output is written.
    """
    wanted, last_ply = ply_filter(min_ply, max_ply, plies)
    files = find_records(sources)
    if not files:
        raise BookgenError("no game records (*.csa, *.kif, *.kifu) in "
                           + ", ".join(str(source) for source in sources))
    bad: list[str] = []
    counts = {"read": 0, "too_short": 0, "unrated": 0, "below_min_rating": 0, "used": 0,
              "with_positions": 0}
    best: dict[str, SuiteLine] = {}
    candidates = 0
    rejected: Counter[str] = Counter()

    def report(where: str, reason: str) -> None:
        if strict:
            raise BookgenError(f"{where}: {reason} (--strict)")
        bad.append(f"{where}: {reason}")
        if on_bad is not None:
            on_bad(bad[-1])

    with RecordParser() as parser:
        for path in files:
            for item in read_games(path, parser):
                if isinstance(item, tuple):
                    report(*item)
                    continue
                game = item
                left_out = None   # counted once the record has replayed cleanly
                if len(game.moves) < min_moves:
                    left_out = "too_short"
                elif min_rating is not None:
                    black_rating, white_rating = game.ratings
                    if black_rating is None or white_rating is None:
                        if not allow_unrated:
                            left_out = "unrated"
                    elif min(black_rating, white_rating) < min_rating:
                        left_out = "below_min_rating"
                usable = left_out is None
                try:
                    # Every game is replayed, used or not, so that bad records
                    # are reported whatever the filters.
                    lines = _replay(game, wanted if usable else (), last_ply,
                                    max_value=max_value, max_line_value=max_line_value,
                                    ignore_values=ignore_values,
                                    rejected=rejected if usable else None)
                except BadRecord as error:
                    report(game.where, str(error))
                    continue
                counts["read"] += 1
                if left_out is not None:
                    counts[left_out] += 1
                counts["used"] += usable
                counts["with_positions"] += bool(lines)
                for key, line in lines:
                    candidates += 1
                    if key not in best or _line_key(line) < _line_key(best[key]):
                        best[key] = line
    if not best:
        raise BookgenError(_empty_suite_reason(output, len(files), len(bad), counts, rejected,
                                               min_moves, max_value, max_line_value))
    summary = write_suite(output, list(best.values()), limit=limit,
                          per_line_cap=per_line_cap, cap_plies=cap_plies, seed=seed)
    summary["records"] = {"files": len(files), "read": counts["read"], "skipped": len(bad)}
    summary["games"] = {key: counts[key] for key in
                        ("used", "with_positions", "too_short", "unrated", "below_min_rating")}
    summary["candidates"] = candidates
    summary["duplicates"] = candidates - len(best)
    summary["bad_records"] = bad
    return summary
