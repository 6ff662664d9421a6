"""Time controls of games between engines: limits per move and the clocks they run.

Times are in milliseconds. Used by the game loop (:mod:`bookgen.play.loop`) and
the players that honour a clock (USI engines).
"""

from __future__ import annotations

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
    (ms, by colour; below zero within the margin)."""

    control: TimeControl
    remaining_ms: dict[int, int]

    @classmethod
    def start(cls, control: TimeControl) -> ClockState:
        """Both clocks at the control's main time."""
        return cls(control, {BLACK: control.time or 0, WHITE: control.time or 0})

    def allowed_ms(self, turn: int) -> int:
        """The longest the move of ``turn`` may take (see :meth:`TimeControl.allowed_ms`)."""
        return self.control.allowed_ms(self.remaining_ms[turn])

    def spend(self, turn: int, elapsed_ms: int) -> str | None:
        """Charge a move to ``turn``'s clock (see :meth:`TimeControl.spend`)."""
        return self.control.spend(self.remaining_ms, turn, elapsed_ms)
