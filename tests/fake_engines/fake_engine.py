"""Fake USI engine that behaves unless told otherwise by _fakeusi.py's flags."""
from _fakeusi import main

main([])
