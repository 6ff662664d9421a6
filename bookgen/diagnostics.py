"""Reporting invalid input entries: file, line and reason, once each."""

from __future__ import annotations

import sys
from collections import Counter
from dataclasses import dataclass, field
from typing import TextIO


@dataclass(frozen=True, slots=True)
class Problem:
    source: str
    line: int | None
    reason: str

    def __str__(self) -> str:
        where = f"{self.source}:{self.line}" if self.line is not None else self.source
        return f"{where}: {self.reason}"


@dataclass
class Diagnostics:
    """Collects problems found while reading input.

    Each problem is printed once to ``stream`` (stderr by default) as
    ``FILE:LINE: reason``; after ``print_limit`` problems only the count
    grows, so a badly broken file cannot flood the terminal. ``skipped``
    counts the entries dropped because of problems, by kind.
    """

    stream: TextIO | None = field(default_factory=lambda: sys.stderr)
    print_limit: int = 1000
    problems: list[Problem] = field(default_factory=list)
    skipped: Counter[str] = field(default_factory=Counter)

    def report(self, source: str, line: int | None, reason: str, kind: str = "entries",
               skipped: int = 1) -> None:
        problem = Problem(source, line, reason)
        self.problems.append(problem)
        if skipped:
            self.skipped[kind] += skipped
        if self.stream is not None:
            if len(self.problems) <= self.print_limit:
                print(f"bookgen: {problem}", file=self.stream)
            elif len(self.problems) == self.print_limit + 1:
                print("bookgen: more problems follow; only their count is reported",
                      file=self.stream)

    def __len__(self) -> int:
        return len(self.problems)
