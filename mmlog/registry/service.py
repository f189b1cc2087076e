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
import time

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
RETRY_S = 0.2  # between attempts at a change the cluster failed


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
        if not self.config["zookeeper.connect"]:
            return None  # a broker alone leads every partition
        leader = self._retried(self._leader, lambda exc: errors.forwarding(f"no leader for {TOPIC}: {exc}"))
        if leader == self.broker_id:
            return None
        endpoint = self.cluster.current().brokers.get(leader)
        urls = sorted(endpoint.registry if endpoint else (), key=lambda u: not u.startswith("http:"))
        if not urls:
            raise errors.forwarding(f"broker {leader} leads {TOPIC} but publishes no schema registry URL")
        return urls[0]

    def _leader(self) -> int:
        with self.writer.lock:
            self.writer.ensure_topic()
            leader = self.writer.leader()
        if leader < 0:
            raise LookupError(f"{TOPIC}-0 has no leader yet")
        return leader

    def _retried(self, attempt, failure):
        """attempt() again after a failure of the cluster's (a leader moving, a topic just made) until the
        registry's timeout; then failure(the last exception) is raised. HttpErrors are answers: not retried."""
        deadline = time.monotonic() + self.timeout
        while True:
            try:
                return attempt()
            except HttpError:
                raise
            except Exception as exc:  # noqa: BLE001 - retried, then answered as the registry's error
                with self.writer.lock:
                    self.writer.reset()
                log.info("registry: %s: %s", exc.__class__.__name__, exc)
                if time.monotonic() + RETRY_S > deadline:
                    raise failure(exc) from None
                time.sleep(RETRY_S)

    def change(self, decide) -> tuple[object, int]:
        """Run decide(view, writer) -> Change on a caught-up view, append its records, wait until this
        view applied them; (the answer, the offset after the change). A failed append is decided again
        from the caught-up view: a record that landed after all is found there, not written twice."""
        change, offset = self._retried(lambda: self._change(decide), lambda exc: errors.store_error(
            f"{exc.__class__.__name__}: {exc}"))
        self.wait_applied(offset)
        if change.check is not None:
            with self.view.changed:
                change.check(self.view)
        return change.answer, offset

    def _change(self, decide):
        with self.writer.lock:
            self.writer.ensure_topic()
            self.writer.catch_up()
            with self.view.changed:
                change = decide(self.view, self.writer)
            if not change.records:
                return change, self.view.applied
            return change, self.writer.append(change.records)

    def wait_applied(self, offset: int) -> None:
        if not self.view.wait_applied(offset, self.timeout):
            raise errors.timeout(f"this broker's view did not reach offset {offset} of {TOPIC}")
