"""The explorer's HTML: whole pages and the main part the page's script swaps in.

Every text from the book, a results file or the request is escaped
(:func:`html.escape`, quotes included) and every link is built with
:func:`urllib.parse.urlencode`; the board is :func:`bookgen.diagram.board_svg`
(piece outlines, no font needed), the value chart a small inline SVG. The
pages work without the script (every move is a link); the script
(``static/explorer.js``) swaps the main part in place, keeps the URL and the
browser's history, sorts tables and expands the tree.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from html import escape
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import cshogi

from bookgen import __version__
from bookgen.diagram import Arrow, Layout, board_svg, hand_boxes
from bookgen.explore.live import LiveGameView, LiveState
from bookgen.explore.view import MoveView, OpeningResult, Place, PositionView, TreeNode
from bookgen.values import cp_to_value

__all__ = ["error_page", "live_main", "live_page", "mistakes_page", "position_main",
           "position_page", "results_page", "runs_page"]

MAX_ARROWS = 8
LIVE_REFRESH_S = 2      # the live page's refresh period (seconds)
NONE = "\u2014"   # an em dash for NULL


def _e(value: Any) -> str:
    return escape(str(value), quote=True)


def place_url(place: Place, path: str = "/") -> str:
    query = place.query()
    return path + ("?" + urlencode(query) if query else "")


def _link(place: Place, text: str, cls: str = "") -> str:
    extra = f' class="{cls}"' if cls else ""
    return f'<a href="{_e(place_url(place))}" data-nav{extra}>{_e(text)}</a>'


def _cell(value: Any, digits: int | None = None) -> str:
    """A table cell: numbers right-aligned with a sort key, NULL as a dash."""
    if value is None:
        return f'<td class="num none" data-sort="">{NONE}</td>'
    if isinstance(value, bool):
        return f"<td>{'yes' if value else 'no'}</td>"
    if isinstance(value, int | float):
        text = f"{value:.{digits}f}" if digits is not None else str(value)
        return f'<td class="num" data-sort="{_e(value)}">{_e(text)}</td>'
    return f"<td>{_e(value)}</td>"


def _head(columns: Iterable[tuple[str, str]]) -> str:
    return "<thead><tr>" + "".join(
        f'<th title="{_e(tip)}">{_e(name)}</th>' for name, tip in columns) + "</tr></thead>"


def _page(title: str, body: str, book: str, active: str, has_results: bool,
          search: str = "") -> str:
    """A whole page; ``book`` "": served without a book (the live view only)."""
    nav = [("/", "position"), ("/mistakes", "mistakes"), ("/runs", "runs")] if book else []
    if has_results:
        nav += [("/results", "results")] if book else []
        nav.append(("/live", "live"))
    active_class = ' class="active"'
    links = "".join(f'<a href="{href}"{active_class if name == active else ""}>{name}</a>'
                    for href, name in nav)
    search_form = (
        '<form class="search" action="/search" method="get">'
        f'<input name="q" type="search" value="{_e(search)}" size="40" '
        'placeholder="sfen, startpos moves ..., or USI moves" aria-label="search">'
        '<button type="submit">go</button></form>') if book else ""
    book_name = (f'<span class="book" title="the book, opened read-only">{_e(book)}</span>'
                 if book else "")
    # the live page polls with the script; without it, it reloads itself
    refresh = (f'<noscript><meta http-equiv="refresh" content="{LIVE_REFRESH_S}">'
               "</noscript>") if active == "live" else ""
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
        f"<title>{_e(title)}</title>{refresh}"
        '<link rel="stylesheet" href="/static/explorer.css">'
        '<script src="/static/explorer.js" defer></script></head><body>'
        f'<header><span class="brand">bookgen explorer</span>{book_name}'
        f"<nav>{links}</nav>{search_form}</header>"
        f'<main id="main">{body}</main>'
        f'<footer>bookgen {_e(__version__)}</footer></body></html>\n')


# -- the position page --------------------------------------------------------------------


def _arrows(view: PositionView) -> list[Arrow]:
    own = [m for m in view.moves if m.own][:MAX_ARROWS]
    if not own:
        return []
    top = max(int(m.row["count"] or 0) for m in own)
    if top > 0:
        return [Arrow(m.move, int(m.row["count"] or 0) / top) for m in own]
    # no counts: by rank of value (best first, as sorted)
    return [Arrow(m.move, 1.0 - i / len(own)) for i, m in enumerate(own)]


CELL = 44.0


def board_html(view: PositionView) -> str:
    """The board as inline SVG, with what the script needs to play a move clicked on
    the board: where the squares and the side to move's hand pieces are drawn
    (``data-left``, ``data-top``, ``data-cell``, ``data-hands``), the legal moves
    (``data-legal``) and the place's URL (``data-url``)."""
    board = view.place.board()
    svg = board_svg(board, last_move=view.last_move, arrows=_arrows(view), cell=CELL,
                    title=view.sfen)
    layout = Layout(CELL)
    hands = {letter: [round(v, 2) for v in box]
             for (colour, letter), box in hand_boxes(board, layout).items()
             if colour == board.turn}
    legal = " ".join(cshogi.move_to_usi(m) for m in board.legal_moves)
    attributes = (f'class="board" data-sfen="{_e(view.sfen)}" '
                  f'data-url="{_e(place_url(view.place))}" data-left="{layout.board_left:g}" '
                  f'data-top="{layout.board_top:g}" '
                  f'data-cell="{layout.cell:g}" data-hands="{_e(json.dumps(hands))}" '
                  f'data-legal="{_e(legal)}" ')
    return svg.replace("<svg ", "<svg " + attributes, 1)


MOVE_HEADERS = [
    ("move", "USI move; follow it"), ("ponder", "expected reply"),
    ("value", "the book's value (cp, side to move)"), ("depth", "search depth of the value"),
    ("count", "weight / frequency"), ("visits", "MCTS visits of the child (grow)"),
    ("win rate", "the search's mean value q (grow)"), ("prior", "policy prior (grow)"),
    ("eval", "the evaluator's own value (never refined)"),
    ("minimax", "value propagated by refine minimax"),
    ("mm depth", "distance behind the minimax value"),
    ("engine", "engine score from a re-search (refine)"),
    ("child", "the position after the move: its id when in the book"),
    ("run", "run that last wrote the row"), ("mistake", "a mistake found here names it"),
]


def _move_row(view: PositionView, move: MoveView) -> str:
    r = move.row
    cls = "own" if move.own else "transposition"
    mark = ""
    if move.mistakes:
        size = max(abs(int(m["difference"] or 0)) for m in move.mistakes)
        mark = (f'<td class="num mistake" data-sort="{size}" title="'
                + _e("; ".join(f"{m['kind']}: engine {m['engine_move']} "
                               f"{m['engine_value']}, book {m['book_value']}"
                               for m in move.mistakes)) + f'">&#9888; {size}</td>')
    else:
        mark = '<td class="num none" data-sort="">' + NONE + "</td>"
    child = r["child_id"] if r["child_id"] is not None else (
        "in book" if move.child_in_book else None)
    title = "" if move.own else ' title="transposition row of refine minimax"'
    return (f'<tr class="{cls}" data-move="{_e(move.move)}"{title}>'
            f'<td data-sort="{_e(move.move)}">{_link(view.place.then(move.move), move.move)}'
            f'</td>{_cell(r["ponder"])}{_cell(r["value"])}{_cell(r["depth"])}'
            f'{_cell(r["count"])}{_cell(r["visits"])}{_cell(r["win_rate"], 3)}'
            f'{_cell(r["prior"], 3)}{_cell(r["eval_value"])}{_cell(r["minimax_value"])}'
            f'{_cell(r["minimax_depth"])}{_cell(r["engine_score"])}{_cell(child)}'
            f'{_cell(r["run_id"])}{mark}</tr>')


def _moves_table(view: PositionView) -> str:
    if view.position is None:
        return '<p class="note">This position is not in the book.</p>'
    if not view.moves:
        return '<p class="note">The book has no moves here (a leaf).</p>'
    own = sum(1 for m in view.moves if m.own)
    note = (f"{own} book moves" + (f" and {len(view.moves) - own} transposition rows "
                                   "(refine minimax)" if own < len(view.moves) else ""))
    return (f'<p class="note">{_e(note)}; click a header to sort.</p>'
            f'<table class="sortable moves" id="moves">{_head(MOVE_HEADERS)}<tbody>'
            + "".join(_move_row(view, m) for m in view.moves) + "</tbody></table>")


POSITION_FIELDS = [("ply", "ply"), ("visits", "visits"), ("value", "evaluator value"),
                   ("win_rate", "win rate"), ("minimax_value", "minimax value"),
                   ("minimax_depth", "minimax depth"), ("created_run", "created by run"),
                   ("expanded_run", "expanded by run"), ("id", "position id")]


def _position_facts(view: PositionView) -> str:
    side = "black (sente)" if view.turn == cshogi.BLACK else "white (gote)"
    rows = [f"<tr><th>to move</th><td>{side}</td></tr>"]
    if view.position is not None:
        for key, name in POSITION_FIELDS:
            value = view.position[key]
            text = NONE if value is None else (f"{value:.3f}" if isinstance(value, float)
                                                else str(value))
            rows.append(f"<tr><th>{_e(name)}</th><td>{_e(text)}</td></tr>")
    return (f'<table class="facts">{"".join(rows)}</table>'
            f'<p class="sfen"><code id="sfen">{_e(view.sfen)}</code></p>'
            f'<p class="sfen"><code>position {_e(view.place.spec())}</code></p>')


def _line(view: PositionView) -> str:
    place = view.place
    start = Place(place.start, place.start_ply)
    parts = [_link(start, "start", "ply")]
    board = place.board(0)
    for i, usi in enumerate(place.moves):
        number = place.start_ply + i
        current = " current" if i == len(place.moves) - 1 else ""
        parts.append(_link(place.cut(i + 1), f"{number}.{usi}", "ply" + current))
        board.push_usi(usi)
    nav = []
    if place.moves:
        nav.append(_link(place.cut(len(place.moves) - 1), "\u2190 back", "back"))
    if view.pv:
        nav.append(_link(place.then(view.pv[0]), "best \u2192", "forward"))
    pv = []
    for i in range(len(view.pv)):
        pv.append(_link(place.then(*view.pv[:i + 1]), view.pv[i], "ply pv"))
    return (f'<div class="nav">{" ".join(nav)}</div>'
            f'<p class="line" id="line"><b>line</b> {" ".join(parts)}</p>'
            f'<p class="line" id="pv"><b>PV</b> {" ".join(pv) if pv else NONE}</p>')


def value_chart(line: Sequence[int | None], pv: Sequence[int | None], width: int = 520,
                height: int = 150) -> str:
    """An SVG chart of the book's value (black's win rate) along the line (solid) and
    the PV after it (dashed); the current position is the last point of the line."""
    points = list(line) + list(pv)
    if not points:
        return ""
    pad = 24
    n = max(len(points) - 1, 1)

    def xy(i: int, v: int) -> str:
        x = pad + (width - 2 * pad) * i / n
        y = pad / 2 + (height - pad) * (1.0 - cp_to_value(max(-3000, min(3000, v))))
        return f"{x:.1f},{y:.1f}"

    def path(start: int, values: Sequence[int | None], cls: str) -> str:
        pieces: list[list[str]] = []
        run: list[str] = []
        for i, v in enumerate(values, start):
            if v is None:
                if len(run) > 1:
                    pieces.append(run)
                run = []
            else:
                run.append(xy(i, v))
        if len(run) > 1:
            pieces.append(run)
        dots = "".join(f'<circle class="{cls}" cx="{p.split(",")[0]}" cy="{p.split(",")[1]}" '
                       'r="2.5"/>' for i, v in enumerate(values, start) if v is not None
                       for p in [xy(i, v)])
        return "".join(f'<polyline class="{cls}" points="{" ".join(r)}"/>'
                       for r in pieces) + dots

    mid = pad / 2 + (height - pad) / 2
    here = len(line) - 1
    joined = ([line[-1]] if line else []) + list(pv)
    grid = "".join(
        f'<line class="grid" x1="{pad}" x2="{width - pad}" y1="{pad / 2 + (height - pad) * f}"'
        f' y2="{pad / 2 + (height - pad) * f}"/>' for f in (0.25, 0.75))
    x_here = pad + (width - 2 * pad) * max(here, 0) / n
    return (f'<svg class="chart" id="chart" viewBox="0 0 {width} {height}" width="{width}" '
            f'height="{height}" role="img" aria-label="black\'s win rate along the line">'
            f'{grid}<line class="axis" x1="{pad}" x2="{width - pad}" y1="{mid}" y2="{mid}"/>'
            f'<line class="here" x1="{x_here:.1f}" x2="{x_here:.1f}" y1="0" y2="{height}"/>'
            f'<text x="2" y="12">black wins</text><text x="2" y="{height - 2}">white wins'
            f"</text>{path(0, line, 'line')}{path(max(here, 0), joined, 'pv')}</svg>")


MINUS = "\u2212"
OPENED = ' class="expanded"'


def _tree_items(place: Place, nodes: Sequence[TreeNode]) -> str:
    """Nested lists of tree nodes; a node read with its children is shown open."""
    items = []
    for node in nodes:
        child = place.then(node.move)
        value = NONE if node.value is None else str(node.value)
        opened = bool(node.children)
        sign = MINUS if opened else "+"
        toggle = (f'<button class="expand" data-tree="{_e(place_url(child, "/api/tree"))}" '
                  f'aria-label="expand">{sign}</button>' if node.child_moves else
                  '<span class="leaf">\u00b7</span>')
        below = _tree_items(child, node.children) if opened else ""
        items.append(f'<li data-move="{_e(node.move)}"{OPENED if opened else ""}>{toggle}'
                     f'{_link(child, node.move)} <span class="v">{_e(value)}</span> '
                     f'<span class="c">({_e(node.count)})</span>{below}</li>')
    return "<ul>" + "".join(items) + "</ul>"


def _analyses(view: PositionView) -> str:
    if not view.analyses:
        return '<p class="note">No engine analyses of this position (refine search).</p>'
    rows = []
    for a in view.analyses:
        pv_moves = str(a["pv"] or "").split()
        pv = " ".join(_link(view.place.then(*pv_moves[:i + 1]), usi, "ply")
                      for i, usi in enumerate(pv_moves)) if _legal_line(view.place, pv_moves
                                                                         ) else _e(a["pv"] or "")
        rows.append(f"<tr>{_cell(a['run_id'])}{_cell(a['engine'])}{_cell(a['score'])}"
                    f"{_cell(a['mate'])}{_cell(a['bound'])}{_cell(a['depth'])}"
                    f"{_cell(a['seldepth'])}{_cell(a['nodes'])}{_cell(a['bestmove'])}"
                    f'<td class="pvcell">{pv}</td></tr>')
    head = _head([(n, n) for n in ("run", "engine", "score", "mate", "bound", "depth",
                                   "seldepth", "nodes", "best move", "PV")])
    return f'<table class="sortable analyses">{head}<tbody>{"".join(rows)}</tbody></table>'


def _legal_line(place: Place, moves: Sequence[str]) -> bool:
    board = place.board()
    for usi in moves:
        move = board.move_from_usi(usi)
        if not move or not board.is_legal(move):
            return False
        board.push(move)
    return True


def _mistakes_here(view: PositionView) -> str:
    if not view.mistakes:
        return ""
    rows = "".join(
        f"<tr>{_cell(m['run_id'])}{_cell(m['iteration'])}{_cell(m['kind'])}"
        f"{_cell(m['book_value'])}{_cell(m['engine_value'])}{_cell(m['difference'])}"
        f"{_cell(m['book_move'])}{_cell(m['engine_move'])}{_cell(m['reason'])}</tr>"
        for m in view.mistakes)
    head = _head([(n, n) for n in ("run", "round", "kind", "book", "engine", "size",
                                   "book move", "engine move", "reason")])
    return ('<section class="panel"><h2>Mistakes here</h2>'
            f'<table class="sortable">{head}<tbody>{rows}</tbody></table></section>')


def position_main(view: PositionView) -> str:
    """The main part of the position page (what the script swaps in)."""
    return (
        '<div class="columns"><section class="panel boardpanel">'
        f"{board_html(view)}{_position_facts(view)}</section>"
        '<div class="side"><section class="panel"><h2>Line</h2>'
        f"{_line(view)}{value_chart(view.line_values, view.pv_values)}</section>"
        '<section class="panel"><h2>Tree</h2><div class="tree" id="tree">'
        f"{_tree_items(view.place, view.tree) if view.tree else NONE}</div></section></div>"
        "</div>"
        f'<section class="panel"><h2>Book moves</h2>{_moves_table(view)}</section>'
        f"{_mistakes_here(view)}"
        f'<section class="panel"><h2>Engine analyses</h2>{_analyses(view)}</section>')


def position_page(view: PositionView, book: str, has_results: bool) -> str:
    return _page(f"{view.sfen} \u2014 bookgen explorer", position_main(view), book, "position",
                 has_results)


def tree_json(place: Place, nodes: Sequence[TreeNode]) -> dict[str, Any]:
    """The JSON of one level of the tree: each node with its URL and, when it has book
    moves, the URL of its own level."""
    return {"place": place.query(), "nodes": [
        {**node.as_dict(), "url": place_url(place.then(node.move)),
         "tree": place_url(place.then(node.move), "/api/tree") if node.child_moves else None}
        for node in nodes]}


# -- lists --------------------------------------------------------------------------------


def mistakes_page(total: int, rows: Sequence[dict[str, Any]], offset: int, limit: int,
                  book: str, has_results: bool) -> str:
    if total == 0:
        body = ('<section class="panel"><h2>Mistakes</h2><p class="note">No mistakes in this '
                "book (refine mistakes finds them).</p></section>")
        return _page("mistakes \u2014 bookgen explorer", body, book, "mistakes", has_results)
    items = []
    for m in rows:
        place = Place(None if m["sfen"] == _START else m["sfen"])
        items.append(
            f"<tr>{_cell(abs(int(m['difference'] or 0)))}{_cell(m['kind'])}"
            f"<td>{_link(place, m['sfen'], 'sfen')}</td>{_cell(m['ply'])}"
            f"{_cell(m['book_move'])}{_cell(m['book_value'])}{_cell(m['engine_move'])}"
            f"{_cell(m['engine_value'])}{_cell(m['run_id'])}{_cell(m['iteration'])}"
            f"{_cell(m['reason'])}</tr>")
    head = _head([(n, n) for n in ("size", "kind", "position", "ply", "book move",
                                   "book value", "engine move", "engine value", "run",
                                   "round", "reason")])
    pager = []
    if offset > 0:
        pager.append(f'<a href="/mistakes?{urlencode({"offset": max(0, offset - limit)})}">'
                     "\u2190 larger</a>")
    if offset + limit < total:
        pager.append(f'<a href="/mistakes?{urlencode({"offset": offset + limit})}">'
                     "smaller \u2192</a>")
    body = (f'<section class="panel"><h2>Mistakes</h2><p class="note">{total} mistakes, '
            f"largest first; {offset + 1}\u2013{offset + len(rows)} shown.</p>"
            f'<table class="sortable">{head}<tbody>{"".join(items)}</tbody></table>'
            f'<p class="pager">{" ".join(pager)}</p></section>')
    return _page("mistakes \u2014 bookgen explorer", body, book, "mistakes", has_results)


_START = "lnsgkgsnl/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL b -"


def _params(text: str | None) -> str:
    if not text:
        return NONE
    try:
        params = json.loads(text)
    except ValueError:
        return _e(text)
    if not isinstance(params, dict):
        return _e(text)
    return "<dl>" + "".join(f"<dt>{_e(k)}</dt><dd>{_e(json.dumps(v))}</dd>"
                            for k, v in params.items()) + "</dl>"


def runs_page(rows: Sequence[dict[str, Any]], book: str, has_results: bool) -> str:
    items = "".join(
        f"<tr>{_cell(r['id'])}{_cell(r['command'])}{_cell(r['status'])}{_cell(r['evaluator'])}"
        f"{_cell(r['started_at'])}{_cell(r['ended_at'])}{_cell(r['positions_added'])}"
        f"{_cell(r['moves_added'])}{_cell(r['moves_updated'])}"
        f'<td class="params">{_params(r["params"])}</td>'
        f'<td class="params">{_params(r["counts"])}</td>{_cell(r["bookgen_version"])}</tr>'
        for r in rows)
    head = _head([(n, n) for n in ("run", "command", "status", "evaluator", "started",
                                   "ended", "positions added", "moves added",
                                   "moves updated", "parameters", "counts", "bookgen")])
    body = (f'<section class="panel"><h2>Runs</h2><p class="note">{len(rows)} runs wrote '
            "this book.</p>"
            f'<table class="sortable runs">{head}<tbody>{items}</tbody></table></section>')
    return _page("runs \u2014 bookgen explorer", body, book, "runs", has_results)


def results_page(openings: Sequence[OpeningResult], in_book: dict[str, tuple[int, int]],
                 sources: Sequence[str], book: str) -> str:
    players = list(dict.fromkeys(s.player for o in openings for s in o.scores))
    shown = [o for o in openings if o.sfen in in_book]
    head = _head([("opening", "the opening as the results file gives it"),
                  ("games", "games played from it")]
                 + [(p, f"{p}'s score in these games") for p in players])
    rows = []
    for o in shown:
        scores = {s.player: s for s in o.scores}
        cells = "".join(
            _cell(None) if p not in scores else
            f'<td class="num" data-sort="{scores[p].points / scores[p].games:.4f}">'
            f"{_e(f'{scores[p].points:g}/{scores[p].games}')} "
            f"({100 * scores[p].points / scores[p].games:.0f} %)</td>"
            for p in players)
        rows.append(f"<tr><td>{_link(o.place, o.opening, 'opening')}</td>{_cell(o.games)}"
                    f"{cells}</tr>")
    left = len(openings) - len(shown)
    note = (f"{len(shown)} openings of {', '.join(sources)} are book positions"
            + (f"; {left} others are not in the book" if left else "") + ".")
    body = (f'<section class="panel"><h2>Results by opening</h2><p class="note">{_e(note)}'
            '</p><table class="sortable results">'
            f'{head}<tbody>{"".join(rows)}</tbody></table></section>')
    return _page("results \u2014 bookgen explorer", body, book, "results", True)


def error_page(status: int, message: str, book: str, has_results: bool,
               search: str = "") -> str:
    """The page of a bad request (400) or a missing page (404), saying what is wrong."""
    title = {400: "Bad request", 404: "Not found"}.get(status, "Error")
    body = (f'<section class="panel error"><h2>{status} {_e(title)}</h2>'
            f'<p class="message" id="error">{_e(message)}</p>'
            '<p><a href="/">the initial position</a></p></section>')
    return _page(f"{status} {title} \u2014 bookgen explorer", body, book, "", has_results,
                 search)


# -- the live view ------------------------------------------------------------------------


def _fixed(value: float | None, digits: int = 1) -> str:
    """``value`` with ``digits`` decimals (never "-0.0"), a dash for None."""
    return NONE if value is None else f"{round(value, digits) + 0.0:.{digits}f}"


def _num(value: float | None, digits: int = 1) -> str:
    if value is None:
        return f'<td class="num none" data-sort="">{NONE}</td>'
    return f'<td class="num" data-sort="{value:.6g}">{_fixed(value, digits)}</td>'


def _live_url(file_index: int, match_id: int) -> str:
    return "/live?" + urlencode({"file": file_index, "match": match_id})


def _sprt_panel(state: LiveState) -> str:
    match = state.match
    if match is None or match["sprt"] is None:
        return ""
    r, s = match["sprt"], state.sprt
    title = (f"SPRT of {r.get('engine')} (engine under test) against {r.get('opponent')}: "
             f"Elo [{r.get('elo0', '?')}, {r.get('elo1', '?')}] ({r.get('model', '')} "
             f"model, alpha {r.get('alpha', '?')}, beta {r.get('beta', '?')})")
    if s is None:
        body = '<p class="note">no game between the two yet</p>'
    else:
        estimate = s.get("estimate", {})
        elo = estimate.get("elo")
        error = estimate.get("elo_error")
        body = (f'<p class="sprt-llr">LLR <b id="llr">{s["llr"]:.2f}</b> in '
                f'[<span id="sprt-lower">{s["lower"]:.2f}</span>, '
                f'<span id="sprt-upper">{s["upper"]:.2f}</span>] '
                f'\u2192 <b id="verdict">{_e(s["verdict_text"])}</b></p>'
                f"<p>{_e(s['verdict_sentence'])}</p>"
                f'<p class="note">{_e(s["basis"])}: Elo {_fixed(elo)} \u00b1 '
                f"{_fixed(error)}</p>")
    return (f'<section class="panel sprt" id="sprt"><h2>SPRT</h2>'
            f'<p class="note">{_e(title)}</p>{body}</section>')


def _standings_panel(state: LiveState) -> str:
    st = state.standings
    if not st.players:
        return ('<section class="panel" id="standings"><h2>Standings</h2>'
                '<p class="note">no game finished yet</p></section>')
    head = _head([("#", "rank"), ("player", "player"), ("points", "points"),
                  ("played", "games played"), ("%", "score"), ("W", "wins"),
                  ("D", "draws"), ("L", "losses"), ("rating", "Elo (" + st.method + ")"),
                  ("error", "error of the rating")])
    rows = "".join(
        f'<tr data-player="{_e(p.name)}">{_cell(rank)}{_cell(p.name)}'
        f'{_cell(p.points, 1)}{_cell(p.played)}'
        f"{_cell(100 * p.points / p.played if p.played else None, 0)}"
        f"{_cell(p.w)}{_cell(p.d)}{_cell(p.l)}{_num(p.rating)}{_num(p.error)}</tr>"
        for rank, p in enumerate(st.players, 1))
    pairings = ""
    if st.pairings:
        phead = _head([("pairing", "first against second"), ("games", "games"),
                       ("W", "first's wins"), ("D", "draws"), ("L", "first's losses"),
                       ("points", "first's points"), ("Elo", "first's Elo difference"),
                       ("error", "its error"), ("pairs", "complete colour-swapped pairs")])
        prow = "".join(
            f"<tr><td>{_e(q.first)} \u2013 {_e(q.second)}</td>{_cell(q.games)}{_cell(q.w)}"
            f"{_cell(q.d)}{_cell(q.l)}{_cell(q.points, 1)}{_num(q.elo)}{_num(q.error)}"
            f"{_cell(q.pairs)}</tr>" for q in st.pairings)
        pairings = f'<table class="sortable pairings">{phead}<tbody>{prow}</tbody></table>'
    return (f'<section class="panel" id="standings"><h2>Standings</h2>'
            f'<p class="note">{_e(st.method)}</p>'
            f'<table class="sortable standings">{head}<tbody>{rows}</tbody></table>'
            f"{pairings}</section>")


def _running_panel(game: LiveGameView) -> str:
    g = game.game
    if game.board_sfen:
        board = board_svg(game.board(), last_move=game.last_move, cell=30.0,
                          title=game.board_sfen)
    else:
        board = '<p class="note">the board cannot be followed from this file</p>'
    moves = " ".join(g.moves) or NONE
    return (f'<section class="panel running" data-game="{_e(g.game_key)}">'
            f"<h3>{_e(g.black)} (\u2617) \u2013 {_e(g.white)} (\u2616)</h3>"
            f'<p class="note">pair {g.pair + 1}, ply <span class="ply">{len(g.moves)}</span>;'
            f" opening {_e(g.opening)}</p>"
            f'<div class="live-board">{board}</div>'
            f'<p class="moves">{_e(moves)}</p></section>')


def live_main(state: LiveState) -> str:
    """The live page's main part (the script swaps it in at each refresh)."""
    name = Path(state.source).name
    match = state.match
    if match is None:
        return (f'<section class="panel" id="live" data-refresh="{LIVE_REFRESH_S}">'
                f"<h2>Live: {_e(name)}</h2><p class=\"note\">no match in this file yet"
                "</p></section>")
    active = ' class="active"'
    others = "".join(
        f'<a href="{_e(_live_url(state.file_index, m["id"]))}"'
        f'{active if m["id"] == match["id"] else ""}>{m["id"]}</a> '
        for m in state.matches) if len(state.matches) > 1 else ""
    picker = f'<p class="matches">matches: {others}</p>' if others else ""
    # (a rerun that extends a match keeps the count scheduled when it began)
    scheduled = (f" of {match['scheduled']} scheduled"
                 if match["scheduled"] >= match["played"] + len(state.running) else "")
    head = (f'<section class="panel" id="live" data-refresh="{LIVE_REFRESH_S}">'
            f"<h2>Live: {_e(name)}, match {match['id']}</h2>"
            f'<p class="note"><span id="status">{_e(match["status"])}</span>: '
            f'<span id="played">{match["played"]}</span> games played{scheduled} '
            f"({_e(match['format'] or '')}: {_e(', '.join(match['players']))}); "
            f"started {_e(match['started_at'])}, updated {_e(match['updated_at'])}</p>"
            f"{picker}</section>")
    running = "".join(_running_panel(g) for g in state.running)
    if match["status"] == "running":
        running_part = (f'<section class="panel" id="running"><h2>Games in play '
                        f"({len(state.running)})</h2>"
                        f'<div class="columns">{running or "<p class=note>none</p>"}</div>'
                        "</section>")
    else:
        running_part = ""
    recent = "".join(
        f"<tr><td>{_e(g.black)}</td><td>{_e(g.white)}</td>{_cell(g.result)}"
        f"{_cell(g.reason)}{_cell(g.plies)}<td>{_e(g.opening or '')}</td></tr>"
        for g in state.recent)
    recent_part = (
        '<section class="panel" id="recent"><h2>Last games</h2><table class="sortable">'
        + _head([("black", "sente"), ("white", "gote"), ("result", "result"),
                 ("reason", "how it ended"), ("plies", "plies"), ("opening", "opening")])
        + f"<tbody>{recent}</tbody></table></section>") if state.recent else ""
    return (head + '<div class="columns">' + _standings_panel(state) + _sprt_panel(state)
            + "</div>" + running_part + recent_part)


def live_page(state: LiveState, book: str) -> str:
    return _page(f"live: {Path(state.source).name} \u2014 bookgen explorer", live_main(state),
                 book, "live", True)
