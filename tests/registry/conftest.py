"""A broker serving the schema registry on a loopback port, shared by the tests of a module, and a small
HTTP caller that shows the REST API's status codes and bodies as they are."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest

from mmlog.testing import EmbeddedBroker

REGISTRY_ON = {"schema.registry.listeners": "http://127.0.0.1:0", "group.initial.rebalance.delay.ms": 0}
CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with EmbeddedBroker(tmp_path_factory.mktemp("registry"), processors=1, config=REGISTRY_ON) as b:
        yield b


@pytest.fixture(scope="module")
def url(broker) -> str:
    return broker.registry_urls[0]


def call(url: str, method: str, path: str, body=None, headers: dict | None = None, raw: bytes | None = None,
         context=None) -> tuple[int, object]:
    """(status, the JSON body answered) of one request."""
    data = raw if raw is not None else None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url + path, method=method, data=data,
                                     headers={"Content-Type": CONTENT_TYPE, **(headers or {})})
    try:
        with urllib.request.urlopen(request, timeout=30, context=context) as reply:
            status, text = reply.status, reply.read()
    except urllib.error.HTTPError as exc:
        status, text = exc.code, exc.read()
    try:
        return status, json.loads(text)
    except ValueError:
        return status, text.decode()


def compact(doc) -> str:
    """A schema's JSON as the registry stores an Avro schema: compact (so what is sent reads back equal)."""
    return json.dumps(doc, separators=(",", ":"))
