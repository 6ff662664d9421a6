"""refine search analyses positions through the engines layer's evaluators
(builtin with ``priors=False``, USI in ``best-line`` mode): the records equal
those of refine's own analysers before they were merged into the engines
layer. Those old analysers are kept below, verbatim apart from taking their
settings as arguments, for this comparison only.

Engines: the built-in search, fairy-stockfish, and fake engines
(tests/fake_engines) that crash, answer garbage, illegal moves, no score,
resign or win.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import cshogi
import pytest

from bookgen.engines.builtin.alphabeta import PLAY_DEPTH, Searcher
from bookgen.engines.protocols import PositionFailed
from bookgen.engines.settings import EngineSettings, engine_settings
from bookgen.engines.usi.analyser import BadOutput, UsiEvaluator
from bookgen.engines.usi.client import UsiEngine, UsiError, UsiOptionError
from bookgen.engines.usi.protocol import UsiSearch, parse_info, printable
from bookgen.errors import BookgenError
from bookgen.position import legal_prefix
from bookgen.refine.book_search import AnalysisRecord, analyse_position, open_analyser
from bookgen.values import MATE_VALUE
from conftest import PYTHON

FAIRY = "/usr/games/fairy-stockfish"
FAKES = Path(__file__).resolve().parent / "fake_engines"
MIDGAME_MOVES = "7g7f 3c3d 2g2f 4c4d 2f2e 2b3c 3i4h 8b4b 5i6h 3a3b 6h7h 5a6b".split()
MATE_IN_1 = "4k4/9/4P4/9/9/9/9/9/4K4 b G 1"
MATED = "4k4/4G4/4P4/9/9/9/9/9/4K4 w - 1"


def fake(script: str, *args: str | Path) -> str:
    return " ".join(shlex.quote(str(part)) for part in (PYTHON, FAKES / script, *args))


def positions() -> list[str]:
    """Refine's task sfens ("SFEN PLY"): the start, a midgame, a mate in 1, checkmated."""
    board = cshogi.Board()
    sfens = [board.sfen()]
    for move in MIDGAME_MOVES:
        board.push_usi(move)
        sfens.append(board.sfen())
    return [sfens[0], sfens[5], sfens[-1], MATE_IN_1, MATED]


# ------------------------------------------------------------------ the old analysers


def old_settings(settings: EngineSettings) -> Any:
    """The old refine EngineSettings' fields, from the new settings."""
    spec = str(settings.spec)
    limits = settings.limits
    return SimpleNamespace(
        spec=spec, kind=spec.partition(":")[0], command=spec.partition(":")[2],
        options=settings.options, nodes=limits.nodes, byoyomi=limits.byoyomi_ms,
        movetime=limits.movetime_ms, depth=limits.depth, timeout=settings.timeout_s,
        retries=settings.restarts.retries)


@dataclass
class OldResult:
    position_id: int
    ok: bool
    score: int | None = None
    mate: int | None = None
    bound: str | None = None
    depth: int | None = None
    seldepth: int | None = None
    nodes: int | None = None
    bestmove: str | None = None
    pv: str = ""
    error: str = ""
    restarts: int = 0


class _NoScore(Exception):
    pass


class OldBuiltinAnalyser:
    def __init__(self, settings: Any) -> None:
        self.settings = settings
        self.searcher = Searcher()

    def analyse(self, position_id: int, sfen: str) -> OldResult:
        board = cshogi.Board(sfen)
        r = self.searcher.search_root(board, self.settings.depth or PLAY_DEPTH,
                                      self.settings.nodes, margin=0)
        if not r.best:
            return OldResult(position_id, True, -MATE_VALUE, 0, "exact", 0, None, r.nodes,
                             None, "")
        return OldResult(
            position_id, True, r.score, r.mate, "exact", r.depth, None, r.nodes,
            cshogi.move_to_usi(r.best), " ".join(cshogi.move_to_usi(m) for m in r.pv))

    def close(self) -> None:
        pass


class OldUsiAnalyser:
    def __init__(self, settings: Any) -> None:
        self.settings = settings
        command = settings.command
        try:
            self.engine = UsiEngine(command, options=settings.options,
                                    stop_grace=5.0 if settings.timeout is None
                                    else min(5.0, settings.timeout))
        except UsiOptionError as error:
            raise BookgenError(f"engine {settings.spec}: {error}") from None
        except UsiError as error:
            raise BookgenError(f"cannot start engine {settings.spec}: {error}") from None

    def analyse(self, position_id: int, sfen: str) -> OldResult:
        board = cshogi.Board(sfen)
        legal = {cshogi.move_to_usi(m) for m in board.legal_moves}
        errors: list[str] = []
        restarts = 0
        for attempt in range(self.settings.retries + 1):
            try:
                if attempt > 0 or not self.engine.alive:
                    restarts += 1
                    self.engine.restart()
                result = self._analyse_once(position_id, sfen, board, legal)
                result.restarts = restarts
                return result
            except _NoScore as error:
                errors.append(str(error))
                break
            except (UsiError, BadOutput) as error:
                errors.append(str(error) or type(error).__name__)
        return OldResult(position_id, False, error=errors[-1], restarts=restarts)

    def _analyse_once(self, position_id: int, sfen: str, board: cshogi.Board,
                      legal: set[str]) -> OldResult:
        engine = self.engine
        engine.new_game()
        engine.position(f"sfen {sfen}")
        s = self.settings
        result = engine.go(nodes=s.nodes, byoyomi=s.byoyomi, movetime=s.movetime, depth=s.depth,
                           timeout=s.timeout)
        if result.bestmove is None and not (result.resign or result.win):
            raise BadOutput(f"no bestmove in the engine's answer (last lines: "
                            f"{result.tail()})")
        if result.bestmove is not None and result.bestmove not in legal:
            raise BadOutput(f"illegal bestmove '{printable(result.bestmove, 40)}'")
        info = self._last_scored(result)
        if info is None:
            if result.resign or result.win:
                score = MATE_VALUE if result.win else -MATE_VALUE
                return OldResult(position_id, True, score, None, "exact", None, None,
                                 result.nodes, result.bestmove, "")
            hint = " (gpsusi: --engine-option BookDepth=0)" if (
                engine.name or "").startswith("gpsshogi") else ""
            raise _NoScore(f"engine {engine.name or s.command!r} answered bestmove "
                           f"{result.bestmove} without any score{hint}; it may be playing "
                           "from its own book")
        nodes = max(n for n in (info.nodes, result.nodes, 0) if n is not None)
        return OldResult(
            position_id, True, info.score, info.mate, info.bound or "exact", info.depth,
            info.seldepth, nodes or None, result.bestmove,
            " ".join(legal_prefix(board, info.pv)))

    def _last_scored(self, result: UsiSearch) -> Any:
        for line in reversed(result.lines):
            if line.startswith("info"):
                info = parse_info(line, self.engine.mate_cp_threshold)
                if info is not None and info.multipv == 1 and info.has_score:
                    return info
        return None

    def close(self) -> None:
        self.engine.close()


# ------------------------------------------------------------------ comparison


def old_fields(result: OldResult) -> tuple:
    return (result.position_id, result.ok, result.score, result.mate, result.bound,
            result.depth, result.seldepth, result.nodes, result.bestmove, result.pv,
            result.error, result.restarts)


def new_fields(record: AnalysisRecord) -> tuple:
    e = record.evaluation
    assert (e is not None) == record.ok
    if e is None:
        line: tuple = (None,) * 7 + ("",)
    else:
        line = (e.score, e.mate, e.bound, e.depth, e.seldepth, e.nodes, e.bestmove,
                " ".join(e.pv))
    return (record.position_id, record.ok, *line, record.error, record.restarts)


def compare(settings: EngineSettings, old_side_settings: EngineSettings | None = None,
            sfens: list[str] | None = None) -> list[tuple]:
    """Analyse ``sfens`` with the old analyser and the new evaluator; both record lists."""
    old_side = old_settings(old_side_settings or settings)
    old: OldBuiltinAnalyser | OldUsiAnalyser
    old = (OldBuiltinAnalyser(old_side) if old_side.kind == "builtin"
           else OldUsiAnalyser(old_side))
    try:
        olds = [old_fields(old.analyse(pid, sfen))
                for pid, sfen in enumerate(sfens or positions(), start=1)]
    finally:
        old.close()
    with open_analyser(settings) as evaluator:
        news = [new_fields(analyse_position(evaluator, pid, sfen))
                for pid, sfen in enumerate(sfens or positions(), start=1)]
    assert news == olds
    return news


@pytest.mark.parametrize("limits", [{}, {"depth": 2}, {"nodes": 300}, {"depth": 3,
                                                                        "nodes": 2000}])
def test_builtin_records_are_the_old_ones(limits):
    records = compare(engine_settings("builtin", **limits))
    assert all(r[1] for r in records)
    assert records[-1][2:5] == (-MATE_VALUE, 0, "exact")   # checkmated
    assert records[-2][3] == 1                              # mate in 1


def test_fairy_stockfish_records_are_the_old_ones():
    records = compare(engine_settings(f"usi:{FAIRY}", {"Threads": "1"}, nodes=3000))
    assert all(r[1] for r in records) and records[-2][3] == 1


@pytest.mark.parametrize("flags", [[], ["--multipv"], ["--garbage"], ["--score", "-123"],
                                   ["--stderr-bytes", "5000"]])
def test_fake_engine_records_are_the_old_ones(flags):
    records = compare(engine_settings(f"usi:{fake('fake_engine.py', *flags)}", nodes=1))
    assert all(r[1] for r in records[:-1])


@pytest.mark.parametrize("flags,retries", [(["--no-info"], 2), (["--illegal"], 2),
                                           (["--no-bestmove"], 1), (["--crash-on-go", "2"], 2),
                                           (["--crash-on-go", "1"], 1)])
def test_failures_are_recorded_as_before(flags, retries):
    settings = engine_settings(f"usi:{fake('fake_engine.py', *flags)}", nodes=1,
                               retries=retries)
    records = compare(settings)
    assert not all(r[1] for r in records) or any(r[-1] for r in records)
    if flags == ["--no-info"]:   # not retried (checkmated: "bestmove resign", a mate)
        assert all(not r[1] and r[-1] == 0 and "without any score" in r[-2]
                   for r in records[:-1])
        assert records[-1][1:4] == (True, -MATE_VALUE, None)


def test_one_time_crash_restarts_once(tmp_path):
    (tmp_path / "old").mkdir()
    (tmp_path / "new").mkdir()

    def settings(directory: str) -> EngineSettings:
        once = tmp_path / directory / "crashed"
        command = fake("fake_engine.py", "--crash-on-go", "3", "--once-file", once)
        return engine_settings(f"usi:{command}", nodes=1)

    records = compare(settings("new"), settings("old"))
    assert [r[-1] for r in records] == [0, 0, 1, 0, 0]


def test_resign_and_win_without_a_score(tmp_path):
    for token in ("resign", "win"):
        script = tmp_path / token
        script.write_text(token)
        for extra in ([], ["--score", "77"]):
            sfen = "lnsgkgsnl/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL b - 1"
            records = compare(engine_settings(
                f"usi:{fake('fake_engine.py', '--script', script, *extra)}", nodes=1),
                sfens=[sfen])
            assert records[0][1]
            if not extra:
                assert records[0][2] == (MATE_VALUE if token == "win" else -MATE_VALUE)


def test_a_position_failure_says_what_happened():
    with UsiEvaluator(fake("fake_engine.py", "--illegal"), nodes=1, restarts=1,
                      mode="best-line") as evaluator:
        with pytest.raises(PositionFailed) as caught:
            evaluator.evaluate([cshogi.Board()])
    failure = caught.value
    assert failure.restarts == 1 and failure.error == "illegal bestmove '9a9a'"
    assert str(failure).startswith("USI engine 'FakeEngine 1.0' failed on sfen ")
    assert str(failure).endswith("(2 attempts, 1 restarts); last error: illegal bestmove '9a9a'")


@pytest.mark.parametrize("flags", [[], ["--crash-on-go", "2"], ["--no-info"], ["--illegal"]])
def test_the_engine_is_sent_the_same_commands(tmp_path, flags):
    """usinewgame before every position, position sfen with its move number, go, restarts."""
    def settings(side: str) -> EngineSettings:
        command = fake("fake_engine.py", "--log", tmp_path / side, *flags)
        return engine_settings(f"usi:{command}", {"Threads": "2"}, nodes=1, retries=2)

    compare(settings("new"), settings("old"))
    sent = (tmp_path / "new").read_text()
    assert sent == (tmp_path / "old").read_text()
    assert sent.count("usinewgame") >= len(positions())
    assert f"position sfen {positions()[1]}\n" in sent
