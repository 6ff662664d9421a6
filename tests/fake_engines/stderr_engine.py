"""Fake USI engine that writes 256 KB to stderr on every ``go`` (4x a pipe buffer)."""
from _fakeusi import main

main(["--stderr-bytes", "262144"])
