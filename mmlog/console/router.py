"""The console API's convention: `Routes` collects a module's handlers; each becomes an aiohttp handler that
finds the session, checks the CSRF token of a state-changing request, and runs the handler on the web
server's executor holding the session's lock, answering its result as JSON (errors: `errors.py`)."""

from __future__ import annotations

import json

from aiohttp import web

from mmlog.console.errors import ConsoleError, from_exception
from mmlog.console.sessions import COOKIE, CSRF_HEADER, Session
from mmlog.web.server import blocking

PREFIX = "/console/api"
CHANGES = ("POST", "PUT", "DELETE")


class Call:
    """What a handler is given: the session, the query, the path's parts, the JSON body, the console."""

    __slots__ = ("body", "console", "params", "query", "request", "session")

    def __init__(self, console, session: Session | None, request: web.Request, body: dict) -> None:
        self.console = console
        self.session = session
        self.request = request
        self.query = dict(request.query)
        self.params = dict(request.match_info)
        self.body = body


class Routes:
    """A module's API routes: `@routes.get("/topics")` and the like; `public` ones need no session."""

    def __init__(self) -> None:
        self.entries: list[tuple[str, str, object, bool]] = []

    def route(self, method: str, path: str, public: bool = False):
        def add(handler):
            self.entries.append((method, PREFIX + path, handler, public))
            return handler
        return add

    def get(self, path: str, **kw):
        return self.route("GET", path, **kw)

    def post(self, path: str, **kw):
        return self.route("POST", path, **kw)

    def put(self, path: str, **kw):
        return self.route("PUT", path, **kw)

    def delete(self, path: str, **kw):
        return self.route("DELETE", path, **kw)

    def aiohttp_routes(self, console) -> list:
        return [web.route(method, path, _serve(console, handler, public))
                for method, path, handler, public in self.entries]


def _serve(console, handler, public: bool):
    async def serve(request: web.Request) -> web.StreamResponse:
        try:
            body = await _body(request)
            result = await blocking(_run, console, handler, public, request, body)
        except Exception as exc:  # noqa: BLE001 - every failure answers JSON (a bug: 500, logged by from_exception)
            return from_exception(exc).response()
        if isinstance(result, web.StreamResponse):
            return result
        return json_response(result)
    return serve


def _run(console, handler, public: bool, request: web.Request, body: dict):
    """On an executor thread: the session, the CSRF check, the handler under the session's lock."""
    session = console.sessions.get(request.cookies.get(COOKIE))
    if session is None and not public:
        raise ConsoleError(401, "NOT_LOGGED_IN", "log in first (the session ended or never was)")
    if request.method in CHANGES and session is not None and not public \
            and not session.csrf_ok(request.headers.get(CSRF_HEADER)):
        raise ConsoleError(403, "CSRF_TOKEN_MISSING", f"a change needs the session's {CSRF_HEADER} header")
    call = Call(console, session, request, body)
    if session is None:
        return handler(call)
    with session.lock:
        return handler(call)


async def _body(request: web.Request) -> dict:
    """A state-changing request's JSON object: declared application/json, which a cross-site form cannot
    send (so login, which has no session yet, is no CSRF target either)."""
    if request.method not in CHANGES:
        return {}
    if request.content_type != "application/json":
        raise ConsoleError(415, "UNSUPPORTED_MEDIA_TYPE", "send the body as application/json")
    try:
        body = json.loads(await request.read() or b"{}")
    except (ValueError, UnicodeDecodeError):
        raise ConsoleError(400, "INVALID_REQUEST", "the body is not JSON") from None
    if not isinstance(body, dict):
        raise ConsoleError(400, "INVALID_REQUEST", "the body must be a JSON object")
    return body


def json_response(result, status: int = 200) -> web.Response:
    return web.Response(status=status, content_type="application/json", text=json.dumps(result),
                        headers={"Cache-Control": "no-store"})
