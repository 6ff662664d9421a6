"""``bookgen model``: create, inspect and export dlshogi-shaped networks.

Each command is a thin layer over :mod:`bookgen.engines.network.model`
(``init_model``, ``model_info``, ``export_onnx``); torch is imported only when a
command runs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from bookgen.cli.options import json_option, network_options, output_option, seed_option
from bookgen.cli.support import echo_json, reports_errors
from bookgen.extras import require_extra

if TYPE_CHECKING:
    from bookgen.engines.network.device import NetworkSettings

DLSHOGI_NETWORK_HELP = ("dlshogi's network name of a dlshogi .npz/.pth MODEL (e.g. "
                        "resnet10_swish, resnet15x224_swish), for its activation [default: "
                        "ReLU, or swish for resnet10_swish's layout].")


def format_info(info: dict[str, Any]) -> str:
    """Human-readable lines for :func:`bookgen.engines.network.model.model_info`."""
    def known(value: object) -> str:
        if value is None:
            return "unknown"
        return f"{value:,}" if isinstance(value, int) else str(value)

    rows = [("file", f"{info['file']} ({info['kind']})")]
    if info.get("network"):
        rows.append(("dlshogi", f"{info['network']} ({info['activation']})"))
    rows += [("blocks", known(info.get("blocks"))),
            ("channels", known(info.get("channels"))),
            ("parameters", known(info.get("parameters")))]
    rows += [(name, " x ".join(map(str, shape)))
             for name, shape in {**info["inputs"], **info["outputs"]}.items()]
    if info["kind"] == "onnx":
        rows.append(("opset", known(info.get("opset"))))
    lines = [f"{name + ':':<15}{value}" for name, value in rows]
    return "\n".join(lines)


@click.group("model", context_settings={"help_option_names": ["-h", "--help"]})
def model_group() -> None:
    """Create, inspect and export dlshogi-shaped policy-value networks.

    Models take cshogi's dlshogi features (62 + 57 planes) and output 2187
    policy logits and a value; evaluators use them as torch:MODEL.pt or
    onnx:MODEL.onnx.
    """


@model_group.command("init")
@output_option("The model file to write (.pt).")
@click.option("--blocks", type=click.IntRange(1, 64), default=5, show_default=True,
              help="Residual blocks.")
@click.option("--channels", type=click.IntRange(1, 1024), default=64, show_default=True,
              help="Channels of every convolution.")
@seed_option("Random seed of the initial weights.")
@click.option("--force", is_flag=True, help="Replace OUTPUT if it exists.")
@json_option("Print the model's info as JSON.")
@reports_errors
def init_command(output: str, blocks: int, channels: int, seed: int, force: bool,
                 as_json: bool) -> None:
    """Write a randomly initialised network (weights and architecture) to OUTPUT."""
    require_extra("torch", "nn", "model init")
    from bookgen.engines.network.model import init_model

    info = init_model(output, blocks=blocks, channels=channels, seed=seed, force=force)
    if as_json:
        echo_json(info)
    else:
        click.echo(f"{output}: {blocks} blocks x {channels} channels, "
                   f"{info['parameters']:,} parameters (seed {seed})")


@model_group.command("export-onnx")
@click.argument("model", type=click.Path(dir_okay=False))
@output_option("The ONNX file to write.")
@click.option("--dlshogi-network", metavar="NAME", help=DLSHOGI_NETWORK_HELP)
@click.option("--fp16", is_flag=True, help="Half-precision weights, inputs and outputs.")
@json_option("Print the ONNX model's info as JSON.")
@reports_errors
def export_onnx_command(model: str, output: str, dlshogi_network: str | None, fp16: bool,
                        as_json: bool) -> None:
    """Export MODEL (bookgen's .pt, dlshogi's .npz or .pth) to ONNX in dlshogi's layout.

    Inputs input1 (N x 62 x 9 x 9) and input2 (N x 57 x 9 x 9, or 119 with
    dlshogi's entering-king features); outputs output_policy (N x 2187
    logits) and output_value (N x 1, win probability of the side to move,
    sigmoid applied); N is dynamic.
    """
    require_extra("torch", "nn", "model export-onnx")
    from bookgen.engines.network.model import export_onnx
    from bookgen.engines.network.naming import parse_network_name

    if dlshogi_network is not None:
        parse_network_name(dlshogi_network)
    info = export_onnx(model, output, network=dlshogi_network, fp16=fp16)
    if as_json:
        echo_json(info)
    else:
        click.echo(f"{output}: ONNX opset {info['opset']}, {info['blocks']} blocks x "
                   f"{info['channels']} channels, inputs {', '.join(info['inputs'])}, "
                   f"outputs {', '.join(info['outputs'])}")


@model_group.command("info")
@click.argument("model", type=click.Path(dir_okay=False))
@click.option("--dlshogi-network", metavar="NAME", help=DLSHOGI_NETWORK_HELP)
@json_option("Print one JSON object.")
@reports_errors
def info_command(model: str, dlshogi_network: str | None, as_json: bool) -> None:
    """Blocks, channels, parameter count and tensors of MODEL (bookgen's .pt,
    dlshogi's .npz or .pth, or .onnx)."""
    require_extra("torch", "nn", "model info")
    from bookgen.engines.network.model import model_info
    from bookgen.engines.network.naming import parse_network_name

    if dlshogi_network is not None:
        parse_network_name(dlshogi_network)
    info = model_info(model, dlshogi_network)
    if as_json:
        echo_json(info)
    else:
        click.echo(format_info(info))


def _batches(text: str) -> tuple[int, ...]:
    try:
        sizes = tuple(int(part) for part in text.split(","))
    except ValueError:
        raise click.BadParameter(f"{text!r} is not a comma-separated list of batch sizes",
                                 param_hint="--batches") from None
    return sizes


@model_group.command("bench")
@click.argument("model", type=click.Path(dir_okay=False))
@click.option("--batches", default="1,16,64,256", show_default=True,
              help="Batch sizes to time, comma-separated.")
@click.option("--seconds", type=click.FloatRange(0, min_open=True), default=2.0,
              show_default=True, help="Length of each timed run.")
@click.option("--repeats", type=click.IntRange(1), default=3, show_default=True,
              help="Timed runs per batch size (the best counts).")
@click.option("--threads", type=click.IntRange(1),
              help="CPU threads [default: 1 at batch 1, else every CPU].")
@json_option("Print one JSON object.")
@reports_errors
@network_options
def bench_command(model: str, batches: str, seconds: float, repeats: int,
                  threads: int | None, as_json: bool, network: NetworkSettings) -> None:
    """Positions per second of MODEL (.pt, .npz, .pth: torch; .onnx: onnxruntime)
    by batch size, on the device --device chooses (its name is printed).

    'network' is the forward pass alone, 'evaluate' the evaluator end to end
    (features, legal moves, priors) as a search sees it. Use it to choose
    --batch-size for grow and selfplay on your machine.
    """
    from bookgen.engines.network.bench import BenchRow, BenchSettings, bench_model

    settings = BenchSettings(batches=_batches(batches), seconds=seconds, repeats=repeats,
                             threads=threads, network=network)
    shown: list[bool] = []

    def report(device: str, row: BenchRow) -> None:
        if as_json:
            return
        if not shown:
            click.echo(f"model: {model}\ndevice: {device}")
            click.echo(f"{'batch':>6}{'network pos/s':>16}{'evaluate pos/s':>17}")
            shown.append(True)
        click.echo(f"{row.batch:>6}{row.network_per_second:>16,.0f}"
                   f"{row.evaluate_per_second:>17,.0f}")

    summary = bench_model(model, settings, report)
    if as_json:
        echo_json(summary.as_dict())
