"""Positions per second of a network by batch size (``bookgen model bench``).

:func:`bench_model` opens the model's evaluator (``torch:`` for model files,
``onnx:`` for ONNX files) on the device its
:class:`~bookgen.engines.network.device.NetworkSettings` choose, and times,
for each batch size, on random legal positions:

- ``network``: the forward pass alone on features computed beforehand
  (what the device does);
- ``evaluate``: ``Evaluator.evaluate`` end to end (features, legal-move
  labels, softmax over the legal moves, the evaluations): what a search gets.

Each figure is the best of ``repeats`` runs of ``seconds`` each, after a
warm-up (which also lets CUDA, cuDNN and TensorRT pick their kernels). The
report names the device, so that figures from different machines are never
mixed up.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import cshogi

from bookgen.engines.network.device import NetworkSettings
from bookgen.errors import SettingsError, at_least

__all__ = ["BenchSettings", "BenchSummary", "bench_model", "random_boards"]


@dataclass(frozen=True)
class BenchSettings:
    """``batches``: batch sizes to time; ``seconds`` per timed run, ``repeats``
    runs per figure (the best counts); ``threads``: CPU threads (None: the
    evaluators' default); ``network``: where it runs; ``seed`` of the positions."""

    batches: tuple[int, ...] = (1, 16, 64, 256)
    seconds: float = 2.0
    repeats: int = 3
    threads: int | None = None
    network: NetworkSettings = field(default_factory=NetworkSettings)
    seed: int = 1

    def __post_init__(self) -> None:
        if not self.batches:
            raise SettingsError("batches", "must name at least one batch size")
        for size in self.batches:
            at_least("batches", size, 1)
        if not self.seconds > 0:
            raise SettingsError("seconds", "must be positive")
        at_least("repeats", self.repeats, 1)
        if self.threads is not None:
            at_least("threads", self.threads, 1)


@dataclass
class BenchRow:
    batch: int
    network_per_second: float
    evaluate_per_second: float


@dataclass
class BenchSummary:
    """The figures of one model on one device."""

    model: str
    runtime: str
    device: str
    rows: list[BenchRow]

    def as_dict(self) -> dict[str, Any]:
        return {"model": self.model, "runtime": self.runtime, "device": self.device,
                "rows": [asdict(row) for row in self.rows]}


def random_boards(count: int, seed: int = 1) -> list[cshogi.Board]:
    """Positions from random games of 0-100 plies that still have legal moves."""
    rng = random.Random(seed)
    boards: list[cshogi.Board] = []
    while len(boards) < count:
        board = cshogi.Board()
        for _ in range(rng.randint(0, 100)):
            moves = list(board.legal_moves)
            if not moves:
                break
            board.push(rng.choice(moves))
        if list(board.legal_moves):
            boards.append(board)
    return boards


def _rate(step: Callable[[], object], per_call: int, seconds: float, repeats: int) -> float:
    """Best positions/s over ``repeats`` timed runs of ``step`` (after 3 warm-up calls)."""
    for _ in range(3):
        step()
    best = 0.0
    for _ in range(repeats):
        calls, start = 0, time.perf_counter()
        while (elapsed := time.perf_counter() - start) < seconds:
            step()
            calls += 1
        best = max(best, calls * per_call / elapsed)
    return best


def bench_model(path: str | Path, settings: BenchSettings,
                report: Callable[[str, BenchRow], None] | None = None) -> BenchSummary:
    """Time the network in ``path`` at each batch size of ``settings``; ``report``
    gets the device's name and each row as it is measured."""
    from bookgen.engines.factory import make_evaluator
    from bookgen.engines.network.analyser import NetworkEvaluator
    from bookgen.engines.network.features import features

    path = Path(path)
    runtime = "onnx" if path.suffix.lower() == ".onnx" else "torch"
    options: dict[str, Any] = dict(settings.network.options())
    if settings.threads is not None:
        options["threads"] = settings.threads
    boards = random_boards(max(settings.batches), settings.seed)
    rows: list[BenchRow] = []
    device = ""
    for batch in settings.batches:
        # One evaluator per batch size, set up as a run with that batch size is
        # (on the CPU: one thread at batch 1, every core above).
        evaluator = make_evaluator(f"{runtime}:{path}", batch_size=batch, **options)
        try:
            assert isinstance(evaluator, NetworkEvaluator)
            device = evaluator.device_name
            chunk = boards[:batch]
            f1, f2 = features(chunk, evaluator.input2)
            network = _rate(partial(evaluator._run, f1, f2), batch, settings.seconds,
                            settings.repeats)
            full = _rate(partial(evaluator.evaluate, chunk), batch, settings.seconds,
                         settings.repeats)
        finally:
            evaluator.close()
        rows.append(BenchRow(batch, network, full))
        if report is not None:
            report(device, rows[-1])
    return BenchSummary(str(path), runtime, device, rows)
