"""Network evaluators: ``torch:MODEL.pt`` and ``onnx:MODEL.onnx``.

Only :class:`TorchEvaluator` imports torch (the model module, when it starts):
the ONNX evaluator needs onnxruntime and the torch-free
:mod:`bookgen.engines.network.features`.

Both compute dlshogi features for a batch of positions, run the network and
turn its outputs into an :class:`Evaluation`: priors are a softmax over the
policy logits of the legal moves only (labels from
``cshogi.dlshogi.make_move_label`` for the side to move), the value is the
win probability of the side to move. A position without legal moves is lost
for the side to move: value 0, no moves, and it is not sent to the network.

Value outputs: a bookgen ``.pt`` model returns a logit (the evaluator applies
the sigmoid); an ONNX model's ``output_value`` is already a probability, as
in dlshogi's exported models, so dlshogi ONNX files work here unchanged.
"""

from __future__ import annotations

import os
import re
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import cshogi
import numpy as np

from bookgen.engines.network.device import NetworkSettings, onnx_providers, torch_device
from bookgen.engines.network.features import (
    FEATURES1_NUM,
    FEATURES2_NUM,
    INPUT2_PLANES,
    INPUT_NAMES,
    MOVE_LABELS,
    OUTPUT_NAMES,
    features,
    legal_move_labels,
)
from bookgen.engines.protocols import Evaluation, EvaluatorBase, EvaluatorError
from bookgen.errors import BookgenError
from bookgen.extras import require_extra
from bookgen.values import EVAL_COEF

if TYPE_CHECKING:  # torch and onnxruntime are imported when an evaluator is made
    import onnxruntime as ort
    from torch import nn


def available_cpus() -> int:
    """CPUs this process may run on (affinity-aware)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def default_threads(batch_size: int) -> int:
    """Intra-op threads when none are asked for: 1 for batch 1, else every CPU.

    Measured on 2 cores with the 5 x 64 model: a second thread doubles batch-64
    throughput on an idle machine but gains nothing at batch 1, and when
    another process keeps a core busy two threads collapse (batch 1: from
    ~500 to under 20 positions/s; batch 64: from ~1,200 to ~150) because every
    layer waits for the descheduled thread. Pass ``threads=1`` when other
    CPU-heavy work (engines, worker processes) runs alongside.
    """
    return 1 if batch_size == 1 else available_cpus()


def _check_options(batch_size: int, threads: int | None) -> None:
    if type(batch_size) is not int or batch_size < 1:
        raise BookgenError(f"batch size must be a positive integer, not {batch_size!r}")
    if threads is not None and (type(threads) is not int or threads < 1):
        raise BookgenError(f"threads must be a positive integer, not {threads!r}")


def _ort_reason(error: BaseException) -> str:
    """The useful part of an onnxruntime error, on one line."""
    text = " ".join(str(error).split())
    text = re.sub(r"^\[ONNXRuntimeError\] : \d+ : \w+ : ", "", text)
    # Drop the C++ source location and function signature.
    text = re.sub(r"/\S*onnxruntime_src/\S*( [\w:~<>]+\([^()]*\))?\s*", " ", text)
    return text.strip()[:300] or type(error).__name__


def _network_settings(device: str, fp16: bool, providers: str | Sequence[str] | None,
                      trt_cache: str | None, dlshogi_network: str | None) -> NetworkSettings:
    return NetworkSettings(device=device, fp16=fp16, providers=tuple(
        providers.split(",") if isinstance(providers, str) else providers or ()),
        trt_cache=None if trt_cache is None else str(trt_cache),
        dlshogi_network=dlshogi_network)


class NetworkEvaluator(EvaluatorBase):
    """Shared batching and post-processing; subclasses implement :meth:`_run`.

    ``device_name`` says where the network runs (``cpu``, the GPU's name, the
    onnxruntime providers in use); ``input2`` is the model's input2 planes.
    """

    spec = "network"
    device_name = "cpu"
    input2 = FEATURES2_NUM

    def __init__(self, batch_size: int) -> None:
        self.batch_size = batch_size

    def _run(self, features1: np.ndarray, features2: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Policy logits (n, 2187) and win probabilities (n,) for one batch."""
        raise NotImplementedError

    def evaluate(self, boards: Sequence[cshogi.Board]) -> list[Evaluation]:
        """Priors over all legal moves and the value, for each board (boards unchanged)."""
        results: list[Evaluation | None] = [None] * len(boards)
        pending: list[tuple[int, list[int], np.ndarray]] = []
        for i, board in enumerate(boards):
            moves, labels = legal_move_labels(board)
            if moves:
                pending.append((i, moves, labels))
            else:
                results[i] = Evaluation(moves=[], priors=[], value=0.0)
        for start in range(0, len(pending), self.batch_size):
            chunk = pending[start:start + self.batch_size]
            features1, features2 = features([boards[i] for i, _, _ in chunk], self.input2)
            policy, value = self._run(features1, features2)
            if not (np.isfinite(policy).all() and np.isfinite(value).all()):
                raise EvaluatorError(f"{self.spec}: the network returned NaN or infinity")
            for row, (i, moves, labels) in enumerate(chunk):
                logits = policy[row, labels].astype(np.float64)
                weights = np.exp(logits - logits.max())
                weights /= weights.sum()
                results[i] = Evaluation(moves=[cshogi.move_to_usi(m) for m in moves],
                                        priors=weights.tolist(), value=float(value[row]))
        evaluations = [result for result in results if result is not None]
        assert len(evaluations) == len(results)  # every board has its evaluation
        return evaluations


class TorchEvaluator(NetworkEvaluator):
    """A network model file run by torch, in inference mode: bookgen's ``.pt``, or
    dlshogi's ``.npz``/``.pth`` (:func:`bookgen.engines.network.model.load_network`).

    ``device`` (``auto``, ``cpu``, ``cuda``, ``cuda:N``), ``fp16`` and
    ``dlshogi_network`` are :class:`~bookgen.engines.network.device.NetworkSettings`'
    fields (``providers`` and ``trt_cache``, ONNX's, are refused). ``threads``
    sets torch's intra-op threads on the CPU, which is process-wide (default:
    :func:`default_threads`). ``coef`` is dlshogi's value/centipawn
    coefficient, kept so that all evaluators take the same options; the
    network itself outputs probabilities.
    """

    channels_last = True  # on the CPU (benchmarks compare by setting it False)

    def __init__(self, path: str | Path, batch_size: int = 64, threads: int | None = None,
                 coef: float = EVAL_COEF, device: str = "auto", fp16: bool = False,
                 providers: str | Sequence[str] | None = None, trt_cache: str | None = None,
                 dlshogi_network: str | None = None) -> None:
        require_extra("torch", "nn", f"the torch:{path} evaluator")
        # torch through the model module, which sets torch's thread wait policy first.
        from bookgen.engines.network import model as model_module

        torch = model_module.torch
        _check_options(batch_size, threads)
        settings = _network_settings(device, fp16, providers, trt_cache, dlshogi_network)
        where = torch_device(settings, torch.cuda, torch.version.cuda)
        super().__init__(batch_size)
        self.spec = f"torch:{path}"
        self.coef = coef
        model = model_module.load_network(path, settings.dlshogi_network)
        self.input2 = model_module.input2_planes(model)
        self._device = torch.device(where)
        self._dtype = torch.float16 if settings.fp16 else torch.float32
        # Channels-last convolutions: measured on this 2-core CPU (one thread,
        # dlshogi 5x64 and 10x192, batches 1-64, runs interleaved) the forward
        # pass is 10-40 % faster, end to end up to 25 %; not measured
        # on a GPU yet, so CUDA keeps torch's default layout.
        self._layout = torch.channels_last if where == "cpu" and self.channels_last \
            else torch.contiguous_format
        try:
            model = model.to(self._device, self._dtype)
            if self._layout == torch.channels_last:
                model = model.to(memory_format=torch.channels_last)  # type: ignore[call-overload]
            self.model: nn.Module | None = model
            self.device_name = where if where == "cpu" else \
                f"{where} ({torch.cuda.get_device_name(self._device)})"
        except (RuntimeError, AssertionError) as error:  # torch's words for a broken CUDA
            reason = " ".join(str(error).split())[:200]
            raise BookgenError(f"{path}: cannot put the network on {where} ({reason})") from None
        self._torch = torch
        if where == "cpu":
            wanted = threads or default_threads(batch_size)
            if torch.get_num_threads() != wanted:
                torch.set_num_threads(wanted)

    def _run(self, features1: np.ndarray, features2: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        if self.model is None:
            raise EvaluatorError(f"{self.spec}: evaluator is closed")
        torch = self._torch
        with torch.inference_mode():
            layout = self._layout
            x1 = torch.from_numpy(features1).to(self._device, self._dtype, memory_format=layout)
            x2 = torch.from_numpy(features2).to(self._device, self._dtype, memory_format=layout)
            policy, value = self.model(x1, x2)
            return (policy.float().cpu().numpy(),
                    torch.sigmoid(value.float()).reshape(-1).cpu().numpy())

    def close(self) -> None:
        self.model = None


def _preload_cuda(ort: Any) -> None:
    """Let onnxruntime-gpu (1.21+) load the CUDA and cuDNN libraries of the CUDA
    torch or of the nvidia-* wheels (``onnxruntime-gpu[cuda,cudnn]``) before a
    GPU session starts; where it cannot, the session's start check says so."""
    preload = getattr(ort, "preload_dlls", None)
    if preload is not None:
        try:
            preload()
        except Exception:
            pass


_ONNX_TYPES: dict[str, type[np.floating[Any]]] = {"tensor(float)": np.float32,
                                                  "tensor(float16)": np.float16}


class OnnxEvaluator(NetworkEvaluator):
    """An ONNX model (bookgen's export or dlshogi's) run by onnxruntime.

    The model must have inputs ``input1`` (N, 62, 9, 9) and ``input2``
    (N, 57 or 119, 9, 9), float32 or float16, and outputs ``output_policy``
    (N, 2187) logits and ``output_value`` (N, 1) probabilities. A model
    exported with a fixed batch size gets its batches padded to that size.

    ``device``, ``fp16``, ``providers`` and ``trt_cache`` are
    :class:`~bookgen.engines.network.device.NetworkSettings`' fields: the
    execution providers come from :func:`~bookgen.engines.network.device.onnx_providers`,
    and a GPU provider asked for that onnxruntime does not start is an error.
    ``fp16`` converts a float32 model's weights to float16 (inputs and outputs
    stay float32) and lets TensorRT build fp16 engines. ``threads``:
    onnxruntime intra-op threads (default: :func:`default_threads`); ``coef``
    as for :class:`TorchEvaluator`.
    """

    def __init__(self, path: str | Path, batch_size: int = 64, threads: int | None = None,
                 coef: float = EVAL_COEF, device: str = "auto", fp16: bool = False,
                 providers: str | Sequence[str] | None = None, trt_cache: str | None = None,
                 dlshogi_network: str | None = None) -> None:
        require_extra("onnxruntime", "nn", f"the onnx:{path} evaluator")
        import onnxruntime as ort

        _check_options(batch_size, threads)
        settings = _network_settings(device, fp16, providers, trt_cache, dlshogi_network)
        chosen = onnx_providers(settings, ort.get_available_providers())
        super().__init__(batch_size)
        path = Path(path)
        self.spec = f"onnx:{path}"
        self.coef = coef
        if not path.is_file():
            raise BookgenError(f"{path}: no such model file")
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads or default_threads(batch_size)
        options.inter_op_num_threads = 1
        options.log_severity_level = 3
        # Spinning worker threads keep burning CPU after each run, taking it
        # from the Python thread that prepares the next batch (2 cores).
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        if settings.trt_cache is not None and chosen[0][0] == "TensorrtExecutionProvider":
            Path(settings.trt_cache).mkdir(parents=True, exist_ok=True)
        model: str | bytes = str(path)
        if settings.fp16:
            model = self._half_model(path)
        try:
            with warnings.catch_warnings():
                # A GPU provider that fails to start is reported below, in one line.
                warnings.simplefilter("ignore")
                if chosen[0][0] != "CPUExecutionProvider":
                    ort.set_default_logger_severity(3)
                    _preload_cuda(ort)
                self.session: ort.InferenceSession | None = ort.InferenceSession(
                    model, options, providers=chosen)
        except Exception as error:  # onnxruntime raises its own exception types
            raise BookgenError(f"{path}: not a usable ONNX model ({_ort_reason(error)})") from None
        self.fixed_batch, self.input_type, self.input2 = self._check_signature(path,
                                                                               self.session)
        if self.fixed_batch is not None:
            self.batch_size = self.fixed_batch
        running = list(self.session.get_providers())
        self._check_started(path, settings, [name for name, _ in chosen], running)
        shown = [p.removesuffix("ExecutionProvider") for p in running
                 if p != "CPUExecutionProvider"]
        self.device_name = (f"{', '.join(shown)} (cuda:{settings.device_index})" if shown
                            else "cpu") + f", onnxruntime {ort.__version__}"

    @staticmethod
    def _half_model(path: Path) -> bytes:
        """A float32 ONNX model with float16 weights and computation (float32 inputs
        and outputs kept); a float16 model as it is."""
        require_extra("onnx", "nn", "fp16 ONNX evaluation")
        import onnx
        from onnxruntime.transformers.float16 import convert_float_to_float16

        try:
            proto = onnx.load(str(path))
        except Exception as error:
            raise BookgenError(f"{path}: not a usable ONNX model ({error})") from None
        if all(i.type.tensor_type.elem_type == onnx.TensorProto.FLOAT16
               for i in proto.graph.input):
            return proto.SerializeToString()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            half = convert_float_to_float16(proto, keep_io_types=True)
        return half.SerializeToString()

    @staticmethod
    def _check_started(path: Path, settings: NetworkSettings, chosen: list[str],
                       running: list[str]) -> None:
        """A GPU provider that was asked for must be running: onnxruntime drops one
        that fails to start (missing CUDA, cuDNN or TensorRT libraries) with a log
        line only."""
        if settings.providers:
            needed = [p for p in settings.providers if p != "CPUExecutionProvider"]
        elif settings.wants_gpu:
            needed = ["CUDAExecutionProvider"]
        else:
            return
        failed = [p for p in needed if p in chosen and p not in running]
        if failed:
            raise BookgenError(f"{path}: onnxruntime could not start {', '.join(failed)} "
                               f"(it would run on {', '.join(running)}): check the CUDA, "
                               "cuDNN and TensorRT libraries onnxruntime-gpu needs")

    @staticmethod
    def _check_signature(path: Path, session: ort.InferenceSession
                         ) -> tuple[int | None, type[np.floating], int]:
        """Check dlshogi's input/output layout; returns a fixed batch size if any,
        the inputs' float type and input2's planes."""
        inputs = {i.name: i for i in session.get_inputs()}
        outputs = {o.name: o for o in session.get_outputs()}
        planes = " or ".join(map(str, INPUT2_PLANES))
        expected: dict[str, list[int | str]] = {
            INPUT_NAMES[0]: [FEATURES1_NUM, 9, 9], INPUT_NAMES[1]: [planes, 9, 9],
            OUTPUT_NAMES[0]: [MOVE_LABELS], OUTPUT_NAMES[1]: [1]}
        batches = set()
        for name, tail in expected.items():
            node = inputs.get(name) or outputs.get(name)
            if node is None:
                raise BookgenError(
                    f"{path}: expected inputs {list(INPUT_NAMES)} and outputs "
                    f"{list(OUTPUT_NAMES)} (dlshogi layout); the model has inputs "
                    f"{list(inputs)} and outputs {list(outputs)}")
            shape = list(node.shape)
            if node.type not in _ONNX_TYPES or len(shape) != len(tail) + 1 or any(
                    isinstance(d, int) and (d not in INPUT2_PLANES if t == planes else d != t)
                    for d, t in zip(shape[1:], tail)):
                raise BookgenError(f"{path}: {name} is {node.type} {shape}, expected "
                                   f"tensor(float) or tensor(float16) "
                                   f"[N, {', '.join(map(str, tail))}]")
            if isinstance(shape[0], int) and shape[0] > 0:
                batches.add(shape[0])
        if len(batches) > 1:
            raise BookgenError(f"{path}: inconsistent fixed batch sizes {sorted(batches)}")
        first, second = inputs[INPUT_NAMES[0]], inputs[INPUT_NAMES[1]]
        if first.type != second.type:
            raise BookgenError(f"{path}: input1 is {first.type} but input2 {second.type}")
        planes2 = second.shape[1]
        return (batches.pop() if batches else None, _ONNX_TYPES[first.type],
                planes2 if isinstance(planes2, int) else FEATURES2_NUM)

    def _run(self, features1: np.ndarray, features2: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        if self.session is None:
            raise EvaluatorError(f"{self.spec}: evaluator is closed")
        count = len(features1)
        if self.fixed_batch is not None and count < self.fixed_batch:
            pad = self.fixed_batch - count
            features1 = np.concatenate([features1, np.zeros((pad, *features1.shape[1:]),
                                                            np.float32)])
            features2 = np.concatenate([features2, np.zeros((pad, *features2.shape[1:]),
                                                            np.float32)])
        kind = self.input_type
        try:
            policy, value = self.session.run(
                list(OUTPUT_NAMES), {INPUT_NAMES[0]: features1.astype(kind, copy=False),
                                     INPUT_NAMES[1]: features2.astype(kind, copy=False)})
        except Exception as error:
            raise EvaluatorError(f"{self.spec}: onnxruntime failed: {error}") from error
        value = np.asarray(value, dtype=np.float32).reshape(-1)[:count]
        if value.size and (value.min() < 0.0 or value.max() > 1.0):
            raise EvaluatorError(f"{self.spec}: output_value is not a probability in [0, 1] "
                                 "(export the model with a sigmoid on the value, as dlshogi "
                                 "does)")
        return np.asarray(policy, dtype=np.float32)[:count], value

    def close(self) -> None:
        self.session = None
