"""Fake USI engine that prints garbage and answers with an illegal bestmove.

(``fake_engine.py --garbage`` prints the same garbage but answers legally.)
"""
from _fakeusi import main

main(["--garbage", "--illegal"])
