"""What every command module shares: the error wrapper, the exit codes and the
``--wait`` option.

Kept apart from :mod:`bookgen.cli` so that command modules in other packages
(``bookgen.cli_model``, ``refine.cli_*``, ``bookgen.selfplay.cli``) can use it
without an import cycle.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from functools import wraps
from typing import Any, TypeVar

import click

from bookgen.errors import BookgenError
from bookgen.startup import INTERRUPTED_EXIT, command_started

F = TypeVar("F", bound=Callable[..., Any])

wait_option = click.option(
    "--wait", is_flag=True,
    help="If another bookgen command is writing the book, wait for it to finish "
         "(default: fail at once, naming it).")

DEFAULT_TIMEOUT_HELP = (
    "By default the wait scales with the limit: 1.5 x the time + 10 s for byoyomi or "
    "movetime, 10 s + nodes / 10,000 s for --nodes (20 s for 100,000 nodes), "
    "10 s + 2^(depth/2) / 16 s for --depth (74 s for depth 20).")
"""The defaults of ``--engine-timeout``
(:func:`bookgen.engines.usi.client.default_search_timeout`)."""

ERROR_EXIT = 2


def reports_errors(function: F) -> F:
    """Turn library errors into a one-line message and exit code 2; Ctrl-C into 130
    (from here on a ``KeyboardInterrupt``: see :mod:`bookgen.startup`)."""

    @wraps(function)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        command_started()
        try:
            return function(*args, **kwargs)
        except BookgenError as error:
            click.echo(f"bookgen: error: {error}", err=True)
            sys.exit(ERROR_EXIT)
        except KeyboardInterrupt:
            click.echo("bookgen: interrupted", err=True)
            sys.exit(INTERRUPTED_EXIT)

    return wrapper  # type: ignore[return-value]


def exit_if_interrupted(interrupted: bool,
                        hint: str = "rerun the same command to continue") -> None:
    """The one rule for commands that stop cleanly at Ctrl-C and print their
    summary: they then say so and exit with :data:`INTERRUPTED_EXIT`."""
    if interrupted:
        click.echo(f"bookgen: interrupted; {hint}", err=True)
        sys.exit(INTERRUPTED_EXIT)
