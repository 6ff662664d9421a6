"""``bookgen serve`` over HTTP (Starlette's test client): every page, its JSON twin and
every error case, on a small book with minimax values, analyses, mistakes and results;
the book is never written, and the explorer keeps answering while grow writes it.
The browser tests are in test_serve_browser.py."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import signal
import sqlite3
import subprocess
from html import escape
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import cshogi
import pytest
from starlette.testclient import TestClient

from bookgen.analysis.openings import results_by_opening
from bookgen.analysis.results import load_games
from bookgen.errors import SettingsError
from bookgen.explore.app import create_app
from bookgen.explore.settings import ServeSettings
from bookgen.explore.view import TREE_OPEN, Explorer, parse_place, parse_search
from bookgen.position import STARTPOS_SFEN
from bookgen.store.browse import MOVE_COLUMNS
from conftest import PYTHON, ROOT, integrity_ok, run_bookgen_process, run_cli
from serve_books import book_rows, make_explorer_book


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    return make_explorer_book(tmp_path_factory.mktemp("explore"))


@pytest.fixture(scope="module")
def client(made):
    openings = results_by_opening(load_games([made.results]))
    with Explorer(made.book) as explorer:
        with TestClient(create_app(explorer, openings, (str(made.results),))) as client:
            yield client


@pytest.fixture(scope="module")
def bare_client(made):
    """The app without results files."""
    with Explorer(made.book) as explorer, TestClient(create_app(explorer)) as client:
        yield client


def sfen_after(*moves: str, start: str = STARTPOS_SFEN) -> str:
    board = cshogi.Board(start + " 1")
    for usi in moves:
        board.push_usi(usi)
    return board.sfen().rsplit(" ", 1)[0]


def stored_moves(book: Path, sfen: str) -> dict[str, dict]:
    rows = book_rows(book, f"SELECT {', '.join('m.' + c for c in MOVE_COLUMNS)} FROM moves m "
                           "JOIN positions p ON p.id = m.position_id WHERE p.sfen = ?", sfen)
    return {row[0]: dict(zip(MOVE_COLUMNS, row)) for row in rows}


def table_moves(html: str) -> list[str]:
    body = html.split('id="moves"', 1)[1].split("</table>", 1)[0]
    return re.findall(r'<tr class="[a-z]+" data-move="([^"]+)"', body)


# -- the position page ----------------------------------------------------------------


def test_initial_position_page_shows_board_moves_and_columns(client, made):
    page = client.get("/")
    assert page.status_code == 200
    html = page.text
    assert '<svg class="board"' in html and "bookgen-glyph-" in html   # outlines, no text
    stored = stored_moves(made.book, STARTPOS_SFEN)
    assert stored and sorted(table_moves(html)) == sorted(stored)
    for header in ("ponder", "value", "depth", "count", "visits", "win rate", "prior", "eval",
                   "minimax", "mm depth", "engine", "child", "run", "mistake"):
        assert f">{header}</th>" in html, header
    # each own move drawn as an arrow that names its move
    arrows = re.findall(r'<g class="arrow" data-move="([^"]+)"', html)
    assert arrows and set(arrows) <= set(stored)
    assert 'src="/static/explorer.js"' in html and 'href="/static/explorer.css"' in html
    assert "Content-Security-Policy" in page.headers


def test_every_stored_column_comes_back_in_json(client, made):
    data = client.get("/api/position").json()
    stored = stored_moves(made.book, STARTPOS_SFEN)
    assert {m["move"]: {c: m[c] for c in MOVE_COLUMNS} for m in data["moves"]} == stored
    position = book_rows(made.book, "SELECT id, ply, visits, value, minimax_value FROM "
                                    "positions WHERE sfen = ?", STARTPOS_SFEN)[0]
    columns = data["columns"]
    assert (columns["id"], columns["ply"], columns["visits"], columns["value"],
            columns["minimax_value"]) == position
    assert data["in_book"] and data["sfen"] == STARTPOS_SFEN and data["last_move"] is None


def test_following_a_move_changes_board_line_and_table(client, made):
    first = client.get("/api/position").json()["moves"][0]["move"]
    page = client.get("/", params={"moves": first})
    assert page.status_code == 200
    child = sfen_after(first)
    assert sorted(table_moves(page.text)) == sorted(stored_moves(made.book, child))
    assert 'class="last-to"' in page.text                      # the last move is marked
    assert f"1.{first}" in page.text                           # the line shows it
    data = client.get("/api/position", params={"moves": first}).json()
    assert data["sfen"] == child and data["last_move"] == first
    assert data["place"] == {"moves": first}


def test_an_sfen_url_reaches_the_same_position(client, made):
    first = client.get("/api/position").json()["moves"][0]["move"]
    by_moves = client.get("/api/position", params={"moves": first}).json()
    by_sfen = client.get("/api/position", params={"sfen": sfen_after(first)}).json()
    assert by_sfen["sfen"] == by_moves["sfen"]
    assert by_sfen["moves"] == by_moves["moves"]
    assert by_sfen["place"] == {"sfen": sfen_after(first)}


def test_a_position_outside_the_book(client):
    moves = "1g1f 1c1d 2g2f 1d1e 2f2e"
    page = client.get("/", params={"moves": moves})
    assert page.status_code == 200 and "not in the book" in page.text
    data = client.get("/api/position", params={"moves": moves}).json()
    assert data["in_book"] is False and data["moves"] == [] and data["pv"] == []


def best_by_minimax(book: Path, sfen: str) -> tuple[str, int | None] | None:
    rows = book_rows(book, "SELECT m.move, m.count, coalesce(m.minimax_value, m.value) "
                           "FROM moves m JOIN positions p ON p.id = m.position_id "
                           "WHERE p.sfen = ?", sfen)
    if not rows:
        return None
    move, _, value = min(rows, key=lambda r: (r[2] is None, -(r[2] or 0), -r[1], r[0]))
    return move, value


def test_the_pv_follows_the_minimax_best_move_of_both_sides(client, made):
    data = client.get("/api/position").json()
    assert data["pv"]
    board = cshogi.Board()
    for move in data["pv"]:
        best = best_by_minimax(made.book, board.sfen().rsplit(" ", 1)[0])
        assert best is not None and best[0] == move
        board.push_usi(move)
    end = best_by_minimax(made.book, board.sfen().rsplit(" ", 1)[0])
    assert end is None or len(data["pv"]) == 40 or board.sfen().rsplit(" ", 1)[0] in {
        sfen_after(*data["pv"][:i]) for i in range(len(data["pv"]))}   # leaf or repetition
    # the chart's values are black's view of the best value after each PV move
    assert len(data["pv_values"]) == len(data["pv"])
    assert '<svg class="chart"' in client.get("/").text


def test_line_values_are_from_blacks_view(client, made):
    first = client.get("/api/position").json()["moves"][0]["move"]
    data = client.get("/api/position", params={"moves": first}).json()
    start_best = best_by_minimax(made.book, STARTPOS_SFEN)
    child_best = best_by_minimax(made.book, sfen_after(first))
    assert data["line_values"][0] == start_best[1]
    assert data["line_values"][1] == (None if child_best is None or child_best[1] is None
                                      else -child_best[1])


def test_analyses_and_mistake_marks(client, made):
    rows = book_rows(made.book, "SELECT p.sfen, k.book_move, k.difference FROM mistakes k "
                                "JOIN positions p ON p.id = k.position_id")
    assert rows, "the fixture's book has mistakes"
    sfen, book_move, difference = rows[0]
    page = client.get("/", params={"sfen": sfen})
    assert "Mistakes here" in page.text
    row = re.search(rf'<tr class="[a-z]+" data-move="{re.escape(book_move)}".*?</tr>',
                    page.text).group(0)
    assert f"&#9888; {abs(difference)}" in row
    analysed = book_rows(made.book, "SELECT p.sfen, a.engine, a.score, a.nodes FROM analyses a "
                                    "JOIN positions p ON p.id = a.position_id")
    sfen, engine, score, nodes = analysed[0]
    data = client.get("/api/position", params={"sfen": sfen}).json()
    assert [(a["engine"], a["score"], a["nodes"]) for a in data["analyses"]] == [
        (engine, score, nodes)]
    assert "<h2>Engine analyses</h2>" in client.get("/", params={"sfen": sfen}).text


def test_the_tree_expands_one_level_per_call(client, made):
    top = client.get("/api/tree").json()
    own = book_rows(made.book, "SELECT m.move FROM moves m JOIN positions p ON "
                               "p.id = m.position_id WHERE p.sfen = ? AND m.count > 0",
                    STARTPOS_SFEN)
    assert {n["move"] for n in top["nodes"]} == {r[0] for r in own}
    expandable = [n for n in top["nodes"] if n["tree"]]
    assert expandable
    node = expandable[0]
    below = client.get(node["tree"]).json()
    assert len(below["nodes"]) == node["child_moves"] > 0
    assert below["place"] == {"moves": node["move"]}
    for child in below["nodes"]:
        assert parse_qs(urlsplit(child["url"]).query)["moves"] == [f"{node['move']} "
                                                                   f"{child['move']}"]
    # the page opens the best few moves a ply deeper, with what /api/tree says of them
    tree = client.get("/api/position").json()["tree"]
    opened = [n for n in tree if n["children"]]
    assert opened and [n["move"] for n in opened] == [
        n["move"] for n in tree if n["child_moves"]][:TREE_OPEN]
    for node in opened:
        level = client.get("/api/tree", params={"moves": node["move"]}).json()["nodes"]
        assert [(c["move"], c["value"], c["count"], c["child_moves"]) for c in level] == [
            (c["move"], c["value"], c["count"], c["child_moves"]) for c in node["children"]]
    buttons = sum(1 for n in tree if n["child_moves"]) + sum(
        1 for n in opened for c in n["children"] if c["child_moves"])
    assert client.get("/").text.count('<button class="expand"') == buttons


def test_board_svg(client):
    svg = client.get("/board.svg", params={"moves": "7g7f"})
    assert svg.status_code == 200 and svg.headers["content-type"].startswith("image/svg+xml")
    assert svg.text.startswith("<svg") and 'class="last-from"' in svg.text


# -- lists ----------------------------------------------------------------------------


def test_mistakes_are_listed_largest_first_with_links(client, made):
    sizes = sorted((abs(r[0]) for r in book_rows(made.book, "SELECT difference FROM mistakes")),
                   reverse=True)
    data = client.get("/api/mistakes").json()
    assert data["total"] == len(sizes)
    assert [abs(m["difference"]) for m in data["mistakes"]] == sizes
    page = client.get("/mistakes").text
    links = re.findall(r'<a href="(/\?[^"]+)" data-nav class="sfen">', page)
    assert len(links) == len(sizes)
    target = client.get(links[0].replace("&amp;", "&"))
    assert target.status_code == 200 and "Mistakes here" in target.text
    second = client.get("/api/mistakes", params={"offset": 1, "limit": 1}).json()
    assert [abs(m["difference"]) for m in second["mistakes"]] == sizes[1:2]


def test_runs_are_listed_with_parameters(client, made):
    stored = book_rows(made.book, "SELECT id, command, status FROM runs ORDER BY id")
    data = client.get("/api/runs").json()
    assert [(r["id"], r["command"], r["status"]) for r in data["runs"]] == stored
    page = client.get("/runs").text
    for _, command, _ in stored:
        assert f"<td>{command}</td>" in page
    assert "<dt>playouts</dt>" in page or "<dt>mcts</dt>" in page


def test_results_by_opening(client, made):
    data = client.get("/api/results").json()
    games = book_rows(made.results, "SELECT opening, black, white, result FROM games")
    openings = {o["opening"]: o for o in data["openings"]}
    assert set(openings) == {g[0] for g in games}
    for name, entry in openings.items():
        played = [g for g in games if g[0] == name]
        assert entry["games"] == len(played)
        for score in entry["scores"]:
            points = sum((1.0 if g[3] == ("black" if g[1] == score["player"] else "white")
                          else 0.5 if g[3] == "draw" else 0.0)
                         for g in played if score["player"] in g[1:3])
            assert score["points"] == points
        assert entry["in_book"] is True
    page = client.get("/results").text
    for name in openings:
        link = escape("/?" + "moves=" + name.split(" moves ", 1)[1].replace(" ", "+"))
        assert f'<a href="{link}" data-nav class="opening">{escape(name)}</a>' in page


def test_results_page_without_results_files(bare_client):
    page = bare_client.get("/results")
    assert page.status_code == 404 and "--results" in page.text
    assert bare_client.get("/api/results").status_code == 404
    assert 'href="/results"' not in bare_client.get("/").text


# -- search ---------------------------------------------------------------------------


@pytest.mark.parametrize(("query", "location"), [
    ("startpos moves 7g7f 3c3d", "/?moves=7g7f+3c3d"),
    ("position startpos moves 7g7f", "/?moves=7g7f"),
    ("7g7f 3c3d", "/?moves=7g7f+3c3d"),
    ("startpos", "/"),
    (f"sfen {STARTPOS_SFEN} 1 moves 2g2f", "/?moves=2g2f"),
    (sfen_after("7g7f"), "/?sfen=" + sfen_after("7g7f").replace(" ", "+").replace(
        "/", "%2F")),
    (sfen_after("7g7f") + " 2 moves 3c3d", "/?sfen=" + (sfen_after("7g7f") + " 2").replace(
        " ", "+").replace("/", "%2F") + "&moves=3c3d"),
])
def test_search_redirects_to_the_position(client, query, location):
    answer = client.get("/search", params={"q": query}, follow_redirects=False)
    assert answer.status_code == 303 and answer.headers["location"] == location
    assert client.get(location).status_code == 200


# -- errors ---------------------------------------------------------------------------


@pytest.mark.parametrize(("path", "params", "message"), [
    ("/", {"moves": "7g7x"}, "move 1 (7g7x): '7g7x' is not a USI move"),
    ("/", {"moves": "7g7f 7g7f"}, "move 2 (7g7f): '7g7f' is not legal in this position"),
    ("/", {"moves": "7g7f,3c3d,8h1a"}, "move 3 (8h1a): '8h1a' is not legal in this position"),
    ("/", {"sfen": "lnsgkgsnl/9 b -"}, "sfen 'lnsgkgsnl/9 b -': "),
    ("/", {"sfen": "only two"}, "expected 'board turn hands [ply]', got 2 fields"),
    ("/", {"sfen": STARTPOS_SFEN.replace(" b ", " x ")}, "side to move 'x' is neither"),
    ("/", {"moves": " ".join(["7g7f"] * 601)}, "moves: 601 moves, at most 600"),
    ("/board.svg", {"moves": "P*5e"}, "move 1 (P*5e): 'P*5e' is not legal in this position"),
    ("/mistakes", {"offset": "-1"}, "offset: '-1' is not a whole number"),
    ("/mistakes", {"limit": "abc"}, "limit: 'abc' is not a whole number from 1 to 1000"),
    ("/mistakes", {"limit": "0"}, "limit: '0' is not a whole number from 1 to 1000"),
    ("/search", {"q": ""}, "search: empty"),
    ("/search", {"q": "hello world"}, "search: 'hello' is neither an sfen"),
    ("/search", {"q": "startpos 7g7f"}, "search: expected 'moves' after startpos"),
    ("/search", {"q": "7g7f 7g7f"}, "move 2 (7g7f)"),
])
def test_a_malformed_url_is_a_400_page_saying_what_is_wrong(client, path, params, message):
    answer = client.get(path, params=params)
    assert answer.status_code == 400
    assert answer.headers["content-type"].startswith("text/html")
    shown = re.search(r'<p class="message" id="error">(.*?)</p>', answer.text).group(1)
    assert escape(message, quote=True) in shown


@pytest.mark.parametrize(("path", "params", "message"), [
    ("/api/position", {"moves": "7g7x"}, "move 1 (7g7x): '7g7x' is not a USI move"),
    ("/api/tree", {"sfen": "x"}, "sfen 'x': expected 'board turn hands [ply]', got 1 fields"),
    ("/api/mistakes", {"offset": "1.5"}, "offset: '1.5' is not a whole number"),
])
def test_a_malformed_api_call_is_a_400_json(client, path, params, message):
    answer = client.get(path, params=params)
    assert answer.status_code == 400 and answer.json()["error"].startswith(message)


def test_unknown_pages_are_404(client):
    page = client.get("/nothing-here")
    assert page.status_code == 404 and "no such page: /nothing-here" in page.text
    assert client.get("/api/nothing").json() == {"error": "no such page: /api/nothing"}
    assert client.post("/").status_code == 405


def test_parse_place_and_search_agree():
    assert parse_search("startpos moves 7g7f") == parse_place(None, "7g7f")
    assert parse_place(STARTPOS_SFEN, "") == parse_place(None, None)
    assert parse_place(STARTPOS_SFEN + " 5", "").start == STARTPOS_SFEN


# -- escaping -------------------------------------------------------------------------


def test_every_value_from_the_book_and_results_is_escaped(made, tmp_path):
    book = tmp_path / "book.sqlite"
    shutil.copy(made.book, book)
    evil = '<script>alert("x")</script>'
    conn = sqlite3.connect(book)
    conn.execute("INSERT INTO runs (command, params, evaluator, started_at, status, counts, "
                 "bookgen_version) VALUES (?, ?, ?, '2026-01-01', 'done', ?, '0')",
                 (evil, json.dumps({evil: evil}), evil, json.dumps({"n": evil})))
    conn.execute("UPDATE mistakes SET reason = ?", (evil,))
    conn.execute("UPDATE analyses SET engine = ?, pv = ?", (evil, evil))
    conn.commit()
    conn.close()
    results = tmp_path / "results.sqlite"
    shutil.copy(made.results, results)
    conn = sqlite3.connect(results)
    conn.execute("UPDATE games SET black = ? WHERE black = 'a'", (evil,))
    conn.execute("UPDATE games SET white = ? WHERE white = 'a'", (evil,))
    conn.commit()
    conn.close()
    openings = results_by_opening(load_games([results]))
    analysed = book_rows(book, "SELECT p.sfen FROM analyses a JOIN positions p "
                               "ON p.id = a.position_id")[0][0]
    mistaken = book_rows(book, "SELECT p.sfen FROM mistakes k JOIN positions p "
                               "ON p.id = k.position_id")[0][0]
    with Explorer(book) as explorer, TestClient(create_app(explorer, openings,
                                                           (evil,))) as client:
        pages = [client.get("/runs").text, client.get("/mistakes").text,
                 client.get("/results").text,
                 client.get("/", params={"sfen": analysed}).text,
                 client.get("/", params={"sfen": mistaken}).text,
                 client.get("/search", params={"q": evil}).text]
    for page in pages:
        assert "<script>alert" not in page
    assert ["&lt;script&gt;alert" in page for page in pages] == [True] * len(pages)


# -- read-only, and live while a writer writes ----------------------------------------------


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_the_book_is_opened_read_only_and_never_written(made, tmp_path):
    book = tmp_path / "book.sqlite"
    shutil.copy(made.book, book)
    before = digest(book)
    with Explorer(book) as explorer:
        with pytest.raises(sqlite3.OperationalError, match="readonly|read-only"):
            with explorer.snapshot() as conn:
                conn.execute("CREATE TABLE scratch (x)")
        with TestClient(create_app(explorer)) as client:
            for path in ("/", "/?moves=7g7f", "/mistakes", "/runs", "/api/tree"):
                assert client.get(path).status_code == 200
    assert digest(book) == before


def start_bookgen(*args: object, env: dict[str, str]) -> subprocess.Popen:
    full_env = {**os.environ, **env}
    return subprocess.Popen([PYTHON, "-m", "bookgen.cli", *map(str, args)], cwd=str(ROOT),
                            env=full_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


def test_serving_goes_on_while_grow_writes_the_book(made, tmp_path):
    """A real grow process writes the book the explorer has open: the explorer sees
    its committed expansions while it is held at a fault point (WAL), answers every
    call while it goes on, and sees the finished run afterwards."""
    book = tmp_path / "book.sqlite"
    shutil.copy(made.book, book)
    positions = book_rows(book, "SELECT count(*) FROM positions")[0][0]
    runs = len(book_rows(book, "SELECT id FROM runs"))
    with Explorer(book) as explorer, TestClient(create_app(explorer)) as client:
        assert len(client.get("/api/runs").json()["runs"]) == runs
        writer = start_bookgen("grow", "-b", book, "--playouts", "30", "--positions", "30",
                               "--seed", "2", env={"BOOKGEN_FAULT": "grow-expanded:stop"})
        try:
            _, status = os.waitpid(writer.pid, os.WUNTRACED)
            assert os.WIFSTOPPED(status), "grow did not reach its fault point"
            # held mid-run, after its first expansion's commit: the explorer sees the run
            seen = client.get("/api/runs").json()["runs"]
            assert len(seen) == runs + 1 and seen[-1]["status"] == "running"
            assert seen[-1]["command"] == "grow"
            os.kill(writer.pid, signal.SIGCONT)
            answered = 0
            while writer.poll() is None:     # every call answers while grow writes
                for path in ("/", "/api/tree", "/runs", "/api/mistakes"):
                    assert client.get(path).status_code == 200
                    answered += 1
            out, err = writer.communicate(timeout=120)
            assert writer.returncode == 0, err
        finally:
            if writer.poll() is None:
                writer.kill()
                os.kill(writer.pid, signal.SIGCONT)
                writer.communicate(timeout=30)
        done = client.get("/api/runs").json()["runs"]
        assert done[-1]["status"] == "done"
        grown = book_rows(book, "SELECT count(*) FROM positions")[0][0]
        assert grown > positions
        root = client.get("/api/position").json()
        assert root["columns"]["id"] == book_rows(book, "SELECT id FROM positions WHERE "
                                                        "sfen = ?", STARTPOS_SFEN)[0][0]
    assert integrity_ok(book)


# -- the command line -----------------------------------------------------------------


def test_settings_are_checked():
    with pytest.raises(SettingsError, match="port must be 0 to 65535"):
        ServeSettings(port=70000)
    with pytest.raises(SettingsError, match="host must name an address"):
        ServeSettings(host=" ")
    assert ServeSettings().host == "127.0.0.1"


def test_serve_refuses_a_missing_book_or_bad_port(tmp_path):
    result = run_cli("serve", "-b", tmp_path / "none.sqlite", "--port", "0", expect=2)
    assert result.stderr.strip() == f"bookgen: error: {tmp_path / 'none.sqlite'}: no such book"
    result = run_cli("serve", "-b", tmp_path / "none.sqlite", "--port", "99999", expect=2)
    assert result.stderr.strip() == "bookgen: error: --port must be 0 to 65535, got 99999"


def test_serve_refuses_a_port_in_use(made):
    from bookgen.explore.app import listen

    sock = listen(ServeSettings(port=0))
    try:
        port = sock.getsockname()[1]
        proc = run_bookgen_process("serve", "-b", made.book, "--port", port)
    finally:
        sock.close()
    assert proc.returncode == 2
    assert proc.stderr.startswith(f"bookgen: error: cannot listen on 127.0.0.1:{port}: ")
    assert proc.stderr.count("\n") == 1


# -- the report's twin table -------------------------------------------------------------


def test_the_report_has_the_same_results_by_opening(client, made):
    from bookgen.analysis.document import Table
    from bookgen.analysis.ratings import RatingSettings
    from bookgen.analysis.report import ReportSettings, build_report, render_html

    report = build_report(ReportSettings(results=(made.results,), book=made.book,
                                         rating=RatingSettings(simulations=0)))
    (section,) = [s for s in report.sections if s.id == "openings"]
    (table,) = [b for b in section.blocks if isinstance(b, Table)]
    served = client.get("/api/results").json()["openings"]
    players = table.headers[2:]
    expected = []
    for entry in served:
        scores = {s["player"]: s for s in entry["scores"]}
        expected.append([entry["opening"], str(entry["games"])] + [
            f"{scores[p]['points']:g}/{scores[p]['games']} "
            f"({100 * scores[p]['points'] / scores[p]['games']:.0f} %)" for p in players])
    assert table.rows == expected and len(expected) == 3
    assert "Results by opening" in render_html(report)


def test_the_report_leaves_out_openings_outside_the_book(made, tmp_path):
    from bookgen.analysis.document import Paragraph
    from bookgen.analysis.ratings import RatingSettings
    from bookgen.analysis.report import ReportSettings, build_report

    other = tmp_path / "other.sqlite"
    run_cli("grow", "-b", other, "--playouts", "10", "--positions", "1", "--seed", "3")
    report = build_report(ReportSettings(results=(made.results,), book=other,
                                         rating=RatingSettings(simulations=0)))
    (section,) = [s for s in report.sections if s.id == "openings"]
    texts = [b.text for b in section.blocks if isinstance(b, Paragraph)]
    in_other = {r[0] for r in book_rows(other, "SELECT sfen FROM positions")}
    games = book_rows(made.results, "SELECT DISTINCT start_sfen FROM games")
    kept = sum(1 for (sfen,) in games if sfen.rsplit(" ", 1)[0] in in_other)
    if kept == 0:
        assert texts == ["No opening of these games is a position of the book."]
    else:
        assert texts[0].startswith(f"{kept} opening")


def test_serve_listens_on_127_0_0_1_and_stops_on_ctrl_c(made, tmp_path):
    """The command itself: it says where it listens (127.0.0.1 unless told otherwise),
    answers there (with the results by opening of --results), and Ctrl-C stops it
    (exit 130) with the book unchanged."""
    import urllib.request

    book = tmp_path / "book.sqlite"
    shutil.copy(made.book, book)
    before = digest(book)
    env = {key: value for key, value in os.environ.items() if key != "BOOKGEN_FAULT"}
    proc = subprocess.Popen([PYTHON, "-m", "bookgen.cli", "serve", "-b", str(book), "--port",
                             "0", "--results", str(made.results)], cwd=str(ROOT), env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        match = re.fullmatch(rf"bookgen serve: {re.escape(str(book))} \(read-only\) at "
                             r"(http://127\.0\.0\.1:\d+/) \(Ctrl-C stops\)\n", line)
        assert match, line
        with urllib.request.urlopen(match.group(1) + "?moves=7g7f", timeout=60) as page:
            assert page.status == 200 and b'<svg class="board"' in page.read()
        opening = book_rows(made.results, "SELECT opening FROM games")[0][0]
        with urllib.request.urlopen(match.group(1) + "results", timeout=60) as page:
            assert escape(opening).encode() in page.read()
        with pytest.raises(urllib.error.HTTPError) as bad:
            urllib.request.urlopen(match.group(1) + "?moves=7g7x", timeout=60)
        assert bad.value.code == 400
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    assert digest(book) == before


def test_the_script_and_style_sheet_are_served_from_the_package(client):
    from bookgen.explore.app import STATIC

    for name, kind in (("explorer.js", "text/javascript"), ("explorer.css", "text/css")):
        answer = client.get(f"/static/{name}")
        assert answer.status_code == 200 and answer.headers["content-type"].startswith(kind)
        assert answer.content == (STATIC / name).read_bytes()
    assert client.get("/static/nothing.js").status_code == 404
    assert client.get("/static/../app.py").status_code == 404
