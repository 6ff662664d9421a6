"""A USI engine as a player (``usi:COMMAND``): it searches by itself.

Under a clock (a match) it is sent ``go btime wtime`` with ``binc winc`` or
``byoyomi`` from the clocks, or ``go nodes N`` under a node control, and is
waited for as long as its clock allows (margin included). Each side may play
under its own control (:meth:`ClockState.control_of
<bookgen.play.clock.ClockState.control_of>`): ``btime``/``wtime`` are each
side's clock, ``binc``/``winc`` each side's increment, ``byoyomi`` the
mover's. Without a clock (self-play) it searches with fixed limits
(:class:`~bookgen.engines.restart.SearchLimits`). Its settings' ``go_options``
follow the limits of every ``go`` (the client's ``go_options``). ``bestmove
resign`` resigns, ``bestmove win`` declares. At the end of each game the
engine is sent ``gameover win|lose|draw`` (:meth:`UsiPlayer.game_over`; not
when it failed).

Pondering (settings' ``ponder``, for engines that declare ``USI_Ponder``, or
``Ponder`` as Fairy-Stockfish does; it is set to true): after ``bestmove X
ponder Y`` the engine is sent the position after X and Y and ``go ponder``
with the clocks as they stand after X is charged. When the opponent plays Y
it gets ``ponderhit`` and its clock runs from then (the USI convention: the
time before ``ponderhit`` is the opponent's); another move gets ``stop``, its
answer is thrown away (the wait for it is charged to the engine) and the new
position searched as usual; at the end of the game a ponder search is
stopped before ``gameover``. No pondering under a node control, nor with the
``retry`` policy (self-play): a failure while pondering loses the game.

:attr:`UsiPlayer.transcript` passes a sink to the client
(:attr:`UsiEngine.transcript <bookgen.engines.usi.client.UsiEngine.transcript>`).

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

import cshogi

from bookgen.engines.protocols import EvaluatorError, MoveChoice, MoveRecord, PlayerFailure
from bookgen.engines.restart import (
    EngineFailed,
    EngineLabel,
    is_gpsshogi,
    run_with_restarts,
    start_engine,
)
from bookgen.engines.usi.analyser import book_answer
from bookgen.engines.usi.client import EngineCrashed, EngineTimeout, LineSink, UsiError
from bookgen.engines.usi.protocol import UsiSearch
from bookgen.play.clock import BLACK, WHITE, ClockState
from bookgen.play.rules import GameState, Reason

if TYPE_CHECKING:
    import numpy as np

    from bookgen.engines.player_settings import PlayerSettings

__all__ = ["PONDER_OPTIONS", "UsiPlayer", "move_record", "player_label"]

PONDER_OPTIONS = ("USI_Ponder", "Ponder")
"""The check options that say an engine ponders (USI's, and Stockfish's name that
Fairy-Stockfish keeps in USI mode); the first one declared is set to true."""
GPSSHOGI_ABORTS = ("nodes", "movetime", "depth")   # go limits gpsshogi aborts on

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
        self.engine.go_options = tuple(token for key, value in settings.go_options
                                       for token in (key, value))
        aborts = [key for key, _ in settings.go_options if key in GPSSHOGI_ABORTS]
        if aborts and is_gpsshogi(self.engine.name):
            self.engine.close()
            raise self.label.error(f"{self.label.prefix}: gpsshogi aborts on 'go "
                                   f"{aborts[0]}'; leave it out of its go options")
        self.ponder_option = next((name for name in PONDER_OPTIONS
                                   if (declared := self.engine.options.get(name)) is not None
                                   and declared.type == "check"), None)
        # Pondering needs the forfeit policy (a match's): its failures lose the game.
        self.ponders = settings.ponder and self.forfeit and self.ponder_option is not None
        if self.ponders:
            assert self.ponder_option is not None
            try:
                self.engine.setoption(self.ponder_option, True)
                self.engine.isready()
            except UsiError as error:
                self.engine.close()
                raise self.label.error(f"{self.label.prefix}: {error}") from None
        self._pondering: str | None = None        # the position the engine ponders on
        self._ponder_error: UsiError | None = None  # go ponder failed: lost at the next move

    @property
    def transcript(self) -> LineSink | None:
        """Where the engine's lines go (see :attr:`UsiEngine.transcript
        <bookgen.engines.usi.client.UsiEngine.transcript>`)."""
        return self.engine.transcript

    @transcript.setter
    def transcript(self, sink: LineSink | None) -> None:
        self.engine.transcript = sink

    def new_game(self) -> None:
        self._end_ponder()
        self._ponder_error = None
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
        control = clock.control_of(game.turn)
        if control.nodes is not None:
            return {"nodes": control.nodes}, control.engine_timeout
        return (self._clock_limits(clock, game.turn, clock.remaining_ms),
                max(0.05, clock.allowed_ms(game.turn) / 1000))

    @staticmethod
    def _clock_limits(clock: ClockState, turn: int, remaining: dict[int, int]
                      ) -> dict[str, int | None]:
        """``btime wtime`` from ``remaining``, then ``binc winc`` (each side's) when
        ``turn`` plays with an increment, else its ``byoyomi``."""
        control = clock.control_of(turn)
        limits: dict[str, int | None] = {"btime": max(0, remaining[BLACK]),
                                         "wtime": max(0, remaining[WHITE])}
        if control.inc:
            limits.update(binc=clock.control_of(BLACK).inc or 0,
                          winc=clock.control_of(WHITE).inc or 0)
        else:
            limits["byoyomi"] = control.byoyomi or 0
        return limits

    def choose(self, game: GameState, clock: ClockState | None,
               rng: np.random.Generator) -> MoveChoice:
        if self._ponder_error is not None:
            error, self._ponder_error = self._ponder_error, None
            self.broken = True
            raise self._failure(error, clock, game.turn)
        limits, timeout = self._limits(game, clock)
        pondered = self._pondering
        stop_ms = 0
        if pondered is not None:
            self._pondering = None
            if pondered == game.usi_position():
                result = self._ponderhit(game, clock, timeout)
                return self._answer(game, clock, result, 0)
            started = self.engine.clock()
            try:
                self.engine.stop(timeout=self.engine.stop_grace)  # a miss: thrown away
            except UsiError as error:
                self.broken = True
                raise self._failure(error, clock, game.turn) from None
            stop_ms = round((self.engine.clock() - started) * 1000)
            if timeout is not None:
                timeout = max(0.05, timeout - stop_ms / 1000)

        def search() -> UsiSearch:
            self.engine.position(game.usi_position())
            return self.engine.go(**limits, timeout=timeout)

        try:
            result, _restarts = run_with_restarts(self.engine, search, self.policy,
                                                  after_restart=self.engine.new_game)
        except EngineFailed as failed:
            if self.forfeit:
                self.broken = True  # restarted before its next game; its state is unknown
                raise self._failure(failed.last, clock, game.turn) from None
            raise EvaluatorError(
                f"USI engine {self.name!r} failed {len(failed.errors)} times (restarted up "
                f"to {self.policy.retries} times); last error: {failed.last}") from None
        return self._answer(game, clock, result, stop_ms)

    def _ponderhit(self, game: GameState, clock: ClockState | None,
                   timeout: float | None) -> UsiSearch:
        """The opponent played the pondered move: ``ponderhit`` and the answer, timed
        from the ``ponderhit``."""
        try:
            self.engine.ponderhit()
            return self.engine.wait_bestmove(
                timeout if timeout is not None else self.engine.search_timeout,
                since=self.engine.search_started)
        except UsiError as error:
            self.broken = True
            raise self._failure(error, clock, game.turn) from None

    def _answer(self, game: GameState, clock: ClockState | None, result: UsiSearch,
                extra_ms: int) -> MoveChoice:
        """The move choice of ``result`` (``extra_ms`` more charged), pondering on."""
        info = result.best
        score = info.score if info is not None and info.has_score else None
        elapsed = round(result.elapsed * 1000) + extra_ms
        if result.win:
            return MoveChoice(declare=True, score_cp=score, elapsed_ms=elapsed)
        if result.resign or result.bestmove is None:
            return MoveChoice(resign=True, score_cp=score, elapsed_ms=elapsed)
        if self.ponders and result.ponder and clock is not None:
            self._start_ponder(game, clock, result.bestmove, result.ponder, elapsed)
        return MoveChoice(result.bestmove, result.bestmove, score, elapsed_ms=elapsed,
                          record=move_record(result))

    def _start_ponder(self, game: GameState, clock: ClockState, move: str, ponder: str,
                      elapsed_ms: int) -> None:
        """``go ponder`` on the position after ``move`` and ``ponder`` when both are
        legal and the game goes on, with the clocks as they stand after ``move``."""
        turn = game.turn
        control = clock.control_of(turn)
        if not control.clocked:
            return
        board = game.board.copy()
        for usi in (move, ponder):
            legal = {cshogi.move_to_usi(m): m for m in board.legal_moves}
            if usi not in legal:
                return
            board.push(legal[usi])
        remaining = dict(clock.remaining_ms)
        if control.spend(remaining, turn, elapsed_ms) is not None:
            return  # past its time: the game is lost
        position = f"{game.usi_position()}{' ' if game.moves else ' moves '}{move} {ponder}"
        try:
            self.engine.position(position)
            self.engine.go_ponder(**self._clock_limits(clock, turn, remaining))
        except UsiError as error:
            self._ponder_error = error
            return
        self._pondering = position

    def _end_ponder(self) -> None:
        """Stop a ponder search (its answer thrown away); an engine that fails to
        answer is restarted before its next game."""
        pondering, self._pondering = self._pondering, None
        if pondering is None or not self.engine.searching:
            return
        if not self.engine.alive:
            self.broken = True   # died while pondering: not written to
            return
        try:
            self.engine.stop(timeout=self.engine.stop_grace)
        except UsiError:
            self.broken = True

    def game_over(self, result: str) -> None:
        """The game ended with ``result`` (``win``, ``lose`` or ``draw``) for this engine:
        a ponder search is stopped and the engine is sent ``gameover`` (not when it
        failed or is not running)."""
        self._end_ponder()
        if self._ponder_error is not None:
            self.broken = True   # its go ponder failed: restarted before its next game
        if self.broken or not self.engine.alive:
            return
        try:
            self.engine.gameover(result)
        except UsiError:
            self.broken = True

    @staticmethod
    def _failure(error: Exception, clock: ClockState | None, turn: int) -> PlayerFailure:
        """How a failed search loses the game: on time (a timeout under a clock) or as an
        engine failure."""
        if isinstance(error, EngineTimeout):
            clocked = clock is not None and clock.control_of(turn).clocked
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
