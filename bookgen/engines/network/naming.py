"""dlshogi's network names, without torch: ``resnet10_swish``, ``resnet15x224_swish``, ...

dlshogi names the architecture of a model on its command lines
(``--network``), not in the model file. The grammar is
``FAMILY BLOCKS [xCHANNELS] [_fclF] [_reductionR] [_ACTIVATION]``:

- FAMILY ``resnet`` (post-activation residual blocks) or ``senet`` (the same
  with a squeeze-and-excitation layer, reduction R, default 8);
- CHANNELS default by BLOCKS: 10 -> 192, 15 -> 224, 20 -> 256, 30 -> 384;
- F the value head's hidden units (default 256);
- ACTIVATION ``_relu`` (the default) or ``_swish``.

Two names stand for older fixed layouts with numbered layers (``l2`` ...
``l21``): ``resnet10_swish`` (post-activation, swish) and ``wideresnet10``
(pre-activation, ReLU). bookgen reads these families only
(:mod:`bookgen.engines.network.dlshogi_models`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from bookgen.errors import SettingsError

__all__ = ["FLAT_NAMES", "NetworkName", "parse_network_name"]

Family = Literal["resnet", "senet", "resnet10_swish", "wideresnet10"]
Activation = Literal["relu", "swish"]

FLAT_NAMES: tuple[Family, ...] = ("resnet10_swish", "wideresnet10")
DEFAULT_CHANNELS = {10: 192, 15: 224, 20: 256, 30: 384}
DEFAULT_FCL = 256
DEFAULT_REDUCTION = 8
_NAME = re.compile(r"(?P<family>resnet|senet)(?P<blocks>[1-9]\d*)(x(?P<channels>[1-9]\d*))?"
                   r"(_fcl(?P<fcl>[1-9]\d*))?(_reduction(?P<reduction>[1-9]\d*))?"
                   r"(_(?P<activation>relu|swish))?")
KNOWN = ("resnetBLOCKS[xCHANNELS][_fclF][_relu|_swish], senetBLOCKS[xCHANNELS][_fclF]"
         "[_reductionR][_relu|_swish], resnet10_swish or wideresnet10")


@dataclass(frozen=True)
class NetworkName:
    """A parsed dlshogi network name; ``channels`` None where dlshogi has no default
    for the block count (the weights then say)."""

    family: Family
    blocks: int
    channels: int | None
    fcl: int
    reduction: int | None
    activation: Activation
    text: str


def parse_network_name(text: str) -> NetworkName:
    """Parse dlshogi's ``--network`` name; a :class:`SettingsError` on
    ``network.dlshogi_network`` names the grammar when it is not one bookgen reads."""
    if text in FLAT_NAMES:
        flat: Family = "resnet10_swish" if text == "resnet10_swish" else "wideresnet10"
        return NetworkName(flat, 10, 192, DEFAULT_FCL, None,
                           "swish" if flat == "resnet10_swish" else "relu", text)
    match = _NAME.fullmatch(text) if isinstance(text, str) else None
    if match is None or (match["reduction"] and match["family"] != "senet"):
        raise SettingsError("network.dlshogi_network",
                            f"{SettingsError.FIELD} {text!r} is not a dlshogi network name "
                            f"bookgen reads (use {KNOWN})")
    blocks = int(match["blocks"])
    channels = int(match["channels"]) if match["channels"] else DEFAULT_CHANNELS.get(blocks)
    family: Family = "senet" if match["family"] == "senet" else "resnet"
    reduction = (int(match["reduction"]) if match["reduction"] else DEFAULT_REDUCTION) \
        if family == "senet" else None
    activation: Activation = "swish" if match["activation"] == "swish" else "relu"
    return NetworkName(family, blocks, channels, int(match["fcl"] or DEFAULT_FCL), reduction,
                       activation, text)
