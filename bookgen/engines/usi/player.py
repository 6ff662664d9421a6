"""A USI engine as a player (``usi:COMMAND``): it searches by itself.

Under a clock (a match) it is sent ``go btime wtime`` with ``binc winc`` or
``byoyomi`` from the clocks, or ``go nodes N`` under a node control, and is
waited for as long as its clock allows (margin included). Without a clock
(self-play) it searches with fixed limits
(:class:`~bookgen.engines.player_settings.SearchLimits`). ``bestmove resign``
resigns, ``bestmove win`` declares.

What a failure (crash, hang, broken protocol) does is its settings'
``on_failure``: ``retry`` (self-play) restarts the engine and searches again,
up to ``restarts`` times, then raises
:class:`~bookgen.engines.protocols.EvaluatorError`; ``forfeit`` (a match)
raises :class:`~bookgen.engines.protocols.PlayerFailure` at once (the game is
lost) and restarts the engine before its next game.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from bookgen.engines.protocols import EvaluatorError, MoveChoice, PlayerFailure
from bookgen.engines.usi.client import (
    EngineCrashed,
    EngineTimeout,
    UsiEngine,
    UsiError,
    UsiOptionError,
)
from bookgen.engines.usi.protocol import UsiSearch
from bookgen.play.clock import BLACK, WHITE, ClockState
from bookgen.play.rules import GameState, Reason

if TYPE_CHECKING:
    import numpy as np

    from bookgen.engines.player_settings import PlayerSettings

__all__ = ["DEFAULT_BYOYOMI", "UsiPlayer"]

DEFAULT_BYOYOMI = 1000
FORFEIT_GRACE = 1.0   # seconds an engine past its time gets to answer ``stop`` (and ``quit``)


class UsiPlayer:
    """A USI engine, started at construction (see the module docstring).

    ``clock`` times its moves (see :class:`bookgen.engines.usi.client.UsiEngine`);
    the default is the real one. An engine that cannot start, or rejects
    an option, raises :class:`~bookgen.engines.protocols.EvaluatorError`.
    """

    honours_clock = True

    def __init__(self, settings: PlayerSettings,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.settings = settings
        self.command = command = settings.spec.argument
        self.forfeit = settings.on_failure == "forfeit"
        # Messages name a match's player ("player a: ..."), else the engine.
        self.label = f"player {settings.name}" if settings.name is not None else None
        given = settings.limits
        limits = {"nodes": given.nodes, "byoyomi": given.byoyomi_ms,
                  "movetime": given.movetime_ms}
        if all(value is None for value in limits.values()):
            limits["byoyomi"] = DEFAULT_BYOYOMI
        self.limits = {k: v for k, v in limits.items() if v is not None}
        self.broken = False
        try:
            if self.forfeit:  # a game is lost anyway: no long wait for a late engine
                self.engine = UsiEngine(command, options=dict(settings.options), clock=clock,
                                        stop_grace=FORFEIT_GRACE, quit_grace=FORFEIT_GRACE)
            else:
                self.engine = UsiEngine(command, options=dict(settings.options), clock=clock)
        except UsiOptionError as error:
            raise EvaluatorError(f"{self.label}: {error}" if self.label
                                 else f"USI engine {command!r}: {error}") from None
        except UsiError as error:
            raise EvaluatorError(f"{self.label}: cannot start {command!r}: {error}" if self.label
                                 else f"cannot start USI engine {command!r}: {error}") from None
        self.engine_name = self.engine.name
        self.engine_author = self.engine.author
        self.name = settings.name or self.engine.name or command
        if self.is_gpsshogi and self.label is None and ("nodes" in self.limits
                                                         or "movetime" in self.limits):
            self.engine.close()
            raise EvaluatorError(f"{self.name}: gpsusi aborts on 'go nodes' and 'go movetime'; "
                                 "use byoyomi")

    @property
    def is_gpsshogi(self) -> bool:
        return (self.engine_name or "").lower().startswith("gpsshogi")

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
            raise EvaluatorError(f"{self.label}: cannot restart {self.command!r}: "
                                 f"{error}") from None

    def _limits(self, game: GameState, clock: ClockState | None
                ) -> tuple[dict[str, int], float | None]:
        """The ``go`` limits and the longest wait (seconds) for this move."""
        if clock is None:
            return self.limits, self.settings.engine_timeout_s
        control = clock.control
        if control.nodes is not None:
            return {"nodes": control.nodes}, control.engine_timeout
        remaining = clock.remaining_ms
        limits = {"btime": max(0, remaining[BLACK]), "wtime": max(0, remaining[WHITE])}
        if control.inc:
            limits.update(binc=control.inc, winc=control.inc)
        else:
            limits["byoyomi"] = control.byoyomi or 0
        return limits, max(0.05, clock.allowed_ms(game.turn) / 1000)

    def choose(self, game: GameState, clock: ClockState | None,
               rng: np.random.Generator) -> MoveChoice:
        limits, timeout = self._limits(game, clock)
        if self.forfeit:
            result = self._search_once(game, limits, timeout,
                                       clock is not None and clock.control.clocked)
        else:
            result = self._search_with_restarts(game, limits, timeout)
        info = result.best
        score = info.score if info is not None and info.has_score else None
        elapsed = round(result.elapsed * 1000)
        if result.win:
            return MoveChoice(declare=True, score_cp=score, elapsed_ms=elapsed)
        if result.resign or result.bestmove is None:
            return MoveChoice(resign=True, score_cp=score, elapsed_ms=elapsed)
        return MoveChoice(result.bestmove, result.bestmove, score, elapsed_ms=elapsed)

    def _search_once(self, game: GameState, limits: dict[str, int], timeout: float | None,
                     clocked: bool) -> UsiSearch:
        """One search; a failure loses the game (the engine restarts before the next)."""
        try:
            self.engine.position(game.usi_position())
            return self.engine.go(**limits, timeout=timeout)
        except EngineTimeout as error:
            self.broken = True  # restarted before its next game; its state is unknown
            reason = Reason.TIME_FORFEIT if clocked else Reason.ENGINE_FAILURE
            raise PlayerFailure(reason, f"no bestmove in time ({error})") from None
        except EngineCrashed as error:
            self.broken = True
            raise PlayerFailure(Reason.ENGINE_FAILURE, f"engine crashed ({error})") from None
        except UsiError as error:
            self.broken = True
            raise PlayerFailure(Reason.ENGINE_FAILURE, str(error)) from None

    def _search_with_restarts(self, game: GameState, limits: dict[str, int],
                              timeout: float | None) -> UsiSearch:
        """The search, restarting the engine after each failure, ``restarts`` times at most."""
        restarts = self.settings.restarts
        errors: list[str] = []
        for attempt in range(restarts + 1):
            try:
                if attempt > 0 or not self.engine.alive:
                    self.engine.restart()
                    self.engine.new_game()
                self.engine.position(game.usi_position())
                return self.engine.go(**limits, timeout=timeout)
            except UsiError as error:
                errors.append(str(error))
        raise EvaluatorError(f"USI engine {self.name!r} failed {len(errors)} times "
                             f"(restarted up to {restarts} times); last error: {errors[-1]}")

    def close(self) -> None:
        self.engine.close()
