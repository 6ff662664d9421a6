"""Results files and PGN: what other tools write is read back, bad files are refused."""

from __future__ import annotations

import io
import sqlite3

import cshogi
import cshogi.PGN
import pytest

from bookgen.analysis.results import load_games
from bookgen.errors import BookgenError
from bookgen.formats.records import write_pgn_game
from bookgen.store.results import ResultsFile
from conftest import run_cli


def cshogi_cli_pgn(path, games) -> None:
    """Games written the way ``cshogi.cli`` writes them (``cshogi.PGN.Exporter``)."""
    exporter = cshogi.PGN.Exporter(str(path))
    for number, (first, second, result, moves) in enumerate(games, 1):
        exporter.tag_pair([first, second], result, round=number)
        board = cshogi.Board()
        played = []
        for usi in moves:
            move = board.move_from_usi(usi)
            played.append(move)
            board.push(move)
        exporter.movetext(played)
    exporter.close()


def test_pgn_from_cshogi_cli_is_read_with_sente_as_white(tmp_path):
    pgn = tmp_path / "cshogi.pgn"
    cshogi_cli_pgn(pgn, [("A", "B", cshogi.BLACK_WIN, ["7g7f", "3c3d"]),
                         ("B", "A", cshogi.WHITE_WIN, ["2g2f"]),
                         ("A", "B", cshogi.DRAW, ["7g7f"])])
    games = load_games([pgn])
    assert [(g.black, g.white, g.result) for g in games] == [
        ("A", "B", "black"), ("B", "A", "white"), ("A", "B", "draw")]
    # The first two games swap colours from the same (initial) position: a pair.
    assert games[0].pair == games[1].pair is not None and games[2].pair is None
    table = run_cli("rate", pgn, "--json").stdout
    assert '"name": "A"' in table


def test_our_pgn_round_trips_awkward_names(tmp_path):
    handle = io.StringIO()
    name = 'en"gine \\ <b>'
    write_pgn_game(handle, event="e", round_label="1.1", black=name, white="x", result="white",
                   reason="time forfeit", start_sfen="sfen S", moves=["7g7f"])
    pgn = tmp_path / "g.pgn"
    pgn.write_text(handle.getvalue())
    (game,) = load_games([pgn])
    assert (game.black, game.white, game.result, game.reason, game.plies) == (
        name, "x", "white", "time forfeit", 1)


def test_results_file_refuses_other_files(tmp_path):
    book = tmp_path / "book.sqlite"
    db = sqlite3.connect(book)
    db.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT)")
    db.execute("INSERT INTO meta VALUES ('schema_version', '2')")
    db.commit()
    db.close()
    before = book.read_bytes()
    with pytest.raises(BookgenError, match="not a bookgen results file"):
        ResultsFile(book)
    with pytest.raises(BookgenError, match="not a bookgen results file"):
        load_games([book])
    assert book.read_bytes() == before
    newer = tmp_path / "newer.sqlite"
    ResultsFile(newer).close()
    db = sqlite3.connect(newer)
    db.execute("PRAGMA user_version = 99")
    db.commit()
    db.close()
    with pytest.raises(BookgenError, match="newer"):
        ResultsFile(newer)
    garbage = tmp_path / "games.pgn"
    garbage.write_text("1. e4 e5\n")
    with pytest.raises(BookgenError, match=r"games.pgn:1: movetext before any tag"):
        load_games([garbage])
    bad_result = tmp_path / "bad.pgn"
    bad_result.write_text('[White "a"]\n[Black "b"]\n[Result "2-0"]\n\n2-0\n')
    with pytest.raises(BookgenError, match=r"bad.pgn:1: bad Result '2-0'"):
        load_games([bad_result])
    with pytest.raises(BookgenError, match="no such file"):
        load_games([tmp_path / "missing.sqlite"])
