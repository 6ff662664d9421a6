"""``bookgen suite --from-records``: balanced-position suites cut from game records.

dlshogi's ``csa_to_gokakusfen`` rule: from games of at least ``min_moves``
moves (and, with ``min_rating``, between players both rated at least that),
take the positions at the selected plies whose recorded evaluation is within
``max_value_cp`` of 0 (:class:`RecordSuiteSettings`). dlshogi's defaults are the
positions after 24 and 36 moves (plies 25 and 37 here, where the start position
is ply 1), ``|eval| <= 100``, 50 moves and rating 3800; ``max_line_value_cp`` is
its second bound (170), on every evaluation recorded before the selected
position.

The records (CSA and KIF files) and their evaluations are read by
:mod:`bookgen.formats.records`, in a child process that cshogi's parser may
crash without harm. Summaries show values from the side to move's point of
view, like the book suite's. A record that crashes the parser, cannot be
decoded, holds neither a move nor a result, has an invalid start position or
an illegal move is reported as ``FILE: reason`` and skipped, or with
``strict`` ends the run before the output is touched.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Collection, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import cshogi

from bookgen.analysis.suites import SuiteLine, SuiteSelection, SuiteSummary, write_suite
from bookgen.errors import BookgenError, SettingsError
from bookgen.formats.records import BadRecord, RecordedGame, RecordParser, find_records, read_games
from bookgen.position import STARTPOS_SFEN, board_key

__all__ = ["GameCounts", "RecordCounts", "RecordSuiteSettings", "RecordSuiteSummary",
           "make_suite_from_records"]

_FIELD, _mention = SettingsError.FIELD, SettingsError.mention


@dataclass(frozen=True)
class RecordSuiteSettings:
    """What :func:`make_suite_from_records` keeps.

    A position qualifies when its game has at least ``min_moves`` moves, both
    players are rated at least ``min_rating`` (if given; games without both
    ratings recorded are left out unless ``allow_unrated``), its ply is selected
    and its recorded evaluation is within ``selection.max_value_cp`` of 0, and
    every evaluation recorded before it within ``max_line_value_cp`` (if given).
    ``ignore_values`` takes the positions at the selected plies whatever their
    evaluation, or none. ``strict``: a bad record ends the run before the output
    is written, instead of being reported and skipped.
    """

    selection: SuiteSelection = field(default_factory=SuiteSelection)
    min_moves: int = 50
    min_rating: float | None = None
    allow_unrated: bool = False
    ignore_values: bool = False
    max_line_value_cp: int | None = None
    strict: bool = False

    def __post_init__(self) -> None:
        if self.min_moves < 0:
            raise SettingsError("min_moves", "must be at least 0")
        if self.max_line_value_cp is not None and self.max_line_value_cp < 0:
            raise SettingsError("max_line_value_cp", "must be at least 0")
        if self.allow_unrated and self.min_rating is None:
            raise SettingsError("allow_unrated",
                                f"{_FIELD} only applies with {_mention('min_rating')}")


@dataclass(frozen=True)
class RecordCounts:
    """The record ``files`` found, the games ``read`` from them and the bad
    records ``skipped``."""

    files: int
    read: int
    skipped: int


@dataclass(frozen=True)
class GameCounts:
    """The games ``used`` (``with_positions``: that gave a position) and those
    left out: ``too_short``, ``unrated``, ``below_min_rating``."""

    used: int
    with_positions: int
    too_short: int
    unrated: int
    below_min_rating: int


@dataclass(frozen=True)
class RecordSuiteSummary(SuiteSummary):
    """A suite from records (:class:`SuiteSummary`), with the ``records`` and
    ``games`` read, the ``candidates`` (qualifying positions, repeats included),
    the ``duplicates`` written once and the ``bad_records`` (``FILE: reason``)."""

    records: RecordCounts
    games: GameCounts
    candidates: int
    duplicates: int
    bad_records: tuple[str, ...]

    def as_dict(self) -> dict[str, Any]:
        """The ``--json`` output: the suite's, then the fields in order."""
        return {**super().as_dict(), "records": asdict(self.records),
                "games": asdict(self.games), "candidates": self.candidates,
                "duplicates": self.duplicates, "bad_records": list(self.bad_records)}


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


def _empty_suite_error(output: str | Path, files: int, skipped: int, counts: dict[str, int],
                       rejected: Counter[str], settings: RecordSuiteSettings) -> BookgenError:
    """Why no position qualified, in one line, with the count of every rule that
    left something out: a :class:`SettingsError` naming those rules' settings
    (none of them the error's own field), or a plain error where no rule did."""
    def some(parts: list[tuple[int, str]]) -> str:
        return ", ".join(f"{n} {text}" for n, text in parts if n)

    read = f"{files} file{'s' if files != 1 else ''}, {counts['read']} games read"
    if skipped:
        read += f" ({skipped} skipped as bad records)"
    min_rating = _mention("min_rating")
    games = some([
        (counts["too_short"], f"shorter than {_mention('min_moves')} {settings.min_moves}"),
        (counts["unrated"], f"without both ratings ({min_rating}; see "
                            f"{_mention('allow_unrated')})"),
        (counts["below_min_rating"], f"below {min_rating}")])
    positions = some([
        (rejected["no_value"], "without a recorded evaluation (see "
                               f"{_mention('ignore_values')})"),
        (rejected["max_value"], f"beyond {_mention('selection.max_value_cp')} "
                                f"{settings.selection.max_value_cp}"),
        (rejected["max_line_value"], "after an evaluation beyond "
                                     f"{_mention('max_line_value_cp')} "
                                     f"{settings.max_line_value_cp}")])
    text = f"no position qualified, {output} not written: {read}"
    if games:
        text += f"; games left out: {games}"
    text += f"; {counts['used']} games used"
    if rejected["ends_early"]:
        text += f", {rejected['ends_early']} of them ending before the selected plies"
    if positions:
        text += f"; their positions at the selected plies: {positions}"
    return SettingsError("selection", text) if games or positions else BookgenError(text)


def make_suite_from_records(sources: Sequence[str | Path], out: str | Path,
                            settings: RecordSuiteSettings | None = None, *,
                            on_bad: Callable[[str], None] | None = None) -> RecordSuiteSummary:
    """Write the balanced positions of the games in ``sources`` (record files or
    directories) to ``out``; returns the summary.

    Which positions qualify: :class:`RecordSuiteSettings` (None: the defaults).
    A position reached in several games or by several move orders is written
    once. Lines are ``startpos moves ...``, or ``sfen SFEN moves ...`` for games
    that did not start from the initial position.

    Bad records are passed to ``on_bad`` as ``FILE: reason`` and skipped, or
    with ``settings.strict`` raise a :class:`SettingsError` of ``strict`` before
    the output is written.
    """
    settings = settings if settings is not None else RecordSuiteSettings()
    selection = settings.selection
    max_value, max_line_value = selection.max_value_cp, settings.max_line_value_cp
    min_moves, min_rating = settings.min_moves, settings.min_rating
    allow_unrated, ignore_values = settings.allow_unrated, settings.ignore_values
    wanted, last_ply = selection.wanted_plies()
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
        if settings.strict:
            raise SettingsError("strict", f"{where}: {reason} ({_FIELD})")
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
        raise _empty_suite_error(out, len(files), len(bad), counts, rejected, settings)
    suite = write_suite(out, list(best.values()), selection)
    return RecordSuiteSummary(
        file=suite.file, positions=suite.positions, by_ply=suite.by_ply,
        by_abs_value=suite.by_abs_value, by_value=suite.by_value,
        records=RecordCounts(files=len(files), read=counts["read"], skipped=len(bad)),
        games=GameCounts(**{key: counts[key] for key in ("used", "with_positions", "too_short",
                                                         "unrated", "below_min_rating")}),
        candidates=candidates, duplicates=candidates - len(best), bad_records=tuple(bad))
