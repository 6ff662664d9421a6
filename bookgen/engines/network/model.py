"""dlshogi-shaped residual policy-value networks in torch: the model, model files, ONNX export.

Inputs and the policy layout are :mod:`bookgen.engines.network.features`'
(``input1`` board planes, ``input2`` pieces-in-hand planes, 2187 policy
logits); the model's value output is one logit whose sigmoid is the win
probability of the side to move.

A model file (``.pt``) is a plain dict saved with ``torch.save``::

    {"format": "bookgen-dlshogi-resnet", "version": 1, "blocks": 5,
     "channels": 64, "value_hidden": 256, "state_dict": {...}}

and is read back with ``torch.load(weights_only=True)`` only, so a model file
can never run code. ONNX files follow dlshogi's ``convert_model_to_onnx.py``:
inputs ``input1``/``input2``, outputs ``output_policy`` (logits) and
``output_value`` (already passed through a sigmoid), dynamic batch axis.
"""

from __future__ import annotations

import math
import os
import pickle
import warnings
import zipfile
from pathlib import Path
from typing import Any

# torch's OpenMP threads spin while they wait for work. When another process
# keeps a core busy (an engine, a worker, a second job: the usual case on a
# small machine), a spinning thread holds the core the others wait for, and
# throughput collapses (measured on 2 cores with a busy neighbour, batch 16,
# 2 threads: 23-52 s for what takes 5 s with passive waiting). Passive waiting
# costs nothing measurable here; set OMP_WAIT_POLICY yourself to override.
# It must be set before torch is first imported.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import torch  # noqa: E402
from torch import nn  # noqa: E402

from bookgen.engines.network import dlshogi_models  # noqa: E402  (torch's wait policy first)
from bookgen.engines.network.dlshogi_models import dlshogi_state  # noqa: E402
from bookgen.engines.network.features import (  # noqa: E402
    FEATURES1_NUM,
    FEATURES2_NUM,
    INPUT_NAMES,
    MOVE_DIRECTIONS,
    MOVE_LABELS,
    OUTPUT_NAMES,
)
from bookgen.errors import BookgenError  # noqa: E402
from bookgen.extras import require_extra  # noqa: E402
from bookgen.files import atomic_output  # noqa: E402

MODEL_FORMAT = "bookgen-dlshogi-resnet"
MODEL_VERSION = 1
DEFAULT_BLOCKS = 5
DEFAULT_CHANNELS = 64
DEFAULT_VALUE_HIDDEN = 256
MAX_BLOCKS = 64
MAX_CHANNELS = 1024

ONNX_OPSET = 17


# --------------------------------------------------------------------------
# the network


class ResidualBlock(nn.Module):
    """Two 3x3 convolutions with batch norm and a skip connection."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.norm1 = nn.BatchNorm2d(channels)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.norm2 = nn.BatchNorm2d(channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = torch.relu(self.norm1(self.conv1(x)))
        out = self.norm2(self.conv2(out))
        return torch.relu(out + x)


class PolicyValueNetwork(nn.Module):
    """dlshogi-shaped ResNet: ``forward(x1, x2)`` -> policy logits (N, 2187), value logit (N, 1)."""

    def __init__(self, blocks: int = DEFAULT_BLOCKS, channels: int = DEFAULT_CHANNELS,
                 value_hidden: int = DEFAULT_VALUE_HIDDEN) -> None:
        super().__init__()
        self.blocks_count = blocks
        self.channels = channels
        self.value_hidden = value_hidden
        # Stem: a 3x3 convolution over the board planes plus a 1x1 convolution
        # over the hand planes (constant over the board, so 1x1 is enough).
        self.stem_board = nn.Conv2d(FEATURES1_NUM, channels, 3, padding=1, bias=False)
        self.stem_hand = nn.Conv2d(FEATURES2_NUM, channels, 1, bias=False)
        self.stem_norm = nn.BatchNorm2d(channels)
        self.blocks = nn.Sequential(*(ResidualBlock(channels) for _ in range(blocks)))
        # Policy: one logit per (direction, destination square) plus a per-label bias.
        self.policy_conv = nn.Conv2d(channels, MOVE_DIRECTIONS, 1, bias=False)
        self.policy_bias = nn.Parameter(torch.zeros(MOVE_LABELS))
        self.value_conv = nn.Conv2d(channels, MOVE_DIRECTIONS, 1, bias=False)
        self.value_norm = nn.BatchNorm2d(MOVE_DIRECTIONS)
        self.value_fc1 = nn.Linear(MOVE_LABELS, value_hidden)
        self.value_fc2 = nn.Linear(value_hidden, 1)

    def forward(self, x1: torch.Tensor, x2: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = torch.relu(self.stem_norm(self.stem_board(x1) + self.stem_hand(x2)))
        h = self.blocks(h)
        policy = torch.flatten(self.policy_conv(h), 1) + self.policy_bias
        v = torch.relu(self.value_norm(self.value_conv(h)))
        v = torch.relu(self.value_fc1(torch.flatten(v, 1)))
        return policy, self.value_fc2(v)


class _SigmoidValue(nn.Module):
    """Export wrapper: value output as a probability, as dlshogi's ONNX files have it."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, x1: torch.Tensor, x2: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        policy, value = self.model(x1, x2)
        return policy, torch.sigmoid(value)


def parameter_count(model: nn.Module) -> int:
    """Number of trainable parameters."""
    return sum(p.numel() for p in model.parameters())


# --------------------------------------------------------------------------
# model files


def _check_hyper(blocks: object, channels: object, value_hidden: object, where: str
                 ) -> tuple[int, int, int]:
    """The three sizes, checked to be integers from 1 to their maximum."""
    checked: list[int] = []
    for name, value, top in (("blocks", blocks, MAX_BLOCKS), ("channels", channels, MAX_CHANNELS),
                             ("value_hidden", value_hidden, 65536)):
        if type(value) is not int or not 1 <= value <= top:
            raise BookgenError(f"{where}: {name} must be an integer from 1 to {top}, "
                               f"not {value!r}")
        checked.append(value)
    return checked[0], checked[1], checked[2]


def _write_atomically(path: Path, write: Any) -> None:
    """Call ``write(temporary_path)`` and rename the result to ``path``."""
    with atomic_output(path) as temporary:
        try:
            write(temporary)
        except RuntimeError as error:  # torch.save's failed writes (no errno)
            raise OSError(None, str(error)) from None


def save_model(model: PolicyValueNetwork, path: str | Path) -> None:
    """Write ``model`` as a bookgen model file (hyper-parameters + state dict)."""
    payload = {
        "format": MODEL_FORMAT,
        "version": MODEL_VERSION,
        "blocks": model.blocks_count,
        "channels": model.channels,
        "value_hidden": model.value_hidden,
        "state_dict": {k: v.detach().cpu().contiguous() for k, v in model.state_dict().items()},
    }
    _write_atomically(Path(path), lambda tmp: torch.save(payload, tmp))


def init_model(path: str | Path, blocks: int = DEFAULT_BLOCKS, channels: int = DEFAULT_CHANNELS,
               seed: int = 0, *, value_hidden: int = DEFAULT_VALUE_HIDDEN,
               force: bool = False) -> dict[str, Any]:
    """Write a freshly initialised network to ``path``; returns :func:`model_info` of it.

    The same ``seed`` and sizes always give the same weights. An existing file
    is only replaced with ``force`` (it may hold a trained model).
    """
    path = Path(path)
    _check_hyper(blocks, channels, value_hidden, str(path))
    if path.exists() and not force:
        raise BookgenError(f"{path}: already exists (use --force / force=True to replace it)")
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = PolicyValueNetwork(blocks, channels, value_hidden)
    save_model(model, path)
    return model_info(path)


def _first_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0]}" if text else type(error).__name__


def _torch_load(path: Path) -> object:
    """What ``torch.load(weights_only=True)`` reads from ``path`` (one-line errors)."""
    if not path.exists():
        raise BookgenError(f"{path}: no such model file")
    if not path.is_file():
        raise BookgenError(f"{path}: not a file")
    try:
        with warnings.catch_warnings():
            # torch warns about the pickle protocol of files it then refuses.
            warnings.filterwarnings("ignore", message="Detected pickle protocol")
            return torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as error:
        if "weights only" in str(error).lower() or "weights_only" in str(error).lower():
            raise BookgenError(
                f"{path}: refused: the file holds Python objects other than tensors and "
                "plain containers (loaded with weights_only=True)") from None
        raise BookgenError(f"{path}: not a PyTorch model file ({_first_line(error)})") from None
    except OSError as error:
        raise BookgenError(f"{path}: cannot read ({error.strerror or error})") from None
    except Exception:  # torch raises RuntimeError, EOFError, KeyError... on junk
        with open(path, "rb") as handle:
            zip_header = handle.read(4) == b"PK\x03\x04"
        if zip_header:
            raise BookgenError(f"{path}: truncated or corrupt PyTorch model file") from None
        raise BookgenError(f"{path}: not a PyTorch model file") from None


def _read_payload(path: Path, payload: object = None) -> dict[str, Any]:
    if payload is None:
        payload = _torch_load(path)
    if not isinstance(payload, dict):
        raise BookgenError(f"{path}: not a bookgen model (it holds a "
                           f"{type(payload).__name__}, not a dict)")
    if payload.get("format") != MODEL_FORMAT:
        if payload and all(isinstance(v, torch.Tensor) for v in payload.values()):
            found = "a bare state dict, without the architecture"
        else:
            found = f"format {payload.get('format')!r}"
        raise BookgenError(f"{path}: not a bookgen model ({found}; expected format "
                           f"{MODEL_FORMAT!r} as written by 'bookgen model init')")
    version = payload.get("version")
    if type(version) is not int or not 1 <= version <= MODEL_VERSION:
        raise BookgenError(f"{path}: unsupported model file version {version!r} "
                           f"(this bookgen reads up to {MODEL_VERSION})")
    return payload


def load_model(path: str | Path, payload: object = None) -> PolicyValueNetwork:
    """Read a bookgen model file (weights only, never arbitrary objects), in eval mode
    (``payload``: what :func:`_torch_load` already read from it)."""
    path = Path(path)
    payload = _read_payload(path, payload)
    blocks, channels = payload.get("blocks"), payload.get("channels")
    value_hidden = payload.get("value_hidden", DEFAULT_VALUE_HIDDEN)
    blocks, channels, value_hidden = _check_hyper(blocks, channels, value_hidden, str(path))
    state = payload.get("state_dict")
    if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor) for v in state.values()):
        raise BookgenError(f"{path}: 'state_dict' is not a dict of tensors")
    # Compare shapes on a skeleton first: nothing is allocated for a file
    # whose hyper-parameters do not match its tensors.
    with torch.device("meta"):
        skeleton = PolicyValueNetwork(blocks, channels, value_hidden)
    expected = {k: tuple(v.shape) for k, v in skeleton.state_dict().items()}
    missing = sorted(set(expected) - set(state))
    unexpected = sorted(set(state) - set(expected))
    if missing or unexpected:
        detail = (f"missing {missing[:3]}" if missing else "") + \
                 ("; " if missing and unexpected else "") + \
                 (f"unexpected {unexpected[:3]}" if unexpected else "")
        raise BookgenError(f"{path}: weights do not match a {blocks}x{channels} network "
                           f"({detail})")
    for key, shape in expected.items():
        if tuple(state[key].shape) != shape:
            raise BookgenError(f"{path}: weights do not match a {blocks}x{channels} network "
                               f"({key} has shape {tuple(state[key].shape)}, expected {shape})")
        if state[key].is_floating_point() and not bool(torch.isfinite(state[key]).all()):
            raise BookgenError(f"{path}: {key} contains NaN or infinite values")
    model = PolicyValueNetwork(blocks, channels, value_hidden)
    try:
        model.load_state_dict(state, strict=True)
    except (RuntimeError, TypeError) as error:
        raise BookgenError(f"{path}: cannot load weights ({_first_line(error)})") from None
    return model.eval()


def input2_planes(model: nn.Module) -> int:
    """The ``input2`` planes ``model`` takes (57, or 119 with the entering-king features)."""
    return int(getattr(model, "input2_planes", FEATURES2_NUM))


def load_network(path: str | Path, network: str | None = None) -> nn.Module:
    """Any network model file bookgen reads, in eval mode on the CPU, in float32:
    a bookgen model file (``bookgen model init``), or dlshogi's ``.npz`` model or
    ``.pth`` checkpoint (:mod:`bookgen.engines.network.dlshogi_models`;
    ``network``: dlshogi's network name, for the activation). Anything else is
    a one-line error saying what was expected."""
    path = Path(path)
    if not path.is_file():
        raise BookgenError(f"{path}: no such model file" if not path.exists()
                           else f"{path}: not a file")
    if path.suffix.lower() == ".npz":
        return dlshogi_models.load_dlshogi(path, dlshogi_models.read_npz(path), network)
    payload = _torch_load(path)
    if isinstance(payload, dict) and payload.get("format") == MODEL_FORMAT:
        if network is not None:
            raise BookgenError(f"{path}: a bookgen model file: a dlshogi network name "
                               "applies to dlshogi's .npz and .pth files only")
        return load_model(path, payload)
    state = dlshogi_state(payload)
    if state is None:
        found = (f"a dict with keys {sorted(map(str, payload))[:4]}"
                 if isinstance(payload, dict) else f"a {type(payload).__name__}")
        raise BookgenError(f"{path}: {found}; expected a bookgen model file (format "
                           f"{MODEL_FORMAT!r}, 'bookgen model init') or "
                           f"{dlshogi_models.EXPECTED}")
    return dlshogi_models.load_dlshogi(path, state, network)


# --------------------------------------------------------------------------
# ONNX


def export_onnx(model_path: str | Path, onnx_path: str | Path,
                opset: int = ONNX_OPSET, *, network: str | None = None,
                fp16: bool = False) -> dict[str, Any]:
    """Export a model file (:func:`load_network`: bookgen's, or dlshogi's ``.npz``/
    ``.pth`` with its ``network`` name) to ONNX with a dynamic batch axis, as
    dlshogi's ``convert_model_to_onnx.py`` does; returns its info.

    Inputs ``input1`` (N, 62, 9, 9) and ``input2`` (N, 57 or 119, 9, 9);
    outputs ``output_policy`` (N, 2187) logits and ``output_value`` (N, 1)
    win probability of the side to move (sigmoid applied, as in dlshogi).
    ``fp16``: half-precision weights, inputs and outputs.
    """
    require_extra("onnx", "nn", "ONNX export")
    import onnx

    model = load_network(model_path, network)
    onnx_path = Path(onnx_path)
    wrapper = _SigmoidValue(model).eval()
    dtype = torch.float16 if fp16 else torch.float32
    if fp16:
        wrapper = wrapper.half()
    example = (torch.zeros(2, FEATURES1_NUM, 9, 9, dtype=dtype),
               torch.zeros(2, input2_planes(model), 9, 9, dtype=dtype))
    batch = {0: "batch_size"}
    if isinstance(model, PolicyValueNetwork):
        metadata: dict[str, Any] = {"format": MODEL_FORMAT, "blocks": model.blocks_count,
                                    "channels": model.channels,
                                    "value_hidden": model.value_hidden}
    else:
        metadata = dlshogi_models.info_of(model)
    metadata.update(parameters=parameter_count(model), value_output="sigmoid",
                    policy_output="logits", precision="fp16" if fp16 else "fp32")

    def write(temporary: Path) -> None:
        # The TorchScript exporter (dynamo=False) is deprecated but needs no
        # onnxscript (not a dependency); its warnings would only be noise here.
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            torch.onnx.export(
                wrapper, example, str(temporary), dynamo=False, opset_version=opset,
                input_names=list(INPUT_NAMES), output_names=list(OUTPUT_NAMES),
                dynamic_axes={name: batch for name in INPUT_NAMES + OUTPUT_NAMES},
                do_constant_folding=True)
        proto = onnx.load(str(temporary))
        for key, value in metadata.items():
            entry = proto.metadata_props.add()
            entry.key, entry.value = f"bookgen.{key}", str(value)
        onnx.checker.check_model(proto)
        onnx.save(proto, str(temporary))

    _write_atomically(onnx_path, write)
    return model_info(onnx_path)


def _onnx_info(path: Path) -> dict[str, Any]:
    require_extra("onnx", "nn", "reading ONNX models")
    import onnx

    try:
        proto = onnx.load(str(path), load_external_data=False)
    except Exception as error:
        raise BookgenError(f"{path}: neither a bookgen model file nor an ONNX model "
                           f"({_first_line(error)})") from None
    if not proto.graph.input and not proto.graph.output:
        raise BookgenError(f"{path}: neither a bookgen model file nor an ONNX model")
    meta = {p.key.removeprefix("bookgen."): p.value for p in proto.metadata_props
            if p.key.startswith("bookgen.")}

    def shapes(values: Any) -> dict[str, list[int | str]]:
        return {v.name: [d.dim_param or d.dim_value for d in v.type.tensor_type.shape.dim]
                for v in values}

    initializers = {i.name for i in proto.graph.initializer}
    stored = sum(math.prod(i.dims) for i in proto.graph.initializer)
    return {
        "file": str(path), "kind": "onnx", "format": meta.get("format"),
        "blocks": int(meta["blocks"]) if "blocks" in meta else None,
        "channels": int(meta["channels"]) if "channels" in meta else None,
        "value_hidden": int(meta["value_hidden"]) if "value_hidden" in meta else None,
        "parameters": int(meta["parameters"]) if "parameters" in meta else None,
        "stored_values": int(stored),
        "opset": max((o.version for o in proto.opset_import if o.domain in ("", "ai.onnx")),
                     default=None),
        "inputs": shapes(v for v in proto.graph.input if v.name not in initializers),
        "outputs": shapes(proto.graph.output),
    }


def model_info(path: str | Path, network: str | None = None) -> dict[str, Any]:
    """Architecture of a model file (:func:`load_network`) or an ONNX file, as a
    JSON-ready dict."""
    path = Path(path)
    if not path.is_file():
        raise BookgenError(f"{path}: no such model file")
    if path.suffix.lower() == ".onnx":
        return _onnx_info(path)
    if path.suffix.lower() != ".npz" and not zipfile.is_zipfile(path):
        try:
            return _onnx_info(path)
        except BookgenError:
            pass  # report it as a bad torch file below
    model = load_network(path, network)
    if isinstance(model, PolicyValueNetwork):
        info: dict[str, Any] = {"format": MODEL_FORMAT, "blocks": model.blocks_count,
                                "channels": model.channels, "value_hidden": model.value_hidden}
    else:
        info = dlshogi_models.info_of(model)
    return {"file": str(path), "kind": "torch", **info, "parameters": parameter_count(model),
            "inputs": {"input1": ["N", FEATURES1_NUM, 9, 9],
                       "input2": ["N", input2_planes(model), 9, 9]},
            "outputs": {"output_policy": ["N", MOVE_LABELS], "output_value": ["N", 1]}}
