"""The broker's HTTP server: one aiohttp application on an asyncio loop of its own thread in the main process.

Services mount on it (`mount`: /metrics, the schema registry, the console) before `start`, each on the
listeners its setting names: an address named by several services is one socket serving them all (port 0
too: one port picked for them all), and a service's paths answer 404 on the others' listeners. The
sockets are bound by `bind_services` at start-up with the Kafka listeners, so a port in use stops the
broker with one line; the supervisor closes them in every forked child. An https listener takes the
broker's TLS settings (`ssl.keystore.location`, `ssl.truststore.location`, `ssl.client.auth`, ...).

Handlers run on the loop and must not block it: what waits (a write acknowledged by the cluster) runs in
the loop's executor threads (`blocking`). No handler takes the control plane's locks.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import ssl
import threading
from dataclasses import dataclass

from aiohttp import web

from mmlog.system import listening
from mmlog.config.settings import ConfigError
from mmlog.security import tls
from mmlog.web.responses import HttpError, json_errors

log = logging.getLogger("mmlog.broker")

STOP_S = 5.0  # how long a stop waits for requests in progress
TICK_S = 0.5
WORKERS = 8  # executor threads for the blocking part of handlers (writes waiting for the cluster)


@dataclass(frozen=True)
class HttpListener:
    """A bound listening socket and the scheme it serves."""

    scheme: str
    sock: socket.socket

    @property
    def url(self) -> str:
        host, port = self.sock.getsockname()[:2]
        return f"{self.scheme}://{f'[{host}]' if ':' in host else host}:{port}"


def bind(scheme: str, host: str, port: int, backlog: int = 128) -> HttpListener:
    """A listening socket for host:port (OSError when the port is taken)."""
    return HttpListener(scheme, listening.bind(host, port, backlog))


def bind_all(addresses) -> list[HttpListener]:
    """Every (scheme, host, port), or none: an OSError names the address that failed."""
    bound: list[HttpListener] = []
    try:
        for scheme, host, port in addresses:
            try:
                bound.append(bind(scheme, host, port))
            except OSError as exc:
                raise OSError(exc.errno, f"cannot listen on {scheme}://{host}:{port}: {exc.strerror}") from exc
    except BaseException:
        for listener in bound:
            listener.sock.close()
        raise
    return bound


def bind_services(services: dict[str, list[tuple[str, str, int]]]) -> dict[str, list[HttpListener]]:
    """Each service's listeners: an address (scheme, host, port) that several services name is one socket
    serving them all, the n-th time a service names it the n-th socket there (a setting may list port 0
    twice for two ports). ConfigError when one host:port is named with two schemes; OSError naming an
    address that is taken."""
    schemes: dict[tuple[str, int], str] = {}
    counts: dict[tuple[str, str, int], int] = {}
    for name, addresses in services.items():
        for scheme, host, port in addresses:
            if port and schemes.setdefault((host, port), scheme) != scheme:
                raise ConfigError(f"{name}: {host}:{port} is http for one service and https for another")
        for address in set(addresses):
            counts[address] = max(counts.get(address, 0), addresses.count(address))
    wanted = [(address, n) for address, count in counts.items() for n in range(count)]
    bound = dict(zip(wanted, bind_all(address for address, _ in wanted)))
    out = {}
    for name, addresses in services.items():
        seen: dict[tuple[str, str, int], int] = {}
        out[name] = []
        for address in addresses:
            n = seen[address] = seen.get(address, -1) + 1
            out[name].append(bound[(address, n)])
    return out


def tls_context(config) -> ssl.SSLContext:
    """The broker's TLS settings as an https listener's context (no kernel TLS: aiohttp writes through SSL)."""
    return tls.server_context(config, _HttpsListener(), ktls=False)


@dataclass(frozen=True)
class _HttpsListener:
    """What tls.server_context asks of a listener: the web listeners take the broker-wide ssl.* settings."""

    name: str = "HTTPS"
    sasl: bool = False


class WebServer:
    """The application, its listeners and the thread running its loop."""

    def __init__(self, listeners: list[HttpListener], context: ssl.SSLContext | None = None,
                 max_body: int = 16 * 1024 * 1024) -> None:
        self.listeners = listeners
        self.context = context
        self.app = web.Application(client_max_size=max_body, middlewares=[json_errors])
        self.loop = asyncio.new_event_loop()
        self._runner: web.AppRunner | None = None
        self._thread: threading.Thread | None = None
        self._stopping: list = []
        self._tick: asyncio.Task | None = None  # what `stop` calls first (services ending their own threads)

    @property
    def sockets(self) -> list[socket.socket]:
        return [listener.sock for listener in self.listeners]

    @property
    def urls(self) -> list[str]:
        return [listener.url for listener in self.listeners]

    @property
    def thread(self) -> threading.Thread | None:
        return self._thread

    def mount(self, routes, wrap=None, on_stop=None, listeners=None) -> None:
        """Add a service's routes before `start`; `wrap(handler)` wraps each of its handlers (what only its
        own requests need: its errors' form, a gate), so that services do not see each other's. With
        `listeners` (some of the server's), its paths answer 404 on any other listener."""
        if wrap is not None:
            routes = [web.route(r.method, r.path, wrap(r.handler), **r.kwargs) for r in routes]
        if listeners is not None and set(map(id, listeners)) != set(map(id, self.listeners)):
            routes = [web.route(r.method, r.path, _only_on(listeners, r.handler), **r.kwargs) for r in routes]
        self.app.add_routes(routes)
        if on_stop is not None:
            self._stopping.append(on_stop)

    def start(self) -> None:
        ready = threading.Event()
        failure: list[BaseException] = []
        self._thread = threading.Thread(target=self._run, args=(ready, failure), name="web", daemon=True)
        self._thread.start()
        ready.wait()
        if failure:
            raise failure[0]

    def _run(self, ready: threading.Event, failure: list) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.set_default_executor(_executor())
        try:
            self.loop.run_until_complete(self._serve())
        except BaseException as exc:  # noqa: BLE001 - handed to start(), which raises it in the main thread
            failure.append(exc)
            ready.set()
            return
        ready.set()
        self.loop.run_forever()
        self.loop.run_until_complete(self._cleanup())
        self.loop.close()

    async def _serve(self) -> None:
        self._tick = asyncio.get_running_loop().create_task(_tick())
        self._runner = web.AppRunner(self.app, access_log=None, handle_signals=False, shutdown_timeout=STOP_S)
        await self._runner.setup()
        for listener in self.listeners:
            context = self.context if listener.scheme == "https" else None
            await web.SockSite(self._runner, listener.sock, ssl_context=context).start()

    async def _cleanup(self) -> None:
        self._tick.cancel()
        if self._runner is not None:
            await self._runner.cleanup()

    def stop(self) -> None:
        """Stop accepting, answer what is in progress (up to STOP_S), end the thread; then the services."""
        if self._thread is not None and self._thread.is_alive():
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(STOP_S * 2)
        for listener in self.listeners:
            listener.sock.close()
        for on_stop in self._stopping:
            on_stop()


def _only_on(listeners: list[HttpListener], handler):
    """The handler, answering 404 to a request that came in on another listener than these."""
    bound = [lst.sock.getsockname()[:2] for lst in listeners]

    async def gated(request: web.Request):
        local = request.transport.get_extra_info("sockname") if request.transport else None
        if not local or not any(port == local[1] and host in ("0.0.0.0", "::", local[0]) for host, port in bound):
            raise HttpError(404, 404, "HTTP 404 Not Found")
        return await handler(request)

    return gated


async def _tick() -> None:
    """The loop wakes every TICK_S even when idle, so that what is raised in its thread (a test's injected
    fault) ends it promptly and the liveness watch sees it."""
    while True:
        await asyncio.sleep(TICK_S)


def _executor():
    from concurrent.futures import ThreadPoolExecutor

    return ThreadPoolExecutor(WORKERS, thread_name_prefix="web-worker")


async def blocking(fn, *args):
    """fn(*args) on an executor thread, awaited (a handler's part that waits for the cluster)."""
    return await asyncio.get_running_loop().run_in_executor(None, fn, *args)
