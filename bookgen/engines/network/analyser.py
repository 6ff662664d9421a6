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
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import cshogi
import numpy as np

from bookgen.engines.network.features import (
    FEATURES1_NUM,
    FEATURES2_NUM,
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

    from bookgen.engines.network.model import PolicyValueNetwork


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


class NetworkEvaluator(EvaluatorBase):
    """Shared batching and post-processing; subclasses implement :meth:`_run`."""

    spec = "network"

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
            features1, features2 = features([boards[i] for i, _, _ in chunk])
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
    """A bookgen ``.pt`` model run by torch on the CPU, in inference mode.

    ``threads`` sets torch's intra-op threads, which is process-wide (default:
    :func:`default_threads`). ``coef`` is dlshogi's value/centipawn
    coefficient, kept so that all evaluators take the same options; the
    network itself outputs probabilities.
    """

    def __init__(self, path: str | Path, batch_size: int = 64, threads: int | None = None,
                 coef: float = EVAL_COEF) -> None:
        require_extra("torch", "nn", f"the torch:{path} evaluator")
        # torch through the model module, which sets torch's thread wait policy first.
        from bookgen.engines.network import model as model_module

        torch = model_module.torch
        _check_options(batch_size, threads)
        super().__init__(batch_size)
        self.spec = f"torch:{path}"
        self.coef = coef
        self.model: PolicyValueNetwork | None = model_module.load_model(path)
        self._torch = torch
        wanted = threads or default_threads(batch_size)
        if torch.get_num_threads() != wanted:
            torch.set_num_threads(wanted)

    def _run(self, features1: np.ndarray, features2: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        if self.model is None:
            raise EvaluatorError(f"{self.spec}: evaluator is closed")
        torch = self._torch
        with torch.inference_mode():
            policy, value = self.model(torch.from_numpy(features1), torch.from_numpy(features2))
            return policy.numpy(), torch.sigmoid(value).reshape(-1).numpy()

    def close(self) -> None:
        self.model = None


class OnnxEvaluator(NetworkEvaluator):
    """An ONNX model (bookgen export or dlshogi's) run by onnxruntime on the CPU.

    The model must have float inputs ``input1`` (N, 62, 9, 9) and ``input2``
    (N, 57, 9, 9) and outputs ``output_policy`` (N, 2187) logits and
    ``output_value`` (N, 1) probabilities. A model exported with a fixed batch
    size gets its batches padded to that size. ``threads``: onnxruntime
    intra-op threads (default: :func:`default_threads`); ``coef`` as for
    :class:`TorchEvaluator`.
    """

    def __init__(self, path: str | Path, batch_size: int = 64, threads: int | None = None,
                 coef: float = EVAL_COEF) -> None:
        require_extra("onnxruntime", "nn", f"the onnx:{path} evaluator")
        import onnxruntime as ort

        _check_options(batch_size, threads)
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
        try:
            self.session: ort.InferenceSession | None = ort.InferenceSession(
                str(path), options, providers=["CPUExecutionProvider"])
        except Exception as error:  # onnxruntime raises its own exception types
            raise BookgenError(f"{path}: not a usable ONNX model ({_ort_reason(error)})") from None
        self.fixed_batch = self._check_signature(path, self.session)
        if self.fixed_batch is not None:
            self.batch_size = self.fixed_batch

    @staticmethod
    def _check_signature(path: Path, session: ort.InferenceSession) -> int | None:
        """Check dlshogi's input/output layout; returns a fixed batch size if any."""
        inputs = {i.name: i for i in session.get_inputs()}
        outputs = {o.name: o for o in session.get_outputs()}
        expected = {INPUT_NAMES[0]: [FEATURES1_NUM, 9, 9], INPUT_NAMES[1]: [FEATURES2_NUM, 9, 9],
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
            if node.type != "tensor(float)" or len(shape) != len(tail) + 1 or any(
                    isinstance(d, int) and d != t for d, t in zip(shape[1:], tail)):
                raise BookgenError(f"{path}: {name} is {node.type} {shape}, expected "
                                   f"tensor(float) [N, {', '.join(map(str, tail))}]")
            if isinstance(shape[0], int) and shape[0] > 0:
                batches.add(shape[0])
        if len(batches) > 1:
            raise BookgenError(f"{path}: inconsistent fixed batch sizes {sorted(batches)}")
        return batches.pop() if batches else None

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
        try:
            policy, value = self.session.run(
                list(OUTPUT_NAMES), {INPUT_NAMES[0]: features1, INPUT_NAMES[1]: features2})
        except Exception as error:
            raise EvaluatorError(f"{self.spec}: onnxruntime failed: {error}") from error
        value = np.asarray(value, dtype=np.float32).reshape(-1)[:count]
        if value.size and (value.min() < 0.0 or value.max() > 1.0):
            raise EvaluatorError(f"{self.spec}: output_value is not a probability in [0, 1] "
                                 "(export the model with a sigmoid on the value, as dlshogi "
                                 "does)")
        return np.asarray(policy)[:count], value

    def close(self) -> None:
        self.session = None
