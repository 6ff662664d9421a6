"""``bookgen serve``: the explorer as an ASGI app (Starlette) and its server (uvicorn).

:func:`create_app` builds the app over an :class:`~bookgen.explore.view.Explorer`
(the book, read-only) and the results by opening it is given; :func:`serve`
runs it with uvicorn on ``settings.host`` (127.0.0.1 unless told otherwise).
Starlette and uvicorn are the ``bookgen[serve]`` extra
(:func:`bookgen.extras.require_extra` names it when missing).

Pages: ``/`` (a position: ``?sfen=...&moves=7g7f 3c3d``), ``/mistakes``,
``/runs``, ``/results`` (with results files), ``/search?q=...`` (redirects to
the position it names); the same as JSON under ``/api/`` (``position``,
``tree``, ``mistakes``, ``runs``, ``results``), the board alone as
``/board.svg``, and the script and style sheet under ``/static/``. A
malformed sfen, move or number in a URL answers 400 with a page (or JSON)
saying what is wrong.
"""

from __future__ import annotations

import socket
import webbrowser
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import Route

from bookgen.errors import BookgenError
from bookgen.explore import pages
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


def create_app(explorer: Explorer, openings: Sequence[OpeningResult] = (),
               sources: Sequence[str] = ()) -> Starlette:
    """The explorer app over ``explorer``; ``openings`` (the results by opening of the
    results files ``sources``) make the results page."""
    book = explorer.path.name
    has_results = bool(sources)

    def html(text: str, status: int = 200) -> HTMLResponse:
        return HTMLResponse(text, status_code=status, headers=SECURITY_HEADERS)

    def json(data: Any, status: int = 200) -> JSONResponse:
        return JSONResponse(data, status_code=status, headers=SECURITY_HEADERS)

    def bad_page(error: _BadRequest, search: str = "") -> HTMLResponse:
        return html(pages.error_page(400, error.message, book, has_results, search), 400)

    async def position(request: Request) -> Response:
        try:
            view = explorer.position(_place(request))
        except _BadRequest as error:
            return bad_page(error)
        if request.headers.get("x-explorer-part") == "main":
            return html(pages.position_main(view))
        return html(pages.position_page(view, book, has_results))

    async def position_json(request: Request) -> Response:
        try:
            return json(explorer.position(_place(request)).as_dict())
        except _BadRequest as error:
            return json({"error": error.message}, 400)

    async def tree_json(request: Request) -> Response:
        try:
            place = _place(request)
        except _BadRequest as error:
            return json({"error": error.message}, 400)
        return json(pages.tree_json(place, explorer.tree(place)))

    async def board(request: Request) -> Response:
        try:
            view = explorer.position(_place(request))
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
        total, rows = explorer.mistakes(limit, offset)
        return html(pages.mistakes_page(total, rows, offset, limit, book, has_results))

    async def mistakes_json(request: Request) -> Response:
        try:
            offset = _int(request, "offset", 0, 0, 10**9)
            limit = _int(request, "limit", MISTAKES_PER_PAGE, 1, 1000)
        except _BadRequest as error:
            return json({"error": error.message}, 400)
        total, rows = explorer.mistakes(limit, offset)
        return json({"total": total, "offset": offset, "mistakes": rows})

    async def runs(request: Request) -> Response:
        return html(pages.runs_page(explorer.runs(), book, has_results))

    async def runs_json(request: Request) -> Response:
        return json({"runs": explorer.runs()})

    def no_results() -> HTMLResponse:
        return html(pages.error_page(404, "no results files: start bookgen serve with "
                                          "--results FILE", book, has_results), 404)

    async def results(request: Request) -> Response:
        if not has_results:
            return no_results()
        in_book = explorer.in_book([o.sfen for o in openings])
        return html(pages.results_page(openings, in_book, sources, book))

    async def results_json(request: Request) -> Response:
        if not has_results:
            return json({"error": "no results files"}, 404)
        in_book = explorer.in_book([o.sfen for o in openings])
        return json({"sources": list(sources), "openings": [
            {**o.as_dict(), "in_book": o.sfen in in_book} for o in openings]})

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

    routes = [
        Route("/", position), Route("/api/position", position_json),
        Route("/api/tree", tree_json), Route("/board.svg", board),
        Route("/search", search), Route("/mistakes", mistakes),
        Route("/api/mistakes", mistakes_json), Route("/runs", runs),
        Route("/api/runs", runs_json), Route("/results", results),
        Route("/api/results", results_json),
        Route("/static/{name}", static_file),
    ]
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


def serve(explorer: Explorer, settings: ServeSettings, openings: Sequence[OpeningResult] = (),
          sources: Sequence[str] = (), on_ready: Callable[[str], None] | None = None) -> None:
    """Serve the explorer on ``settings.host``:``settings.port`` until Ctrl-C (uvicorn);
    ``on_ready`` is called with the page's URL once the socket listens (before the
    browser is opened, with ``settings.open_browser``)."""
    import uvicorn

    app = create_app(explorer, openings, sources)
    sock = listen(settings)
    url = url_of(sock)
    if on_ready is not None:
        on_ready(url)
    if settings.open_browser:
        webbrowser.open(url)   # the connection waits in the socket's backlog until served
    config = uvicorn.Config(app, log_level="warning", lifespan="off")
    try:
        uvicorn.Server(config).run(sockets=[sock])
    finally:
        sock.close()
