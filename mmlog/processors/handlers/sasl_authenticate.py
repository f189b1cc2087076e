"""SaslAuthenticate (36): one SASL token each way, until the mechanism is satisfied.

Bad credentials answer SASL_AUTHENTICATION_FAILED after
`connection.failed.authentication.delay.ms` (the connection reads nothing meanwhile)
and the connection closes; the failure is logged with the peer's address, the user
name and the mechanism, never a password. A token out of turn answers
ILLEGAL_SASL_STATE and closes. v1+ answers carry session_lifetime_ms
(`connections.max.reauth.ms`; 0 when sessions do not expire).
"""

from mmlog.errors import IllegalSaslState, SaslAuthenticationFailed
from mmlog.processors.request import DEFERRED
from mmlog.processors.sasl import AUTHENTICATE, log_failure
from mmlog.protocol.messages import sasl_authenticate as schema
from mmlog.security.sasl import AuthenticationFailed

API_KEY = schema.API_KEY


def handle(ctx, request):
    conn, session = request.conn, request.conn.sasl
    if session is None or session.state is not AUTHENTICATE or session.legacy:
        return _close_after(request, IllegalSaslState.code, "SaslAuthenticate out of turn")
    try:
        answer = session.step(request.body.auth_bytes, ctx.reauth_ms)
    except AuthenticationFailed as exc:
        log_failure(conn, session.mechanism, str(exc))
        message = (f"Authentication failed during authentication due to invalid credentials with SASL mechanism "
                   f"{session.mechanism}")
        ctx.later(ctx.auth_failure_delay_s,
                  lambda: _close_after(request, SaslAuthenticationFailed.code, message))
        return DEFERRED
    if session.principal:
        conn.principal = session.principal
    return schema.RESPONSE(error_code=0, error_message=None, auth_bytes=answer,
                           session_lifetime_ms=session.lifetime_ms())


def _close_after(request, code: int, message: str):
    request.respond(schema.RESPONSE(error_code=code, error_message=message, auth_bytes=b"", session_lifetime_ms=0))
    request.conn.closing = True
    return DEFERRED
