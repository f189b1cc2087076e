"""SaslHandshake (17): the client's mechanism, checked against sasl.enabled.mechanisms (see processors/sasl.py).

An enabled mechanism starts the exchange (v0: raw tokens follow; v1: SaslAuthenticate
requests). A mechanism not enabled answers UNSUPPORTED_SASL_MECHANISM with the enabled
list, and a handshake out of turn (mid-exchange, on a listener without SASL, or a
re-authentication with another mechanism) ILLEGAL_SASL_STATE; either way the
connection then closes, as Kafka's does.
"""

from mmlog.errors import IllegalSaslState, UnsupportedSaslMechanism
from mmlog.processors.request import DEFERRED
from mmlog.processors.sasl import AUTHENTICATE, COMPLETE, log_failure
from mmlog.protocol.messages import sasl_handshake as schema
from mmlog.processors.handler_context import HandlerContext

API_KEY = schema.API_KEY


def handle(ctx: HandlerContext, request):
    conn, session = request.conn, request.conn.sasl
    mechanism = request.body.mechanism
    enabled = ctx.sasl_mechanisms[conn.listener_name] if session is not None else []
    if session is None or session.state is AUTHENTICATE or (
            session.state is COMPLETE and mechanism != session.mechanism):
        return _refuse(ctx, request, IllegalSaslState.code, enabled)
    if mechanism not in enabled:
        log_failure(conn, mechanism, "mechanism not enabled (sasl.enabled.mechanisms)")
        return _refuse(ctx, request, UnsupportedSaslMechanism.code, enabled)
    session.begin(mechanism, ctx.credentials, legacy=request.version == 0)
    return schema.RESPONSE(error_code=0, mechanisms=enabled)


def _refuse(ctx: HandlerContext, request, code: int, enabled):
    request.respond(schema.RESPONSE(error_code=code, mechanisms=enabled))
    request.conn.closing = True  # closed once the answer is written
    return DEFERRED
