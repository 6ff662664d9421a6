"""``bookgen train``: train the dlshogi-shaped network on hcpe records, on the CPU.

Input files are raw ``cshogi.HuffmanCodedPosAndEval`` arrays (dlshogi's
hcpe, as ``bookgen selfplay`` writes them). Each record gives:

- the inputs: ``cshogi.dlshogi`` features of the position
  (:mod:`bookgen.engines.network.features`);
- the policy target: the label of ``bestMove16`` for the side to move
  (``make_move_label``), trained with cross-entropy over all 2187 labels;
- the value target, for the side to move: ``alpha * result + (1 - alpha) *
  sigmoid(eval / 756)``, where ``result`` is 1 for a win, 0 for a loss and
  0.5 for a draw (``gameResult`` is the game's result, the same for both
  sides, so it is turned around for white to move), trained with binary
  cross-entropy on the value logit. dlshogi's trainer adds two
  cross-entropies instead, ``(1 - val_lambda) * BCE(result) + val_lambda *
  BCE(sigmoid(eval / 756))`` with ``val_lambda`` 0.333 by default; as the
  cross-entropy is linear in its target this is the same loss as our blended
  target with ``alpha = 1 - val_lambda``. ``alpha`` is
  :attr:`TrainSettings.result_share_of_value_target`; bookgen's default 0.5
  trusts the search values more than dlshogi's 0.667, because self-play
  games from few playouts have noisy results.

The loss is the sum of the two. A record that does not hold a valid
position, whose best move is not legal there, or whose ``gameResult`` is not
0, 1 or 2 is an error (file and record named) before anything is trained.
A share ``validation_share`` of the records (chosen with ``seed``) is held out;
loss and accuracy (policy: the best move is the top label; value: the sign
of the prediction agrees with a decisive result) are reported on it after
every epoch, on the training records before and after training (a
sample of at most ``TRAIN_METRICS_SAMPLE`` of them), and on ``eval_on``
files before and after. The model is saved in :mod:`bookgen.engines.network.model`'s
format, loadable as ``torch:PATH``. Ctrl-C stops after the current batch
and saves the model as trained so far.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import cshogi
import numpy as np
import torch
from cshogi import dlshogi
from torch import nn
from torch.nn import functional as F

from bookgen.engines.network.features import FEATURES1_NUM, FEATURES2_NUM
from bookgen.engines.network.model import (
    DEFAULT_BLOCKS,
    DEFAULT_CHANNELS,
    PolicyValueNetwork,
    load_model,
    parameter_count,
    save_model,
)
from bookgen.errors import BookgenError, SettingsError
from bookgen.files import check_writable
from bookgen.formats.hcp import read_hcpe
from bookgen.progress import progress_bar
from bookgen.signals import stop_on_interrupt
from bookgen.values import EVAL_COEF

__all__ = ["Dataset", "Metrics", "TrainSettings", "TrainSummary", "evaluate", "load_hcpe",
           "train"]

HCPE = cshogi.HuffmanCodedPosAndEval
TRAIN_METRICS_SAMPLE = 20_000
OPTIMIZERS = ("sgd", "adam")


@dataclass
class Dataset:
    """Decoded training records: positions and targets, one row per record."""

    hcp: np.ndarray        # (n, 32) uint8
    labels: np.ndarray     # (n,) int64 policy labels
    results: np.ndarray    # (n,) float32 game result for the side to move: 1, 0.5, 0
    values: np.ndarray     # (n,) float32 sigmoid(eval / coef)

    def __len__(self) -> int:
        return len(self.labels)

    def targets(self, alpha: float) -> np.ndarray:
        return (alpha * self.results + (1.0 - alpha) * self.values).astype(np.float32)


def load_hcpe(paths: Sequence[str | Path], coef: float = EVAL_COEF) -> Dataset:
    """Read and decode hcpe files; a bad record (position, best move or result)
    is an error naming the file and the record (:func:`bookgen.formats.hcp.read_hcpe`)."""
    if not paths:
        raise BookgenError("no training data files")
    files = [read_hcpe(path) for path in paths]
    raw = np.concatenate([records for records, _moves in files])
    moves = np.concatenate([moves for _records, moves in files]).tolist()
    hcp = raw["hcp"]
    turns = (hcp[:, 0] & 1).tolist()          # the hcp's first bit: 1 for white to move
    make_label = dlshogi.make_move_label
    labels = np.array([make_label(move, turn) for move, turn in zip(moves, turns)],
                      dtype=np.int64)
    game_results = raw["gameResult"].astype(np.int64)
    # The result for the side to move: 1 won, 0 lost, 0.5 draw.
    winner = np.where(game_results == cshogi.BLACK_WIN, cshogi.BLACK, cshogi.WHITE)
    results = np.where(game_results == cshogi.DRAW, 0.5,
                       (winner == np.array(turns, dtype=np.int64)).astype(np.float64))
    values = 1.0 / (1.0 + np.exp(-raw["eval"].astype(np.float64) / coef))
    return Dataset(np.ascontiguousarray(hcp), labels, results.astype(np.float32),
                   values.astype(np.float32))


class _Features:
    """Reusable input buffers for batches of hcp records."""

    def __init__(self, batch_size: int) -> None:
        self.board = cshogi.Board()
        self.x1 = np.zeros((batch_size, FEATURES1_NUM, 9, 9), dtype=np.float32)
        self.x2 = np.zeros((batch_size, FEATURES2_NUM, 9, 9), dtype=np.float32)

    def __call__(self, hcp: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
        n = len(hcp)
        x1, x2 = self.x1[:n], self.x2[:n]
        x1.fill(0.0)
        x2.fill(0.0)
        for i in range(n):
            self.board.set_hcp(hcp[i])
            dlshogi.make_input_features(self.board, x1[i], x2[i])
        # Copies: the buffers are refilled for the next batch.
        return torch.from_numpy(x1.copy()), torch.from_numpy(x2.copy())


@dataclass
class Metrics:
    samples: int
    loss: float
    policy_loss: float
    value_loss: float
    policy_accuracy: float
    value_accuracy: float   # on decisive results only; nan without any

    def line(self) -> str:
        return (f"loss {self.loss:.4f} (policy {self.policy_loss:.4f}, value "
                f"{self.value_loss:.4f}), accuracy policy {self.policy_accuracy:.3f} value "
                f"{self.value_accuracy:.3f} on {self.samples} records")


def _losses(model: nn.Module, x1: torch.Tensor, x2: torch.Tensor, labels: torch.Tensor,
            targets: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor,
                                            torch.Tensor]:
    policy, value = model(x1, x2)
    value = value.squeeze(1)
    policy_loss = F.cross_entropy(policy, labels)
    value_loss = F.binary_cross_entropy_with_logits(value, targets)
    return policy_loss, value_loss, policy, value


def evaluate(model: nn.Module, data: Dataset, indices: np.ndarray | None = None,
             batch_size: int = 256, alpha: float = 0.5) -> Metrics:
    """Losses and accuracies of ``model`` (in eval mode) on ``data`` (or its ``indices``)."""
    if indices is None:
        indices = np.arange(len(data))
    if len(indices) == 0:
        nan = float("nan")
        return Metrics(0, nan, nan, nan, nan, nan)
    targets_all = data.targets(alpha)
    features = _Features(batch_size)
    was_training = model.training
    model.eval()
    sums = np.zeros(2)
    policy_hits = value_hits = decisive = 0
    try:
        with torch.no_grad():
            for start in range(0, len(indices), batch_size):
                rows = indices[start:start + batch_size]
                x1, x2 = features(data.hcp[rows])
                labels = torch.from_numpy(data.labels[rows])
                targets = torch.from_numpy(targets_all[rows])
                policy_loss, value_loss, policy, value = _losses(model, x1, x2, labels, targets)
                sums += np.array([policy_loss.item(), value_loss.item()]) * len(rows)
                policy_hits += int((policy.argmax(1) == labels).sum())
                results = data.results[rows]
                mask = results != 0.5
                decisive += int(mask.sum())
                predicted_win = (value.numpy() > 0.0)
                value_hits += int((predicted_win[mask] == (results[mask] == 1.0)).sum())
    finally:
        model.train(was_training)
    n = len(indices)
    policy_loss, value_loss = sums / n
    return Metrics(n, float(policy_loss + value_loss), float(policy_loss), float(value_loss),
                   policy_hits / n, value_hits / decisive if decisive else float("nan"))


@dataclass
class EpochReport:
    epoch: int
    train_loss: float       # mean over the epoch's batches, in training mode
    validation: Metrics | None
    seconds: float


@dataclass
class TrainSummary:
    output: str
    blocks: int
    channels: int
    parameters: int
    train_records: int
    validation_records: int
    epochs: list[EpochReport] = field(default_factory=list)
    initial_train: Metrics | None = None
    final_train: Metrics | None = None
    eval_on_before: Metrics | None = None
    eval_on_after: Metrics | None = None
    samples_trained: int = 0
    train_seconds: float = 0.0
    seconds: float = 0.0
    interrupted: bool = False

    @property
    def samples_per_second(self) -> float:
        return self.samples_trained / self.train_seconds if self.train_seconds else 0.0

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["samples_per_second"] = round(self.samples_per_second, 1)
        return data


@dataclass(frozen=True)
class TrainSettings:
    """How :func:`train` trains (see the module docstring and ``bookgen train --help``).

    ``init`` starts from a saved model, whose architecture wins (``blocks`` and
    ``channels``, when given, must match it); otherwise a fresh network of
    ``blocks`` x ``channels`` (default 5 x 64) initialised from ``seed``.
    ``optimizer`` is ``sgd`` (momentum 0.9, Nesterov, as dlshogi) or ``adam``.
    ``result_share_of_value_target`` is alpha in the value target ``alpha *
    result + (1 - alpha) * sigmoid(eval / 756)``; ``validation_share`` of the
    records is held out; ``eval_on`` files are measured before and after.
    ``threads``: torch's threads (None: all cores). ``replace_output``: an
    existing output file may be replaced (the ``init`` model always may).
    """

    init: Path | None = None
    blocks: int | None = None
    channels: int | None = None
    epochs: int = 1
    batch_size: int = 256
    learning_rate: float = 0.01
    optimizer: str = "sgd"
    weight_decay: float = 1e-4
    result_share_of_value_target: float = 0.5
    validation_share: float = 0.1
    eval_on: tuple[Path, ...] = ()
    threads: int | None = None
    seed: int = 0
    replace_output: bool = False

    def __post_init__(self) -> None:
        if self.init is not None:
            object.__setattr__(self, "init", Path(self.init))
        object.__setattr__(self, "eval_on", tuple(Path(p) for p in self.eval_on))
        for name in ("epochs", "batch_size", "blocks", "channels", "threads"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise SettingsError(name, "must be at least 1")
        if not self.learning_rate > 0:
            raise SettingsError("learning_rate", "must be positive")
        if not self.weight_decay >= 0:
            raise SettingsError("weight_decay", "must be at least 0")
        if not 0.0 <= self.result_share_of_value_target <= 1.0:
            raise SettingsError("result_share_of_value_target", "must be between 0 and 1")
        if not 0.0 <= self.validation_share < 1.0:
            raise SettingsError("validation_share", "must be at least 0 and below 1")
        if self.optimizer not in OPTIMIZERS:
            raise BookgenError(f"unknown optimizer {self.optimizer!r} "
                               f"(use {' or '.join(OPTIMIZERS)})")


def _check_output(output: Path, init: Path | None, force: bool) -> None:
    check_writable(output)  # a read-only directory is said before training, not after
    same_as_init = init is not None and output.exists() and init.exists() and \
        output.resolve() == init.resolve()
    if output.exists() and not (force or same_as_init):
        raise SettingsError("replace_output", f"{output}: already exists (use "
                                              f"{SettingsError.FIELD} to replace it)")


def train(data: Sequence[str | Path], output: str | Path, settings: TrainSettings | None = None,
          *, progress: bool = True, log: Callable[[str], None] | None = None) -> TrainSummary:
    """Train a network on hcpe ``data`` and save it to ``output``; see the module
    docstring and :class:`TrainSettings` (None: the defaults). ``log`` receives one
    line per epoch."""
    start_time = time.perf_counter()
    settings = settings if settings is not None else TrainSettings()
    epochs, batch_size, seed = settings.epochs, settings.batch_size, settings.seed
    alpha, val_split = settings.result_share_of_value_target, settings.validation_share
    lr, weight_decay = settings.learning_rate, settings.weight_decay
    blocks, channels = settings.blocks, settings.channels
    output = Path(output)
    init_path = settings.init
    _check_output(output, init_path, settings.replace_output)
    if settings.threads is not None:
        torch.set_num_threads(settings.threads)

    dataset = load_hcpe(data)
    if len(dataset) == 0:
        raise BookgenError(f"no records in {', '.join(map(str, data))}")
    eval_set = load_hcpe(settings.eval_on) if settings.eval_on else None

    if init_path is not None:
        model = load_model(init_path)
        for name, given, actual in (("blocks", blocks, model.blocks_count),
                                    ("channels", channels, model.channels)):
            if given is not None and given != actual:
                raise SettingsError(name, f"{given} does not match {init_path} ({actual})")
    else:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            model = PolicyValueNetwork(blocks or DEFAULT_BLOCKS, channels or DEFAULT_CHANNELS)

    rng = np.random.default_rng(seed)
    order = rng.permutation(len(dataset))
    validation_count = int(round(len(dataset) * val_split))
    if validation_count >= len(dataset):
        validation_count = len(dataset) - 1
    validation_rows = np.sort(order[:validation_count])
    train_rows = order[validation_count:]
    sample_rows = (np.sort(rng.choice(train_rows, TRAIN_METRICS_SAMPLE, replace=False))
                   if len(train_rows) > TRAIN_METRICS_SAMPLE else np.sort(train_rows))

    summary = TrainSummary(str(output), model.blocks_count, model.channels,
                           parameter_count(model), len(train_rows), validation_count)
    say = log or (lambda _line: None)
    summary.initial_train = evaluate(model, dataset, sample_rows, batch_size, alpha)
    say(f"before training: train {summary.initial_train.line()}")
    if eval_set is not None:
        summary.eval_on_before = evaluate(model, eval_set, None, batch_size, alpha)
        say(f"before training: eval-on {summary.eval_on_before.line()}")

    if settings.optimizer == "sgd":
        opt: torch.optim.Optimizer = torch.optim.SGD(
            model.parameters(), lr=lr, momentum=0.9, nesterov=True, weight_decay=weight_decay)
    else:
        opt = torch.optim.Adam(model.parameters(), lr=lr, weight_decay=weight_decay)
    targets_all = dataset.targets(alpha)
    features = _Features(batch_size)
    batches_per_epoch = math.ceil(len(train_rows) / batch_size)
    model.train()
    with stop_on_interrupt() as stop, progress_bar(
            total=epochs * batches_per_epoch, unit="batch", desc="training",
            disable=None if progress else True) as bar:
        for epoch in range(1, epochs + 1):
            epoch_start = time.perf_counter()
            shuffled = train_rows[rng.permutation(len(train_rows))]
            loss_sum = 0.0
            seen = 0
            for begin in range(0, len(shuffled), batch_size):
                rows = shuffled[begin:begin + batch_size]
                x1, x2 = features(dataset.hcp[rows])
                labels = torch.from_numpy(dataset.labels[rows])
                targets = torch.from_numpy(targets_all[rows])
                policy_loss, value_loss, _p, _v = _losses(model, x1, x2, labels, targets)
                loss = policy_loss + value_loss
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
                loss_sum += loss.item() * len(rows)
                seen += len(rows)
                bar.update(1)
                bar.set_postfix(epoch=epoch, loss=f"{loss_sum / seen:.3f}", refresh=False)
                if stop.is_set():
                    break
            elapsed = time.perf_counter() - epoch_start
            summary.samples_trained += seen
            summary.train_seconds += elapsed
            validation = (evaluate(model, dataset, validation_rows, batch_size, alpha)
                          if validation_count else None)
            report = EpochReport(epoch, loss_sum / seen if seen else float("nan"), validation,
                                 elapsed)
            summary.epochs.append(report)
            say(f"epoch {epoch}: train loss {report.train_loss:.4f} ({seen} records, "
                f"{seen / elapsed if elapsed else 0:.0f}/s)"
                + (f"; validation {validation.line()}" if validation else ""))
            if stop.is_set():
                summary.interrupted = True
                break

    summary.final_train = evaluate(model, dataset, sample_rows, batch_size, alpha)
    say(f"after training: train {summary.final_train.line()}")
    if eval_set is not None:
        summary.eval_on_after = evaluate(model, eval_set, None, batch_size, alpha)
        say(f"after training: eval-on {summary.eval_on_after.line()}")
    save_model(model.eval(), output)
    summary.seconds = time.perf_counter() - start_time
    return summary
