"""The docs name real things: every ``bookgen.*`` name in backticks in README.md and
docs/*.md, and every :mod:/:func:/:class:/:meth:/:data: reference to bookgen in
the library's docstrings, resolves to a module or an attribute of one."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FOLDERS = ("bookgen", "grow", "refine", "selfplay", "analysis")
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BACKTICKED = re.compile(r"`(bookgen(?:\.\w+)+)`")
ROLE = re.compile(r":(?:mod|func|class|meth|data|attr|exc):`~?(?:[^`<]*<)?(bookgen(?:\.\w+)+)>?`")


def resolves(name: str) -> bool:
    """Whether ``name`` is a module, or an attribute path inside one."""
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            target = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attribute in parts[cut:]:
            if not hasattr(target, attribute):
                return False
            target = getattr(target, attribute)
        return True
    return False


def _names(paths: list[Path], pattern: re.Pattern[str]) -> list[tuple[str, str]]:
    return sorted({(str(path.relative_to(ROOT)), name) for path in paths
                   for name in pattern.findall(path.read_text())})


@pytest.mark.parametrize("path", [str(p.relative_to(ROOT)) for p in DOCS])
def test_docs_name_real_modules(path):
    missing = [name for _, name in _names([ROOT / path], BACKTICKED) if not resolves(name)]
    assert missing == []


def test_docstrings_name_real_modules():
    sources = [p for folder in FOLDERS for p in (ROOT / folder).rglob("*.py")]
    missing = [f"{path}: {name}" for path, name in _names(sources, ROLE) if not resolves(name)]
    assert missing == []


def test_the_checks_catch_a_wrong_name():
    assert resolves("bookgen.store.index.BookIndex")
    assert not resolves("bookgen.store.index.NoSuchThing")
    assert not resolves("bookgen.no_such_module")
