"""``python -m bookgen``: the same as the ``bookgen`` command."""

from bookgen.cli import main

main()
