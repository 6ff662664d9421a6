"""Fake USI engine that never answers ``go`` (nor ``stop``/``quit`` after it)."""
from _fakeusi import main

main(["--hang-on-go", "1"])
