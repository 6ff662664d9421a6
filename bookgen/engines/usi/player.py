"""A USI engine as a player (``usi:COMMAND``): it searches by itself.

Under a clock (a match) it is sent ``go btime wtime`` with ``binc winc`` or
``byoyomi`` from the clocks, or ``go nodes N`` under a node control, and is
waited for as long as its clock allows (margin included). Without a clock
(self-play) it searches with fixed limits
(:class:`~bookgen.engines.restart.SearchLimits`). ``bestmove resign``
resigns, ``bestmove win`` declares.

The engine starts and restarts through :mod:`bookgen.engines.restart`. What
a failure (crash, hang, broken protocol) does is its settings'
:class:`~bookgen.engines.restart.RestartPolicy`: ``retry`` (self-play)
restarts the engine and searches again, up to ``retries`` times, then raises
:class:`~bookgen.engines.protocols.EvaluatorError`; ``forfeit`` (a match)
raises :class:`~bookgen.engines.protocols.PlayerFailure` at once (the game is
lost) and restarts the engine before its next game.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from bookgen.engines.protocols import EvaluatorError, MoveChoice, MoveRecord, PlayerFailure
from bookgen.engines.restart import (
    EngineFailed,
    EngineLabel,
    run_with_restarts,
    start_engine,
)
from bookgen.engines.usi.analyser import book_answer
from bookgen.engines.usi.client import EngineCrashed, EngineTimeout, UsiError
from bookgen.engines.usi.protocol import UsiSearch
from bookgen.play.clock import BLACK, WHITE, ClockState
from bookgen.play.rules import GameState, Reason

if TYPE_CHECKING:
    import numpy as np

    from bookgen.engines.player_settings import PlayerSettings

__all__ = ["UsiPlayer", "move_record", "player_label"]

FORFEIT_GRACE = 1.0   # seconds an engine past its time gets to answer ``stop`` (and ``quit``)


def player_label(settings: PlayerSettings) -> EngineLabel:
    """How a player's start failures are worded: a match's player by its name,
    self-play's by its engine command (the texts each has always printed)."""
    command = settings.spec.argument
    if settings.name is not None:
        name = settings.name
        return EngineLabel(f"player {name}", f"player {name}: cannot start {command!r}",
                           f"player {name}: gpsshogi aborts on 'go nodes'; use --byoyomi or "
                           "--time", EvaluatorError)
    return EngineLabel(f"USI engine {command!r}", f"cannot start USI engine {command!r}",
                       "{name}: gpsusi aborts on 'go nodes' and 'go movetime'; use byoyomi",
                       EvaluatorError)


class UsiPlayer:
    """A USI engine, started at construction (see the module docstring).

    ``clock`` times its moves (see :class:`bookgen.engines.usi.client.UsiEngine`);
    the default is the real one. An engine that cannot start, rejects an
    option, or is gpsshogi under limits it aborts on raises
    :class:`~bookgen.engines.protocols.EvaluatorError`.
    """

    honours_clock = True

    def __init__(self, settings: PlayerSettings,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.settings = settings
        self.command = command = settings.spec.argument
        self.policy = settings.restarts
        self.forfeit = self.policy.on_failure == "forfeit"
        self.label = player_label(settings)
        self.limits = settings.limits.or_default().go()
        self.broken = False
        grace = FORFEIT_GRACE if self.forfeit else None  # a lost game waits for nobody
        self.engine = start_engine(command, dict(settings.options), settings.limits,
                                   self.label, stop_grace_s=grace, quit_grace_s=grace,
                                   clock=clock)
        self.engine_name = self.engine.name
        self.engine_author = self.engine.author
        self.name = settings.name or self.engine.name or command

    def new_game(self) -> None:
        if not self.forfeit:
            try:
                self.engine.new_game()
            except UsiError:
                pass  # a dead engine is restarted by the next search
            return
        try:
            if self.broken or not self.engine.alive:
                self.engine.restart()
                self.broken = False
            self.engine.new_game()
            self.engine.isready()
        except UsiError as error:
            raise self.label.error(f"{self.label.prefix}: cannot restart {self.command!r}: "
                                   f"{error}") from None

    def _limits(self, game: GameState, clock: ClockState | None
                ) -> tuple[dict[str, int | None], float | None]:
        """The ``go`` limits and the longest wait (seconds) for this move."""
        if clock is None:
            return self.limits, self.settings.engine_timeout_s
        control = clock.control
        if control.nodes is not None:
            return {"nodes": control.nodes}, control.engine_timeout
        remaining = clock.remaining_ms
        limits: dict[str, int | None] = {"btime": max(0, remaining[BLACK]),
                                         "wtime": max(0, remaining[WHITE])}
        if control.inc:
            limits.update(binc=control.inc, winc=control.inc)
        else:
            limits["byoyomi"] = control.byoyomi or 0
        return limits, max(0.05, clock.allowed_ms(game.turn) / 1000)

    def choose(self, game: GameState, clock: ClockState | None,
               rng: np.random.Generator) -> MoveChoice:
        limits, timeout = self._limits(game, clock)

        def search() -> UsiSearch:
            self.engine.position(game.usi_position())
            return self.engine.go(**limits, timeout=timeout)

        try:
            result, _restarts = run_with_restarts(self.engine, search, self.policy,
                                                  after_restart=self.engine.new_game)
        except EngineFailed as failed:
            if self.forfeit:
                self.broken = True  # restarted before its next game; its state is unknown
                raise self._failure(failed.last, clock) from None
            raise EvaluatorError(
                f"USI engine {self.name!r} failed {len(failed.errors)} times (restarted up "
                f"to {self.policy.retries} times); last error: {failed.last}") from None
        info = result.best
        score = info.score if info is not None and info.has_score else None
        elapsed = round(result.elapsed * 1000)
        if result.win:
            return MoveChoice(declare=True, score_cp=score, elapsed_ms=elapsed)
        if result.resign or result.bestmove is None:
            return MoveChoice(resign=True, score_cp=score, elapsed_ms=elapsed)
        return MoveChoice(result.bestmove, result.bestmove, score, elapsed_ms=elapsed,
                          record=move_record(result))

    @staticmethod
    def _failure(error: Exception, clock: ClockState | None) -> PlayerFailure:
        """How a failed search loses the game: on time (a timeout under a clock) or as an
        engine failure."""
        if isinstance(error, EngineTimeout):
            clocked = clock is not None and clock.control.clocked
            return PlayerFailure(Reason.TIME_FORFEIT if clocked else Reason.ENGINE_FAILURE,
                                 f"no bestmove in time ({error})")
        if isinstance(error, EngineCrashed):
            return PlayerFailure(Reason.ENGINE_FAILURE, f"engine crashed ({error})")
        return PlayerFailure(Reason.ENGINE_FAILURE, str(error))

    def close(self) -> None:
        self.engine.close()


def move_record(result: UsiSearch) -> MoveRecord:
    """What the engine said of its move: the first PV's last scored line (score,
    bound, depth, seldepth, PV), the most nodes any line reported, and whether it
    answered from its own book (:func:`~bookgen.engines.usi.analyser.book_answer`)."""
    source = "search" if book_answer(result) is None else "book"
    info = result.best
    if info is None:
        return MoveRecord(source, nodes=result.nodes)
    bound = (info.bound or "exact") if info.has_score else None
    nodes = result.nodes if result.nodes is not None else info.nodes
    return MoveRecord(source, info.cp, info.mate, bound, info.depth, info.seldepth, nodes,
                      tuple(info.pv))
