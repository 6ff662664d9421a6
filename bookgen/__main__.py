"""``python -m bookgen`` and the ``bookgen`` command (the entry point of both).

A Ctrl-C while the command line loads exits quietly with code 130
(:mod:`bookgen.startup`); then :func:`bookgen.cli.main` runs.
"""

from bookgen.startup import quit_on_ctrl_c


def main() -> None:
    quit_on_ctrl_c()
    from bookgen.cli import main as cli_main

    cli_main()


if __name__ == "__main__":
    main()
