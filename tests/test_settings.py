"""Settings: units, validation and the errors the library and the CLI give for them."""

from __future__ import annotations

import pickle

import cshogi
import pytest

from bookgen.cli.support import error_text, flag_of
from bookgen.engines.mcts import MctsSettings, _terminal_value
from bookgen.errors import BookgenError, SettingsError
from bookgen.values import DrawValues, value_to_cp

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


@pytest.mark.parametrize("field, flag", [
    ("draws.black", "--draw-value-black"), ("draws.white", "--draw-value-white"),
    ("workers", "--workers"), ("mcts.batch_size", "--batch-size"),
    ("mcts.playouts", "--playouts")])
def test_flags_of_fields(field, flag):
    assert flag_of(field) == flag
