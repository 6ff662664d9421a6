"""The one engine-settings type (bookgen.engines.settings) and open_evaluator.

The analysis keys below are literal outputs of refine search's own
``engine_settings(...).key()`` before it moved into the engines layer: books
store them, and a refine search resumes from earlier runs with the same key,
so they must stay byte for byte. grow's evaluator options are compared with
the CLI's old hand-written routing, kept in this file for the comparison.
"""

from __future__ import annotations

import json
import pickle
from typing import Any

import pytest

from bookgen.cli.grow import _evaluator_options
from bookgen.cli.support import error_text
from bookgen.engines.builtin.analyser import BuiltinEvaluator
from bookgen.engines.factory import open_evaluator
from bookgen.engines.restart import RestartPolicy, SearchLimits
from bookgen.engines.settings import EngineSettings, engine_settings
from bookgen.engines.spec import EngineSpec, parse_spec
from bookgen.engines.usi.analyser import UsiEvaluator, parse_options
from bookgen.errors import BookgenError, SettingsError

FAIRY = "/usr/games/fairy-stockfish"

KEYS = [
    ({}, '{"engine": "builtin", "options": {}, "nodes": 40000, "byoyomi": null, '
         '"movetime": null, "depth": 4}'),
    ({"depth": 2}, '{"engine": "builtin", "options": {}, "nodes": null, "byoyomi": null, '
                   '"movetime": null, "depth": 2}'),
    ({"nodes": 500}, '{"engine": "builtin", "options": {}, "nodes": 500, "byoyomi": null, '
                     '"movetime": null, "depth": 64}'),
    ({"depth": 3, "nodes": 2000}, '{"engine": "builtin", "options": {}, "nodes": 2000, '
                                  '"byoyomi": null, "movetime": null, "depth": 3}'),
    ({"engine": "usi:/usr/games/fairy-stockfish"},
     '{"engine": "usi:/usr/games/fairy-stockfish", "options": {}, "nodes": null, '
     '"byoyomi": 1000, "movetime": null, "depth": null}'),
    ({"engine": "usi:/usr/games/fairy-stockfish",
      "engine_options": {"Threads": "1", "Hash": "64"}, "nodes": 20000},
     '{"engine": "usi:/usr/games/fairy-stockfish", "options": {"Hash": "64", "Threads": "1"}, '
     '"nodes": 20000, "byoyomi": null, "movetime": null, "depth": null}'),
    ({"engine": "usi:gpsusi --extra arg", "engine_options": {"BookDepth": "0"}, "byoyomi": 300,
      "timeout": 5.0, "retries": 1},
     '{"engine": "usi:gpsusi --extra arg", "options": {"BookDepth": "0"}, "nodes": null, '
     '"byoyomi": 300, "movetime": null, "depth": null}'),
    ({"engine": "usi:eng", "movetime": 250, "depth": 12},
     '{"engine": "usi:eng", "options": {}, "nodes": null, "byoyomi": null, "movetime": 250, '
     '"depth": 12}'),
]


@pytest.mark.parametrize("arguments,key", KEYS)
def test_analysis_keys_are_those_of_earlier_versions(arguments, key):
    settings = engine_settings(**arguments)
    assert json.dumps(settings.key()) == key
    again = EngineSettings.from_key(json.loads(key), settings.timeout_s,
                                    settings.restarts.retries)
    assert again == settings and json.dumps(again.key()) == key
    assert pickle.loads(pickle.dumps(settings)) == settings


def test_settings_fields():
    settings = engine_settings("usi:gpsusi --extra arg", {"BookDepth": 0}, byoyomi=300,
                               timeout=5.0, retries=1)
    assert settings.spec == EngineSpec("usi", "gpsusi --extra arg")
    assert settings.options == {"BookDepth": "0"}
    assert settings.limits == SearchLimits(byoyomi_ms=300)
    assert settings.timeout_s == 5.0 and settings.restarts == RestartPolicy(1)
    assert engine_settings().restarts == RestartPolicy(2)


@pytest.mark.parametrize("arguments,field,message", [
    ({"nodes": 0}, "engine.limits.nodes", "--nodes must be a positive integer, not 0"),
    ({"depth": True}, "engine.limits.depth", "--depth must be a positive integer, not True"),
    ({"byoyomi": 1.5}, "engine.limits.byoyomi_ms",
     "--byoyomi must be a positive integer, not 1.5"),
    ({"movetime": -3}, "engine.limits.movetime_ms",
     "--movetime must be a positive integer, not -3"),
    ({"timeout": 0}, "engine.timeout_s", "--engine-timeout must be positive"),
    ({"retries": -1}, "engine.restarts.retries", "--retries must be 0 or more"),
    ({"engine_options": {"Threads": "1"}}, "engine.options",
     "--engine-option, --byoyomi, --movetime and --engine-timeout apply to usi: engines only"),
    ({"byoyomi": 100}, "engine.options", "apply to usi: engines only"),
    ({"engine": "torch:m.pt"}, None, "torch:m.pt is a network, which has no search of its own"),
    ({"engine": "usi:  "}, None, "unknown engine 'usi:  '"),
    ({"engine": "nonsense"}, None, "unknown engine 'nonsense'"),
    ({"engine": "mcts:builtin"}, None, "unknown engine 'mcts:builtin'"),
])
def test_refused_settings(arguments, field, message):
    """Bad values name the settings field in the library and the flag on the command
    line (the texts refine search gave when it named the flags itself)."""
    with pytest.raises(BookgenError) as caught:
        engine_settings(**arguments)
    assert message in error_text(caught.value)
    if field is None:
        assert not isinstance(caught.value, SettingsError)
    else:
        assert isinstance(caught.value, SettingsError) and caught.value.field == field
        assert "--" not in str(caught.value) and str(caught.value).startswith(field)


def test_the_usi_only_error_names_every_field():
    with pytest.raises(SettingsError) as caught:
        engine_settings(timeout=1.0)
    assert str(caught.value) == ("engine.options, engine.limits.byoyomi_ms, "
                                 "engine.limits.movetime_ms and engine.timeout_s apply to usi: "
                                 "engines only")


# ------------------------------------------------------------------ grow's evaluator options


def old_evaluator_options(spec: str, engine_options: tuple[str, ...], nodes: int | None,
                          byoyomi: int | None, movetime: int | None, multipv: int | None,
                          depth: int | None, batch_size: int | None,
                          engine_timeout: float | None = None) -> dict[str, Any]:
    """bookgen.cli.grow._evaluator_options before it went through EngineSettings."""
    kind = spec.partition(":")[0]
    if kind == "blend":
        kind = spec.split(":", 2)[-1].partition(":")[0]
    options: dict[str, Any] = {}
    if kind == "usi":
        options["options"] = parse_options(list(engine_options))
        for name, value in (("nodes", nodes), ("byoyomi", byoyomi), ("movetime", movetime),
                            ("multipv", multipv), ("depth", depth),
                            ("timeout", engine_timeout)):
            if value is not None:
                options[name] = value
    elif engine_options or nodes or byoyomi or movetime or multipv or engine_timeout:
        raise BookgenError("--engine-option, --nodes, --byoyomi, --movetime, --multipv and "
                           "--engine-timeout apply to usi: evaluators only")
    if kind == "builtin" and depth is not None:
        options["depth"] = depth
    if kind in ("torch", "onnx") and batch_size is not None:
        options["batch_size"] = batch_size
    return options


SPECS = ["builtin", "usi:fsf -x", "torch:m.pt", "onnx:m.onnx", "blend:b.sqlite:builtin",
         "blend:b.sqlite:usi:fsf", "blend:b.sqlite:onnx:m.onnx"]
FLAGS: list[tuple[tuple[str, ...], int | None, int | None, int | None, int | None, int | None,
                  int | None, float | None]] = [
    ((), None, None, None, None, None, None, None),
    (("Threads=1", "Hash = 64"), None, None, None, None, None, None, None),
    ((), 100, None, None, None, None, None, None),
    ((), None, 300, 200, 2, None, None, 9.5),
    ((), None, None, None, None, 3, None, None),
    ((), None, None, None, None, 2, 16, None),
    (("BookDepth=0",), 5, 6, 7, 8, 9, 10, 11.0),
]


@pytest.mark.parametrize("spec", SPECS)
@pytest.mark.parametrize("flags", FLAGS)
def test_grow_evaluator_options_are_as_before(spec, flags):
    engine_options, nodes, byoyomi, movetime, multipv, depth, batch_size, timeout = flags
    arguments = (spec, engine_options, nodes, byoyomi, movetime, multipv, depth, batch_size,
                 timeout)
    try:
        old = old_evaluator_options(*arguments)
    except BookgenError as error:
        with pytest.raises(BookgenError) as caught:
            _evaluator_options(*arguments)
        assert str(caught.value) == str(error)
        return
    new = _evaluator_options(*arguments)
    assert json.dumps(new) == json.dumps(old)


# ------------------------------------------------------------------ opening evaluators


def test_open_evaluator_builtin():
    settings = engine_settings("builtin", depth=2, nodes=300)
    with open_evaluator(settings, "best-line") as evaluator:
        assert isinstance(evaluator, BuiltinEvaluator)
        assert (evaluator.depth, evaluator.nodes, evaluator.margin, evaluator.priors) == (
            2, 300, 0, False)
    grow_like = EngineSettings(parse_spec("builtin"), limits=SearchLimits(depth=3))
    with open_evaluator(grow_like) as evaluator:
        assert isinstance(evaluator, BuiltinEvaluator)
        assert (evaluator.depth, evaluator.margin, evaluator.priors) == (3, 300, True)
    with open_evaluator(EngineSettings(parse_spec("builtin")), "best-line") as evaluator:
        assert isinstance(evaluator, BuiltinEvaluator) and evaluator.depth == 4


def test_open_evaluator_usi():
    settings = engine_settings(f"usi:{FAIRY}", {"Threads": "1"}, nodes=1000, retries=3)
    with open_evaluator(settings, "best-line") as evaluator:
        assert isinstance(evaluator, UsiEvaluator)
        assert evaluator.mode == "best-line" and evaluator.restarts == 3
        assert evaluator.limits == SearchLimits(nodes=1000)
        assert evaluator.engine is not None and evaluator.engine.applied_options == {
            "Threads": "1"}
    with open_evaluator(engine_settings(f"usi:{FAIRY}"), "best-line") as evaluator:
        assert isinstance(evaluator, UsiEvaluator) and evaluator.restarts == 2
        assert evaluator.limits == SearchLimits(byoyomi_ms=1000)
    with open_evaluator(EngineSettings(parse_spec(f"usi:{FAIRY}"), multipv=2)) as evaluator:
        assert isinstance(evaluator, UsiEvaluator)
        assert evaluator.mode == "multipv-lines" and evaluator.multipv == 2
    with pytest.raises(ValueError):
        open_evaluator(EngineSettings(parse_spec("torch:m.pt")), "best-line")
