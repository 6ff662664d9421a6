"""The ``bookgen`` command line: a thin layer over the library functions.

One module per stage: :mod:`~bookgen.cli.store` (import, export, merge,
stats, show, serve), :mod:`~bookgen.cli.grow`, :mod:`~bookgen.cli.refine` (the
``refine`` group), :mod:`~bookgen.cli.curriculum` (starts, selfplay, train),
:mod:`~bookgen.cli.measure` (suite, match, rate, sprt, outcomes, report),
:mod:`~bookgen.cli.model` and :mod:`~bookgen.cli.cycle` (the loop of all stages),
with the shared options in
:mod:`~bookgen.cli.options` and the error wrapper in :mod:`~bookgen.cli.support`.
Every command is added to :func:`main` here and nowhere else. Each command
parses its options, calls one function of the library (imported only when
the command runs, so that ``bookgen --help`` stays light) and prints the
result. User errors (:class:`~bookgen.errors.BookgenError`) become one line on
stderr and exit code 2; Ctrl-C exits with 130 after the command has cleaned up.
"""

from __future__ import annotations

import sys

if sys.argv[0] == "-m":  # python -m bookgen.cli, while this package loads: see bookgen.startup
    from bookgen.startup import quit_on_ctrl_c

    quit_on_ctrl_c()

import click

from bookgen import __version__
from bookgen.cli.curriculum import selfplay_command, starts_command, train_command
from bookgen.cli.cycle import cycle_command
from bookgen.cli.grow import grow_command
from bookgen.cli.measure import (
    match_command,
    outcomes_command,
    rate_command,
    report_command,
    sprt_command,
    suite_command,
)
from bookgen.cli.model import model_group
from bookgen.cli.refine import refine_group
from bookgen.cli.store import (
    export_command,
    import_command,
    merge_command,
    serve_command,
    show_command,
    stats_command,
)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="bookgen")
def main() -> None:
    """Grow, refine and use shogi opening books stored in SQLite.

    A book is one SQLite file (default ./book.sqlite) that plain SQLite tools
    can open; see docs/schema.md for its tables.
    """


# store
main.add_command(import_command)
main.add_command(export_command)
main.add_command(merge_command)
main.add_command(stats_command)
main.add_command(show_command)
main.add_command(serve_command)
# grow
main.add_command(grow_command)
# refine
main.add_command(refine_group)
# curriculum
main.add_command(starts_command)
main.add_command(selfplay_command)
main.add_command(train_command)
# measure
main.add_command(suite_command)
main.add_command(match_command)
main.add_command(rate_command)
main.add_command(sprt_command)
main.add_command(outcomes_command)
main.add_command(report_command)
# networks
main.add_command(model_group)
# the loop of all stages
main.add_command(cycle_command)
