"""``bookgen serve``: the explorer as an ASGI app (Starlette) and its server (uvicorn).

:func:`create_app` builds the app over an :class:`~bookgen.explore.view.Explorer`
(the book, read-only) and the results by opening it is given; :func:`serve`
runs it with uvicorn on ``settings.host`` (127.0.0.1 unless told otherwise).
Starlette and uvicorn are the ``bookgen[serve]`` extra
(:func:`bookgen.extras.require_extra` names it when missing).

Pages: ``/`` (a position: ``?sfen=...&moves=7g7f 3c3d``), ``/mistakes``,
``/runs``, ``/results`` (with results files), ``/live`` (with results files: a
match's standings, games in play and SPRT, refreshing itself;
``?file=N&match=ID``), ``/search?q=...`` (redirects to
the position it names); the same as JSON under ``/api/`` (``position``,
``tree``, ``mistakes``, ``runs``, ``results``, ``live``), the board alone as
``/board.svg``, and the script and style sheet under ``/static/``. A
malformed sfen, move or number in a URL answers 400 with a page (or JSON)
saying what is wrong. Without a book only the live view is served (``/``
redirects to it).
"""

from __future__ import annotations

import socket
import webbrowser
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, cast

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import Route

from bookgen.errors import BookgenError
from bookgen.explore import pages
from bookgen.explore.live import LiveView
from bookgen.explore.settings import ServeSettings
from bookgen.explore.view import Explorer, OpeningResult, PlaceError, parse_place, parse_search

__all__ = ["create_app", "listen", "serve", "url_of"]

MISTAKES_PER_PAGE = 100
STATIC = Path(__file__).resolve().parent / "static"
# Only the package's own script and style sheet run; inline SVG is drawn, never scripted.
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; "
                               "img-src 'self' data:; connect-src 'self'; form-action 'self'; "
                               "base-uri 'none'; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}


class _BadRequest(Exception):
    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def _int(request: Request, name: str, default: int, low: int, high: int) -> int:
    text = request.query_params.get(name)
    if text is None or text == "":
        return default
    if not (text.isascii() and text.isdigit()) or not low <= int(text) <= high:
        raise _BadRequest(f"{name}: {text!r} is not a whole number from {low} to {high}")
    return int(text)


def _place(request: Request) -> Any:
    try:
        return parse_place(request.query_params.get("sfen"), request.query_params.get("moves"))
    except PlaceError as error:
        raise _BadRequest(str(error)) from None


def create_app(explorer: Explorer | None, openings: Sequence[OpeningResult] = (),
               sources: Sequence[str] = (), live: LiveView | None = None) -> Starlette:
    """The explorer app over ``explorer`` (None: no book, only the live view);
    ``openings`` (the results by opening of the results files ``sources``) make the
    results page, ``live`` (over the same files) the live page."""
    book = explorer.path.name if explorer is not None else ""
    has_results = bool(sources)
    # (the book's routes exist only with a book)
    ex = cast(Explorer, explorer)

    def html(text: str, status: int = 200) -> HTMLResponse:
        return HTMLResponse(text, status_code=status, headers=SECURITY_HEADERS)

    def json(data: Any, status: int = 200) -> JSONResponse:
        return JSONResponse(data, status_code=status, headers=SECURITY_HEADERS)

    def bad_page(error: _BadRequest, search: str = "") -> HTMLResponse:
        return html(pages.error_page(400, error.message, book, has_results, search), 400)

    async def position(request: Request) -> Response:
        try:
            view = ex.position(_place(request))
        except _BadRequest as error:
            return bad_page(error)
        if request.headers.get("x-explorer-part") == "main":
            return html(pages.position_main(view))
        return html(pages.position_page(view, book, has_results))

    async def position_json(request: Request) -> Response:
        try:
            return json(ex.position(_place(request)).as_dict())
        except _BadRequest as error:
            return json({"error": error.message}, 400)

    async def tree_json(request: Request) -> Response:
        try:
            place = _place(request)
        except _BadRequest as error:
            return json({"error": error.message}, 400)
        return json(pages.tree_json(place, ex.tree(place)))

    async def board(request: Request) -> Response:
        try:
            view = ex.position(_place(request))
        except _BadRequest as error:
            return bad_page(error)
        return Response(pages.board_html(view), media_type="image/svg+xml",
                        headers=SECURITY_HEADERS)

    async def search(request: Request) -> Response:
        text = request.query_params.get("q", "")
        try:
            place = parse_search(text)
        except PlaceError as error:
            return bad_page(_BadRequest(str(error)), text)
        return RedirectResponse(pages.place_url(place), status_code=303)

    async def mistakes(request: Request) -> Response:
        try:
            offset = _int(request, "offset", 0, 0, 10**9)
            limit = _int(request, "limit", MISTAKES_PER_PAGE, 1, 1000)
        except _BadRequest as error:
            return bad_page(error)
        total, rows = ex.mistakes(limit, offset)
        return html(pages.mistakes_page(total, rows, offset, limit, book, has_results))

    async def mistakes_json(request: Request) -> Response:
        try:
            offset = _int(request, "offset", 0, 0, 10**9)
            limit = _int(request, "limit", MISTAKES_PER_PAGE, 1, 1000)
        except _BadRequest as error:
            return json({"error": error.message}, 400)
        total, rows = ex.mistakes(limit, offset)
        return json({"total": total, "offset": offset, "mistakes": rows})

    async def runs(request: Request) -> Response:
        return html(pages.runs_page(ex.runs(), book, has_results))

    async def runs_json(request: Request) -> Response:
        return json({"runs": ex.runs()})

    def no_results() -> HTMLResponse:
        return html(pages.error_page(404, "no results files: start bookgen serve with "
                                          "--results FILE", book, has_results), 404)

    async def results(request: Request) -> Response:
        if not has_results:
            return no_results()
        in_book = ex.in_book([o.sfen for o in openings])
        return html(pages.results_page(openings, in_book, sources, book))

    async def results_json(request: Request) -> Response:
        if not has_results:
            return json({"error": "no results files"}, 404)
        in_book = ex.in_book([o.sfen for o in openings])
        return json({"sources": list(sources), "openings": [
            {**o.as_dict(), "in_book": o.sfen in in_book} for o in openings]})

    def live_state(request: Request) -> Any:
        assert live is not None
        try:
            file_index = _int(request, "file", 0, 0, 10**6)
            text = request.query_params.get("match")
            match = None if not text else _int(request, "match", 0, 1, 2**62)
            unknown = sorted(set(request.query_params) - {"file", "match"})
            if unknown:
                raise _BadRequest(f"{unknown[0]}: not a parameter of the live view "
                                  "(file, match)")
            return live.state(file_index, match)
        except BookgenError as error:
            raise _BadRequest(str(error)) from None

    async def live_page(request: Request) -> Response:
        if live is None:
            return no_results()
        try:
            state = live_state(request)
        except _BadRequest as error:
            return bad_page(error)
        if request.headers.get("x-explorer-part") == "main":
            return html(pages.live_main(state))
        return html(pages.live_page(state, book))

    async def live_json(request: Request) -> Response:
        if live is None:
            return json({"error": "no results files"}, 404)
        try:
            return json(live_state(request).as_dict())
        except _BadRequest as error:
            return json({"error": error.message}, 400)

    def no_book() -> HTMLResponse:
        return html(pages.error_page(404, "no book: start bookgen serve with -b BOOK", book,
                                     has_results), 404)

    async def not_found(request: Request, exc: Exception) -> Response:
        status = exc.status_code if isinstance(exc, HTTPException) else 500
        if request.url.path.startswith("/api/"):
            return json({"error": f"no such page: {request.url.path}"}, status)
        return html(pages.error_page(status, f"no such page: {request.url.path}", book,
                                     has_results), status)

    # the script and the style sheet, read once: no file read (nor thread) per request
    types = {".js": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8"}
    static = {path.name: (path.read_bytes(), types[path.suffix])
              for path in STATIC.iterdir() if path.suffix in types}

    async def static_file(request: Request) -> Response:
        found = static.get(request.path_params["name"])
        if found is None:
            return await not_found(request, HTTPException(404))
        return Response(found[0], media_type=found[1], headers=SECURITY_HEADERS)

    routes = [Route("/live", live_page), Route("/api/live", live_json),
              Route("/static/{name}", static_file)]
    if explorer is not None:
        routes += [
            Route("/", position), Route("/api/position", position_json),
            Route("/api/tree", tree_json), Route("/board.svg", board),
            Route("/search", search), Route("/mistakes", mistakes),
            Route("/api/mistakes", mistakes_json), Route("/runs", runs),
            Route("/api/runs", runs_json), Route("/results", results),
            Route("/api/results", results_json)]
    else:
        async def home(request: Request) -> Response:
            return RedirectResponse("/live", status_code=303)

        async def bookless(request: Request) -> Response:
            if request.url.path.startswith("/api/"):
                return json({"error": "no book: start bookgen serve with -b BOOK"}, 404)
            return no_book()

        routes += [Route("/", home)] + [
            Route(path, bookless) for path in (
                "/api/position", "/api/tree", "/board.svg", "/search", "/mistakes",
                "/api/mistakes", "/runs", "/api/runs", "/results", "/api/results")]
    return Starlette(routes=routes, exception_handlers={404: not_found, 405: not_found})


def listen(settings: ServeSettings) -> socket.socket:
    """A listening socket on ``settings.host``:``settings.port`` (the port known before the
    server runs, also for port 0); :class:`BookgenError` when it cannot be had."""
    try:
        family = socket.getaddrinfo(settings.host, settings.port, type=socket.SOCK_STREAM
                                    )[0][0]
        return socket.create_server((settings.host, settings.port), family=family)
    except OSError as error:
        raise BookgenError(f"cannot listen on {settings.host}:{settings.port}: "
                           f"{error.strerror or error}") from None


def url_of(sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    return f"http://{f'[{host}]' if ':' in host else host}:{port}/"


def serve(explorer: Explorer | None, settings: ServeSettings,
          openings: Sequence[OpeningResult] = (), sources: Sequence[str] = (),
          on_ready: Callable[[str], None] | None = None, live: LiveView | None = None) -> None:
    """Serve the explorer on ``settings.host``:``settings.port`` until Ctrl-C (uvicorn);
    ``on_ready`` is called with the page's URL once the socket listens (before the
    browser is opened, with ``settings.open_browser``). Without a book (``explorer``
    None) the page is the live view."""
    import uvicorn

    app = create_app(explorer, openings, sources, live)
    sock = listen(settings)
    url = url_of(sock) + ("" if explorer is not None else "live")
    if on_ready is not None:
        on_ready(url)
    if settings.open_browser:
        webbrowser.open(url)   # the connection waits in the socket's backlog until served
    config = uvicorn.Config(app, log_level="warning", lifespan="off")
    try:
        uvicorn.Server(config).run(sockets=[sock])
    finally:
        sock.close()
