"""The interface through which format readers hand positions and moves over."""

from __future__ import annotations

from typing import Any, Protocol


class BookSink(Protocol):
    """Receives positions and their moves (implemented by ``store.BulkWriter``)."""

    def add_position(self, sfen: str, zobrist: int, ply: int | None, turn: int) -> int:
        """Register a position (normalised sfen, signed zobrist); returns a handle."""

    def add_move(self, local: int, move: str, ponder: str | None, value: int | None,
                 depth: int | None, count: int) -> None:
        """Add a move to the position with handle ``local``."""


class RowSink(BookSink, Protocol):
    """A :class:`BookSink` that also takes rows in bulk (``store.BulkWriter``)."""

    def add_rows(self, positions: list[tuple[Any, ...]], moves: list[tuple[Any, ...]],
                 mask: int = 0xFFFFFFFF) -> None:
        """Positions ``(local, sfen, zobrist, ply, turn)``, then moves ``(local, move,
        ponder, value, depth, count)`` of the positions with those ``local`` numbers
        (``local & mask``: the index among these positions), as if added one by one
        with :meth:`add_position` and :meth:`add_move`."""
