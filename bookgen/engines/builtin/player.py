"""The built-in alpha-beta search as a player (the ``builtin`` player spec)."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from bookgen.engines.builtin.analyser import BuiltinEvaluator
from bookgen.engines.protocols import MoveChoice, MoveRecord
from bookgen.errors import BookgenError
from bookgen.values import MATE_VALUE

if TYPE_CHECKING:
    import numpy as np

    from bookgen.engines.player_settings import PlayerSettings
    from bookgen.play.clock import ClockState
    from bookgen.play.rules import GameState

__all__ = ["BuiltinPlayer"]


class BuiltinPlayer:
    """The built-in alpha-beta search with a depth and a node budget per move.

    The strength is ``settings.builtin``, overridden by the ``depth`` and
    ``nodes`` options. It is limited by them, not by a clock: its time is
    recorded but never forfeited. The budget counts every node but only
    stops the iterations after the first (depth 1 plus quiescence, which
    always completes: about 140 nodes at the median of match positions,
    several hundred in sharp ones), so budgets of a few hundred nodes mostly
    play depth 1; ``depth`` sets the strength by whole plies. A position
    that meets the declaration rule is declared.
    """

    engine_author = "bookgen"
    honours_clock = False

    def __init__(self, settings: PlayerSettings) -> None:
        values = {"depth": settings.builtin.depth, "nodes": settings.builtin.nodes}
        label = f"player {settings.name}"
        for key, value in settings.options:
            if key not in values:
                raise BookgenError(f"{label}: unknown built-in option {key!r} "
                                   f"(known: {', '.join(values)})")
            try:
                values[key] = int(value)
                if values[key] < 1:
                    raise ValueError
            except ValueError:
                raise BookgenError(f"{label}: option {key} must be a positive integer, "
                                   f"got {value!r}") from None
        self.depth, self.nodes = values["depth"], values["nodes"]
        self.name = settings.name or "builtin alphabeta"
        self.engine_name = f"bookgen builtin (depth {self.depth}, {self.nodes} nodes)"
        self.evaluator = BuiltinEvaluator()

    def new_game(self) -> None:
        pass

    def choose(self, game: GameState, clock: ClockState | None,
               rng: np.random.Generator) -> MoveChoice:
        started = time.perf_counter()
        if game.can_declare():
            return MoveChoice(declare=True, score_cp=MATE_VALUE)
        move, score, pv = self.evaluator.best_move(game.board, self.depth, self.nodes)
        elapsed = round((time.perf_counter() - started) * 1000)
        if move is None:
            return MoveChoice(resign=True, score_cp=score, elapsed_ms=elapsed)
        searched = self.evaluator.last_search
        assert searched is not None
        mate = searched.mate
        record = MoveRecord("search", None if mate is not None else score, mate, "exact",
                            searched.depth, None, searched.nodes, tuple(pv))
        return MoveChoice(move, move, score, elapsed_ms=elapsed, record=record)

    def close(self) -> None:
        self.evaluator.close()
