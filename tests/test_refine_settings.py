"""Settings of refine search and refine mistakes (bookgen.refine.settings): validation
errors name fields in the library and flags on the command line, runs.params stay
those of before, and the CLI's defaults are the settings' defaults."""

from __future__ import annotations

import dataclasses
import pickle

import click
import pytest

from bookgen.cli.refine import mistakes_command, search_command
from bookgen.cli.support import error_text
from bookgen.engines.restart import RestartPolicy, SearchLimits
from bookgen.engines.settings import EngineSettings, engine_settings
from bookgen.engines.spec import EngineSpec, parse_spec
from bookgen.errors import BookgenError, SettingsError
from bookgen.refine.settings import (
    DetectionSettings,
    ExtensionSettings,
    MistakesSettings,
    PositionSelection,
    SearchSettings,
)
from conftest import run_cli


@pytest.mark.parametrize("make, field, cli_text", [
    (lambda: SearchSettings(workers=0), "workers", "--workers must be at least 1"),
    (lambda: SearchSettings(limit=0), "limit", "--limit must be at least 1"),
    (lambda: PositionSelection(margin_cp=-1), "selection.margin_cp",
     "--margin must be 0 or more"),
    (lambda: PositionSelection("visits"), "selection.min_visits",
     "--select visits needs --min-visits N"),
    (lambda: PositionSelection("visits", min_visits=-1), "selection.min_visits",
     "--min-visits must be 0 or more"),
    (lambda: DetectionSettings(threshold_cp=-1), "detection.threshold_cp",
     "--threshold must be 0 or more"),
    (lambda: DetectionSettings(opp_threshold_cp=-1), "detection.opp_threshold_cp",
     "--opp-threshold must be 0 or more"),
    (lambda: DetectionSettings(diff_cp=-1), "detection.diff_cp", "--diff must be 0 or more"),
    (lambda: DetectionSettings(analysis_run=0), "detection.analysis_run",
     "--analysis-run must be at least 1"),
    (lambda: ExtensionSettings(max_iterations=0), "extension.max_iterations",
     "--max-iterations must be at least 1"),
    (lambda: ExtensionSettings(expand=0), "extension.expand", "--expand must be at least 1"),
    (lambda: ExtensionSettings(workers=0), "extension.workers", "--workers must be at least 1"),
    (lambda: ExtensionSettings(playouts=0), "extension.playouts",
     "--playouts must be at least 1"),
    (lambda: ExtensionSettings(batch_size=0), "extension.batch_size",
     "--batch-size must be at least 1"),
])
def test_bad_refine_settings_name_the_field_and_the_cli_the_flag(make, field, cli_text):
    """The texts the CLI gives are those refine gave when it named the flags itself."""
    with pytest.raises(SettingsError) as caught:
        make()
    assert caught.value.field == field and "--" not in str(caught.value)
    assert error_text(caught.value) == cli_text


def test_a_missing_min_visits_names_both_fields():
    with pytest.raises(SettingsError) as caught:
        PositionSelection("visits")
    assert str(caught.value) == "selection.select visits needs selection.min_visits N"
    copy = pickle.loads(pickle.dumps(caught.value))
    assert error_text(copy) == "--select visits needs --min-visits N"


@pytest.mark.parametrize("args, text", [
    (["--select", "visits"], "--select visits needs --min-visits N"),
    (["--byoyomi", "100"], "--engine-option, --byoyomi, --movetime and --engine-timeout "
                           "apply to usi: engines only"),
    (["--engine-timeout", "2"], "--engine-option, --byoyomi, --movetime and --engine-timeout "
                                "apply to usi: engines only"),
])
def test_refine_search_names_the_flags(tmp_path, args, text):
    """Settings are checked before the book is looked at: one line, the flags named."""
    result = run_cli("refine", "search", "-b", tmp_path / "missing.sqlite", *args, expect=2)
    assert result.stderr == f"bookgen: error: {text}\n"


def test_unknown_selections_and_engines_are_refused_as_before():
    with pytest.raises(BookgenError, match=r"^unknown selection 'x' \(choose from all, leaves, "
                                           r"principal, visits\)$"):
        PositionSelection("x")
    with pytest.raises(BookgenError, match="^unknown engine 'usi: ' \\(use builtin or "
                                           "usi:COMMAND\\)$"):
        SearchSettings(EngineSettings(EngineSpec("usi", " ")))


@pytest.mark.parametrize("text", ["torch:m.pt", "onnx:m.onnx", "blend:b.db:torch:m.pt"])
def test_networks_are_refused_with_their_reason(text):
    """refine search takes engines with a search of their own: a network is
    refused, in one line saying why and what to use (issue 15: no MCTS analyses)."""
    for make in (lambda: SearchSettings(EngineSettings(parse_spec(text))),
                 lambda: engine_settings(text)):
        with pytest.raises(BookgenError) as error:
            make()
        message = str(error.value)
        assert message.startswith(f"refine search: {text} is a network, which has no search")
        assert "usi:COMMAND" in message and "\n" not in message
    result = run_cli("refine", "search", "-b", "none.db", "--engine", text, expect=2)
    assert result.stderr.count("\n") == 1
    assert "is a network" in result.stderr


def test_search_params_are_the_run_fingerprint_of_before():
    """Every field lands under the name runs.params has always used."""
    assert SearchSettings().params() == {
        "engine": "builtin", "key": {"engine": "builtin", "options": {}, "nodes": 40000,
                                     "byoyomi": None, "movetime": None, "depth": 4},
        "select": "all", "min_visits": None, "margin": 50, "workers": 1, "limit": None,
        "engine_timeout": None, "retries": 2, "only": None}
    engine = engine_settings("usi:eng", {"Threads": "1"}, byoyomi=300, timeout=5.0, retries=1)
    settings = SearchSettings(engine, PositionSelection("visits", 7, 30), workers=2, limit=9)
    assert settings.params(4) == {
        "engine": "usi:eng", "key": {"engine": "usi:eng", "options": {"Threads": "1"},
                                     "nodes": None, "byoyomi": 300, "movetime": None,
                                     "depth": None},
        "select": "visits", "min_visits": 7, "margin": 30, "workers": 2, "limit": 9,
        "engine_timeout": 5.0, "retries": 1, "only": 4}
    assert SearchSettings().engine == engine_settings()


def test_mistakes_params_are_the_run_fingerprint_of_before():
    key = {"engine": "builtin"}
    assert MistakesSettings(extension=ExtensionSettings(workers=2, seed=5)).params(key, 3) == {
        "engine": None, "analysis_run": 3, "key": key, "threshold": 150, "opp_threshold": 150,
        "diff": 200, "iterate": False, "max_iterations": None, "evaluator": None,
        "evaluator_options": None, "playouts": None, "batch_size": None, "expand": None,
        "workers": 2, "seed": 5}
    settings = MistakesSettings(
        DetectionSettings("usi:eng", 4, threshold_cp=100, opp_threshold_cp=50, diff_cp=10),
        iterate=True,
        extension=ExtensionSettings(max_iterations=1, expand=3, evaluator="torch:m.pt",
                                    evaluator_options={"threads": 1}, playouts=7))
    assert settings.params(key, 4) == {
        "engine": "usi:eng", "analysis_run": 4, "key": key, "threshold": 100,
        "opp_threshold": 50, "diff": 10, "iterate": True, "max_iterations": 1,
        "evaluator": "torch:m.pt", "evaluator_options": {"threads": 1}, "playouts": 7,
        "batch_size": 16, "expand": 3, "workers": 1, "seed": 0}
    assert DetectionSettings(threshold_cp=80).opp_cp == 80
    assert ExtensionSettings(batch_size=3).mcts_batch_size() == 3


def test_refine_settings_are_frozen_and_pickle():
    options = {"threads": 2}
    settings = MistakesSettings(iterate=True,
                                extension=ExtensionSettings(evaluator_options=options))
    options["threads"] = 3  # the settings keep their own copy
    assert settings.extension.evaluator_options == {"threads": 2}
    search = SearchSettings(EngineSettings(parse_spec("usi:eng"), {"Hash": "16"},
                                           SearchLimits(nodes=10), 3.0, RestartPolicy(1)),
                            PositionSelection("principal", margin_cp=20), workers=3)
    for value in (settings, search):
        assert pickle.loads(pickle.dumps(value)) == value
    with pytest.raises(dataclasses.FrozenInstanceError):
        search.workers = 1  # type: ignore[misc]


def _default(command: click.Command, name: str) -> object:
    """What the command gets for the flag ``name`` when it is not given."""
    return command.make_context(command.name or "", []).params[name]


def test_the_flags_default_to_the_settings_defaults():
    """One place for each default: the settings dataclasses."""
    selection, detection, extension = PositionSelection(), DetectionSettings(), ExtensionSettings()
    for name, value in (("select", selection.select), ("margin", selection.margin_cp),
                        ("min_visits", selection.min_visits),
                        ("workers", SearchSettings.workers), ("limit", SearchSettings.limit)):
        assert _default(search_command, name) == value, name
    assert _default(search_command, "margin") == 50
    for name, value in (("threshold", detection.threshold_cp), ("diff", detection.diff_cp),
                        ("opp_threshold", detection.opp_threshold_cp),
                        ("engine", detection.engine), ("analysis_run", detection.analysis_run),
                        ("max_iterations", extension.max_iterations),
                        ("expand", extension.expand), ("evaluator", extension.evaluator),
                        ("playouts", extension.playouts), ("batch_size", extension.batch_size),
                        ("workers", extension.workers), ("seed", extension.seed)):
        assert _default(mistakes_command, name) == value, name
