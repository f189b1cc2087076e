"""A client of a schema registry's REST API (mmlog's own, or Confluent's: the same paths and bodies).

`SchemaRegistry` keeps one persistent HTTP/1.1 connection per thread (http.client), answers the
lookups a serializer repeats from caches (an id's schema never changes; nor does the id a subject
gives a schema), and turns an error body `{"error_code", "message"}` into a `RegistryError` carrying
both. Several URLs may be given: a connection error moves on to the next, as Confluent's client does.
"""

from __future__ import annotations

import base64
import http.client
import json
import ssl
import threading
import urllib.parse
from dataclasses import dataclass, field

from mmlog.security import tls

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"


class RegistryError(Exception):
    """An error the registry answered: the HTTP status, Confluent's error code and its message."""

    def __init__(self, status: int, error_code: int, message: str) -> None:
        super().__init__(f"{error_code}: {message}")
        self.status = status
        self.error_code = error_code
        self.message = message


@dataclass(frozen=True)
class Reference:
    """A schema this one names: `name` as the schema refers to it, found under `subject` at `version`."""

    name: str
    subject: str
    version: int

    def as_json(self) -> dict:
        return {"name": self.name, "subject": self.subject, "version": self.version}


@dataclass(frozen=True)
class Schema:
    """A schema as the registry keeps it: its text, its type (AVRO, JSON or PROTOBUF), its references."""

    text: str
    schema_type: str = "AVRO"
    references: tuple[Reference, ...] = ()

    def body(self) -> dict:
        out: dict = {"schema": self.text}
        if self.schema_type != "AVRO":
            out["schemaType"] = self.schema_type
        if self.references:
            out["references"] = [r.as_json() for r in self.references]
        return out

    @classmethod
    def from_json(cls, doc: dict) -> "Schema":
        refs = tuple(Reference(r["name"], r["subject"], int(r["version"])) for r in doc.get("references") or ())
        return cls(doc["schema"], doc.get("schemaType", "AVRO"), refs)


@dataclass(frozen=True)
class RegisteredSchema:
    """A subject's version: its global id, its version number within the subject, and the schema."""

    id: int
    subject: str
    version: int
    schema: Schema


@dataclass
class _Caches:
    by_id: dict[int, Schema] = field(default_factory=dict)
    ids: dict[tuple[str, Schema], int] = field(default_factory=dict)


class SchemaRegistry:
    """`SchemaRegistry("http://127.0.0.1:8081")`, or several comma-separated URLs; basic auth and TLS optional."""

    def __init__(self, url: str, *, username: str | None = None, password: str | None = None,
                 ssl_cafile: str | None = None, ssl_certfile: str | None = None, ssl_keyfile: str | None = None,
                 timeout: float = 10.0) -> None:
        self.urls = [urllib.parse.urlsplit(u.strip()) for u in url.split(",") if u.strip()]
        if not self.urls or any(u.scheme not in ("http", "https") or not u.hostname for u in self.urls):
            raise ValueError(f"schema registry URL {url!r}: want http://host:port or https://host:port")
        self.timeout = timeout
        self._auth = None
        if username is not None:
            token = base64.b64encode(f"{username}:{password or ''}".encode()).decode()
            self._auth = f"Basic {token}"
        self._context: ssl.SSLContext | None = None
        if any(u.scheme == "https" for u in self.urls):
            self._context = tls.client_context(ssl_cafile, ssl_certfile, ssl_keyfile)
        self._local = threading.local()
        self._caches = _Caches()

    # -- schemas by id -------------------------------------------------------------------------------

    def schema(self, schema_id: int, *, fmt: str | None = None) -> Schema:
        """The schema with this global id (cached: an id's schema never changes)."""
        key = schema_id if fmt is None else (schema_id, fmt)
        found = self._caches.by_id.get(key)
        if found is None:
            query = f"?format={urllib.parse.quote(fmt)}" if fmt else ""
            found = Schema.from_json(self.request("GET", f"/schemas/ids/{int(schema_id)}{query}"))
            self._caches.by_id[key] = found
        return found

    def types(self) -> list[str]:
        return self.request("GET", "/schemas/types")

    # -- subjects ------------------------------------------------------------------------------------

    def register(self, subject: str, schema: Schema, *, normalize: bool = False) -> int:
        """The global id of `schema` under `subject`, registering it as a new version if it is new there."""
        key = (subject, schema)
        found = self._caches.ids.get(key)
        if found is None:
            query = "?normalize=true" if normalize else ""
            found = int(self.request("POST", f"/subjects/{_quote(subject)}/versions{query}", schema.body())["id"])
            self._caches.ids[key] = found
        return found

    def lookup(self, subject: str, schema: Schema) -> RegisteredSchema:
        """The version of `subject` that holds `schema` (RegistryError 40403 when none does)."""
        return _registered(self.request("POST", f"/subjects/{_quote(subject)}", schema.body()))

    def subjects(self, *, deleted: bool = False) -> list[str]:
        return self.request("GET", "/subjects" + ("?deleted=true" if deleted else ""))

    def versions(self, subject: str, *, deleted: bool = False) -> list[int]:
        return self.request("GET", f"/subjects/{_quote(subject)}/versions" + ("?deleted=true" if deleted else ""))

    def version(self, subject: str, version: int | str = "latest") -> RegisteredSchema:
        return _registered(self.request("GET", f"/subjects/{_quote(subject)}/versions/{version}"))

    def delete_subject(self, subject: str, *, permanent: bool = False) -> list[int]:
        query = "?permanent=true" if permanent else ""
        return self.request("DELETE", f"/subjects/{_quote(subject)}{query}")

    def delete_version(self, subject: str, version: int | str, *, permanent: bool = False) -> int:
        query = "?permanent=true" if permanent else ""
        return self.request("DELETE", f"/subjects/{_quote(subject)}/versions/{version}{query}")

    def compatibility_problems(self, subject: str, schema: Schema, version: int | str = "latest") -> list[str]:
        """Why `schema` may not follow `version` of `subject` under its level (empty: it may)."""
        answer = self.request("POST", f"/compatibility/subjects/{_quote(subject)}/versions/{version}?verbose=true",
                              schema.body())
        if answer.get("is_compatible"):
            return []
        return list(answer.get("messages") or ["incompatible"])

    # -- config and mode -----------------------------------------------------------------------------

    def compatibility(self, subject: str | None = None) -> str:
        path = "/config" if subject is None else f"/config/{_quote(subject)}?defaultToGlobal=true"
        return self.request("GET", path)["compatibilityLevel"]

    def set_compatibility(self, level: str, subject: str | None = None) -> str:
        path = "/config" if subject is None else f"/config/{_quote(subject)}"
        return self.request("PUT", path, {"compatibility": level})["compatibility"]

    def mode(self, subject: str | None = None) -> str:
        return self.request("GET", "/mode" if subject is None else f"/mode/{_quote(subject)}")["mode"]

    def set_mode(self, mode: str, subject: str | None = None) -> str:
        return self.request("PUT", "/mode" if subject is None else f"/mode/{_quote(subject)}", {"mode": mode})["mode"]

    # -- the HTTP exchange ---------------------------------------------------------------------------

    def request(self, method: str, path: str, body: dict | None = None):
        """One request; the decoded JSON answer, or RegistryError; the next URL on a connection error."""
        data = None if body is None else json.dumps(body).encode()
        headers = {"Accept": f"{CONTENT_TYPE}, application/json"}
        if data is not None:
            headers["Content-Type"] = CONTENT_TYPE
        if self._auth:
            headers["Authorization"] = self._auth
        last: Exception | None = None
        for index, url in enumerate(self.urls):
            conn = self._connection(index, url)
            try:
                conn.request(method, url.path.rstrip("/") + path, body=data, headers=headers)
                response = conn.getresponse()
                payload = response.read()
            except (OSError, http.client.HTTPException) as exc:
                conn.close()
                self._connections().pop(index, None)
                last = exc
                continue
            return _answer(response.status, payload)
        raise ConnectionError(f"schema registry unreachable at {', '.join(u.geturl() for u in self.urls)}: {last}")

    def close(self) -> None:
        for conn in self._connections().values():
            conn.close()
        self._connections().clear()

    def __enter__(self) -> "SchemaRegistry":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _connections(self) -> dict:
        conns = getattr(self._local, "conns", None)
        if conns is None:
            conns = self._local.conns = {}
        return conns

    def _connection(self, index: int, url) -> http.client.HTTPConnection:
        conns = self._connections()
        conn = conns.get(index)
        if conn is None:
            if url.scheme == "https":
                conn = http.client.HTTPSConnection(url.hostname, url.port or 443, timeout=self.timeout,
                                                   context=self._context)
            else:
                conn = http.client.HTTPConnection(url.hostname, url.port or 80, timeout=self.timeout)
            conns[index] = conn
        return conn


def _quote(subject: str) -> str:
    return urllib.parse.quote(subject, safe="")


def _registered(doc: dict) -> RegisteredSchema:
    return RegisteredSchema(int(doc["id"]), doc["subject"], int(doc["version"]), Schema.from_json(doc))


def _answer(status: int, payload: bytes):
    try:
        doc = json.loads(payload) if payload else None
    except ValueError:
        doc = None
    if 200 <= status < 300:
        return doc
    if isinstance(doc, dict) and "error_code" in doc:
        raise RegistryError(status, int(doc["error_code"]), str(doc.get("message", "")))
    raise RegistryError(status, status, payload[:200].decode(errors="replace") or http.client.responses.get(status, ""))
