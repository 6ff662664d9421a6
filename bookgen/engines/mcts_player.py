"""MCTS over an evaluator as a player (``mcts:EVALUATOR``), with dlshogi's
random opening moves.

During the first ``random_moves`` plies of a game the move is sampled with
probability ``visits ** (1 / temperature)`` among the moves whose win rate is
at least ``random_cutoff`` times the most visited move's (dlshogi's
``--random``, ``--random_temperature``, ``--random_cutoff``); after that the
most visited move is played. A mate in one is always played, and a position
that meets the declaration rule is declared (dlshogi self-play does both).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import cshogi
import numpy as np

from bookgen.engines.factory import make_evaluator
from bookgen.engines.mcts import Mcts, MctsSettings, SearchSteps, run_search
from bookgen.engines.protocols import MoveChoice, MoveRecord
from bookgen.values import MATE_VALUE, value_to_cp

if TYPE_CHECKING:
    from bookgen.engines.player_settings import PlayerSettings
    from bookgen.play.clock import ClockState
    from bookgen.play.rules import GameState

__all__ = ["MctsPlayer"]


class MctsPlayer:
    """MCTS over the evaluator of ``settings.spec`` with ``settings.mcts``'s
    playouts; the best move is the most visited one, also when another was
    sampled. Limited by its playouts, not by a clock."""

    engine_author = "bookgen"
    honours_clock = False

    def __init__(self, settings: PlayerSettings) -> None:
        play = settings.mcts
        self.play = play
        self.evaluator = make_evaluator(settings.spec.evaluator, **dict(play.evaluator_options))
        self.engine_name = f"{settings.spec.evaluator} mcts {play.playouts}"
        self.name = settings.name or self.engine_name
        self.search = Mcts(self.evaluator, MctsSettings(playouts=play.playouts,
                                                          batch_size=play.batch_size))
        # Sampled moves need real visit counts, not an early stop's.
        self.sampling_search = Mcts(self.evaluator, MctsSettings(
            playouts=play.playouts, batch_size=play.batch_size, early_stop=False))

    def new_game(self) -> None:
        pass

    def choose(self, game: GameState, clock: ClockState | None,
               rng: np.random.Generator) -> MoveChoice:
        return run_search(self.choosing(game, clock, rng), self.evaluator)

    def choosing(self, game: GameState, clock: ClockState | None,
                 rng: np.random.Generator) -> SearchSteps[MoveChoice]:
        """:meth:`choose` as a resumable search
        (:data:`bookgen.engines.mcts.SearchSteps`): it yields the search's
        leaves for whoever evaluates them (with this player's evaluator, or
        the leaves of many games together: ``selfplay --parallel-games``)."""
        board = game.board
        if game.can_declare():
            return MoveChoice(declare=True, score_cp=MATE_VALUE)
        # cshogi's one-ply mate finder assumes the side to move is not in check.
        mate = 0 if board.is_check() else board.mate_move_in_1ply()
        if mate and game.legal_move(mate) is not None:
            usi = cshogi.move_to_usi(mate)
            return MoveChoice(usi, usi, MATE_VALUE,
                              record=MoveRecord("search", mate=1, bound="exact", pv=(usi,)))
        play = self.play
        sampling = game.ply < play.opening.random_moves
        result = yield from (self.sampling_search if sampling else self.search).searching(board)
        if not result.moves:  # the game loop never asks without legal moves
            return MoveChoice(resign=True, score_cp=-MATE_VALUE)
        best = result.moves[0]
        move = best.move
        if sampling:
            floor = best.win_rate * play.opening.random_cutoff
            candidates = [s for s in result.moves
                          if s.visits > 0 and s.win_rate >= floor] or [best]
            weights = np.array([s.visits for s in candidates], dtype=np.float64)
            weights **= 1.0 / play.opening.temperature
            move = candidates[int(rng.choice(len(candidates), p=weights / weights.sum()))].move
        score = value_to_cp(best.win_rate)
        line = (best.move, best.reply) if best.reply is not None else (best.move,)
        record = MoveRecord("search", score, None, "exact", best.depth or None, None,
                            result.playouts, line)
        return MoveChoice(move, best.move, score, record=record)

    def close(self) -> None:
        self.evaluator.close()
