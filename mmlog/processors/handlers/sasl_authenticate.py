"""SaslAuthenticate (36): one SASL token each way, until the mechanism is satisfied.

Bad credentials answer SASL_AUTHENTICATION_FAILED after
`connection.failed.authentication.delay.ms` (the connection reads nothing meanwhile)
and the connection closes; the failure is logged with the peer's address, the user
name and the mechanism, never a password. A token out of turn answers
ILLEGAL_SASL_STATE and closes. v1+ answers carry session_lifetime_ms
(`connections.max.reauth.ms`; 0 when sessions do not expire). A PLAIN password
is checked on the processor's helper thread (its PBKDF2 takes milliseconds), so
other connections are served meanwhile.
"""

import logging

from mmlog.errors import IllegalSaslState, SaslAuthenticationFailed
from mmlog.processors.request import DEFERRED
from mmlog.processors.sasl import AUTHENTICATE, log_failure
from mmlog.protocol.messages import sasl_authenticate as schema
from mmlog.security.sasl import AuthenticationFailed
from mmlog.processors.handler_context import HandlerContext

API_KEY = schema.API_KEY
log = logging.getLogger("mmlog.security")


def handle(ctx: HandlerContext, request):
    session = request.conn.sasl
    if session is None or session.state is not AUTHENTICATE or session.legacy:
        return _close_after(request, IllegalSaslState.code, "SaslAuthenticate out of turn")
    token = bytes(request.body.auth_bytes)
    if session.mechanism == "PLAIN":
        ctx.offload(lambda: session.step(token, ctx.reauth_ms), lambda answer, exc: _answer(ctx, request, answer, exc))
        return DEFERRED  # the connection is busy until then: nothing else of it is handled
    try:
        answer, failure = session.step(token, ctx.reauth_ms), None
    except AuthenticationFailed as exc:
        answer, failure = None, exc
    return _answer(ctx, request, answer, failure)


def _answer(ctx: HandlerContext, request, answer: bytes | None, failure: BaseException | None):
    """Respond to a step: its token, or the failure held back and the connection closed."""
    conn, session = request.conn, request.conn.sasl
    if failure is not None:
        if not isinstance(failure, AuthenticationFailed):
            log.error("SASL %s step failed unexpectedly", session.mechanism, exc_info=failure)
        log_failure(conn, session.mechanism, str(failure))
        message = (f"Authentication failed during authentication due to invalid credentials with SASL mechanism "
                   f"{session.mechanism}")
        ctx.later(ctx.auth_failure_delay_s,
                  lambda: _close_after(request, SaslAuthenticationFailed.code, message))
        return DEFERRED
    if session.principal:
        conn.principal = session.principal
    request.respond(schema.RESPONSE(error_code=0, error_message=None, auth_bytes=answer,
                                    session_lifetime_ms=session.lifetime_ms()))
    return DEFERRED


def _close_after(request, code: int, message: str):
    request.respond(schema.RESPONSE(error_code=code, error_message=message, auth_bytes=b"", session_lifetime_ms=0))
    request.conn.closing = True
    return DEFERRED
