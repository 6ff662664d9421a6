"""docs/experiments.md, experiment 2: value loss and accuracy on held-out mistake positions.

Reads the three arms under ``DIR`` (``DIR/mistakes``, ``DIR/initial``, ``DIR/book``)
and the extra mistakes of ``DIR/heldout/mistakes.json`` (``bookgen refine mistakes
--json`` on a further grown copy of generation 0's book), builds the sets

- ``gen0_all``: generation 0's mistakes (the cycle's own "held-out" set; the
  mistakes arm started games from half of them),
- ``held_out_strict``: generation 0's mistakes the mistakes arm did not start
  from, plus the extra mistakes, minus every start position of every arm and
  generation,

and evaluates on each, position by position, generation 0's network (``init``)
and every arm's trained ``model.pt``: value loss (BCE against the cycle's target,
0.5 x result + 0.5 x sigmoid(eval / 756), result from the sign of the refine
engine's score) and value accuracy (sign of the value head against that result).
And the Spearman correlation of the value head's output with the refine engine's
score over the set (``rank_correlation``; 2,000 resamples for its interval).
Means with 95 % percentile intervals from 10,000 bootstrap resamples of the
positions; differences are paired (the same resampled positions).

    python data/experiments/heldout_eval.py DIR OUT.json
"""

import json
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import cshogi
import numpy as np
import torch
from torch.nn import functional as F

from bookgen.cli.cycle import _mistake_records
from bookgen.engines.network.model import load_model
from bookgen.selfplay.train import _Features, load_hcpe

ALPHA = 0.5          # [train] result_share_of_value_target of the configs
RESAMPLES = 10_000
ARMS = ("mistakes", "initial", "book")


def key(sfen: str) -> str:
    return " ".join(sfen.split()[:3])


def sfen_of(line: str) -> str:
    board = cshogi.Board()
    parts = line.split()
    moves: list[str] = []
    if parts[0] == "startpos":
        moves = parts[2:]
    else:
        end = parts.index("moves") if "moves" in parts else len(parts)
        board.set_sfen(" ".join(parts[1:end]))
        moves = parts[end + 1:]
    for move in moves:
        board.push_usi(move)
    return key(board.sfen())


def starts_of(path: Path) -> set[str]:
    return {sfen_of(line) for line in path.read_text().splitlines() if line}


def dataset(mistakes: list[dict[str, Any]], scratch: Path) -> Any:
    records = [SimpleNamespace(sfen=m["sfen"], engine_move=m["engine_move"],
                               engine_value=m["engine_value"]) for m in mistakes]
    scratch.write_bytes(_mistake_records(records))
    return load_hcpe([scratch])


def ranks(values: np.ndarray) -> np.ndarray:
    order = np.argsort(values, kind="stable")
    result = np.empty(len(values))
    result[order] = np.arange(len(values))
    return result


def spearman(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.corrcoef(ranks(a), ranks(b))[0, 1])


def per_position(model: Any, data: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    x1, x2 = _Features(len(data))(data.hcp)
    with torch.no_grad():
        _policy, value = model.eval()(x1, x2)
    value = value.squeeze(1)
    targets = torch.from_numpy(data.targets(ALPHA))
    loss = F.binary_cross_entropy_with_logits(value, targets, reduction="none").numpy()
    hit = ((value.numpy() > 0) == (data.results == 1.0)).astype(float)
    return loss, np.where(data.results != 0.5, hit, np.nan), value.numpy()


def main(directory: str, output: str) -> None:
    root = Path(directory)
    gen0 = json.loads((root / "mistakes/gen-000/mistakes.json").read_text())
    started = starts_of(root / "mistakes/gen-000/starts.txt")
    every_start: set[str] = set()
    for path in root.glob("*/gen-*/starts.txt"):
        every_start |= starts_of(path)
    gen0_keys = {key(m["sfen"]) for m in gen0}
    extra = json.loads((root / "heldout/mistakes.json").read_text())["mistakes"]
    candidates = ([m for m in gen0 if key(m["sfen"]) not in started]
                  + [m for m in extra if key(m["sfen"]) not in gen0_keys])
    sets = {"gen0_all": gen0,
            "held_out_strict": [m for m in candidates if key(m["sfen"]) not in every_start]}
    models = {"init": root / "mistakes/gen-000/input.pt"}
    for gen in range(10):
        for arm in ARMS:
            path = root / arm / f"gen-{gen:03d}/model.pt"
            if path.exists():
                models[arm if gen == 0 else f"{arm}-gen{gen}"] = path
    rng = np.random.default_rng(0)
    report: dict[str, Any] = {}
    for name, mistakes in sets.items():
        data = dataset(mistakes, root / "heldout/_eval.hcpe")
        n = len(data)
        if n != len(mistakes):  # _mistake_records drops mistakes without a legal engine move
            raise SystemExit(f"{name}: {len(mistakes) - n} mistakes without an engine move")
        rows = rng.integers(0, n, size=(RESAMPLES, n))

        def interval(values: np.ndarray, rows: np.ndarray = rows) -> list[float]:
            means = np.nanmean(values[rows], axis=1)
            return [round(float(np.nanmean(values)), 4),
                    round(float(np.percentile(means, 2.5)), 4),
                    round(float(np.percentile(means, 97.5)), 4)]

        targets = data.targets(ALPHA)
        constant = F.binary_cross_entropy(torch.full((n,), float(targets.mean())),
                                          torch.from_numpy(targets), reduction="none").numpy()
        found = {label: per_position(load_model(path), data) for label, path in models.items()}
        entry: dict[str, Any] = {
            "positions": n, "side_to_move_wins_share": round(float(data.results.mean()), 4),
            "constant_predictor_loss": interval(constant), "loss": {}, "accuracy": {},
            "loss_change": {}, "accuracy_change": {}, "mistakes_minus_other_loss": {},
            "mistakes_minus_other_accuracy": {}, "rank_correlation": {}}
        scores = np.array([m["engine_value"] for m in mistakes], dtype=float)
        for label, (loss, hits, values) in found.items():
            boot = [spearman(values[r], scores[r]) for r in rows[:2000]]
            entry["rank_correlation"][label] = [
                round(spearman(values, scores), 4), round(float(np.percentile(boot, 2.5)), 4),
                round(float(np.percentile(boot, 97.5)), 4)]
            entry["loss"][label] = interval(loss)
            entry["accuracy"][label] = interval(hits)
            if label != "init":
                entry["loss_change"][label] = interval(loss - found["init"][0])
                entry["accuracy_change"][label] = interval(hits - found["init"][1])
        for label in found:
            arm, _, gen = label.partition("-")
            mine = "mistakes" + (f"-{gen}" if gen else "")
            if arm in ("initial", "book") and mine in found:
                entry["mistakes_minus_other_loss"][label] = interval(
                    found[mine][0] - found[label][0])
                entry["mistakes_minus_other_accuracy"][label] = interval(
                    found[mine][1] - found[label][1])
        report[name] = entry
    Path(output).write_text(json.dumps(report, indent=1) + "\n")
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main(*sys.argv[1:])
