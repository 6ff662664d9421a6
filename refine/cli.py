"""``bookgen refine ...``: the command group of the refinement stage.

The subcommands live beside their code: ``refine/cli_minimax.py`` (minimax)
and ``refine/cli_search.py`` (search, mistakes); importing this module
registers them.
"""

from __future__ import annotations

import click


@click.group("refine")
def refine_group() -> None:
    """Refine a grown book: minimax over the book graph, alpha-beta re-search of
    book positions, and mining the positions where the evaluator was wrong."""


def _register() -> None:
    from bookgen.refine import cli_minimax, cli_search  # noqa: F401  (commands attach themselves)


_register()
