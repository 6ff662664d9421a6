"""The interface through which format readers hand positions and moves over."""

from __future__ import annotations

from typing import Protocol


class BookSink(Protocol):
    """Receives positions and their moves (implemented by ``store.BulkWriter``)."""

    def add_position(self, sfen: str, zobrist: int, ply: int | None, turn: int) -> int:
        """Register a position (normalised sfen, signed zobrist); returns a handle."""

    def add_move(self, local: int, move: str, ponder: str | None, value: int | None,
                 depth: int | None, count: int) -> None:
        """Add a move to the position with handle ``local``."""
