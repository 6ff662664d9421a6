"""Errors that the CLI reports as one line on stderr with exit code 2."""


class BookgenError(Exception):
    """A user-facing error: bad input, missing file, refused operation."""


class SettingsError(BookgenError):
    """An error about one settings field, which the library names by the field.

    ``field`` is the field's dotted name in the settings (``"draws.black"``,
    ``"mcts.playouts"``, ``"workers"``), ``message`` what is wrong. The message
    names the field where it holds :attr:`FIELD`, else the field comes first:
    ``SettingsError("workers", "must be at least 1")`` reads "workers must be at
    least 1". The CLI names its flag instead (:meth:`naming` with
    :func:`bookgen.cli.support.flag_of`), so library errors never name a CLI
    flag and the CLI's texts name its flags.
    """

    FIELD = "{field}"

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        self.message = message
        super().__init__(self.naming(field))

    def naming(self, name: str) -> str:
        """The error's text with ``name`` for the field."""
        if self.FIELD in self.message:
            return self.message.replace(self.FIELD, name)
        return f"{name} {self.message}"

    def __reduce__(self) -> tuple[type, tuple[str, str]]:
        return type(self), (self.field, self.message)
