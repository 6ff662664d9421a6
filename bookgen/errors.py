"""Errors that the CLI reports as one line on stderr with exit code 2."""


class BookgenError(Exception):
    """A user-facing error: bad input, missing file, refused operation."""


class SettingsError(BookgenError):
    """A settings field with a value the library refuses.

    ``field`` is the field's dotted name in the settings (``"draws.black"``,
    ``"mcts.playouts"``, ``"workers"``), ``message`` what is wrong with it
    (``"must be at least 1"``). ``str()`` is ``"{field} {message}"``; the CLI
    names its flag instead of the field (:func:`bookgen.cli.support.flag_of`),
    so library errors never name a CLI flag.
    """

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field} {message}")
        self.field = field
        self.message = message

    def __reduce__(self) -> tuple[type, tuple[str, str]]:
        return type(self), (self.field, self.message)
