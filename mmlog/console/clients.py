"""A console session's Kafka clients (mmlog.client Admin, Consumer, Producer), made when first used and
closed with the session, connected to this broker's own listener as the session's user.

Which listener (`Target.of`): with SASL listeners, the first of them, logging in with the user's password
(PLAIN when the listener enables it, else the SCRAM mechanism it enables: PLAIN checks the same SCRAM
credentials); else a PLAINTEXT listener, or an SSL one trusting the broker's truststore and presenting no
certificate: the anonymous principal, as a browser would be on the Kafka API.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from mmlog.client.admin import Admin
from mmlog.client.consumer import Consumer
from mmlog.client.producer import Producer
from mmlog.security import tls

TIMEOUT_S = 10.0  # a page waits at most this long for the cluster
CLIENT_ID = "mmlog-console"


@dataclass(frozen=True)
class Target:
    """Where the console's clients connect and how, less the user's credentials."""

    bootstrap: str
    protocol: str
    mechanism: str = "PLAIN"
    options: dict = field(default_factory=dict)  # TLS: ssl_context
    cafile: str | None = None  # the broker's truststore: what an https schema registry is checked against

    @classmethod
    def of(cls, config) -> "Target":
        sasl = [lst for lst in config.listeners if lst.sasl]
        chosen = sasl[0] if sasl else next((lst for lst in config.listeners if not lst.tls), config.listeners[0])
        host = "127.0.0.1" if chosen.host in ("", "0.0.0.0") else "::1" if chosen.host == "::" else chosen.host
        bootstrap = f"[{host}]:{chosen.port}" if ":" in host else f"{host}:{chosen.port}"
        options = {}
        if chosen.tls:
            options["ssl_context"] = tls.client_context(
                config["ssl.truststore.location"] or None, check_hostname=False,
                protocols=config["ssl.enabled.protocols"], ciphers=config["ssl.cipher.suites"])
        enabled = [m.strip() for m in config.for_listener(chosen.name, "sasl.enabled.mechanisms").split(",")]
        mechanism = "PLAIN" if "PLAIN" in enabled else next((m for m in enabled if m.startswith("SCRAM")), "PLAIN")
        return cls(bootstrap, chosen.protocol, mechanism, options, config["ssl.truststore.location"] or None)

    def security(self, user: str | None, password: str | None) -> dict:
        """mmlog.client's security options for this user."""
        options = {"security_protocol": self.protocol, **self.options}
        if self.protocol.startswith("SASL_"):
            options.update(sasl_mechanism=self.mechanism, sasl_plain_username=user or "",
                           sasl_plain_password=password or "")
        return options


class Clients:
    """One session's clients, made on first use; `close` ends them all."""

    def __init__(self, target: Target, user: str | None, password: str | None, registry_urls=lambda: ()) -> None:
        self.target = target
        self._security = target.security(user, password)  # the password stays here, in the server's memory
        self._user, self._password = user, password  # for the schema registry's basic authentication
        self._registry_urls = registry_urls
        self._registry = None
        self._admin: Admin | None = None
        self._consumer: Consumer | None = None
        self._producer: Producer | None = None
        self._lock = threading.Lock()

    def admin(self) -> Admin:
        with self._lock:
            if self._admin is None:
                self._admin = Admin(self.target.bootstrap, client_id=CLIENT_ID, timeout=TIMEOUT_S, **self._security)
            return self._admin

    def consumer(self) -> Consumer:
        """A consumer without a group (browsing assigns partitions and seeks), reading committed data."""
        with self._lock:
            if self._consumer is None:
                self._consumer = Consumer(self.target.bootstrap, client_id=CLIENT_ID, enable_auto_commit=False,
                                          request_timeout_ms=int(TIMEOUT_S * 1000), fetch_max_wait_ms=100,
                                          max_partition_fetch_bytes=256 * 1024, **self._security)
            return self._consumer

    def producer(self) -> Producer:
        with self._lock:
            if self._producer is None:
                self._producer = Producer(self.target.bootstrap, client_id=CLIENT_ID, acks="all", linger_ms=0,
                                          max_block_ms=TIMEOUT_S * 1000,
                                          request_timeout_ms=TIMEOUT_S * 1000,
                                          delivery_timeout_ms=TIMEOUT_S * 1000 * 2, **self._security)
            return self._producer

    def registry(self):
        """A decoder by schema id, asking the schema registry (this broker's, else a peer's) as the user;
        None when no broker of the cluster serves one."""
        with self._lock:
            if self._registry is None:
                urls = self._registry_urls()
                if not urls:
                    return None
                from mmlog.client.serde import SchemaRegistry
                from mmlog.console.decoding import RegistryDecoder

                self._registry = RegistryDecoder(SchemaRegistry(
                    urls[0], username=self._user, password=self._password, timeout=TIMEOUT_S,
                    ssl_cafile=self.target.cafile))
            return self._registry

    def registry_client(self):
        """The schema registry's REST client as the user (this broker's registry, else a peer's); None when
        no broker of the cluster serves one."""
        decoder = self.registry()
        return None if decoder is None else decoder.registry

    def close(self) -> None:
        with self._lock:
            made, self._admin, self._consumer, self._producer, self._registry = (
                [c for c in (self._admin, self._consumer, self._producer, self._registry) if c is not None],
                None, None, None, None)
        for client in made:
            try:
                client.close(2.0) if isinstance(client, Producer) else client.close()
            except Exception:  # noqa: BLE001 - a client that fails to close is gone anyway
                pass
