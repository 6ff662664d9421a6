"""Match players: USI engines under a clock, and the built-in player.

A player is described by a picklable :class:`PlayerSpec` (so worker processes
can build their own) and answers :meth:`think` with a :class:`Reply`. A USI
engine that crashes, stops answering or breaks the protocol raises
:class:`PlayerFailure`: the runner scores the game as lost by that engine and
the engine is restarted before its next game. An engine that cannot be
started at all is a :class:`~bookgen.errors.BookgenError`, which stops the
match.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from bookgen.errors import BookgenError
from bookgen.play.clock import TimeControl
from bookgen.play.rules import GameState, Reason

__all__ = ["BUILTIN", "PlayerFailure", "PlayerSpec", "Reply", "build_player"]

BUILTIN = "builtin"
BUILTIN_OPTIONS = {"depth": 64, "nodes": 20_000}


@dataclass(frozen=True)
class PlayerSpec:
    """A player as given on the command line: a name, ``usi:COMMAND`` or ``builtin``, options."""

    name: str
    spec: str
    options: tuple[tuple[str, str], ...] = ()

    @property
    def is_usi(self) -> bool:
        return self.spec.startswith("usi:")

    @property
    def command(self) -> str:
        return self.spec[len("usi:"):]


@dataclass
class Reply:
    """A player's answer: a move, a resignation or a declaration, with its score and time."""

    move: str | None = None
    score: int | None = None     # cp for the side to move; None: not given
    resign: bool = False
    declare: bool = False
    elapsed_ms: int = 0


class PlayerFailure(Exception):
    """The player's engine failed during a game; the game is lost with ``reason``."""

    def __init__(self, reason: Reason, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason
        self.detail = detail


class Player(Protocol):
    spec: PlayerSpec

    @property
    def engine_name(self) -> str | None: ...

    @property
    def engine_author(self) -> str | None: ...

    def new_game(self) -> None: ...

    def think(self, game: GameState, clocks: dict[int, int], control: TimeControl) -> Reply: ...

    def close(self) -> None: ...


def build_player(spec: PlayerSpec) -> Player:
    if spec.is_usi:
        return UsiPlayer(spec)
    if spec.spec == BUILTIN:
        return BuiltinPlayer(spec)
    raise BookgenError(f"player {spec.name}: unknown player {spec.spec!r} "
                       "(use usi:COMMAND or builtin)")


class BuiltinPlayer:
    """The built-in alpha-beta search with a node budget (``nodes``, ``depth`` options).

    It is limited by its depth and node budget, not by the clock: its time is
    recorded but never forfeited. The budget counts every node but only stops
    the iterations after the first (depth 1 plus quiescence, which always
    completes: about 140 nodes at the median of match positions, several
    hundred in sharp ones), so budgets of a few hundred nodes mostly play
    depth 1; ``depth`` sets the strength by whole plies.
    """

    engine_author = "bookgen"

    def __init__(self, spec: PlayerSpec) -> None:
        from bookgen.engines.builtin.analyser import BuiltinEvaluator

        self.spec = spec
        settings = dict(BUILTIN_OPTIONS)
        for key, value in spec.options:
            if key not in settings:
                raise BookgenError(f"player {spec.name}: unknown built-in option {key!r} "
                                   f"(known: {', '.join(settings)})")
            try:
                settings[key] = int(value)
                if settings[key] < 1:
                    raise ValueError
            except ValueError:
                raise BookgenError(f"player {spec.name}: option {key} must be a positive "
                                   f"integer, got {value!r}") from None
        self.depth, self.nodes = settings["depth"], settings["nodes"]
        self.engine_name = f"bookgen builtin (depth {self.depth}, {self.nodes} nodes)"
        self.evaluator = BuiltinEvaluator()

    def new_game(self) -> None:
        pass

    def think(self, game: GameState, clocks: dict[int, int], control: TimeControl) -> Reply:
        started = time.perf_counter()
        if game.can_declare():
            return Reply(declare=True)
        move, score, _pv = self.evaluator.best_move(game.board, self.depth, self.nodes)
        elapsed = round((time.perf_counter() - started) * 1000)
        if move is None:
            return Reply(resign=True, score=score, elapsed_ms=elapsed)
        return Reply(move, score, elapsed_ms=elapsed)

    def close(self) -> None:
        self.evaluator.close()


class UsiPlayer:
    """A USI engine; started at construction, restarted after a failure.

    ``clock`` times its moves (see :class:`bookgen.engines.usi.client.UsiEngine`); the
    default is the real one.
    """

    STOP_GRACE = 1.0   # seconds an engine past its time gets to answer ``stop``

    def __init__(self, spec: PlayerSpec, clock: Callable[[], float] = time.monotonic) -> None:
        from bookgen.engines.usi.client import UsiEngine, UsiError, UsiOptionError

        self.spec = spec
        self.broken = False
        try:
            self.engine = UsiEngine(spec.command, options=dict(spec.options),
                                    stop_grace=self.STOP_GRACE, quit_grace=1.0, clock=clock)
        except UsiOptionError as error:
            raise BookgenError(f"player {spec.name}: {error}") from None
        except UsiError as error:
            raise BookgenError(f"player {spec.name}: cannot start {spec.command!r}: "
                               f"{error}") from None
        self.engine_name = self.engine.name
        self.engine_author = self.engine.author

    @property
    def is_gpsshogi(self) -> bool:
        return (self.engine_name or "").lower().startswith("gpsshogi")

    def new_game(self) -> None:
        from bookgen.engines.usi.client import UsiError

        try:
            if self.broken or not self.engine.alive:
                self.engine.restart()
                self.broken = False
            self.engine.new_game()
            self.engine.isready()
        except UsiError as error:
            raise BookgenError(f"player {self.spec.name}: cannot restart "
                               f"{self.spec.command!r}: {error}") from None

    def _limits(self, game: GameState, clocks: dict[int, int],
                control: TimeControl) -> dict[str, int]:
        if control.nodes is not None:
            return {"nodes": control.nodes}
        import cshogi

        limits = {"btime": max(0, clocks[cshogi.BLACK]), "wtime": max(0, clocks[cshogi.WHITE])}
        if control.inc:
            limits.update(binc=control.inc, winc=control.inc)
        else:
            limits["byoyomi"] = control.byoyomi or 0
        return limits

    def think(self, game: GameState, clocks: dict[int, int], control: TimeControl) -> Reply:
        from bookgen.engines.usi.client import EngineCrashed, EngineTimeout, UsiError

        limits = self._limits(game, clocks, control)
        timeout: float | None
        if control.clocked:
            timeout = max(0.05, control.allowed_ms(clocks[game.turn]) / 1000)
        else:
            timeout = control.engine_timeout
        try:
            self.engine.position(game.usi_position())
            result = self.engine.go(**limits, timeout=timeout)
        except EngineTimeout as error:
            self.broken = True  # restarted before its next game; its state is unknown
            reason = Reason.TIME_FORFEIT if control.clocked else Reason.ENGINE_FAILURE
            raise PlayerFailure(reason, f"no bestmove in time ({error})") from None
        except EngineCrashed as error:
            self.broken = True
            raise PlayerFailure(Reason.ENGINE_FAILURE, f"engine crashed ({error})") from None
        except UsiError as error:
            self.broken = True
            raise PlayerFailure(Reason.ENGINE_FAILURE, str(error)) from None
        info = result.best
        score = info.score if info is not None and info.has_score else None
        elapsed = round(result.elapsed * 1000)
        if result.win:
            return Reply(declare=True, score=score, elapsed_ms=elapsed)
        if result.resign or result.bestmove is None:
            return Reply(resign=True, score=score, elapsed_ms=elapsed)
        return Reply(result.bestmove, score, elapsed_ms=elapsed)

    def close(self) -> None:
        self.engine.close()
