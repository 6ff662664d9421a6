"""The book's own moves: which ``moves`` rows are book moves.

``refine minimax`` stores the transposition edges the book does not hold as
``moves`` rows of its own (no value, no depth, count 0); they are derived
data, not book moves. Code that reads the book's own moves leaves them out.
"""

from __future__ import annotations

__all__ = ["REFINE_MINIMAX_COMMAND", "TRANSPOSITION_ROW_SQL", "transposition_row_sql"]

REFINE_MINIMAX_COMMAND = "refine minimax"


# A moves row (alias m) that ``refine minimax`` inserted for a transposition
# edge the book does not store: no value, no depth, count 0. Code that reads
# the book's own moves leaves these out with ``NOT <this>``.
def transposition_row_sql(schema: str = "main") -> str:
    """SQL true for a ``moves`` row (alias ``m``) that ``refine minimax`` added
    for a transposition edge, in the book attached as ``schema``."""
    return ("(m.value IS NULL AND m.depth IS NULL AND m.count = 0 AND m.run_id IS NOT NULL "
            f"AND m.run_id IN (SELECT id FROM {schema}.runs "
            f"WHERE command = '{REFINE_MINIMAX_COMMAND}'))")


TRANSPOSITION_ROW_SQL = transposition_row_sql()
