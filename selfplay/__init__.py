"""Curriculum: turning the book into reinforcement-learning input.

Will hold start-position sets (``roots.hcp``, sfen and psfen lists), the
book-prior blending evaluator (dlshogi ``Use_Book_Policy``), policy-book and
hcpe exports, self-play games from book and mistake positions, and a small
CPU trainer for the dlshogi-shaped network.
"""
