"""Positions per second of network models (torch and ONNX) by batch size, on a device.

Writes random models of the sizes asked for in a temporary directory and times
them with :func:`bookgen.engines.network.bench.bench_model` (what ``bookgen
model bench`` runs): for each model, size, runtime and batch size,

- ``network``: the forward pass alone on features computed beforehand;
- ``evaluate``: ``Evaluator.evaluate`` end to end (features, legal-move
  labels, softmax over legal moves, Evaluation objects).

Each figure is the best of ``--repeats`` runs of ``--seconds`` each. The
models are

- ``dlshogi`` (default): dlshogi's own ``resnet`` architecture in a dlshogi
  ``.npz`` model file, read as ``torch:`` and exported to ONNX as dlshogi's
  ``convert_model_to_onnx.py`` does (dlshogi's published models are 10 x 192
  and larger);
- ``bookgen``: ``bookgen model init``'s network and its ONNX export.

The device's name heads each table, so that figures from different machines
never mix. Unchanged on a GPU machine with ``--device cuda`` (add ``--fp16``,
``--providers tensorrt,cuda``, ``--trt-cache DIR`` as for grow).

    python benchmarks/bench_network.py [--sizes 5x64,10x192] [--kind dlshogi]
        [--runtimes torch,onnx] [--batches 1,16,64,256] [--device auto]
        [--fp16] [--threads N] [--seconds 2] [--repeats 3]
"""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path

import numpy as np
import torch

from bookgen.engines.network.bench import BenchRow, BenchSettings, bench_model
from bookgen.engines.network.device import NetworkSettings, parse_providers
from bookgen.engines.network.dlshogi_models import (
    DlshogiArchitecture,
    build_network,
    state_to_npz,
)
from bookgen.engines.network.model import export_onnx, init_model, parameter_count


def write_models(directory: Path, kind: str, blocks: int, channels: int,
                 runtimes: list[str]) -> tuple[dict[str, Path], int]:
    """The model files to time, by runtime, and the network's parameter count."""
    torch.manual_seed(0)
    if kind == "dlshogi":
        model = build_network(DlshogiArchitecture("resnet", blocks, channels, 256, 57))
        source = directory / f"resnet{blocks}x{channels}.npz"
        np.savez(source, **state_to_npz(model.state_dict()))
    else:
        source = directory / f"bookgen{blocks}x{channels}.pt"
        init_model(source, blocks=blocks, channels=channels)
        from bookgen.engines.network.model import load_model

        model = load_model(source)
    files = {"torch": source}
    if "onnx" in runtimes:
        files["onnx"] = source.with_suffix(".onnx")
        export_onnx(source, files["onnx"])
    return {runtime: files[runtime] for runtime in runtimes}, parameter_count(model)


class Table:
    """Prints the rows of one model's timing under a title naming the device."""

    def __init__(self, title: str) -> None:
        self.title = title
        self.started = False

    def __call__(self, device: str, row: BenchRow) -> None:
        if not self.started:
            print(f"\n{self.title} on {device}")
            print(f"{'batch':>6}{'network pos/s':>16}{'evaluate pos/s':>17}")
            self.started = True
        print(f"{row.batch:>6}{row.network_per_second:>16,.0f}"
              f"{row.evaluate_per_second:>17,.0f}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="5x64,10x192",
                        help="BLOCKSxCHANNELS, comma-separated (default 5x64,10x192)")
    parser.add_argument("--kind", choices=["dlshogi", "bookgen"], default="dlshogi")
    parser.add_argument("--runtimes", default="torch,onnx")
    parser.add_argument("--batches", default="1,16,64,256",
                        help="comma-separated batch sizes (default 1,16,64,256)")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--fp16", action="store_true")
    parser.add_argument("--providers", default=None)
    parser.add_argument("--trt-cache", default=None)
    parser.add_argument("--threads", type=int, default=None,
                        help="CPU threads (default: 1 at batch 1, else every CPU)")
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    runtimes = args.runtimes.split(",")
    network = NetworkSettings(device=args.device, fp16=args.fp16,
                              providers=parse_providers(args.providers),
                              trt_cache=args.trt_cache)
    settings = BenchSettings(batches=tuple(int(b) for b in args.batches.split(",")),
                             seconds=args.seconds, repeats=args.repeats, threads=args.threads,
                             network=network)
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs; "
          f"{'fp16' if args.fp16 else 'fp32'}")
    with tempfile.TemporaryDirectory() as directory:
        for size in args.sizes.split(","):
            blocks, channels = (int(part) for part in size.split("x"))
            files, parameters = write_models(Path(directory), args.kind, blocks, channels,
                                             runtimes)
            for runtime, path in files.items():
                title = f"{args.kind} {blocks}x{channels} ({parameters:,} parameters), {runtime}"
                bench_model(path, settings, Table(title))

if __name__ == "__main__":
    main()
