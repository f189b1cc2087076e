"""JSON answers and errors as Confluent Schema Registry writes them: its content type, and error bodies
`{"error_code": ..., "message": ...}`."""

from __future__ import annotations

import json

from aiohttp import web

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
ACCEPTED = ("application/vnd.schemaregistry.v1+json", "application/vnd.schemaregistry+json", "application/json",
            "application/octet-stream", "")  # what a request body may be declared as


class HttpError(Exception):
    """An error answer: HTTP status, Confluent's error code, a message."""

    def __init__(self, status: int, code: int, message: str, headers: dict | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.headers = headers or {}

    def response(self) -> web.Response:
        return answer({"error_code": self.code, "message": self.message}, self.status, self.headers)


def answer(body, status: int = 200, headers: dict | None = None) -> web.Response:
    """A JSON answer in the registry's content type."""
    return web.Response(body=json.dumps(body).encode(), status=status, headers={
        "Content-Type": CONTENT_TYPE, **(headers or {})})


@web.middleware
async def json_errors(request: web.Request, handler):
    """Every error as a JSON body, for every service on the server (Confluent's form; a service answering
    HTML would catch its own): ours (HttpError), aiohttp's (404 path, 405, 413 body too large), and a
    handler's bug (500, logged)."""
    try:
        return await handler(request)
    except HttpError as exc:
        return exc.response()
    except web.HTTPRequestEntityTooLarge as exc:
        return HttpError(413, 413, f"Request body too large: {exc.text}").response()
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        return HttpError(exc.status, exc.status, exc.reason).response()
    except Exception:
        import logging

        logging.getLogger("mmlog.broker").exception("web: %s %s failed", request.method, request.path)
        return HttpError(500, 50001, "Error in the backend data store").response()


async def json_body(request: web.Request) -> dict:
    """The request's JSON object (HttpError 400/422 when it is not one)."""
    kind = request.content_type.split(";")[0].strip().lower()
    if kind not in ACCEPTED:
        raise HttpError(415, 415, f"Unsupported media type {kind}")
    raw = await request.read()
    try:
        body = json.loads(raw or b"null")
    except (ValueError, UnicodeDecodeError):
        raise HttpError(400, 400, "Unrecognized JSON in the request body") from None
    if not isinstance(body, dict):
        raise HttpError(422, 422, "The request body must be a JSON object")
    return body
