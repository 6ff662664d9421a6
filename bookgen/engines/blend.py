"""``blend:BOOK:INNER``: book priors blended into another evaluator's output.

For a position in the book, dlshogi's ``Use_Book_Policy`` rule (default):
``P' = (1 - w) * P_inner + w * count_m / sum(count)`` (moves without a book
entry get nothing from the book term) and ``V' = (1 - w) * V_inner + w *
sigmoid(best_value / 756)``, with ``w`` = 0.5. YaneuraOu's PolicyBook rule
(``rule="yaneuraou"``): ``r = 0.7 + 0.1 * clamp(log10(total_count), 0, 3)``,
``P' = (1 - r) * P_inner + r * count_m / total`` and the book's value replaces
the inner value (``weight`` is not used). Positions outside the book pass
through unchanged. The book path may not contain ':'.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any

import cshogi

from bookgen.engines.protocols import Evaluation, Evaluator, EvaluatorBase
from bookgen.errors import BookgenError
from bookgen.position import board_key
from bookgen.store import Book, ValueColumn, queries
from bookgen.values import EVAL_COEF, cp_to_value

RULES = ("dlshogi", "yaneuraou")
OPTIONS = ("rule", "weight", "values", "coef")  # the blend's own options; the rest are INNER's


def check_options(rule: str = "dlshogi", weight: float = 0.5, **_others: Any) -> None:
    """Refuse a rule or weight :class:`BlendEvaluator` would refuse (before INNER starts)."""
    if rule not in RULES:
        raise BookgenError(f"blend rule must be one of {', '.join(RULES)}, not {rule!r}")
    if not 0.0 <= weight <= 1.0:
        raise BookgenError(f"blend weight {weight} is not between 0 and 1")


class BlendEvaluator(EvaluatorBase):
    """``inner``'s evaluations blended with the moves of the book at ``book``; closing
    the blend closes ``inner`` too. :func:`bookgen.engines.factory.make_evaluator`
    builds ``inner`` from the spec's INNER."""

    def __init__(self, book: str, inner: Evaluator, *, rule: str = "dlshogi",
                 weight: float = 0.5, values: str = "raw", coef: float = EVAL_COEF) -> None:
        check_options(rule, weight)
        self.spec = f"blend:{book}:{inner.spec}"
        self.rule, self.weight, self.coef = rule, weight, coef
        self.values = ValueColumn.MINIMAX if values == "minimax" else ValueColumn.RAW
        self.book = Book(book, create=False, readonly=True)
        self.inner = inner

    def close(self) -> None:
        self.inner.close()
        self.book.close()

    def book_moves(self, board: cshogi.Board) -> list[tuple[str, int, int | None]]:
        """(move, count, value) of the position's book moves; empty when not in the book."""
        return queries.position_moves(self.book.conn, board_key(board), self.values)

    def evaluate(self, boards: Sequence[cshogi.Board]) -> list[Evaluation]:
        evaluations = self.inner.evaluate(boards)
        return [self._blend(board, evaluation, self.book_moves(board))
                for board, evaluation in zip(boards, evaluations)]

    def _blend(self, board: cshogi.Board, evaluation: Evaluation,
               entries: list[tuple[str, int, int | None]]) -> Evaluation:
        total = sum(count for _move, count, _value in entries)
        values = [value for _move, _count, value in entries if value is not None]
        if not entries or total <= 0 or not evaluation.moves:
            return evaluation
        share = {move: count / total for move, count, _value in entries}
        book_value = cp_to_value(max(values), self.coef) if values else evaluation.value
        if self.rule == "dlshogi":
            r = self.weight
            value = (1 - r) * evaluation.value + r * book_value
        else:
            r = 0.7 + 0.1 * min(max(math.log10(total), 0.0), 3.0)
            value = book_value
        priors = [(1 - r) * prior + r * share.get(move, 0.0)
                  for move, prior in zip(evaluation.moves, evaluation.priors)]
        norm = sum(priors) or 1.0  # book moves missing from the inner list lose their share
        return dataclasses.replace(evaluation, priors=[p / norm for p in priors], value=value)
