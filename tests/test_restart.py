"""bookgen.engines.restart: starting USI engines and restarting them, against fake engines
(tests/fake_engines) and gpsusi.

The labels' texts are compared with literal strings: they are what grow,
refine search, self-play and match have always printed.
"""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from bookgen.engines.protocols import EvaluatorError
from bookgen.engines.restart import (
    DEFAULT_BYOYOMI,
    EngineFailed,
    EngineLabel,
    RestartPolicy,
    SearchLimits,
    is_gpsshogi,
    run_with_restarts,
    search_stop_grace,
    start_engine,
)
from bookgen.engines.usi.analyser import evaluator_label
from bookgen.engines.usi.client import EngineCrashed, UsiError
from bookgen.errors import BookgenError
from bookgen.refine.book_search import search_label
from conftest import PYTHON

GPS = "/usr/games/gpsusi"
FAKES = Path(__file__).resolve().parent / "fake_engines"
LABEL = EngineLabel("engine x", "cannot start engine x", "player p: {name} aborts")


def fake(script: str, *args: str | Path) -> str:
    return " ".join(shlex.quote(str(part)) for part in (PYTHON, FAKES / script, *args))


class Refused(Exception):
    pass


def test_search_limits():
    assert not SearchLimits().given
    assert SearchLimits().or_default() == SearchLimits(byoyomi_ms=DEFAULT_BYOYOMI)
    assert DEFAULT_BYOYOMI == 1000
    limits = SearchLimits(nodes=5, depth=3)
    assert limits.or_default() is limits
    assert limits.go() == {"nodes": 5, "byoyomi": None, "movetime": None, "depth": 3}
    assert not SearchLimits(byoyomi_ms=300).aborts_gpsshogi
    for limits in (SearchLimits(nodes=1), SearchLimits(movetime_ms=1), SearchLimits(depth=1)):
        assert limits.aborts_gpsshogi


def test_helpers():
    assert is_gpsshogi("gpsshogi (2023)") and is_gpsshogi("GPSShogi")
    assert not is_gpsshogi(None) and not is_gpsshogi("Fairy-Stockfish")
    assert search_stop_grace(None) == 5.0 and search_stop_grace(2.0) == 2.0
    assert search_stop_grace(60.0) == 5.0
    assert RestartPolicy().attempts == 4 and RestartPolicy(2).attempts == 3
    assert RestartPolicy(5, "forfeit").attempts == 1


def test_start_errors_are_worded_by_the_label():
    command = fake("fake_engine.py")
    with pytest.raises(BookgenError) as caught:
        start_engine(command, {"NoSuchOption": "1"}, SearchLimits(), LABEL)
    assert str(caught.value).startswith("engine x: ") and "NoSuchOption" in str(caught.value)
    with pytest.raises(BookgenError) as caught:
        start_engine("/nonexistent/engine", None, SearchLimits(), LABEL)
    assert str(caught.value).startswith("cannot start engine x: ")
    label = EngineLabel("p", "q", "r", EvaluatorError)
    with pytest.raises(EvaluatorError):
        start_engine("/nonexistent/engine", None, SearchLimits(), label)
    with start_engine(command, {"Threads": "2"}, SearchLimits(nodes=1), LABEL,
                      stop_grace_s=1.0, quit_grace_s=1.0) as engine:
        assert engine.name == "FakeEngine 1.0" and engine.applied_options == {"Threads": "2"}
        assert engine.stop_grace == 1.0 and engine.quit_grace == 1.0


def test_gpsshogi_refuses_the_limits_it_aborts_on():
    with pytest.raises(BookgenError) as caught:
        start_engine(GPS, {"BookDepth": "0"}, SearchLimits(nodes=100), LABEL)
    assert str(caught.value).startswith("player p: gpsshogi") and caught.value.args[0].endswith(
        " aborts")
    with start_engine(GPS, {"BookDepth": "0"}, SearchLimits(byoyomi_ms=100), LABEL) as engine:
        assert is_gpsshogi(engine.name)


def test_the_uses_keep_their_texts():
    """Today's messages, literally (grow's and self-play's MCTS evaluator; refine search)."""
    with pytest.raises(EvaluatorError) as caught:
        start_engine("/nonexistent/engine", None, SearchLimits(),
                     evaluator_label("/nonexistent/engine"))
    assert str(caught.value).startswith("cannot start USI engine '/nonexistent/engine': ")
    label = evaluator_label("cmd")
    assert str(label.failure(UsiError("boom"))) == "USI engine 'cmd': boom"
    assert label.gpsshogi.replace("{name}", "gpsshogi 1") == (
        "gpsshogi 1: gpsusi aborts on 'go nodes', 'go movetime' and 'go depth'; "
        "use byoyomi instead")
    label = search_label("usi:cmd")
    assert label.error is BookgenError
    assert str(label.failure(UsiError("boom"))) == "engine usi:cmd: boom"
    assert label.cannot_start == "cannot start engine usi:cmd"
    assert label.gpsshogi.replace("{name}", "gpsshogi 1") == (
        "engine gpsshogi 1: gpsusi aborts on 'go nodes', 'go movetime' and 'go depth'; "
        "use --byoyomi")


def test_a_request_is_retried_after_restarts_then_fails(tmp_path):
    log = tmp_path / "log"
    with start_engine(fake("fake_engine.py", "--crash-on-go", "1", "--log", log), None,
                      SearchLimits(), LABEL) as engine:
        def attempt() -> None:
            engine.position("startpos")
            engine.go(nodes=1, timeout=10)

        with pytest.raises(EngineFailed) as caught:
            run_with_restarts(engine, attempt, RestartPolicy(2),
                              after_restart=engine.new_game)
        failed = caught.value
        assert failed.restarts == 2 == engine.restarts and len(failed.errors) == 3
        assert all(isinstance(error, EngineCrashed) for error in failed.errors)
        assert failed.last is failed.errors[-1] and str(failed) == str(failed.last)
    commands = log.read_text().split("\n")
    assert commands.count("usinewgame") == 2  # after each restart, not before the first try


def test_a_request_succeeds_after_one_restart(tmp_path):
    once = tmp_path / "crashed-once"
    with start_engine(fake("fake_engine.py", "--crash-on-go", "1", "--once-file", once), None,
                      SearchLimits(), LABEL) as engine:
        def attempt() -> str | None:
            engine.position("startpos")
            return engine.go(nodes=1, timeout=10).bestmove

        move, restarts = run_with_restarts(engine, attempt, RestartPolicy(3))
        assert move is not None and restarts == 1 and once.exists()
        # A running engine is not restarted before the first try.
        assert run_with_restarts(engine, attempt, RestartPolicy(3))[1] == 0
        # A dead one is.
        engine.close()
        assert run_with_restarts(engine, attempt, RestartPolicy(3))[1] == 1


def test_final_errors_are_not_retried_and_others_propagate():
    with start_engine(fake("fake_engine.py"), None, SearchLimits(), LABEL) as engine:
        calls: list[int] = []

        def refused() -> None:
            calls.append(1)
            raise Refused("no score")

        with pytest.raises(EngineFailed) as caught:
            run_with_restarts(engine, refused, RestartPolicy(3), final=(Refused,))
        assert len(calls) == 1 and caught.value.restarts == 0
        assert str(caught.value.last) == "no score"
        with pytest.raises(Refused):
            run_with_restarts(engine, refused, RestartPolicy(3))
        assert len(calls) == 2 and engine.restarts == 0


def test_forfeit_tries_once_and_never_restarts():
    with start_engine(fake("fake_engine.py", "--crash-on-go", "1"), None, SearchLimits(),
                      LABEL) as engine:
        def attempt() -> None:
            engine.position("startpos")
            engine.go(nodes=1, timeout=10)

        policy = RestartPolicy(3, on_failure="forfeit")
        with pytest.raises(EngineFailed) as caught:
            run_with_restarts(engine, attempt, policy)
        assert len(caught.value.errors) == 1 and caught.value.restarts == 0
        assert not engine.alive
        with pytest.raises(EngineFailed):  # dead: still not restarted
            run_with_restarts(engine, attempt, policy)
        assert engine.restarts == 0
