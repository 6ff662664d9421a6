"""Timestamps: the one way bookgen writes the time into books and results files."""

from __future__ import annotations

import datetime as _dt

__all__ = ["utc_now"]


def utc_now() -> str:
    """The current UTC time in ISO 8601, to the second (``2024-01-02T03:04:05+00:00``)."""
    return _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")
