"""Fake USI engine that exits (code 3) on its 2nd ``go``; see _fakeusi.py for options."""
from _fakeusi import main

main(["--crash-on-go", "2"])
