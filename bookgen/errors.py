"""Errors that the CLI reports as one line on stderr with exit code 2."""

from __future__ import annotations

import re
from collections.abc import Callable

_MENTION = re.compile(r"\{field:([A-Za-z0-9_.]+)\}")


class BookgenError(Exception):
    """A user-facing error: bad input, missing file, refused operation."""


class SettingsError(BookgenError):
    """An error about one settings field, which the library names by the field.

    ``field`` is the field's dotted name in the settings (``"draws.black"``,
    ``"mcts.playouts"``, ``"workers"``), ``message`` what is wrong. The message
    names the field where it holds :attr:`FIELD`, and other fields where it holds
    :meth:`mention` (``f"{SettingsError.FIELD} and {SettingsError.mention('replace')}
    exclude each other"``); a message that names no field gets the field first:
    ``SettingsError("workers", "must be at least 1")`` reads "workers must be at
    least 1". The CLI names the flags instead (:meth:`naming` with
    :func:`bookgen.cli.support.flag_of`), so library errors never name a CLI
    flag and the CLI's texts name its flags. :meth:`within` prefixes the fields of
    an error raised by nested settings.
    """

    FIELD = "{field}"

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        self.message = message
        super().__init__(self.naming(field))

    @staticmethod
    def mention(field: str) -> str:
        """How a message names another settings field than the error's own."""
        return "{field:" + field + "}"

    @property
    def mentioned(self) -> tuple[str, ...]:
        """The other fields the message names."""
        return tuple(_MENTION.findall(self.message))

    def naming(self, name: str, name_of: Callable[[str], str] | None = None) -> str:
        """The error's text with ``name`` for the field and ``name_of(field)`` for the
        others it mentions (None: their dotted names)."""
        text = _MENTION.sub(lambda match: (name_of or str)(match.group(1)), self.message)
        if self.FIELD in text:
            return text.replace(self.FIELD, name)
        if self.mentioned:
            return text
        return f"{name} {text}"

    def within(self, prefix: str) -> SettingsError:
        """The same error of settings nested as ``prefix``: ``alpha`` becomes
        ``sprt.settings.alpha`` within ``"sprt.settings"``, and so do the other
        fields its message names."""
        message = _MENTION.sub(lambda m: self.mention(f"{prefix}.{m[1]}"), self.message)
        return type(self)(f"{prefix}.{self.field}", message)

    def __reduce__(self) -> tuple[type, tuple[str, str]]:
        return type(self), (self.field, self.message)


def at_least(field: str, value: float | None, low: int = 1) -> None:
    """Raise a :class:`SettingsError` naming ``field`` unless ``value`` is None or at
    least ``low``: the one check of settings' lower bounds."""
    if value is not None and value < low:
        raise SettingsError(field, f"must be at least {low}")
