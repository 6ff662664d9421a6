"""Errors that the CLI reports as one line on stderr with exit code 2."""

from __future__ import annotations

import re
from collections.abc import Callable

_OTHER_FIELD = re.compile(r"\{field:([^{}]+)\}")


class BookgenError(Exception):
    """A user-facing error: bad input, missing file, refused operation."""


class SettingsError(BookgenError):
    """An error about one settings field, which the library names by the field.

    ``field`` is the field's dotted name in the settings (``"draws.black"``,
    ``"mcts.playouts"``, ``"workers"``), ``message`` what is wrong. The message
    names the field where it holds :attr:`FIELD`, else the field comes first:
    ``SettingsError("workers", "must be at least 1")`` reads "workers must be at
    least 1". A message that also names other fields holds :meth:`other` for
    each, named the same way. The CLI names its flags instead (:meth:`naming`
    with :func:`bookgen.cli.support.flag_of`), so library errors never name a CLI
    flag and the CLI's texts name its flags.
    """

    FIELD = "{field}"

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        self.message = message
        super().__init__(self.naming(field))

    @staticmethod
    def other(field: str) -> str:
        """Where a message names another field than the error's (``{field:NAME}``):
        ``SettingsError("selection.min_visits", f"{SettingsError.other('selection.select')}
        visits needs {SettingsError.FIELD} N")``."""
        return "{field:" + field + "}"

    def naming(self, name: str, name_of: Callable[[str], str] | None = None) -> str:
        """The error's text with ``name`` for the field and ``name_of(field)`` for
        the other fields the message names (None: their dotted names)."""
        message = _OTHER_FIELD.sub(
            lambda match: name_of(match[1]) if name_of is not None else match[1], self.message)
        if self.FIELD in message:
            return message.replace(self.FIELD, name)
        return f"{name} {message}"

    def __reduce__(self) -> tuple[type, tuple[str, str]]:
        return type(self), (self.field, self.message)
