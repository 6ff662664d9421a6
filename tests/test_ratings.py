"""bookgen rate: Ordo ratings (bookgen.analysis.ratings) and BayesElo (bookgen.analysis.bayeselo).

Expected values come from the model formulas written out here (Ordo's
logistic with 202 points = 76 %, the draw-rate curve, BayesElo's f) and from
scipy root finding, never from the code under test.
"""

from __future__ import annotations

import json
import math
import random
import re
from collections import defaultdict

import numpy as np
import pytest
from scipy import optimize, stats

from bookgen.analysis.bayeselo import BayesEloSettings, fit_bayeselo
from bookgen.analysis.ratings import (
    Anchor,
    PlayerRating,
    RatingSettings,
    RatingTable,
    _aggregate,
    _simulate,
    draw_probability,
    expected_score,
    fit_ratings,
    head_to_head,
)
from bookgen.errors import BookgenError
from bookgen.store.results import GameResult, ResultsFile
from conftest import run_cli

BETA = math.log(0.76 / 0.24) / 202
SCORE = {"black": 1.0, "draw": 0.5, "white": 0.0}


def E(diff: float) -> float:
    return 1.0 / (1.0 + math.exp(-BETA * diff))


def games_from(spec: dict[tuple[str, str], tuple[int, int, int]]) -> list[GameResult]:
    """{(black, white): (black wins, draws, white wins)} -> games, interleaved."""
    games = []
    for (black, white), (wins, draws, losses) in spec.items():
        games += [GameResult(black, white, "black")] * wins
        games += [GameResult(black, white, "draw")] * draws
        games += [GameResult(black, white, "white")] * losses
    random.Random(5).shuffle(games)
    return games


def write_results(path, games: list[GameResult]):
    with ResultsFile(path) as results:
        match = results.begin_match("test", {"test": True}, len(games))
        for i, game in enumerate(games):
            results.add_game(match, game_key=str(i), round=i // 2 + 1, pair=i // 2,
                             start_sfen="startpos", black=game.black, white=game.white,
                             result=game.result, reason="resign", plies=80, moves="7g7f")
    return path


def pgn_text(games: list[GameResult]) -> str:
    """PGN as shogi tools write it: sente is "White"."""
    token = {"black": "1-0", "white": "0-1", "draw": "1/2-1/2"}
    parts = []
    for i, game in enumerate(games):
        parts.append(f'[Event "test"]\n[Round "{i + 1}"]\n[White "{game.black}"]\n'
                     f'[Black "{game.white}"]\n[Result "{token[game.result]}"]\n\n'
                     f'{{usi 7g7f 3c3d}} {token[game.result]}\n\n')
    return "".join(parts)


def rate_json(*args) -> dict:
    return json.loads(run_cli("rate", *args, "--json").stdout)


def ratings_of(data: dict) -> dict[str, float]:
    return {p["name"]: p["rating"] for p in data["players"]}


def residuals(games: list[GameResult], ratings: dict[str, float], wa: float = 0.0):
    """(per player: points - expected, first player: points - expected)."""
    per_player: dict[str, float] = defaultdict(float)
    first = 0.0
    for game in games:
        e = E(ratings[game.black] - ratings[game.white] + wa)
        s = SCORE[game.result]
        per_player[game.black] += s - e
        per_player[game.white] += (1 - s) - (1 - e)
        first += s - e
    return per_player, first


ROUND_ROBIN = {
    ("A", "B"): (5, 3, 2), ("B", "A"): (3, 4, 3),
    ("A", "C"): (6, 2, 2), ("C", "A"): (2, 3, 5),
    ("B", "C"): (4, 4, 2), ("C", "B"): (3, 2, 5),
}


# --------------------------------------------------------------------------
# the model


def test_expected_score_is_ordo_logistic():
    assert expected_score(0) == pytest.approx(0.5, abs=1e-15)
    assert expected_score(202) == pytest.approx(0.76, abs=1e-12)
    assert expected_score(-202) == pytest.approx(0.24, abs=1e-12)
    assert expected_score(400, scale=400) == pytest.approx(0.76, abs=1e-12)


def test_draw_probability_curve():
    # at equal strength the draw probability is the draw rate itself
    for deq in (0.05, 0.3, 0.5, 0.8):
        assert draw_probability(0.5, deq) == pytest.approx(deq, abs=1e-12)
    # Deq = 1/2 (a = 0) is the limit 2 p (1 - p)
    assert draw_probability(0.8, 0.5) == pytest.approx(2 * 0.8 * 0.2, abs=1e-12)
    deq, p = 0.1, 0.7
    a = (1 - 2 * deq) / deq**2
    assert draw_probability(p, deq) == pytest.approx(
        (math.sqrt(1 + 4 * a * p * (1 - p)) - 1) / a, rel=1e-12)


def test_two_players_difference_is_inverse_of_expected_score(tmp_path):
    games = games_from({("A", "B"): (5, 2, 1), ("B", "A"): (2, 1, 3)})  # A: 9.5 / 14
    k = 9.5 / 14
    diff = math.log(k / (1 - k)) / BETA
    table = fit_ratings(games)
    assert table.rating_of("A") - table.rating_of("B") == pytest.approx(diff, abs=1e-9)
    assert table.rating_of("A") == pytest.approx(diff / 2, abs=1e-9)
    assert E(diff) == pytest.approx(k, abs=1e-12)
    data = rate_json(write_results(tmp_path / "m.sqlite", games))
    ratings = ratings_of(data)
    assert ratings["A"] - ratings["B"] == pytest.approx(diff, abs=1e-9)
    assert [p["name"] for p in data["players"]] == ["A", "B"]
    a = data["players"][0]
    assert (a["w"], a["d"], a["l"], a["points"], a["played"]) == (8, 3, 3, 9.5, 14)


def test_round_robin_ratings_meet_the_ml_conditions(tmp_path):
    games = games_from(ROUND_ROBIN)
    path = write_results(tmp_path / "rr.sqlite", games)

    plain = rate_json(path)
    per_player, _ = residuals(games, ratings_of(plain))
    assert max(abs(v) for v in per_player.values()) < 1e-9
    assert plain["white_advantage"] is None and plain["draw_rate"] is None
    assert sum(ratings_of(plain).values()) == pytest.approx(0.0, abs=1e-9)

    with_wa = rate_json(path, "-W")
    wa = with_wa["white_advantage"]
    per_player, first = residuals(games, ratings_of(with_wa), wa)
    assert max(abs(v) for v in per_player.values()) < 1e-9
    assert abs(first) < 1e-9
    assert wa > 0  # sente scored 57.5 of 90 here
    # the library gives the same numbers
    table = fit_ratings(games, RatingSettings(fit_white_advantage=True))
    assert table.white_advantage == pytest.approx(wa, abs=1e-9)

    with_draws = rate_json(path, "-W", "-D")
    deq = with_draws["draw_rate"]
    assert 0 < deq < 1
    ratings = ratings_of(with_draws)
    assert ratings == pytest.approx(ratings_of(with_wa), abs=1e-9)  # -D leaves ratings alone
    a = (1 - 2 * deq) / deq**2
    expected_draws = 0.0
    for game in games:
        p = E(ratings[game.black] - ratings[game.white] + wa)
        expected_draws += (math.sqrt(1 + 4 * a * p * (1 - p)) - 1) / a
    observed = sum(game.result == "draw" for game in games)
    assert expected_draws == pytest.approx(observed, abs=1e-9)


def test_draw_rate_without_white_advantage():
    games = games_from(ROUND_ROBIN)
    table = fit_ratings(games, RatingSettings(fit_draw_rate=True))
    ratings = {p.name: p.rating for p in table.players}
    deq = table.draw_rate
    expected_draws = sum(float(draw_probability(E(ratings[g.black] - ratings[g.white]), deq))
                         for g in games)
    assert expected_draws == pytest.approx(sum(g.result == "draw" for g in games), abs=1e-9)
    assert table.white_advantage is None


def test_invariant_under_renaming_and_reordering():
    games = games_from({**ROUND_ROBIN, ("D", "A"): (2, 1, 4), ("B", "D"): (3, 3, 1)})
    fitted = RatingSettings(fit_white_advantage=True, fit_draw_rate=True, simulations=60, seed=3)
    base = fit_ratings(games, fitted)
    names = {"A": "zeta", "B": "alpha", "C": "Mu", "D": "0-engine"}
    renamed = [GameResult(names[g.black], names[g.white], g.result) for g in games]
    table = fit_ratings(renamed, RatingSettings(fit_white_advantage=True, fit_draw_rate=True))
    for player in base.players:
        assert table.rating_of(names[player.name]) == pytest.approx(player.rating, abs=1e-9)
    assert table.white_advantage == pytest.approx(base.white_advantage, abs=1e-9)
    assert table.draw_rate == pytest.approx(base.draw_rate, abs=1e-12)
    shuffled = list(games)
    random.Random(11).shuffle(shuffled)
    again = fit_ratings(shuffled, fitted)
    # the games are aggregated, so even the simulations are the same
    assert again.as_json() == base.as_json()
    assert again.pair_sd == base.pair_sd


def test_average_and_anchor(tmp_path):
    games = games_from(ROUND_ROBIN)
    path = write_results(tmp_path / "rr.sqlite", games)
    base = ratings_of(rate_json(path))
    shifted = ratings_of(rate_json(path, "--average", "2300"))
    assert sum(shifted.values()) / 3 == pytest.approx(2300, abs=1e-9)
    for name in base:
        assert shifted[name] - 2300 == pytest.approx(base[name], abs=1e-9)
    anchored = rate_json(path, "--anchor", "B", "--anchor-rating", "2800", "-s", "50")
    ratings = ratings_of(anchored)
    assert ratings["B"] == pytest.approx(2800, abs=1e-9)
    for name in base:
        assert ratings[name] - ratings["B"] == pytest.approx(base[name] - base["B"], abs=1e-9)
    errors = {p["name"]: p["error"] for p in anchored["players"]}
    assert errors["B"] == pytest.approx(0.0, abs=1e-9)  # errors are relative to the anchor
    assert errors["A"] > 0 and errors["C"] > 0
    table = fit_ratings(games, RatingSettings(simulations=50, anchor=Anchor("C")))
    assert table.rating_of("C") == 0.0
    # ERROR = simulated SD (here of the difference with the anchor) x 1.95996
    for player in table.players:
        if player.name != "C":
            assert player.error == pytest.approx(
                1.959964 * table.pair_sd[(player.name, "C")], rel=1e-6)


def test_perfect_scores_get_bound_ratings(tmp_path):
    core = {("A", "B"): (4, 2, 4), ("B", "C"): (5, 2, 3), ("C", "A"): (3, 3, 4)}
    extra = {("Z", "A"): (2, 0, 0), ("B", "Z"): (0, 0, 3),   # Z: 5/5
             ("Y", "C"): (0, 0, 2), ("C", "Y"): (1, 0, 0)}   # Y: 0/3
    games = games_from({**core, **extra})
    table = fit_ratings(games)
    bound = {p.name: p.bound for p in table.players}
    assert bound == {"A": "", "B": "", "C": "", "Z": ">", "Y": "<"}
    ratings = {p.name: p.rating for p in table.players}
    # the others are rated as if the perfect players had not played ...
    alone = fit_ratings(games_from(core))
    for x, y in (("A", "B"), ("B", "C")):
        assert ratings[x] - ratings[y] == pytest.approx(
            alone.rating_of(x) - alone.rating_of(y), abs=1e-9)
    # ... and Z (Y) get the rating of one game drawn: 4.5 of 5 (0.5 of 3)
    z_games = [g for g in games if "Z" in (g.black, g.white)]
    expected_z = sum(E(ratings["Z"] - ratings[g.white if g.black == "Z" else g.black])
                     for g in z_games)
    assert expected_z == pytest.approx(4.5, abs=1e-9)
    y_games = [g for g in games if "Y" in (g.black, g.white)]
    expected_y = sum(E(ratings["Y"] - ratings[g.white if g.black == "Y" else g.black])
                     for g in y_games)
    assert expected_y == pytest.approx(0.5, abs=1e-9)
    assert [p.name for p in table.players][0] == "Z"
    assert [p.name for p in table.players][-1] == "Y"
    text = run_cli("rate", write_results(tmp_path / "p.sqlite", games)).stdout
    assert re.search(r"^\s+1 Z\s+:\s+>\d+\.\d", text, re.M)
    assert re.search(r"^\s+5 Y\s+:\s+<-\d+\.\d", text, re.M)


def test_only_perfect_players():
    games = games_from({("A", "B"): (2, 0, 0), ("B", "A"): (0, 0, 1)})  # A 3/3
    table = fit_ratings(games)
    assert [(p.name, p.bound) for p in table.players] == [("A", ">"), ("B", "<")]
    diff = table.rating_of("A") - table.rating_of("B")
    assert E(diff) == pytest.approx(2.5 / 3, abs=1e-12)


def test_bootstrap_errors_shrink_with_more_games_and_cfs_is_a_percentage():
    spec = {("A", "B"): (4, 2, 4), ("B", "A"): (5, 1, 4), ("A", "C"): (5, 2, 3),
            ("C", "A"): (3, 3, 4), ("B", "C"): (4, 3, 3), ("C", "B"): (4, 2, 4),
            ("D", "A"): (3, 2, 5), ("A", "D"): (6, 1, 3), ("D", "C"): (4, 1, 5)}
    settings = RatingSettings(simulations=300, seed=1, fit_draw_rate=True)
    small = fit_ratings(games_from(spec), settings)
    large = fit_ratings(games_from({k: tuple(4 * x for x in v) for k, v in spec.items()}),
                        settings)
    small_errors = {p.name: p.error for p in small.players}
    for player in large.players:
        assert 0 < player.error < 0.75 * small_errors[player.name]
    for table in (small, large):
        assert all(0 <= p.cfs <= 100 for p in table.players[:-1])
        assert table.players[-1].cfs is None
        # CFS uses the simulated SD of the difference with the next row
        first, second = table.players[0], table.players[1]
        sd = table.pair_sd[(first.name, second.name)]
        assert sd == table.pair_sd[(second.name, first.name)] > 0
        assert first.cfs == pytest.approx(
            100 * stats.norm.cdf((first.rating - second.rating) / sd), abs=1e-9)
        assert table.draw_rate_sd is not None and table.draw_rate_sd > 0
    assert large.draw_rate_sd < small.draw_rate_sd


def test_bootstrap_matches_the_model():
    # A scores 230 / 400 (80 draws) against B, half the games as sente
    games = games_from({("A", "B"): (100, 40, 60), ("B", "A"): (70, 40, 90)})
    table = fit_ratings(games, RatingSettings(fit_draw_rate=True, simulations=2000, seed=2))
    p, n = 230 / 400, 400
    # one p for every game, so the fitted Deq makes D(p) the observed 20 %
    deq = table.draw_rate
    a = (1 - 2 * deq) / deq**2
    assert (math.sqrt(1 + 4 * a * p * (1 - p)) - 1) / a == pytest.approx(0.2, abs=1e-12)
    # delta method: per-game score variance p(1 - p) - D/4, slope beta p (1 - p)
    sd = math.sqrt((p * (1 - p) - 0.2 / 4) / n) / (BETA * p * (1 - p))
    assert table.pair_sd[("A", "B")] == pytest.approx(sd, rel=0.08)
    # each rating is half the difference away from the pool average
    assert table.players[0].error == pytest.approx(1.959964 * sd / 2, rel=0.08)


def test_simulations_are_drawn_from_the_fitted_model():
    games = games_from({("A", "B"): (100, 40, 60), ("B", "A"): (70, 40, 90),
                        ("A", "C"): (50, 20, 30), ("C", "B"): (40, 30, 30)})
    table = fit_ratings(games, RatingSettings(fit_white_advantage=True, fit_draw_rate=True))
    cells = _aggregate(games)
    u = [table.rating_of(name) * BETA for name in cells.names]
    ratings, advantages, rates, skipped = _simulate(
        cells, np.array(u), table.white_advantage * BETA, table.draw_rate, fit_wa=True,
        fit_deq=True, simulations=2000, seed=4)
    assert skipped == 0 and ratings.shape == (2000, 3)
    diffs = (ratings - ratings[:, :1]) / BETA  # relative to A
    fitted = np.array(u) / BETA - u[0] / BETA
    standard_error = diffs.std(axis=0, ddof=1) / math.sqrt(2000)
    assert (np.abs(diffs.mean(axis=0) - fitted) <= 4 * standard_error + 0.5).all()
    wa_se = advantages.std(ddof=1) / BETA / math.sqrt(2000)
    assert abs(advantages.mean() / BETA - table.white_advantage) <= 4 * wa_se + 0.5
    assert abs(rates.mean() - table.draw_rate) <= 4 * rates.std(ddof=1) / math.sqrt(2000) + 1e-3


def test_json_keys(tmp_path):
    path = write_results(tmp_path / "rr.sqlite", games_from(ROUND_ROBIN))
    for extra in ((), ("-W", "-D", "-s", "20")):
        data = rate_json(path, *extra)
        assert list(data) == ["players", "white_advantage", "white_advantage_sd", "draw_rate",
                              "draw_rate_sd"]
        for player in data["players"]:
            assert list(player) == ["name", "rating", "error", "points", "played", "cfs", "w",
                                    "d", "l"]
    assert data["white_advantage_sd"] > 0 and data["draw_rate_sd"] > 0
    assert data["players"][-1]["cfs"] is None and data["players"][0]["cfs"] is not None


def test_text_columns(tmp_path):
    games = games_from(ROUND_ROBIN)
    path = write_results(tmp_path / "rr.sqlite", games)
    text = run_cli("rate", path).stdout
    lines = text.splitlines()
    assert lines[0].split() == ["#", "PLAYER", ":", "RATING", "ERROR", "POINTS", "PLAYED", "(%)",
                                "CFS(%)", "W", "D", "L", "D(%)"]
    data = rate_json(path)
    assert len(lines) == 4
    for rank, (line, player) in enumerate(zip(lines[1:], data["players"]), 1):
        fields = line.split()
        assert len(fields) == 13
        assert fields[:3] == [str(rank), player["name"], ":"]
        assert float(fields[3]) == pytest.approx(player["rating"], abs=0.051)
        assert fields[4] == "----"
        assert fields[5] == f"{player['points']:.1f}" and fields[6] == str(player["played"])
        assert int(fields[7]) == math.floor(100 * player["points"] / player["played"] + 0.5)
        assert fields[8] == ("---" if rank == 3 else "----")
        assert fields[9:12] == [str(player["w"]), str(player["d"]), str(player["l"])]
        assert int(fields[12]) == math.floor(100 * player["d"] / player["played"] + 0.5)

    text = run_cli("rate", path, "-W", "-D", "-s", "30").stdout
    data = rate_json(path, "-W", "-D", "-s", "30")
    lines = text.splitlines()
    assert lines[1].split()[4] == f"{data['players'][0]['error']:.1f}"
    assert lines[1].split()[8] == str(math.floor(data["players"][0]["cfs"] + 0.5))
    assert lines[3].split()[8] == "---"
    assert lines[4] == (f"White advantage = {data['white_advantage']:.2f} +/- "
                        f"{data['white_advantage_sd']:.2f}")
    assert lines[5] == (f"Draw rate (equal opponents) = {100 * data['draw_rate']:.2f} % +/- "
                        f"{100 * data['draw_rate_sd']:.2f}")
    # the error is the simulated SD x 1.95996; the footer's +/- is one SD
    table = fit_ratings(games, RatingSettings(fit_white_advantage=True, fit_draw_rate=True,
                                              simulations=30))
    assert isinstance(table, RatingTable) and isinstance(table.players[0], PlayerRating)
    assert table.confidence == 95.0 and table.scale == 202.0


def test_pgn_with_sente_as_white(tmp_path):
    games = games_from({("A", "B"): (7, 1, 2), ("B", "A"): (6, 2, 2)})  # sente wins a lot
    pgn = tmp_path / "games.pgn"
    pgn.write_text(pgn_text(games))
    from_pgn = rate_json(pgn, "-W")
    from_sqlite = rate_json(write_results(tmp_path / "g.sqlite", games), "-W")
    assert from_pgn == from_sqlite
    assert from_pgn["white_advantage"] > 100
    per_player, first = residuals(games, ratings_of(from_pgn), from_pgn["white_advantage"])
    assert abs(first) < 1e-9
    # both files at once: every game counted twice, same ratings
    both = rate_json(pgn, tmp_path / "g.sqlite", "-W")
    assert both["players"][0]["played"] == 2 * from_pgn["players"][0]["played"]
    assert ratings_of(both) == pytest.approx(ratings_of(from_pgn), abs=1e-9)


def test_head_to_head(tmp_path):
    games = games_from(ROUND_ROBIN)
    table = fit_ratings(games)
    rows = head_to_head(games, table)
    assert len(rows) == 6
    ab = next(r for r in rows if (r["player"], r["opponent"]) == ("A", "B"))
    ba = next(r for r in rows if (r["player"], r["opponent"]) == ("B", "A"))
    assert (ab["w"], ab["d"], ab["l"]) == (5 + 3, 3 + 4, 2 + 3)
    assert (ba["w"], ba["d"], ba["l"]) == (ab["l"], ab["d"], ab["w"])
    assert ab["points"] == 11.5 and ab["played"] == 20
    assert ab["rating_diff"] == pytest.approx(table.rating_of("A") - table.rating_of("B"))
    assert rows[0]["player"] == table.players[0].name
    path = write_results(tmp_path / "rr.sqlite", games)
    data = rate_json(path, "--head-to-head")
    assert data["head_to_head"] == json.loads(json.dumps(rows))
    text = run_cli("rate", path, "--head-to-head").stdout
    assert "Head to head" in text
    assert re.search(r"vs B\s+[+-]\d+\.\d\s+W\s+8\s+D\s+7\s+L\s+5", text)


# --------------------------------------------------------------------------
# BayesElo


def f(x: float) -> float:
    return 1.0 / (1.0 + 10.0 ** (x / 400.0))


def bayes_loglik(cells, d_ab: float, adv: float, draw_elo: float) -> float:
    """cells: [(first is A?, wins, draws, losses)] from the first player's side."""
    total = 0.0
    for a_first, w, d, lost in cells:
        d_first = d_ab if a_first else -d_ab
        win, loss = f(-d_first - adv + draw_elo), f(d_first + adv + draw_elo)
        total += w * math.log(win) + d * math.log(1 - win - loss) + lost * math.log(loss)
    return total


def test_bayeselo_two_players_against_scipy(tmp_path):
    games = games_from({("A", "B"): (6, 2, 2), ("B", "A"): (3, 1, 5)})
    # prior 2: one virtual draw with each player first
    cells = [(True, 6, 2 + 1, 2), (False, 3, 1 + 1, 5)]
    k = math.log(10) / 400

    def slope(d_ab: float) -> float:
        total = 0.0
        for a_first, w, d, lost in cells:
            sign = 1 if a_first else -1
            x = sign * d_ab + 32.8
            win, loss = f(-x + 97.3), f(x + 97.3)
            draw = 1 - win - loss
            dwin, dloss = k * win * (1 - win), -k * loss * (1 - loss)
            total += sign * (w * dwin / win + d * (-dwin - dloss) / draw + lost * dloss / loss)
        return total

    d_ml = optimize.brentq(slope, -800, 800, xtol=1e-13)
    x = 10 ** (-97.3 / 400)
    scale = 4 * x / (1 + x) ** 2
    table = fit_bayeselo(games)
    ratings = {p.name: p.rating for p in table.players}
    assert ratings["A"] - ratings["B"] == pytest.approx(d_ml * scale, abs=1e-7)
    assert ratings["A"] + ratings["B"] == pytest.approx(0.0, abs=1e-9)
    assert table.scale == pytest.approx(scale, rel=1e-12)
    curvature = -(slope(d_ml + 1e-3) - slope(d_ml - 1e-3)) / 2e-3
    assert table.los[("A", "B")] == pytest.approx(
        stats.norm.cdf(d_ml * math.sqrt(curvature)), abs=1e-6)
    a = table.players[0]
    assert a.plus == pytest.approx(1.959964 * scale / 2 / math.sqrt(curvature), rel=1e-5)

    data = rate_json(write_results(tmp_path / "b.sqlite", games), "--model", "bayeselo")
    assert {p["name"]: p["rating"] for p in data["players"]} == pytest.approx(ratings, abs=1e-9)
    assert data["los"]["A"]["B"] == pytest.approx(table.los[("A", "B")], abs=1e-12)


def test_bayeselo_fitted_advantage_and_draw_elo_maximise_the_likelihood():
    games = games_from({("A", "B"): (6, 2, 2), ("B", "A"): (3, 1, 5)})
    table = fit_bayeselo(games, BayesEloSettings(advantage_elo=None, draw_elo=None))
    assert table.advantage_fitted and table.draw_elo_fitted
    ratings = {p.name: p.rating for p in table.players}
    d_ab = (ratings["A"] - ratings["B"]) / table.scale
    cells = [(True, 6, 3, 2), (False, 3, 2, 5)]
    point = [d_ab, table.advantage, table.draw_elo]
    for i in range(3):
        up, down = list(point), list(point)
        up[i] += 1e-3
        down[i] -= 1e-3
        gradient = (bayes_loglik(cells, *up) - bayes_loglik(cells, *down)) / 2e-3
        assert abs(gradient) < 1e-6


def test_bayeselo_los_matrix_is_antisymmetric(tmp_path):
    spec = {**ROUND_ROBIN, ("D", "A"): (2, 1, 4), ("B", "D"): (3, 3, 1), ("D", "C"): (1, 0, 3)}
    table = fit_bayeselo(games_from(spec))
    names = [p.name for p in table.players]
    assert len(table.los) == len(names) * (len(names) - 1)
    for a in names:
        for b in names:
            if a != b:
                assert table.los[(a, b)] + table.los[(b, a)] == pytest.approx(1.0, abs=1e-12)
                assert 0 <= table.los[(a, b)] <= 1
    # best first: each row is likely better than the next
    for a, b in zip(names, names[1:]):
        assert table.los[(a, b)] >= 0.5
    assert sum(p.rating for p in table.players) == pytest.approx(0.0, abs=1e-9)
    text = run_cli("rate", write_results(tmp_path / "b.sqlite", games_from(spec)),
                   "--model", "bayeselo").stdout
    assert text.splitlines()[0].split() == ["Rank", "Name", "Elo", "+", "-", "games", "score",
                                            "oppo.", "draws"]
    assert "Likelihood of superiority" in text


def test_bayeselo_prior_keeps_perfect_scores_finite():
    games = games_from({("A", "B"): (3, 0, 0), ("B", "A"): (0, 0, 2), ("B", "C"): (2, 2, 1)})
    table = fit_bayeselo(games)
    assert table.players[0].name == "A"
    assert math.isfinite(table.players[0].rating)
    with pytest.raises(BookgenError, match="unbounded|converge"):
        fit_bayeselo(games, BayesEloSettings(prior_draws=0.0))


# --------------------------------------------------------------------------
# errors


def test_unrateable_pools_are_named():
    games = games_from({("A", "B"): (2, 1, 1), ("C", "D"): (1, 1, 1)})
    with pytest.raises(BookgenError, match=r"do not connect.*\{A, B\}.*\{C, D\}"):
        fit_ratings(games)
    # A and B won every game against C and D: the difference is unbounded
    games = games_from({("A", "B"): (2, 1, 1), ("C", "D"): (1, 1, 1), ("A", "C"): (2, 0, 0),
                        ("D", "B"): (0, 0, 3)})
    with pytest.raises(BookgenError, match=r"unbounded.*\{A, B\}.*\{C, D\}|"
                                           r"unbounded.*\{C, D\}.*\{A, B\}"):
        fit_ratings(games)
    with pytest.raises(BookgenError, match="played itself"):
        fit_ratings([GameResult("A", "A", "draw")])
    with pytest.raises(BookgenError, match="no games"):
        fit_ratings([])


def test_cli_errors_name_the_file(tmp_path):
    missing = tmp_path / "missing.sqlite"
    result = run_cli("rate", missing, expect=2)
    assert f"bookgen: error: {missing}: no such file" in result.stderr
    empty = tmp_path / "empty.pgn"
    empty.write_text("")
    result = run_cli("rate", empty, expect=2)
    assert "no finished games" in result.stderr and str(empty) in result.stderr
    broken = tmp_path / "broken.pgn"
    broken.write_text('1. e4 e5 1-0\n[White "A"]\n[Black "B"]\n[Result "1-0"]\n\n1-0\n')
    result = run_cli("rate", broken, expect=2)
    assert f"{broken}:1:" in result.stderr
    bad_result = tmp_path / "bad.pgn"
    bad_result.write_text('[White "A"]\n[Black "B"]\n[Result "2-0"]\n\n2-0\n')
    result = run_cli("rate", bad_result, expect=2)
    assert str(bad_result) in result.stderr and "2-0" in result.stderr
    not_results = tmp_path / "other.sqlite"
    import sqlite3
    sqlite3.connect(not_results).execute("CREATE TABLE t (x)").connection.commit()
    result = run_cli("rate", not_results, expect=2)
    assert str(not_results) in result.stderr
    assert result.stderr.count("\n") == 1


def test_cli_option_errors(tmp_path):
    path = write_results(tmp_path / "rr.sqlite", games_from(ROUND_ROBIN))
    cases = [
        (("--anchor", "A", "--average", "10"), "cannot be used together"),
        (("--anchor-rating", "10"), "needs --anchor"),
        (("--anchor", "Nobody"), "'Nobody': no such player"),
        (("-s", "1"), "at least 2"),
        (("--model", "bayeselo", "-s", "10"), "--simulations applies to --model ordo"),
        (("--prior", "1"), "--prior applies to --model bayeselo"),
    ]
    for args, message in cases:
        result = run_cli("rate", path, *args, expect=2)
        assert message in result.stderr, (args, result.stderr)
    assert run_cli("rate", path, "--confidence", "100", expect=2).exit_code == 2
    disconnected = write_results(tmp_path / "d.sqlite", games_from(
        {("A", "B"): (1, 1, 1), ("C", "D"): (1, 0, 1)}))
    result = run_cli("rate", disconnected, expect=2)
    assert "do not connect" in result.stderr


def test_confidence_and_scale_options(tmp_path):
    games = games_from(ROUND_ROBIN)
    path = write_results(tmp_path / "rr.sqlite", games)
    at95 = rate_json(path, "-s", "40", "--seed", "7")
    at50 = rate_json(path, "-s", "40", "--seed", "7", "-F", "50")
    ratio = stats.norm.ppf(0.75) / stats.norm.ppf(0.975)
    for p95, p50 in zip(at95["players"], at50["players"]):
        assert p50["error"] == pytest.approx(p95["error"] * ratio, rel=1e-9)
    scaled = ratings_of(rate_json(path, "--scale", "400"))
    base = ratings_of(at95)
    for name in base:
        assert scaled[name] == pytest.approx(base[name] * 400 / 202, abs=1e-9)


def test_divergent_simulations_are_left_out_of_the_errors():
    """A small pool where some bootstrap samples are separated (their maximum
    likelihood is at infinity): those refits are dropped and counted, so one
    sample cannot blow up the errors."""
    cells = {("a", "b"): (2, 4, 2), ("a", "c"): (0, 2, 6), ("b", "a"): (8, 0, 0),
             ("b", "c"): (2, 2, 4), ("c", "a"): (8, 0, 0), ("c", "b"): (4, 2, 2)}
    games = [GameResult(black, white, result)
             for (black, white), counts in cells.items()
             for result, n in zip(("black", "draw", "white"), counts) for _ in range(n)]
    table = fit_ratings(games, RatingSettings(fit_white_advantage=True, fit_draw_rate=True,
                                              simulations=1000, seed=0))
    assert table.skipped_simulations >= 1
    # One divergent sample (a rating gap of about 8,700) would push these to
    # about 275 and 140.
    assert all(p.error is not None and p.error < 150 for p in table.players)
    assert table.white_advantage_sd is not None and table.white_advantage_sd < 100
