"""Cross-search batching: K searches in one worker, their leaves in one evaluator batch.

The searches of ``grow --parallel-searches K`` must give what they give one
after another: compared here for the built-in evaluator and small torch and
ONNX networks (made with ``bookgen model init`` / ``export-onnx``), at the
library level (:func:`bookgen.grow.expand.expand_positions` against
:func:`bookgen.grow.expand.expand_position`, per position) and as whole books
grown through the CLI with and without batches across searches.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import replace
from pathlib import Path

import cshogi
import pytest
from click.testing import CliRunner

from bookgen.cli.model import model_group
from bookgen.engines.batching import SearchBatcher, search_batch
from bookgen.engines.factory import make_evaluator
from bookgen.engines.mcts import Mcts, MctsSettings
from bookgen.grow import EvaluatorSettings, GrowBudget, GrowSettings, grow
from bookgen.grow.expand import ExpansionResult, expand_position, expand_positions
from bookgen.grow.settings import BookMoveRule
from bookgen.workers.pool import GroupedRunner, LocalRunner
from conftest import random_positions, run_cli


def _model(*args: object) -> None:
    result = CliRunner().invoke(model_group, [str(a) for a in args])
    assert result.exit_code == 0, (result.stdout, result.stderr, result.exception)


@pytest.fixture(scope="module")
def specs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Evaluator specs: builtin, a small torch model and its ONNX export."""
    directory = tmp_path_factory.mktemp("cross")
    model = directory / "small.pt"
    _model("init", "-o", model, "--blocks", 2, "--channels", 16, "--seed", 5)
    _model("export-onnx", model, "-o", directory / "small.onnx")
    return {"builtin": "builtin", "torch": f"torch:{model}",
            "onnx": f"onnx:{directory / 'small.onnx'}"}


SFENS = [cshogi.Board().sfen(), *(board.sfen() for board in
                                  random_positions(seed=3, count=5, max_plies=40))]


def _rounded(value: object) -> object:
    """``value`` with its floats to 7 decimals: torch's convolutions round a row
    differently in batches of different sizes (within one float32 unit, 6e-8, measured
    on the CPU here), so torch's searches agree to that."""
    if isinstance(value, float):
        return round(value, 7)
    if isinstance(value, (list, tuple)):
        return type(value)(_rounded(item) for item in value)
    if hasattr(value, "__dataclass_fields__"):
        return tuple(_rounded(getattr(value, name)) for name in value.__dataclass_fields__)
    return value


def _same(result: ExpansionResult, kind: str = "builtin") -> tuple:
    """What an expansion found (not its timings); torch's floats rounded."""
    found = (result.sfen, result.choices, result.value, result.win_rate, result.visits,
             result.evaluations)
    return _rounded(found) if kind == "torch" else found  # type: ignore[return-value]


@pytest.mark.parametrize("kind", ["builtin", "torch", "onnx"])
def test_interleaved_searches_find_what_they_find_one_after_another(
        specs: dict[str, str], kind: str) -> None:
    playouts = 30 if kind == "builtin" else 120
    mcts = MctsSettings(playouts=playouts, batch_size=12)
    rule = BookMoveRule(min_visits=2)
    options = {} if kind == "builtin" else {"batch_size": 12, "threads": 1}
    with make_evaluator(specs[kind], **options) as evaluator:
        together = expand_positions(evaluator, SFENS, (mcts, rule))
        per_search = replace(mcts, batch_size=search_batch(12, len(SFENS)))
        alone = [expand_position(evaluator, sfen, (per_search, rule)) for sfen in SFENS]
    assert [_same(r, kind) for r in together] == [_same(r, kind) for r in alone]
    assert all(r.choices for r in together)
    # The batches really crossed the searches: fewer, fuller evaluator calls.
    calls_together = sum(r.batches for r in together)
    calls_alone = sum(r.batches for r in alone)
    evaluations = sum(r.evaluations for r in together)
    assert calls_together < calls_alone
    assert evaluations / calls_together > search_batch(12, len(SFENS))


def test_batcher_fills_batches_of_the_evaluator_batch_size(specs: dict[str, str]) -> None:
    """Full batches while every search runs, none larger than the batch size; a
    search's leaves may be split over two batches."""
    sizes: list[int] = []
    with make_evaluator("builtin") as inner:
        class Recording:
            spec = "recording"

            def evaluate(self, boards):  # type: ignore[no-untyped-def]
                sizes.append(len(boards))
                return inner.evaluate(boards)

        batcher: SearchBatcher = SearchBatcher(Recording(), 5)  # type: ignore[arg-type]
        settings = MctsSettings(playouts=40, batch_size=3, early_stop=False)
        boards = [cshogi.Board(sfen) for sfen in SFENS[:4]]
        results = batcher.run([Mcts(inner, settings).searching(board) for board in boards])
        single = [Mcts(inner, settings).search(board) for board in boards]
    assert [r.moves for r in results] == [r.moves for r in single]
    assert max(sizes) == 5 and sizes.count(5) >= len(sizes) // 2
    assert batcher.stats.calls == len(sizes) and batcher.stats.boards == sum(sizes)
    assert batcher.stats.boards == sum(r.evaluations for r in single)


def test_grouped_runner_sends_groups_and_flushes_a_part_group_on_collect() -> None:
    groups: list[list[int]] = []

    def run_group(tasks: list[int]) -> list[int]:
        groups.append(list(tasks))
        return [task * 10 for task in tasks]

    runner: GroupedRunner[int, int] = GroupedRunner(LocalRunner(run_group), 3)
    assert runner.capacity() == 3
    for task in range(5):
        runner.submit(task)
    assert runner.collect() == [0, 10, 20]
    assert runner.collect() == [30, 40]   # the part group went out on collect
    assert groups == [[0, 1, 2], [3, 4]]


def _book(path: Path, kind: str) -> object:
    with sqlite3.connect(path) as db:
        positions = db.execute("SELECT * FROM positions ORDER BY 1").fetchall()
        moves = db.execute("SELECT * FROM moves ORDER BY 1, 2").fetchall()
    return _rounded((positions, moves)) if kind == "torch" else (positions, moves)


def _grow(book: Path, spec: str, *args: object) -> dict:
    result = run_cli("grow", "-b", book, "--evaluator", spec, "--playouts", 60,
                     "--positions", 12, "--min-visits", 2, "--seed", 4, "--json",
                     *map(str, args))
    assert result.exit_code == 0, (result.stdout, result.stderr)
    return json.loads(result.stdout)


def _grow_library(book: Path, spec: str, searches: int, batch_size: int) -> dict:
    """grow through the library: one thread for the network (onnxruntime rounds a
    row differently with two threads at batch 1 than in larger batches)."""
    options = {} if spec == "builtin" else {"batch_size": batch_size, "threads": 1}
    settings = GrowSettings(evaluator=EvaluatorSettings(spec, options),
                            budget=GrowBudget(positions=12),
                            mcts=MctsSettings(playouts=60, batch_size=batch_size),
                            book_moves=BookMoveRule(min_visits=2), seed=4,
                            parallel_searches=searches)
    return grow(book, settings, progress=False).as_dict()


@pytest.mark.parametrize("kind", ["builtin", "onnx"])
def test_books_are_identical_with_and_without_batches_across_searches(
        tmp_path: Path, specs: dict[str, str], kind: str) -> None:
    """4 searches of 1 leaf each: in batches of 4 (across the searches) or of 1.

    Not torch: its rounding by batch size (see :func:`_rounded`) is enough to
    turn near ties of a fresh network's searches over a whole book; its
    searches agree in the test above."""
    spec = specs[kind]
    crossed = _grow_library(tmp_path / "crossed.sqlite", spec, 4, 4)
    alone = _grow_library(tmp_path / "alone.sqlite", spec, 4, 1)
    assert _book(tmp_path / "crossed.sqlite", kind) == _book(tmp_path / "alone.sqlite", kind)
    assert crossed["expansions"] == alone["expansions"] == 12
    assert crossed["evaluations"] == alone["evaluations"]
    assert alone["mean_batch"] == 1.0
    assert crossed["mean_batch"] > 2.0
    assert crossed["network_batches"] < alone["network_batches"]
    assert 0 <= crossed["outside_evaluator_share"] <= 1


def test_grow_cli_reports_batches_across_searches(tmp_path: Path) -> None:
    summary = _grow(tmp_path / "book.sqlite", "builtin", "--parallel-searches", 4,
                    "--batch-size", 4)
    assert summary["expansions"] == 12 and summary["mean_batch"] > 2.0
    text = run_cli("grow", "-b", tmp_path / "book.sqlite", "--positions", 2,
                   "--parallel-searches", 2, "--batch-size", 2).stdout
    assert "mean evaluator batch" in text and "outside the evaluator" in text


def test_parallel_searches_are_stored_in_the_run_params(tmp_path: Path) -> None:
    book = tmp_path / "book.sqlite"
    _grow(book, "builtin", "--parallel-searches", 3, "--playouts", 20)
    _grow(book, "builtin")
    with sqlite3.connect(book) as db:
        params = [json.loads(row[0]) for row in
                  db.execute("SELECT params FROM runs ORDER BY id")]
    assert params[0]["parallel_searches"] == 3
    assert "parallel_searches" not in params[1]   # 1: stored as before the option


def test_worker_processes_expand_groups_of_positions(tmp_path: Path) -> None:
    """--workers 2 --parallel-searches 3: spawned workers get groups of 3 positions."""
    summary = _grow(tmp_path / "book.sqlite", "builtin", "--workers", 2,
                    "--parallel-searches", 3, "--batch-size", 3)
    assert summary["expansions"] == 12 and summary["status"] == "done"
    assert summary["mean_batch"] > 1.5
    with sqlite3.connect(tmp_path / "book.sqlite") as db:
        expanded = db.execute("SELECT COUNT(DISTINCT position_id) FROM moves").fetchone()[0]
    assert expanded >= 12


def test_a_ray_actor_expands_groups_of_positions(tmp_path: Path) -> None:
    """--cluster local: the actor gets groups of positions, as a local worker does,
    and grows the book a local run grows."""
    args = ("--parallel-searches", 3, "--batch-size", 3)
    local = _grow(tmp_path / "local.sqlite", "builtin", *args)
    actor = _grow(tmp_path / "actor.sqlite", "builtin", "--cluster", "local", "--workers", 1,
                  *args)
    assert actor["expansions"] == local["expansions"] == 12
    assert actor["mean_batch"] == local["mean_batch"] > 1.5
    assert _book(tmp_path / "actor.sqlite", "builtin") == _book(tmp_path / "local.sqlite",
                                                               "builtin")
