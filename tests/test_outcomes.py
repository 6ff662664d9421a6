"""Ending counts per player and rate tests (bookgen.analysis.outcomes, ``bookgen outcomes``).

Expected values come from the public SciPy vector of the statistics
reference (12 declaration wins in 600 games vs 3 in 200) and from SciPy
called directly on hand-made tables.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy.stats import chi2_contingency, chisquare, fisher_exact

from bookgen.analysis import outcomes
from bookgen.formats.records import write_pgn_game
from bookgen.store.results import GameResult, ResultsFile
from conftest import STARTPOS, run_cli


def games_vs(player: str, opponent: str, n: int, k: int, reason: str = "declaration",
             other: str = "resign") -> list[GameResult]:
    """``n`` games of ``player`` against ``opponent``, alternating colours: ``player`` wins
    the first ``k`` by ``reason`` and loses the others by ``other``."""
    games = []
    for i in range(n):
        black, white = (player, opponent) if i % 2 == 0 else (opponent, player)
        won = i < k
        result = ("black" if black == player else "white") if won else (
            "white" if black == player else "black")
        games.append(GameResult(black, white, result, reason if won else other, 90))
    return games


@pytest.fixture
def scipy_vector() -> list[GameResult]:
    """12 declaration wins in 600 games (X) vs 3 in 200 (Y), both against O."""
    return games_vs("X", "O", 600, 12) + games_vs("Y", "O", 200, 3)


# --------------------------------------------------------------------------
# the public SciPy vector


def test_scipy_vector_fisher_by_default(scipy_vector):
    test = outcomes.test_rate(scipy_vector, "declaration win", players=["X", "Y"])
    assert test.counts == {"X": (12, 600), "Y": (3, 200)}
    # An expected count is 3.75 < 5: Fisher's exact test.
    assert test.test == "fisher_exact" and test.dof is None
    assert f"{test.statistic:.3f}" == "1.340"
    assert f"{test.p_value:.3f}" == "0.773"
    assert test.warnings == []


def test_scipy_vector_chi2_yates_and_uncorrected(scipy_vector):
    test = outcomes.test_rate(scipy_vector, "declaration win", players=["X", "Y"],
                              method="chi2")
    assert test.test == "chi2_contingency (Yates)" and test.dof == 1
    assert f"{test.statistic:.4f}" == "0.0226"
    assert f"{test.p_value:.3f}" == "0.880"
    assert any("below 5" in w for w in test.warnings)
    plain = outcomes.test_rate(scipy_vector, "declaration win", players=["X", "Y"],
                               method="chi2", correction=False)
    assert plain.test == "chi2_contingency"
    assert f"{plain.statistic:.4f}" == "0.2038"
    assert f"{plain.p_value:.3f}" == "0.652"


def test_scipy_vector_naive_chisquare_is_flagged(scipy_vector):
    test = outcomes.test_rate(scipy_vector, "declaration win", players=["X", "Y"], naive=True)
    assert test.naive is not None
    assert f"{test.naive['p_value']:.3f}" == "0.020"
    assert test.naive["statistic"] == pytest.approx(5.4)
    # f_exp proportional to games: [11.25, 3.75] -> chi2 0.2.
    assert test.naive["proportional_statistic"] == pytest.approx(0.2)
    assert test.naive["proportional_p_value"] == pytest.approx(
        chisquare([12, 3], f_exp=[11.25, 3.75]).pvalue)
    assert len(test.warnings) == 1
    assert "different numbers of games (600, 200)" in test.warnings[0]
    # The main test is unchanged by naive=True.
    assert f"{test.p_value:.3f}" == "0.773"


def test_naive_without_warning_when_game_counts_match():
    games = (games_vs("P", "O", 200, 18) + games_vs("Q", "O", 200, 16)
             + games_vs("R", "O", 200, 24))
    test = outcomes.test_rate(games, "declaration win", players=["P", "Q", "R"], naive=True)
    assert test.naive is not None
    assert test.naive["p_value"] == pytest.approx(chisquare([18, 16, 24]).pvalue)
    assert test.naive["proportional_p_value"] == pytest.approx(test.naive["p_value"])
    assert not any("chisquare" in w for w in test.warnings)


# --------------------------------------------------------------------------
# hand-made tables against scipy called directly


def test_three_players_match_scipy():
    games = (games_vs("P", "O", 100, 10) + games_vs("Q", "O", 120, 25)
             + games_vs("R", "O", 30, 1))
    test = outcomes.test_rate(games, "declaration win", players=["P", "Q", "R"])
    table = [[10, 90], [25, 95], [1, 29]]
    direct = chi2_contingency(table)
    assert test.test == "chi2_contingency" and test.dof == 2
    assert test.statistic == pytest.approx(direct.statistic)
    assert test.p_value == pytest.approx(direct.pvalue)
    # R's expected count is 30 * 36 / 250 = 4.32.
    assert any("below 5" in w for w in test.warnings)

    by_pair = {(row["player_a"], row["player_b"]): row for row in test.pairwise}
    assert set(by_pair) == {("P", "Q"), ("P", "R"), ("Q", "R")}
    expected_p = {
        ("P", "Q"): ("chi2_contingency (Yates)", chi2_contingency([table[0], table[1]]).pvalue),
        ("P", "R"): ("fisher_exact", fisher_exact([table[0], table[2]]).pvalue),  # 2.5 < 5
        ("Q", "R"): ("chi2_contingency (Yates)", chi2_contingency([table[1], table[2]]).pvalue),
    }
    for key, (name, p) in expected_p.items():
        assert by_pair[key]["test"] == name
        assert by_pair[key]["p"] == pytest.approx(p)
    # Holm by hand: sort, multiply by 3, 2, 1, keep monotone, cap at 1.
    ordered = sorted(expected_p, key=lambda k: expected_p[k][1])
    running = 0.0
    for factor, key in zip((3, 2, 1), ordered):
        running = max(running, min(1.0, factor * expected_p[key][1]))
        assert by_pair[key]["p_holm"] == pytest.approx(running)


def test_holm():
    assert outcomes.holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    assert outcomes.holm([0.5, 0.9]) == pytest.approx([1.0, 1.0])
    assert outcomes.holm([0.2]) == [0.2]
    assert outcomes.holm([]) == []


def test_two_players_large_counts_use_yates():
    games = games_vs("P", "O", 300, 60) + games_vs("Q", "O", 300, 35)
    test = outcomes.test_rate(games, "declaration win", players=["P", "Q"])
    direct = chi2_contingency([[60, 240], [35, 265]])
    assert test.test == "chi2_contingency (Yates)"
    assert test.statistic == pytest.approx(direct.statistic)
    assert test.p_value == pytest.approx(direct.pvalue)
    assert test.pairwise[0]["p"] == pytest.approx(direct.pvalue)
    assert test.pairwise[0]["p_holm"] == pytest.approx(direct.pvalue)


def test_every_game_with_the_ending_gives_no_test():
    games = games_vs("P", "O", 10, 0) + games_vs("Q", "O", 12, 0)  # all resign losses
    test = outcomes.test_rate(games, "resign loss", players=["P", "Q"])
    assert test.counts == {"P": (10, 10), "Q": (12, 12)}
    assert test.test == "none" and test.p_value == 1.0
    assert "nothing to compare" in test.warnings[0]


def test_rate_errors(scipy_vector):
    from bookgen.errors import BookgenError

    with pytest.raises(BookgenError, match="endings seen: declaration loss"):
        outcomes.test_rate(scipy_vector, "checkmate win")
    with pytest.raises(BookgenError, match="players found: O, X, Y"):
        outcomes.test_rate(scipy_vector, "declaration win", players=["X", "Z"])
    with pytest.raises(BookgenError, match="at least two players"):
        outcomes.test_rate(scipy_vector, "declaration win", players=["X"])


def test_paired_games_get_the_correlation_note():
    plain = games_vs("P", "O", 40, 10) + games_vs("Q", "O", 40, 20)
    assert outcomes.test_rate(plain, "declaration win", players=["P", "Q"]).notes == []
    paired = [GameResult(g.black, g.white, g.result, g.reason, g.plies, f"m#{i // 2}")
              for i, g in enumerate(plain)]
    notes = outcomes.test_rate(paired, "declaration win", players=["P", "Q"]).notes
    assert len(notes) == 1 and "correlated" in notes[0]


# --------------------------------------------------------------------------
# the table


def test_outcome_table_by_hand():
    games = [
        GameResult("A", "B", "black", "declaration"),      # A declaration win, B declaration loss
        GameResult("B", "A", "black", "resign"),           # B resign win, A resign loss
        GameResult("A", "C", "draw", "repetition draw"),   # both 'repetition draw'
        GameResult("C", "B", "draw", "max ply"),           # both 'max ply draw'
        GameResult("C", "A", "white", "perpetual check"),  # A perpetual check win, C loss
        GameResult("B", "C", "white", ""),                 # C unknown win, B unknown loss
        GameResult("A", "A", "black", "resign"),           # self-play: left out
    ]
    table = outcomes.outcome_table(games)
    columns = ["games", "declaration loss", "declaration win", "max ply draw",
               "perpetual check loss", "perpetual check win", "repetition draw",
               "resign loss", "resign win", "unknown loss", "unknown win"]
    expected = pd.DataFrame(
        [[4, 0, 1, 0, 0, 1, 1, 1, 0, 0, 0],
         [4, 1, 0, 1, 0, 0, 0, 0, 1, 1, 0],
         [4, 0, 0, 1, 1, 0, 1, 0, 0, 0, 1]],
        index=pd.Index(["A", "B", "C"], name="player"), columns=columns)
    pd.testing.assert_frame_equal(table, expected)

    chosen = outcomes.outcome_table(games, ["resign win", "declaration", "checkmate win"])
    assert list(chosen.columns) == ["games", "resign win", "declaration", "checkmate win"]
    # A bare reason counts the reason whatever the result.
    assert chosen["declaration"].tolist() == [1, 1, 0]
    assert chosen["resign win"].tolist() == [0, 1, 0]
    assert chosen["checkmate win"].tolist() == [0, 0, 0]


def test_bare_reason_in_rate_test(scipy_vector):
    test = outcomes.test_rate(scipy_vector, "declaration")
    assert test.counts == {"O": (15, 800), "X": (12, 600), "Y": (3, 200)}


# --------------------------------------------------------------------------
# the command line


def write_results(path: Path, games: list[GameResult]) -> Path:
    with ResultsFile(path) as results:
        match_id = results.begin_match("m", {}, len(games))
        for index, game in enumerate(games):
            results.add_game(match_id, game_key=str(index), round=index, pair=index // 2,
                             opening_index=0, opening="o", start_sfen=STARTPOS,
                             black=game.black, white=game.white, result=game.result,
                             reason=game.reason, plies=game.plies, moves="")
    return path


def test_cli_outcomes_scipy_vector(tmp_path, scipy_vector):
    path = write_results(tmp_path / "r.sqlite", scipy_vector)
    data = json.loads(run_cli("outcomes", path, "--ending", "declaration win", "--player", "X",
                              "--player", "Y", "--naive", "--json").stdout)
    assert data["table"] == {"X": {"games": 600, "declaration win": 12},
                             "Y": {"games": 200, "declaration win": 3}}
    (test,) = data["tests"]
    assert test["counts"] == {"X": {"k": 12, "n": 600}, "Y": {"k": 3, "n": 200}}
    assert test["test"] == "fisher_exact" and test["dof"] is None
    assert round(test["statistic"], 3) == 1.340 and round(test["p_value"], 3) == 0.773
    assert round(test["naive"]["p_value"], 3) == 0.020
    assert any("different numbers of games" in w for w in test["warnings"])
    assert any("correlated" in n for n in test["notes"])

    text = run_cli("outcomes", path, "--ending", "declaration win", "--player", "X",
                   "--player", "Y", "--naive").stdout
    assert "fisher_exact: odds ratio 1.3401, p 0.7726" in text
    assert "X vs Y: fisher_exact p 0.7726, Holm p 0.7726" in text
    assert "warning: chisquare(k) assumes equal expected counts" in text
    assert text.count("correlated") == 1


def test_cli_outcomes_default_endings(tmp_path, scipy_vector):
    path = write_results(tmp_path / "r.sqlite", scipy_vector)
    data = json.loads(run_cli("outcomes", path, "--json").stdout)
    assert data["table"]["O"] == {"games": 800, "declaration loss": 15, "declaration win": 0,
                                  "resign loss": 0, "resign win": 785}
    assert [t["ending"] for t in data["tests"]] == ["declaration loss", "declaration win",
                                                   "resign loss", "resign win"]
    by_ending = {t["ending"]: t for t in data["tests"]}
    table = np.array([[0, 800], [12, 588], [3, 197]])
    direct = chi2_contingency(table)
    assert by_ending["declaration win"]["test"] == "chi2_contingency"
    assert by_ending["declaration win"]["p_value"] == pytest.approx(direct.pvalue)
    # With --player the opponent's endings are not compared.
    data = json.loads(run_cli("outcomes", path, "--player", "X", "--player", "Y",
                              "--json").stdout)
    assert [t["ending"] for t in data["tests"]] == ["declaration win", "resign loss"]


def test_cli_outcomes_on_pgn(tmp_path):
    path = tmp_path / "g.pgn"
    with open(path, "w", encoding="utf-8") as handle:
        for black, white, result, reason in [("A", "B", "black", "declaration"),
                                             ("B", "A", "black", "declaration"),
                                             ("A", "B", "draw", "repetition draw"),
                                             ("B", "A", "white", "resign")]:
            write_pgn_game(handle, event="t", round_label="1", black=black, white=white,
                           result=result, reason=reason, start_sfen=STARTPOS, moves=[])
    data = json.loads(run_cli("outcomes", path, "--ending", "declaration win", "--json").stdout)
    assert data["table"] == {"A": {"games": 4, "declaration win": 1},
                             "B": {"games": 4, "declaration win": 1}}
    assert data["tests"][0]["p_value"] == pytest.approx(
        fisher_exact([[1, 3], [1, 3]]).pvalue)


@pytest.mark.parametrize("args, message", [
    (["--ending", "checkmate win"], "endings seen: declaration loss, declaration win"),
    (["--player", "Z"], "players found: O, X, Y"),
    (["--player", "X"], "at least two players"),
])
def test_cli_outcomes_errors(tmp_path, args, message):
    games = games_vs("X", "O", 20, 3) + games_vs("Y", "O", 20, 5)
    path = write_results(tmp_path / "r.sqlite", games)
    result = run_cli("outcomes", path, *args, expect=2)
    assert result.stderr.startswith("bookgen: error: ")
    assert message in result.stderr


def test_cli_outcomes_missing_file(tmp_path):
    result = run_cli("outcomes", tmp_path / "missing.sqlite", expect=2)
    assert "no such file" in result.stderr
