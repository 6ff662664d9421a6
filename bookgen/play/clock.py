"""Time controls of games between engines: limits per move and the clocks they run.

Times are in milliseconds. Each side may play under its own control (time or node
odds: :attr:`ClockState.controls`). Used by the game loop (:mod:`bookgen.play.loop`) and
the players that honour a clock (USI engines).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["ClockState", "TimeControl"]

BLACK, WHITE = 0, 1   # cshogi.BLACK, cshogi.WHITE


@dataclass(frozen=True)
class TimeControl:
    """Limits per move, in milliseconds (or nodes).

    ``byoyomi``: a fixed time per move after the main time; ``time`` and
    ``inc``: main time per side and a Fischer increment added after each
    move; ``nodes``: a node budget (no clock). ``margin`` is how far a clock
    may run below zero (see :meth:`spend`) before the side loses on time.
    ``engine_timeout`` (seconds) bounds a move without a clock (None: it
    scales with ``nodes``, see
    :func:`bookgen.engines.usi.client.default_search_timeout`).
    """

    byoyomi: int | None = None
    time: int | None = None
    inc: int | None = None
    nodes: int | None = None
    margin: int = 1000
    engine_timeout: float | None = None

    @property
    def clocked(self) -> bool:
        return self.nodes is None

    def allowed_ms(self, clock: int) -> int:
        """The longest a move may take with ``clock`` ms of main time left, margin included.

        A clock may run up to ``margin`` below zero (lag is forgiven, not
        refunded); byoyomi starts when the main time is gone.
        """
        return clock + (self.byoyomi or 0) + self.margin

    def spend(self, clocks: dict[int, int], turn: int, elapsed_ms: int) -> str | None:
        """Charge a move to ``turn``'s clock; the reason of a time forfeit, or None."""
        allowed = self.allowed_ms(clocks[turn])
        if elapsed_ms > allowed:
            return f"{elapsed_ms} ms used, {allowed} ms allowed (margin included)"
        remaining = clocks[turn] - elapsed_ms
        if self.byoyomi and remaining < 0:
            remaining = 0  # the overrun came out of this move's byoyomi
        clocks[turn] = remaining + (self.inc or 0)
        return None

    def describe(self) -> str:
        if self.nodes is not None:
            return f"{self.nodes} nodes"
        parts = []
        if self.time:
            parts.append(f"{self.time / 1000:g} s")
        if self.inc:
            parts.append(f"+{self.inc / 1000:g} s")
        if self.byoyomi:
            parts.append(f"byoyomi {self.byoyomi / 1000:g} s")
        return " ".join(parts)


@dataclass
class ClockState:
    """A game's clocks: its time control and the main time each side has left
    (ms, by colour; below zero within the margin).

    ``controls`` holds each side's own control when the sides play under
    different ones (time or node odds; None: both play under ``control``).
    """

    control: TimeControl
    remaining_ms: dict[int, int]
    controls: dict[int, TimeControl] | None = None

    @classmethod
    def start(cls, control: TimeControl,
              sides: Mapping[int, TimeControl] | None = None) -> ClockState:
        """Both clocks at their control's main time: ``control`` for both, or
        ``sides`` (by colour) for each side its own."""
        if sides is None:
            return cls(control, {BLACK: control.time or 0, WHITE: control.time or 0})
        controls = {BLACK: sides[BLACK], WHITE: sides[WHITE]}
        return cls(control, {turn: c.time or 0 for turn, c in controls.items()}, controls)

    def control_of(self, turn: int) -> TimeControl:
        """The control ``turn`` plays under."""
        return self.controls[turn] if self.controls is not None else self.control

    def allowed_ms(self, turn: int) -> int:
        """The longest the move of ``turn`` may take (see :meth:`TimeControl.allowed_ms`)."""
        return self.control_of(turn).allowed_ms(self.remaining_ms[turn])

    def spend(self, turn: int, elapsed_ms: int) -> str | None:
        """Charge a move to ``turn``'s clock (see :meth:`TimeControl.spend`)."""
        return self.control_of(turn).spend(self.remaining_ms, turn, elapsed_ms)
