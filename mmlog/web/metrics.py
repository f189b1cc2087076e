"""`GET /metrics` on the broker's HTTP server: the Prometheus text of `metrics/endpoint.py`'s scraper,
taken on an executor thread (it waits for the topic lock and reads thousands of partitions: never on the
loop, which goes on serving the registry and the console meanwhile). A scrape that fails answers 500
and the broker goes on."""

from __future__ import annotations

import logging

from aiohttp import web

from mmlog.metrics.endpoint import CONTENT_TYPE
from mmlog.web.server import blocking

log = logging.getLogger("mmlog.broker")


def mount(server, scrape, listeners) -> None:
    """Serve `scrape()` (bytes of the text format) at /metrics on the given listeners of `server`."""

    async def metrics(request: web.Request) -> web.Response:
        try:
            body = await blocking(scrape)
        except Exception:  # noqa: BLE001 - a scrape that fails answers 500, the broker goes on
            log.exception("metrics scrape failed")
            return web.Response(status=500, body=b"scrape failed (see the broker log)\n", content_type="text/plain")
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE})

    server.mount([web.get("/metrics", metrics)], listeners=listeners)
