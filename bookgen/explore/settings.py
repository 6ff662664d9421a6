"""The settings of ``bookgen serve``: :class:`ServeSettings` (no web framework needed
to read or check them)."""

from __future__ import annotations

from dataclasses import dataclass

from bookgen.errors import SettingsError

__all__ = ["DEFAULT_HOST", "DEFAULT_PORT", "ServeSettings"]

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8000


@dataclass(frozen=True)
class ServeSettings:
    """Where :func:`serve` listens: ``host`` (127.0.0.1: this machine only), ``port``
    (0: any free port), and whether it opens a browser on the page (``open_browser``)."""

    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    open_browser: bool = False

    def __post_init__(self) -> None:
        if not self.host.strip():
            raise SettingsError("host", "must name an address")
        if not 0 <= self.port <= 65535:
            raise SettingsError("port", f"must be 0 to 65535, got {self.port}")
