"""bookgen grow: integrity of grown books, strategies, runs, kill and resume."""

from __future__ import annotations

import json
import signal
import sqlite3
from pathlib import Path

import cshogi
import pytest

from bookgen.engines.mcts import MctsSettings, MoveStats
from bookgen.grow import EvaluatorSettings, GrowBudget, GrowSettings, WalkSettings, grow
from bookgen.grow.book_moves import select_book_moves
from bookgen.values import DrawValues
from conftest import PYTHON, integrity_ok, run_cli, small_grow
from processes import Bookgen, stop_all

START = "lnsgkgsnl/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL b -"


def book_rows(book: Path) -> tuple[dict[int, tuple], list[tuple]]:
    conn = sqlite3.connect(book)
    try:
        positions = {row[0]: row[1:] for row in conn.execute(
            "SELECT id, sfen, ply, turn, value, expanded_run FROM positions")}
        moves = conn.execute(
            "SELECT position_id, move, value, count, child_id, eval_value, visits, prior, "
            "win_rate FROM moves").fetchall()
    finally:
        conn.close()
    return positions, moves


def check_depths_and_ponders(book: Path) -> None:
    """A move into a child with moves has the child's first move (value, count,
    move: the order export writes) as its ponder and that move's depth + 1; any
    other move has the depth of the search behind it (>= 1 when it was visited)
    and, if any, a ponder legal in the child."""
    conn = sqlite3.connect(book)
    try:
        rows = conn.execute("SELECT m.position_id, m.move, m.ponder, m.value, m.depth, m.count, "
                            "m.child_id, m.visits, p.sfen FROM moves m JOIN positions p "
                            "ON p.id = m.position_id").fetchall()
    finally:
        conn.close()
    by_position: dict[int, list[tuple]] = {}
    for row in rows:
        by_position.setdefault(row[0], []).append(row)
    for _pid, move, ponder, _value, depth, _count, child_id, visits, sfen in rows:
        child_moves = by_position.get(child_id)
        if child_moves:
            first = min(child_moves, key=lambda r: (-r[3], -r[5], r[1]))
            assert (ponder, depth) == (first[1], first[4] + 1), f"{sfen} {move}"
        else:
            assert depth is not None and depth >= (1 if visits else 0), f"{sfen} {move}"
            if ponder is not None:
                board = cshogi.Board(f"{sfen} 1")
                board.push_usi(move)
                assert ponder in {cshogi.move_to_usi(m) for m in board.legal_moves}


def check_grown_book(book: Path, roots: list[str] | None = None) -> dict[str, int]:
    """The invariants every grown book must satisfy; returns some counts."""
    positions, moves = book_rows(book)
    by_sfen = {row[0]: pid for pid, row in positions.items()}
    assert len(by_sfen) == len(positions), "a position stored twice"
    children: dict[int, list[tuple]] = {}
    for row in moves:
        children.setdefault(row[0], []).append(row)
    for pid, (sfen, ply, turn, _value, _expanded) in positions.items():
        board = cshogi.Board(f"{sfen} 1")
        assert board.turn == turn
        legal = {cshogi.move_to_usi(m) for m in board.legal_moves}
        for _pid, move, _value, count, child_id, *_ in children.get(pid, []):
            assert move in legal, f"illegal book move {move} in {sfen}"
            assert child_id is not None, "grown moves link their child"
            board.push_usi(move)
            assert positions[child_id][0] == board.sfen().rsplit(" ", 1)[0], "wrong child link"
            if ply is not None and positions[child_id][1] is not None:
                assert positions[child_id][1] <= ply + 1
            board.pop()
            assert count >= 1
    # Values are consistent with the children: negamax over expanded children.
    for pid, rows in children.items():
        for _pid, move, value, _count, child_id, eval_value, *_ in rows:
            child_moves = children.get(child_id)
            if child_moves:
                assert value == -max(r[2] for r in child_moves), (
                    f"{positions[pid][0]} {move}: {value} vs child best "
                    f"{max(r[2] for r in child_moves)}")
            else:
                assert value == eval_value
        assert positions[pid][3] == max(r[2] for r in rows), "position value is its best move"
    check_depths_and_ponders(book)
    # Reachable from the roots through book moves.
    starts = roots or [START]
    reached = {by_sfen[s] for s in starts if s in by_sfen}
    frontier = list(reached)
    while frontier:
        pid = frontier.pop()
        for row in children.get(pid, []):
            if row[4] not in reached:
                reached.add(row[4])
                frontier.append(row[4])
    assert reached == set(positions), "positions not reachable from a root"
    return {"positions": len(positions), "expanded": len(children), "moves": len(moves)}


@pytest.mark.parametrize("strategy", ["dlshogi", "book-mcts", "dropout"])
def test_grow_builds_a_consistent_book(tmp_path, strategy):
    book = tmp_path / "book.sqlite"
    summary = grow(book, small_grow(40, 12, seed=1, strategy=strategy), progress=False)
    assert summary.status == "done" and summary.expansions == 12
    counts = check_grown_book(book)
    assert counts["expanded"] == 12
    assert counts["positions"] > 12


def test_transpositions_share_a_row(tmp_path):
    """7g7f 3c3d 2g2f and 2g2f 3c3d 7g7f reach one position: one row, expanded
    once, and both parents' book moves link to it."""
    lines = ["#YANEURAOU-DB2016 1.00"]
    board = cshogi.Board()
    for order in (("7g7f", "3c3d", "2g2f"), ("2g2f", "3c3d", "7g7f")):
        board.reset()
        for usi in order:
            lines += [f"sfen {board.sfen()}", f"{usi} none 0 1 1"]
            board.push_usi(usi)
    common = board.sfen().rsplit(" ", 1)[0]
    source = tmp_path / "in.db"
    source.write_text("\n".join(lines) + "\n")
    book = tmp_path / "book.sqlite"
    assert run_cli("import", source, "-b", book).exit_code == 0
    grow(book, small_grow(20, 1, seed=0), progress=False)
    positions, moves = book_rows(book)
    ids = [pid for pid, row in positions.items() if row[0] == common]
    assert len(ids) == 1
    assert positions[ids[0]][4] is not None, "the common position was expanded"
    linking = sorted(move for _pid, move, _v, _c, child, *_ in moves if child == ids[0])
    assert linking == ["2g2f", "7g7f"]


def summary_expansions(book: Path) -> int:
    conn = sqlite3.connect(book)
    try:
        return conn.execute("SELECT count(*) FROM positions WHERE expanded_run IS NOT NULL"
                            ).fetchone()[0]
    finally:
        conn.close()


def test_resume_continues_the_same_book(tmp_path):
    book = tmp_path / "book.sqlite"
    grow(book, small_grow(30, 5, seed=3), progress=False)
    grow(book, small_grow(30, 5, seed=3), progress=False)
    assert summary_expansions(book) == 10
    check_grown_book(book)
    conn = sqlite3.connect(book)
    runs = conn.execute("SELECT command, status, evaluator, params, counts FROM runs"
                        ).fetchall()
    conn.close()
    assert [(r[0], r[1], r[2]) for r in runs] == [("grow", "done", "builtin")] * 2
    assert [json.loads(r[4])["expansions"] for r in runs] == [5, 5]
    params = json.loads(runs[0][3])
    assert params["playouts"] == 30 and params["strategy"] == "dlshogi"


def test_run_params_are_stored_as_before_with_draw_values_per_mille(tmp_path):
    """runs.params is a fingerprint: its text (sorted keys) stays exactly this (draw
    values per mille since issue 12; fractions before)."""
    book = tmp_path / "book.sqlite"
    grow(book, GrowSettings(mcts=MctsSettings(playouts=20, draws=DrawValues(white=600)),
                            budget=GrowBudget(positions=2), seed=4), progress=False)
    conn = sqlite3.connect(book)
    text = conn.execute("SELECT params FROM runs").fetchone()[0]
    conn.close()
    assert text == (
        '{"batch_size": 1, "color": "both", "cutoff": 0.015, "draw_value_black": 500, '
        '"draw_value_white": 600, "eval_threshold": 400, "evaluator": "builtin", '
        '"evaluator_options": {}, "max_ply": 64, "min_visits": 5, "playouts": 20, '
        '"positions": 2, "roots": null, "seconds": null, "seed": 4, "strategy": "dlshogi", '
        '"temperature": 1.0, "trials": null, "visit_threshold": 0.005, "workers": 1}')


def _moves_table(book: Path) -> dict[tuple[int, str], tuple]:
    conn = sqlite3.connect(book)
    try:
        return {(row[0], row[1]): row[2:] for row in conn.execute(
            "SELECT position_id, move, ponder, value, depth, count, visits, prior, win_rate, "
            "child_id, eval_value, run_id FROM moves")}
    finally:
        conn.close()


def _run_row(book: Path, run_id: int) -> tuple:
    conn = sqlite3.connect(book)
    try:
        return conn.execute("SELECT positions_added, moves_added, moves_updated, counts "
                            "FROM runs WHERE id = ?", (run_id,)).fetchone()
    finally:
        conn.close()


def test_runs_count_the_rows_each_run_wrote(tmp_path):
    """positions_added / moves_added / moves_updated are the rows a grow run
    inserted and changed (compared with snapshots of the tables), not its
    expansions; the expansions are in counts."""
    book = tmp_path / "book.sqlite"
    first = grow(book, small_grow(30, 6, seed=3), progress=False)
    after_first = _moves_table(book)
    positions_first = len(book_rows(book)[0])
    second = grow(book, small_grow(30, 6, seed=4), progress=False)
    after_second = _moves_table(book)
    positions_second = len(book_rows(book)[0])

    added, moves, updated, counts = _run_row(book, first.run_id)
    assert (added, moves, updated) == (positions_first, len(after_first), 0)
    assert json.loads(counts)["expansions"] == 6
    assert added > 6 and moves > 6  # rows, not expansions

    added, moves, updated, counts = _run_row(book, second.run_id)
    new = set(after_second) - set(after_first)
    changed = [key for key in after_first if after_second[key] != after_first[key]]
    assert added == positions_second - positions_first > 0
    assert moves == len(new) > 0
    assert updated == len(changed) > 0  # values propagated into older moves
    assert json.loads(counts)["expansions"] == 6
    assert (second.positions_added, second.moves_added, second.moves_updated) == \
        (added, moves, updated)


def test_grow_on_an_imported_book_links_into_it(tmp_path):
    """Growing continues from book moves that came from a DB2016 import."""
    source = tmp_path / "in.db"
    source.write_text(f"#YANEURAOU-DB2016 1.00\nsfen {START} 1\n7g7f none 50 10 10\n")
    book = tmp_path / "book.sqlite"
    assert run_cli("import", source, "-b", book).exit_code == 0
    grow(book, small_grow(20, 3, walk=WalkSettings(color="black")), progress=False)
    board = cshogi.Board()
    board.push_usi("7g7f")
    positions, _moves = book_rows(book)
    expanded = {row[0] for row in positions.values() if row[4] is not None}
    assert board.sfen().rsplit(" ", 1)[0] in expanded


def test_max_ply_and_eval_threshold_stop_walks(tmp_path):
    book = tmp_path / "book.sqlite"
    summary = grow(book, small_grow(20, 50, walk=WalkSettings(max_ply=2)), progress=False)
    positions, _ = book_rows(book)
    expanded_plies = [row[1] for row in positions.values() if row[4] is not None]
    assert max(expanded_plies) <= 3
    assert summary.stop_reason in ("nothing left to expand", "budget spent")


def test_select_book_moves_rule():
    stats = [MoveStats("a", 600, 0.5, 0.60, 0), MoveStats("b", 300, 0.3, 0.59, 0),
             MoveStats("c", 96, 0.1, 0.50, 0), MoveStats("d", 4, 0.1, 0.61, 0)]
    kept = select_book_moves(stats, visit_threshold=0.005, cutoff=0.015)
    # d is within the cutoff but below the visit threshold; c is too far below a.
    assert [k.move for k in kept] == ["a", "b"]
    assert [k.count for k in kept] == [600, 300]
    none_qualify = select_book_moves(stats, visit_threshold=0.9, cutoff=0.015)
    assert [k.move for k in none_qualify] == ["a", "b"]  # the top (4 + 2) // 3


def _grow_until_fault(tmp_path: Path, book: Path, fault: str) -> tuple[int, str, str]:
    """``bookgen grow`` on ``book`` with BOOKGEN_FAULT=``fault``: (exit code, out, err)."""
    process = Bookgen(tmp_path, "grow", "-b", book, "--playouts", "30", "--positions", "400",
                      env={"BOOKGEN_FAULT": fault})
    try:
        return process.finish(deadline=120)
    finally:
        stop_all(process, {})


def test_sigkill_mid_run_then_resume(tmp_path):
    book = tmp_path / "book.sqlite"
    code, _out, err = _grow_until_fault(tmp_path, book, "grow-expanded@5")  # kill -9 there
    assert code == -signal.SIGKILL, err
    assert integrity_ok(book)
    check_grown_book(book)
    assert summary_expansions(book) == 5
    assert grow(book, small_grow(30, 5, seed=1), progress=False).status == "done"
    assert summary_expansions(book) == 10
    check_grown_book(book)
    conn = sqlite3.connect(book)
    statuses = [r[0] for r in conn.execute("SELECT status FROM runs ORDER BY id")]
    conn.close()
    assert statuses == ["interrupted", "done"]  # the killed run is recognised as dead


def test_ctrl_c_stops_exits_130_and_keeps_what_was_recorded(tmp_path):
    book = tmp_path / "book.sqlite"
    code, out, err = _grow_until_fault(tmp_path, book, "grow-expanded@3:SIGINT")
    assert code == 130, err
    assert "interrupted" in out and "rerun the same command" in err
    assert "Traceback" not in err
    check_grown_book(book)
    conn = sqlite3.connect(book)
    status, added, counts = conn.execute(
        "SELECT status, positions_added, counts FROM runs").fetchone()
    positions = conn.execute("SELECT count(*) FROM positions").fetchone()[0]
    conn.close()
    assert status == "interrupted"
    assert added == positions
    assert json.loads(counts)["expansions"] == summary_expansions(book) == 3


def test_grow_cli_errors(tmp_path):
    book = tmp_path / "book.sqlite"
    result = run_cli("grow", "-b", book, "--evaluator", "nonsense", expect=2)
    assert "unknown evaluator" in result.stderr
    assert not book.exists()
    result = run_cli("grow", "-b", book, "--nodes", "5", expect=2)
    assert "usi:" in result.stderr
    bad_roots = tmp_path / "roots.txt"
    bad_roots.write_text("startpos moves 7g7f 7g7f\n")
    result = run_cli("grow", "-b", book, "--roots", bad_roots, expect=2)
    assert "roots.txt:1" in result.stderr


def test_two_workers_grow_distinct_positions(tmp_path):
    book = tmp_path / "book.sqlite"
    summary = grow(book, small_grow(30, 10, workers=2), progress=False)
    assert summary.status == "done" and summary.expansions == 10
    assert summary_expansions(book) == 10
    check_grown_book(book)


# ---------------------------------------------------------------- real evaluators

FAIRY = "/usr/games/fairy-stockfish"
GPSUSI = "/usr/games/gpsusi"
FAKES = Path(__file__).resolve().parent / "fake_engines"


def fake_engine(script: str, *args: object) -> str:
    import shlex

    return " ".join(shlex.quote(str(p)) for p in (PYTHON, FAKES / script, *args))


def test_grow_with_fairy_stockfish_multipv(tmp_path):
    book = tmp_path / "book.sqlite"
    evaluator = EvaluatorSettings(f"usi:{FAIRY}",
                                  {"nodes": 5000, "multipv": 3, "multipv_margin": 300})
    summary = grow(book, GrowSettings(evaluator=evaluator, budget=GrowBudget(positions=4)),
                   progress=False)
    assert summary.status == "done" and summary.expansions == 4
    counts = check_grown_book(book)
    positions, moves = book_rows(book)
    # MultiPV with a wide margin keeps several lines at the root.
    start_id = next(pid for pid, row in positions.items() if row[0] == START)
    assert len([m for m in moves if m[0] == start_id]) >= 1
    assert counts["expanded"] == 4


@pytest.mark.parametrize("evaluator,options", [
    ("builtin", {}),
    (f"usi:{FAIRY}", {"nodes": 5000, "multipv": 3, "multipv_margin": 300}),
])
def test_exported_grown_book_has_depths_and_ponders(tmp_path, evaluator, options):
    """DB2016 export of a grown book: every position's first move has a search depth
    (YaneuraOu skips a position whose first move is below BookDepthLimit), and a move
    whose child is in the file has the child's first move as its ponder."""
    from conftest import parse_db2016

    book = tmp_path / "book.sqlite"
    grow(book, small_grow(60, 8, seed=2, evaluator=EvaluatorSettings(evaluator, options)),
         progress=False)
    out = tmp_path / "book.db"
    run_cli("export", "-b", book, "-o", out)
    parsed = parse_db2016(out.read_text())
    blocks = {sfen: moves for sfen, _ply, moves in parsed.blocks}
    assert len(blocks) == 8
    ponders = 0
    for sfen, moves in blocks.items():
        assert moves[0][3] is not None and moves[0][3] >= 1, f"depth of {sfen} {moves[0]}"
        for move, ponder, _value, depth, _count in moves:
            board = cshogi.Board(f"{sfen} 1")
            board.push_usi(move)
            child = blocks.get(board.sfen().rsplit(" ", 1)[0])
            if child is not None:
                assert ponder == child[0][0]
                assert depth == child[0][3] + 1
                ponders += 1
            if ponder is not None:
                assert board.move_from_usi(ponder) in board.legal_moves
    assert ponders >= 7  # every expanded position but the root is some move's child
    if evaluator.startswith("usi:"):
        # The engine's own depth: fairy-stockfish reaches more than a few plies at 5000 nodes.
        assert max(m[3] for moves in blocks.values() for m in moves) >= 5


def test_grow_with_gpsusi_without_multipv(tmp_path):
    book = tmp_path / "book.sqlite"
    evaluator = EvaluatorSettings(f"usi:{GPSUSI}",
                                  {"options": {"BookDepth": "0"}, "byoyomi": 1000})
    summary = grow(book, GrowSettings(evaluator=evaluator, budget=GrowBudget(positions=2)),
                   progress=False)
    assert summary.expansions == 2
    check_grown_book(book)
    _positions, moves = book_rows(book)
    per_position: dict[int, int] = {}
    for row in moves:
        per_position[row[0]] = per_position.get(row[0], 0) + 1
    assert set(per_position.values()) == {1}, "gpsusi has no MultiPV: one move each"


def test_grow_with_torch_and_onnx_models(tmp_path):
    model = tmp_path / "m.pt"
    assert run_cli("model", "init", "-o", model, "--blocks", "1", "--channels", "8").exit_code == 0
    onnx = tmp_path / "m.onnx"
    assert run_cli("model", "export-onnx", model, "-o", onnx).exit_code == 0
    book = tmp_path / "book.sqlite"
    for spec in (f"torch:{model}", f"onnx:{onnx}"):
        grow(book, GrowSettings(evaluator=EvaluatorSettings(spec),
                                mcts=MctsSettings(playouts=32, batch_size=8),
                                budget=GrowBudget(positions=4)), progress=False)
    assert summary_expansions(book) == 8
    check_grown_book(book)


def test_network_evaluators_batch_leaves_by_default(tmp_path, monkeypatch):
    """Without --batch-size, torch/onnx (and blend over them) evaluate leaves in
    batches (grow, selfplay, refine mistakes --iterate); builtin one at a time; the
    help texts say so."""
    from bookgen.engines.network import analyser as network

    model = tmp_path / "m.pt"
    run_cli("model", "init", "-o", model, "--blocks", "1", "--channels", "8")
    onnx = tmp_path / "m.onnx"
    run_cli("model", "export-onnx", model, "-o", onnx)
    sizes: list[int] = []
    original = network.NetworkEvaluator.evaluate

    def spy(self, boards):  # type: ignore[no-untyped-def]
        sizes.append(len(boards))
        return original(self, boards)

    monkeypatch.setattr(network.NetworkEvaluator, "evaluate", spy)
    book = tmp_path / "book.sqlite"
    for spec in (f"torch:{model}", f"onnx:{onnx}", f"blend:{book}:torch:{model}", "builtin"):
        sizes.clear()
        result = run_cli("grow", "-b", book, "--evaluator", spec, "--playouts", "64",
                         "--positions", "1", "--json")
        run_id = json.loads(result.output)["run_id"]
        conn = sqlite3.connect(book)
        params = json.loads(conn.execute("SELECT params FROM runs WHERE id = ?",
                                         (run_id,)).fetchone()[0])
        conn.close()
        if spec == "builtin":
            assert params["batch_size"] == 1 and sizes == []
        else:
            assert params["batch_size"] == 16, spec
            assert max(sizes) == 16, spec  # leaves reach the network 16 at a time
    # selfplay: the MCTS players of both sides batch too
    starts = tmp_path / "starts.txt"
    starts.write_text("startpos\n")
    sizes.clear()
    run_cli("selfplay", "--starts", starts, "--games", "1", "-o", tmp_path / "g.hcpe",
            "--player", f"onnx:{onnx}", "--playouts", "48", "--max-ply", "4")
    assert max(sizes) == 16
    sizes.clear()
    run_cli("selfplay", "--starts", starts, "--games", "1", "-o", tmp_path / "h.hcpe",
            "--player", f"onnx:{onnx}", "--playouts", "48", "--max-ply", "4",
            "--batch-size", "4")
    assert max(sizes) == 4
    for command in (["grow"], ["selfplay"], ["refine", "mistakes"]):
        text = " ".join(run_cli(*command, "--help").output.split())
        assert ("default: auto: 16 on cpu, 256 on cuda for torch: and onnx: (by --device), "
                "1 for builtin") in text, command


def test_engine_crashing_once_is_restarted(tmp_path):
    book = tmp_path / "book.sqlite"
    engine = fake_engine("crash_engine.py", "--multipv", "--once-file", tmp_path / "crashed")
    summary = grow(book, GrowSettings(evaluator=EvaluatorSettings(f"usi:{engine}", {"nodes": 100}),
                                      budget=GrowBudget(positions=3)), progress=False)
    assert (tmp_path / "crashed").exists(), "the engine did crash"
    assert summary.status == "done" and summary.expansions == 3
    check_grown_book(book)


@pytest.mark.parametrize("script,args", [
    ("crash_engine.py", ["--multipv"]),          # crashes on every 2nd go
    ("garbage_engine.py", []),                   # garbage and an illegal bestmove
    ("hang_engine.py", []),                      # never answers go
])
def test_broken_engine_stops_with_a_clear_error(tmp_path, script, args):
    book = tmp_path / "book.sqlite"
    grow(book, small_grow(20, 3), progress=False)  # something to keep
    before = summary_expansions(book)
    engine = fake_engine(script, *args)
    result = run_cli("grow", "-b", book, "--evaluator", f"usi:{engine}", "--nodes", "100",
                     "--engine-timeout", "2", "--positions", "5", expect=2)
    assert result.stderr.startswith("bookgen: error: evaluator usi:"), result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert "Traceback" not in result.stderr
    assert "restart()" not in result.stderr  # what happened, not a Python API hint
    assert "\ufffd" not in result.stderr and "\x00" not in result.stderr
    assert integrity_ok(book)
    check_grown_book(book)
    assert summary_expansions(book) >= before
    conn = sqlite3.connect(book)
    statuses = [r[0] for r in conn.execute("SELECT status FROM runs ORDER BY id")]
    conn.close()
    assert statuses[-1] == "failed" or len(statuses) == 1  # refused before a run started


def test_engine_answering_from_its_book_stops_grow_and_says_so_once(tmp_path):
    """A grow analysis answered from the engine's own book is not stored: one line names
    the engine and the option that turns the book off, the run stops like one with an
    engine answering without any score; with the book off it grows."""
    book = tmp_path / "book.sqlite"
    grow(book, small_grow(20, 3), progress=False)  # something to keep
    before = summary_expansions(book)
    engine = f"usi:{fake_engine('fake_engine.py', '--book', 'string', '--multipv')}"
    result = run_cli("grow", "-b", book, "--evaluator", engine, "--nodes", "100",
                     "--positions", "5", expect=2)
    lines = result.stderr.strip().splitlines()
    assert [line for line in lines if "answers from its own book" in line] == [
        "bookgen: engine 'FakeEngine 1.0' answers from its own book; its book moves are not "
        "stored as analyses (set --engine-option USI_OwnBook=false or --engine-option "
        "BookFile=no_book)"]
    assert lines[-1].startswith("bookgen: error: evaluator usi:") and "own book" in lines[-1]
    assert summary_expansions(book) == before
    check_grown_book(book)
    result = run_cli("grow", "-b", book, "--evaluator", engine, "--nodes", "100",
                     "--positions", "5", "--engine-option", "USI_OwnBook=false")
    assert "own book" not in result.stderr
    assert summary_expansions(book) > before


@pytest.mark.parametrize("strategy", ["dlshogi", "dropout"])
def test_books_do_not_depend_on_string_hashing(tmp_path, strategy):
    """The same seed grows the same book whatever PYTHONHASHSEED is (value
    propagation visits parents in a fixed order), and values stay negamax-consistent."""
    from conftest import run_bookgen_process

    dumps = []
    for hash_seed in ("1", "2"):
        book = tmp_path / f"book{hash_seed}.sqlite"
        for positions, seed in ((80, 2), (26, 12)):  # grow, then continue the grown book
            done = run_bookgen_process("grow", "-b", book, "--playouts", 60, "--batch-size", 4,
                                       "--positions", positions, "--seed", seed,
                                       "--strategy", strategy,
                                       env={"PYTHONHASHSEED": hash_seed})
            assert done.returncode == 0, done.stderr
        check_grown_book(book)
        dumps.append(book_rows(book))
    assert dumps[0] == dumps[1]
