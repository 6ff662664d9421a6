"""dlshogi's own model files, read as they are: ``.npz`` models and ``.pth`` checkpoints.

dlshogi (Tadao Yamaoka's DeepLearningShogi) trains policy-value networks in
PyTorch and writes them in two ways:

- a model file, ``.npz``: one array per parameter and batch-norm buffer,
  named by the module path with ``/`` (``l1_1_1/W``, ``blocks/0/bn1/gamma``)
  and Chainer's last names: ``W`` and ``b`` for weights and biases,
  ``gamma``, ``beta``, ``avg_mean``, ``avg_var`` and ``N`` for batch norms;
  arrays of auxiliary heads have ``_aux`` in their names (bookgen ignores
  them, as dlshogi's ``--remove_aux``);
- a checkpoint, ``torch.save`` of a dict whose ``'model'`` is the state dict
  (besides the optimizer's state and counters; read with
  ``weights_only=True``); a bare state dict is read too.

bookgen builds the same architectures under the same parameter names and
shapes (its own modules, :class:`DlshogiResNet` and :class:`DlshogiFlatResNet`)
and infers the sizes from the tensors: blocks, channels, the value head's
hidden units, the squeeze-and-excitation reduction, and the pieces-in-hand
planes of ``input2`` (57, or 119 with dlshogi's entering-king features). The
families (:mod:`bookgen.engines.network.naming`):

- ``resnet``/``senet``: ``l1_1_1``, ``l1_1_2``, ``l1_2``, ``norm1``,
  ``blocks.I.{conv1,bn1,conv2,bn2}`` (and ``se.fc1``, ``se.fc2``),
  ``policy``, ``policy_bias``, ``value_conv1``, ``value_norm1``,
  ``value_fc1``, ``value_fc2``;
- ``resnet10_swish`` and ``wideresnet10``: numbered layers ``l2`` ... ``l21``
  and ``norm1`` ... ``norm21``, ``l22`` and ``l22_2`` (policy), ``l22_v``,
  ``norm22_v``, ``l23_v``, ``l24_v`` (value); ``wideresnet10``'s ``l22_v``
  has a bias, which tells the two apart.

The activation is not in the weights: it comes from dlshogi's network name
(:attr:`~bookgen.engines.network.device.NetworkSettings.dlshogi_network`, e.g.
``resnet15x224_swish``); without one it is ReLU, as dlshogi reads a name
without ``_swish``, except for the ``resnet10_swish`` layout. The name must
agree with the weights. The value output is a logit (dlshogi adds the sigmoid
only for ONNX export); the policy is 2187 logits.
"""

from __future__ import annotations

import zipfile
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from bookgen.engines.network.features import (
    FEATURES1_NUM,
    INPUT2_PLANES,
    MOVE_DIRECTIONS,
    MOVE_LABELS,
)
from bookgen.engines.network.naming import Activation, Family, NetworkName, parse_network_name
from bookgen.errors import BookgenError

__all__ = ["DlshogiArchitecture", "DlshogiFlatResNet", "DlshogiResNet", "build_network",
           "dlshogi_state", "infer_architecture", "load_dlshogi", "read_npz", "state_to_npz"]

_NPZ_NAMES = {"W": "weight", "b": "bias", "gamma": "weight", "beta": "bias",
              "avg_mean": "running_mean", "avg_var": "running_var", "N": "num_batches_tracked"}
EXPECTED = ("a dlshogi model: an .npz model file, or a checkpoint whose 'model' is the state "
            "dict of a resnet, senet, resnet10_swish or wideresnet10 network")


@dataclass(frozen=True)
class DlshogiArchitecture:
    """The sizes of a dlshogi network, as inferred from its weights."""

    family: Family
    blocks: int
    channels: int
    fcl: int
    input2: int
    reduction: int | None = None
    activation: Activation = "relu"

    @property
    def name(self) -> str:
        """dlshogi's name for it (the flat layouts by their fixed names)."""
        if self.family in ("resnet10_swish", "wideresnet10"):
            return self.family
        text = f"{self.family}{self.blocks}x{self.channels}"
        if self.fcl != 256:
            text += f"_fcl{self.fcl}"
        if self.reduction is not None and self.reduction != 8:
            text += f"_reduction{self.reduction}"
        return text + ("_swish" if self.activation == "swish" else "")


def _activation(name: Activation) -> nn.Module:
    return nn.SiLU() if name == "swish" else nn.ReLU()


class _Bias(nn.Module):
    def __init__(self, size: int) -> None:
        super().__init__()
        self.bias = nn.Parameter(torch.zeros(size))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.bias


class _Squeeze(nn.Module):
    """Squeeze and excitation: channel weights from the board mean."""

    def __init__(self, channels: int, reduction: int, act: nn.Module) -> None:
        super().__init__()
        self.fc1 = nn.Conv2d(channels, channels // reduction, 1)
        self.fc2 = nn.Conv2d(channels // reduction, channels, 1)
        self.act = act

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        weights = self.fc2(self.act(self.fc1(x.mean((2, 3), keepdim=True))))
        return x * torch.sigmoid(weights)


class _Block(nn.Module):
    def __init__(self, channels: int, act: nn.Module, reduction: int | None) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(channels)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(channels)
        self.act = act
        self.se = _Squeeze(channels, reduction, act) if reduction is not None else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.bn2(self.conv2(self.act(self.bn1(self.conv1(x)))))
        if self.se is not None:  # senet: activation, then the channel weights
            out = self.se(self.act(out))
        return self.act(out + x)


class DlshogiResNet(nn.Module):
    """dlshogi's ``resnet``/``senet`` families: ``forward(x1, x2)`` -> policy logits
    (N, 2187), value logit (N, 1)."""

    def __init__(self, arch: DlshogiArchitecture) -> None:
        super().__init__()
        self.architecture = arch
        self.input2_planes = arch.input2
        channels, act = arch.channels, _activation(arch.activation)
        self.l1_1_1 = nn.Conv2d(FEATURES1_NUM, channels, 3, padding=1, bias=False)
        self.l1_1_2 = nn.Conv2d(FEATURES1_NUM, channels, 1, bias=False)
        self.l1_2 = nn.Conv2d(arch.input2, channels, 1, bias=False)
        self.norm1 = nn.BatchNorm2d(channels)
        self.act = act
        self.blocks = nn.Sequential(*(_Block(channels, act, arch.reduction)
                                      for _ in range(arch.blocks)))
        self.policy = nn.Conv2d(channels, MOVE_DIRECTIONS, 1, bias=False)
        self.policy_bias = _Bias(MOVE_LABELS)
        self.value_conv1 = nn.Conv2d(channels, MOVE_DIRECTIONS, 1, bias=False)
        self.value_norm1 = nn.BatchNorm2d(MOVE_DIRECTIONS)
        self.value_fc1 = nn.Linear(MOVE_LABELS, arch.fcl)
        self.value_fc2 = nn.Linear(arch.fcl, 1)

    def forward(self, x1: torch.Tensor, x2: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        act = self.act
        h = act(self.norm1(self.l1_1_1(x1) + self.l1_1_2(x1) + self.l1_2(x2)))
        h = self.blocks(h)
        policy = self.policy_bias(torch.flatten(self.policy(h), 1))
        v = act(self.value_norm1(self.value_conv1(h)))
        v = act(self.value_fc1(torch.flatten(v, 1)))
        return policy, self.value_fc2(v)


class DlshogiFlatResNet(nn.Module):
    """dlshogi's ``resnet10_swish`` (post-activation) and ``wideresnet10``
    (pre-activation, batch-norm epsilon 2e-5, a value convolution with bias)
    layouts with numbered layers."""

    def __init__(self, arch: DlshogiArchitecture) -> None:
        super().__init__()
        self.architecture = arch
        self.input2_planes = arch.input2
        self.pre_activation = arch.family == "wideresnet10"
        eps = 2e-5 if self.pre_activation else 1e-5
        channels, blocks = arch.channels, arch.blocks
        self.act = _activation(arch.activation)
        self.l1_1_1 = nn.Conv2d(FEATURES1_NUM, channels, 3, padding=1, bias=False)
        self.l1_1_2 = nn.Conv2d(FEATURES1_NUM, channels, 1, bias=False)
        self.l1_2 = nn.Conv2d(arch.input2, channels, 1, bias=False)
        for i in range(2, 2 * blocks + 2):
            self.add_module(f"l{i}", nn.Conv2d(channels, channels, 3, padding=1, bias=False))
        head = 2 * blocks + 2
        self.add_module(f"l{head}", nn.Conv2d(channels, MOVE_DIRECTIONS, 1, bias=False))
        self.add_module(f"l{head}_2", _Bias(MOVE_LABELS))
        self.add_module(f"l{head}_v", nn.Conv2d(channels, MOVE_DIRECTIONS, 1,
                                                bias=self.pre_activation))
        self.add_module(f"l{head + 1}_v", nn.Linear(MOVE_LABELS, arch.fcl))
        self.add_module(f"l{head + 2}_v", nn.Linear(arch.fcl, 1))
        for i in range(1, 2 * blocks + 2):
            self.add_module(f"norm{i}", nn.BatchNorm2d(channels, eps=eps))
        self.add_module(f"norm{head}_v", nn.BatchNorm2d(MOVE_DIRECTIONS, eps=eps))
        self.head = head

    def _layer(self, name: str) -> nn.Module:
        return self.get_submodule(name)

    def forward(self, x1: torch.Tensor, x2: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        act, layer, blocks = self.act, self._layer, self.architecture.blocks
        u = self.l1_1_1(x1) + self.l1_1_2(x1) + self.l1_2(x2)
        if self.pre_activation:
            for b in range(blocks):
                h = act(layer(f"norm{2 * b + 1}")(u))
                h = act(layer(f"norm{2 * b + 2}")(layer(f"l{2 * b + 2}")(h)))
                u = layer(f"l{2 * b + 3}")(h) + u
            u = act(layer(f"norm{2 * blocks + 1}")(u))
        else:
            u = act(layer("norm1")(u))
            for b in range(blocks):
                h = act(layer(f"norm{2 * b + 2}")(layer(f"l{2 * b + 2}")(u)))
                u = act(layer(f"norm{2 * b + 3}")(layer(f"l{2 * b + 3}")(h)) + u)
        head = self.head
        policy = layer(f"l{head}_2")(torch.flatten(layer(f"l{head}")(u), 1))
        v = act(layer(f"norm{head}_v")(layer(f"l{head}_v")(u)))
        v = act(layer(f"l{head + 1}_v")(torch.flatten(v, 1)))
        return policy, layer(f"l{head + 2}_v")(v)


def build_network(arch: DlshogiArchitecture) -> nn.Module:
    """A freshly initialised network of ``arch`` (dlshogi's parameter names)."""
    if arch.family in ("resnet10_swish", "wideresnet10"):
        return DlshogiFlatResNet(arch)
    return DlshogiResNet(arch)


# --------------------------------------------------------------------------
# reading the files


def read_npz(path: Path) -> dict[str, torch.Tensor]:
    """A dlshogi ``.npz`` model as a torch state dict (``_aux`` arrays left out)."""
    try:
        with np.load(path, allow_pickle=False) as arrays:
            names = list(arrays.keys())
            state = {}
            for key in names:
                if "_aux" in key:
                    continue
                parts = key.split("/")
                parts[-1] = _NPZ_NAMES.get(parts[-1], parts[-1])
                state[".".join(parts)] = torch.from_numpy(np.array(arrays[key]))
    except (OSError, ValueError, zipfile.BadZipFile, EOFError) as error:
        raise BookgenError(f"{path}: not a readable .npz model file ({error})") from None
    if not state:
        raise BookgenError(f"{path}: the .npz file holds no arrays; expected {EXPECTED}")
    return state


def state_to_npz(state: Mapping[str, torch.Tensor]) -> dict[str, np.ndarray]:
    """A state dict under dlshogi's ``.npz`` names (as dlshogi's serializer writes
    them: ``W``/``b``, and ``gamma``/``beta``/``avg_mean``/``avg_var``/``N`` for
    modules whose name holds ``norm`` or ``bn``)."""
    renamed = {}
    for key, value in state.items():
        parts = key.split(".")
        if "norm" in key or "bn" in key:
            parts[-1] = {"weight": "gamma", "bias": "beta", "running_mean": "avg_mean",
                         "running_var": "avg_var", "num_batches_tracked": "N"}.get(parts[-1],
                                                                                   parts[-1])
        else:
            parts[-1] = {"weight": "W", "bias": "b"}.get(parts[-1], parts[-1])
        renamed["/".join(parts)] = value.detach().cpu().numpy()
    return renamed


def dlshogi_state(payload: object) -> dict[str, torch.Tensor] | None:
    """The model's state dict in what ``torch.load`` gave: a dlshogi checkpoint's
    ``'model'``, or a bare state dict; None if it is neither."""
    if isinstance(payload, dict) and isinstance(payload.get("model"), dict):
        payload = payload["model"]
    if isinstance(payload, dict) and payload and all(
            isinstance(k, str) and isinstance(v, torch.Tensor) for k, v in payload.items()):
        return {k: v for k, v in payload.items() if "_aux" not in k}
    return None


def _shape(state: Mapping[str, torch.Tensor], key: str) -> tuple[int, ...] | None:
    tensor = state.get(key)
    return tuple(tensor.shape) if tensor is not None else None


def infer_architecture(state: Mapping[str, torch.Tensor], where: str) -> DlshogiArchitecture:
    """The family and sizes of the network whose state dict is ``state``."""
    stem = _shape(state, "l1_1_1.weight")
    hand = _shape(state, "l1_2.weight")
    if stem is None or hand is None or len(stem) != 4 or len(hand) != 4:
        if "stem_board.weight" in state:
            raise BookgenError(f"{where}: the weights of bookgen's own network without its "
                               "model file header: write models with 'bookgen model init' "
                               "or bookgen's save_model")
        raise BookgenError(f"{where}: no l1_1_1/l1_2 convolutions: expected {EXPECTED}")
    channels = stem[0]
    if stem[1] != FEATURES1_NUM or hand[1] not in INPUT2_PLANES:
        raise BookgenError(f"{where}: the input layers take {stem[1]} and {hand[1]} planes; "
                           f"expected {FEATURES1_NUM} and one of "
                           f"{' or '.join(map(str, INPUT2_PLANES))} (dlshogi's features)")
    if "blocks.0.conv1.weight" in state:
        blocks = len({k.split(".")[1] for k in state if k.startswith("blocks.")})
        fc1 = _shape(state, "value_fc1.weight")
        se = _shape(state, "blocks.0.se.fc1.weight")
        reduction = None
        if se is not None:
            if se[0] < 1 or channels % se[0]:
                raise BookgenError(f"{where}: squeeze-and-excitation layer of {se[0]} "
                                   f"channels does not divide {channels}")
            reduction = channels // se[0]
        family: Family = "senet" if se is not None else "resnet"
        fcl = fc1[0] if fc1 else 256
        return DlshogiArchitecture(family, blocks, channels, fcl, hand[1], reduction)
    if "l2.weight" in state:
        layers = [int(k[1:].split(".")[0]) for k in state
                  if k.startswith("l") and k[1:].split(".")[0].isdigit()]
        blocks = (max(layers) - 2) // 2
        head = 2 * blocks + 2
        fc1 = _shape(state, f"l{head + 1}_v.weight")
        flat: Family = "wideresnet10" if f"l{head}_v.bias" in state else "resnet10_swish"
        return DlshogiArchitecture(flat, blocks, channels, fc1[0] if fc1 else 256, hand[1],
                                   activation="swish" if flat == "resnet10_swish" else "relu")
    raise BookgenError(f"{where}: neither residual blocks (blocks.0...) nor numbered layers "
                       f"(l2...): expected {EXPECTED}")


def _with_name(arch: DlshogiArchitecture, name: NetworkName, where: str) -> DlshogiArchitecture:
    """``arch`` with the activation of dlshogi's ``name``, which must describe it."""
    wanted = (name.family, name.blocks, name.channels or arch.channels, name.fcl,
              name.reduction)
    found = (arch.family, arch.blocks, arch.channels, arch.fcl, arch.reduction)
    if wanted != found:
        raise BookgenError(f"{where}: the weights are a {arch.name} network "
                           f"({arch.blocks} blocks x {arch.channels} channels), not "
                           f"{name.text}")
    return replace(arch, activation=name.activation)


def load_dlshogi(path: Path, state: dict[str, torch.Tensor], network: str | None) -> nn.Module:
    """The network of dlshogi ``state`` (from ``path``), in eval mode; ``network``:
    dlshogi's name, for the activation."""
    where = str(path)
    arch = infer_architecture(state, where)
    if network is not None:
        arch = _with_name(arch, parse_network_name(network), where)
    with torch.device("meta"):
        skeleton = build_network(arch)
    expected = {k: tuple(v.shape) for k, v in skeleton.state_dict().items()}
    for key in expected:  # dlshogi's files have them; a missing counter changes nothing
        if key.endswith("num_batches_tracked") and key not in state:
            state[key] = torch.zeros((), dtype=torch.long)
    missing = sorted(set(expected) - set(state))
    unexpected = sorted(set(state) - set(expected))
    if missing or unexpected:
        detail = "; ".join(part for part in (f"missing {missing[:3]}" if missing else "",
                                             f"unexpected {unexpected[:3]}" if unexpected
                                             else "") if part)
        raise BookgenError(f"{where}: not a complete {arch.name} network ({detail})")
    for key, shape in expected.items():
        tensor = state[key]
        if tuple(tensor.shape) != shape:
            raise BookgenError(f"{where}: {key} has shape {tuple(tensor.shape)}, a "
                               f"{arch.name} network has {shape}")
        if tensor.is_floating_point():
            if not bool(torch.isfinite(tensor).all()):
                raise BookgenError(f"{where}: {key} contains NaN or infinite values")
            state[key] = tensor.float()
    model = build_network(arch)
    model.load_state_dict(state, strict=True)
    return model.eval()


def info_of(model: nn.Module) -> dict[str, Any]:
    """``bookgen model info`` fields of a dlshogi network."""
    if not isinstance(model, (DlshogiResNet, DlshogiFlatResNet)):
        raise TypeError(f"not a dlshogi network: {type(model).__name__}")
    arch = model.architecture
    return {"format": "dlshogi", "network": arch.name, "blocks": arch.blocks,
            "channels": arch.channels, "value_hidden": arch.fcl, "activation": arch.activation}
