"""Evaluators: the built-in search, USI engines and dlshogi-shaped networks.

``make_evaluator(spec)`` builds one from its command-line name:

- ``builtin``: material and piece-placement evaluation with a small
  alpha-beta + quiescence search on cshogi (needs nothing installed);
- ``usi:COMMAND``: any USI engine through bookgen's own USI client;
- ``torch:PATH`` / ``onnx:PATH``: a dlshogi-shaped residual network;
- ``blend:BOOK:INNER``: book priors blended into INNER (dlshogi Use_Book_Policy).
"""

from __future__ import annotations

from typing import Any

from bookgen.errors import BookgenError
from bookgen.evaluators.base import Evaluation, Evaluator, EvaluatorBase, EvaluatorError

__all__ = ["Evaluation", "Evaluator", "EvaluatorBase", "EvaluatorError", "make_evaluator"]

EVALUATOR_KINDS = ("builtin", "usi", "torch", "onnx", "blend")


def make_evaluator(spec: str, **options: Any) -> Evaluator:
    """The evaluator named by ``spec``; ``options`` go to its constructor."""
    kind, _, argument = spec.partition(":")
    if kind == "builtin" and not argument:
        from bookgen.evaluators.builtin import BuiltinEvaluator
        return BuiltinEvaluator(**options)
    if kind == "usi" and argument:
        from bookgen.evaluators.usi import UsiEvaluator
        return UsiEvaluator(argument, **options)
    if kind == "torch" and argument:
        from bookgen.evaluators.network import TorchEvaluator
        return TorchEvaluator(argument, **options)
    if kind == "onnx" and argument:
        from bookgen.evaluators.network import OnnxEvaluator
        return OnnxEvaluator(argument, **options)
    if kind == "blend" and ":" in argument:
        from bookgen.evaluators.blend import BlendEvaluator
        book, _, inner = argument.partition(":")
        return BlendEvaluator(book, inner, **options)
    raise BookgenError(f"unknown evaluator {spec!r} (use builtin, usi:COMMAND, torch:PATH, "
                       "onnx:PATH or blend:BOOK:INNER)")
