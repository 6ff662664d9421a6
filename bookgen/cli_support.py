"""What every command module shares: the error wrapper.

Kept apart from :mod:`bookgen.cli` so that command modules in other packages
(``bookgen.cli_model``, ``refine.cli_*``, ``selfplay.cli``) can use it
without an import cycle.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from functools import wraps
from typing import Any, TypeVar

import click

from bookgen.errors import BookgenError

F = TypeVar("F", bound=Callable[..., Any])


def reports_errors(function: F) -> F:
    """Turn library errors into a one-line message and exit code 2; Ctrl-C into 130."""

    @wraps(function)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return function(*args, **kwargs)
        except BookgenError as error:
            click.echo(f"bookgen: error: {error}", err=True)
            sys.exit(2)
        except KeyboardInterrupt:
            click.echo("bookgen: interrupted", err=True)
            sys.exit(130)

    return wrapper  # type: ignore[return-value]
