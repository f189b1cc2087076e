"""The console API's errors as JSON: `{"error": NAME, "message": ...}` with an HTTP status, a Kafka error by
its name (TOPIC_AUTHORIZATION_FAILED -> 403, UNKNOWN_TOPIC_OR_PARTITION -> 404, ...)."""

from __future__ import annotations

import json

from aiohttp import web

from mmlog.client.connection import ConnectionClosed
from mmlog.errors import KafkaError
from mmlog.metrics.families import error_name

STATUS_BY_NAME = {"UNKNOWN_TOPIC_OR_PARTITION": 404, "GROUP_ID_NOT_FOUND": 404, "RESOURCE_NOT_FOUND": 404,
                  "SASL_AUTHENTICATION_FAILED": 401, "POLICY_VIOLATION": 400, "OFFSET_OUT_OF_RANGE": 400,
                  "NOT_CONTROLLER": 503, "REQUEST_TIMED_OUT": 504}


class ConsoleError(Exception):
    """An error answer: HTTP status, an error name (Kafka's where it is one), a message."""

    def __init__(self, status: int, name: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.name = name
        self.message = message

    def response(self) -> web.Response:
        return web.Response(status=self.status, content_type="application/json",
                            text=json.dumps({"error": self.name, "message": self.message}))


def from_exception(exc: BaseException) -> ConsoleError:
    """What a client's failure answers: a Kafka error by its name, an unreachable broker 503."""
    if isinstance(exc, ConsoleError):
        return exc
    if isinstance(exc, KafkaError):
        name = error_name(exc.code)
        return ConsoleError(status_of(name, exc.retriable), name, str(exc))
    if isinstance(exc, (ConnectionClosed, OSError)):
        return ConsoleError(503, "BROKER_NOT_AVAILABLE", f"the broker did not answer: {exc}")
    if isinstance(exc, (ValueError, KeyError)):
        return ConsoleError(400, "INVALID_REQUEST", str(exc))
    raise exc


def status_of(name: str, retriable: bool = False) -> int:
    if name.endswith("AUTHORIZATION_FAILED"):
        return 403
    if name in STATUS_BY_NAME:
        return STATUS_BY_NAME[name]
    if name.startswith("INVALID_") or name.endswith("_ALREADY_EXISTS"):
        return 400
    return 503 if retriable else 500
