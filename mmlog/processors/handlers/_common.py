"""What several handlers share: turning exceptions into Kafka error codes."""

from __future__ import annotations

import logging

from mmlog.errors import KafkaError

log = logging.getLogger("mmlog.processors.handlers")

UNKNOWN_SERVER_ERROR = -1


def error_code(exc: BaseException) -> int:
    """The Kafka error code for an exception; unexpected ones are logged with their traceback."""
    if isinstance(exc, KafkaError):
        return exc.code
    log.error("unexpected error while handling a request", exc_info=exc)
    return UNKNOWN_SERVER_ERROR
