"""Settings: units, validation and the errors the library and the CLI give for them."""

from __future__ import annotations

import dataclasses
import io
import json
import os
import pickle
from pathlib import Path

import cshogi
import pytest

from bookgen.analysis.bayeselo import BayesEloSettings
from bookgen.analysis.ratings import Anchor, RatingSettings
from bookgen.analysis.report import ReportSettings
from bookgen.bookfiles.exporter import ExportSettings, ExportSummary
from bookgen.bookfiles.importer import ImportSettings, import_books
from bookgen.bookfiles.merge import MergeSummary
from bookgen.bookfiles.show import lookup_position
from bookgen.cli.support import error_text, flag_of
from bookgen.diagnostics import Diagnostics
from bookgen.engines.mcts import MctsSettings, _terminal_value
from bookgen.errors import BookgenError, SettingsError
from bookgen.formats.positions import Roots
from bookgen.grow import BookMoveRule, EvaluatorSettings, GrowBudget, GrowSettings, WalkSettings
from bookgen.store import BookMove, ValueColumn
from bookgen.values import DrawValues, value_to_cp
from bookgen.workers.cluster import ClusterSettings
from conftest import ROOT, run_cli

# -- draw values: per mille everywhere -------------------------------------------------


def test_draw_values_are_per_mille_and_convert_for_mcts_and_refine():
    draws = DrawValues(black=400, white=600)
    assert (draws.per_mille(cshogi.BLACK), draws.per_mille(cshogi.WHITE)) == (400, 600)
    # the floats MCTS used when grow divided the flags by 1000
    assert draws.probability(cshogi.BLACK) == 400 / 1000 == 0.4
    assert draws.probability(cshogi.WHITE) == 600 / 1000
    assert draws.cp(cshogi.BLACK) == value_to_cp(0.4) == -307
    assert draws.cp(cshogi.WHITE) == value_to_cp(0.6) == 307
    assert DrawValues().cp(cshogi.BLACK) == DrawValues().cp(cshogi.WHITE) == 0
    assert DrawValues(0, 1000).probability(cshogi.WHITE) == 1.0
    assert pickle.loads(pickle.dumps(draws)) == draws


@pytest.mark.parametrize("black, white, field, got", [
    (-1, 500, "draws.black", "-1"), (500, 1001, "draws.white", "1001"),
    (0.5, 500, "draws.black", "0.5"), (True, 500, "draws.black", "True")])
def test_draw_values_outside_0_to_1000_are_refused(black, white, field, got):
    with pytest.raises(SettingsError) as caught:
        DrawValues(black, white)
    assert caught.value.field == field
    assert str(caught.value) == f"{field} is per mille of a win, between 0 and 1000 (got {got})"


def test_mcts_takes_the_repetition_value_of_the_side_to_move():
    board = cshogi.Board()
    settings = MctsSettings(draws=DrawValues(black=400, white=600))
    for move in "5i5h 5a5b 5h5i 5b5a".split():
        board.push_usi(move)
    assert board.turn == cshogi.BLACK and _terminal_value(board, settings) == 0.4
    board.push_usi("5i5h")
    for move in "5a5b 5h5i 5b5a 5i5h".split():
        board.push_usi(move)
    assert board.turn == cshogi.WHITE and _terminal_value(board, settings) == 0.6
    assert _terminal_value(board, MctsSettings()) == 0.5


# -- settings errors: fields in the library, flags on the command line -----------------


def test_a_settings_error_names_the_field_and_the_cli_names_the_flag():
    error = SettingsError("draws.black", "is per mille of a win, between 0 and 1000 (got 2)")
    assert isinstance(error, BookgenError)
    assert "--" not in str(error)
    assert error_text(error) == ("--draw-value-black is per mille of a win, between 0 and "
                                 "1000 (got 2)")
    assert error_text(BookgenError("plain text")) == "plain text"
    copy = pickle.loads(pickle.dumps(error))  # errors cross process boundaries
    assert (copy.field, copy.message, str(copy)) == (error.field, error.message, str(error))


def test_a_settings_error_may_name_other_fields():
    """Other fields in a message are named as fields in the library and as flags on the
    command line; a message naming fields gets no field in front; errors of nested
    settings name the fields under their prefix."""
    error = SettingsError("games", f"{SettingsError.FIELD} and "
                                   f"{SettingsError.mention('rounds')} exclude each other")
    assert str(error) == "games and rounds exclude each other"
    assert error.mentioned == ("rounds",)
    assert error_text(error) == "--games and --rounds exclude each other"
    assert error.naming("x", str.upper) == "x and ROUNDS exclude each other"
    only_others = SettingsError("control", f"give {SettingsError.mention('control.byoyomi')} MS")
    assert (str(only_others), error_text(only_others)) == ("give control.byoyomi MS",
                                                           "give --byoyomi MS")
    copy = pickle.loads(pickle.dumps(error))
    assert (copy.field, copy.message, str(copy)) == (error.field, error.message, str(error))
    nested = SettingsError("min_ply", f"{SettingsError.FIELD} 5 is above "
                                      f"{SettingsError.mention('max_ply')} 3").within("selection")
    assert nested.field == "selection.min_ply"
    assert str(nested) == "selection.min_ply 5 is above selection.max_ply 3"
    assert error_text(nested) == "--min-ply 5 is above --max-ply 3"
    assert str(SettingsError("workers", "must be at least 1").within("grow")) == \
        "grow.workers must be at least 1"


@pytest.mark.parametrize("field, flag", [
    ("draws.black", "--draw-value-black"), ("draws.white", "--draw-value-white"),
    ("workers", "--workers"), ("mcts.batch_size", "--batch-size"),
    ("mcts.playouts", "--playouts")])
def test_flags_of_fields(field, flag):
    assert flag_of(field) == flag


# -- grow ------------------------------------------------------------------------------


def test_grow_params_are_the_run_fingerprint_of_before(tmp_path):
    """Every field lands under the name runs.params has always used."""
    roots_file = tmp_path / "roots.txt"
    roots_file.write_text("startpos moves 7g7f\n")
    settings = GrowSettings(
        evaluator=EvaluatorSettings("usi:engine", {"nodes": 100}), strategy="dropout",
        budget=GrowBudget(trials=7, seconds_s=2.5), roots=Roots.read(roots_file),
        walk=WalkSettings(max_ply=9, eval_threshold_cp=300, opponent_temperature=0.5,
                          color="white", dropout_alpha_plies_per_pawn=20),
        mcts=MctsSettings(playouts=30, batch_size=4, draws=DrawValues(450, 550)),
        book_moves=BookMoveRule(visit_share_threshold=0.01, win_rate_cutoff=0.02,
                                min_visits=3),
        workers=2, seed=9)
    assert settings.params() == {
        "evaluator": "usi:engine", "evaluator_options": {"nodes": 100},
        "strategy": "dropout", "playouts": 30, "batch_size": 4, "trials": 7,
        "positions": None, "seconds": 2.5, "color": "white", "roots": str(roots_file),
        "max_ply": 9, "eval_threshold": 300, "temperature": 0.5, "draw_value_black": 450,
        "draw_value_white": 550, "visit_threshold": 0.01, "cutoff": 0.02, "min_visits": 3,
        "workers": 2, "seed": 9}
    assert GrowSettings().params() == {
        "evaluator": "builtin", "evaluator_options": {}, "strategy": "dlshogi",
        "playouts": 200, "batch_size": 1, "trials": None, "positions": 100,
        "seconds": None, "color": "both", "roots": None, "max_ply": 64,
        "eval_threshold": 400, "temperature": 1.0, "draw_value_black": 500,
        "draw_value_white": 500, "visit_threshold": 0.005, "cutoff": 0.015,
        "min_visits": 5, "workers": 1, "seed": 0}


def test_grow_settings_are_frozen_and_pickle():
    settings = GrowSettings(roots=Roots(("startpos moves 2g2f",), "two"),
                            evaluator=EvaluatorSettings("builtin", {"depth": 2}))
    copy = pickle.loads(pickle.dumps(settings))
    assert copy == settings and copy.roots.boards()[0].sfen() == settings.roots.boards()[0].sfen()
    with pytest.raises(dataclasses.FrozenInstanceError):
        settings.seed = 1  # type: ignore[misc]
    options = {"depth": 2}
    evaluator = EvaluatorSettings("builtin", options)
    options["depth"] = 3  # the settings keep their own copy
    assert evaluator.options == {"depth": 2}


def test_the_budget_defaults_to_100_positions_only_without_any_limit():
    assert GrowBudget() == GrowBudget(positions=100)
    assert GrowBudget(trials=5).positions is None
    assert GrowBudget(seconds_s=1.0).positions is None


def test_networks_share_the_cores_between_workers(monkeypatch):
    monkeypatch.setattr(os, "cpu_count", lambda: 8)
    network = EvaluatorSettings("torch:m.pt", {"batch_size": 8})
    assert network.options_for(1) == {"batch_size": 8}
    assert network.options_for(3) == {"batch_size": 8, "threads": 2}
    assert EvaluatorSettings("torch:m.pt", {"threads": 1}).options_for(3) == {"threads": 1}
    assert EvaluatorSettings("builtin").options_for(3) == {}
    # on a cluster: the CPUs each actor asked for
    four = ClusterSettings("auto", {"num_cpus": 4, "num_gpus": 1})
    assert network.options_on(four) == {"batch_size": 8, "threads": 4}
    assert network.options_on(ClusterSettings("auto")) == {"batch_size": 8, "threads": 1}
    assert EvaluatorSettings("builtin").options_on(four) == {}
    assert GrowSettings(evaluator=network, workers=3,
                        cluster=four).params()["evaluator_options"] == {"batch_size": 8,
                                                                         "threads": 4}
    assert GrowSettings(evaluator=network, workers=4).params()["evaluator_options"] == {
        "batch_size": 8, "threads": 2}


@pytest.mark.parametrize("make, field, cli_text", [
    (lambda: WalkSettings(color="red"), "walk.color",
     "--color must be both, black or white, not 'red'"),
    (lambda: MctsSettings(playouts=0), "mcts.playouts", "--playouts must be at least 1"),
    (lambda: MctsSettings(batch_size=0), "mcts.batch_size", "--batch-size must be at least 1"),
    (lambda: GrowSettings(workers=0), "workers", "--workers must be at least 1"),
    (lambda: GrowBudget(positions=0), "budget.positions", "--positions must be at least 1"),
    (lambda: GrowBudget(seconds_s=0), "budget.seconds_s", "--time must be more than 0"),
    (lambda: WalkSettings(eval_threshold_cp=-1), "walk.eval_threshold_cp",
     "--eval-threshold must be at least 0"),
    (lambda: WalkSettings(opponent_temperature=0), "walk.opponent_temperature",
     "--temperature must be more than 0"),
    (lambda: BookMoveRule(win_rate_cutoff=2), "book_moves.win_rate_cutoff",
     "--cutoff must be between 0 and 1"),
    (lambda: BookMoveRule(visit_share_threshold=-1), "book_moves.visit_share_threshold",
     "--visit-threshold must be between 0 and 1"),
])
def test_bad_grow_settings_name_the_field_and_the_cli_the_flag(make, field, cli_text):
    """The texts the CLI gives are those grow gave when it named the flags itself."""
    with pytest.raises(SettingsError) as caught:
        make()
    assert caught.value.field == field and str(caught.value).startswith(field + " ")
    assert error_text(caught.value) == cli_text


def test_an_unknown_strategy_is_refused_as_before():
    with pytest.raises(BookgenError, match=r"^unknown strategy 'x' \(choose from dlshogi, "
                                           r"book-mcts, dropout\)$"):
        GrowSettings(strategy="x")


# -- roots -----------------------------------------------------------------------------


def test_roots_are_checked_lines_with_a_label(tmp_path):
    path = tmp_path / "roots.txt"
    path.write_text("# a comment\nstartpos moves 7g7f\n\nsfen " + START + " 1\n")
    roots = Roots.read(path)
    assert roots.lines == ("startpos moves 7g7f", f"sfen {START} 1")
    assert roots.label == str(path)
    assert [board.sfen() for board in roots.boards()] == [
        "lnsgkgsnl/1r5b1/ppppppppp/9/9/2P6/PP1PPPPPP/1B5R1/LNSGKGSNL w - 2", f"{START} 1"]
    assert Roots().boards() == [] and Roots().label is None
    assert Roots(["startpos"], "list").lines == ("startpos",)
    with pytest.raises(BookgenError, match="^made:1: bad position"):
        Roots(("startpos moves 7g7g",), "made")
    with pytest.raises(SettingsError, match="^roots.label "):
        Roots(("startpos",))
    with pytest.raises(SettingsError, match="^roots.lines "):
        Roots("startpos", "text")  # type: ignore[arg-type]
    path.write_text("startpos moves 7g7f\nsfen bad\n")
    with pytest.raises(BookgenError, match=f"^{path}:2: bad position"):
        Roots.read(path)


START = "lnsgkgsnl/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL b -"


# -- book files --------------------------------------------------------------------------


def test_a_settings_error_can_name_its_field_inside_the_message():
    error = SettingsError("strict", f"3 invalid entries; {SettingsError.FIELD}: nothing "
                                    "imported")
    assert str(error) == "3 invalid entries; strict: nothing imported"
    assert error_text(error) == "3 invalid entries; --strict: nothing imported"
    assert error_text(SettingsError("format", "x.db: empty file, format unknown (use "
                                              f"{SettingsError.FIELD})")) == \
        "x.db: empty file, format unknown (use --format)"


def test_import_settings_params_and_checks(tmp_path):
    roots_file = tmp_path / "roots.txt"
    roots_file.write_text("startpos moves 2g2f\n")
    settings = ImportSettings(format="apery", strict=True, apery_roots=Roots.read(roots_file),
                              apery_max_gap_plies=0, parser_workers=3)
    assert settings.params([Path("a.bin")], ["apery"]) == {
        "sources": ["a.bin"], "formats": ["apery"], "strict": True,
        "roots": str(roots_file), "max_gap": 0}
    assert ImportSettings().params([], [])["roots"] is None
    with pytest.raises(BookgenError, match=r"^unknown format 'csv' \(choose from auto, "):
        ImportSettings(format="csv")
    with pytest.raises(SettingsError) as caught:
        ImportSettings(apery_max_gap_plies=2)
    assert error_text(caught.value) == "--max-gap must be 0 or 1"
    with pytest.raises(SettingsError, match="^parser_workers must be at least 1$"):
        ImportSettings(parser_workers=0)


def test_library_errors_of_an_import_name_fields_and_the_cli_names_flags(tmp_path):
    bad = tmp_path / "bad.db"
    bad.write_text("sfen lnsgkgsnl/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL b - 1\n"
                   "7g7f 7g7f 0 32 1\n")
    with pytest.raises(SettingsError) as caught:
        import_books(tmp_path / "b.sqlite", [bad], ImportSettings(strict=True),
                     diagnostics=Diagnostics(stream=io.StringIO()), progress=False)
    assert "; strict: nothing imported" in str(caught.value) and "--" not in str(caught.value)
    result = run_cli("import", "--strict", bad, "-b", tmp_path / "c.sqlite", expect=2)
    assert "; --strict: nothing imported, " in result.stderr
    text = tmp_path / "text.db"
    text.write_text("sfen x\n")
    with pytest.raises(SettingsError, match="format apery, but the file is a DB2016"):
        import_books(tmp_path / "b.sqlite", [text], ImportSettings(format="apery"),
                     progress=False)
    result = run_cli("import", "--format", "apery", text, "-b", tmp_path / "c.sqlite", expect=2)
    assert "text.db: --format apery, but the file is a DB2016" in result.stderr


def test_export_settings_and_summaries_keep_the_json_of_before():
    assert ExportSettings(values="minimax").values is ValueColumn.MINIMAX  # type: ignore[arg-type]
    with pytest.raises(BookgenError, match=r"^unknown export format 'csv' \(choose from "):
        ExportSettings(format="csv")
    with pytest.raises(BookgenError, match=r"^unknown values 'best' \(choose from raw, "
                                           r"minimax\)$"):
        ExportSettings(values="best")  # type: ignore[arg-type]
    with pytest.raises(SettingsError) as caught:
        ExportSettings(hcpe_policy_temperature=0)
    assert error_text(caught.value) == "--temperature must be more than 0"
    assert list(ExportSummary("b.db", "db2016", "raw", 3, moves=5).as_dict().items()) == [
        ("positions", 3), ("moves", 5), ("file", "b.db"), ("format", "db2016"),
        ("values", "raw")]
    assert list(ExportSummary("b.hcpe", "hcpe", "minimax", 3, moves=5,
                              policy_file="b.hcpe.policy.npy").as_dict()) == [
        "positions", "moves", "policy_file", "file", "format", "values"]
    assert list(ExportSummary("b.bin", "apery", "raw", 3, records=7, counts_scaled=0,
                              scores_clamped=1, key_collisions=0).as_dict().items()) == [
        ("positions", 3), ("records", 7), ("counts_scaled", 0), ("scores_clamped", 1),
        ("key_collisions", 0), ("file", "b.bin"), ("format", "apery"), ("values", "raw")]


def test_merge_and_show_results_keep_the_json_of_before(tmp_path):
    assert list(MergeSummary(1, 2, 3, "m.sqlite", 4, 5, 6).as_dict().items()) == [
        ("positions_added", 1), ("moves_added", 2), ("moves_updated", 3),
        ("book", "m.sqlite"), ("positions", 4), ("moves", 5), ("run_id", 6)]
    book = tmp_path / "b.sqlite"
    run_cli("import", ROOT / "data" / "sample.db", "-b", book)
    view = lookup_position(book, "startpos")
    assert view.in_book and view.ply == 1 and view.moves[0] == BookMove(
        "7g7f", "5a4b", 228, 10, 495)
    as_dict = view.as_dict()
    assert list(as_dict) == ["sfen", "in_book", "ply", "board", "moves"]
    assert as_dict["moves"][0] == {"move": "7g7f", "ponder": "5a4b", "value": 228,
                                   "depth": 10, "count": 495}
    assert json.loads(run_cli("show", "-b", book, "--json").stdout) == as_dict
    assert lookup_position(book, "startpos moves 1g1f 9c9d 9g9f").as_dict()["moves"] == []


# -- ratings and the report ------------------------------------------------------------


def test_rating_settings_check_their_fields():
    with pytest.raises(SettingsError) as caught:
        RatingSettings(confidence_percent=100)
    assert str(caught.value) == "confidence_percent must be between 0 and 100 % (got 100)"
    assert error_text(caught.value) == "--confidence must be between 0 and 100 % (got 100)"
    with pytest.raises(SettingsError, match=r"^simulations must be 0 or at least 2 "):
        RatingSettings(simulations=1)
    with pytest.raises(SettingsError, match=r"^scale must be positive \(got 0\)$"):
        RatingSettings(scale=0)
    with pytest.raises(SettingsError) as caught:
        BayesEloSettings(prior_draws=-1)
    assert error_text(caught.value) == "--prior must not be negative (got -1)"
    with pytest.raises(SettingsError, match=r"^draw_elo must be positive"):
        BayesEloSettings(draw_elo=0)
    settings = RatingSettings(anchor=Anchor("base", 1500), simulations=2)
    assert pickle.loads(pickle.dumps(settings)) == settings


def test_report_settings_default_to_1000_simulations():
    settings = ReportSettings(["a.sqlite"])  # type: ignore[arg-type]
    assert settings.results == ("a.sqlite",) and settings.rating.simulations == 1000
    assert settings.rating == RatingSettings(simulations=1000)
