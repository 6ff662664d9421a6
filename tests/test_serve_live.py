"""The live view of ``bookgen serve --results``: a real ``bookgen match`` process, held
at a fault point in the middle of a game (``match-live-move``, SIGSTOP), is watched
through Starlette's test client and in headless chromium: the running game's board
and moves, the standings and the SPRT, then the finished match. Also the live files
themselves (a killed game's file is skipped and cleared), worker processes, bad
parameters (400), and the command serving results files without a book."""

from __future__ import annotations

import io
import json
import os
import re
import signal
import sqlite3
import subprocess
import threading
import time
from collections import Counter
from pathlib import Path

import cshogi
import numpy as np
import pytest
import uvicorn
from PIL import Image
from starlette.testclient import TestClient

from bookgen.analysis.ratings import RatingSettings, fit_ratings
from bookgen.analysis.results import load_games
from bookgen.analysis.standings import SIMULATIONS, live_sprt, live_standings
from bookgen.explore.app import create_app, listen, url_of
from bookgen.explore.live import LiveView
from bookgen.explore.settings import ServeSettings
from bookgen.files import atomic_write
from bookgen.store.live_games import LiveFolder, clear_stale, live_folder, read_live_games
from cdp import Browser
from conftest import PYTHON, ROOT, run_cli, screenshot_path

OPENINGS = ["startpos moves 7g7f 3c3d", "startpos moves 2g2f 8c8d"]
PLAYERS = ["--builtin", "a", "--builtin", "b", "--option", "a:nodes=300",
           "--option", "b:nodes=600", "--nodes", "1", "--max-ply", "60"]
HELD_AT = 5   # the game is held after this many moves of its own


def write_openings(path: Path) -> Path:
    path.write_text("\n".join(OPENINGS) + "\n")
    return path


def start_match(tmp_path: Path, *args: object, fault: str | None = None,
                results: str = "r.sqlite") -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if k != "BOOKGEN_FAULT"}
    if fault is not None:
        env["BOOKGEN_FAULT"] = fault
    openings = write_openings(tmp_path / "openings.txt")
    return subprocess.Popen(
        [PYTHON, "-m", "bookgen.cli", "match", "--quiet", "--json", *PLAYERS,
         "--openings", str(openings), "-o", str(tmp_path / results), *map(str, args)],
        cwd=str(ROOT), env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def held(process: subprocess.Popen) -> None:
    """Wait until the match process stops itself at its fault point."""
    _, status = os.waitpid(process.pid, os.WUNTRACED)
    assert os.WIFSTOPPED(status), "the match did not reach its fault point"


def finish(process: subprocess.Popen) -> dict:
    os.kill(process.pid, signal.SIGCONT)
    out, err = process.communicate(timeout=300)
    assert process.returncode == 0, err
    return json.loads(out)


def kill(process: subprocess.Popen) -> None:
    if process.poll() is None:
        process.kill()
        os.kill(process.pid, signal.SIGCONT)
        process.communicate(timeout=60)


def board_after(start_sfen: str, moves: list[str]) -> str:
    board = cshogi.Board(start_sfen)
    for move in moves:
        assert board.is_legal(board.move_from_usi(move)), move
        board.push_usi(move)
    return board.sfen()


def stored_games(results: Path) -> list[tuple[str, str, str]]:
    db = sqlite3.connect(results)
    try:
        return db.execute("SELECT black, white, result FROM games ORDER BY id").fetchall()
    finally:
        db.close()


def independent_wdl(results: Path) -> dict[str, tuple[float, int, int, int, int]]:
    """Each player's points, games, wins, draws and losses, counted from the rows."""
    count: dict[str, Counter] = {}
    for black, white, result in stored_games(results):
        for me, colour in ((black, "black"), (white, "white")):
            c = count.setdefault(me, Counter())
            c["games"] += 1
            if result == "draw":
                c["d"] += 1
            else:
                c["w" if result == colour else "l"] += 1
    return {name: (c["w"] + c["d"] / 2, c["games"], c["w"], c["d"], c["l"])
            for name, c in count.items()}


def live_client(*paths: Path) -> tuple[LiveView, TestClient]:
    live = LiveView(paths, live_standings, live_sprt)
    return live, TestClient(create_app(None, (), tuple(map(str, paths)), live))


# -- a match held in the middle of its first game --------------------------------------


def test_live_view_follows_a_held_match_then_its_result(tmp_path):
    """Held at its fifth move: the page shows the game in play (its board after the
    moves its live file lists, legal from the opening), no standings and the SPRT's
    bounds with no state yet; once the match has finished, the standings agree with the
    games in the results file (points and W/D/L counted independently, ratings as
    `bookgen rate` fits them), the SPRT state is `bookgen sprt`'s, the game in play is
    gone and so is the live folder."""
    results = tmp_path / "r.sqlite"
    process = start_match(tmp_path, "--games", "4", "--sprt", "a:0,100",
                          fault=f"match-live-move@{HELD_AT}:stop")
    try:
        held(process)
        files = list(live_folder(results).iterdir())
        assert [f.name.split("-", 1)[0] for f in files] == [str(process.pid)]
        live, client = live_client(results)
        with live, client:
            state = client.get("/api/live").json()
            assert state["match"]["status"] == "running" and state["match"]["played"] == 0
            assert state["standings"]["players"] == [] and state["sprt"] is None
            [game] = state["running"]
            assert (game["black"], game["white"], game["ply"]) == ("a", "b", HELD_AT)
            assert game["opening"] == OPENINGS[0] and len(game["moves"]) == HELD_AT
            start = cshogi.Board()
            start.set_position(OPENINGS[0])
            assert game["start_sfen"] == start.sfen()
            assert game["sfen"] == board_after(game["start_sfen"], game["moves"])
            page = client.get("/live")
            assert page.status_code == 200
            html = page.text
            assert "Games in play (1)" in html and "no game finished yet" in html
            assert html.count("<svg") == 1 and 'class="last-to"' in html
            assert " ".join(game["moves"]) in html
            assert "SPRT of a (engine under test) against b" in html
            assert "no game between the two yet" in html
            # the script's refresh asks for the main part alone
            part = client.get("/live", headers={"X-Explorer-Part": "main"}).text
            assert part.startswith('<section class="panel" id="live"') and "<html" not in part
            assert client.get("/", follow_redirects=False).headers["location"] == "/live"

            summary = finish(process)
            assert summary["played"] == 4
            state = client.get("/api/live").json()
            assert state["match"]["status"] == "done" and state["match"]["played"] == 4
            assert state["running"] == []
            expected = independent_wdl(results)
            shown = {p["name"]: (p["points"], p["played"], p["w"], p["d"], p["l"])
                     for p in state["standings"]["players"]}
            assert shown == expected
            table = fit_ratings(load_games([results]), RatingSettings(simulations=SIMULATIONS))
            assert [(p["name"], p["rating"], p["error"]) for p in
                    state["standings"]["players"]] == [(p.name, p.rating, p.error)
                                                       for p in table.players]
            [pairing] = state["standings"]["pairings"]
            assert (pairing["first"], pairing["second"], pairing["games"], pairing["pairs"]) \
                == ("a", "b", 4, 2)
            assert (pairing["w"], pairing["d"], pairing["l"]) == expected["a"][2:]
            verdict = json.loads(run_cli("sprt", results, "--engine", "a", "--vs", "b",
                                         "--elo0", "0", "--elo1", "100", "--json").stdout)
            assert state["sprt"]["llr"] == pytest.approx(verdict["llr"], abs=1e-12)
            assert state["sprt"]["verdict"] == verdict["verdict"]
            html = client.get("/live").text
            assert "Games in play" not in html and "<svg" not in html
            assert f'<b id="llr">{verdict["llr"]:.2f}</b>' in html
            for name, (points, *_rest) in expected.items():
                assert re.search(rf'<tr data-player="{name}">.*?<td class="num" '
                                 rf'data-sort="{points}">{points:.1f}</td>', html)
        assert not live_folder(results).exists()
    finally:
        kill(process)


def test_worker_processes_write_their_games(tmp_path):
    """With --concurrency 2 each worker process writes its own game's file: both games
    of the pair are shown in play, each held at its own fifth move in its worker."""
    results = tmp_path / "r.sqlite"
    process = start_match(tmp_path, "--games", "2", "--concurrency", "2",
                          fault=f"match-live-move@{HELD_AT}:stop")
    pids: set[int] = set()
    try:
        # each worker stops itself after writing its fifth move: wait for both files to
        # say so (the workers are the match's children, not ours: no waitpid)
        while not (len(games := read_live_games(results)) == 2
                   and all(len(g.moves) == HELD_AT for g in games)):
            assert process.poll() is None, process.communicate()
            time.sleep(0.05)
        live, client = live_client(results)
        with live, client:
            running = client.get("/api/live").json()["running"]
            pids = {g["pid"] for g in running}
            assert len(pids) == 2 and process.pid not in pids
            assert {(g["black"], g["white"]) for g in running} == {("a", "b"), ("b", "a")}
            for game in running:
                assert game["sfen"] == board_after(game["start_sfen"], game["moves"])
            for pid in pids:
                os.kill(pid, signal.SIGCONT)
            out, err = process.communicate(timeout=300)
            assert process.returncode == 0, err
            state = client.get("/api/live").json()
            assert state["running"] == [] and state["match"]["played"] == 2
    finally:
        for pid in pids:
            try:
                os.kill(pid, signal.SIGCONT)
            except OSError:
                pass
        kill(process)


def test_a_killed_game_is_not_shown_and_its_file_is_cleared(tmp_path):
    """kill -9 in the middle of a game leaves its live file; the view skips it (its
    process is gone) and the next run of the match removes it before playing."""
    results = tmp_path / "r.sqlite"
    process = start_match(tmp_path, "--games", "2", fault=f"match-live-move@{HELD_AT}")
    process.communicate(timeout=300)
    assert process.returncode == -signal.SIGKILL
    left = list(live_folder(results).iterdir())
    assert len(left) == 1
    assert read_live_games(results) == []
    live, client = live_client(results)
    with live, client:
        state = client.get("/api/live").json()
        assert state["match"]["status"] == "running" and state["running"] == []
    rerun = start_match(tmp_path, "--games", "2")
    out, err = rerun.communicate(timeout=300)
    assert rerun.returncode == 0, err
    assert json.loads(out)["played"] == 2
    assert not live_folder(results).exists()


def test_live_files_directly(tmp_path):
    """The writer's file through a game: written at the start, after every move, gone at
    the end; a folder that cannot be written turns the writer off instead of failing;
    clear_stale keeps the files of live processes."""
    results = tmp_path / "r.sqlite"
    clear_stale(results)
    folder = LiveFolder(live_folder(results), 7)
    writer = folder.writer("k/1", 0, 0, 0, "startpos", cshogi.Board().sfen(), "x", "y")
    writer.start()
    [game] = read_live_games(results)
    assert (game.match_id, game.moves, game.pid) == (7, [], os.getpid())
    writer.move("7g7f", 30)
    writer.move("3c3d", None)
    [game] = read_live_games(results, 7)
    assert (game.moves, game.scores) == (["7g7f", "3c3d"], [30, None])
    assert read_live_games(results, 8) == []
    clear_stale(results)   # this process lives: its file stays
    assert len(read_live_games(results)) == 1
    writer.end()
    assert read_live_games(results) == [] and list(live_folder(results).iterdir()) == []
    # not one of ours, or met half rewritten (length or CRC-32 wrong): skipped
    (live_folder(results) / "1-x.json").write_text("{not json")
    (live_folder(results) / "2-y.json").write_text('{"format": 99}')
    assert read_live_games(results) == []
    writer = folder.writer("k/2", 0, 0, 0, "startpos", cshogi.Board().sfen(), "x", "y")
    writer.start()
    assert writer.path is not None
    whole = writer.path.read_bytes()
    head, body = whole.split(b"\n", 1)
    assert head.split()[1] == str(len(body)).encode()
    for torn in (head + b"\n" + body[:-1] + b"]", head + b"\n" + body[:-2],
                 head + b"\n" + body.replace(b'"x"', b'"z"')):
        writer.path.write_bytes(torn)
        assert read_live_games(results) == []
    writer.path.write_bytes(whole)
    assert [g.game_key for g in read_live_games(results)] == ["k/2"]
    writer.end()
    # a folder that is a file: the writer gives up quietly, and the game goes on
    blocked = tmp_path / "blocked.sqlite"
    live_folder(blocked).write_text("")
    quiet = LiveFolder(live_folder(blocked), 1).writer("k", 0, 0, 0, "startpos", "", "x", "y")
    quiet.start()
    quiet.move("7g7f", None)
    quiet.end()
    assert quiet.path is None


# -- errors ------------------------------------------------------------------------------


@pytest.mark.parametrize("query, message", [
    ("file=x", "file: 'x' is not a whole number"),
    ("file=1", "file: no results file number 1 (0 to 0)"),
    ("match=0", "match: '0' is not a whole number from 1"),
    ("match=2", "match: no match 2 in r.sqlite"),
    ("match=1e3", "match: '1e3' is not a whole number"),
    ("sfen=x", "sfen: not a parameter of the live view (file, match)"),
])
def test_bad_live_parameters_are_400_with_one_line(tmp_path, query, message):
    results = tmp_path / "r.sqlite"
    process = start_match(tmp_path, "--games", "2")
    out, err = process.communicate(timeout=300)
    assert process.returncode == 0, err
    live, client = live_client(results)
    with live, client:
        answer = client.get(f"/api/live?{query}")
        assert answer.status_code == 400
        assert answer.json()["error"].startswith(message), answer.json()
        assert "\n" not in answer.json()["error"]
        page = client.get(f"/live?{query}")
        assert page.status_code == 400
        assert re.search(r'<p class="message" id="error">([^<]*)</p>', page.text)[1].startswith(
            message.replace("'", "&#x27;"))
        # the book's pages say there is no book
        assert client.get("/mistakes").status_code == 404
        assert client.get("/api/position").json()["error"].startswith("no book")


def test_serve_results_alone_binds_127_0_0_1(tmp_path):
    """`bookgen serve --results FILE` with no book (none named, no book.sqlite here):
    the live view alone, on 127.0.0.1; a missing results file is one line, exit 2."""
    import urllib.request

    results = tmp_path / "r.sqlite"
    process = start_match(tmp_path, "--games", "2")
    process.communicate(timeout=300)
    assert process.returncode == 0
    env = {k: v for k, v in os.environ.items() if k != "BOOKGEN_FAULT"}
    serve = subprocess.Popen([PYTHON, "-m", "bookgen.cli", "serve", "--port", "0",
                              "--results", str(results)], cwd=str(tmp_path), env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = serve.stdout.readline()
        found = re.fullmatch(rf"bookgen serve: {re.escape(str(results))} at "
                             r"(http://127\.0\.0\.1:\d+/)live \(Ctrl-C stops\)\n", line)
        assert found, line + serve.stderr.read() if serve.poll() is not None else line
        with urllib.request.urlopen(found[1] + "api/live", timeout=60) as answer:
            state = json.load(answer)
        assert state["match"]["played"] == 2 and state["match"]["status"] == "done"
        serve.send_signal(signal.SIGINT)
        serve.communicate(timeout=60)
    finally:
        kill(serve)
    assert serve.returncode == 130
    missing = run_cli("serve", "--results", tmp_path / "none.sqlite", expect=2)
    assert missing.stderr.strip().count("\n") == 0 and "none.sqlite" in missing.stderr


# -- in a browser ------------------------------------------------------------------------


class Server:
    """The live view served by uvicorn in a thread, on 127.0.0.1:<free port>."""

    def __init__(self, results: Path) -> None:
        self.live = LiveView([results], live_standings, live_sprt)
        app = create_app(None, (), (str(results),), self.live)
        self.socket = listen(ServeSettings(host="127.0.0.1", port=0))
        self.url = url_of(self.socket)
        self.server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
        self.thread = threading.Thread(target=self.server.run,
                                       kwargs={"sockets": [self.socket]}, daemon=True)
        self.thread.start()

    def __enter__(self) -> Server:
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(60)
        self.socket.close()
        self.live.close()


def test_live_view_in_chromium(tmp_path, no_cjk_env):
    """The page in headless chromium, on a match extended from 2 to 4 games and held in
    the middle of its third: the held game's board drawn with pieces, the standings of
    the first two games and the SPRT's state; once the match has finished, the page
    refreshes itself to the standings of all four. Saves the README's screenshot
    (see conftest.screenshot_path)."""
    results = tmp_path / "r.sqlite"
    first = start_match(tmp_path, "--games", "2", "--sprt", "a:0,100")
    first.communicate(timeout=300)
    assert first.returncode == 0
    process = start_match(tmp_path, "--games", "4", "--sprt", "a:0,100",
                          fault=f"match-live-move@{HELD_AT}:stop")
    try:
        held(process)
        with Server(results) as server, Browser(tmp_path / "profile", env=no_cjk_env) as page:
            page.navigate(server.url + "live")
            page.until("document.querySelector('#running section.running svg')",
                       "the board of the game in play")
            assert page.evaluate("document.querySelector('#running .ply').textContent") \
                == str(HELD_AT)
            assert page.evaluate("document.getElementById('played').textContent") == "2"
            played = ("Array.from(document.querySelectorAll('table.standings tbody tr'))"
                      ".map(r => [r.dataset.player, r.cells[3].textContent])")
            assert sorted(page.evaluate(played)) == [["a", "2"], ["b", "2"]]
            assert page.evaluate("document.getElementById('llr').textContent") != ""
            sfen = page.evaluate("document.querySelector('#running svg title').textContent")
            on_board = sum(1 for piece in cshogi.Board(sfen).pieces if piece)
            pieces = page.evaluate("document.querySelectorAll('#running svg .piece').length")
            assert pieces >= on_board >= 36
            atomic_write(screenshot_path("live.png", tmp_path), page.screenshot())
            shot = Image.open(io.BytesIO(page.screenshot("#running svg"))).convert("RGB")
            assert len(np.unique(np.asarray(shot).reshape(-1, 3), axis=0)) > 20  # not blank
            finish(process)
            # the page fetches itself again on its own; wait for the result to arrive
            page.until("document.getElementById('played').textContent === '4'",
                       "the finished games", timeout_ms=60000)
            assert sorted(page.evaluate(played)) == [["a", "4"], ["b", "4"]]
            assert page.evaluate("document.getElementById('running')") is None
            assert page.evaluate("document.getElementById('status').textContent") == "done"
    finally:
        kill(process)
