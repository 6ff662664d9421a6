"""dlshogi's model files as dlshogi writes them: ``.npz`` models, ``.pth`` checkpoints, ONNX.

Weights are random but sharp (batch-norm statistics, biases), saved the way
dlshogi saves them: the ``.npz`` names of dlshogi's serializer (``/`` between
module names, ``W``/``b`` and ``gamma``/``beta``/``avg_mean``/``avg_var``/``N``),
the checkpoint dict of its ``train.py`` (``'model'`` beside the optimizer's
state), and ONNX with its names (``input1``/``input2`` -> ``output_policy``/
``output_value``, dynamic batch, sigmoid on the value). Every file is
evaluated by bookgen and compared with a plain functional forward pass over the
same arrays, written here from dlshogi's published layer order.
"""

from __future__ import annotations

import math
from pathlib import Path

import cshogi
import numpy as np
import onnx
import pytest
import torch
import torch.nn.functional as F
from click.testing import CliRunner

from bookgen.cli import main as cli
from bookgen.engines.network.analyser import OnnxEvaluator, TorchEvaluator
from bookgen.engines.network.dlshogi_models import (
    DlshogiArchitecture,
    build_network,
    state_to_npz,
)
from bookgen.engines.network.features import features, legal_move_labels
from bookgen.engines.network.model import export_onnx, load_network, model_info
from bookgen.errors import BookgenError, SettingsError
from conftest import random_positions

TOLERANCE = 1e-4

# family, blocks, channels, fcl, input2, reduction, activation, dlshogi's name (None: default)
CASES = {
    "resnet_relu": (DlshogiArchitecture("resnet", 2, 16, 32, 57), None),
    "resnet_swish": (DlshogiArchitecture("resnet", 2, 16, 32, 57, activation="swish"),
                     "resnet2x16_fcl32_swish"),
    "senet_swish": (DlshogiArchitecture("senet", 2, 16, 256, 57, 4, "swish"),
                    "senet2x16_reduction4_swish"),
    "resnet10_swish": (DlshogiArchitecture("resnet10_swish", 10, 8, 16, 57,
                                           activation="swish"), None),
    "wideresnet10": (DlshogiArchitecture("wideresnet10", 10, 8, 16, 57), None),
    "nyugyoku": (DlshogiArchitecture("resnet", 1, 8, 16, 119), None),
}


def sharp_state(arch: DlshogiArchitecture, seed: int) -> dict[str, torch.Tensor]:
    """A random state dict of ``arch`` with non-trivial batch norms and biases."""
    generator = torch.Generator().manual_seed(seed)
    state = {k: v.clone() for k, v in build_network(arch).state_dict().items()}
    for key, tensor in state.items():
        if not tensor.is_floating_point():
            state[key] = torch.tensor(1000 + seed)
        elif key.endswith("running_var"):
            state[key] = 0.5 + torch.rand(tensor.shape, generator=generator)
        elif key.endswith(("running_mean", "bias")) or ("norm" in key or "bn" in key):
            base = 1.0 if key.endswith("weight") else 0.0
            state[key] = base + 0.2 * torch.randn(tensor.shape, generator=generator)
        else:
            fan_in = math.prod(tensor.shape[1:])
            state[key] = torch.randn(tensor.shape, generator=generator) * 1.5 / fan_in ** 0.5
    return state


def dlshogi_npz_names(state: dict[str, torch.Tensor]) -> dict[str, np.ndarray]:
    """dlshogi's serializer naming, spelt out here (not bookgen's writer)."""
    arrays = {}
    for key, value in state.items():
        *path, last = key.split(".")
        normed = "norm" in key or "bn" in key
        last = ({"weight": "gamma", "bias": "beta", "running_mean": "avg_mean",
                 "running_var": "avg_var", "num_batches_tracked": "N"} if normed
                else {"weight": "W", "bias": "b"})[last]
        arrays["/".join([*path, last])] = value.numpy()
    return arrays


# --------------------------------------------------------------------------
# the reference: dlshogi's forward passes, functionally, over the arrays


def bn(s: dict, name: str, x: torch.Tensor, eps: float = 1e-5) -> torch.Tensor:
    return F.batch_norm(x, s[f"{name}.running_mean"], s[f"{name}.running_var"],
                        s[f"{name}.weight"], s[f"{name}.bias"], False, 0.0, eps)


def conv(s: dict, name: str, x: torch.Tensor) -> torch.Tensor:
    weight = s[f"{name}.weight"]
    return F.conv2d(x, weight, s.get(f"{name}.bias"), padding=weight.shape[-1] // 2)


def reference(arch: DlshogiArchitecture, s: dict, x1: torch.Tensor, x2: torch.Tensor
              ) -> tuple[torch.Tensor, torch.Tensor]:
    act = F.silu if arch.activation == "swish" else F.relu
    stem = conv(s, "l1_1_1", x1) + conv(s, "l1_1_2", x1) + conv(s, "l1_2", x2)
    if arch.family in ("resnet", "senet"):
        h = act(bn(s, "norm1", stem))
        for i in range(arch.blocks):
            p = f"blocks.{i}"
            out = act(bn(s, f"{p}.bn1", conv(s, f"{p}.conv1", h)))
            out = bn(s, f"{p}.bn2", conv(s, f"{p}.conv2", out))
            if arch.family == "senet":
                out = act(out)
                w = conv(s, f"{p}.se.fc1", out.mean((2, 3), keepdim=True))
                out = out * torch.sigmoid(conv(s, f"{p}.se.fc2", act(w)))
            h = act(out + h)
        policy = conv(s, "policy", h).flatten(1) + s["policy_bias.bias"]
        v = act(bn(s, "value_norm1", conv(s, "value_conv1", h))).flatten(1)
        v = act(F.linear(v, s["value_fc1.weight"], s["value_fc1.bias"]))
        return policy, F.linear(v, s["value_fc2.weight"], s["value_fc2.bias"])
    eps = 2e-5 if arch.family == "wideresnet10" else 1e-5
    u = stem
    if arch.family == "wideresnet10":  # pre-activation blocks
        for i in range(arch.blocks):
            h = act(bn(s, f"norm{2 * i + 1}", u, eps))
            h = act(bn(s, f"norm{2 * i + 2}", conv(s, f"l{2 * i + 2}", h), eps))
            u = conv(s, f"l{2 * i + 3}", h) + u
        h = act(bn(s, "norm21", u, eps))
    else:
        h = act(bn(s, "norm1", u))
        for i in range(arch.blocks):
            out = act(bn(s, f"norm{2 * i + 2}", conv(s, f"l{2 * i + 2}", h)))
            h = act(bn(s, f"norm{2 * i + 3}", conv(s, f"l{2 * i + 3}", out)) + h)
    policy = conv(s, "l22", h).flatten(1) + s["l22_2.bias"]
    v = act(bn(s, "norm22_v", conv(s, "l22_v", h), eps)).flatten(1)
    v = act(F.linear(v, s["l23_v.weight"], s["l23_v.bias"]))
    return policy, F.linear(v, s["l24_v.weight"], s["l24_v.bias"])


# --------------------------------------------------------------------------
# fixtures


@pytest.fixture(scope="module")
def boards() -> list[cshogi.Board]:
    return [cshogi.Board(), *random_positions(seed=21, count=30, max_plies=140)]


@pytest.fixture(scope="module", params=sorted(CASES))
def case(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
         ) -> tuple[DlshogiArchitecture, str | None, dict[str, torch.Tensor], Path]:
    arch, name = CASES[request.param]
    state = sharp_state(arch, seed=len(request.param))
    directory = tmp_path_factory.mktemp(request.param)
    np.savez_compressed(directory / "model.npz", **dlshogi_npz_names(state))
    model = build_network(arch)
    model.load_state_dict(state)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    model(torch.zeros(1, 62, 9, 9), torch.zeros(1, arch.input2, 9, 9))[0].sum().backward()
    optimizer.step()  # the checkpoint then holds momentum buffers, as a real one does
    model.load_state_dict(state)
    torch.save({"epoch": 3, "t": 1200, "model": state, "optimizer": optimizer.state_dict(),
                "scaler": {"scale": 65536.0, "growth_factor": 2.0, "_growth_tracker": 7}},
               directory / "checkpoint.pth")
    return arch, name, state, directory


def evaluations_agree(expected: list, found: list, tolerance: float = TOLERANCE,
                      prior_tolerance: float | None = None) -> None:
    assert len(expected) == len(found)
    for a, b in zip(expected, found):
        assert a.moves == b.moves
        assert abs(a.value - b.value) <= tolerance, (a.value, b.value)
        assert np.abs(np.array(a.priors) - np.array(b.priors)).max() <= (
            prior_tolerance or tolerance)


def reference_evaluations(arch: DlshogiArchitecture, state: dict, boards: list) -> list:
    """(moves, priors, value) from the reference forward pass."""
    f1, f2 = features(boards, arch.input2)
    with torch.no_grad():
        policy, value = reference(arch, state, torch.from_numpy(f1), torch.from_numpy(f2))
    result = []
    for row, board in enumerate(boards):
        moves, labels = legal_move_labels(board)
        logits = policy[row, labels].double()
        priors = torch.softmax(logits, 0).tolist()
        result.append(type("E", (), {"moves": [cshogi.move_to_usi(m) for m in moves],
                                     "priors": priors,
                                     "value": float(torch.sigmoid(value[row, 0]))})())
    return result


# --------------------------------------------------------------------------
# tests


def test_npz_names_and_shapes_are_dlshogis() -> None:
    arrays = dlshogi_npz_names(sharp_state(DlshogiArchitecture("resnet", 2, 16, 32, 57), 1))
    assert {k: v.shape for k, v in arrays.items() if k.startswith(("l1", "policy", "value"))
            or k.startswith("blocks/1/")} == {
        "l1_1_1/W": (16, 62, 3, 3), "l1_1_2/W": (16, 62, 1, 1), "l1_2/W": (16, 57, 1, 1),
        "blocks/1/conv1/W": (16, 16, 3, 3), "blocks/1/bn1/gamma": (16,),
        "blocks/1/bn1/beta": (16,), "blocks/1/bn1/avg_mean": (16,),
        "blocks/1/bn1/avg_var": (16,), "blocks/1/bn1/N": (),
        "blocks/1/conv2/W": (16, 16, 3, 3), "blocks/1/bn2/gamma": (16,),
        "blocks/1/bn2/beta": (16,), "blocks/1/bn2/avg_mean": (16,),
        "blocks/1/bn2/avg_var": (16,), "blocks/1/bn2/N": (),
        "policy/W": (27, 16, 1, 1), "policy_bias/b": (2187,),
        "value_conv1/W": (27, 16, 1, 1), "value_norm1/gamma": (27,), "value_norm1/beta": (27,),
        "value_norm1/avg_mean": (27,), "value_norm1/avg_var": (27,), "value_norm1/N": (),
        "value_fc1/W": (32, 2187), "value_fc1/b": (32,), "value_fc2/W": (1, 32),
        "value_fc2/b": (1,)}
    flat = dlshogi_npz_names(sharp_state(DlshogiArchitecture("wideresnet10", 10, 8, 16, 57), 1))
    assert {"l21/W", "norm21/gamma", "l22/W", "l22_2/b", "l22_v/W", "l22_v/b", "norm22_v/N",
            "l23_v/W", "l24_v/b"} <= set(flat)
    # bookgen's own writer of the naming agrees with dlshogi's rule
    state = sharp_state(DlshogiArchitecture("senet", 1, 16, 16, 57, 4), 2)
    assert state_to_npz(state).keys() == dlshogi_npz_names(state).keys()


def test_npz_and_checkpoint_evaluate_as_the_reference(case, boards: list) -> None:  # type: ignore[no-untyped-def]
    arch, name, state, directory = case
    expected = reference_evaluations(arch, state, boards)
    for file in ("model.npz", "checkpoint.pth"):
        with TorchEvaluator(directory / file, batch_size=16, dlshogi_network=name) as evaluator:
            assert evaluator.input2 == arch.input2
            evaluations_agree(expected, evaluator.evaluate(boards))
    inferred = load_network(directory / "model.npz", name).architecture
    assert inferred == arch
    info = model_info(directory / "model.npz", name)
    assert (info["format"], info["blocks"], info["channels"]) == ("dlshogi", arch.blocks,
                                                                  arch.channels)
    assert info["inputs"]["input2"] == ["N", arch.input2, 9, 9]


def test_onnx_export_with_dlshogis_names_evaluates_alike(case, boards: list) -> None:  # type: ignore[no-untyped-def]
    arch, name, state, directory = case
    path = directory / "model.onnx"
    export_onnx(directory / "checkpoint.pth", path, network=name)
    proto = onnx.load(str(path))
    assert [i.name for i in proto.graph.input] == ["input1", "input2"]
    assert [o.name for o in proto.graph.output] == ["output_policy", "output_value"]
    assert proto.graph.input[1].type.tensor_type.shape.dim[1].dim_value == arch.input2
    assert proto.graph.input[0].type.tensor_type.shape.dim[0].dim_param  # dynamic batch
    expected = reference_evaluations(arch, state, boards)
    with OnnxEvaluator(path, batch_size=7) as evaluator:
        assert evaluator.input2 == arch.input2
        evaluations_agree(expected, evaluator.evaluate(boards))


def test_fp16_onnx_evaluates_within_tolerance_of_fp32(case, boards: list) -> None:  # type: ignore[no-untyped-def]
    arch, name, state, directory = case
    path = directory / "model16.onnx"
    export_onnx(directory / "model.npz", path, network=name, fp16=True)
    proto = onnx.load(str(path))
    assert proto.graph.input[0].type.tensor_type.elem_type == onnx.TensorProto.FLOAT16
    assert proto.graph.output[1].type.tensor_type.elem_type == onnx.TensorProto.FLOAT16
    expected = reference_evaluations(arch, state, boards)
    with OnnxEvaluator(path, batch_size=16, device="cpu") as evaluator:
        found = evaluator.evaluate(boards)
    # fp16 keeps about 3 significant digits: on these sharp random networks the
    # priors move by up to a few hundredths, the values by less than 0.02.
    evaluations_agree(expected, found, tolerance=0.02, prior_tolerance=0.05)
    assert any(abs(a.value - b.value) > 0 for a, b in zip(expected, found))  # really fp16


def test_nyugyoku_features_are_set_for_each_batch_and_put_back(boards: list) -> None:
    plain57, _ = CASES["resnet_relu"][0], None
    f1, f2 = features(boards[:3], 119)
    cshogi.dlshogi.use_nyugyoku_features(True)
    try:
        one1, one2 = np.zeros((62, 9, 9), np.float32), np.zeros((119, 9, 9), np.float32)
        cshogi.dlshogi.make_input_features(boards[2], one1, one2)
    finally:
        cshogi.dlshogi.use_nyugyoku_features(False)
    assert np.array_equal(f2[2], one2) and np.array_equal(f1[2], one1)
    g1, g2 = features(boards[:3])
    assert g2.shape[1] == plain57.input2 and np.array_equal(g1, f1)
    assert np.array_equal(g2, f2[:, :57])  # the extra planes come after the usual 57
    with pytest.raises(ValueError):
        features(boards[:1], 60)


def test_dlshogi_names_must_match_the_weights(case) -> None:  # type: ignore[no-untyped-def]
    arch, name, state, directory = case
    wrong = "resnet10_swish" if arch.family != "resnet10_swish" else "wideresnet10"
    with pytest.raises(BookgenError, match="not " + wrong):
        load_network(directory / "model.npz", wrong)
    with pytest.raises(SettingsError, match="not a dlshogi network name"):
        TorchEvaluator(directory / "model.npz", dlshogi_network="resnet")


def test_bad_dlshogi_files_are_one_line_errors(tmp_path: Path) -> None:
    arch = DlshogiArchitecture("resnet", 1, 8, 16, 57)
    state = sharp_state(arch, 5)
    arrays = dlshogi_npz_names(state)
    cases: dict[str, tuple[object, str]] = {
        "missing.npz": ({k: v for k, v in arrays.items() if k != "value_fc2/b"},
                        "missing \\['value_fc2.bias'\\]"),
        "planes.npz": ({**arrays, "l1_2/W": np.zeros((8, 60, 1, 1), np.float32)},
                       "60 planes; expected 62 and one of 57 or 119"),
        "shape.npz": ({**arrays, "value_fc2/W": np.zeros((2, 16), np.float32)},
                      "value_fc2.weight has shape \\(2, 16\\)"),
        "nan.npz": ({**arrays, "policy_bias/b": np.full(2187, np.nan, np.float32)}, "NaN"),
        "other.npz": ({"x/W": np.zeros(3, np.float32)}, "no l1_1_1/l1_2 convolutions"),
        "objects.npz": ({**arrays, "extra": np.array([{"a": 1}], dtype=object)},
                        "not a readable .npz"),
    }
    for file, (content, words) in cases.items():
        np.savez(tmp_path / file, **content)  # type: ignore[arg-type]
        with pytest.raises(BookgenError, match=words) as caught:
            TorchEvaluator(tmp_path / file)
        assert "\n" not in str(caught.value) and str(tmp_path / file) in str(caught.value)
    np.savez(tmp_path / "aux.npz", **arrays, **{"policy_aux/W": np.zeros(3, np.float32)})
    assert load_network(tmp_path / "aux.npz").architecture == arch  # _aux heads ignored
    torch.save({"epoch": 1, "optimizer": {}}, tmp_path / "nomodel.pth")
    torch.save({"model": {"x.weight": torch.zeros(2)}}, tmp_path / "odd.pth")
    for file, words in (("nomodel.pth", "a dict with keys \\['epoch', 'optimizer'\\]; "
                                        "expected a bookgen model file"),
                        ("odd.pth", "no l1_1_1/l1_2 convolutions")):
        with pytest.raises(BookgenError, match=words):
            load_network(tmp_path / file)
    result = CliRunner().invoke(cli, ["model", "info", str(tmp_path / "planes.npz")])
    assert result.exit_code == 2 and len(result.stderr.strip().splitlines()) == 1


def test_model_commands_read_dlshogi_files(case) -> None:  # type: ignore[no-untyped-def]
    arch, name, state, directory = case
    runner = CliRunner()
    extra = ["--dlshogi-network", name] if name else []
    result = runner.invoke(cli, ["model", "info", str(directory / "model.npz"), *extra])
    assert result.exit_code == 0, result.stderr
    assert f"dlshogi:       {load_network(directory / 'model.npz', name).architecture.name}" \
        in result.stdout
    output = directory / "cli16.onnx"
    result = runner.invoke(cli, ["model", "export-onnx", str(directory / "checkpoint.pth"),
                                 "-o", str(output), "--fp16", "--json", *extra])
    assert result.exit_code == 0, result.stderr
    exported = onnx.load(str(output)).graph.input[1].type.tensor_type
    assert exported.shape.dim[1].dim_value == arch.input2
    assert exported.elem_type == onnx.TensorProto.FLOAT16
    result = runner.invoke(cli, ["model", "export-onnx", str(directory / "model.npz"),
                                 "-o", str(directory / "x.onnx"), "--dlshogi-network", "vit"])
    assert result.exit_code == 2 and "--dlshogi-network 'vit' is not a dlshogi network " \
        "name" in result.stderr
    assert not (directory / "x.onnx").exists()
