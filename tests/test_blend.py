"""blend:BOOK:INNER: dlshogi's Use_Book_Policy and YaneuraOu's PolicyBook rules."""

from __future__ import annotations

import math

import cshogi
import pytest

from bookgen.engines.factory import make_evaluator
from bookgen.grow import EvaluatorSettings, grow
from conftest import run_cli, small_grow

START = "lnsgkgsnl/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL b -"


@pytest.fixture()
def book(tmp_path):
    source = tmp_path / "in.db"
    source.write_text(f"#YANEURAOU-DB2016 1.00\nsfen {START} 1\n"
                      "7g7f none 100 10 30\n2g2f none 50 10 10\n")
    path = tmp_path / "book.sqlite"
    assert run_cli("import", source, "-b", path).exit_code == 0
    return path


def sigmoid(cp: float) -> float:
    return 1 / (1 + math.exp(-cp / 756))


def test_dlshogi_rule_exact_values(book):
    board = cshogi.Board()
    with make_evaluator("builtin") as inner:
        plain = inner.evaluate([board])[0]
    with make_evaluator(f"blend:{book}:builtin") as blended:
        result = blended.evaluate([board])[0]
    assert result.moves == plain.moves
    share = {"7g7f": 0.75, "2g2f": 0.25}
    for move, prior, base in zip(result.moves, result.priors, plain.priors):
        assert prior == pytest.approx(0.5 * base + 0.5 * share.get(move, 0.0), abs=1e-12)
    assert result.value == pytest.approx(0.5 * plain.value + 0.5 * sigmoid(100), abs=1e-12)
    assert sum(result.priors) == pytest.approx(1.0)


def test_weight_and_yaneuraou_rule(book):
    board = cshogi.Board()
    with make_evaluator("builtin") as inner:
        plain = inner.evaluate([board])[0]
    with make_evaluator(f"blend:{book}:builtin", weight=0.2) as blended:
        result = blended.evaluate([board])[0]
    index = result.moves.index("7g7f")
    assert result.priors[index] == pytest.approx(0.8 * plain.priors[index] + 0.2 * 0.75)
    with make_evaluator(f"blend:{book}:builtin", rule="yaneuraou") as blended:
        result = blended.evaluate([board])[0]
    r = 0.7 + 0.1 * math.log10(40)
    assert result.priors[index] == pytest.approx((1 - r) * plain.priors[index] + r * 0.75)
    assert result.value == pytest.approx(sigmoid(100))


def test_positions_outside_the_book_pass_through(book):
    board = cshogi.Board()
    board.push_usi("7g7f")
    with make_evaluator("builtin") as inner:
        plain = inner.evaluate([board])[0]
    with make_evaluator(f"blend:{book}:builtin") as blended:
        result = blended.evaluate([board])[0]
    assert result.priors == plain.priors and result.value == plain.value


def test_blend_in_grow_and_bad_specs(book, tmp_path):
    grown = tmp_path / "grown.sqlite"
    settings = small_grow(30, 3, evaluator=EvaluatorSettings(f"blend:{book}:builtin"))
    summary = grow(grown, settings, progress=False)
    assert summary.expansions == 3
    result = run_cli("grow", "-b", tmp_path / "x.sqlite", "--evaluator",
                     f"blend:{tmp_path / 'missing.sqlite'}:builtin", expect=2)
    assert "no such book" in result.stderr
    result = run_cli("grow", "-b", tmp_path / "x.sqlite", "--evaluator", f"blend:{book}",
                     expect=2)
    assert "unknown evaluator" in result.stderr
