"""The registry's changes: registered, deleted, configured on the broker leading `_schemas`-0, forwarded
there from any other (service.py), and answered once this broker's view holds them."""

from __future__ import annotations

from functools import partial

import aiohttp
from aiohttp import web

from mmlog.registry import access, errors, operations
from mmlog.registry.reads import flag
from mmlog.web.auth import ON_BEHALF
from mmlog.web.responses import answer, json_body
from mmlog.web.server import blocking

FORWARDED = "X-Mmlog-Forwarded"  # a request a follower forwarded: made here, never forwarded again
OFFSET = "X-Mmlog-Registry-Offset"  # the offset after the change, for the follower to wait for


class Writes:
    """Mixed into RegistryApi (api.py)."""

    async def register(self, request: web.Request) -> web.Response:
        subject = self.subject(request, access.REGISTER)
        body = await json_body(request)
        normalize = flag(request, "normalize")
        return await self._change(request, body, lambda view, writer: operations.register(
            view, writer, subject, body, normalize))

    async def delete_subject(self, request: web.Request) -> web.Response:
        subject = self.subject(request, access.REMOVE)
        permanent = flag(request, "permanent")
        return await self._change(request, None, lambda view, _: operations.delete_subject(view, subject, permanent))

    async def delete_version(self, request: web.Request) -> web.Response:
        subject = self.subject(request, access.REMOVE)
        permanent, which = flag(request, "permanent"), request.match_info["version"]
        operations.parse_version(which)  # 42202 before anything else
        return await self._change(request, None, lambda view, _: operations.delete_version(
            view, subject, which, permanent))

    async def put_config(self, request: web.Request) -> web.Response:
        subject = self._configured(request)
        body = await json_body(request)
        return await self._change(request, body, lambda view, _: operations.set_config(view, subject, body))

    async def delete_config(self, request: web.Request) -> web.Response:
        subject = self._configured(request)
        return await self._change(request, None, lambda view, _: operations.delete_config(view, subject))

    async def put_mode(self, request: web.Request) -> web.Response:
        subject = self._configured(request)
        body = await json_body(request)
        force = flag(request, "force")
        return await self._change(request, body, lambda view, _: operations.set_mode(view, subject, body, force))

    async def delete_mode(self, request: web.Request) -> web.Response:
        subject = self._configured(request)
        return await self._change(request, None, lambda view, _: operations.delete_mode(view, subject))

    def _configured(self, request: web.Request) -> str | None:
        """The subject whose config or mode changes (None: the global one), authorised."""
        if "subject" in request.match_info:
            return self.subject(request, access.CONFIGURE)
        caller = self.caller(request)
        self.guard.check(caller, *access.for_global())
        return None

    async def _change(self, request: web.Request, body, decide) -> web.Response:
        if FORWARDED not in request.headers:
            url = await blocking(self.service.leader_url)
            if url is not None:
                return await self._forward(request, url, body)
        result, offset = await blocking(self.service.change, decide)
        return answer(result, headers={OFFSET: str(offset)})

    async def _forward(self, request: web.Request, url: str, body) -> web.Response:
        headers = {FORWARDED: "1", ON_BEHALF: self.caller(request).principal,
                   "Content-Type": "application/vnd.schemaregistry.v1+json"}
        if "Authorization" in request.headers:
            headers["Authorization"] = request.headers["Authorization"]
        timeout = aiohttp.ClientTimeout(total=self.service.timeout * 2)
        try:
            async with aiohttp.ClientSession(timeout=timeout) as session, session.request(
                    request.method, url.rstrip("/") + request.rel_url.path_qs, json=body, headers=headers,
                    ssl=self.client_tls or True) as reply:
                payload = await reply.read()
                offset = reply.headers.get(OFFSET)
                status = reply.status
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise errors.forwarding(f"{url}: {exc.__class__.__name__}: {exc}") from None
        if status < 300 and offset is not None:
            await blocking(partial(self.service.wait_applied, int(offset)))
        return web.Response(body=payload, status=status, headers={
            "Content-Type": "application/vnd.schemaregistry.v1+json"})
