"""What a request handler may use of its processor: the `HandlerContext` protocol.

Dispatch and the handlers under `handlers/` get the processor as `ctx` and use these members
of it, nothing else (a test scans them for any other). `worker.Processor` implements it in a
broker; `mmlog.testing.LocalHandlerContext` implements it in one process, without a loop, for
tests and benchmarks.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Protocol

if TYPE_CHECKING:
    from mmlog.config.broker import BrokerConfig
    from mmlog.ipc.cluster_view import ViewReader
    from mmlog.ipc.control_channel import ControlClient
    from mmlog.ipc.metrics_block import Region
    from mmlog.log.manager import LogManager
    from mmlog.processors.connection import Connection
    from mmlog.processors.metadata_cache import TopicEntries
    from mmlog.processors.purgatory import Purgatory
    from mmlog.processors.quotas import ClientQuotas
    from mmlog.replication.leader_throttle import LeaderThrottle
    from mmlog.security.authorizer import Authorizer
    from mmlog.security.credentials import CredentialReader


class HandlerContext(Protocol):
    """A processor as its request handlers see it."""

    # ------------------------------------------------------------ the broker
    config: BrokerConfig
    """The broker's settings (the auto-creation switches, group timeouts, broker configs)."""
    broker_id: int
    """This broker's id (`broker.id`)."""
    cluster_id: str
    """The cluster's id, as Metadata and DescribeCluster answer it."""
    advertised_versions: list[tuple[int, int, int]]
    """(api_key, min, max) of the APIs served: the ApiVersions answer."""

    # ------------------------------------------------------------ what it serves from
    manager: LogManager
    """The partitions, opened in this process, and the topic catalogue."""
    views: ViewReader
    """The cluster view (live brokers, coordinators), re-read when the main process replaces it."""
    metadata_entries: TopicEntries
    """Metadata's encoded topic entries of unchanged topics."""
    control: ControlClient
    """The channel to the control plane: what changes cluster state is forwarded on it."""
    purgatory: Purgatory
    """Requests parked until data comes or their time runs out (long-poll fetches, acks=all produces)."""
    metrics: Region
    """This processor's region of the metrics block (the null region: metrics off)."""

    # ------------------------------------------------------------ limits and security
    quotas: ClientQuotas
    """Client quotas: the throttle time of a request, a fetch's byte cap."""
    leader_throttle: LeaderThrottle
    """The leader's replication throttle on followers' fetches."""
    authorizer: Authorizer
    """ACL checks of a connection's principal (off: everything allowed)."""
    credentials: CredentialReader
    """SCRAM users, re-read when the store file changed."""
    sasl_mechanisms: dict[str, list[str]]
    """The SASL mechanisms enabled on each listener, by listener name."""
    reauth_ms: int
    """`connections.max.reauth.ms`: how long an authenticated SASL session lasts (0: for ever)."""
    auth_failure_delay_s: float
    """How long the answer to a failed authentication is held back."""

    # ------------------------------------------------------------ the loop
    def wants_write(self, conn: Connection) -> None:
        """A response was queued on conn: write it."""

    def throttle(self, conn: Connection, ms: int) -> None:
        """Mute conn for ms after its response (a client quota's throttle time)."""

    def appended(self) -> None:
        """Records were appended (or a high watermark moved): wake the parked requests that wait for them."""

    def later(self, delay_s: float, fn: Callable[[], None]) -> None:
        """Run fn after delay_s seconds, in the loop."""

    def offload(self, fn: Callable[[], Any], done: Callable[[Any, BaseException | None], None]) -> None:
        """Run fn() off the loop; done(result, None) or done(None, exception) then runs in the loop."""


def members() -> frozenset[str]:
    """The names a handler may use of its context: the protocol's attributes and methods."""
    methods = {name for name, value in vars(HandlerContext).items() if callable(value) and not name.startswith("_")}
    return frozenset(HandlerContext.__annotations__) | methods
