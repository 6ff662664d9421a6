"""``python -m bookgen.cli``: the ``bookgen`` command (the tests run it so).

Loading :mod:`bookgen.cli` already made a Ctrl-C before the command runs exit
quietly (:func:`bookgen.startup.quit_on_ctrl_c`).
"""

from bookgen.cli import main

if __name__ == "__main__":
    main()
