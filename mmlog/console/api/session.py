"""Logging in and out, and what the page shell asks first: whether a login is needed, who is logged in,
the CSRF token. The session cookie is HttpOnly and SameSite=Strict (Secure over HTTPS); the password
never leaves the server."""

from __future__ import annotations

import time

from aiohttp import web

from mmlog.console.errors import ConsoleError
from mmlog.console.router import Routes, json_response
from mmlog.console.sessions import COOKIE

routes = Routes()
FAILED_LOGIN_DELAY_S = 0.5  # at most: connection.failed.authentication.delay.ms, as a refused SASL login waits


@routes.get("/session", public=True)
def session(call):
    """The caller's session; without SASL listeners one is opened at once (anonymous, as on the Kafka API)."""
    console = call.console
    if call.session is not None:
        return {"login_required": console.login_required, **call.session.public()}
    if console.login_required:
        return {"login_required": True, "user": None}
    opened = console.sessions.create(None, None)
    return _with_cookie(call, opened, {"login_required": False, **opened.public()})


@routes.post("/login", public=True)
def login(call):
    console = call.console
    if not console.login_required:
        raise ConsoleError(400, "LOGIN_NOT_NEEDED", "the Kafka listeners ask for no login: this console neither")
    user, password = call.body.get("user"), call.body.get("password")
    if not isinstance(user, str) or not isinstance(password, str) or not user:
        raise ConsoleError(400, "INVALID_REQUEST", "user and password are wanted")
    if not console.guard.authenticates(user, password):
        time.sleep(min(FAILED_LOGIN_DELAY_S, console.config["connection.failed.authentication.delay.ms"] / 1000))
        raise ConsoleError(401, "SASL_AUTHENTICATION_FAILED", "wrong user name or password")
    if call.session is not None:
        console.sessions.end(call.session.id)  # a new id at login: a planted cookie is worth nothing
    opened = console.sessions.create(user, password)
    return _with_cookie(call, opened, {"login_required": True, **opened.public()})


@routes.post("/logout")
def logout(call):
    call.console.sessions.end(call.session.id)
    response = json_response({"user": None})
    response.del_cookie(COOKIE, path="/console")
    return response


def _with_cookie(call, opened, body: dict) -> web.Response:
    response = json_response(body)
    response.set_cookie(COOKIE, opened.id, path="/console", httponly=True, samesite="Strict",
                        secure=call.request.secure)
    return response
