"""Where networks run: devices, fp16, onnxruntime providers, and their errors.

No GPU exists where these tests run. The choice of device and providers is
tested from what torch and onnxruntime would report (a fake ``torch.cuda``, a
fake list of providers: fault injection); the CPU paths run for real, and so do
the errors for a GPU that is asked for but absent (this torch is a CPU build,
this onnxruntime offers no CUDA provider).
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from types import SimpleNamespace

import cshogi
import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch
from click.testing import CliRunner

from bookgen.cli import main as cli
from bookgen.engines.factory import make_evaluator
from bookgen.engines.network.analyser import OnnxEvaluator, TorchEvaluator
from bookgen.engines.network.device import (
    GPU_INSTALL,
    NetworkSettings,
    onnx_providers,
    parse_providers,
    torch_device,
)
from bookgen.engines.network.model import export_onnx, init_model
from bookgen.engines.settings import EngineSettings
from bookgen.engines.spec import parse_spec
from bookgen.errors import BookgenError, SettingsError
from conftest import random_positions

TRT, CUDA, CPU = "TensorrtExecutionProvider", "CUDAExecutionProvider", "CPUExecutionProvider"


def fake_cuda(count: int) -> SimpleNamespace:
    return SimpleNamespace(is_available=lambda: count > 0, device_count=lambda: count)


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("devices") / "m.pt"
    init_model(path, blocks=1, channels=8, seed=3)
    return path


@pytest.fixture(scope="module")
def onnx_model(model: Path) -> Path:
    path = model.with_suffix(".onnx")
    export_onnx(model, path)
    return path


@pytest.fixture(scope="module")
def boards() -> list[cshogi.Board]:
    return [cshogi.Board(), *random_positions(seed=4, count=20, max_plies=80)]


def one_line(text: str) -> str:
    lines = text.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("bookgen: error: "), text
    return lines[0]


# --------------------------------------------------------------------------
# the settings


@pytest.mark.parametrize("device", ["gpu", "cuda:", "cuda:x", "cuda:01", "CPU", "cuda0", ""])
def test_bad_devices_name_the_field(device: str) -> None:
    with pytest.raises(SettingsError) as caught:
        NetworkSettings(device=device)
    assert caught.value.field == "network.device"
    assert "auto (CUDA when present), cpu, cuda or cuda:N" in str(caught.value)


def test_settings_refuse_contradictions() -> None:
    for fields, field in (({"device": "cpu", "providers": ("cuda",)}, "network.providers"),
                          ({"device": "cuda", "providers": ("cpu",)}, "network.providers"),
                          ({"device": "cpu", "fp16": True}, "network.fp16"),
                          ({"providers": ("cpu",), "fp16": True}, "network.fp16"),
                          ({"providers": ("opencl",)}, "network.providers"),
                          ({"dlshogi_network": "transformer12"}, "network.dlshogi_network")):
        with pytest.raises(SettingsError) as caught:
            NetworkSettings(**fields)  # type: ignore[arg-type]
        assert caught.value.field == field, fields


def test_options_are_only_what_differs_from_the_defaults() -> None:
    assert NetworkSettings().options() == {}
    settings = NetworkSettings(device="cuda:1", fp16=True, providers=("tensorrt", "CUDA"),
                               trt_cache="cache", dlshogi_network="resnet10_swish")
    assert settings.providers == (TRT, CUDA)
    assert settings.options() == {"device": "cuda:1", "fp16": True,
                                  "providers": f"{TRT},{CUDA}", "trt_cache": "cache",
                                  "dlshogi_network": "resnet10_swish"}
    assert parse_providers("cuda, cpu,cuda") == (CUDA, CPU)
    # The same settings, from their options, as every evaluator receives them.
    assert NetworkSettings(**{**settings.options(),
                              "providers": parse_providers(settings.options()["providers"])}
                           ) == settings


def test_engine_settings_carry_the_network_to_the_evaluator_only() -> None:
    network = NetworkSettings(device="cpu")
    for spec in ("torch:m.pt", "onnx:m.onnx", "blend:b.db:onnx:m.onnx"):
        settings = EngineSettings(parse_spec(spec), batch_size=8, network=network)
        assert settings.evaluator_options() == {"batch_size": 8, "device": "cpu"}
        assert "device" not in json.dumps(settings.key())  # not part of the analysis key
    for spec in ("builtin", "usi:engine"):
        with pytest.raises(SettingsError, match="torch: and onnx: evaluators only"):
            EngineSettings(parse_spec(spec), network=network)
    assert EngineSettings(parse_spec("torch:m.pt")).evaluator_options() == {}


# --------------------------------------------------------------------------
# torch's device, from what torch.cuda reports


def test_torch_device_choice() -> None:
    auto, cuda, cuda1 = (NetworkSettings(device=d) for d in ("auto", "cuda", "cuda:1"))
    cpu_build = (fake_cuda(0), None)
    assert torch_device(auto, *cpu_build) == "cpu"
    assert torch_device(NetworkSettings(device="cpu"), fake_cuda(2), "12.4") == "cpu"
    assert torch_device(auto, fake_cuda(0), "12.4") == "cpu"
    assert torch_device(auto, fake_cuda(2), "12.4") == "cuda:0"
    assert torch_device(cuda, fake_cuda(1), "12.4") == "cuda:0"
    assert torch_device(cuda1, fake_cuda(2), "12.4") == "cuda:1"
    assert torch_device(NetworkSettings(fp16=True), fake_cuda(1), "12.4") == "cuda:0"


def test_torch_device_asked_for_but_absent() -> None:
    cases = [(NetworkSettings(device="cuda"), fake_cuda(0), None, "CPU build"),
             (NetworkSettings(fp16=True), fake_cuda(0), None, "CPU build"),
             (NetworkSettings(device="cuda"), fake_cuda(0), "12.4", "finds no GPU"),
             (NetworkSettings(device="cuda:2"), fake_cuda(2), "12.4", "cuda:0 to cuda:1"),
             (NetworkSettings(providers=("cpu",)), fake_cuda(0), None, "onnx: models only")]
    for settings, cuda, build, words in cases:
        with pytest.raises(BookgenError, match=words) as caught:
            torch_device(settings, cuda, build)
        assert "\n" not in str(caught.value)
    with pytest.raises(BookgenError, match=r"bookgen\[gpu\]"):
        torch_device(NetworkSettings(device="cuda"), fake_cuda(0), None)


# --------------------------------------------------------------------------
# onnxruntime's providers, from a list of offered ones


def test_onnx_provider_choice() -> None:
    gpu = [TRT, CUDA, CPU]
    names = lambda settings, offered: [n for n, _ in onnx_providers(settings, offered)]  # noqa: E731
    assert names(NetworkSettings(), [CPU]) == [CPU]
    assert names(NetworkSettings(), ["AzureExecutionProvider", CPU]) == [CPU]
    assert names(NetworkSettings(), gpu) == gpu
    assert names(NetworkSettings(), [CUDA, CPU]) == [CUDA, CPU]
    assert names(NetworkSettings(device="cpu"), gpu) == [CPU]
    assert names(NetworkSettings(device="cuda"), gpu) == gpu
    assert names(NetworkSettings(providers=("cuda",)), gpu) == [CUDA, CPU]
    assert names(NetworkSettings(providers=("cpu",)), gpu) == [CPU]
    chosen = dict(onnx_providers(NetworkSettings(device="cuda:1", fp16=True, trt_cache="c"),
                                 gpu))
    assert chosen[TRT] == {"device_id": 1, "trt_fp16_enable": True,
                           "trt_engine_cache_enable": True, "trt_engine_cache_path": "c"}
    assert chosen[CUDA] == {"device_id": 1} and chosen[CPU] == {}
    assert dict(onnx_providers(NetworkSettings(), gpu))[TRT] == {"device_id": 0,
                                                                "trt_fp16_enable": False}


def test_onnx_provider_asked_for_but_not_offered() -> None:
    cpu_only = ["AzureExecutionProvider", CPU]
    for settings in (NetworkSettings(device="cuda"), NetworkSettings(device="cuda:0"),
                     NetworkSettings(fp16=True), NetworkSettings(providers=("tensorrt",)),
                     NetworkSettings(providers=("cuda", "cpu"))):
        with pytest.raises(BookgenError, match="offers only AzureExecutionProvider, "
                                               "CPUExecutionProvider") as caught:
            onnx_providers(settings, cpu_only)
        assert GPU_INSTALL in str(caught.value) and "\n" not in str(caught.value)
    with pytest.raises(BookgenError, match="TensorrtExecutionProvider asked for"):
        onnx_providers(NetworkSettings(providers=("tensorrt",)), [CUDA, CPU])
    with pytest.raises(BookgenError, match="torch: models"):
        onnx_providers(NetworkSettings(dlshogi_network="resnet10_swish"), [CPU])


# --------------------------------------------------------------------------
# the evaluators on this machine


def test_cpu_and_auto_evaluate_alike_on_the_cpu(model: Path, onnx_model: Path,
                                                boards: list[cshogi.Board]) -> None:
    for make, path in ((TorchEvaluator, model), (OnnxEvaluator, onnx_model)):
        with make(path, batch_size=8, device="cpu") as cpu, make(path, batch_size=8) as auto:
            assert cpu.device_name.startswith("cpu") and auto.device_name.startswith("cpu")
            for a, b in zip(cpu.evaluate(boards), auto.evaluate(boards)):
                assert a.moves == b.moves and a.value == b.value and a.priors == b.priors


def test_a_gpu_asked_for_here_is_an_error(model: Path, onnx_model: Path) -> None:
    # Real: this torch is a CPU build and this onnxruntime has no CUDA provider.
    assert torch.version.cuda is None and CUDA not in ort.get_available_providers()
    for device in ("cuda", "cuda:1"):
        with pytest.raises(BookgenError, match="CPU build"):
            TorchEvaluator(model, device=device)
        with pytest.raises(BookgenError, match="offers only"):
            OnnxEvaluator(onnx_model, device=device)
    with pytest.raises(BookgenError, match="offers only"):
        make_evaluator(f"onnx:{onnx_model}", providers="tensorrt,cuda")
    with pytest.raises(SettingsError, match="needs a GPU"):
        TorchEvaluator(model, device="cpu", fp16=True)
    with pytest.raises(BookgenError, match="onnx: models only"):
        TorchEvaluator(model, trt_cache="cache")


def test_a_gpu_provider_that_does_not_start_is_an_error(
        onnx_model: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """onnxruntime offers CUDA (faked) but cannot start it: it would quietly run on
    the CPU, which bookgen refuses when a GPU was asked for."""
    monkeypatch.setattr(ort, "get_available_providers", lambda: [TRT, CUDA, CPU])
    for fields in ({"device": "cuda"}, {"providers": "cuda"}, {"providers": "tensorrt,cpu"}):
        with pytest.raises(BookgenError, match="could not start") as caught:
            OnnxEvaluator(onnx_model, **fields)  # type: ignore[arg-type]
        assert "would run on CPUExecutionProvider" in str(caught.value)
    with OnnxEvaluator(onnx_model) as evaluator:  # auto takes what starts
        assert evaluator.device_name.startswith("cpu")


def test_torch_on_a_cuda_it_cannot_use_is_an_error(model: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """torch says CUDA is there (faked) but cannot put the model on it."""
    monkeypatch.setattr(torch.version, "cuda", "12.4")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    with pytest.raises(BookgenError, match="cannot put the network on cuda:0") as caught:
        TorchEvaluator(model, device="cuda")
    assert "\n" not in str(caught.value)


def test_fp16_onnx_conversion_evaluates_close_to_fp32(onnx_model: Path,
                                                      boards: list[cshogi.Board]) -> None:
    """--fp16 converts a float32 model's weights to float16 (run on the CPU here)."""
    half = OnnxEvaluator._half_model(onnx_model)
    proto = onnx.load_from_string(half)
    assert {i.data_type for i in proto.graph.initializer} >= {onnx.TensorProto.FLOAT16}
    assert proto.graph.input[0].type.tensor_type.elem_type == onnx.TensorProto.FLOAT
    session = ort.InferenceSession(half, providers=[CPU])
    with OnnxEvaluator(onnx_model, batch_size=32) as full:
        from bookgen.engines.network.features import features

        f1, f2 = features(boards)
        policy, value = session.run(None, {"input1": f1, "input2": f2})
        policy32, value32 = full._run(f1, f2)
    assert np.abs(policy - policy32).max() < 0.05
    assert np.abs(value.reshape(-1) - value32).max() < 0.01


# --------------------------------------------------------------------------
# the command line


def invoke(*args: object) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, [str(a) for a in args])
    return result.exit_code, result.stdout, result.stderr


def test_grow_device_flags(tmp_path: Path, model: Path, onnx_model: Path) -> None:
    book = tmp_path / "book.db"
    common = ("grow", "-b", book, "--playouts", 8, "--positions", 2, "--json")
    code, _, err = invoke(*common, "--evaluator", f"torch:{model}", "--device", "cuda")
    assert code == 2 and "CPU build" in one_line(err) and not book.exists()
    code, _, err = invoke(*common, "--evaluator", f"onnx:{onnx_model}", "--providers", "cuda")
    assert code == 2 and "offers only" in one_line(err) and not book.exists()
    code, _, err = invoke(*common, "--evaluator", "builtin", "--device", "cpu")
    assert code == 2 and "--device applies to torch: and onnx:" in one_line(err)
    code, _, err = invoke(*common, "--evaluator", f"torch:{model}", "--device", "gpu")
    assert code == 2 and "--device must be auto" in one_line(err)
    code, _, err = invoke(*common, "--evaluator", f"torch:{model}", "--device", "cpu",
                          "--fp16")
    assert code == 2 and "--fp16 needs a GPU" in one_line(err)
    code, _, err = invoke(*common, "--evaluator", f"onnx:{onnx_model}", "--device", "cpu")
    assert code == 0, err
    blended = tmp_path / "blended.db"
    code, _, err = invoke("grow", "-b", blended, "--playouts", 8, "--positions", 2,
                          "--evaluator", f"blend:{book}:torch:{model}", "--device", "cpu")
    assert code == 0, err
    for path in (book, blended):
        with sqlite3.connect(path) as db:
            params = json.loads(db.execute("SELECT params FROM runs").fetchone()[0])
        assert params["evaluator_options"]["device"] == "cpu", params


def test_selfplay_and_refine_take_the_device(tmp_path: Path, model: Path) -> None:
    starts = tmp_path / "starts.txt"
    starts.write_text("startpos\n")
    out = tmp_path / "games.hcpe"
    common = ("selfplay", "--starts", starts, "--games", 1, "-o", out, "--playouts", 4,
              "--max-ply", 6)
    code, _, err = invoke(*common, "--player", f"torch:{model}", "--device", "cuda")
    assert code == 2 and "CPU build" in one_line(err) and not out.exists()
    code, _, err = invoke(*common, "--player", "mcts:builtin", "--device", "cpu")
    assert code == 2 and "--device applies to torch: and onnx: players only" in one_line(err)
    code, _, err = invoke(*common, "--player", f"torch:{model}", "--device", "cpu")
    assert code == 0 and out.exists(), err
    # The network's options reach the network player only, not an mcts:builtin opponent.
    code, _, err = invoke(*common, "--black", f"torch:{model}", "--white", "mcts:builtin",
                          "--batch-size", 4, "--device", "cpu", "--force")
    assert code == 0, err
    code, _, err = invoke("refine", "mistakes", "-b", tmp_path / "none.db", "--iterate",
                          "--evaluator", "builtin", "--device", "cuda")
    assert code == 2 and "--device applies to torch: and onnx:" in one_line(err)


def test_model_bench_prints_the_device_and_each_batch(model: Path, onnx_model: Path) -> None:
    from bookgen.engines.network.bench import BenchSettings, bench_model

    seen: list[tuple[str, int]] = []
    summary = bench_model(onnx_model, BenchSettings(batches=(1, 3), seconds=0.01, repeats=1,
                                                    network=NetworkSettings(device="cpu")),
                          lambda device, row: seen.append((device, row.batch)))
    assert summary.runtime == "onnx" and summary.device.startswith("cpu, onnxruntime")
    assert seen == [(summary.device, 1), (summary.device, 3)]
    assert all(r.network_per_second > 0 and r.evaluate_per_second > 0 for r in summary.rows)
    code, out, err = invoke("model", "bench", model, "--batches", "2", "--seconds", 0.01,
                            "--repeats", 1)
    assert code == 0, err
    lines = out.splitlines()
    assert lines[:2] == [f"model: {model}", "device: cpu"] and lines[3].split()[0] == "2"
    code, out, err = invoke("model", "bench", model, "--batches", "1,2", "--seconds", 0.01,
                            "--repeats", 1, "--json")
    assert code == 0 and [r["batch"] for r in json.loads(out)["rows"]] == [1, 2]
    code, _, err = invoke("model", "bench", model, "--device", "cuda")
    assert code == 2 and "CPU build" in one_line(err)
    code, _, err = invoke("model", "bench", model, "--batches", "0")
    assert code == 2 and "--batches must be at least 1" in one_line(err)
    code, _, err = invoke("model", "bench", model, "--batches", "a,b")
    assert code == 2 and "comma-separated" in err
