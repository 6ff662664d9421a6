"""``bookgen model``: create, inspect and export dlshogi-shaped networks.

Each command is a thin layer over :mod:`bookgen.engines.network.model`
(``init_model``, ``model_info``, ``export_onnx``); torch is imported only when a
command runs.
"""

from __future__ import annotations

from typing import Any

import click

from bookgen.cli.options import json_option, output_option, seed_option
from bookgen.cli.support import echo_json, reports_errors
from bookgen.extras import require_extra


def format_info(info: dict[str, Any]) -> str:
    """Human-readable lines for :func:`bookgen.engines.network.model.model_info`."""
    def known(value: object) -> str:
        if value is None:
            return "unknown"
        return f"{value:,}" if isinstance(value, int) else str(value)

    rows = [("file", f"{info['file']} ({info['kind']})"), ("blocks", known(info.get("blocks"))),
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
@json_option("Print the ONNX model's info as JSON.")
@reports_errors
def export_onnx_command(model: str, output: str, as_json: bool) -> None:
    """Export MODEL (.pt) to ONNX in dlshogi's layout.

    Inputs input1 (N x 62 x 9 x 9) and input2 (N x 57 x 9 x 9); outputs
    output_policy (N x 2187 logits) and output_value (N x 1, win probability
    of the side to move, sigmoid applied); N is dynamic.
    """
    require_extra("torch", "nn", "model export-onnx")
    from bookgen.engines.network.model import export_onnx

    info = export_onnx(model, output)
    if as_json:
        echo_json(info)
    else:
        click.echo(f"{output}: ONNX opset {info['opset']}, {info['blocks']} blocks x "
                   f"{info['channels']} channels, inputs {', '.join(info['inputs'])}, "
                   f"outputs {', '.join(info['outputs'])}")


@model_group.command("info")
@click.argument("model", type=click.Path(dir_okay=False))
@json_option("Print one JSON object.")
@reports_errors
def info_command(model: str, as_json: bool) -> None:
    """Blocks, channels, parameter count and tensors of MODEL (.pt or .onnx)."""
    require_extra("torch", "nn", "model info")
    from bookgen.engines.network.model import model_info

    info = model_info(model)
    if as_json:
        echo_json(info)
    else:
        click.echo(format_info(info))
