"""What every command module shares: the error wrapper and the ``--wait`` option.

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

wait_option = click.option(
    "--wait", is_flag=True,
    help="If another bookgen command is writing the book, wait for it to finish "
         "(default: fail at once, naming it).")


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
