"""Booting and stopping a broker: the main process from `mmlog broker` to exit.

Boot order: logging; kernels and codecs compiled (so forked processors inherit
them); the store (the data dir's metadata, or the ZooKeeper session and cluster
id); every partition opened and, after an unclean stop, recovered; in cluster mode
the catalogue synced with ZooKeeper's topics; listeners bound; the store started
(registration, controller candidacy, the first cluster view) and the control
thread; the processors. Only then is the broker ready (one log line, and READY=1
to systemd under Type=notify).

Stop order (SIGTERM/SIGINT): stop accepting; processors answer what they have
received and exit; the control thread stops; every partition is flushed and marked
clean, so the next start skips recovery; the ZooKeeper session ends (so the
broker leaves the cluster at once rather than after its session timeout); exit 0.

A failure inside the main process that no net contained (an essential thread that
died, a control thread that stopped turning: `liveness.py`) takes the same path
with exit code 1, without marking the logs clean, so that systemd restarts the
broker and the next start checks its logs.
"""

from __future__ import annotations

import gc
import logging
import os
import resource
import sys
import threading
import time

from mmlog.ipc.cluster_view import Endpoint
from mmlog.acceptor.control import ControlPlane
from mmlog.cluster.embedded_store import EmbeddedStore
from mmlog.cluster.store import MetadataStore
from mmlog.metrics.endpoint import MetricsSources, Scraper
from mmlog.acceptor.parent_watch import end_now, watch_parent
from mmlog.acceptor.supervisor import Supervisor
from mmlog.acceptor.systemd import notify
from mmlog.acceptor.liveness import Liveness
from mmlog.config.broker import BrokerConfig, parse_metrics_listen
from mmlog.config.settings import ConfigError
from mmlog.security import tls
from mmlog.system import listening, perf_map
from mmlog.log import flush_timing, kernels
from mmlog.log.cleaner import kernels as compaction_kernels
from mmlog.log.manager import LogManager
from mmlog.log.open_partitions import open_partition_budget
from mmlog.processors.compiled import loop as compiled_loop
from mmlog.protocol import precompile

log = logging.getLogger("mmlog.broker")


def setup_logging(level: int = logging.INFO) -> None:
    """One line per event on stderr, in a key=value form journald keeps as is."""
    logging.basicConfig(
        level=level,
        stream=sys.stderr,
        format="%(asctime)s level=%(levelname)s pid=%(process)d logger=%(name)s msg=%(message)s",
    )


def raise_descriptor_limit() -> tuple[int, int]:
    """Raise the soft RLIMIT_NOFILE to the hard one (processors inherit it); (before, after)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft >= hard:
        return soft, soft
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return soft, hard


def check_tls(config: BrokerConfig) -> None:
    """Load the TLS files once before anything starts: a bad keystore stops the broker with its name,
    instead of every processor failing to boot. Says whether kernel TLS can serve fetches."""
    secured = [lst for lst in config.listeners if lst.tls]
    for lst in secured:
        try:
            tls.server_context(config, lst)
        except tls.TlsConfigError as exc:
            raise ConfigError(f"listener {lst.name}: ssl.keystore.location / ssl.truststore.location: {exc}") from exc
    https = [name for name, addresses in (("schema.registry.listeners", config.registry_listeners),
                                          ("console.listeners", config.console_listeners))
             if any(scheme == "https" for scheme, _, _ in addresses)]
    if https:
        from mmlog.web.server import tls_context

        try:
            tls_context(config)
        except tls.TlsConfigError as exc:
            raise ConfigError(f"{https[0]}: ssl.keystore.location / ssl.truststore.location: {exc}") from exc
    if secured:
        log.info("TLS listeners: kernel TLS %s", "may be used (OpenSSL 3, the tls module loaded)"
                 if os.path.isdir("/sys/module/tls") else "unavailable (no tls kernel module): fetches over TLS "
                 "are read and encrypted by the processor")


FAILED_STOP_S = 15.0  # how long the stop after a failure may take before the process just ends


def exit_within(seconds: float) -> None:
    """End the process with exit code 1 if it is still running after `seconds` (the stop after a failure:
    a stalled control thread may hold a lock the stop waits for); processors are killed first."""

    def deadline() -> None:
        time.sleep(seconds)
        log.critical("the stop after a failure did not finish in %.0f s: exiting now", seconds)
        end_now()

    threading.Thread(target=deadline, name="exit-deadline", daemon=True).start()


def run_broker(config: BrokerConfig, exit_with_parent: bool = False) -> int:
    """Run a broker until it is told to stop; return the process exit code."""
    if exit_with_parent:
        watch_parent()
    check_tls(config)
    before, after = raise_descriptor_limit()
    log.info("descriptors: limit %d per process (soft limit was %d; systemd's LimitNOFILE sets it)", after, before)
    if perf_map.enabled():
        perf_map.install()  # before the kernels load: their object code is kept for the map
    kernels.warm()
    if config["compiled.request.path.enable"]:
        compiled_loop.warm()  # the compiled request path (its codec and append too), inherited by the processors
    if config["log.cleaner.enable"]:
        compaction_kernels.warm()  # the cleaner process inherits them compiled
    if config["schema.registry.listeners"] or config["console.listeners"]:
        from mmlog.registry.client_kernels import warm_clients
        warm_clients()  # their producers and consumers run in this process: compiled now, not in a request
    precompile()
    if perf_map.enabled():
        log.info("perf map of the compiled kernels: %s", perf_map.write())
    store = open_store(config)
    try:
        return _run(config, store)
    finally:
        store.close()


def open_store(config: BrokerConfig) -> MetadataStore:
    """The standalone store in the data dir, or the ZooKeeper one when zookeeper.connect is set."""
    if not config["zookeeper.connect"]:
        return EmbeddedStore(config.log_dirs[0], config["broker.id"], config["cluster.id"],
                             flush_messages=config["log.flush.interval.messages"])
    from mmlog.cluster.zookeeper_store import ZooKeeperStore  # kazoo only in cluster mode

    return ZooKeeperStore(config, config.log_dirs[0])


def web_services(config: BrokerConfig) -> dict[str, list[tuple[str, str, int]]]:
    """The HTTP services this broker serves, by setting: their (scheme, host, port) addresses."""
    services = {}
    metrics = parse_metrics_listen(config["metrics.listen"])
    if metrics is not None:
        services["metrics.listen"] = [("http", *metrics)]
    if config.registry_listeners:
        services["schema.registry.listeners"] = config.registry_listeners
    if config.console_listeners:
        services["console.listeners"] = config.console_listeners
    return services


def bind_web(config: BrokerConfig) -> tuple[BrokerConfig, dict]:
    """The HTTP listeners (metrics.listen, schema.registry.listeners, console.listeners), bound now like
    the Kafka ones; the config with their bound ports, and each service's listeners."""
    services = web_services(config)
    if not services:
        return config, {}
    from mmlog.web import server as web  # aiohttp: only for a broker that serves HTTP

    bound = web.bind_services(services)
    ports = {name: [lst.sock.getsockname()[1] for lst in listeners] for name, listeners in bound.items()}
    return config.with_http_ports(ports), bound


def start_web(config: BrokerConfig, bound: dict, supervisor: Supervisor, control: ControlPlane):
    """The broker's HTTP server with its services mounted (None without HTTP listeners)."""
    if not bound:
        return None
    from mmlog.web import server as web

    listeners = list({id(lst): lst for group in bound.values() for lst in group}.values())
    context = web.tls_context(config) if any(lst.scheme == "https" for lst in listeners) else None
    server = web.WebServer(listeners, context)
    supervisor.close_in_children.extend(server.sockets)
    if "metrics.listen" in bound:
        from mmlog.web import metrics

        metrics.mount(server, Scraper(MetricsSources(supervisor.metrics, supervisor.board, control),
                                      control.topic_lock), bound["metrics.listen"])
        flush_timing.observer = supervisor.main_metrics.flushed
    registry = None
    if "schema.registry.listeners" in bound:
        from mmlog.registry.api import mount

        registry = mount(server, config, bound["schema.registry.listeners"])
    if "console.listeners" in bound:
        from mmlog.console.app import mount as mount_console

        mount_console(server, config, bound["console.listeners"], registry=registry,
                      totals=supervisor.metrics.totals if supervisor.metrics is not None else None)
    server.start()
    control.liveness.thread("web", server.thread)
    if registry is not None:
        control.liveness.thread("registry-reader", registry.reader.thread)
    _log_services(config, bound)
    return server


def _log_services(config: BrokerConfig, bound: dict) -> None:
    if "metrics.listen" in bound:
        log.info("metrics listening=%s:%d path=/metrics", *bound["metrics.listen"][0].sock.getsockname()[:2])
    if "schema.registry.listeners" in bound:
        log.info("schema registry listeners=%s", ",".join(lst.url for lst in bound["schema.registry.listeners"]))
    if "console.listeners" in bound:
        log.info("console listeners=%s", ",".join(f"{lst.url}/console/" for lst in bound["console.listeners"]))


def stop_web(server, control: ControlPlane) -> None:
    if server is not None:
        control.liveness.forget("web")
        control.liveness.forget("registry-reader")
        server.stop()


def _run(config: BrokerConfig, store: MetadataStore) -> int:
    max_open = open_partition_budget(config["log.max.open.partitions"])
    manager = LogManager(config.log_dirs, config.log_config(), broker_id=config["broker.id"], max_open=max_open)
    for note in manager.load():
        log.warning("recovered: %s", note)
    store.check_catalogue(manager)
    log.info("loaded partitions=%d recovered=%d open=%d max_open=%d", manager.loaded, manager.recovered,
             manager.open_count(), max_open)
    if manager.loaded > max_open:
        log.warning("%d partitions hosted, but each process keeps at most %d open (log.max.open.partitions; by "
                    "default from the descriptor limit and vm.max_map_count): clients spread over more than that "
                    "make processors close and reopen partitions in turn (mmlog_log_partition_evictions_total); "
                    "raise LimitNOFILE and vm.max_map_count", manager.loaded, max_open)
    sockets = [listening.bind(lst.host, lst.port) for lst in config.listeners]
    config = config.with_ports([sock.getsockname()[1] for sock in sockets])
    try:
        config, http_sockets = bind_web(config)
    except BaseException:
        for sock in sockets:
            sock.close()
        raise
    liveness = Liveness(config["broker.stall.timeout.ms"] / 1000)
    threading.excepthook = liveness.excepthook  # any thread of ours that dies stops the broker (liveness.py)
    control = ControlPlane(config, manager, store, liveness)
    supervisor = Supervisor(config, sockets, control, store.cluster_id)
    manager.on_evict = lambda n: supervisor.main_metrics.add("partition_evictions", n)
    control.set_wake(lambda: supervisor.board.notify_others(-1))
    # What exists now (numpy, numba and the loaded partitions: a few hundred thousand objects) lives
    # as long as the broker: out of the collector's sight, a full collection no longer scans it (they
    # took 30-250 ms each in the main process while topics were created), and forked processors share
    # its pages untouched. Only what exists now: freezing later would keep cyclic garbage forever.
    gc.freeze()
    control.start(Endpoint.of(config))
    http = start_web(config, http_sockets, supervisor, control)

    def ready() -> None:
        first = config.listeners[0]
        log.info(
            "ready listening=%s:%d advertised=%s:%d broker.id=%d cluster.id=%s processors=%d log.dirs=%s listeners=%s",
            first.host, first.port, *config.advertised, config["broker.id"], store.cluster_id,
            config["num.network.threads"], ",".join(map(str, config.log_dirs)),
            ",".join(lst.url() for lst in config.listeners),
        )
        notify("READY=1")

    code = 1
    try:
        code = supervisor.run(on_ready=ready)
    except BaseException as exc:  # noqa: BLE001 - the main thread's own loop died: stop, and say why in a line
        log.critical("stopping: the supervisor's loop died: %s: %s", exc.__class__.__name__, exc, exc_info=exc)
    finally:
        if code != 0:
            exit_within(FAILED_STOP_S)  # a stalled thread may hold what the steps below need
        notify("STOPPING=1")
        stop_web(http, control)
        if code == 0:
            control.controlled_shutdown(config["controlled.shutdown.timeout.ms"] / 1000)
        control.begin_shutdown()  # parked JoinGroup/SyncGroup answered, or processors would wait for them
        supervisor.stop_workers()
        control.stop()
        manager.close(clean=code == 0)  # after a failure the next start checks the logs (recovery)
        log.info("stopped exit=%d", code)
    return code
