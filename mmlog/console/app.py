"""Mounting the console on the broker's HTTP server: its API (every module of `api/`), the page shell and
its static files (read once at start: served from memory, never touching the disk on the loop), and the
headers every console answer carries (a Content-Security-Policy allowing the console's own scripts only)."""

from __future__ import annotations

import importlib
import logging
import mimetypes
import pkgutil
from pathlib import Path

from aiohttp import web

from mmlog.console import api
from mmlog.console.clients import Clients, Target
from mmlog.console.samplers import Samplers
from mmlog.console.sessions import Sessions
from mmlog.ipc.cluster_view import ClusterView, Endpoint, ViewReader
from mmlog.web.auth import Guard

log = logging.getLogger("mmlog.console")

STATIC = Path(__file__).parent / "static"
HEADERS = {
    "Content-Security-Policy": "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
                               "object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer", "X-Frame-Options": "DENY",
}


class Console:
    """What the console's handlers share: the broker's config and users, the sessions, the cluster view."""

    def __init__(self, config, registry=None, totals=None) -> None:
        self.config = config
        self.registry = registry  # this broker's schema registry service (mmlog/registry/service.py), if any
        self.samplers = Samplers(config, totals)
        self.guard = Guard(config)
        self.target = Target.of(config)
        self.sessions = Sessions(lambda user, password: Clients(self.target, user, password, self.registry_urls),
                                 config["console.session.timeout.ms"] / 1000)
        self.view = ViewReader(config.log_dirs[0], ClusterView.standalone(Endpoint.of(config)))
        self.state: dict = {}  # what page areas keep between requests (samples of rates), by area

    @property
    def login_required(self) -> bool:
        return self.guard.required

    def registry_urls(self) -> list[str]:
        """This broker's schema registry URLs (plain HTTP first), else those of the cluster's brokers."""
        mine = [f"{s}://{'127.0.0.1' if h in ('0.0.0.0', '') else h}:{p}" for s, h, p in self.config.registry_listeners]
        if not mine:
            mine = [u for b in self.view.current().brokers.values() for u in b.registry]
        return sorted(mine, key=lambda u: not u.startswith("http:"))

    @property
    def lag_sampler(self):
        return self.samplers.lag

    @property
    def metrics_history(self):
        return self.samplers.metrics

    def close(self) -> None:
        self.samplers.stop()
        self.sessions.close()


def api_modules() -> list:
    """Every module of mmlog/console/api/ (each a page area with its `routes`)."""
    return [importlib.import_module(f"{api.__name__}.{m.name}") for m in pkgutil.iter_modules(api.__path__)]


def mount(server, config, listeners=None, registry=None, totals=None) -> Console:
    """The console on the server; `registry`: this broker's registry service, `totals`: its metrics block's
    summed counters (the Metrics page's samples)."""
    console = Console(config, registry, totals)
    routes = [route for module in api_modules() for route in module.routes.aiohttp_routes(console)]
    files = _static_files()
    routes += [web.get("/console", _redirect), web.get("/console/", _file(files, "index.html")),
               web.get("/console/static/{name:.+}", _static(files))]
    server.mount(routes, wrap=_with_headers, on_stop=console.close, listeners=listeners)
    console.samplers.start()
    return console


def _static_files() -> dict[str, tuple[bytes, str]]:
    files = {}
    for path in STATIC.rglob("*"):
        if path.is_file():
            kind = mimetypes.guess_type(path.name)[0] or "application/octet-stream"
            if path.suffix == ".js":
                kind = "text/javascript"
            files[path.relative_to(STATIC).as_posix()] = (path.read_bytes(), kind)
    return files


def _file(files, name: str):
    async def serve(request: web.Request) -> web.Response:
        body, kind = files[name]
        return web.Response(body=body, content_type=kind, headers={"Cache-Control": "no-cache"})
    return serve


def _static(files):
    async def serve(request: web.Request) -> web.Response:
        name = request.match_info["name"]
        if name not in files:
            raise web.HTTPNotFound()
        body, kind = files[name]
        return web.Response(body=body, content_type=kind, headers={"Cache-Control": "no-cache"})
    return serve


async def _redirect(request: web.Request):
    raise web.HTTPFound("/console/")


def _with_headers(handler):
    async def headed(request: web.Request) -> web.StreamResponse:
        try:
            response = await handler(request)
        except web.HTTPException as exc:
            exc.headers.update(HEADERS)
            raise
        response.headers.update(HEADERS)
        return response
    return headed
