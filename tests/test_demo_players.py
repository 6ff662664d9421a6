"""The two built-in players of ``make demo``'s match differ enough to tell apart.

Their options are read from the Makefile's ``demo`` target, so this follows
it. The match is the demo's own (8 balanced openings, colours swapped, 16
games), here from the sample book's openings so that it does not depend on
what a minute of growing produced. The built-in player is deterministic, so
the result is too.
"""

from __future__ import annotations

import re
import sqlite3

import cshogi
import pytest

from bookgen.analysis.match import MATCH_BUILTIN
from bookgen.analysis.pairstats import count_games, elo_pentanomial
from bookgen.analysis.results import load_games
from bookgen.engines.builtin.alphabeta import Searcher
from conftest import ROOT, run_cli


def demo_players() -> dict[str, dict[str, int]]:
    """Each built-in player of the demo's match and its settings."""
    text = (ROOT / "Makefile").read_text(encoding="utf-8").replace("\\\n", " ")
    target = re.search(r"^demo:.*?(?=^\S|\Z)", text, re.MULTILINE | re.DOTALL)
    assert target, "no demo target in the Makefile"
    match_line = next(line for line in target.group(0).splitlines()
                      if "$(BOOKGEN) match " in line)
    players = {name: {"depth": MATCH_BUILTIN.depth, "nodes": MATCH_BUILTIN.nodes}
               for name in re.findall(r"--engine (\w+)=builtin", match_line)}
    for name, key, value in re.findall(r"--option (\w+):(\w+)=(\d+)", match_line):
        players[name][key] = int(value)
    assert set(players) == {"weak", "strong"}, players
    return players


@pytest.fixture(scope="module")
def demo_match(tmp_path_factory):
    """The results file of the demo's match played from the sample book's openings."""
    directory = tmp_path_factory.mktemp("demo")
    book, suite = directory / "book.sqlite", directory / "suite.txt"
    results = directory / "results.sqlite"
    run_cli("import", ROOT / "data" / "sample.db", "-b", book)
    run_cli("suite", "-b", book, "-o", suite, "--max-value", "150", "--min-ply", "3",
            "--max-ply", "9", "--limit", "8", "--seed", "1")
    options = [arg for name, settings in demo_players().items()
               for key, value in settings.items()
               for arg in ("--option", f"{name}:{key}={value}")]
    run_cli("match", "--engine", "weak=builtin", "--engine", "strong=builtin", *options,
            "--openings", suite, "--nodes", "1", "--max-ply", "160", "--concurrency", "2",
            "-o", results, "--quiet")
    return results


def test_strong_player_searches_a_ply_deeper(demo_match):
    """On the positions of the match, the strong player's last complete iteration is
    deeper than the weak one's almost everywhere (with node budgets of 300 and 1500 it
    was in about 70 % of them: the first iteration ignores the budget)."""
    players = demo_players()
    conn = sqlite3.connect(demo_match)
    try:
        games = conn.execute("SELECT start_sfen, moves FROM games").fetchall()
    finally:
        conn.close()
    positions = []
    for start, moves in games:
        board = cshogi.Board(start)
        for ply, move in enumerate(moves.split()):
            if ply % 4 == 0 and list(board.legal_moves):
                positions.append(board.copy())
            board.push_usi(move)
    assert len(positions) > 100

    def depth(board: cshogi.Board, settings: dict[str, int]) -> int:
        return Searcher().search_root(board, settings["depth"], settings["nodes"],
                                      margin=0).depth

    deeper = sum(depth(b, players["strong"]) > depth(b, players["weak"]) for b in positions)
    assert deeper >= 0.95 * len(positions), f"deeper in {deeper} of {len(positions)}"


def test_demo_match_is_significant(demo_match):
    counts = count_games(load_games([demo_match]), "strong", "weak")
    assert counts.games == 16 and counts.pairs == 8
    estimate = elo_pentanomial(counts.penta)
    assert estimate.los > 95.0, (counts, estimate)
    assert counts.wins >= 12, counts
