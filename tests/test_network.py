"""dlshogi-shaped networks: model files, the ``model`` CLI group, torch and ONNX evaluators.

Everything runs on real files: models are created with ``bookgen model init``
through click's runner, exported with ``bookgen model export-onnx`` and read
back by the evaluators. Small models (2 blocks x 16 channels) keep it fast.
"""

from __future__ import annotations

import json
import math
import pickle
import warnings
from pathlib import Path

import cshogi
import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch
from click.testing import CliRunner

from bookgen.cli.model import model_group
from bookgen.engines.factory import make_evaluator
from bookgen.engines.network.analyser import OnnxEvaluator, TorchEvaluator
from bookgen.engines.network.features import (
    FEATURES1_NUM,
    FEATURES2_NUM,
    MOVE_LABELS,
    features,
    legal_move_labels,
)
from bookgen.engines.network.model import (
    MODEL_FORMAT,
    PolicyValueNetwork,
    load_model,
    parameter_count,
    save_model,
)
from bookgen.engines.protocols import EvaluatorError
from bookgen.errors import BookgenError
from conftest import legal_usis, random_positions, run_script

MATED = "4k4/4G4/4G4/9/9/9/9/9/4K4 w - 1"  # white to move, no legal moves
TOLERANCE = 1e-4


def run(*args: object, expect: int = 0):
    """``bookgen model ARGS`` through click's runner; checks the exit code."""
    result = CliRunner().invoke(model_group, [str(a) for a in args])
    assert result.exit_code == expect, (
        f"model {' '.join(map(str, args))}: exit {result.exit_code}\n{result.stdout}\n"
        f"{result.stderr}\n{result.exception!r}")
    return result


def one_line_error(result) -> str:  # type: ignore[no-untyped-def]
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("bookgen: error: "), result.stderr
    return lines[0]


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("network")


@pytest.fixture(scope="module")
def small_model(workdir: Path) -> Path:
    """A 2 x 16 model written by ``bookgen model init``."""
    path = workdir / "small.pt"
    run("init", "-o", path, "--blocks", 2, "--channels", 16, "--seed", 7)
    return path


@pytest.fixture(scope="module")
def sharp_model(workdir: Path, small_model: Path) -> Path:
    """The small model with non-trivial batch-norm statistics and sharper heads.

    Freshly initialised networks give nearly uniform priors and values near
    0.5, which would make torch/ONNX agreement tests too easy.
    """
    model = load_model(small_model)
    generator = torch.Generator().manual_seed(3)
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, torch.nn.BatchNorm2d):
                n = module.num_features
                module.running_mean.copy_(0.2 * torch.randn(n, generator=generator))
                module.running_var.copy_(0.5 + torch.rand(n, generator=generator))
                module.weight.copy_(1 + 0.3 * torch.randn(n, generator=generator))
                module.bias.copy_(0.2 * torch.randn(n, generator=generator))
        model.policy_conv.weight.mul_(40)
        model.policy_bias.copy_(torch.randn(MOVE_LABELS, generator=generator))
        model.value_fc2.weight.mul_(30)
    path = small_model.with_name("sharp.pt")
    save_model(model, path)
    return path


@pytest.fixture(scope="module")
def sharp_onnx(sharp_model: Path) -> Path:
    path = sharp_model.with_suffix(".onnx")
    run("export-onnx", sharp_model, "-o", path)
    return path


@pytest.fixture(scope="module")
def boards() -> list[cshogi.Board]:
    """Start position, 69 random positions (with pieces in hand) and a mated one."""
    return [cshogi.Board(), *random_positions(seed=11, count=69, max_plies=120),
            cshogi.Board(MATED)]


def assert_close(a: list, b: list, tolerance: float = TOLERANCE) -> None:
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert x.moves == y.moves
        assert abs(x.value - y.value) <= tolerance, (x.value, y.value)
        assert np.allclose(x.priors, y.priors, rtol=0, atol=tolerance), \
            np.abs(np.array(x.priors) - np.array(y.priors)).max()


# --------------------------------------------------------------------------
# features and labels


def test_features_are_batched_float32_planes(boards: list[cshogi.Board]) -> None:
    f1, f2 = features(boards)
    assert f1.shape == (len(boards), FEATURES1_NUM, 9, 9) and f1.dtype == np.float32
    assert f2.shape == (len(boards), FEATURES2_NUM, 9, 9) and f2.dtype == np.float32
    assert f1.flags.c_contiguous and f2.flags.c_contiguous
    for i in (0, 5, len(boards) - 1):
        one1 = np.zeros((FEATURES1_NUM, 9, 9), np.float32)
        one2 = np.zeros((FEATURES2_NUM, 9, 9), np.float32)
        cshogi.dlshogi.make_input_features(boards[i], one1, one2)
        assert np.array_equal(f1[i], one1) and np.array_equal(f2[i], one2)
    assert set(np.unique(f1)) <= {0.0, 1.0}
    assert features([])[0].shape == (0, FEATURES1_NUM, 9, 9)


def test_legal_move_labels_are_distinct_and_in_range(boards: list[cshogi.Board]) -> None:
    for board in boards:
        moves, labels = legal_move_labels(board)
        assert moves == list(board.legal_moves)
        assert labels.dtype == np.int64 and len(labels) == len(moves)
        assert len(set(labels.tolist())) == len(moves)
        assert all(0 <= label < MOVE_LABELS for label in labels)


# --------------------------------------------------------------------------
# the CLI group and model files


def test_init_info_and_determinism(workdir: Path, small_model: Path) -> None:
    model = load_model(small_model)
    assert (model.blocks_count, model.channels) == (2, 16)
    assert not model.training
    info = run("info", small_model).stdout
    assert "blocks:        2" in info and "channels:      16" in info
    assert f"{parameter_count(model):,}" in info

    # Same seed, same weights; another seed, other weights.
    again = workdir / "again.pt"
    run("init", "-o", again, "--blocks", 2, "--channels", 16, "--seed", 7)
    other = workdir / "other.pt"
    run("init", "-o", other, "--blocks", 2, "--channels", 16, "--seed", 8)
    first, second, third = (load_model(p).state_dict() for p in (small_model, again, other))
    assert all(torch.equal(first[k], second[k]) for k in first)
    assert not torch.equal(first["stem_board.weight"], third["stem_board.weight"])

    # The file is a plain dict: architecture plus state dict.
    payload = torch.load(small_model, weights_only=True)
    assert payload["format"] == MODEL_FORMAT
    assert (payload["blocks"], payload["channels"]) == (2, 16)

    # An existing model is not overwritten without --force.
    before = again.read_bytes()
    line = one_line_error(run("init", "-o", again, "--seed", 9, expect=2))
    assert "already exists" in line and again.read_bytes() == before
    run("init", "-o", again, "--blocks", 1, "--channels", 8, "--force")
    assert load_model(again).channels == 8


def test_default_model_has_the_reference_size(workdir: Path) -> None:
    path = workdir / "default.pt"
    out = run("init", "-o", path).stdout
    model = load_model(path)
    assert (model.blocks_count, model.channels) == (5, 64)
    assert 0.95e6 < parameter_count(model) < 1.0e6  # the reference note's ~0.98 M
    assert f"{parameter_count(model):,} parameters" in out


def test_export_onnx_layout(sharp_model: Path, sharp_onnx: Path) -> None:
    proto = onnx.load(str(sharp_onnx))
    onnx.checker.check_model(proto)
    initializers = {i.name for i in proto.graph.initializer}
    inputs = [i for i in proto.graph.input if i.name not in initializers]
    assert [i.name for i in inputs] == ["input1", "input2"]
    assert [o.name for o in proto.graph.output] == ["output_policy", "output_value"]
    for value, tail in zip([*inputs, *proto.graph.output],
                           ([62, 9, 9], [57, 9, 9], [2187], [1])):
        dims = value.type.tensor_type.shape.dim
        assert dims[0].dim_param and not dims[0].dim_value  # dynamic batch
        assert [d.dim_value for d in dims[1:]] == tail
    info = run("info", sharp_onnx).stdout
    assert "blocks:        2" in info and "output_policy:" in info

    # output_value is the sigmoid of the torch value logit; policy stays logits.
    model = load_model(sharp_model)
    f1, f2 = features(random_positions(seed=5, count=9))
    session = ort.InferenceSession(str(sharp_onnx), providers=["CPUExecutionProvider"])
    policy, value = session.run(None, {"input1": f1, "input2": f2})
    with torch.inference_mode():
        torch_policy, torch_logit = model(torch.from_numpy(f1), torch.from_numpy(f2))
    assert np.allclose(policy, torch_policy.numpy(), atol=TOLERANCE, rtol=0)
    assert np.allclose(value, torch.sigmoid(torch_logit).numpy(), atol=TOLERANCE, rtol=0)
    assert value.shape == (9, 1)


# --------------------------------------------------------------------------
# evaluators


def test_torch_evaluator_on_startpos_and_random_positions(small_model: Path,
                                                          boards: list[cshogi.Board]) -> None:
    sfens = [b.sfen() for b in boards]
    with make_evaluator(f"torch:{small_model}") as evaluator:
        assert isinstance(evaluator, TorchEvaluator)
        assert evaluator.spec == f"torch:{small_model}"
        results = evaluator.evaluate(boards)
        again = evaluator.evaluate(boards)
    assert [b.sfen() for b in boards] == sfens  # boards untouched
    assert len(results) == len(boards)
    for board, evaluation in zip(boards, results):
        assert evaluation.moves == legal_usis(board)
        if not evaluation.moves:  # mated: the last board, maybe some random ones
            assert (evaluation.priors, evaluation.value) == ([], 0.0)
            continue
        assert len(evaluation.priors) == len(evaluation.moves)
        assert math.isclose(sum(evaluation.priors), 1.0, abs_tol=1e-9)
        assert all(p > 0 for p in evaluation.priors)
        assert 0.0 < evaluation.value < 1.0
        assert evaluation.move_values is None
    assert results[-1].moves == []
    assert [(r.moves, r.priors, r.value) for r in results] == \
        [(r.moves, r.priors, r.value) for r in again]
    # A fresh process-level load gives the same numbers too.
    with TorchEvaluator(small_model) as fresh:
        assert [r.priors for r in fresh.evaluate(boards[:5])] == [r.priors for r in results[:5]]


def test_priors_are_softmax_over_legal_logits(sharp_model: Path) -> None:
    board = random_positions(seed=21, count=1, max_plies=40)[0]
    model = load_model(sharp_model)
    f1, f2 = features([board])
    with torch.inference_mode():
        policy, logit = model(torch.from_numpy(f1), torch.from_numpy(f2))
    logits = policy[0].double().numpy()
    moves = list(board.legal_moves)
    chosen = np.array([logits[cshogi.dlshogi.make_move_label(m, board.turn)] for m in moves])
    expected = np.exp(chosen - chosen.max())
    expected /= expected.sum()
    with TorchEvaluator(sharp_model) as evaluator:
        (evaluation,) = evaluator.evaluate([board])
    assert evaluation.moves == [cshogi.move_to_usi(m) for m in moves]
    assert np.allclose(evaluation.priors, expected, atol=1e-6, rtol=0)
    assert math.isclose(evaluation.value, float(torch.sigmoid(logit)), abs_tol=1e-6)
    assert max(evaluation.priors) > 3 / len(moves)  # the sharpened head is far from uniform


def test_batch_of_one_and_of_64_agree(sharp_model: Path, sharp_onnx: Path,
                                      boards: list[cshogi.Board]) -> None:
    with TorchEvaluator(sharp_model, batch_size=1) as one, \
            TorchEvaluator(sharp_model, batch_size=64) as many:
        assert_close(one.evaluate(boards), many.evaluate(boards), 1e-5)
    with OnnxEvaluator(sharp_onnx, batch_size=1) as one, \
            OnnxEvaluator(sharp_onnx, batch_size=64) as many:
        assert_close(one.evaluate(boards), many.evaluate(boards), 1e-5)


def test_onnx_and_torch_evaluations_agree(sharp_model: Path, sharp_onnx: Path,
                                          boards: list[cshogi.Board]) -> None:
    with make_evaluator(f"torch:{sharp_model}") as torch_evaluator, \
            make_evaluator(f"onnx:{sharp_onnx}", batch_size=32, threads=1) as onnx_evaluator:
        assert isinstance(onnx_evaluator, OnnxEvaluator)
        assert onnx_evaluator.spec == f"onnx:{sharp_onnx}"
        from_torch = torch_evaluator.evaluate(boards)
        from_onnx = onnx_evaluator.evaluate(boards)
    assert_close(from_torch, from_onnx)
    values = [e.value for e in from_torch if e.moves]
    assert max(values) - min(values) > 0.05  # not all 0.5: the comparison means something
    assert from_onnx[-1].value == 0.0 and from_onnx[-1].moves == []


WITHOUT_TORCH = """
import json
import sys


class NoTorch:
    def find_spec(self, name, path=None, target=None):
        if name == "torch" or name.startswith("torch."):
            raise ImportError(f"{name} is blocked in this test")
        return None


sys.meta_path.insert(0, NoTorch())
import cshogi

import bookgen.engines.network.features
assert "torch" not in sys.modules
from bookgen.engines.factory import make_evaluator

with make_evaluator("onnx:" + sys.argv[1], batch_size=8, threads=1) as evaluator:
    (evaluation,) = evaluator.evaluate([cshogi.Board()])
assert "torch" not in sys.modules
print(json.dumps({"moves": evaluation.moves, "priors": evaluation.priors,
                  "value": evaluation.value}))
"""


def test_onnx_evaluator_works_without_torch(tmp_path: Path, sharp_onnx: Path) -> None:
    """The ONNX evaluator and the features never import torch: with torch blocked
    from import, an onnx: evaluator gives the same evaluation as here."""
    proc = run_script(tmp_path, WITHOUT_TORCH, sharp_onnx)
    alone = json.loads(proc.stdout.strip().splitlines()[-1])
    with OnnxEvaluator(sharp_onnx, batch_size=8, threads=1) as evaluator:
        (here,) = evaluator.evaluate([cshogi.Board()])
    assert alone["moves"] == here.moves and len(here.moves) == 30
    assert np.allclose(alone["priors"], here.priors, rtol=0, atol=1e-6)
    assert abs(alone["value"] - here.value) <= 1e-6


def test_onnx_with_a_fixed_batch_size_is_padded(workdir: Path, sharp_model: Path,
                                                boards: list[cshogi.Board]) -> None:
    path = workdir / "fixed4.onnx"
    model = load_model(sharp_model)

    class WithSigmoid(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, x1: torch.Tensor, x2: torch.Tensor):  # type: ignore[no-untyped-def]
            policy, value = self.model(x1, x2)
            return policy, torch.sigmoid(value)

    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the TorchScript exporter is deprecated
        example = (torch.zeros(4, 62, 9, 9), torch.zeros(4, 57, 9, 9))
        torch.onnx.export(WithSigmoid().eval(), example, str(path), dynamo=False,
                          input_names=["input1", "input2"],
                          output_names=["output_policy", "output_value"])
    with OnnxEvaluator(path, batch_size=64) as fixed, TorchEvaluator(sharp_model) as reference:
        assert fixed.batch_size == 4
        assert_close(fixed.evaluate(boards[:7]), reference.evaluate(boards[:7]))


def test_closed_evaluator_refuses_to_evaluate(small_model: Path, sharp_onnx: Path) -> None:
    for evaluator in (TorchEvaluator(small_model), OnnxEvaluator(sharp_onnx)):
        evaluator.close()
        with pytest.raises(EvaluatorError):
            evaluator.evaluate([cshogi.Board()])
        assert evaluator.evaluate([cshogi.Board(MATED)])[0].value == 0.0  # no network needed


# --------------------------------------------------------------------------
# bad files


def bad_files(directory: Path, good: Path) -> dict[str, Path]:
    """Files that must be refused, by what is wrong with them."""
    directory.mkdir(exist_ok=True)
    files = {name: directory / f"{name}.pt" for name in (
        "text", "empty", "truncated", "wrong_format", "bare_state_dict", "list",
        "mismatched_shapes", "missing_key", "nan_weights", "bad_hyper")}
    files["text"].write_text("sfen lnsgkgsnl/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL b -\n")
    files["empty"].write_bytes(b"")
    data = good.read_bytes()
    files["truncated"].write_bytes(data[:len(data) // 2])
    payload = torch.load(good, weights_only=True)
    torch.save({**payload, "format": "something-else"}, files["wrong_format"])
    torch.save(payload["state_dict"], files["bare_state_dict"])
    torch.save([1, 2, 3], files["list"])
    torch.save({**payload, "channels": 32}, files["mismatched_shapes"])
    state = dict(payload["state_dict"])
    del state["value_fc2.bias"]
    torch.save({**payload, "state_dict": state}, files["missing_key"])
    state = dict(payload["state_dict"])
    state["value_fc2.weight"] = torch.full_like(state["value_fc2.weight"], float("nan"))
    torch.save({**payload, "state_dict": state}, files["nan_weights"])
    torch.save({**payload, "blocks": 10**9}, files["bad_hyper"])
    return files


def test_bad_model_files_give_bookgen_errors(workdir: Path, small_model: Path) -> None:
    files = bad_files(workdir / "bad", small_model)
    files["missing"] = workdir / "bad" / "does-not-exist.pt"
    files["directory"] = workdir / "bad"
    for name, path in files.items():
        with pytest.raises(BookgenError) as caught:
            load_model(path)
        assert str(path) in str(caught.value), name
        with pytest.raises(BookgenError):
            TorchEvaluator(path)
        if name == "directory":
            continue  # click itself refuses a directory (usage error, exit 2)
        one_line_error(run("info", path, expect=2))
        output = workdir / "bad" / f"{name}.onnx"
        one_line_error(run("export-onnx", path, "-o", output, expect=2))
        assert not output.exists()
    assert list((workdir / "bad").glob(".*.tmp")) == []
    expected_words = {"truncated": "truncated", "text": "not a PyTorch model",
                      "bare_state_dict": "bare state dict", "mismatched_shapes": "2x32",
                      "nan_weights": "NaN", "missing_key": "value_fc2.bias",
                      "wrong_format": "something-else"}
    for name, words in expected_words.items():
        with pytest.raises(BookgenError, match=words):
            load_model(files[name])


def test_bad_onnx_files_give_bookgen_errors(workdir: Path, small_model: Path) -> None:
    directory = workdir / "bad_onnx"
    directory.mkdir()
    with pytest.raises(BookgenError, match="no such model file"):
        OnnxEvaluator(directory / "missing.onnx")
    text = directory / "text.onnx"
    text.write_text("not an onnx model\n")
    with pytest.raises(BookgenError):
        OnnxEvaluator(text)
    with pytest.raises(BookgenError):
        OnnxEvaluator(small_model)  # a torch file is not an ONNX model
    # A valid ONNX model with other names.
    from onnx import TensorProto, helper
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 62, 9, 9])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 62, 9, 9])
    graph = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "g", [x], [y])
    other = directory / "other.onnx"
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    proto.ir_version = 8  # what this onnxruntime reads
    onnx.save(proto, str(other))
    with pytest.raises(BookgenError, match="input1"):
        OnnxEvaluator(other)
    with pytest.raises(BookgenError):
        make_evaluator(f"onnx:{text}")
    for bad in ({"batch_size": 0}, {"threads": 0}):
        with pytest.raises(BookgenError):
            TorchEvaluator(small_model, **bad)  # type: ignore[arg-type]


class Exploit:
    """Unpickling this would create a marker file."""

    marker = ""

    def __reduce__(self):  # type: ignore[no-untyped-def]
        return (Path.touch, (Path(self.marker),))


class Plain:
    """An ordinary custom class: no exploit, but still not allowed."""

    def __init__(self) -> None:
        self.weights = [1.0, 2.0]


def test_weights_only_loading_refuses_pickled_objects(workdir: Path) -> None:
    directory = workdir / "pickles"
    directory.mkdir()
    marker = directory / "code-ran"
    Exploit.marker = str(marker)
    raw = directory / "raw.pt"
    with open(raw, "wb") as handle:
        pickle.dump({"format": MODEL_FORMAT, "payload": Exploit()}, handle)
    zipped = directory / "zipped.pt"
    torch.save({"format": MODEL_FORMAT, "version": 1, "blocks": 1, "channels": 8,
                "state_dict": {}, "extra": Exploit()}, zipped)
    plain = directory / "plain.pt"
    torch.save(Plain(), plain)
    assert pickle.loads(pickle.dumps(Plain())).weights == [1.0, 2.0]  # a valid pickle
    for path in (raw, zipped, plain):
        with pytest.raises(BookgenError, match="refused"):
            load_model(path)
        one_line_error(run("info", path, expect=2))
    assert not marker.exists()


def test_module_is_a_plain_torch_module() -> None:
    model = PolicyValueNetwork(blocks=1, channels=8)
    policy, value = model(torch.zeros(3, FEATURES1_NUM, 9, 9), torch.zeros(3, FEATURES2_NUM, 9, 9))
    assert policy.shape == (3, MOVE_LABELS) and value.shape == (3, 1)
