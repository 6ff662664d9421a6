"""Pairwise statistics and the GSPRT (bookgen.analysis.pairstats, ``bookgen sprt``).

The numeric vectors are the public ones of fastchess, ShogiHome and cshogi
(see the statistics reference); results files are built with
``ResultsFile`` and PGN files with ``write_pgn_game``.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from statistics import NormalDist

import pytest

from bookgen.analysis import pairstats
from bookgen.analysis.pairstats import (
    PENTANOMIAL_SCORES,
    TRINOMIAL_SCORES,
    PairCounts,
    SprtSettings,
    SprtTest,
    count_games,
    elo_pentanomial,
    elo_trinomial,
    los_cutechess,
    sprt,
    sprt_llr,
)
from bookgen.cli.support import error_text
from bookgen.errors import SettingsError
from bookgen.formats.records import write_pgn_game
from bookgen.store.results import GameResult, ResultsFile
from conftest import STARTPOS, run_cli


def fastchess_penta(ll: int, ld: int, wl: int, dd: int, wd: int, ww: int) -> list[int]:
    """fastchess' order LL, LD, WL, DD, WD, WW to [LL, LD+DL, WL+LW+DD, WD+DW, WW]."""
    return [ll, ld, wl + dd, wd, ww]


# --------------------------------------------------------------------------
# public vectors


@pytest.mark.parametrize("wins, losses, draws, model, elo0, elo1, expected", [
    (36433, 36027, 68692, "normalized", 0, 2, 0.92),
    (21404, 21184, 40708, "logistic", 0.5, 2.5, -1.57),
])
def test_fastchess_trinomial_llr(wins, losses, draws, model, elo0, elo1, expected):
    llr = sprt_llr([losses, draws, wins], TRINOMIAL_SCORES, elo0, elo1, model)
    assert round(llr, 2) == expected


@pytest.mark.parametrize("fastchess, model, elo0, elo1, expected", [
    ((365, 16618, 36029, 200, 16974, 390), "normalized", 0, 2, 2.25),
    ((871, 26175, 55003, 980, 26678, 821), "logistic", 0, 2, -4.98),
])
def test_fastchess_pentanomial_llr(fastchess, model, elo0, elo1, expected):
    llr = sprt_llr(fastchess_penta(*fastchess), PENTANOMIAL_SCORES, elo0, elo1, model)
    assert round(llr, 2) == expected


def test_fastchess_elo_stats():
    estimate = elo_trinomial(136, 111, 96)
    assert f"{estimate.elo:.2f}" == "40.70"
    assert f"{estimate.elo_error:.2f}" == "30.43"
    assert f"{estimate.nelo:.2f}" == "49.77"
    assert f"{estimate.nelo_error:.2f}" == "36.77"
    assert f"{estimate.los:.2f}" == "99.60"
    assert estimate.games == 343
    assert estimate.score == pytest.approx((136 + 111 / 2) / 343)


@pytest.mark.parametrize("penta, elo0, elo1, expected", [
    ([19, 4020, 10316, 4215, 24], -1.75, 0.25, 2.94),
    ([103, 3851, 8316, 3728, 98], 0, 2, -2.03),
    ([2, 40, 72, 14, 0], 0, 2, -0.36),
])
def test_shogihome_llr(penta, elo0, elo1, expected):
    assert round(sprt_llr(penta, PENTANOMIAL_SCORES, elo0, elo1, "normalized"), 2) == expected


def test_cshogi_vector():
    estimate = elo_trinomial(62, 0, 38)
    assert f"{estimate.elo:.1f}" == "85.0"
    assert f"{estimate.elo_error:.1f}" == "71.3"  # exact normal quantile
    assert f"{los_cutechess(62, 38):.1f}" == "99.2"


def test_cshogi_margin_comes_from_its_quantile_approximation():
    # cshogi's printed 71.2 uses Winitzki's erf^-1 approximation for the
    # 97.5 % quantile; the same margin formula with that quantile gives it.
    a = 8 * (3.1415926535897 - 3) / (3 * 3.1415926535897 * (4 - 3.1415926535897))
    y = math.log(1 - 0.95 ** 2)
    zw = 2 / (3.1415926535897 * a) + y / 2
    z = math.sqrt(2) * math.sqrt(math.sqrt(zw * zw - y / a) - zw)
    mu = 0.62
    se = math.sqrt(0.62 * 0.38 ** 2 + 0.38 * 0.62 ** 2) / 10
    assert f"{pairstats._elo_margin(mu, se, z):.1f}" == "71.2"


def test_sprt_bounds():
    lower, upper = pairstats.sprt_bounds(0.05, 0.05)
    assert f"{lower:.3f}" == "-2.944" and f"{upper:.3f}" == "2.944"
    lower, upper = pairstats.sprt_bounds(0.05, 0.1)
    assert lower == pytest.approx(math.log(0.1 / 0.95))
    assert upper == pytest.approx(math.log(0.9 / 0.05))


# --------------------------------------------------------------------------
# properties of the estimates and the LLR


@pytest.mark.parametrize("model", ["normalized", "logistic"])
@pytest.mark.parametrize("counts, scores", [
    ([30, 50, 45], TRINOMIAL_SCORES), ([3, 20, 41, 27, 9], PENTANOMIAL_SCORES)])
def test_llr_mirror_symmetry(model, counts, scores):
    """Swapping the players' roles mirrors the counts and the hypotheses."""
    direct = sprt_llr(counts, scores, -1, 4, model)
    mirrored = sprt_llr(counts[::-1], scores, 1, -4, model)
    assert mirrored == pytest.approx(direct, rel=1e-9)
    assert sprt_llr(counts, scores, 4, -1, model) == pytest.approx(-direct, rel=1e-9)


def test_llr_is_zero_for_equal_hypotheses_and_grows_with_data():
    assert sprt_llr([10, 20, 30], TRINOMIAL_SCORES, 5, 5) == pytest.approx(0, abs=1e-9)
    small = sprt_llr([10, 20, 30], TRINOMIAL_SCORES, 0, 10)
    large = sprt_llr([100, 200, 300], TRINOMIAL_SCORES, 0, 10)
    assert small > 0 and large == pytest.approx(10 * small, rel=1e-6)


def test_llr_zero_counts_are_replaced():
    # Counts below 1e-3 (zero included) become 1e-3; larger ones stay.
    def llr(first: float) -> float:
        return sprt_llr([first, 5, 9], TRINOMIAL_SCORES, 0, 20, "logistic")

    assert llr(0) == llr(5e-4) == llr(1e-3)
    assert llr(0) != pytest.approx(llr(2e-3), rel=1e-9)
    assert math.isfinite(sprt_llr([0, 0, 7, 0, 0], PENTANOMIAL_SCORES, 0, 2))


def test_logistic_llr_by_brute_force():
    """The logistic LLR equals maximising the likelihood over distributions with the
    hypothesised mean, done here independently with scipy's SLSQP."""
    from scipy.optimize import minimize

    counts = [7, 30, 12]
    p = [c / sum(counts) for c in counts]

    def best(mean: float) -> float:
        result = minimize(lambda q: -sum(pi * math.log(qi) for pi, qi in zip(p, q)),
                          p, method="SLSQP", bounds=[(1e-9, 1)] * 3,
                          constraints=[{"type": "eq", "fun": lambda q: sum(q) - 1},
                                       {"type": "eq",
                                        "fun": lambda q: q[1] * 0.5 + q[2] - mean}],
                          options={"ftol": 1e-14, "maxiter": 500})
        return -result.fun

    def score(elo: float) -> float:
        return 1 / (1 + 10 ** (-elo / 400))

    expected = sum(counts) * (best(score(30)) - best(score(-10)))
    assert sprt_llr(counts, TRINOMIAL_SCORES, -10, 30, "logistic") == pytest.approx(
        expected, rel=1e-5)


def test_elo_pentanomial_counts_pairs_as_two_games():
    estimate = elo_pentanomial([1, 4, 10, 6, 3])
    assert estimate.games == 48
    assert estimate.score == pytest.approx((4 * 0.25 + 10 * 0.5 + 6 * 0.75 + 3) / 24)
    mu = estimate.score
    var = (1 * mu ** 2 + 4 * (0.25 - mu) ** 2 + 10 * (0.5 - mu) ** 2 + 6 * (0.75 - mu) ** 2
           + 3 * (1 - mu) ** 2) / 24
    assert estimate.nelo == pytest.approx((mu - 0.5) / math.sqrt(2 * var) * 800 / math.log(10))
    assert estimate.nelo_error == pytest.approx(1.959964 * 800 / math.log(10) / math.sqrt(48),
                                                rel=1e-6)


def test_elo_extremes_are_infinite_not_errors():
    estimate = elo_trinomial(5, 0, 0)
    assert estimate.elo == math.inf
    # no spread in the sample: no interval, no LOS (not "inf" nor 100 %)
    assert estimate.elo_error is None and estimate.los is None
    even = elo_trinomial(0, 4, 0)
    assert even.elo == 0 and even.nelo == 0
    assert even.elo_error is None and even.los is None
    with pytest.raises(ValueError):
        elo_trinomial(0, 0, 0)


@pytest.mark.parametrize("penta", [[0, 0, 0, 2, 0], [0, 0, 2, 0, 0], [0, 2, 0, 0, 0],
                                   [0, 0, 0, 0, 1], [0, 0, 0, 7, 0]])
def test_a_sample_without_spread_has_no_interval_nor_los(penta):
    # every pair scored the same: the standard error is 0, and an interval of
    # width 0 (or a LOS of 100 %) from 2 pairs would be a false precision
    estimate = elo_pentanomial(penta)
    assert estimate.elo_error is None and estimate.los is None
    score = PENTANOMIAL_SCORES[next(i for i, c in enumerate(penta) if c)]
    assert estimate.score == score and estimate.games == 2 * sum(penta)
    if 0 < score < 1:   # the point estimate stays
        assert estimate.elo == pytest.approx(-400 * math.log10(1 / score - 1))
    assert math.isfinite(estimate.nelo_error) and estimate.nelo_error > 0


def test_a_one_sided_sample_with_spread_keeps_its_los():
    # never lost a pair, but not every pair the same: the LOS is defined and
    # below 100; the interval reaches a 100 % score, so its Elo half-width is inf
    estimate = elo_pentanomial([0, 0, 0, 1, 1])
    mu, se = 0.875, math.sqrt((0.125 ** 2 + 0.125 ** 2) / 2 / 2)
    assert estimate.score == mu and estimate.elo_error == math.inf
    assert estimate.los == pytest.approx(100 * NormalDist().cdf((mu - 0.5) / se))
    assert 99 < estimate.los < 100
    small = elo_pentanomial([0, 1, 0, 1, 0])
    assert small.los == pytest.approx(50.0) and math.isfinite(small.elo_error)
    assert small.elo_error > 0


def test_los_cutechess():
    assert los_cutechess(10, 10) == pytest.approx(50)
    assert los_cutechess(0, 0) == 50
    assert los_cutechess(136, 96) == pytest.approx(99.568, abs=1e-3)


# --------------------------------------------------------------------------
# counting pairs


def g(black: str, white: str, result: str, pair: str | None = None) -> GameResult:
    return GameResult(black, white, result, "resign", 100, pair)


def test_count_games_pentanomial_by_hand():
    games = [
        # A's scores per pair: (as black, as white)
        g("A", "B", "white", "p1"), g("B", "A", "black", "p1"),  # L L -> LL
        g("A", "B", "white", "p2"), g("B", "A", "draw", "p2"),   # L D -> LD
        g("B", "A", "draw", "p3"), g("A", "B", "white", "p3"),   # D L (order swapped) -> LD
        g("A", "B", "black", "p4"), g("B", "A", "black", "p4"),  # W L -> WL
        g("A", "B", "draw", "p5"), g("B", "A", "draw", "p5"),    # D D -> DD
        g("A", "B", "black", "p6"), g("B", "A", "draw", "p6"),   # W D -> WD
        g("A", "B", "black", "p7"), g("B", "A", "white", "p7"),  # W W -> WW
        g("A", "B", "white", "p8"), g("B", "A", "white", "p8"),  # L W -> WL
        g("A", "B", "black", "p9"),                              # lone game
        g("A", "B", "draw"),                                     # no pair key
        g("A", "B", "black", "p10"), g("A", "B", "white", "p10"),  # same colours twice
        g("A", "C", "black", "p11"), g("C", "A", "white", "p11"),  # another opponent
    ]
    counts = count_games(games, "A", "B")
    assert counts.penta == [1, 2, 3, 1, 1]
    assert counts.unpaired == 4
    # W/D/L cover every A-B game, paired or not.
    assert (counts.wins, counts.draws, counts.losses) == (7, 6, 7)
    assert counts.games == 20 and counts.pairs == 8
    # From B's side the pentanomial is reversed.
    reverse = count_games(games, "B", "A")
    assert reverse.penta == [1, 1, 3, 2, 1]
    assert (reverse.wins, reverse.draws, reverse.losses) == (7, 6, 7)


def test_count_games_extra_game_under_a_pair_key_is_unpaired():
    games = [g("A", "B", "black", "k"), g("B", "A", "white", "k"), g("A", "B", "draw", "k")]
    counts = count_games(games, "A", "B")
    assert counts.penta == [0, 0, 0, 0, 1]
    assert counts.unpaired == 1


def test_count_games_without_pairs():
    counts = count_games([g("A", "B", "black"), g("B", "A", "draw")], "A", "B")
    assert counts == PairCounts(1, 1, 0, None, 2)
    with pytest.raises(ValueError):
        count_games([], "A", "A")


def test_sprt_uses_complete_pairs_only_and_reports_the_rest():
    games = [g("A", "B", "black", "1"), g("B", "A", "white", "1"),
             g("A", "B", "draw", "2"), g("B", "A", "white", "2"),
             g("A", "B", "white", "3"), g("B", "A", "draw", "3"),
             g("A", "B", "white", "4")]
    result = sprt(games, "A", "B", SprtSettings(elo0=0, elo1=5))
    assert result.basis == "pentanomial"
    assert result.counts.penta == [0, 1, 0, 1, 1]
    assert result.games_left_out == 1
    assert result.llr == pytest.approx(sprt_llr([0, 1, 0, 1, 1], PENTANOMIAL_SCORES, 0, 5))
    assert result.estimate.games == 6
    assert "1 game outside a complete pair left out" in result.format_text()

    tri = sprt(games, "A", "B", SprtSettings(elo0=0, elo1=5, trinomial=True, model="logistic"))
    assert tri.basis == "trinomial" and tri.games_left_out == 0
    assert tri.llr == pytest.approx(sprt_llr([2, 2, 3], TRINOMIAL_SCORES, 0, 5, "logistic"))
    assert tri.estimate.games == 7


def test_sprt_falls_back_to_trinomial_without_pairs():
    result = sprt([g("A", "B", "black"), g("B", "A", "white"), g("A", "B", "draw")], "A", "B",
                  SprtSettings(elo0=0, elo1=5))
    assert result.basis == "trinomial"
    assert result.llr == pytest.approx(sprt_llr([0, 1, 2], TRINOMIAL_SCORES, 0, 5))


# --------------------------------------------------------------------------
# degenerate samples (docs/results.md, "The SPRT on degenerate samples")


def straight(result: str, count: int) -> list[GameResult]:
    """``count`` unpaired games of A (always black) against B, all ending in ``result``."""
    return [g("A", "B", result) for _ in range(count)]


@pytest.mark.parametrize("model", ["logistic", "normalized"])
def test_sprt_decides_a_one_sided_sample_where_its_likelihood_bound_says(model):
    # N straight wins: under H0 (Elo 0) no outcome distribution gives them a
    # probability above 1/2^N, under H1 one gives s1^N, so the LLR is N ln(2 s1)
    # and H1 comes at the first N where that reaches ln((1 - beta) / alpha).
    settings = SprtSettings(elo0=0, elo1=20, model=model, trinomial=True)
    per_win = math.log(2.0 / (1.0 + 10.0 ** (-20 / 400)))
    first = math.ceil(pairstats.sprt_bounds(0.05, 0.05)[1] / per_win)
    before, at = sprt(straight("black", first - 1), "A", "B", settings), \
        sprt(straight("black", first), "A", "B", settings)
    assert before.verdict is None and at.verdict == "H1"
    assert at.counts.draws == at.counts.losses == 0
    assert at.llr == pytest.approx(first * per_win, rel=1e-3)
    # The 1e-3 standing in for the empty classes does not decide it.
    assert sprt_llr([0, 0, first], TRINOMIAL_SCORES, 0, 20, model) == pytest.approx(
        sprt_llr([1e-6, 1e-6, first], TRINOMIAL_SCORES, 0, 20, model), rel=1e-3)


def test_sprt_one_sided_losses_accept_h0():
    settings = SprtSettings(elo0=0, elo1=20, model="logistic", trinomial=True)
    per_loss = math.log(2.0 * (1.0 - 1.0 / (1.0 + 10.0 ** (-20 / 400))))
    first = math.ceil(pairstats.sprt_bounds(0.05, 0.05)[0] / per_loss)
    assert sprt(straight("white", first - 1), "A", "B", settings).verdict is None
    assert sprt(straight("white", first), "A", "B", settings).verdict == "H0"


def test_normalized_sprt_on_all_draws_and_all_one_one_pairs():
    # Every outcome at the reference score: the sample's sigma is 0, which made
    # the t-value fixed point fail ("outside what the outcome scores allow").
    for counts, scores in (([0, 35, 0], TRINOMIAL_SCORES), ([0, 0, 500, 0, 0], PENTANOMIAL_SCORES)):
        against = sprt_llr(counts, scores, 0, 10)
        assert math.isfinite(against) and against < 0
        assert sprt_llr(counts, scores, -10, 0) == pytest.approx(-against, rel=1e-6)
    # Colour-decisive openings: every pair a win and a loss, 1-1; H0 (no
    # difference) over 50 normalized Elo once there are enough of them.
    games = [GameResult(black, white, "black", "resign", 100, str(k))
             for k in range(200) for black, white in (("A", "B"), ("B", "A"))]
    result = sprt(games, "A", "B", SprtSettings(elo0=0, elo1=50))
    assert result.basis == "pentanomial" and result.counts.penta == [0, 0, 200, 0, 0]
    assert result.verdict == "H0"
    few = sprt(games[:20], "A", "B", SprtSettings(elo0=0, elo1=50))
    assert few.verdict is None and few.llr < 0


# --------------------------------------------------------------------------
# files and the command line


OUTCOMES = {  # pentanomial index -> (A's result as black, A's result as white)
    0: ("white", "black"), 1: ("white", "draw"), 2: ("draw", "draw"), 3: ("black", "draw"),
    4: ("black", "white"),
}


def pair_games(penta: list[int], a: str = "A", b: str = "B") -> list[dict]:
    """Games rows (for ResultsFile.add_game) realising a pentanomial of ``a`` vs ``b``."""
    rows: list[dict] = []
    pair = 0
    for index, count in enumerate(penta):
        for _ in range(count):
            first, second = OUTCOMES[index]
            for colour, result in ((0, first), (1, second)):
                black, white = (a, b) if colour == 0 else (b, a)
                rows.append(dict(game_key=f"{pair}-{colour}", round=pair, pair=pair,
                                 opening_index=pair, opening=f"opening {pair}",
                                 start_sfen=STARTPOS, black=black, white=white, result=result,
                                 reason="resign" if result != "draw" else "max ply",
                                 plies=80, moves="7g7f 3c3d"))
            pair += 1
    return rows


def write_results(path: Path, rows: list[dict], key: str = "m1") -> Path:
    with ResultsFile(path) as results:
        match_id = results.begin_match(key, {"test": key}, len(rows))
        for row in rows:
            results.add_game(match_id, **row)
    return path


def sprt_json(*args: object) -> dict:
    return json.loads(run_cli("sprt", *args, "--json").stdout)


def test_cli_sprt_h1_on_a_lopsided_result(tmp_path):
    penta = [4, 20, 80, 60, 36]
    path = write_results(tmp_path / "r.sqlite", pair_games(penta))
    data = sprt_json(path, "--engine", "A", "--vs", "B", "--elo0", "0", "--elo1", "10")
    assert data["counts"]["penta"] == penta
    assert data["counts"]["games"] == 400 and data["games_left_out"] == 0
    assert data["basis"] == "pentanomial"
    assert data["llr"] == pytest.approx(sprt_llr(penta, PENTANOMIAL_SCORES, 0, 10))
    assert data["llr"] > data["upper"] and data["verdict"] == "H1"
    text = run_cli("sprt", path, "--engine", "A", "--vs", "B", "--elo0", "0",
                   "--elo1", "10").stdout
    assert "H1 accepted" in text
    assert f"{penta}" in text and "W 132  D 240  L 28" in text
    estimate = elo_pentanomial(penta)
    assert f"Elo: {estimate.elo:.2f} +/- {estimate.elo_error:.2f}" in text
    assert f"nElo: {estimate.nelo:.2f} +/- {estimate.nelo_error:.2f}" in text
    assert f"LOS: {estimate.los:.2f} %" in text


def test_cli_sprt_h0_and_continue(tmp_path):
    losing = write_results(tmp_path / "h0.sqlite", pair_games([36, 60, 80, 20, 4]))
    data = sprt_json(losing, "--engine", "A", "--vs", "B", "--elo0", "0", "--elo1", "10")
    assert data["verdict"] == "H0" and data["llr"] < data["lower"]
    text = run_cli("sprt", losing, "--engine", "A", "--vs", "B", "--elo0", "0",
                   "--elo1", "10").stdout
    assert "H0 accepted" in text

    few = write_results(tmp_path / "few.sqlite", pair_games([1, 2, 3, 2, 1]))
    data = sprt_json(few, "--engine", "A", "--vs", "B", "--elo0", "0", "--elo1", "10")
    assert data["verdict"] is None and data["lower"] < data["llr"] < data["upper"]
    text = run_cli("sprt", few, "--engine", "A", "--vs", "B", "--elo0", "0",
                   "--elo1", "10").stdout
    assert "-> continue" in text


def test_cli_sprt_options(tmp_path):
    penta = [3, 12, 30, 14, 5]
    path = write_results(tmp_path / "r.sqlite", pair_games(penta))
    data = sprt_json(path, "--engine", "B", "--vs", "A", "--elo0", "-5", "--elo1", "5",
                     "--alpha", "0.1", "--beta", "0.2", "--model", "logistic")
    assert data["counts"]["penta"] == penta[::-1]
    assert data["llr"] == pytest.approx(
        sprt_llr(penta[::-1], PENTANOMIAL_SCORES, -5, 5, "logistic"))
    assert data["lower"] == pytest.approx(math.log(0.2 / 0.9))
    assert data["upper"] == pytest.approx(math.log(0.8 / 0.1))
    assert (data["alpha"], data["beta"], data["model"]) == (0.1, 0.2, "logistic")
    tri = sprt_json(path, "--engine", "A", "--vs", "B", "--elo0", "0", "--elo1", "5",
                    "--trinomial")
    c = tri["counts"]
    assert tri["basis"] == "trinomial"
    assert tri["llr"] == pytest.approx(
        sprt_llr([c["losses"], c["draws"], c["wins"]], TRINOMIAL_SCORES, 0, 5))


def test_cli_sprt_reads_a_file_being_written(tmp_path):
    path = tmp_path / "live.sqlite"
    rows = pair_games([1, 3, 6, 4, 2])
    with ResultsFile(path) as results:
        match_id = results.begin_match("live", {}, 100)
        for row in rows[:10]:
            results.add_game(match_id, **row)
        first = sprt_json(path, "--engine", "A", "--vs", "B", "--elo0", "0", "--elo1", "5")
        for row in rows[10:]:
            results.add_game(match_id, **row)
        second = sprt_json(path, "--engine", "A", "--vs", "B", "--elo0", "0", "--elo1", "5")
    assert first["counts"]["games"] == 10 and first["counts"]["pairs"] == 5
    assert second["counts"]["penta"] == [1, 3, 6, 4, 2]


def test_cli_sprt_on_pgn(tmp_path):
    path = tmp_path / "games.pgn"
    with open(path, "w", encoding="utf-8") as handle:
        # pair 1: A wins both; pair 2: A draws as black, loses as white; then a lone game.
        for black, white, result in [("A", "B", "black"), ("B", "A", "white"),
                                     ("A", "B", "draw"), ("B", "A", "black"),
                                     ("A", "B", "black")]:
            write_pgn_game(handle, event="t", round_label="1", black=black, white=white,
                           result=result, reason="resign", start_sfen=STARTPOS,
                           moves=["7g7f"])
    data = sprt_json(path, "--engine", "A", "--vs", "B", "--elo0", "0", "--elo1", "5")
    assert data["counts"]["penta"] == [0, 1, 0, 0, 1]
    assert data["games_left_out"] == 1
    assert (data["counts"]["wins"], data["counts"]["draws"], data["counts"]["losses"]) == (
        3, 1, 1)


def test_cli_sprt_several_files(tmp_path):
    one = write_results(tmp_path / "1.sqlite", pair_games([0, 1, 2, 0, 0]))
    two = write_results(tmp_path / "2.sqlite", pair_games([0, 0, 1, 3, 0]))
    data = sprt_json(one, two, "--engine", "A", "--vs", "B", "--elo0", "0", "--elo1", "5")
    # Pair numbers repeat across files, but each file's pairs stay apart.
    assert data["counts"]["penta"] == [0, 1, 3, 3, 0]
    assert data["games_left_out"] == 0


@pytest.mark.parametrize("args, message", [
    (["--engine", "X", "--vs", "B", "--elo0", "0", "--elo1", "5"], "players found: A, B, C"),
    (["--engine", "A", "--vs", "A", "--elo0", "0", "--elo1", "5"], "must differ"),
    (["--engine", "B", "--vs", "C", "--elo0", "0", "--elo1", "5"], "no games between B and C"),
    (["--engine", "A", "--vs", "B", "--elo0", "5", "--elo1", "5"], "must be below elo1"),
    (["--engine", "A", "--vs", "B", "--elo0", "5", "--elo1", "0"], "must be below elo1"),
    (["--engine", "A", "--vs", "B", "--elo0", "0", "--elo1", "5", "--alpha", "0"],
     "alpha must be in (0, 1)"),
    (["--engine", "A", "--vs", "B", "--elo0", "0", "--elo1", "5", "--beta", "1.5"],
     "beta must be in (0, 1)"),
    (["--engine", "A", "--vs", "B", "--elo0", "0", "--elo1", "5", "--alpha", "0.6",
      "--beta", "0.5"], "alpha + beta"),
])
def test_cli_sprt_errors(tmp_path, args, message):
    rows = pair_games([1, 1, 1, 1, 1]) + pair_games([1, 0, 0, 0, 0], a="A", b="C")
    for index, row in enumerate(rows):
        row["game_key"] = f"g{index}"
    path = write_results(tmp_path / "r.sqlite", rows)
    result = run_cli("sprt", path, *args, expect=2)
    assert message in result.stderr
    assert result.stderr.startswith("bookgen: error: ")
    assert len(result.stderr.strip().splitlines()) == 1


def test_cli_sprt_missing_file(tmp_path):
    result = run_cli("sprt", tmp_path / "none.sqlite", "--engine", "A", "--vs", "B",
                     "--elo0", "0", "--elo1", "5", expect=2)
    assert "no such file" in result.stderr


def test_sprt_json_has_no_infinities(tmp_path):
    path = write_results(tmp_path / "r.sqlite", pair_games([0, 0, 0, 0, 4]))
    result = run_cli("sprt", path, "--engine", "A", "--vs", "B", "--elo0", "0", "--elo1", "5",
                     "--json")
    assert "Infinity" not in result.stdout
    data = json.loads(result.stdout)
    assert data["estimate"]["elo"] is None
    assert data["estimate"]["elo_error"] is None and data["estimate"]["los"] is None
    text = run_cli("sprt", path, "--engine", "A", "--vs", "B", "--elo0", "0",
                   "--elo1", "5").output
    assert "Elo: inf +/- n/a, " in text and "LOS: n/a (pentanomial, 8 games)" in text


# --------------------------------------------------------------------------
# SprtSettings and SprtTest


@pytest.mark.parametrize("fields, field, library, cli", [
    ({"elo0": 5, "elo1": 0}, "elo0", "elo0 (5) must be below elo1 (0)",
     "--elo0 (5) must be below --elo1 (0)"),
    ({"elo0": 0, "elo1": 5, "alpha": 0}, "alpha", "alpha must be in (0, 1), not 0",
     "--alpha must be in (0, 1), not 0"),
    ({"elo0": 0, "elo1": 5, "alpha": 0.6, "beta": 0.5}, "alpha", "alpha + beta must be below 1",
     "--alpha + --beta must be below 1"),
    ({"elo0": 0, "elo1": 5, "model": "bayes"}, "model",
     "model must be one of normalized, logistic, not 'bayes'",
     "--model must be one of normalized, logistic, not 'bayes'"),
])
def test_sprt_settings_name_their_fields(fields, field, library, cli):
    with pytest.raises(SettingsError) as caught:
        SprtSettings(**fields)
    assert (caught.value.field, str(caught.value), error_text(caught.value)) == \
        (field, library, cli)


def test_a_match_names_the_sprt_settings_by_its_flags():
    """Within a match the settings are ``sprt.settings``: --sprt-alpha, --sprt-beta."""
    with pytest.raises(SettingsError) as caught:
        SprtSettings(0, 5, alpha=0.6, beta=0.5)
    nested = caught.value.within("sprt.settings")
    assert (nested.field, str(nested)) == ("sprt.settings.alpha",
                                           "sprt.settings.alpha + sprt.settings.beta must be "
                                           "below 1")
    assert error_text(nested) == "--sprt-alpha + --sprt-beta must be below 1"


def test_the_sprt_command_keeps_its_texts(tmp_path):
    """``bookgen sprt`` has always named these settings as the library does."""
    path = write_results(tmp_path / "r.sqlite", pair_games([1, 1, 1, 1, 1]))
    for args, text in ((("--elo0", "5", "--elo1", "0"), "elo0 (5) must be below elo1 (0)"),
                       (("--elo0", "0", "--elo1", "5", "--alpha", "0.6", "--beta", "0.5"),
                        "alpha + beta must be below 1")):
        result = run_cli("sprt", path, "--engine", "A", "--vs", "B", *args, expect=2)
        assert result.stderr == f"bookgen: error: {text}\n"


def test_an_sprt_test_as_recorded_and_read_back():
    test = SprtTest("new", "base", SprtSettings(-1, 4, alpha=0.1, model="logistic"))
    recorded = test.as_json()
    assert list(recorded) == ["engine", "opponent", "elo0", "elo1", "alpha", "beta", "model"]
    assert SprtTest.from_json(recorded) == test
    trinomial = SprtTest("new", "base", SprtSettings(0, 5, trinomial=True))
    assert trinomial.as_json()["trinomial"] is True
    assert SprtTest.from_json(json.loads(json.dumps(trinomial.as_json()))) == trinomial
    assert SprtTest.from_json({"engine": "a", "opponent": "b", "elo0": 0, "elo1": 2}) == \
        SprtTest("a", "b", SprtSettings(0.0, 2.0))
    games = [g("A", "B", "black"), g("B", "A", "white"), g("A", "B", "draw")]
    assert SprtTest("A", "B", SprtSettings(0, 5)).run(games) == \
        sprt(games, "A", "B", SprtSettings(0, 5))
