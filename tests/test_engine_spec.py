"""The one engine-spec grammar (bookgen.engines.spec)."""

import pytest

from bookgen.engines.factory import default_batch_size
from bookgen.engines.spec import EngineSpec, parse_spec
from bookgen.errors import BookgenError

ANALYSERS = ["builtin", "usi:/usr/games/gpsusi --x", "usi:a:b", "torch:m.pt", "onnx:/x/m.onnx",
             "blend:book.sqlite:builtin", "blend:b.sqlite:torch:m.pt",
             "blend:a.sqlite:blend:b.sqlite:usi:engine"]


@pytest.mark.parametrize("text", ANALYSERS)
def test_analyser_specs_read_back_as_written(text):
    assert str(parse_spec(text)) == text


def test_the_parts_of_a_spec():
    spec = parse_spec("blend:b.sqlite:torch:m.pt")
    assert spec == EngineSpec("blend", "b.sqlite", EngineSpec("torch", "m.pt"))
    assert spec.base == EngineSpec("torch", "m.pt") and not spec.is_network
    assert spec.inner is not None and spec.inner.is_network
    assert parse_spec("usi:x y").is_usi and parse_spec("usi:x y").argument == "x y"


@pytest.mark.parametrize("text", ["", "builtin:", "builtins", "usi:", "usi", "torch:", "onnx",
                                  "blend:b.sqlite", "blend::builtin", "blend:b:nonsense",
                                  "mcts:builtin", "alphabeta", "nonsense"])
def test_bad_analyser_specs_are_refused(text):
    with pytest.raises(BookgenError, match="unknown evaluator .*use builtin, usi:COMMAND"):
        parse_spec(text)


def test_player_specs():
    assert parse_spec("builtin", "player") == EngineSpec("builtin")
    assert parse_spec("usi:fsf", "player") == EngineSpec("usi", "fsf")
    mcts = parse_spec("mcts:builtin", "player")
    assert mcts == EngineSpec("mcts", inner=EngineSpec("builtin")) and str(mcts) == "mcts:builtin"
    assert mcts.evaluator == EngineSpec("builtin")
    # a bare network or blend spec plays with MCTS over it
    assert parse_spec("torch:m.pt", "player") == parse_spec("mcts:torch:m.pt", "player")
    assert str(parse_spec("blend:b:onnx:m", "player")) == "mcts:blend:b:onnx:m"
    with pytest.raises(BookgenError, match="unknown player 'mcts:usi'"):
        parse_spec("mcts:usi", "player")
    with pytest.raises(BookgenError, match="unknown player 'mcts:mcts:builtin'"):
        parse_spec("mcts:mcts:builtin", "player")
    with pytest.raises(BookgenError, match=r"unknown player 'x' \(use builtin \(alpha-beta\)"):
        parse_spec("x", "player")


def test_batch_size_defaults_follow_the_evaluating_spec():
    assert default_batch_size("builtin") == 1
    assert default_batch_size("torch:m.pt") == 16
    assert default_batch_size("blend:b:onnx:m") == 16
    assert default_batch_size(parse_spec("mcts:torch:m", "player")) == 16
