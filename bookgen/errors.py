"""Errors that the CLI reports as one line on stderr with exit code 2."""


class BookgenError(Exception):
    """A user-facing error: bad input, missing file, refused operation."""
