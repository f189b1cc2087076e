"""The schema registry of one broker: its view, the reader keeping it, the writer, and where writes go.

Every broker serves reads from its own view. A change is made by the registry of the broker leading
`_schemas`-0 (as Confluent's followers forward to their primary): any other forwards the request over
HTTP to that broker's registry URL, published with its broker registration (ipc/cluster_view.py), and
answers once its own view has applied the record the leader wrote, so a client reads its own write from
whichever broker it asks next.

mmlog.registry is a client of its own cluster (mmlog.client), as Confluent's registry is of Kafka: it
connects to this broker's inter-broker listener with the broker's own credentials.
"""

from __future__ import annotations

import logging

from mmlog import schemas
from mmlog.ipc.cluster_view import ClusterView, Endpoint, ViewReader
from mmlog.registry import errors
from mmlog.registry.reader import Reader
from mmlog.registry.view import RegistryView
from mmlog.registry.writer import Writer
from mmlog.security.client import inter_broker
from mmlog.web.responses import HttpError

log = logging.getLogger("mmlog.registry")

TOPIC = "_schemas"


def client_options(config) -> dict:
    """mmlog.client's security options for this broker's inter-broker listener."""
    security = inter_broker(config)
    options: dict = {"security_protocol": security.protocol}
    if security.sasl:
        options.update(sasl_mechanism=security.mechanism, sasl_plain_username=security.username,
                       sasl_plain_password=security.password)
    if security.tls:
        options["ssl_context"] = security.context
    return options


def identify(schema_type: str, text: str, resolved) -> str:
    return schemas.parse(schema_type, text, resolved).identity


class RegistryService:
    def __init__(self, config) -> None:
        self.config = config
        self.broker_id = config["broker.id"]
        listener = config.inter_broker_listener
        host = f"[{listener.host}]" if ":" in listener.host else listener.host
        bootstrap = f"{host}:{listener.port}"
        options = client_options(config)
        self.timeout = config["schema.registry.timeout.ms"] / 1000
        self.view = RegistryView(identify)
        self.reader = Reader(self.view, bootstrap, options, TOPIC)
        self.writer = Writer(self.view, bootstrap, options, TOPIC, self.timeout)
        self.cluster = ViewReader(config.log_dirs[0], ClusterView.standalone(Endpoint.of(config)))

    def start(self) -> None:
        self.reader.start()

    def stop(self) -> None:
        self.reader.stop()
        self.writer.close()

    # ------------------------------------------------------------ where a change goes

    def leader_url(self) -> str | None:
        """The registry URL of the broker that makes changes; None when it is this one."""
        with self.writer.lock:
            try:
                self.writer.ensure_topic()
                leader = self.writer.leader()
            except Exception as exc:  # noqa: BLE001 - the cluster unreachable or moving: the client may retry
                self.writer.reset()
                raise errors.forwarding(f"no leader for {TOPIC}: {exc}") from None
        if leader == self.broker_id:
            return None
        endpoint = self.cluster.current().brokers.get(leader)
        urls = sorted(endpoint.registry if endpoint else (), key=lambda u: not u.startswith("http:"))
        if not urls:
            raise errors.forwarding(f"broker {leader} leads {TOPIC} but publishes no schema registry URL")
        return urls[0]

    def change(self, decide) -> tuple[object, int]:
        """Run decide(view, writer) -> Change on a caught-up view, append its records, wait until this
        view applied them; (the answer, the offset after the change)."""
        with self.writer.lock:
            try:
                self.writer.ensure_topic()
                self.writer.catch_up()
                with self.view.changed:
                    change = decide(self.view, self.writer)
                if not change.records:
                    return change.answer, self.view.applied
                offset = self.writer.append(change.records)
            except HttpError:
                raise
            except Exception as exc:  # noqa: BLE001 - the store failed: nothing answered as done
                self.writer.reset()
                log.info("registry write failed: %s: %s", exc.__class__.__name__, exc)
                raise errors.store_error(f"{exc.__class__.__name__}: {exc}") from None
        self.wait_applied(offset)
        if change.check is not None:
            with self.view.changed:
                change.check(self.view)
        return change.answer, offset

    def wait_applied(self, offset: int) -> None:
        if not self.view.wait_applied(offset, self.timeout):
            raise errors.timeout(f"this broker's view did not reach offset {offset} of {TOPIC}")
